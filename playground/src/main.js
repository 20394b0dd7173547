// The jadpo playground: a CodeMirror editor over jadpo's own checker, formatter,
// plan and test runner, compiled to WebAssembly (crates/jadpo-wasm). Everything
// runs in the page; nothing is sent anywhere. docs/playground.md tells how it is
// built and what each part does.
import { EditorView, basicSetup } from "codemirror";
import { EditorState } from "@codemirror/state";
import { hoverTooltip, keymap } from "@codemirror/view";
import { linter, lintGutter, forceLinting } from "@codemirror/lint";
import { jadpoLanguage, jadpoHighlight } from "./language.js";
import { byteOffsets, utf16ToByte } from "./offsets.js";
import { decodeShared, encodeShared } from "./share.js";
import { timeline } from "./timeline.js";
import examples from "virtual:examples";
import init, * as jadpo from "./jadpo_wasm.js";

const $ = (id) => document.getElementById(id);
const status = $("status");

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

let view;
let lastCheck = null;

/** A call into the wasm module: its JSON answer parsed, or `fallback` (with the
 * failure said in the status line) if the module failed, which is a defect. */
function ask(what, fallback, ...args) {
  try {
    return JSON.parse(jadpo[what](...args));
  } catch (e) {
    status.textContent = `jadpo's ${what} failed: ${e}. Please report it with the program.`;
    status.classList.add("error-text");
    return fallback;
  }
}

const NO_CHECK = { diagnostics: [], summary: { errors: 0, warnings: 0, files: 1 } };

/** The buffer checked: CodeMirror's diagnostics, the problems list, the counts. */
function checkNow(text) {
  const t0 = performance.now();
  const report = ask("check", NO_CHECK, text);
  const ms = performance.now() - t0;
  const toPos = byteOffsets(text);
  lastCheck = { text, report, ms };
  renderProblems(report, toPos);
  status.textContent = `Checked in ${ms < 1 ? ms.toFixed(2) : ms.toFixed(1)} ms.`;
  return report.diagnostics.map((d) => ({
    from: toPos(d.start.offset),
    to: toPos(d.end.offset),
    severity: d.severity === "error" ? "error" : "warning",
    source: d.code,
    message: d.message + (d.help ? `\nhelp: ${d.help}` : ""),
  }));
}

function renderProblems(report, toPos) {
  const list = $("problems");
  list.replaceChildren();
  const { errors, warnings } = report.summary;
  $("summary").textContent = `${errors} ${errors === 1 ? "error" : "errors"}, ${warnings} ${warnings === 1 ? "warning" : "warnings"}`;
  for (const d of report.diagnostics) {
    const jump = () => {
      const pos = toPos(d.start.offset);
      view.dispatch({ selection: { anchor: pos }, scrollIntoView: true });
      view.focus();
    };
    list.append(
      el("li", { class: `problem ${d.severity}`, "data-code": d.code },
        el("button", { type: "button", class: "link", onclick: jump },
          el("span", { class: "where" }, `${d.start.line}:${d.start.column}`), " ",
          el("code", { class: "code" }, d.code)),
        " ",
        el("span", { class: "message" }, d.message),
        d.help ? el("div", { class: "help" }, `help: ${d.help}`) : null,
        ...d.labels.map((l) => el("div", { class: "label" },
          el("button", { type: "button", class: "link", onclick: () => {
            view.dispatch({ selection: { anchor: toPos(l.start.offset) }, scrollIntoView: true });
            view.focus();
          } }, `${l.start.line}:${l.start.column}`), ` ${l.message}`))),
    );
  }
}

/** The plan of the subscriber at the cursor, in the side panel. */
function showPlanAt(text, pos) {
  const h = ask("hover", null, text, utf16ToByte(text, pos));
  const out = $("plan");
  if (!h) {
    if (!out.dataset.subscriber) return;
    out.dataset.subscriber = "";
    out.dataset.text = "";
    out.replaceChildren(el("p", { class: "hint" }, "Put the cursor in a subscriber to see the plan of its attempts."));
    return;
  }
  const shown = `${h.checked}\n${h.plan.text}`;
  if (out.dataset.subscriber === h.subscriber && out.dataset.text === shown) return;
  out.dataset.subscriber = h.subscriber;
  out.dataset.text = shown;
  out.replaceChildren(el("pre", { class: "plan-text" }, h.plan.text), uncheckedNote(h));
}

/** What a plan leaves out while the program does not check. */
function uncheckedNote(h) {
  if (h.checked) return null;
  return el("p", { class: "hint unchecked" },
    "The program has errors: this is the budget its retry: writes; its connection's rate and ordering show once it checks.");
}

const planHover = hoverTooltip((v, pos) => {
  const text = v.state.doc.toString();
  const h = ask("hover", null, text, utf16ToByte(text, pos));
  if (!h) return null;
  const toPos = byteOffsets(text);
  return {
    pos: toPos(h.start),
    end: toPos(h.end),
    above: true,
    create: () => ({ dom: el("div", { class: "hover-plan" }, el("pre", {}, h.plan.text), uncheckedNote(h)) }),
  };
});

let applyingFormat = false;

function setText(text) {
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
}

/** The formatter: its text beside a button that applies it. */
function formatBuffer() {
  const text = view.state.doc.toString();
  const r = ask("format", { ok: false, message: "The formatter failed." }, text);
  const out = $("format-result");
  out.hidden = false;
  if (!r.ok) {
    out.replaceChildren(el("p", { class: "error-text", role: "alert" }, r.message));
    return;
  }
  if (!r.changed) {
    out.replaceChildren(el("p", { role: "status" }, "Already formatted."));
    return;
  }
  const apply = el("button", { type: "button", id: "apply-format", onclick: () => {
    applyingFormat = true;
    try { setText(r.text); } finally { applyingFormat = false; }
    out.replaceChildren(el("p", { role: "status" }, "Formatted."));
    view.focus();
  } }, "Apply");
  const cancel = el("button", { type: "button", onclick: () => { out.hidden = true; } }, "Close");
  out.replaceChildren(el("div", { class: "actions" }, apply, cancel), el("pre", { class: "formatted" }, r.text));
  apply.focus();
}

/** Every test block in virtual time, each with its attempts on a timeline. */
function runTests() {
  const text = view.state.doc.toString();
  const out = $("tests");
  const written = $("seed").value.trim() || "0";
  if (!/^[0-9]+$/.test(written) || BigInt(written) > 0xffffffffffffffffn) {
    out.replaceChildren(el("p", { class: "error-text", role: "alert" }, "The seed is a whole number from 0 to 18446744073709551615."));
    return;
  }
  const seed = BigInt(written);
  const r = ask("run_tests", { ok: false, message: "The test runner failed." }, text, seed);
  out.replaceChildren();
  if (!r.ok) {
    out.append(el("p", { class: "error-text", role: "alert" }, r.message));
    return;
  }
  if (r.message) out.append(el("p", {}, r.message));
  for (const test of r.tests) {
    const line = () => {
      const pos = view.state.doc.line(Math.min(test.line, view.state.doc.lines)).from;
      view.dispatch({ selection: { anchor: pos }, scrollIntoView: true });
      view.focus();
    };
    out.append(
      el("section", { class: `test ${test.passed ? "passed" : "failed"}`, "data-test": test.name },
        el("h3", {},
          el("span", { class: "verdict" }, test.passed ? "ok" : "FAILED"), " ",
          el("button", { type: "button", class: "link", onclick: line }, test.name)),
        test.failure ? el("pre", { class: "failure" }, test.failure.text) : null,
        test.trace_error ? el("p", { class: "error-text" }, test.trace_error) : null,
        timeline(test, out.clientWidth)),
    );
  }
  out.append(el("p", { class: "tests-summary", role: "status" }, r.summary));
}

async function share() {
  const text = view.state.doc.toString();
  const fragment = await encodeShared(text);
  history.replaceState(null, "", `#${fragment}`);
  const link = $("share-link");
  link.hidden = false;
  link.value = location.href;
  link.select();
  try {
    await navigator.clipboard.writeText(location.href);
    $("share-note").textContent = "Link copied.";
  } catch {
    $("share-note").textContent = "Copy the link above.";
  }
}

async function initialText() {
  const shared = await decodeShared(location.hash.slice(1));
  if (shared != null) return shared;
  return examples.find((e) => e.name === "payments")?.text ?? examples[0]?.text ?? "";
}

/** How long `runs` checks of `text` take, in milliseconds: the median of the
 * runs one by one, and their mean timed as one batch (the browser's clock is
 * coarse, 0.1 ms in Chromium, so the batch's mean is the finer figure). */
function measureCheck(text, runs = 50) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    jadpo.check(text);
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const t0 = performance.now();
  for (let i = 0; i < runs; i++) jadpo.check(text);
  const mean = (performance.now() - t0) / runs;
  return { median: times[Math.floor(times.length / 2)], mean, max: times[times.length - 1] };
}

async function main() {
  await init();
  $("version").textContent = `jadpo ${jadpo.version()}`;
  const select = $("example");
  for (const e of examples) select.append(el("option", { value: e.name }, e.name));
  select.addEventListener("change", () => {
    const e = examples.find((x) => x.name === select.value);
    if (e) {
      setText(e.text);
      history.replaceState(null, "", location.pathname);
    }
  });
  view = new EditorView({
    parent: $("editor"),
    state: EditorState.create({
      doc: await initialText(),
      extensions: [
        basicSetup,
        jadpoLanguage,
        jadpoHighlight,
        lintGutter(),
        linter((v) => checkNow(v.state.doc.toString()), { delay: 100 }),
        planHover,
        keymap.of([
          { key: "Mod-Enter", run: () => { runTests(); return true; } },
          { key: "Shift-Alt-f", run: () => { formatBuffer(); return true; } },
        ]),
        EditorView.updateListener.of((u) => {
          if (u.selectionSet || u.docChanged) schedulePlan();
          // The formatter's answer was for the text as it was.
          if (u.docChanged && !applyingFormat) $("format-result").hidden = true;
        }),
        EditorView.contentAttributes.of({ "aria-label": "jadpo program" }),
        EditorView.lineWrapping,
      ],
    }),
  });
  let planTimer = null;
  function schedulePlan() {
    clearTimeout(planTimer);
    planTimer = setTimeout(() => showPlanAt(view.state.doc.toString(), view.state.selection.main.head), 120);
  }
  $("format").addEventListener("click", formatBuffer);
  $("run").addEventListener("click", runTests);
  $("share").addEventListener("click", share);
  window.addEventListener("hashchange", async () => {
    const text = await decodeShared(location.hash.slice(1));
    if (text != null && text !== view.state.doc.toString()) setText(text);
  });
  forceLinting(view);
  showPlanAt(view.state.doc.toString(), 0);
  window.jadpoPlayground = { view, measureCheck, examples, lastCheck: () => lastCheck };
  document.body.dataset.ready = "true";
}

main().catch((e) => {
  status.textContent = `The playground could not start: ${e}`;
  status.classList.add("error-text");
});
