// jadpo console: a little progressive script. Every page reads and every form
// works without it; with it, the overview refreshes itself (polling with
// ETags: an unchanged overview costs a 304) and an action asks before it is sent.
(function () {
  "use strict";

  // Confirm an action whose form says what to ask.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  // Keyboard: "/" moves to the first filter field, as in most consoles.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) return;
    var field = document.querySelector("form.filters input, form.filters select");
    if (field) {
      event.preventDefault();
      field.focus();
    }
  });

  // The overview's live part.
  var live = document.getElementById("live");
  if (!live) return;
  var url = live.getAttribute("data-live");
  var every = parseInt(live.getAttribute("data-poll-ms"), 10) || 2000;
  var etag = null;
  var timer = null;
  function schedule() {
    timer = window.setTimeout(poll, every);
  }
  function poll() {
    if (document.hidden) { schedule(); return; }
    var headers = {};
    if (etag) headers["If-None-Match"] = etag;
    fetch(url, { headers: headers, credentials: "same-origin", cache: "no-cache" })
      .then(function (response) {
        if (response.status === 200) {
          etag = response.headers.get("ETag");
          return response.text().then(function (html) {
            // Keep the focus where it was when the part it is in is replaced.
            var focused = document.activeElement && live.contains(document.activeElement)
              ? document.activeElement.getAttribute("href") : null;
            live.innerHTML = html;
            live.setAttribute("data-refreshed", String(Date.now()));
            if (focused) {
              var again = live.querySelector('a[href="' + focused.replace(/"/g, '\\"') + '"]');
              if (again) again.focus();
            }
          });
        }
      })
      .catch(function () { /* the next poll tries again */ })
      .then(schedule);
  }
  schedule();
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && timer) { window.clearTimeout(timer); poll(); }
  });
})();
