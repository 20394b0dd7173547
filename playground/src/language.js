// jadpo's highlighting for CodeMirror: a StreamLanguage tokenizer whose words,
// scopes and number patterns come from the TextMate grammar (virtual:grammar,
// made by build.mjs from editors/vscode/syntaxes/jadpo.tmLanguage.json). Each
// token is named by its TextMate scope; `tagFor` maps scopes to highlight tags
// as VS Code's themes group them.
import { StreamLanguage, HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { tags as t } from "@lezer/highlight";
import g from "virtual:grammar";

const sticky = (src) => new RegExp(src, "y");
const RE = {
  duration: sticky(g.regex.duration),
  rate: sticky(g.regex.rate),
  integer: sticky(g.regex.integer),
  invalidNumber: sticky(g.regex.invalidNumber),
  comparison: sticky(g.regex.comparison),
  escape: sticky(g.regex.escape),
  ident: /[A-Za-z_][A-Za-z0-9_]*/y,
};

/** The highlight tag of a TextMate scope. */
export function tagFor(scope) {
  const rules = [
    ["comment", t.comment],
    ["keyword.declaration", t.definitionKeyword],
    ["keyword.control", t.controlKeyword],
    ["keyword.other.unit", t.unit],
    ["keyword.operator", t.operatorKeyword],
    ["keyword", t.keyword],
    ["support.type.property-name", t.propertyName],
    ["support.type.primitive", t.standard(t.typeName)],
    ["support.function", t.standard(t.function(t.variableName))],
    ["entity.name.type", t.definition(t.typeName)],
    ["entity.name.function", t.function(t.definition(t.variableName))],
    ["entity.name.namespace", t.namespace],
    ["constant.numeric", t.number],
    ["constant.language", t.bool],
    ["constant.character.escape", t.escape],
    ["string", t.string],
    ["variable.language", t.self],
    ["variable.other.member", t.propertyName],
    ["invalid", t.invalid],
    ["punctuation", t.punctuation],
  ];
  for (const [prefix, tag] of rules) if (scope === prefix || scope.startsWith(prefix + ".")) return tag;
  return t.content;
}

const SCOPES = new Set([
  "comment.line.double-slash", "comment.block", "string.quoted.double", "constant.character.escape",
  "invalid.illegal.escape", "constant.numeric.duration", "constant.numeric.rate", "constant.numeric.integer",
  "invalid.illegal.number", "constant.language.boolean", "support.type.property-name", "variable.language.event",
  "variable.other.member", "support.function.builtin", "entity.name.function", "keyword.operator.logical",
  "keyword.operator.membership", "keyword.operator.comparison", "punctuation.separator", "punctuation.section",
  "punctuation.accessor", g.primitiveScope,
  ...Object.values(g.declarations).flatMap((d) => [d.keyword, d.name]),
  ...Object.values(g.steps).flatMap((s) => [s.keyword, s.name, ...Object.values(s.then).flatMap((x) => [x.keyword, x.name])]),
  ...Object.values(g.keyValues),
].filter(Boolean));

// StreamLanguage reads dots and spaces in a token's name as tag modifiers, so a
// scope is named with underscores instead.
const tokenName = (scope) => scope && scope.replaceAll(".", "_");
const tokenTable = Object.fromEntries([...SCOPES].map((s) => [tokenName(s), tagFor(s)]));

function match(stream, re) {
  re.lastIndex = stream.pos;
  const m = re.exec(stream.string);
  if (!m || m[0].length === 0) return false;
  stream.pos += m[0].length;
  return true;
}

const jadpoStream = {
  name: "jadpo",
  startState: () => ({ comment: false, string: false, depth: 0, decl: null, pending: null, then: null, key: null, member: false }),
  copyState: (s) => ({ ...s }),
  token: (stream, s) => tokenName(scopeOf(stream, s)),
  languageData: { commentTokens: { line: "//", block: { open: "/*", close: "*/" } } },
  tokenTable,
};

/** The TextMate scope of the next token (null for none), moving the stream past it. */
function scopeOf(stream, s) {
    if (stream.sol()) s.string = false; // a string ends at its line's end
    if (s.comment) {
      if (stream.skipTo("*/")) { stream.pos += 2; s.comment = false; } else stream.skipToEnd();
      return "comment.block";
    }
    if (s.string) {
      if (match(stream, RE.escape)) return "constant.character.escape";
      if (stream.peek() === "\\") { stream.pos += Math.min(2, stream.string.length - stream.pos); return "invalid.illegal.escape"; }
      while (!stream.eol() && stream.peek() !== '"' && stream.peek() !== "\\") stream.next();
      if (stream.peek() === '"') { stream.next(); s.string = false; }
      return "string.quoted.double";
    }
    if (stream.eatSpace()) return null;
    if (stream.match("//")) { stream.skipToEnd(); return "comment.line.double-slash"; }
    if (stream.match("/*")) { s.comment = true; return "comment.block"; }
    const ch = stream.peek();
    if (ch === '"') { stream.next(); s.string = true; return "string.quoted.double"; }
    if (/[0-9]/.test(ch)) {
      s.pending = null;
      if (match(stream, RE.rate)) return "constant.numeric.rate";
      if (match(stream, RE.duration)) return "constant.numeric.duration";
      if (match(stream, RE.integer)) return "constant.numeric.integer";
      if (match(stream, RE.invalidNumber)) return "invalid.illegal.number";
      stream.next();
      return null;
    }
    if (match(stream, RE.ident)) {
      const word = stream.current();
      const member = s.member;
      s.member = false;
      if (member) return "variable.other.member";
      if (s.pending) {
        const scope = s.pending, then = s.then;
        s.pending = null; s.then = null;
        if (then && then[word]) { s.pending = then[word].name; return then[word].keyword; }
        return scope;
      }
      if (s.depth === 0 && g.declarations[word]) {
        s.decl = word;
        s.pending = g.declarations[word].name;
        return g.declarations[word].keyword;
      }
      if (s.depth === 1 && s.decl === "test" && g.steps[word]) {
        const step = g.steps[word];
        s.pending = step.name; s.then = step.then;
        return step.keyword;
      }
      if (word === "event" && stream.match(/^\s*\./, false)) return "variable.language.event";
      if (stream.match(/^\s*:/, false)) { s.key = word; return "support.type.property-name"; }
      const key = s.key;
      s.key = null;
      if (g.primitives.includes(word)) return g.primitiveScope;
      if (g.booleans.includes(word)) return "constant.language.boolean";
      if (g.logical.includes(word)) return "keyword.operator.logical";
      if (g.membership.includes(word)) return "keyword.operator.membership";
      if (stream.match(/^\s*\(/, false)) return g.builtins.includes(word) ? "support.function.builtin" : "entity.name.function";
      if (key && g.keyValues[key]) return g.keyValues[key];
      return null;
    }
    if (match(stream, RE.comparison)) return "keyword.operator.comparison";
    stream.next();
    if (ch === "{") { s.depth++; return "punctuation.section"; }
    if (ch === "}") { s.depth = Math.max(0, s.depth - 1); if (s.depth === 0) s.decl = null; return "punctuation.section"; }
    if ("()[]".includes(ch)) return "punctuation.section";
    if (ch === ".") { s.member = true; return "punctuation.accessor"; }
    if (ch === ":" || ch === ",") return "punctuation.separator";
    return null;
}

export const jadpoLanguage = StreamLanguage.define(jadpoStream);

// Plain colours that read on white and keep 4.5:1 contrast.
export const jadpoHighlight = syntaxHighlighting(
  HighlightStyle.define([
    { tag: t.comment, color: "#5c6370", fontStyle: "italic" },
    { tag: [t.definitionKeyword, t.controlKeyword, t.keyword], color: "#8b1e9b", fontWeight: "bold" },
    { tag: t.operatorKeyword, color: "#8b1e9b" },
    { tag: t.propertyName, color: "#1b5e9e" },
    { tag: [t.definition(t.typeName), t.standard(t.typeName)], color: "#9a5b00" },
    { tag: [t.function(t.definition(t.variableName)), t.standard(t.function(t.variableName))], color: "#0b6e4f" },
    { tag: t.namespace, color: "#9a3412" },
    { tag: [t.number, t.bool, t.unit], color: "#a1262b" },
    { tag: t.string, color: "#2f6b12" },
    { tag: t.escape, color: "#7c4a03" },
    { tag: t.self, color: "#8b1e9b", fontStyle: "italic" },
    { tag: t.invalid, color: "#b00020", textDecoration: "underline wavy" },
  ]),
);
