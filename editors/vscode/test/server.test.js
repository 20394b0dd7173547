'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const { resolveServerPath, serverOptions, DEFAULT_SERVER_PATH } = require('../server');

test('the default server is jadpoc looked up on PATH', () => {
  assert.equal(DEFAULT_SERVER_PATH, 'jadpoc');
  assert.equal(resolveServerPath(undefined, '/work', '/home/u'), 'jadpoc');
  assert.equal(resolveServerPath('', '/work', '/home/u'), 'jadpoc');
  assert.equal(resolveServerPath('   ', '/work', '/home/u'), 'jadpoc');
  assert.equal(resolveServerPath(42, '/work', '/home/u'), 'jadpoc');
});

test('a bare name or an absolute path is used as written', () => {
  assert.equal(resolveServerPath('jadpoc-nightly', '/work', '/home/u'), 'jadpoc-nightly');
  assert.equal(resolveServerPath('/opt/jadpo/bin/jadpoc', '/work', '/home/u'), '/opt/jadpo/bin/jadpoc');
});

test('a relative path is taken from the workspace folder', () => {
  assert.equal(
    resolveServerPath('./target/debug/jadpoc', '/work/app', '/home/u'),
    path.resolve('/work/app/target/debug/jadpoc'),
  );
  assert.equal(resolveServerPath('bin/jadpoc', '/work/app', '/home/u'), path.resolve('/work/app/bin/jadpoc'));
});

test('a path under ~ is taken from the home directory', () => {
  assert.equal(resolveServerPath('~/.cargo/bin/jadpoc', '/work', '/home/u'), path.join('/home/u', '.cargo/bin/jadpoc'));
});

test('the server runs as `jadpoc lsp` over stdio in the workspace folder', () => {
  const options = serverOptions('/bin/jadpoc', '/work/app');
  assert.deepEqual(options.run, {
    command: '/bin/jadpoc',
    args: ['lsp'],
    transport: 0,
    options: { cwd: '/work/app' },
  });
  assert.deepEqual(options.debug, options.run);
  assert.deepEqual(serverOptions('jadpoc', undefined).run.options, {});
});
