#!/usr/bin/env node
// Tokenizes .jadpo files with the TextMate grammar, as VS Code does, and checks that
// the grammar holds up on real programs.
//
// Usage: node tokenize-all.js CLEAN_LIST [BROKEN_LIST]
// Each list names one file a line. Every file must tokenize without an exception.
// A file of CLEAN_LIST (no syntax error) must also end with every block, list and
// call closed (the grammar's rule stack back at the top level) and have no token
// scoped `invalid`. Files of BROKEN_LIST have syntax errors and are only tokenized.
'use strict';

const fs = require('fs');
const path = require('path');
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const GRAMMAR = path.join(__dirname, '..', 'jadpo.tmLanguage.json');

function readList(file) {
  if (!file) return [];
  return fs.readFileSync(file, 'utf8').split('\n').map(s => s.trim()).filter(Boolean);
}

async function loadGrammar() {
  const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm'));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: sources => new oniguruma.OnigScanner(sources),
      createOnigString: s => new oniguruma.OnigString(s),
    }),
    loadGrammar: async scope => {
      if (scope !== 'source.jadpo') return null;
      return vsctm.parseRawGrammar(fs.readFileSync(GRAMMAR, 'utf8'), GRAMMAR);
    },
  });
  return registry.loadGrammar('source.jadpo');
}

// Returns the problems found in one file: an empty list when it is fine.
function check(grammar, file, clean) {
  const problems = [];
  const lines = fs.readFileSync(file, 'utf8').split(/\r?\n/);
  let stack = vsctm.INITIAL;
  lines.forEach((line, i) => {
    const result = grammar.tokenizeLine(line, stack);
    if (clean) {
      for (const token of result.tokens) {
        const invalid = token.scopes.find(s => s.startsWith('invalid'));
        if (invalid) {
          const text = line.slice(token.startIndex, token.endIndex);
          problems.push(`${file}:${i + 1}:${token.startIndex + 1}: \`${text}\` is scoped ${invalid}`);
        }
      }
    }
    stack = result.ruleStack;
  });
  if (clean && stack.depth !== 1) {
    problems.push(`${file}: the grammar ends ${stack.depth - 1} rule(s) deep: a block, list or call was never closed`);
  }
  return problems;
}

async function main() {
  const clean = readList(process.argv[2]);
  const broken = readList(process.argv[3]);
  if (clean.length === 0) {
    console.error('usage: node tokenize-all.js CLEAN_LIST [BROKEN_LIST] (CLEAN_LIST is empty)');
    process.exit(2);
  }
  const grammar = await loadGrammar();
  let failed = 0;
  for (const [files, isClean] of [[clean, true], [broken, false]]) {
    for (const file of files) {
      let problems;
      try {
        problems = check(grammar, file, isClean);
      } catch (e) {
        problems = [`${file}: tokenizing threw ${e && e.stack ? e.stack : e}`];
      }
      if (problems.length > 0) {
        failed += 1;
        for (const p of problems) console.error(p);
      }
    }
  }
  const total = clean.length + broken.length;
  console.log(`textmate: ${total} files tokenized (${clean.length} without syntax errors checked in full)`);
  console.log(`${total - failed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
