"""Wait until the run logs hold N `succeeded` outcomes, as cheaply as a user's eye.

    watch_outcomes.py N PID LOG [PID LOG ...]

Each log is read on from where the last look stopped (every 0.05 s), so that
the watching costs the machine a few reads, not a scan of every line written so
far at every look: on a 2-core machine a watcher that rescanned the log took a
good part of a core from the run it measured. Prints the first PID's peak
resident set in KiB (VmHWM) when every outcome is there; exits 1, showing the
end of its log, if a process stops before.
"""

import sys
import time

MARK = b'"state":"succeeded"'


def peak_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except OSError:
        return False


def main():
    want = int(sys.argv[1])
    runs = [(int(pid), log) for pid, log in zip(sys.argv[2::2], sys.argv[3::2])]
    files = [open(log, "rb") for _, log in runs]
    partial = [b""] * len(runs)
    seen, peak = 0, 0
    while True:
        peak = max(peak, peak_kib(runs[0][0]))
        for i, f in enumerate(files):
            chunk = partial[i] + f.read()
            # A line is counted once whole: the part after the last newline waits.
            cut = chunk.rfind(b"\n") + 1
            seen += chunk[:cut].count(MARK)
            partial[i] = chunk[cut:]
        if seen >= want:
            print(peak)
            return
        for (pid, log) in runs:
            if not alive(pid):
                with open(log, "rb") as f:
                    tail = f.read().splitlines()[-5:]
                sys.stderr.write(f"jadpoc run stopped early; the end of its log ({log}):\n")
                sys.stderr.write("\n".join(t.decode(errors="replace") for t in tail) + "\n")
                sys.exit(1)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
