#!/usr/bin/env bash
# Builds the playground into playground/dist/ (docs/playground.md): jadpo-wasm for
# wasm32-unknown-unknown in the size-first `wasm` profile, wasm-bindgen's glue for
# the web, then the page bundled by esbuild (CodeMirror from npm, the examples and
# the grammar's words built in). Serve dist/ with any static server.
#
# Needs: the wasm32-unknown-unknown target, wasm-bindgen-cli of the same version as
# the wasm-bindgen crate in Cargo.lock, clang (SQLite's C for wasm32), node and npm.
# .ci/playground.sh installs them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
target="${CARGO_TARGET_DIR:-$repo/target}"
dist="$here/dist"

cd "$repo"
cargo build --locked --profile wasm --target wasm32-unknown-unknown -p jadpo-wasm
rm -rf "$dist"
mkdir -p "$dist"
wasm-bindgen --target web --remove-name-section --remove-producers-section --no-typescript \
  --out-dir "$dist" "$target/wasm32-unknown-unknown/wasm/jadpo_wasm.wasm"

cd "$here"
npm ci --no-audit --no-fund --silent
node build.mjs
echo "playground built in $dist: serve it with  python3 -m http.server -d playground/dist"
