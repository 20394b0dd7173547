// The playground in a real browser (Debian's Chromium, headless, driven by
// playwright-core), on playground/dist/ as playground/build.sh leaves it, served
// here on a loopback port: a mistake typed shows its diagnostic and code where
// `jadpoc check` puts it and clears when fixed; hover and the side panel show a
// subscriber's plan; Format shows and applies the canonical layout; Run tests
// shows each test and its attempts on a timeline; an example loads; a shared link
// round-trips; the keyboard reaches everything; the page reads at 320 px. It
// measures a check of examples/payments.jadpo in the page (median of 50) and the
// wasm's gzip size, and fails past 5 ms or 2 MiB. Screenshots go to
// target/playground-screenshots/ (test artifacts, never committed).
//
// Usage: node playground.test.js  (DIST names the built page, playground/dist by
// default; CHROMIUM the browser, /usr/bin/chromium by default).
"use strict";

const { chromium } = require("playwright-core");
const shared = require("../browser.js");
const { noSidewaysScroll } = shared;
const http = require("node:http");
const fs = require("node:fs");
const path = require("node:path");
const zlib = require("node:zlib");
const assert = require("node:assert/strict");

const repo = path.resolve(__dirname, "..", "..");
const dist = path.resolve(process.env.DIST || path.join(repo, "playground", "dist"));
const shots = path.join(repo, "target", "playground-screenshots");
const DEADLINE_MS = 30_000;
const CHECK_BUDGET_MS = 5;
const WASM_BUDGET_BYTES = 2 * 1024 * 1024;

const read = (p) => fs.readFileSync(path.join(repo, p), "utf8");
const payments = read("examples/payments.jadpo") + "\n" + read("examples/payments_test.jadpo");

fs.mkdirSync(shots, { recursive: true });

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".wasm": "application/wasm",
};

/** A static server of `dist` on 127.0.0.1, any free port. */
function serve() {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    const rel = url.pathname === "/" ? "index.html" : decodeURIComponent(url.pathname).replace(/^\/+/, "");
    const file = path.resolve(dist, rel);
    if (!file.startsWith(dist + path.sep) || !fs.existsSync(file)) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": TYPES[path.extname(file)] || "application/octet-stream" });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** Wait until `check()` gives a truthy value, within a generous deadline. */
const until = (what, check) => shared.until(what, check, DEADLINE_MS, 50);

const docText = (page) => page.evaluate(() => window.jadpoPlayground.view.state.doc.toString());

/** Put the whole buffer to `text`, as a paste would. */
async function setDoc(page, text) {
  await page.evaluate((t) => {
    const v = window.jadpoPlayground.view;
    v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: t } });
  }, text);
}

/** Select the first `needle` in the buffer, less its first `skip` characters,
 * and focus the editor. */
async function select(page, needle, skip = 0) {
  await page.evaluate(([n, k]) => {
    const v = window.jadpoPlayground.view;
    const at = v.state.doc.toString().indexOf(n);
    if (at < 0) throw new Error(`no ${n} in the buffer`);
    v.dispatch({ selection: { anchor: at + k, head: at + n.length }, scrollIntoView: true });
    v.focus();
  }, [needle, skip]);
}

const summary = (page) => page.textContent("#summary");

const checks = [];
function check(name, fn) {
  checks.push({ name, fn });
}

check("the page loads the wasm and checks the payments example clean", async ({ page, base }) => {
  await page.goto(`${base}/`);
  await until("the playground to start", () => page.$("body[data-ready=true]"));
  assert.equal(await docText(page), payments);
  await until("the check's summary", async () => (await summary(page)) === "0 errors, 0 warnings");
  assert.equal(await page.$$eval("#problems li", (l) => l.length), 0);
  const first = await page.evaluate(() => window.jadpoPlayground.lastCheck().ms);
  console.log(`figures: the first check after the page loads (payments with its tests): ${first.toFixed(1)} ms`);
  // Highlighting: the grammar's declaration keyword and a duration are coloured.
  const kinds = await page.$$eval(".cm-line span", (spans) => spans.map((s) => [s.textContent, getComputedStyle(s).color]));
  const colour = (word) => kinds.find(([t]) => t === word)?.[1];
  assert.ok(colour("subscriber"), "the keyword `subscriber` is a token of its own");
  assert.notEqual(colour("subscriber"), colour("record_payment_webhook"));
  assert.ok(colour("3d"), "the duration `3d` is a token of its own");
  await page.screenshot({ path: path.join(shots, "payments.png"), fullPage: true });
});

check("a typed mistake shows its diagnostic and code where jadpoc check puts it, and clears when fixed", async ({ page }) => {
  await select(page, "event.payment_id", "event.".length);
  await page.keyboard.type("paymentid");
  const text = await docText(page);
  const at = text.indexOf("event.paymentid") + "event.".length;
  const line = text.slice(0, at).split("\n").length;
  const column = at - text.lastIndexOf("\n", at - 1);
  const item = await until("the diagnostic in the problems list", () => page.$('#problems li[data-code="run.unknown_field"]'));
  assert.equal(await item.$eval(".where", (e) => e.textContent), `${line}:${column}`);
  assert.equal(await item.$eval(".code", (e) => e.textContent), "run.unknown_field");
  assert.match(await item.textContent(), /the event `PaymentReceived` has no field `paymentid`/);
  assert.match(await item.textContent(), /help: did you mean `payment_id`\?/);
  assert.equal(await summary(page), "1 error, 0 warnings");
  // CodeMirror marks exactly the span, and its tooltip names the code.
  const marked = await until("the lint mark", () => page.$(".cm-lintRange-error"));
  assert.equal(await marked.textContent(), "paymentid");
  await marked.hover();
  const tip = await until("the lint tooltip", () => page.$(".cm-tooltip-lint"));
  assert.match(await tip.textContent(), /run\.unknown_field/);
  assert.match(await tip.textContent(), /has no field `paymentid`/);
  await page.screenshot({ path: path.join(shots, "mistake.png"), fullPage: true });
  await page.mouse.move(0, 0);
  await select(page, "paymentid");
  await page.keyboard.type("payment_id");
  await until("the problems to clear", async () => (await summary(page)) === "0 errors, 0 warnings");
  assert.equal(await page.$$eval("#problems li", (l) => l.length), 0);
  assert.equal(await page.$(".cm-lintRange-error"), null);
  assert.equal(await docText(page), payments);
});

check("a diagnostic's other places are listed with it", async ({ page }) => {
  // tests/check/name_duplicate.jadpo: `jadpoc check` reports 19:12 name.duplicate,
  // labelled "first declared here" at 14:12.
  await setDoc(page, read("tests/check/name_duplicate.jadpo"));
  const item = await until("the duplicate", () => page.$('#problems li[data-code="name.duplicate"]'));
  assert.equal(await item.$eval(".where", (e) => e.textContent), "19:12");
  assert.equal(await item.$eval(".label", (e) => e.textContent), "14:12 first declared here");
  await item.$eval(".label button", (b) => b.click());
  const line = await page.evaluate(() => {
    const v = window.jadpoPlayground.view;
    return v.state.doc.lineAt(v.state.selection.main.head).number;
  });
  assert.equal(line, 14);
});

check("on a line after non-ASCII text, the mark is on the right characters", async ({ page }) => {
  // Byte offsets (the checker's) against UTF-16 positions (the editor's): `é` is
  // two bytes, `☕` three and `😀` four bytes and two UTF-16 units.
  await setDoc(page, "// café ☕ and 😀 before\nevent E {\n    id: strin // é\n}\n");
  const item = await until("the unknown type", () => page.$('#problems li[data-code="event.type_unknown"]'));
  assert.equal(await item.$eval(".where", (e) => e.textContent), "3:9");
  const marks = await until("two marks", async () => {
    const m = await page.$$eval(".cm-lintRange", (l) => l.map((e) => e.textContent));
    return m.length === 2 && m;
  });
  assert.deepEqual(marks, ["E", "strin"]);
  await setDoc(page, payments);
  await until("the payments example to check clean again", async () => (await summary(page)) === "0 errors, 0 warnings");
});

check("hover and the side panel show a subscriber's plan", async ({ page }) => {
  const pos = await page.evaluate(() => {
    const v = window.jadpoPlayground.view;
    const at = v.state.doc.toString().indexOf("record_payment_webhook {") + 4;
    v.dispatch({ selection: { anchor: at }, scrollIntoView: true });
    return at;
  });
  const box = await until("the name's place on screen", () => page.evaluate((p) => window.jadpoPlayground.view.coordsAtPos(p), pos));
  await page.mouse.move(box.left + 2, (box.top + box.bottom) / 2);
  const tip = await until("the plan's hover", () => page.$(".hover-plan"));
  const plan = await tip.textContent();
  assert.match(plan, /^record_payment_webhook: 20 attempts within 3d\n/);
  assert.match(plan, /gives up after attempt 20/);
  assert.equal(plan.split("\n").filter((l) => /^\s+\d+\s/.test(l)).length, 20, "one row per attempt");
  await page.screenshot({ path: path.join(shots, "hover-plan.png") });
  await page.mouse.move(0, 0);
  await until("the side panel's plan", async () => /record_payment_webhook: 20 attempts/.test((await page.textContent("#plan")) || ""));
  // Elsewhere (an event), the panel says what to do.
  await select(page, "PaymentRefunded");
  await until("the panel's hint", async () => /Put the cursor in a subscriber/.test(await page.textContent("#plan")));
  // While the program has an error elsewhere, the plan is its `retry:`'s, said so.
  await select(page, "event.payment_id", "event.".length);
  await page.keyboard.type("paymentid");
  await until("the error", async () => (await summary(page)) === "1 error, 0 warnings");
  await select(page, "record_payment_webhook {");
  await until("the plan with its note", async () => {
    const text = await page.textContent("#plan");
    return /^record_payment_webhook: 20 attempts within 3d\n/.test(text) && /The program has errors: this is the budget its retry: writes/.test(text);
  });
  // Fixed, with the cursor still in the subscriber: the note goes.
  await select(page, "paymentid");
  await page.keyboard.type("payment_id");
  await select(page, "record_payment_webhook {");
  await until("the plan without its note", async () => {
    const text = await page.textContent("#plan");
    return /^record_payment_webhook: 20 attempts within 3d\n/.test(text) && !/The program has errors/.test(text);
  });
  assert.equal(await docText(page), payments);
});

check("Format shows the canonical layout and applies it", async ({ page }) => {
  const messy = "event E {\nid: string\n}\n\n\n\nconnection c { url: \"https://x.example\" }\n";
  const formatted = "event E {\n    id: string\n}\n\nconnection c {\n    url: \"https://x.example\"\n}\n";
  await setDoc(page, messy);
  await page.click("#format");
  const pre = await until("the formatted text", () => page.$("#format-result pre.formatted"));
  assert.equal(await pre.textContent(), formatted);
  assert.equal(await docText(page), messy, "nothing changes before Apply");
  await page.click("#apply-format");
  assert.equal(await docText(page), formatted);
  await page.click("#format");
  await until("the already-formatted note", async () => (await page.textContent("#format-result")) === "Already formatted.");
  await setDoc(page, "event E {\n    id: string\n");
  await page.click("#format");
  await until("the syntax error note", async () => (await page.textContent("#format-result")) === "1 syntax error: the text was not formatted");
  // An edit hides the answer, which was for the text before it.
  await setDoc(page, "event E {\n    id: string\n}\n");
  assert.equal(await page.isVisible("#format-result"), false);
});

check("Run tests shows each test and its attempts on a timeline", async ({ page }) => {
  await setDoc(page, payments);
  await page.click("#run");
  await until("the tests' summary", async () => (await page.textContent(".tests-summary")) === "3 passed, 0 failed");
  const first = await page.$('.test[data-test="ledger down for five attempts, then back"]');
  assert.ok(first, "the first test is shown");
  assert.equal(await first.getAttribute("class"), "test passed");
  assert.equal(await first.$$eval("rect.attempt.fail", (r) => r.length), 5);
  assert.equal(await first.$$eval("rect.attempt.ok", (r) => r.length), 1);
  const rows = await first.$$eval("table.attempts tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  assert.equal(rows.length, 6);
  assert.deepEqual(rows[0].slice(0, 4), ["+0s", "record_payment_webhook", "ledger", "1"]);
  assert.match(rows[0][4], /^unavailable/);
  assert.deepEqual(rows[5].slice(1), ["record_payment_webhook", "ledger", "6", "succeeded"]);
  // Each mark sits later than the one before, on the same row.
  const xs = await first.$$eval("rect.attempt", (r) => r.map((e) => Number(e.getAttribute("x"))));
  assert.ok(xs.every((x, i) => i === 0 || x > xs[i - 1]), `attempts in time order: ${xs}`);
  await page.screenshot({ path: path.join(shots, "tests.png"), fullPage: true });
  // Another seed runs the same tests (testing.md: they hold whatever the jitter);
  // a seed that is not a whole number is refused.
  await page.fill("#seed", "-1");
  await page.click("#run");
  await until("the seed's refusal", async () => /^The seed is a whole number/.test(await page.textContent("#tests")));
  await page.fill("#seed", "7");
  await page.click("#run");
  await until("the run under seed 7", async () => (await page.textContent("#tests .tests-summary").catch(() => "")) === "3 passed, 0 failed");
  await page.fill("#seed", "0");
  // A wrong expectation fails, naming what differed, with its timeline still drawn.
  await setDoc(page, payments.replace("state: succeeded, attempts: 6", "state: succeeded, attempts: 5"));
  await page.click("#run");
  await until("the failing summary", async () => (await page.textContent(".tests-summary")) === "2 passed, 1 failed");
  const failed = await page.$(".test.failed");
  assert.match(await failed.$eval(".verdict", (e) => e.textContent), /FAILED/);
  assert.match(await failed.$eval("pre.failure", (e) => e.textContent), /expected  state: succeeded, attempts: 5\n\s+found     state: succeeded, attempts: 6/);
  assert.equal(await failed.$$eval("rect.attempt", (r) => r.length), 6);
});

check("the scenario suites run in the page as jadpoc test runs them: every test passes", async ({ page }) => {
  // tests/scenarios/ (breakers, schedules, Retry-After, operator retries, ...) and
  // tests/scenarios_builtin/, each one program, pasted into the buffer.
  for (const dir of ["tests/scenarios", "tests/scenarios_builtin"]) {
    const files = fs.readdirSync(path.join(repo, dir)).filter((f) => f.endsWith(".jadpo")).sort();
    const text = files.map((f) => read(`${dir}/${f}`)).join("\n");
    const count = (text.match(/^test "/gm) || []).length;
    assert.ok(count >= 5, `${dir} has ${count} tests`);
    await setDoc(page, text);
    await page.evaluate(() => document.querySelector(".tests-summary")?.remove()); // no earlier run's
    await page.click("#run");
    await until(`${dir}'s tests`, async () => (await page.textContent(".tests-summary").catch(() => "")) === `${count} passed, 0 failed`);
    assert.equal(await page.$$eval(".test.passed", (l) => l.length), count);
  }
});

check("an example is one choice away", async ({ page }) => {
  await page.selectOption("#example", "orders");
  await until("the orders example", async () => (await docText(page)) === read("examples/orders.jadpo"));
  await until("its check", async () => (await summary(page)) === "0 errors, 0 warnings");
  await page.click("#run");
  await until("its tests", async () => (await page.textContent(".tests-summary")) === "3 passed, 0 failed");
  const names = await page.$$eval("#example option:not([disabled])", (o) => o.map((e) => e.value));
  const expected = fs.readdirSync(path.join(repo, "examples")).filter((f) => f.endsWith(".jadpo") && !f.endsWith("_test.jadpo")).map((f) => f.slice(0, -6)).sort();
  assert.deepEqual(names, expected);
});

check("a shared link carries the program", async ({ page, context, base }) => {
  const text = "// café ☕ and a 😀: not ASCII\n" + read("examples/notifications.jadpo");
  await setDoc(page, text);
  await page.click("#share");
  const link = await until("the link", async () => page.inputValue("#share-link"));
  assert.match(link, /#z=[A-Za-z0-9_-]+$/);
  const other = await context.newPage();
  await other.goto(link);
  await until("the shared page", () => other.$("body[data-ready=true]"));
  assert.equal(await docText(other), text);
  // The plain form, base64url of the text, reads too.
  const plain = Buffer.from("event E {\n    id: string\n}\n").toString("base64url");
  await other.goto(`${base}/#code=${plain}`);
  await until("the plain link's text", async () => (await docText(other)) === "event E {\n    id: string\n}\n");
  await until("its warning", () => other.$('#problems li[data-code="event.unused"]'));
  await other.close();
});

check("the keyboard reaches the controls, and Tab leaves the editor", async ({ page }) => {
  await page.goto(page.url().split("#")[0]);
  await until("the playground to start", () => page.$("body[data-ready=true]"));
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.textContent), "Skip to the editor");
  const focused = () => page.evaluate(() => (document.activeElement.closest(".cm-editor") ? "editor" : document.activeElement.id));
  const order = [];
  for (let i = 0; i < 6; i++) {
    await page.keyboard.press("Tab");
    order.push(await focused());
  }
  assert.deepEqual(order, ["example", "format", "run", "seed", "share", "editor"]);
  await page.keyboard.press("Tab");
  assert.notEqual(await focused(), "editor", "Tab does not stay in the editor");
  await page.focus("#run");
  await page.keyboard.press("Enter");
  await until("the tests run from the keyboard", async () => (await page.textContent(".tests-summary")) === "3 passed, 0 failed");
});

check("a check of examples/payments.jadpo takes under 5 ms, and the wasm is under 2 MiB gzipped", async ({ page }) => {
  const { median, mean, max } = await page.evaluate((t) => window.jadpoPlayground.measureCheck(t, 50), read("examples/payments.jadpo"));
  const wasm = fs.readFileSync(path.join(dist, "jadpo_wasm_bg.wasm"));
  const gz = zlib.gzipSync(wasm, { level: 9 }).length;
  console.log(
    `figures: a check of examples/payments.jadpo: median ${median.toFixed(2)} ms, mean ${mean.toFixed(3)} ms, ` +
      `slowest ${max.toFixed(2)} ms over 50 runs; wasm ${wasm.length} bytes, ${gz} gzip -9`,
  );
  assert.ok(median < CHECK_BUDGET_MS, `the check took ${median} ms (median)`);
  assert.ok(mean < CHECK_BUDGET_MS, `the check took ${mean} ms (mean)`);
  assert.ok(gz < WASM_BUDGET_BYTES, `the wasm is ${gz} bytes gzipped`);
});

check("the page reads at 320 px", async ({ browser, base }) => {
  const narrow = await browser.newContext({ viewport: { width: 320, height: 720 } });
  const p = await narrow.newPage();
  await p.goto(`${base}/`);
  await until("the playground to start", () => p.$("body[data-ready=true]"));
  await noSidewaysScroll(p, "the playground");
  await p.screenshot({ path: path.join(shots, "payments-320px.png"), fullPage: true });
  await p.click("#run");
  await until("the tests", async () => (await p.textContent(".tests-summary")) === "3 passed, 0 failed");
  await noSidewaysScroll(p, "the tests");
  await p.screenshot({ path: path.join(shots, "tests-320px.png"), fullPage: true });
  await narrow.close();
});

async function main() {
  assert.ok(fs.existsSync(path.join(dist, "index.html")), `${dist} has no index.html: run playground/build.sh first`);
  const server = await serve();
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await shared.launch(chromium);
  let passed = 0;
  let failed = 0;
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    for (const c of checks) {
      try {
        await c.fn({ page, context, browser, base });
        assert.deepEqual(errors, [], "the page logged no errors");
        passed++;
        console.log(`ok   ${c.name}`);
      } catch (e) {
        failed++;
        console.log(`FAILED ${c.name}\n${e.stack || e}`);
        await page.screenshot({ path: path.join(shots, `failed-${passed + failed}.png`), fullPage: true }).catch(() => {});
        break; // later checks build on the page this one left
      }
    }
  } finally {
    await browser.close();
    server.close();
  }
  console.log(`screenshots in ${path.relative(repo, shots)}/`);
  console.log(`${passed} passed, ${failed} failed`);
  if (failed > 0 || passed !== checks.length) process.exit(1);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
