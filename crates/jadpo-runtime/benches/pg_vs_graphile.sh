#!/usr/bin/env bash
# `jadpoc run` on PostgreSQL side by side with graphile-worker's batched mode, in
# one run, back to back, on the same machine and server.
#
#   crates/jadpo-runtime/benches/pg_vs_graphile.sh [BACKLOG] [PROCESSES] [CONCURRENCIES]
#     (defaults 100000, "1 2 4" and "4 16"; JADPO_BENCH_REPEAT the rounds, 3 by
#      default; JADPOC a `jadpoc` binary to measure instead of this tree's release
#      build; JADPO_BENCH_POSTGRES_URL the server, as the two scripts below take it)
#
# Each round runs, one after the other, each in a fresh database:
# graphile_worker.sh in its batched mode (local queue and batched completion)
# once for each concurrency, then pg_throughput.sh once for each number of
# `jadpoc run` processes (the backlog emitted, then drained; no SQL emit).
# Rounds, rather than all of one then all of the other, so that the machine's
# speed moving over the minutes weighs on both alike.
# Then it prints the median of the rounds of each, and for each number of
# processes the ratio of its median to graphile-worker's best median (the
# concurrency that did best). Both are counted from the first job completed (the
# first outcome) to the last one written; jadpo's figure from its processes'
# start to the last outcome is printed beside it. Each line of the rounds ends
# with the load average: the figures compare only on an otherwise idle machine.
set -euo pipefail
BACKLOG=${1:-100000}
PROCESSES=${2:-"1 2 4"}
CONCURRENCIES=${3:-"4 16"}
ROUNDS=${JADPO_BENCH_REPEAT:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
J=${JADPOC:-}
if [ -n "$J" ]; then
  J=$(realpath "$J")
else
  cargo build --release -q -p jadpoc --manifest-path "$ROOT/Cargo.toml"
  J="$ROOT/target/release/jadpoc"
fi
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

for ROUND in $(seq "$ROUNDS"); do
  echo "round $ROUND of $ROUNDS"
  JADPO_BENCH_REPEAT=1 GW_MODES=batched "$HERE/graphile_worker.sh" "$BACKLOG" "$CONCURRENCIES" | tee -a "$OUT" \
    | grep -v '^jobs/s:'
  JADPO_BENCH_REPEAT=1 JADPO_BENCH_SQL_EMIT=0 JADPOC="$J" "$HERE/pg_throughput.sh" "$BACKLOG" "$PROCESSES" \
    | tee -a "$OUT" | grep -v '^deliveries/s'
done

python3 - "$OUT" "$BACKLOG" "$PROCESSES" "$CONCURRENCIES" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
backlog, processes, concurrencies = sys.argv[2], sys.argv[3].split(), sys.argv[4].split()

def runs(pattern):
    return [int(v) for v in re.findall(pattern, text, re.M)]

def figure(values):
    return f"{statistics.median(values):,.0f}" + (f" ({min(values):,}-{max(values):,})" if len(values) > 1 else "")

print(f"\nbacklog {int(backlog):,}, median of the rounds (range):")
best = 0
for c in concurrencies:
    v = runs(rf"^jobs/s: (\d+) \(backlog {backlog}, concurrency {c}, batched\)$")
    best = max(best, statistics.median(v))
    print(f"graphile-worker batched, concurrency {c:>2}: {figure(v)} jobs/s")
for p in processes:
    v = runs(rf"^deliveries/s: (\d+) \(backlog {backlog}, {p} process\(es\)\)$")
    w = runs(rf"^deliveries/s from start: (\d+) \(backlog {backlog}, {p} process\(es\)\)$")
    print(f"jadpo, {p} process(es): {figure(v)} deliveries/s, {figure(w)} from start; "
          f"{statistics.median(v) / best:.2f}x graphile-worker's best")
PY
