'use strict';
// Runs extension.js against stand-ins for the `vscode` module and the language
// client, to check what it starts and when it restarts.
const test = require('node:test');
const assert = require('node:assert/strict');
const Module = require('module');

function harness({ serverPath = 'jadpoc', failStart = false } = {}) {
  const state = { clients: [], errors: [], commands: {}, configListeners: [], serverPath };
  class FakeClient {
    constructor(id, name, serverOptions, clientOptions) {
      Object.assign(this, { id, name, serverOptions, clientOptions, started: false, stopped: false });
      state.clients.push(this);
    }
    async start() {
      if (failStart) throw new Error('spawn jadpoc ENOENT');
      this.started = true;
    }
    async stop() {
      this.stopped = true;
    }
  }
  const vscode = {
    workspace: {
      workspaceFolders: [{ uri: { fsPath: '/work/app' } }],
      getConfiguration: section => ({
        get: key => (section === 'jadpo' && key === 'server.path' ? state.serverPath : undefined),
      }),
      createFileSystemWatcher: glob => ({ glob, dispose() {} }),
      onDidChangeConfiguration: listener => {
        state.configListeners.push(listener);
        return { dispose() {} };
      },
    },
    window: {
      createOutputChannel: name => ({ name, dispose() {} }),
      showErrorMessage: async message => {
        state.errors.push(message);
        return undefined;
      },
    },
    commands: {
      registerCommand: (name, fn) => {
        state.commands[name] = fn;
        return { dispose() {} };
      },
      executeCommand: async () => undefined,
    },
  };
  const stubs = { vscode, 'vscode-languageclient/node': { LanguageClient: FakeClient } };
  const load = Module._load;
  Module._load = function (request, ...rest) {
    return Object.prototype.hasOwnProperty.call(stubs, request) ? stubs[request] : load.call(this, request, ...rest);
  };
  const file = require.resolve('../extension');
  delete require.cache[file];
  try {
    state.extension = require(file);
  } finally {
    Module._load = load;
  }
  state.context = { subscriptions: [] };
  return state;
}

test('activation starts `jadpoc lsp` for jadpo files', async () => {
  const h = harness();
  await h.extension.activate(h.context);
  assert.equal(h.clients.length, 1);
  const client = h.clients[0];
  assert.equal(client.started, true);
  assert.equal(client.serverOptions.run.command, 'jadpoc');
  assert.deepEqual(client.serverOptions.run.args, ['lsp']);
  assert.deepEqual(client.clientOptions.documentSelector, [
    { scheme: 'file', language: 'jadpo' },
    { scheme: 'untitled', language: 'jadpo' },
  ]);
  assert.equal(client.clientOptions.synchronize.fileEvents.glob, '**/*.jadpo');
  assert.deepEqual(h.errors, []);
});

test('the server path setting is used, relative to the workspace', async () => {
  const h = harness({ serverPath: './target/debug/jadpoc' });
  await h.extension.activate(h.context);
  assert.equal(h.clients[0].serverOptions.run.command, require('path').resolve('/work/app/target/debug/jadpoc'));
});

test('changing the server path restarts the server with the new one', async () => {
  const h = harness();
  await h.extension.activate(h.context);
  h.serverPath = '/opt/jadpoc';
  await h.configListeners[0]({ affectsConfiguration: s => s === 'jadpo.server.path' });
  assert.equal(h.clients.length, 2);
  assert.equal(h.clients[0].stopped, true);
  assert.equal(h.clients[1].serverOptions.run.command, '/opt/jadpoc');
  await h.configListeners[0]({ affectsConfiguration: () => false });
  assert.equal(h.clients.length, 2);
});

test('the restart command starts a new server', async () => {
  const h = harness();
  await h.extension.activate(h.context);
  await h.commands['jadpo.restartServer']();
  assert.equal(h.clients.length, 2);
  assert.equal(h.clients[0].stopped, true);
  assert.equal(h.clients[1].started, true);
  await h.extension.deactivate();
  assert.equal(h.clients[1].stopped, true);
});

test('a server that cannot start is reported with the setting to fix', async () => {
  const h = harness({ failStart: true });
  await h.extension.activate(h.context);
  assert.equal(h.errors.length, 1);
  assert.match(h.errors[0], /could not start the language server `jadpoc lsp`: spawn jadpoc ENOENT/);
  assert.match(h.errors[0], /jadpo\.server\.path/);
});
