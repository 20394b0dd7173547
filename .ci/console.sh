#!/usr/bin/env bash
# What CI runs for the operator's console in a real browser: Debian's Chromium
# (installed with apt-get when missing) driven by playwright-core (from the
# committed lock file) through tests/console/console.test.js, on a store that
# `jadpoc run` fills with failed deliveries. Screenshots of every page are left in
# target/console-screenshots/ as test artifacts.
#
# It expects target/debug/jadpoc (built by `cargo test`) and builds it when
# missing. Needs: cargo, node and npm, and apt-get when Chromium is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/chromium ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq chromium >/dev/null
fi
if [ ! -x target/debug/jadpoc ]; then
  cargo build -p jadpoc --locked
fi
(cd tests/console && npm ci --no-audit --no-fund --silent)
JADPOC="$PWD/target/debug/jadpoc" CHROMIUM=/usr/bin/chromium node tests/console/console.test.js
