#!/usr/bin/env bash
# The `--listen` ingest under wrk, on the release build.
#
#   crates/jadpo-runtime/benches/ingest_wrk.sh [SECONDS] [CONNECTIONS...]
#       (default 10 seconds; 1 16 64 256 keep-alive connections)
#
# For each number of connections: a fresh store, `jadpoc run --listen` with the
# fake driver delivering what arrives (`--fake c=ok`), wrk posting one small
# `Paid` event per request for SECONDS on 2 threads. It prints wrk's requests/s
# and then checks the store: every id wrk got in a 202 is stored, no id was
# answered twice, and the store holds no event the run did not answer (beyond
# those in flight when wrk stopped). Then, once the check passed, wrk's figure on
# a line of its own, `requests/s: N (C connections)`, for scripts to read. Beside
# it, the deliveries the claim loops made succeed while the load ran, and their
# rate over the load's seconds: the ingest's group commit and the claims share
# SQLite's one writer, and both rates show how it is shared.
#
# `KILL_AT=S` sends SIGINT to `jadpoc run` S seconds into the load instead, and
# checks again that every acknowledged id is in the store.
#
# `INGEST_ONLY=1` posts an event no subscriber takes, so the ingest has the
# machine to itself (no deliveries run alongside).
#
# `JADPOC=PATH` runs that binary instead of building one (to compare builds).
#
# Needs wrk (`apt-get install wrk`) and python3.
set -euo pipefail
SECONDS_=${1:-10}
shift || true
CONNS=("$@")
[ ${#CONNS[@]} -eq 0 ] && CONNS=(1 16 64 256)
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 2; }
if [ -n "${JADPOC:-}" ]; then
  J=$(realpath "$JADPOC")
else
  cargo build --release -q -p jadpoc --manifest-path "$ROOT/Cargo.toml"
  J="$ROOT/target/release/jadpoc"
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
write_program "http://127.0.0.1:9/x"
EVENT=Paid
if [ -n "${INGEST_ONLY:-}" ]; then
  printf 'event Ping {\n    id: string\n    cents: int\n}\n' >> p.jadpo
  EVENT=Ping
fi

# Each wrk thread keeps the ids of its 202s; `done` writes them all to acked.txt.
cat > post.lua <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"id": "p1", "cents": 5}'
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) ids = {} ; others = 0 end
function response(status, headers, body)
  if status == 202 then
    ids[#ids + 1] = string.match(body, '"id":(%d+)')
  else
    others = others + 1
  end
end
function done(summary, latency, requests)
  local f = io.open("acked.txt", "w")
  local refused = 0
  for _, t in ipairs(threads) do
    for _, id in ipairs(t:get("ids")) do f:write(id, "\n") end
    refused = refused + t:get("others")
  end
  f:close()
  io.write(string.format("answers other than 202: %d\n", refused))
end
LUA

for C in "${CONNS[@]}"; do
  rm -rf .jadpo acked.txt run.log
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$J" run p.jadpo --fake c=ok --listen "$PORT" 2>run.log &
  PID=$!
  until grep -q "taking events" run.log 2>/dev/null; do
    running $PID run.log
    sleep 0.1
  done
  echo "== $C connections, ${SECONDS_}s"
  if [ -n "${KILL_AT:-}" ]; then
    (sleep "$KILL_AT"; kill -INT $PID) &
  fi
  T=$((C < 2 ? C : 2))
  OUT=$(wrk -t "$T" -c "$C" -d "${SECONDS_}s" -s post.lua "http://127.0.0.1:$PORT/events/$EVENT")
  grep -E "Requests/sec|Latency|requests in|errors|answers other" <<< "$OUT"
  RPS=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<< "$OUT")
  kill -INT $PID 2>/dev/null || true
  wait $PID || true
  python3 - "$SECONDS_" <<'PY'
import sqlite3, sys
acked = [int(l) for l in open("acked.txt") if l.strip()]
stored = {r[0] for r in sqlite3.connect(".jadpo/outbox.db").execute("SELECT id FROM jadpo_events")}
missing = [i for i in acked if i not in stored]
dups = len(acked) - len(set(acked))
print(f"check: {len(acked)} acknowledged, {len(stored)} stored, {len(missing)} acknowledged but missing, {dups} answered twice")
# The other side of the single writer: what the claim loops delivered meanwhile.
db = sqlite3.connect(".jadpo/outbox.db")
made = db.execute("SELECT count(*) FROM jadpo_deliveries").fetchone()[0]
done = db.execute("SELECT count(*) FROM jadpo_deliveries WHERE state = 'succeeded'").fetchone()[0]
if made:
    print(f"deliveries: {done} of {made} succeeded by the run's stop ({done / float(sys.argv[1]):.0f} deliveries/s over the load's seconds)")
if missing or dups:
    raise SystemExit("FAILED: an acknowledged event is missing or an id was answered twice")
PY
  echo "requests/s: $RPS ($C connections)"
done
