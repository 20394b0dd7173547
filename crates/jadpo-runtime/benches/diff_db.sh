#!/usr/bin/env bash
# `jadpoc diff NEW --db STORE` on a store of many deliveries, and what the
# comparison adds to `jadpoc run`'s start, as a user runs them.
#
#   crates/jadpo-runtime/benches/diff_db.sh [EVENTS] [ROUNDS]   (500000 and 5 by default)
#     (JADPOC the binary, target/release/jadpoc by default; STORE sqlite or
#      postgres, sqlite by default; JADPO_BENCH_POSTGRES_URL the server for
#      postgres, postgres://postgres@127.0.0.1:5432/test by default, a schema of
#      its own dropped after)
#
# The old program has two subscribers on `Paid` (`rec`, `audit`); EVENTS events
# emitted under it make 2 x EVENTS deliveries, all pending (the worst case: every
# one is in flight, so every count reads them all). The new program drops
# `audit` and lowers `rec`'s budget. Measured, ROUNDS times each:
#   diff:      `jadpoc diff new.jadpo --db STORE` (the store's last version
#              against new.jadpo, with every finding's counts), wall seconds;
#   run-same:  `jadpoc run old.jadpo` from spawn to its `running` line, the
#              store's last version being old.jadpo (no comparison);
#   run-diff:  the same for new.jadpo `--accept ...`: the comparison before it
#              starts (accepted, so without the counts, which only a refusal
#              prints); each round's run of old.jadpo makes it the version the
#              next comparison starts from;
# then the instructions callgrind counts for one `diff`.
set -euo pipefail
EVENTS=${1:-500000}
ROUNDS=${2:-5}
JADPOC=$(realpath "${JADPOC:-target/release/jadpoc}")
STORE=${STORE:-sqlite}
here=$(dirname "$(realpath "$0")")
work=$(mktemp -d)
cd "$work"
echo "work folder: $work"

cat > old.jadpo <<'JADPO'
event Paid {
    id: string
    cents: int
}
connection c {
    url: "http://127.0.0.1:9/x"
}
action record(id: string, cents: int) {
    via: c
}
subscriber rec {
    on: Paid
    run: record(event.id, event.cents)
    retry: { attempts: 20  within: 3d }
}
subscriber audit {
    on: Paid
    run: record(event.id, event.cents)
}
JADPO
# The new program: `audit` gone, `rec`'s budget lowered.
sed '/^subscriber audit {/,/^}/d; s/attempts: 20  within: 3d/attempts: 2  within: 1h/' old.jadpo > new.jadpo
python3 -c "
import sys
with open('paid.ndjson', 'w') as f:
    for i in range(int(sys.argv[1])):
        f.write('{\"id\": \"p%d\", \"cents\": %d}\n' % (i, i))
" "$EVENTS"

case "$STORE" in
  sqlite) DB="$work/outbox.db" ;;
  postgres)
    base=${JADPO_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
    schema="bench_diff_$$"
    DB="$base?schema=$schema"
    trap 'psql "$base" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true' EXIT
    ;;
  *) echo "STORE is sqlite or postgres" >&2; exit 2 ;;
esac

start=$(date +%s.%N)
"$JADPOC" emit old.jadpo Paid --ndjson paid.ndjson --db "$DB" >/dev/null
echo "emitted $EVENTS events ($((2 * EVENTS)) deliveries) in $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"

# seconds COMMAND...: a command's wall time.
seconds() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || true
  t1=$(date +%s.%N)
  python3 -c "print(round(($t1 - $t0) * 1000))"
}

# to_running ARGS...: ms from spawn to `jadpoc run ARGS`'s `running` line; stopped after.
to_running() {
  local t0 pid
  : > run.log
  t0=$(date +%s.%N)
  "$JADPOC" run "$@" --db "$DB" --fake c=hang > /dev/null 2> run.log &
  pid=$!
  until grep -q "running" run.log; do
    kill -0 "$pid" 2>/dev/null || { tail -n 5 run.log >&2; exit 1; }
    sleep 0.002
  done
  python3 -c "print(round(($(date +%s.%N) - $t0) * 1000))"
  kill -KILL "$pid"; wait "$pid" 2>/dev/null || true
}

diff_ms=(); same_ms=(); changed_ms=()
for _ in $(seq "$ROUNDS"); do
  # A run of old.jadpo makes it the version the next run is compared with.
  same_ms+=("$(to_running old.jadpo)")
  diff_ms+=("$(seconds "$JADPOC" diff new.jadpo --db "$DB")")
  changed_ms+=("$(to_running new.jadpo --accept subscriber.removed,subscriber.budget_tightened)")
done
to_running old.jadpo >/dev/null
# shellcheck source=lib.sh
source "$here/lib.sh"
echo "diff --db:          $(summary "${diff_ms[@]}") ms"
echo "run, same version:  $(summary "${same_ms[@]}") ms to running"
echo "run, new version:   $(summary "${changed_ms[@]}") ms to running"
{ "$JADPOC" diff new.jadpo --db "$DB" || true; } | tail -n 8
if command -v valgrind >/dev/null; then
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$JADPOC" diff new.jadpo --db "$DB" \
    > /dev/null 2> callgrind.txt || true
  echo "diff --db instructions: $(grep -o 'Collected : [0-9]*' callgrind.txt | grep -o '[0-9]*')"
fi
