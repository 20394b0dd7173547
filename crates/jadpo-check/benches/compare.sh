#!/usr/bin/env bash
# The front end of two release builds of `jadpoc`, back to back in one run: the
# checker and the language server on the program of gen_program.py, as a user
# meets them, to show that a change is no slower and no larger than the build
# before it.
#
#   crates/jadpo-check/benches/compare.sh OLD_JADPOC NEW_JADPOC [ROUNDS]   (default 3)
#     (SUBSCRIBERS the generated program's subscribers, 50000 by default: about
#      7.5 MiB of text; LSP_EDITS the edits tests/lsp/bench.py times per round,
#      10 by default; BENCHES which of "check lsp callgrind" to run, all by default)
#
# Builds nothing. Each round runs, for each benchmark, the two binaries one after
# the other, the old first in odd rounds and the new first in even ones:
#   check: `jadpoc check PROGRAM` as a whole process, timed by GNU time: its
#          wall-clock milliseconds, the text's MB (10^6 bytes) per second, and its
#          peak resident set (KiB);
#   lsp:   tests/lsp/bench.py on the same program: the median milliseconds from a
#          one-character edit to its diagnostics, the resident set once idle and
#          the peak (KiB).
# Then, once per binary, the instructions callgrind counts (its "Collected"
# total) for the whole `jadpoc check`, which do not move with the machine's load.
# Prints each measurement as it comes, then a table (crates/jadpo-runtime/benches/
# table.py): each row's median for the old build and the new, new/old, and each
# build's range. The machine's load
# average is printed before and after: the times compare only on an idle machine.
#
# Needs python3, GNU time (/usr/bin/time) and, for the instruction count, valgrind.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
# shellcheck source=../../jadpo-runtime/benches/lib.sh
. "$REPO/crates/jadpo-runtime/benches/lib.sh"
compare_args "$@"
SUBSCRIBERS=${SUBSCRIBERS:-50000}
LSP_EDITS=${LSP_EDITS:-10}
BENCHES=${BENCHES:-check lsp callgrind}
GEN=""
for dir in "$REPO/.." "$REPO/../.."; do
  if [ -f "$dir/shared/tools/gen_program.py" ]; then GEN="$dir/shared/tools/gen_program.py"; break; fi
done
if [ -z "$GEN" ]; then
  echo "gen_program.py not found beside the repository (shared/tools/)" >&2
  exit 2
fi
[ -x /usr/bin/time ] || { echo "GNU time is needed: apt-get install time" >&2; exit 2; }
if wants callgrind; then need valgrind "apt-get install valgrind"; fi

WORK=$(mktemp -d -t jadpo-compare-check.XXXXXX)
RESULTS="$WORK/results.tsv"
: > "$RESULTS"
PROGRAM="$WORK/program.jadpo"
python3 "$GEN" --subscribers "$SUBSCRIBERS" > "$PROGRAM"
BYTES=$(stat -c %s "$PROGRAM")

check_once() {
  local side=$1 out="$WORK/check-$1.txt"
  /usr/bin/time -f '%e %M' -o "$out" "${BIN[$side]}" check "$PROGRAM" > /dev/null 2>&1 || {
    # A clean program: exit 0 is expected.
    echo "jadpoc check ($side) failed" >&2
    exit 1
  }
  local secs kib
  read -r secs kib < "$out"
  record "check ms" "$side" "$(python3 -c "print(round($secs * 1000))")"
  record "check MB/s" "$side" "$(python3 -c "print(round($BYTES / 1e6 / max($secs, 0.001), 1))")"
  record "check peak KiB" "$side" "$kib"
}

lsp_once() {
  local side=$1 line
  line=$(python3 "$REPO/tests/lsp/bench.py" --jadpoc "${BIN[$side]}" --edits "$LSP_EDITS" --sizes "$SUBSCRIBERS" | tail -n 1)
  # "... median 173.1 ms, max ...; memory: resident 69.5 MiB (9.3x ...), peak 177.1 MiB (...)"
  record "lsp edit-to-diagnostics median ms" "$side" "$(sed -E 's/.*median ([0-9.]+) ms.*/\1/' <<< "$line")"
  record "lsp resident once idle MiB" "$side" "$(sed -E 's/.*resident ([0-9.]+) MiB.*/\1/' <<< "$line")"
  record "lsp peak MiB" "$side" "$(sed -E 's/.*peak ([0-9.]+) MiB.*/\1/' <<< "$line")"
}

instructions() {
  local side=$1 log="$WORK/callgrind-$1.log" n
  valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file="$log" \
    "${BIN[$side]}" check "$PROGRAM" > /dev/null 2>&1
  record "check instructions" "$side" "$(collected "$log")"
}

show_binaries
echo "program: $SUBSCRIBERS subscribers, $BYTES bytes; rounds: $ROUNDS; load before: $(load)"
for round in $(seq "$ROUNDS"); do
  order "$round"
  echo "round $round/$ROUNDS (${ORDER[0]} first)"
  for side in "${ORDER[@]}"; do
    if wants check; then check_once "$side"; fi
  done
  for side in "${ORDER[@]}"; do
    if wants lsp; then lsp_once "$side"; fi
  done
done
if wants callgrind; then
  for side in old new; do instructions "$side"; done
fi
echo "load after: $(load)"
echo

table
rm -rf "$WORK"
