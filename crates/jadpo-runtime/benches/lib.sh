# shellcheck shell=bash
# What the throughput scripts share; sourced, not run.

# write_program URL [CONNECTION_LINE]: p.jadpo, one event `Paid` delivered to `rec`
# through connection `c` at URL.
write_program() {
  cat > p.jadpo <<JADPO
event Paid {
    id: string
    cents: int
}
connection c {
    url: "$1"
    ${2:-}
}
action record(id: string, cents: int) {
    via: c
}
subscriber rec {
    on: Paid
    run: record(event.id, event.cents)
}
JADPO
}

# write_events N: paid.ndjson, N `Paid` payloads one a line.
write_events() {
  python3 -c "
import sys
n = int(sys.argv[1])
with open('paid.ndjson', 'w') as f:
    for i in range(n):
        f.write('{\"id\": \"p%d\", \"cents\": %d}\n' % (i, i))
" "$1"
}

# running PID LOG: returns while the `jadpoc run` PID lives; else says so, shows
# the end of its LOG and exits 1 (instead of waiting for lines that never come).
running() {
  kill -0 "$1" 2>/dev/null && return
  echo "jadpoc run stopped early; the end of its log ($2):" >&2
  tail -n 5 "$2" >&2
  exit 1
}

# summary VALUES...: the median of a measurement's runs, and their range when
# there is more than one.
summary() {
  python3 -c '
import statistics, sys
v = sorted(int(float(x)) for x in sys.argv[1:])
print(f"{statistics.median(v):.0f}" + (f" ({v[0]}-{v[-1]})" if len(v) > 1 else ""))' "$@"
}

# Two builds compared side by side (compare.sh here, crates/jadpo-check/benches/compare.sh).
declare -A BIN

# compare_args "$@": a compare script's arguments, OLD_JADPOC NEW_JADPOC [ROUNDS]:
# sets BIN[old], BIN[new] (see binaries) and ROUNDS (3 by default), or stops with
# the usage.
compare_args() {
  if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: $0 OLD_JADPOC NEW_JADPOC [ROUNDS]" >&2
    exit 2
  fi
  ROUNDS=${3:-3}
  positive ROUNDS "$ROUNDS"
  binaries "$1" "$2"
}

# positive NAME VALUE: stops unless VALUE is a whole number above zero.
positive() {
  case $2 in
    '' | *[!0-9]* | 0) echo "$1 must be a positive number, not $2" >&2; exit 2 ;;
  esac
}

# need COMMAND [HOW]: stops unless COMMAND is installed, saying how to install it.
need() {
  command -v "$1" >/dev/null || { echo "$1 is needed${2:+: $2}" >&2; exit 2; }
}

# binaries OLD NEW: each must be an executable file; sets BIN[old] and BIN[new] to
# their real paths.
binaries() {
  local side path
  for side in old new; do
    path=$([ "$side" = old ] && echo "$1" || echo "$2")
    if [ ! -x "$path" ] || [ -d "$path" ]; then
      echo "$side binary $path: not an executable file" >&2
      exit 2
    fi
    BIN[$side]=$(realpath "$path")
  done
}

# show_binaries: which two builds are compared, by path and checksum.
show_binaries() {
  local side
  for side in old new; do
    echo "$side: ${BIN[$side]} (sha256 $(sha256sum "${BIN[$side]}" | cut -c1-12))"
  done
}

# order ROUND: sets ORDER to the sides in the order round ROUND runs them, the old
# build first in odd rounds and the new one in even ones.
order() {
  if [ $(($1 % 2)) = 1 ]; then ORDER=(old new); else ORDER=(new old); fi
}

# load: the machine's load averages (1, 5 and 15 minutes).
load() {
  cut -d' ' -f1-3 /proc/loadavg
}

# collected VALGRIND_LOG: callgrind's "Collected" total, or stops showing the log.
collected() {
  local n
  n=$(sed -nE 's/^==[0-9]+== Collected : ([0-9]+)$/\1/p' "$1")
  if [ -z "$n" ]; then
    echo "no instruction count in $1:" >&2
    tail -n 20 "$1" >&2
    exit 1
  fi
  echo "$n"
}

# wants NAME: whether $BENCHES (a list of names) asks for the benchmark NAME.
wants() {
  [[ " $BENCHES " == *" $1 "* ]]
}

# record ROW SIDE VALUE: one measurement, kept in $RESULTS and shown.
record() {
  printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$RESULTS"
  printf '  %-3s %-52s %s\n' "$2" "$1" "$3"
}

# table: the measurements in $RESULTS as a table (table.py).
table() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/table.py" "$RESULTS"
}

