#!/usr/bin/env python3
"""The table of a side-by-side comparison: reads the lines `ROW<TAB>old|new<TAB>VALUE`
that the compare scripts record and prints, for each row in the order first met,
the median of the old build's values and of the new's, new/old, each build's
range, and which way is better: higher for a rate (a row whose name has `/s`),
lower for everything else (times, memory, instructions)."""

import statistics
import sys


def shown(v: float) -> str:
    return f"{v:.0f}" if v == int(v) else f"{v:g}"


def main() -> None:
    rows, values = [], {}
    for line in open(sys.argv[1]):
        row, side, value = line.rstrip("\n").split("\t")
        if row not in values:
            rows.append(row)
            values[row] = {"old": [], "new": []}
        values[row][side].append(float(value))

    def spread(v: list) -> str:
        return f"{shown(min(v))}-{shown(max(v))}" if len(v) > 1 else "-"

    table = [("benchmark", "old median", "new median", "new/old", "old min-max", "new min-max", "better")]
    for row in rows:
        old, new = values[row]["old"], values[row]["new"]
        if not old or not new:
            continue
        om, nm = statistics.median(old), statistics.median(new)
        table.append((row, shown(om), shown(nm), f"{nm / om:.3f}" if om else "-", spread(old), spread(new),
                      "higher" if "/s" in row else "lower"))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]))


if __name__ == "__main__":
    main()
