#!/usr/bin/env bash
# Outbox throughput on the PostgreSQL store with the fake driver, on the release
# build, PostgreSQL on the same machine.
#
#   crates/jadpo-runtime/benches/pg_throughput.sh [BACKLOGS] [PROCESSES]
#     (defaults "10000 100000 1000000" and "1 2 4"; JADPO_BENCH_POSTGRES_URL names
#      the server, postgres://postgres@127.0.0.1:5432/test by default)
#
# For each backlog and number of `jadpoc run` processes, in a fresh database:
# 1. emit the backlog through `jadpoc emit --ndjson` and time it;
# 2. start the processes (`--fake c=ok`) and time from the first outcome to the
#    last in their logs, until every delivery is `succeeded`.
set -euo pipefail
BACKLOGS=${1:-"10000 100000 1000000"}
PROCESSES=${2:-"1 2 4"}
ADMIN=${JADPO_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
cargo build --release -q -p jadpoc --manifest-path "$ROOT/Cargo.toml"
J="$ROOT/target/release/jadpoc"
WORK=$(mktemp -d)
DB=jadpo_bench_$$
URL="${ADMIN%/*}/$DB"
trap 'psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1; rm -rf "$WORK"' EXIT
cd "$WORK"
write_program "http://127.0.0.1:9/x"

for N in $BACKLOGS; do
  write_events "$N"
  for P in $PROCESSES; do
    psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
    psql "$ADMIN" -qc "CREATE DATABASE $DB" >/dev/null
    S=$(date +%s.%N)
    "$J" emit p.jadpo Paid --ndjson paid.ndjson --db "$URL" 2>/dev/null
    E=$(date +%s.%N)
    EMIT=$(echo "$N / ($E - $S)" | bc)
    PIDS=()
    for i in $(seq "$P"); do
      "$J" run p.jadpo --db "$URL" --fake c=ok --log-format json 2>"run$i.log" &
      PIDS+=($!)
    done
    while true; do
      DONE=$(cat run*.log 2>/dev/null | grep -c '"state":"succeeded"' || true)
      [ "$DONE" -ge "$N" ] && break
      sleep 0.5
    done
    kill -TERM "${PIDS[@]}"
    wait "${PIDS[@]}" || true
    python3 - "$N" "$P" "$EMIT" <<'PY'
import glob, json, sys
from datetime import datetime
f = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
ts = sorted(f(json.loads(l)["at"]) for p in glob.glob("run*.log") for l in open(p)
            if l.startswith("{") and '"delivery.attempt"' in l)
span = ts[-1] - ts[0]
n, p, emit = sys.argv[1:]
print(f"backlog {n:>8}, {p} process(es): emit {emit} events/s; deliver {len(ts) / max(span, 1e-9):.0f} deliveries/s")
PY
    rm -f run*.log
  done
done
