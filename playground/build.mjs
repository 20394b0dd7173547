// Bundles the playground's page (src/main.js, CodeMirror 6 from npm) into dist/
// with esbuild. Two modules are made here at build time rather than kept in the
// tree, so that each fact has one definition:
//   - `virtual:examples`: examples/*.jadpo, a program's `NAME_test.jadpo` joined
//     to its `NAME.jadpo` (the playground's buffer is one file);
//   - `virtual:grammar`: the words and scopes of the TextMate grammar
//     (editors/vscode/syntaxes/jadpo.tmLanguage.json) that the highlighter uses.
// Run by build.sh, after wasm-bindgen has written dist/jadpo_wasm.js.
import * as esbuild from "esbuild";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { grammarTables } from "./src/grammar-tables.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..");
const dist = path.join(here, "dist");

function examples() {
  const dir = path.join(repo, "examples");
  const files = fs.readdirSync(dir).filter((f) => f.endsWith(".jadpo")).sort();
  const out = [];
  for (const f of files) {
    if (f.endsWith("_test.jadpo")) continue;
    const name = f.slice(0, -".jadpo".length);
    let text = fs.readFileSync(path.join(dir, f), "utf8");
    const tests = path.join(dir, `${name}_test.jadpo`);
    if (fs.existsSync(tests)) text += "\n" + fs.readFileSync(tests, "utf8");
    out.push({ name, text });
  }
  return out;
}

const virtual = {
  name: "virtual",
  setup(build) {
    build.onResolve({ filter: /^virtual:/ }, (args) => ({ path: args.path, namespace: "virtual" }));
    build.onLoad({ filter: /.*/, namespace: "virtual" }, (args) => {
      if (args.path === "virtual:examples") {
        return { contents: JSON.stringify(examples()), loader: "json" };
      }
      if (args.path === "virtual:grammar") {
        const grammar = JSON.parse(
          fs.readFileSync(path.join(repo, "editors", "vscode", "syntaxes", "jadpo.tmLanguage.json"), "utf8"),
        );
        return { contents: JSON.stringify(grammarTables(grammar)), loader: "json" };
      }
      return null;
    });
  },
};

await esbuild.build({
  entryPoints: [path.join(here, "src", "main.js")],
  bundle: true,
  format: "esm",
  minify: true,
  sourcemap: false,
  target: ["es2022"],
  outfile: path.join(dist, "playground.js"),
  plugins: [virtual],
  // wasm-bindgen's glue is loaded as its own module, beside the wasm it fetches.
  external: ["./jadpo_wasm.js"],
  logLevel: "warning",
});
fs.copyFileSync(path.join(here, "index.html"), path.join(dist, "index.html"));
fs.copyFileSync(path.join(here, "src", "style.css"), path.join(dist, "style.css"));
console.log("built", path.relative(repo, dist));
