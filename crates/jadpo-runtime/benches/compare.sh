#!/usr/bin/env bash
# Two release builds of `jadpoc` on the same benchmarks, back to back in one run,
# to show that a change is no slower than the build before it.
#
#   crates/jadpo-runtime/benches/compare.sh OLD_JADPOC NEW_JADPOC [ROUNDS]   (default 3)
#     (EVENTS throughput.sh's events, 100000 by default; BACKLOG pg_throughput.sh's
#      backlog, 100000 by default, one process; WRK_SECONDS ingest_wrk.sh's
#      seconds, 10 by default, and WRK_CONNECTIONS its connection counts, its own
#      default "1 16 64 256" unless set; CALLGRIND_EVENTS the instruction count's
#      backlog, 5000 by default, and CALLGRIND_REPEAT its runs per binary, 1 by
#      default; BENCHES which of "sqlite sqlite4 postgres ingest callgrind" to
#      run, all by default; JADPO_BENCH_POSTGRES_URL as for pg_throughput.sh)
#
# Builds nothing: each script is given the binary in `JADPOC`. Each round runs,
# for each benchmark, the two binaries one after the other, the old first in odd
# rounds and the new first in even ones (so that neither always runs on a machine
# the other has just warmed or loaded):
#   sqlite:   throughput.sh EVENTS (SQLite, fake driver), its `deliveries/s`
#             (first to last outcome) and `waited/s` (start to status);
#   sqlite4:  the same with four processes on the one file (throughput.sh
#             EVENTS 4), to set beside one process's figures of the same round;
#   postgres: pg_throughput.sh BACKLOG 1, one run a round
#             (JADPO_BENCH_REPEAT=1) and without its SQL emit, its `deliveries/s`;
#   ingest:   ingest_wrk.sh WRK_SECONDS WRK_CONNECTIONS, its `requests/s` at each
#             number of connections (a row each).
# Then, for each binary, once (CALLGRIND_REPEAT times, alternating which goes
# first), the instructions that callgrind counts (valgrind
# `--tool=callgrind --trace-children=no`, its "Collected" total) for a fixed
# SQLite workload: `jadpoc emit` of CALLGRIND_EVENTS events into a fresh store,
# and `jadpoc run --fake c=ok` until every delivery is `succeeded` (stopped with
# SIGTERM as throughput.sh does; the few idle polls until then are counted too).
# That count does not depend on the machine's load, as the rates do. The emit's
# is all but exact; the run's, with its 4 workers, still varies by a percent or
# two between runs of the same binary (703-722 million instructions for 5,000
# deliveries were seen), so a difference smaller than that needs CALLGRIND_REPEAT.
#
# Prints each measurement as it comes, then a table: for each row the median of
# the old build's rounds and the new's, new/old of the medians, and each build's
# range (min-max). Rates: higher is better; instructions: lower is better.
# The scripts' whole output is kept in a temporary directory, named at the end.
# The rates are only comparable on an otherwise idle machine: the load average
# is printed before and after.
#
# Needs what the scripts need (python3, bc, psql and a PostgreSQL server, wrk:
# `apt-get install wrk`), and valgrind for the instruction count.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
compare_args "$@"
EVENTS=${EVENTS:-100000}
BACKLOG=${BACKLOG:-100000}
WRK_SECONDS=${WRK_SECONDS:-10}
read -r -a WRK_CONNS <<< "${WRK_CONNECTIONS:-}"
CALLGRIND_EVENTS=${CALLGRIND_EVENTS:-5000}
CALLGRIND_REPEAT=${CALLGRIND_REPEAT:-1}
BENCHES=${BENCHES:-sqlite sqlite4 postgres ingest callgrind}
positive CALLGRIND_REPEAT "$CALLGRIND_REPEAT"
need python3
need bc
if wants postgres; then need psql; fi
if wants ingest; then need wrk "apt-get install wrk"; fi
if wants callgrind; then need valgrind "apt-get install valgrind"; fi

LOGS=$(mktemp -d -t jadpo-compare.XXXXXX)
RESULTS="$LOGS/results.tsv"
: > "$RESULTS"
CG_PID=
cleanup() {
  if [ -n "$CG_PID" ]; then
    kill -TERM "$CG_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# bench ROUND NAME SIDE SCRIPT ARGS...: one script on one binary; each summary
# line `METRIC: N` or `METRIC: N (CONTEXT)` becomes a row `NAME METRIC (CONTEXT)`.
bench() {
  local round=$1 name=$2 side=$3 script=$4
  shift 4
  local log="$LOGS/round$round-$name-$side.log"
  if ! env -u KILL_AT -u JADPO_DATABASE_URL JADPOC="${BIN[$side]}" JADPO_BENCH_REPEAT=1 JADPO_BENCH_SQL_EMIT=0 \
      "$HERE/$script" "$@" > "$log" 2>&1; then
    echo "$script on the $side binary failed; its output ($log):" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  local found=0 metric value context
  while IFS=$'\t' read -r metric value context; do
    record "$name $metric${context:+ ($context)}" "$side" "$value"
    found=1
  done < <(sed -nE 's/^([a-z/]+): ([0-9]+)( \((.*)\))?$/\1\t\2\t\4/p' "$log")
  if [ "$found" = 0 ]; then
    echo "$script on the $side binary printed no summary line; its output ($log):" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
}

# instructions SIDE: the fixed SQLite workload under callgrind, emit then run.
instructions() {
  local side=$1 dir="$LOGS/callgrind-$1" n
  local vg=(valgrind --tool=callgrind --callgrind-out-file=/dev/null --trace-children=no)
  mkdir -p "$dir"
  (
    cd "$dir"
    write_program "http://127.0.0.1:9/x"
    write_events "$CALLGRIND_EVENTS"
  )
  "${vg[@]}" --log-file="$dir/emit.vg" "${BIN[$side]}" emit "$dir/p.jadpo" Paid \
    --ndjson "$dir/paid.ndjson" --db "$dir/outbox.db" > "$dir/emit.log" 2>&1 || {
    echo "jadpoc emit under callgrind ($side) failed; its output ($dir/emit.log):" >&2
    tail -n 20 "$dir/emit.log" >&2
    exit 1
  }
  n=$(collected "$dir/emit.vg")
  record "callgrind emit instructions ($CALLGRIND_EVENTS events)" "$side" "$n"
  # Made before the run starts, so that the first look at it finds it.
  : > "$dir/run.log"
  "${vg[@]}" --log-file="$dir/run.vg" "${BIN[$side]}" run "$dir/p.jadpo" --db "$dir/outbox.db" \
    --fake c=ok --log-format json 2> "$dir/run.log" &
  CG_PID=$!
  while [ "$(grep -c '"state":"succeeded"' "$dir/run.log" || true)" -lt "$CALLGRIND_EVENTS" ]; do
    if ! kill -0 "$CG_PID" 2>/dev/null; then
      echo "jadpoc run under callgrind ($side) stopped early; its log ($dir/run.log):" >&2
      tail -n 20 "$dir/run.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  kill -TERM "$CG_PID"
  wait "$CG_PID"
  CG_PID=
  n=$(collected "$dir/run.vg")
  record "callgrind run instructions ($CALLGRIND_EVENTS deliveries)" "$side" "$n"
  rm -f "$dir/outbox.db"* "$dir/paid.ndjson"
}

show_binaries
echo "rounds: $ROUNDS; load before: $(load)"
for round in $(seq "$ROUNDS"); do
  order "$round"
  echo "round $round/$ROUNDS (${ORDER[0]} first)"
  for side in "${ORDER[@]}"; do
    if wants sqlite; then bench "$round" sqlite "$side" throughput.sh "$EVENTS"; fi
    if wants sqlite4; then bench "$round" sqlite4 "$side" throughput.sh "$EVENTS" 4; fi
  done
  for side in "${ORDER[@]}"; do
    if wants postgres; then bench "$round" postgres "$side" pg_throughput.sh "$BACKLOG" 1; fi
  done
  for side in "${ORDER[@]}"; do
    if wants ingest; then bench "$round" ingest "$side" ingest_wrk.sh "$WRK_SECONDS" "${WRK_CONNS[@]}"; fi
  done
done
if wants callgrind; then
  for run in $(seq "$CALLGRIND_REPEAT"); do
    order "$run"
    echo "instruction counts $run/$CALLGRIND_REPEAT (${ORDER[0]} first)"
    for side in "${ORDER[@]}"; do
      instructions "$side"
    done
  done
fi
echo "load after: $(load)"
echo

table
echo
echo "the scripts' output: $LOGS"
