#!/usr/bin/env bash
# What two builds of `jadpoc` take to start a run and to store one event, back to
# back in one run, as a user runs them: the previous build beside this one.
#
#   crates/jadpo-runtime/benches/start.sh OLD_JADPOC NEW_JADPOC [ROUNDS] [EVENTS]   (10 and 100000 by default)
#
# Each build gets a SQLite store of its own (a build may not read the other's
# schema) holding EVENTS events emitted by it (EVENTS deliveries, pending), its
# program's version the one the store ran last. Measured each round, the builds
# alternating which goes first:
#   run:   `jadpoc run p.jadpo --fake c=hang` from spawn to its `running` line
#          (the store opened, its version read and kept, the process noted);
#   emit:  `jadpoc emit p.jadpo Paid JSON`, one event, whole command;
# then the instructions callgrind counts for one such `emit` of each build.
set -euo pipefail
OLD=$(realpath "$1")
NEW=$(realpath "$2")
ROUNDS=${3:-10}
EVENTS=${4:-100000}
here=$(dirname "$(realpath "$0")")
# shellcheck source=lib.sh
source "$here/lib.sh"
work=$(mktemp -d)
cd "$work"
echo "work folder: $work"
write_program "http://127.0.0.1:9/x"
write_events "$EVENTS"
for b in old new; do
  bin=$OLD; [ "$b" = new ] && bin=$NEW
  "$bin" emit p.jadpo Paid --ndjson paid.ndjson --db "$b.db" >/dev/null
  # A first run keeps the version (the old build keeps none) and starts the
  # store's processes' table.
  "$bin" run p.jadpo --db "$b.db" --fake c=hang > /dev/null 2> first.log &
  pid=$!
  until grep -q running first.log; do sleep 0.01; done
  kill -TERM "$pid"; wait "$pid" || true
done

# to_running BIN DB: ms from spawn to the run's `running` line.
to_running() {
  local t0 pid
  : > run.log
  t0=$(date +%s%N)
  "$1" run p.jadpo --db "$2" --fake c=hang > /dev/null 2> run.log &
  pid=$!
  until grep -q "running" run.log; do
    kill -0 "$pid" 2>/dev/null || { tail -n 5 run.log >&2; exit 1; }
    sleep 0.001
  done
  echo $(( ($(date +%s%N) - t0) / 1000000 ))
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
}

# emit_ms BIN DB: ms of one `jadpoc emit`.
emit_ms() {
  local t0
  t0=$(date +%s%N)
  "$1" emit p.jadpo Paid '{"id": "x", "cents": 1}' --db "$2" >/dev/null
  echo $(( ($(date +%s%N) - t0) / 1000000 ))
}

declare -A run_ms emit_all
for r in $(seq "$ROUNDS"); do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for b in $order; do
    bin=$OLD; [ "$b" = new ] && bin=$NEW
    run_ms[$b]+=" $(to_running "$bin" "$b.db")"
    emit_all[$b]+=" $(emit_ms "$bin" "$b.db")"
  done
done
for b in old new; do
  # shellcheck disable=SC2086
  echo "$b: run to running $(summary ${run_ms[$b]}) ms; emit of one event $(summary ${emit_all[$b]}) ms"
done
if command -v valgrind >/dev/null; then
  for b in old new; do
    bin=$OLD; [ "$b" = new ] && bin=$NEW
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" emit p.jadpo Paid '{"id": "y", "cents": 1}' \
      --db "$b.db" > /dev/null 2> callgrind.txt || true
    echo "$b: emit of one event, $(grep -o 'Collected : [0-9]*' callgrind.txt | grep -o '[0-9]*') instructions"
  done
fi
