// What the browser tests (tests/console/, tests/playground/) share: Debian's
// Chromium launched headless by the caller's playwright-core, a wait on a
// condition with a deadline, and the check that a page reads without scrolling
// sideways. Plain Node.js: each test's own package brings playwright-core.
"use strict";

const assert = require("node:assert/strict");

/** The browser: `CHROMIUM`, or Debian's. */
const browserPath = process.env.CHROMIUM || "/usr/bin/chromium";

/** `chromium` (playwright-core's) launched headless on `browserPath`. */
function launch(chromium) {
  return chromium.launch({ executablePath: browserPath, headless: true, args: ["--no-sandbox"] });
}

/** Wait until `check()` gives a truthy value, polling every `everyMs`, within `deadlineMs`. */
async function until(what, check, deadlineMs, everyMs) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The page is no wider than its window (it reads without scrolling sideways). */
async function noSidewaysScroll(page, name) {
  const { scroll, width } = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    width: document.documentElement.clientWidth,
  }));
  assert.ok(scroll <= width, `${name}: the page scrolls sideways at ${width}px (${scroll}px wide)`);
}

module.exports = { browserPath, launch, until, noSidewaysScroll };
