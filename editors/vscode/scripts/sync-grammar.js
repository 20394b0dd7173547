'use strict';
// Copies the TextMate grammar, kept once in the repository's grammar/ folder, into
// the extension, where the committed copy lets VS Code load the extension from a
// checkout as it is. With --check, writes nothing and fails if the copy differs
// (CI, `vsce package` and `cargo test` check it).

const fs = require('fs');
const path = require('path');

const source = path.join(__dirname, '..', '..', '..', 'grammar', 'jadpo.tmLanguage.json');
const target = path.join(__dirname, '..', 'syntaxes', 'jadpo.tmLanguage.json');
const shown = file => path.relative(process.cwd(), file);

if (process.argv[2] === '--check') {
  const copy = fs.existsSync(target) ? fs.readFileSync(target) : null;
  if (copy === null || !copy.equals(fs.readFileSync(source))) {
    console.error(`${shown(target)} is not a copy of ${shown(source)}: run \`npm run sync-grammar\` in editors/vscode and commit it`);
    process.exit(1);
  }
} else {
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.copyFileSync(source, target);
  console.log(`copied ${shown(source)} to ${shown(target)}`);
}
