'use strict';
// Copies the TextMate grammar, kept once in the repository's grammar/ folder, into
// the extension before it is packaged (or run from source).

const fs = require('fs');
const path = require('path');

const source = path.join(__dirname, '..', '..', '..', 'grammar', 'jadpo.tmLanguage.json');
const target = path.join(__dirname, '..', 'syntaxes', 'jadpo.tmLanguage.json');

fs.mkdirSync(path.dirname(target), { recursive: true });
fs.copyFileSync(source, target);
console.log(`copied ${path.relative(process.cwd(), source)} to ${path.relative(process.cwd(), target)}`);
