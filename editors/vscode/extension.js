'use strict';
// The jadpo extension: the language (highlighting, comments, brackets) is declared in
// package.json; this file starts `jadpoc lsp` and connects it to VS Code.

const os = require('os');
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');
const { SERVER_PATH_SETTING, resolveServerPath, serverOptions } = require('./server');

/** @type {LanguageClient | undefined} */
let client;
/** @type {vscode.OutputChannel | undefined} */
let output;

function workspaceFolderPath() {
  const folders = vscode.workspace.workspaceFolders;
  return folders && folders.length > 0 ? folders[0].uri.fsPath : undefined;
}

async function start() {
  const folder = workspaceFolderPath();
  const configured = vscode.workspace.getConfiguration('jadpo').get(SERVER_PATH_SETTING);
  const command = resolveServerPath(configured, folder, os.homedir());
  client = new LanguageClient('jadpo', 'jadpo', serverOptions(command, folder), {
    documentSelector: [
      { scheme: 'file', language: 'jadpo' },
      { scheme: 'untitled', language: 'jadpo' },
    ],
    // The program is every .jadpo file of the workspace: tell the server when one
    // changes on disk, not only when it is open.
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/*.jadpo') },
    outputChannel: output,
    traceOutputChannel: output,
  });
  try {
    await client.start();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    client = undefined;
    const choice = await vscode.window.showErrorMessage(
      `jadpo: could not start the language server \`${command} lsp\`: ${message}. ` +
        'Install jadpoc or set `jadpo.server.path` to it.',
      'Open Settings',
    );
    if (choice === 'Open Settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'jadpo.server.path');
    }
  }
}

async function stop() {
  const running = client;
  client = undefined;
  if (running) {
    await running.stop();
  }
}

async function restart() {
  await stop();
  await start();
}

/** @param {vscode.ExtensionContext} context */
async function activate(context) {
  output = vscode.window.createOutputChannel('jadpo');
  context.subscriptions.push(
    output,
    vscode.commands.registerCommand('jadpo.restartServer', restart),
    vscode.workspace.onDidChangeConfiguration(event => {
      if (event.affectsConfiguration(`jadpo.${SERVER_PATH_SETTING}`)) {
        return restart();
      }
      return undefined;
    }),
  );
  await start();
}

function deactivate() {
  return stop();
}

module.exports = { activate, deactivate };
