// A test's run drawn on virtual time: one row per delivery (its subscriber and
// connection), a mark where its event was emitted and one per attempt, coloured
// by outcome. Retries spread from seconds to days, so the axis is logarithmic
// (seconds from the test's start, plus one); the table below it gives every
// attempt's exact time, connection and outcome, for reading and for screen readers.

const SVG = "http://www.w3.org/2000/svg";
const ROW = 20;
const PAD = 8;

function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text != null) e.textContent = text;
  return e;
}

function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) if (c != null) e.append(c);
  return e;
}

function outcomeText(a) {
  if (a.outcome === "succeeded") return "succeeded";
  return a.kind ? `${a.kind}${a.code ? ` (${a.code})` : ""}` : a.outcome;
}

/** The timeline of one test's report (crates/jadpo-wasm's TestReport), drawn
 * `width` pixels wide (its text keeps its size at any width). */
export function timeline(test, width) {
  const W = Math.max(240, Math.min(1000, Math.round(width) || 600));
  const wrap = h("div", { class: "timeline" });
  if (test.deliveries.length === 0) {
    wrap.append(h("p", { class: "hint" }, "No deliveries were made."));
    return wrap;
  }
  const endS = Math.max(1, test.end_ms / 1000, ...test.deliveries.flatMap((d) => d.attempts.map((a) => (a.started_at_ms + a.duration_ms) / 1000)));
  const x = (ms) => PAD + ((W - 2 * PAD) * Math.log1p(Math.max(0, ms) / 1000)) / Math.log1p(endS);
  const chart = h("div", {
    class: "timeline-chart",
    role: "img",
    "aria-label": `Attempts of "${test.name}" on virtual time, from +0s to ${test.end}`,
  });
  for (const d of test.deliveries) {
    // The label is text of the page, so that it wraps on a narrow screen.
    chart.append(h("p", { class: "row-label" }, `${d.subscriber} → ${d.connection}: ${d.state}`));
    const row = svg("svg", { viewBox: `0 0 ${W} ${ROW}`, class: "timeline-row", "data-delivery": d.id });
    const y = 2;
    row.append(svg("line", { x1: PAD, x2: W - PAD, y1: y + 8, y2: y + 8, class: "row-line" }));
    const emit = svg("path", { d: `M${x(d.created_at_ms)} ${y + 2} l4 6 l-4 6 l-4 -6 z`, class: "emit" });
    emit.append(svg("title", {}, `${d.event} emitted at +${d.created_at_ms / 1000}s`));
    row.append(emit);
    for (const a of d.attempts) {
      const x0 = x(a.started_at_ms);
      const x1 = Math.max(x0 + 6, x(a.started_at_ms + a.duration_ms));
      const mark = svg("rect", {
        x: x0 - 3, y: y + 3, width: x1 - x0, height: 10, rx: 2,
        class: `attempt ${a.outcome === "succeeded" ? "ok" : "fail"}`,
        "data-attempt": a.attempt,
      });
      mark.append(svg("title", {}, `attempt ${a.attempt} at ${a.at}: ${outcomeText(a)}`));
      row.append(mark);
    }
    chart.append(row);
  }
  chart.append(h("p", { class: "axis" }, h("span", {}, "+0s"), h("span", {}, `${test.end} (log scale)`)));
  wrap.append(chart);

  const table = h("table", { class: "attempts" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "at"), h("th", { scope: "col" }, "subscriber"),
      h("th", { scope: "col" }, "connection"), h("th", { scope: "col" }, "#"), h("th", { scope: "col" }, "outcome"))));
  const body = h("tbody");
  const rows = test.deliveries
    .flatMap((d) => d.attempts.map((a) => ({ d, a })))
    .sort((p, q) => p.a.started_at_ms - q.a.started_at_ms || p.d.id - q.d.id);
  for (const { d, a } of rows) {
    body.append(h("tr", { class: a.outcome === "succeeded" ? "ok" : "fail" },
      h("td", {}, a.at), h("td", {}, d.subscriber), h("td", {}, d.connection),
      h("td", {}, String(a.attempt)), h("td", {}, outcomeText(a))));
  }
  table.append(body);
  const details = h("details", { class: "attempt-list" }, h("summary", {}, `${rows.length} ${rows.length === 1 ? "attempt" : "attempts"}`), table);
  wrap.append(details);
  return wrap;
}
