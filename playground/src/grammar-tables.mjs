// The highlighter's words and scopes, read from the TextMate grammar
// (editors/vscode/syntaxes/jadpo.tmLanguage.json) at build time: the declaration
// keywords and the scope of the name after each, the test steps' keywords and the
// scope of what follows them, the primitive types, and the regular expressions of
// numbers, durations and rates. The tokenizer (src/language.js) walks the text with
// these, so a keyword added to the grammar is highlighted here too.

/** The words of an alternation such as `\b(?:string|int)\b`. */
function words(regex) {
  const m = /\(\?:([A-Za-z_|]+)\)/.exec(regex);
  return m ? m[1].split("|") : [];
}

function strip(scope) {
  return scope ? scope.replace(/\.jadpo$/, "") : null;
}

export function grammarTables(grammar) {
  const repo = grammar.repository;
  const declarations = {};
  for (const [key, rule] of Object.entries(repo)) {
    if (!key.endsWith("-declaration") || !rule.begin) continue;
    const m = /^\\b\(([a-z]+)\)\\b/.exec(rule.begin);
    if (!m) continue;
    const caps = rule.beginCaptures || {};
    declarations[m[1]] = { keyword: strip(caps["1"]?.name), name: strip(caps["2"]?.name) };
  }
  // A test's name is its string.
  const steps = {};
  for (const p of repo["test-steps"].patterns) {
    const m = p.match && /^\\b\(([a-z]+)\)/.exec(p.match);
    if (!m) continue;
    const caps = p.captures || {};
    const step = steps[m[1]] || { keyword: strip(caps["1"]?.name), name: null, then: {} };
    const second = /^\\b\([a-z]+\)\\s\+\(([a-z]+)\)\\s\+/.exec(p.match);
    if (second) {
      // `expect breaker NAME`: a keyword, then a name of its own scope.
      step.then[second[1]] = { keyword: strip(caps["2"]?.name), name: strip(caps["3"]?.name) };
    } else if (caps["2"]?.name) {
      step.name = strip(caps["2"].name);
    } else if (caps["2"]?.patterns) {
      step.name = strip(caps["2"].patterns.at(-1).name);
    }
    steps[m[1]] = step;
  }
  const typeName = repo["type-name"].patterns;
  const operators = repo.operators.patterns;
  const entry = repo.entry.patterns;
  // `on: EVENT` and `via: CONNECTION`: the scope of the value after the key.
  const keyValues = {};
  for (const p of entry) {
    const m = /^\(\?<!\[\\w\.\]\)\(([a-z]+)\)/.exec(p.match || "");
    if (!m || !p.captures?.["3"]) continue;
    const c = p.captures["3"];
    keyValues[m[1]] = strip(c.name || c.patterns.at(-1).name);
  }
  const values = repo.values.patterns;
  const boolean = values.find((p) => p.name === "constant.language.boolean.jadpo");
  const builtin = repo.call.beginCaptures["1"].patterns.find((p) => p.name?.startsWith("support.function"));
  return {
    declarations,
    steps,
    keyValues,
    primitives: words(typeName[0].match),
    primitiveScope: strip(typeName[0].name),
    booleans: words(boolean.match),
    builtins: [builtin.match.replace(/\\b/g, "")],
    logical: words(operators.find((p) => p.name === "keyword.operator.logical.jadpo").match),
    membership: ["in"],
    regex: {
      duration: repo.duration.match,
      rate: repo.rate.match,
      integer: repo.integer.match,
      invalidNumber: repo["invalid-number"].match,
      comparison: operators.find((p) => p.name === "keyword.operator.comparison.jadpo").match,
      escape: repo.string.patterns[0].match,
    },
  };
}
