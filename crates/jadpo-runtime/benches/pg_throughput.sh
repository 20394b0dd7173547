#!/usr/bin/env bash
# Outbox throughput on the PostgreSQL store with the fake driver, on the release
# build, PostgreSQL on the same machine.
#
#   crates/jadpo-runtime/benches/pg_throughput.sh [BACKLOGS] [PROCESSES]
#     (defaults "10000 100000 1000000" and "1 2 4"; JADPO_BENCH_POSTGRES_URL names
#      the server, postgres://postgres@127.0.0.1:5432/test by default;
#      JADPO_BENCH_REPEAT the runs of each measurement, 3 by default;
#      JADPO_BENCH_RUN_ARGS more `jadpoc run` flags, say "--workers 1";
#      JADPOC, or by its older name JADPO_BENCH_JADPOC, a `jadpoc` binary to
#      measure instead of building this tree's release build, say an older
#      build's, to compare the two; JADPO_BENCH_SQL_EMIT=0 skips the SQL emit)
#
# For each backlog and number of `jadpoc run` processes, REPEAT times, each in a
# fresh database:
# 1. emit the backlog through `jadpoc emit --ndjson` and time it;
# 2. start the processes (`--fake c=ok`), wait until their logs hold a line
#    for each delivery and no delivery is pending or running, and count
#    deliveries/s from the first outcome to the last in their logs, and from the
#    processes' start to the last outcome (their start-up included);
# then print the median of the runs and their range, and on lines of their own
# `deliveries/s: MEDIAN (backlog N, P process(es))` and
# `deliveries/s from start: MEDIAN (backlog N, P process(es))`, for scripts to
# read.
# Then, once per backlog, in a fresh database: emit the backlog through SQL,
# `jadpo.emit(name, payload)` 1,000 events per statement (one transaction each),
# and time it (skipped, saying so, on a schema without that function).
# Each line ends with the load average after each run: the figures are only
# comparable on an otherwise idle machine.
set -euo pipefail
BACKLOGS=${1:-"10000 100000 1000000"}
PROCESSES=${2:-"1 2 4"}
REPEAT=${JADPO_BENCH_REPEAT:-3}
read -r -a RUN_ARGS <<< "${JADPO_BENCH_RUN_ARGS:-}"
ADMIN=${JADPO_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
J=${JADPOC:-${JADPO_BENCH_JADPOC:-}}
if [ -n "$J" ]; then
  J=$(realpath "$J")
else
  cargo build --release -q -p jadpoc --manifest-path "$ROOT/Cargo.toml"
  J="$ROOT/target/release/jadpoc"
fi
WORK=$(mktemp -d)
DB=jadpo_bench_$$
URL="${ADMIN%/*}/$DB"
PIDS=()
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && kill -TERM "${PIDS[@]}" 2>/dev/null
  psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"
write_program "http://127.0.0.1:9/x"

fresh_db() {
  psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
  psql "$ADMIN" -qc "CREATE DATABASE $DB" >/dev/null
}

load() {
  cut -d' ' -f1 /proc/loadavg
}

# Whether any delivery is still to run: the runs' logs hold fewer lines than
# outcomes are due (counting lines costs the measured machine little, unlike a
# query a second), and then the partial indexes answer it at once.
busy() {
  if [ "$(cat run*.log | wc -l)" -lt "$1" ]; then
    echo t
    return
  fi
  psql "$URL" -Atc "SELECT EXISTS (SELECT 1 FROM jadpo.deliveries WHERE state = 'pending') \
    OR EXISTS (SELECT 1 FROM jadpo.deliveries WHERE state = 'running')"
}

# The time of the runs' logs' last write, in seconds since the Unix epoch.
last_write() {
  stat -c %.9Y run*.log | sort -n | tail -1
}

# rate N END START: deliveries/s in the runs' logs, from the first attempt's end
# (the earliest `at`) to END, then from START (the processes' start) to END.
rate() {
  python3 - "$1" "$2" "$3" <<'PY'
import glob, json, sys
from datetime import datetime
f = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
ts = sorted(f(json.loads(l)["at"]) for p in glob.glob("run*.log") for l in open(p)
            if l.startswith("{") and '"delivery.attempt"' in l)
if len(ts) != int(sys.argv[1]):
    sys.exit(f"{len(ts)} outcomes in the logs, {sys.argv[1]} expected")
end, start = float(sys.argv[2]), float(sys.argv[3])
print(f"{len(ts) / max(end - ts[0], 1e-3):.0f} {len(ts) / max(end - start, 1e-3):.0f}")
PY
}

for N in $BACKLOGS; do
  write_events "$N"
  for P in $PROCESSES; do
    EMITS=()
    RATES=()
    FROM_START=()
    LOADS=()
    for _ in $(seq "$REPEAT"); do
      fresh_db
      S=$(date +%s.%N)
      "$J" emit p.jadpo Paid --ndjson paid.ndjson --db "$URL" 2>/dev/null
      E=$(date +%s.%N)
      EMITS+=("$(echo "$N / ($E - $S)" | bc)")
      PIDS=()
      START=$(date +%s.%N)
      for i in $(seq "$P"); do
        "$J" run p.jadpo --db "$URL" --fake c=ok --log-format json "${RUN_ARGS[@]}" 2>"run$i.log" &
        PIDS+=($!)
      done
      sleep 1
      while [ "$(busy "$N")" = t ]; do
        for i in "${!PIDS[@]}"; do
          running "${PIDS[$i]}" "run$((i + 1)).log"
        done
        sleep 1
      done
      LOADS+=("$(load)")
      END=$(last_write)
      kill -TERM "${PIDS[@]}"
      wait "${PIDS[@]}" || true
      PIDS=()
      MEASURED=$(rate "$N" "$END" "$START")
      read -r RATE WHOLE <<< "$MEASURED"
      RATES+=("$RATE")
      FROM_START+=("$WHOLE")
      rm -f run*.log
    done
    DELIVER=$(summary "${RATES[@]}")
    WHOLE=$(summary "${FROM_START[@]}")
    echo "backlog $(printf '%8s' "$N"), $P process(es): deliver $DELIVER deliveries/s" \
      "($WHOLE from start); emit --ndjson $(summary "${EMITS[@]}") events/s (load ${LOADS[*]})"
    echo "deliveries/s: ${DELIVER%% *} (backlog $N, $P process(es))"
    echo "deliveries/s from start: ${WHOLE%% *} (backlog $N, $P process(es))"
  done

  if [ "${JADPO_BENCH_SQL_EMIT:-1}" = 0 ]; then
    continue
  fi

  fresh_db
  "$J" migrate --db "$URL" >/dev/null 2>&1
  if [ "$(psql "$URL" -Atc "SELECT to_regprocedure('jadpo.emit(text, jsonb)') IS NOT NULL")" != t ]; then
    echo "backlog $(printf '%8s' "$N"): SQL emit skipped: this schema has no \`jadpo.emit(text, jsonb)\`"
    continue
  fi
  BATCH=1000
  python3 - "$N" "$BATCH" > emit.sql <<'PY'
import sys
n, batch = int(sys.argv[1]), int(sys.argv[2])
for start in range(0, n, batch):
    end = min(start + batch, n)
    print(f"SELECT count(jadpo.emit('Paid', jsonb_build_object('id', 'p' || i, 'cents', i))) "
          f"FROM generate_series({start}, {end - 1}) AS i;")
PY
  S=$(date +%s.%N)
  psql "$URL" -q -v ON_ERROR_STOP=1 -f emit.sql >/dev/null
  E=$(date +%s.%N)
  echo "backlog $(printf '%8s' "$N"): SQL emit $(echo "$N / ($E - $S)" | bc) events/s, $BATCH per statement (load $(load))"
done
