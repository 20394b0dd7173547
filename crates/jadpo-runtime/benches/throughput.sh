#!/usr/bin/env bash
# Outbox throughput with the fake driver, on the release build.
#
#   crates/jadpo-runtime/benches/throughput.sh [EVENTS] [PROCESSES]   (default 100000 1)
#
# 1. emit EVENTS events through `jadpoc emit --ndjson` (one delivery each) and time it;
# 2. PROCESSES `jadpoc run --fake c=ok --log-format json` on the one store file until
#    every delivery is `succeeded` (with more than one, each delivery's outcome must be
#    in exactly one process's log: none run twice);
#    deliveries/s is measured from the first to the last outcome in the log (every
#    outcome committed: WAL, synchronous=FULL, one transaction per batch), and, as
#    a user waits, from starting `run` to `jadpoc status` showing every delivery
#    succeeded (the log is looked at every 0.05 s, read on from where the last
#    look stopped, by watch_outcomes.py, and status asked once when it holds
#    every outcome: asking status over and over, or reading the whole log at
#    every look, would take the machine's time from the run it measures);
# 3. the run's peak RSS (from /proc) while it works through the queue (the first
#    process's), and the store's write-ahead log's size at the end.
# The lines `deliveries/s: N (EVENTS events)` (first to last outcome) and
# `waited/s: N (EVENTS events, start to status)` repeat step 2's figures alone,
# for scripts to read.
#
# `JADPOC=PATH` runs that binary instead of building one (to compare builds).
set -euo pipefail
EVENTS=${1:-100000}
PROCESSES=${2:-1}
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
PIDS=()
for n in $(seq "$PROCESSES"); do
  "$J" run p.jadpo --fake c=ok --log-format json 2>"run.$n.log" &
  PIDS+=($!)
done
WATCH=()
for n in $(seq "$PROCESSES"); do
  WATCH+=("${PIDS[$((n - 1))]}" "run.$n.log")
done
PEAK=$(python3 "$ROOT/crates/jadpo-runtime/benches/watch_outcomes.py" "$EVENTS" "${WATCH[@]}")
# The log says every outcome is written: `status` is asked once, as a user would.
SEEN=$("$J" status --format json | python3 -c 'import json, sys; print(json.load(sys.stdin)["states"].get("succeeded", 0))')
E=$(date +%s.%N)
[ "$SEEN" -ge "$EVENTS" ] || { echo "status shows $SEEN succeeded of $EVENTS" >&2; exit 1; }
echo "run: start to every delivery succeeded in status: $(echo "$E - $S" | bc) s ($(echo "$EVENTS / ($E - $S)" | bc) deliveries/s, $PROCESSES process(es))"
echo "waited/s: $(echo "$EVENTS / ($E - $S)" | bc) ($EVENTS events, start to status)"
WAL=$(stat -c %s .jadpo/outbox.db-wal 2>/dev/null || echo 0)
kill -TERM "${PIDS[@]}"
wait "${PIDS[@]}"
python3 - "$EVENTS" "$PROCESSES" <<'PY'
import glob, json, sys
from datetime import datetime
lines = [json.loads(l) for p in sorted(glob.glob("run.*.log")) for l in open(p)
         if l.startswith("{") and '"delivery.attempt"' in l]
ids = [l.get("delivery") for l in lines]
if len(set(ids)) != len(ids):
    sys.exit(f"{len(ids) - len(set(ids))} deliveries ran more than once")
f = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
ts = sorted(f(l["at"]) for l in lines)
span = ts[-1] - ts[0]
rate = len(ts) / max(span, 1e-9)
print(f"deliver: {len(ts)} outcomes in {span:.2f} s ({rate:.0f} deliveries/s)")
context = f"{sys.argv[1]} events" + (f", {sys.argv[2]} processes" if sys.argv[2] != "1" else "")
print(f"deliveries/s: {rate:.0f} ({context})")
PY
echo "write-ahead log at the end: $((WAL / 1024)) KiB"
echo "run peak RSS: $((PEAK / 1024)) MiB"
echo "store: $(du -h .jadpo/outbox.db | cut -f1)"
