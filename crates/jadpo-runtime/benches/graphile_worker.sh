#!/usr/bin/env bash
# graphile-worker (the Node.js PostgreSQL job queue) throughput on no-op jobs,
# PostgreSQL on the same machine: the reference for pg_throughput.sh's figures.
#
#   crates/jadpo-runtime/benches/graphile_worker.sh [BACKLOGS] [CONCURRENCIES]
#     (defaults "10000 100000" and "4 16"; JADPO_BENCH_POSTGRES_URL names the
#      server, postgres://postgres@127.0.0.1:5432/test by default;
#      JADPO_BENCH_REPEAT the runs of each measurement, 3 by default, of which
#      the median and the range are printed; GW_MODES the modes to run,
#      "default batched" by default)
#
# Installs graphile-worker 0.17.3 (GW_VERSION) with npm, once, into
# ${XDG_CACHE_HOME:-~/.cache}/jadpo-bench/graphile-worker (outside the
# repository). (0.18 wants Node.js >= 22.18; 0.17.3 is the newest that runs on
# Node.js 20 and has the local queue and batched completion.)
# For each backlog N, concurrency C and mode, in a fresh database,
# graphile_worker.mjs installs the schema (`runMigrations`), adds N jobs of a
# no-op task through SQL (`graphile_worker.add_jobs`, 10,000 a statement, timed),
# runs one worker pool of concurrency C (`run`, one process) until the jobs table
# is empty, and counts jobs/s from the first job completed to the moment the
# table was found empty. Modes (options of `preset.worker`; both with
# `maxPoolSize` max(10, C + 2), as that option's documentation recommends, and a
# logger that drops everything):
#   default: graphile-worker's defaults (each worker fetches its own job, each
#            completion is its own statement);
#   batched: `localQueue: { size: 500 }` (C + 1 if larger),
#            `completeJobBatchDelay: 0`, `failJobBatchDelay: 0`: the batching
#            of graphile-worker's performance page.
# After each line, on a line of its own, `jobs/s: MEDIAN (backlog N, concurrency
# C, MODE)`, for scripts to read.
# Fails unless every job succeeded and the table is empty at the end.
# Each line ends with the load average when it was measured: the figures are only
# comparable on an otherwise idle machine.
set -euo pipefail
BACKLOGS=${1:-"10000 100000"}
CONCURRENCIES=${2:-"4 16"}
REPEAT=${JADPO_BENCH_REPEAT:-3}
MODES=${GW_MODES:-"default batched"}
ADMIN=${JADPO_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
GW_VERSION=0.17.3
GW_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/jadpo-bench/graphile-worker
DB=gw_bench_$$
URL="${ADMIN%/*}/$DB"
cleanup() {
  psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
}
trap cleanup EXIT

installed() {
  node -p "require(process.argv[1]).version" "$GW_DIR/node_modules/graphile-worker/package.json" 2>/dev/null || true
}
if [ "$(installed)" != "$GW_VERSION" ]; then
  mkdir -p "$GW_DIR"
  npm install --prefix "$GW_DIR" --save-exact --no-audit --no-fund --loglevel=error \
    "graphile-worker@$GW_VERSION" >/dev/null
  [ "$(installed)" = "$GW_VERSION" ] || { echo "graphile-worker $GW_VERSION not installed in $GW_DIR" >&2; exit 1; }
fi

fresh_db() {
  psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
  psql "$ADMIN" -qc "CREATE DATABASE $DB" >/dev/null
}

for N in $BACKLOGS; do
  for C in $CONCURRENCIES; do
    for MODE in $MODES; do
      RATES=()
      ADDS=()
      LOADS=()
      for _ in $(seq "$REPEAT"); do
        fresh_db
        read -r RATE RUN_LOAD ADD_RATE _ < <(
          NO_LOG_SUCCESS=1 node "$HERE/graphile_worker.mjs" "$GW_DIR" "$URL" "$N" "$C" "$MODE" || echo FAILED)
        if [ "$RATE" = FAILED ]; then
          echo "graphile-worker $GW_VERSION, backlog $N, concurrency $C, $MODE: failed" >&2
          exit 1
        fi
        LEFT=$(psql "$URL" -Atc "SELECT count(*) FROM graphile_worker._private_jobs")
        if [ "$LEFT" != 0 ]; then
          echo "graphile-worker $GW_VERSION, backlog $N, concurrency $C, $MODE: $LEFT jobs left" >&2
          exit 1
        fi
        RATES+=("$RATE")
        ADDS+=("$ADD_RATE")
        LOADS+=("$RUN_LOAD")
      done
      JOBS=$(summary "${RATES[@]}")
      printf 'graphile-worker %s, backlog %8s, concurrency %2s, %-7s: %s jobs/s; add_jobs %s jobs/s (load %s)\n' \
        "$GW_VERSION" "$N" "$C" "$MODE" "$JOBS" "$(summary "${ADDS[@]}")" "${LOADS[*]}"
      echo "jobs/s: ${JOBS%% *} (backlog $N, concurrency $C, $MODE)"
    done
  done
done
