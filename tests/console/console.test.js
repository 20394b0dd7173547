// The operator's console in a real browser (Debian's Chromium, headless, driven
// by playwright-core): every page loads, a filter filters, a failed delivery is
// retried and the store says so, a bulk retry confirms its count, an event is
// replayed, a connection is paused and `jadpoc breakers` says so, the overview
// updates without a reload, pages read without JavaScript and at 320 px wide,
// and the keyboard reaches the content. Screenshots go to
// target/console-screenshots/ (test artifacts, never committed).
//
// Usage: node console.test.js  (JADPOC names the binary; target/debug/jadpoc
// by default; CHROMIUM the browser, /usr/bin/chromium by default).
"use strict";

const { chromium } = require("playwright-core");
const shared = require("../browser.js");
const { noSidewaysScroll } = shared;
const { spawn, execFileSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const assert = require("node:assert/strict");

const repo = path.resolve(__dirname, "..", "..");
const jadpoc = process.env.JADPOC || path.join(repo, "target", "debug", "jadpoc");
const shots = path.join(repo, "target", "console-screenshots");
const program = path.join(__dirname, "program.jadpo");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "jadpo-console-"));
const db = path.join(work, "outbox.db");
const DEADLINE_MS = 60_000;

fs.mkdirSync(shots, { recursive: true });

/** `jadpoc ARGS...`'s standard output (throws, with its stderr, if it fails). */
function cli(...args) {
  return execFileSync(jadpoc, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

function json(...args) {
  return JSON.parse(cli(...args, "--format", "json", "--db", db));
}

/** Wait until `check()` gives a truthy value, within a generous deadline. */
const until = (what, check) => shared.until(what, check, DEADLINE_MS, 100);

/** Start `jadpoc ARGS...`, its stderr collected. */
function start(args) {
  const child = spawn(jadpoc, args, { stdio: ["ignore", "ignore", "pipe"] });
  child.stderrText = "";
  child.stderr.on("data", (d) => { child.stderrText += d.toString(); });
  child.exited = new Promise((resolve) => child.on("exit", resolve));
  return child;
}

async function stop(child) {
  child.kill("SIGINT");
  const code = await child.exited;
  assert.equal(code, 0, `jadpoc stopped with ${code}: ${child.stderrText}`);
}

function deliveriesIn(state) {
  return json("deliveries", "--state", state);
}

async function prepareStore() {
  for (let i = 1; i <= 3; i++) {
    cli("emit", program, "Paid", JSON.stringify({ id: `p${i}`, cents: 100 * i }), "--db", db);
  }
  const run = start(["run", program, "--db", db, "--fake", "ledger=rejected*1000", "--fake", "mailer=ok"]);
  await until("three failed deliveries", () => deliveriesIn("failed").length === 3 && deliveriesIn("succeeded").length === 3);
  await stop(run);
}

async function startConsole(extra) {
  const child = start(["console", "--db", db, "--listen", "127.0.0.1:0", ...extra]);
  const line = await until("the console's address", () => child.stderrText.match(/serving the console at (http:\/\/[^/\s]+)\//));
  child.url = line[1];
  return child;
}

async function main() {
  await prepareStore();
  const console_ = await startConsole(["--console-actions", "--program", program]);
  const base = console_.url;
  const browser = await shared.launch(chromium);
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("dialog", (d) => d.accept());

    // The overview.
    await page.goto(`${base}/`);
    assert.equal(await page.textContent("h1"), "Overview");
    assert.equal(await page.textContent('a.count[data-state="failed"]'), "3");
    assert.equal(await page.textContent('a.count[data-state="succeeded"]'), "3");
    assert.ok(await page.isVisible("svg.chart"));
    // The program version the store keeps (the run's, stopped: no process runs it).
    const status = json("status");
    const version = status.versions[0].hash.slice(0, 12);
    const versions = await page.textContent('section[aria-labelledby="versions"]');
    assert.ok(versions.includes(version) && versions.includes("none"), versions);
    await page.screenshot({ path: path.join(shots, "overview.png"), fullPage: true });

    // Keyboard: the first Tab reaches the skip link, which moves to the content.
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.textContent), "Skip to content");
    await page.keyboard.press("Enter");
    assert.equal(await page.evaluate(() => document.activeElement.id), "main");

    // The overview updates without a reload.
    await page.evaluate(() => { window.notReloaded = true; });
    cli("emit", program, "Paid", JSON.stringify({ id: "p4", cents: 400 }), "--db", db);
    await page.waitForFunction(
      () => document.querySelector('a.count[data-state="pending"]').textContent === "2",
      null,
      { timeout: DEADLINE_MS },
    );
    assert.equal(await page.evaluate(() => window.notReloaded), true);

    // Deliveries, filtered by the form.
    await page.goto(`${base}/deliveries`);
    await page.keyboard.press("/");
    assert.equal(await page.evaluate(() => document.activeElement.name), "state");
    await page.selectOption('select[name="state"]', "failed");
    await page.fill('input[name="subscriber"]', "booking");
    await Promise.all([page.waitForNavigation(), page.click('form.filters button[type="submit"]')]);
    assert.match(page.url(), /state=failed/);
    assert.match(page.url(), /subscriber=booking/);
    const rows = await page.$$eval("tbody tr", (trs) => trs.map((tr) => Number(tr.dataset.id)));
    const failed = deliveriesIn("failed").map((d) => d.id).sort((a, b) => b - a);
    assert.deepEqual(rows, failed);
    await page.screenshot({ path: path.join(shots, "deliveries.png"), fullPage: true });

    // One delivery, then its retry: the store has it pending.
    const id = failed[0];
    await page.click(`tbody tr[data-id="${id}"] a[href="/deliveries/${id}"]`);
    await page.waitForURL(`${base}/deliveries/${id}`);
    assert.equal(await page.textContent("h1"), `Delivery ${id}`);
    assert.match(await page.textContent("pre.payload"), /"id": "p/);
    assert.match(await page.textContent("table"), /fake\.rejected/);
    await page.screenshot({ path: path.join(shots, "delivery.png"), fullPage: true });
    await Promise.all([page.waitForNavigation(), page.click("text=Retry with a fresh budget")]);
    assert.match(await page.textContent(".notice"), /Retried with a fresh budget/);
    const shown = json("deliveries", "show", String(id));
    assert.equal(shown.state, "pending");
    assert.equal(shown.attempts, 0);

    // A bulk retry names its count first.
    await page.goto(`${base}/deliveries?state=failed`);
    await Promise.all([page.waitForNavigation(), page.click("text=Retry every failed delivery this filter selects")]);
    assert.equal(await page.textContent("h1"), "Retry 2 deliveries?");
    await page.screenshot({ path: path.join(shots, "bulk-retry.png"), fullPage: true });
    await Promise.all([page.waitForNavigation(), page.click('form.action button[type="submit"]')]);
    assert.match(await page.textContent(".notice"), /Retried 2 deliveries/);
    assert.equal(deliveriesIn("failed").length, 0);
    assert.equal(deliveriesIn("pending").length, 5);

    // Events, one event, its replay.
    await page.goto(`${base}/events`);
    assert.equal(await page.textContent("h1"), "Events");
    assert.equal((await page.$$("tbody tr")).length, 4);
    await page.screenshot({ path: path.join(shots, "events.png"), fullPage: true });
    await page.click('a[href="/events/1"]');
    await page.waitForURL(`${base}/events/1`);
    assert.match(await page.textContent("pre.payload"), /"cents": 100/);
    await page.screenshot({ path: path.join(shots, "event.png"), fullPage: true });
    await page.selectOption('select[name="subscriber"]', "receipts");
    await Promise.all([page.waitForNavigation(), page.click("text=Replay this event")]);
    assert.match(page.url(), /\/events\/5\?done=replay&of=1$/);
    const replay = json("events", "show", "5");
    assert.equal(replay.replay_of, 1);
    assert.deepEqual(replay.deliveries.map((d) => d.subscriber), ["receipts"]);

    // Breakers: pause a connection; `jadpoc breakers` says so.
    await page.goto(`${base}/breakers`);
    const ledger = page.locator('section.breaker[data-connection="ledger"]');
    await ledger.locator('input[name="for"]').fill("2h");
    await ledger.locator('input[name="reason"]').fill("provider maintenance");
    await ledger.locator('input[name="by"]').fill("browser-test");
    await Promise.all([page.waitForNavigation(), ledger.locator("text=Pause ledger").click()]);
    assert.match(await page.textContent(".notice"), /Paused/);
    assert.match(await ledger.locator(".paused").textContent(), /paused by browser-test/);
    const breakers = json("breakers");
    const row = breakers.find((b) => b.connection === "ledger");
    assert.ok(row && row.paused, `ledger is not paused: ${JSON.stringify(breakers)}`);
    assert.equal(row.paused.by, "browser-test");
    assert.equal(row.paused.reason, "provider maintenance");
    await page.screenshot({ path: path.join(shots, "breakers.png"), fullPage: true });
    assert.deepEqual(errors, [], "the pages logged errors");

    // Without JavaScript: every page reads, and the filter form still filters.
    const plain = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1024, height: 800 } });
    const p2 = await plain.newPage();
    for (const url of ["/", "/deliveries", `/deliveries/${id}`, "/events", "/events/1", "/breakers"]) {
      const answer = await p2.goto(`${base}${url}`);
      assert.equal(answer.status(), 200, url);
      assert.ok((await p2.textContent("h1")).length > 0, url);
    }
    await p2.goto(`${base}/deliveries`);
    await p2.selectOption('select[name="state"]', "succeeded");
    await Promise.all([p2.waitForNavigation(), p2.click('form.filters button[type="submit"]')]);
    assert.equal((await p2.$$("tbody tr")).length, json("deliveries", "--state", "succeeded").length);
    await p2.screenshot({ path: path.join(shots, "deliveries-no-javascript.png"), fullPage: true });
    await plain.close();

    // At 320 px wide: no page scrolls sideways.
    const narrow = await browser.newContext({ viewport: { width: 320, height: 640 } });
    const p3 = await narrow.newPage();
    for (const [name, url] of [
      ["overview", "/"], ["deliveries", "/deliveries"], ["delivery", `/deliveries/${id}`],
      ["events", "/events"], ["event", "/events/1"], ["breakers", "/breakers"],
    ]) {
      await p3.goto(`${base}${url}`);
      await noSidewaysScroll(p3, name);
      await p3.screenshot({ path: path.join(shots, `${name}-320px.png`), fullPage: true });
    }
    await narrow.close();

    // A read-only console: no action offered, and a POST refused with 403.
    const readOnly = await startConsole([]);
    try {
      const p4 = await context.newPage();
      await p4.goto(`${readOnly.url}/deliveries/${id}`);
      assert.equal(await p4.$$eval("form[method=post]", (f) => f.length), 0);
      const refused = await p4.request.post(`${readOnly.url}/deliveries/${id}/retry`, { form: { csrf: "x" } });
      assert.equal(refused.status(), 403);
      assert.match(await refused.text(), /read-only/);
    } finally {
      await stop(readOnly);
    }
  } finally {
    await browser.close();
    await stop(console_);
  }
  console.log(`console browser test: ok (screenshots in ${path.relative(repo, shots)}/)`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
}).finally(() => fs.rmSync(work, { recursive: true, force: true }));
