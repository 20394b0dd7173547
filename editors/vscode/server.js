'use strict';
// How the extension starts the language server. Kept free of the `vscode` module so
// that it is tested with plain Node.

const path = require('path');

/** The setting that names the `jadpoc` executable, and its default. */
const SERVER_PATH_SETTING = 'server.path';
const DEFAULT_SERVER_PATH = 'jadpoc';

/**
 * The executable to run for the configured `jadpo.server.path`.
 *
 * A bare name (`jadpoc`) is looked up on PATH when the server starts; `~/` is the
 * home directory; a relative path with a directory in it (`./target/debug/jadpoc`)
 * is taken from the first workspace folder, as a path written in a workspace's
 * settings would be meant.
 *
 * @param {unknown} configured the setting's value
 * @param {string | undefined} workspaceFolder the first workspace folder's path
 * @param {string} home the user's home directory
 * @returns {string}
 */
function resolveServerPath(configured, workspaceFolder, home) {
  const value = typeof configured === 'string' ? configured.trim() : '';
  if (value === '') {
    return DEFAULT_SERVER_PATH;
  }
  if (value === '~' || value.startsWith('~/')) {
    return path.join(home, value.slice(1));
  }
  if (path.isAbsolute(value) || !/[\\/]/.test(value)) {
    return value;
  }
  return workspaceFolder ? path.resolve(workspaceFolder, value) : path.resolve(value);
}

/**
 * The server options for vscode-languageclient: `jadpoc lsp`, speaking LSP over
 * its standard input and output.
 *
 * @param {string} command the executable, from `resolveServerPath`
 * @param {string | undefined} workspaceFolder where the server runs
 */
function serverOptions(command, workspaceFolder) {
  const run = {
    command,
    args: ['lsp'],
    // TransportKind.stdio is 0 in vscode-languageclient; stdio is also its default
    // for an executable, written out here because the server speaks nothing else.
    transport: 0,
    options: workspaceFolder ? { cwd: workspaceFolder } : {},
  };
  return { run, debug: run };
}

module.exports = { SERVER_PATH_SETTING, DEFAULT_SERVER_PATH, resolveServerPath, serverOptions };
