#!/usr/bin/env bash
# What CI runs for the browser playground (docs/playground.md): jadpo-wasm's unit
# tests and lints, then playground/build.sh (the WebAssembly build, wasm-bindgen,
# the page bundled by esbuild), then tests/playground/playground.test.js in
# Debian's Chromium, driven by playwright-core from the committed lock file.
# Screenshots are left in target/playground-screenshots/ as test artifacts.
#
# It installs what is missing: the wasm32-unknown-unknown target (rustup),
# wasm-bindgen-cli at the version of the wasm-bindgen crate in Cargo.lock (cargo
# install), clang (SQLite's C compiled for wasm32 by sqlite-wasm-rs) and Chromium
# (apt-get). Needs: cargo, node and npm.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
missing=()
command -v clang >/dev/null 2>&1 || missing+=(clang)
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then apt_install "${missing[@]}"; fi

rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true
# The CLI must be the crate's version exactly: the glue and the module are made together.
version="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
if [ -z "$version" ]; then
  echo "no wasm-bindgen in Cargo.lock" >&2
  exit 2
fi
if ! command -v wasm-bindgen >/dev/null 2>&1 || [ "$(wasm-bindgen --version | awk '{print $2}')" != "$version" ]; then
  # Not --locked: its lock file pins a webpki-roots that the registry no longer serves.
  cargo install --quiet wasm-bindgen-cli --version "=$version"
fi

cargo test -p jadpo-wasm --locked
cargo clippy -p jadpo-wasm --all-targets --locked -- -D warnings
bash playground/build.sh
(cd tests/playground && npm ci --no-audit --no-fund --silent)
DIST="$PWD/playground/dist" CHROMIUM=/usr/bin/chromium node tests/playground/playground.test.js
