#!/usr/bin/env bash
# The language server's end-to-end tests: builds `jadpoc`, makes a virtualenv with
# the pinned client (pytest-lsp) if there is none, and runs pytest against
# `target/debug/jadpoc lsp`. Extra arguments go to pytest.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${JADPO_LSP_VENV:-$here/.venv}"

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# pip skips what is installed already, so this costs a second when nothing changed.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"

(cd "$repo" && cargo build --locked -p jadpoc)

cd "$here"
JADPOC="${JADPOC:-$repo/target/debug/jadpoc}" exec "$venv/bin/python" -m pytest -q "$@"
