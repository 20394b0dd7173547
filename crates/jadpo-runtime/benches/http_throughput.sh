#!/usr/bin/env bash
# Outbox throughput through the HTTP driver, beside the fake driver, on the release build.
#
#   crates/jadpo-runtime/benches/http_throughput.sh [EVENTS] [WORKERS...]   (default 50000; 4 16)
#
# A local provider (`examples/provider.rs --fail 0 --quiet`, HTTP/1.1 keep-alive)
# answers 200 at once. For the fake driver and then for the HTTP driver at each
# worker count: a fresh store, EVENTS events emitted, `jadpoc run` until every
# delivery is `succeeded`; deliveries/s is measured from the first to the last
# outcome in the log, as in throughput.sh. The connection's `max_in_flight:` is
# 256 (its maximum) so that the driver's limit is not what is measured; the line
# "connections" is how many TCP connections the provider accepted (keep-alive:
# at most max_in_flight, far fewer than calls). After each measurement, its figure
# on a line of its own, `deliveries/s: N (DRIVER, W workers)`, for scripts to read.
#
# `JADPOC=PATH` runs that binary instead of building one (to compare builds);
# `PROVIDER=PATH` likewise for the provider (built from this tree otherwise).
set -euo pipefail
EVENTS=${1:-50000}
IN_FLIGHT=${IN_FLIGHT:-256}
shift || true
WORKERS=("${@:-4 16}")
# shellcheck disable=SC2206
WORKERS=(${WORKERS[*]})
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
if [ -n "${JADPOC:-}" ]; then
  J=$(realpath "$JADPOC")
else
  cargo build --release -q -p jadpoc --manifest-path "$ROOT/Cargo.toml"
  J="$ROOT/target/release/jadpoc"
fi
if [ -n "${PROVIDER:-}" ]; then
  PROVIDER=$(realpath "$PROVIDER")
else
  cargo build --release -q --example provider -p jadpo-http --manifest-path "$ROOT/Cargo.toml"
  PROVIDER="$ROOT/target/release/examples/provider"
fi
WORK=$(mktemp -d)
PPID_FILE="$WORK/provider.pid"
cleanup() {
  if [ -f "$PPID_FILE" ]; then
    kill "$(cat "$PPID_FILE")" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PROVIDER" --port "$PORT" --fail 0 --quiet 2>provider.log &
echo $! > "$PPID_FILE"
write_program "http://127.0.0.1:$PORT/x" "max_in_flight: $IN_FLIGHT"
write_events "$EVENTS"

connections() {
  # Established connections from jadpoc to the provider's port right now.
  ss -tn state established "( dport = :$PORT )" 2>/dev/null | tail -n +2 | wc -l
}

# One measured run: $1 label, $2 workers, then extra `jadpoc run` arguments.
measure() {
  local label=$1 workers=$2
  shift 2
  rm -rf .jadpo run.log
  "$J" emit p.jadpo Paid --ndjson paid.ndjson 2>/dev/null
  "$J" run p.jadpo --workers "$workers" --log-format json "$@" 2>run.log &
  local pid=$! conns=0
  while true; do
    local c
    c=$(connections)
    [ "$c" -gt "$conns" ] && conns=$c
    [ "$(grep -c '"state":"succeeded"' run.log || true)" -ge "$EVENTS" ] && break
    running $pid run.log
    sleep 0.5
  done
  kill -TERM $pid
  wait $pid
  python3 - "$label" "$workers" "$conns" <<'PY'
import json, sys
from datetime import datetime
label, workers, conns = sys.argv[1], sys.argv[2], sys.argv[3]
lines = [json.loads(l) for l in open("run.log") if l.startswith("{") and '"delivery.attempt"' in l]
ts = [l["at"] for l in lines]
ok = sum(1 for l in lines if l.get("state") == "succeeded" and l.get("http_status") in (200, None))
f = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
span = f(ts[-1]) - f(ts[0])
extra = "" if label == "fake" else f", at most {conns} connections open"
rate = len(ts) / max(span, 1e-9)
print(f"{label:5} {workers:>2} workers: {len(ts)} outcomes ({ok} ok) in {span:.2f} s = {rate:,.0f} deliveries/s{extra}")
print(f"deliveries/s: {rate:.0f} ({label}, {workers} workers)")
PY
}

measure fake 4 --fake c=ok
for w in "${WORKERS[@]}"; do
  measure http "$w"
done
