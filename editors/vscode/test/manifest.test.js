'use strict';
// The manifest's contributions point at files that exist and say what the spec says.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));

test('the language is jadpo, for .jadpo files', () => {
  const [language] = manifest.contributes.languages;
  assert.equal(language.id, 'jadpo');
  assert.deepEqual(language.extensions, ['.jadpo']);
  assert.ok(fs.existsSync(path.join(root, language.configuration)));
});

test('the grammar is the repository TextMate grammar', () => {
  const [grammar] = manifest.contributes.grammars;
  assert.equal(grammar.language, 'jadpo');
  assert.equal(grammar.scopeName, 'source.jadpo');
  const source = JSON.parse(fs.readFileSync(path.join(root, '..', '..', 'grammar', 'jadpo.tmLanguage.json'), 'utf8'));
  assert.equal(source.scopeName, grammar.scopeName);
  assert.equal(grammar.path, './syntaxes/jadpo.tmLanguage.json');
  // Committed, so that the extension runs from a checkout as it is.
  assert.ok(fs.existsSync(path.join(root, grammar.path)));
});

test('the server path setting defaults to jadpoc', () => {
  const setting = manifest.contributes.configuration.properties['jadpo.server.path'];
  assert.equal(setting.type, 'string');
  assert.equal(setting.default, 'jadpoc');
});

test('the language configuration has the comments and pairs of the language', () => {
  const config = JSON.parse(fs.readFileSync(path.join(root, 'language-configuration.json'), 'utf8'));
  assert.deepEqual(config.comments, { lineComment: '//', blockComment: ['/*', '*/'] });
  assert.deepEqual(config.brackets, [['{', '}'], ['[', ']'], ['(', ')']]);
  const opens = config.autoClosingPairs.map(p => p.open);
  assert.deepEqual(opens, ['{', '[', '(', '"', '/*']);
  assert.deepEqual(config.surroundingPairs.map(p => p[0]), ['{', '[', '(', '"']);
});

test('the language client resolves as extension.js requires it', () => {
  const resolved = require.resolve('vscode-languageclient/node', { paths: [root] });
  assert.match(resolved, /vscode-languageclient[\\/]lib[\\/]node[\\/]main\.js$/);
});
