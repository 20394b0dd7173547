#!/usr/bin/env bash
# Tries the Neovim setup of docs/editors.md as written: runs its shell block (building
# the parser into ~/.local/share/nvim/site) and each of its Lua configurations, in a
# home folder of its own, against a stand-in for `jadpoc lsp`, in a headless Neovim.
# Needs Neovim 0.11 or newer as $NVIM (default: nvim on PATH), a C compiler, python3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
nvim=${NVIM:-nvim}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The Neovim section's code blocks, in order: the shell block, then the Lua ones.
python3 - "$repo/docs/editors.md" "$work" <<'PY'
import re, sys
doc, work = open(sys.argv[1]).read(), sys.argv[2]
section = doc.split("\n## Neovim\n", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
shell = [code for lang, code in blocks if lang == "sh"]
lua = [code for lang, code in blocks if lang == "lua"]
assert len(shell) == 1 and len(lua) == 2, "docs/editors.md: the Neovim section has one sh and two lua blocks"
open(f"{work}/setup.sh", "w").write(shell[0])
open(f"{work}/init-0.11.lua", "w").write(lua[0])
# The 0.9/0.10 block replaces only the autocommand: the filetype line comes first.
open(f"{work}/init-0.9.lua", "w").write("vim.filetype.add({ extension = { jadpo = 'jadpo' } })\n" + lua[1])
PY

mkdir -p "$work/bin" "$work/project"
cp "$here/stand-in-lsp.py" "$work/bin/jadpoc"
chmod +x "$work/bin/jadpoc"
printf 'event Paid {\n    id: string\n}\n' >"$work/project/app.jadpo"
mkdir "$work/project/.git"

for init in init-0.11.lua init-0.9.lua; do
  echo "-- docs/editors.md, Neovim, with $init"
  home=$work/home-$init
  mkdir -p "$home/.config/nvim"
  (cd "$repo" && HOME=$home bash -e "$work/setup.sh")
  cp "$work/$init" "$home/.config/nvim/init.lua"
  (
    cd "$work/project"
    env -u XDG_CONFIG_HOME -u XDG_DATA_HOME -u XDG_STATE_HOME -u XDG_CACHE_HOME \
      HOME="$home" PATH="$work/bin:$PATH" STAND_IN_LOG="$work/lsp-$init.log" \
      "$nvim" --headless -c "let g:jadpo_project = '$work/project'" -c "luafile $here/check.lua" app.jadpo
  )
  echo
  grep -qx 'argv lsp' "$work/lsp-$init.log"
done
echo "the Neovim setup of docs/editors.md works"
