// azdispatch dashboard: refreshes the page's content in place every
// data-refresh seconds, except while the tab is hidden, while paused (the
// pause button, remembered for the tab), or while a form field has the
// focus. Without JavaScript every page works the same, without refresh.
"use strict";
(function () {
  var body = document.body;
  var period = parseInt(body.getAttribute("data-refresh") || "0", 10);
  if (!(period > 0) || !window.fetch || !window.DOMParser) {
    return;
  }
  var box = document.getElementById("refresh");
  var button = document.getElementById("pause");
  var state = document.getElementById("refresh-state");
  var key = "azdispatch-dashboard-paused";
  var paused = false;
  try {
    paused = window.sessionStorage.getItem(key) === "1";
  } catch (e) {
    paused = false;
  }
  var timer = null;

  function show() {
    button.textContent = paused ? "Resume refresh" : "Pause refresh";
    button.setAttribute("aria-pressed", paused ? "true" : "false");
    state.textContent = paused ? "Refresh paused." : "Refreshes every " + period + " s.";
  }

  function busy() {
    var a = document.activeElement;
    if (!a) {
      return false;
    }
    var tag = a.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT";
  }

  function schedule() {
    if (timer !== null) {
      window.clearTimeout(timer);
      timer = null;
    }
    if (!paused && !document.hidden) {
      timer = window.setTimeout(refresh, period * 1000);
    }
  }

  function refresh() {
    timer = null;
    if (paused || document.hidden || busy()) {
      schedule();
      return;
    }
    window.fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("status " + r.status);
        }
        return r.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("main");
        var main = document.getElementById("main");
        if (fresh && main && !busy()) {
          main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes).map(function (n) {
            return document.importNode(n, true);
          }));
          var p = parseInt(doc.body.getAttribute("data-refresh") || "0", 10);
          if (p > 0) {
            period = p;
          }
        }
      })
      .catch(function () {
        state.textContent = "Refresh failed; trying again.";
      })
      .then(schedule);
  }

  button.addEventListener("click", function () {
    paused = !paused;
    try {
      window.sessionStorage.setItem(key, paused ? "1" : "0");
    } catch (e) {
      // Not remembered: the page still pauses.
    }
    show();
    schedule();
  });
  document.addEventListener("visibilitychange", schedule);
  box.hidden = false;
  show();
  schedule();
})();
