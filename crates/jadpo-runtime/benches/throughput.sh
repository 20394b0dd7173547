#!/usr/bin/env bash
# Outbox throughput with the fake driver, on the release build.
#
#   crates/jadpo-runtime/benches/throughput.sh [EVENTS]   (default 100000)
#
# 1. emit EVENTS events through `jadpoc emit --ndjson` (one delivery each) and time it;
# 2. `jadpoc run --fake c=ok --log-format json` until every delivery is `succeeded`;
#    deliveries/s is measured from the first to the last outcome in the log (every
#    outcome committed: WAL, synchronous=FULL, one transaction per batch), and, as
#    a user waits, from starting `run` to `jadpoc status` showing every delivery
#    succeeded (the log is looked at every 0.05 s, and status asked once when it
#    holds every outcome: asking status over and over would take the machine's
#    time from the run it measures);
# 3. the run's peak RSS (from /proc) while it works through the queue.
# The line `deliveries/s: N (EVENTS events)` repeats step 2's figure alone, for
# scripts to read.
#
# `JADPOC=PATH` runs that binary instead of building one (to compare builds).
set -euo pipefail
EVENTS=${1:-100000}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
if [ -n "${JADPOC:-}" ]; then
  J=$(realpath "$JADPOC")
else
  cargo build --release -q -p jadpoc --manifest-path "$ROOT/Cargo.toml"
  J="$ROOT/target/release/jadpoc"
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
write_program "http://127.0.0.1:9/x"
write_events "$EVENTS"

S=$(date +%s.%N)
"$J" emit p.jadpo Paid --ndjson paid.ndjson 2>/dev/null
E=$(date +%s.%N)
echo "emit: $EVENTS events in $(echo "$E - $S" | bc) s ($(echo "$EVENTS / ($E - $S)" | bc) events/s)"

S=$(date +%s.%N)
"$J" run p.jadpo --fake c=ok --log-format json 2>run.log &
PID=$!
PEAK=0
while true; do
  RSS=$(awk '/VmHWM/ {print $2}' /proc/$PID/status 2>/dev/null || echo 0)
  [ "$RSS" -gt "$PEAK" ] && PEAK=$RSS
  DONE=$(grep -c '"state":"succeeded"' run.log || true)
  [ "$DONE" -ge "$EVENTS" ] && break
  running $PID run.log
  sleep 0.05
done
# The log says every outcome is written: `status` is asked once, as a user would.
SEEN=$("$J" status --format json | python3 -c 'import json, sys; print(json.load(sys.stdin)["states"].get("succeeded", 0))')
E=$(date +%s.%N)
[ "$SEEN" -ge "$EVENTS" ] || { echo "status shows $SEEN succeeded of $EVENTS" >&2; exit 1; }
echo "run: start to every delivery succeeded in status: $(echo "$E - $S" | bc) s ($(echo "$EVENTS / ($E - $S)" | bc) deliveries/s)"
kill -TERM $PID
wait $PID
python3 - "$EVENTS" <<'PY'
import json, sys
from datetime import datetime
ts = [json.loads(l)["at"] for l in open("run.log") if l.startswith("{") and '"delivery.attempt"' in l]
f = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
span = f(ts[-1]) - f(ts[0])
rate = len(ts) / max(span, 1e-9)
print(f"deliver: {len(ts)} outcomes in {span:.2f} s ({rate:.0f} deliveries/s)")
print(f"deliveries/s: {rate:.0f} ({sys.argv[1]} events)")
PY
echo "run peak RSS: $((PEAK / 1024)) MiB"
echo "store: $(du -h .jadpo/outbox.db | cut -f1)"
