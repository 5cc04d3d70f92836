// postured console: live fleet counts, time left and timeline event details. No
// inline script anywhere; the Content-Security-Policy allows this file only.
"use strict";
(function () {
  var counts = document.getElementById("counts");
  if (counts && window.fetch) {
    // Each refresh keeps the API session alive: a page left alone stops
    // refreshing once it has seen no input for the session's idle timeout,
    // so that an unattended console signs itself out.
    var idle = parseInt(counts.dataset.idle, 10) * 1000, input = Date.now(), timer;
    ["pointerdown", "pointermove", "keydown", "wheel", "touchstart"].forEach(function (ev) {
      document.addEventListener(ev, function () { input = Date.now(); }, { passive: true });
    });
    var refresh = function () {
      if (idle > 0 && Date.now() - input >= idle) {
        clearInterval(timer);
        document.getElementById("counts-paused").hidden = false;
        return;
      }
      fetch(counts.dataset.src, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (c) {
          if (!c) { return; }
          counts.querySelectorAll("[data-count]").forEach(function (el) {
            var v = c[el.dataset.count];
            if (v !== undefined) { el.textContent = String(v); }
          });
        })
        .catch(function () {});
    };
    timer = setInterval(refresh, 5000);
  }
  // "Time left" counts down from what the node wrote when it made the page
  // (the browser's clock may not be the node's), as it writes it: "4m2s",
  // "now" once past.
  var lefts = document.querySelectorAll("[data-left]");
  if (lefts.length) {
    var loaded = Date.now();
    var tick = function () {
      var gone = Math.round((Date.now() - loaded) / 1000);
      lefts.forEach(function (el) {
        var s = parseInt(el.dataset.left, 10) - gone;
        if (isNaN(s)) { return; }
        if (s <= 0) { el.textContent = "now"; return; }
        var h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), r = s % 60;
        el.textContent = (h ? h + "h" + m + "m" : m ? m + "m" : "") + r + "s";
      });
    };
    setInterval(tick, 1000);
  }
  var detail = document.getElementById("event-detail");
  if (detail) {
    var show = function (e) {
      var a = e.target.closest("a.mark, a");
      if (!a || !a.closest("#timeline")) { return; }
      var t = a.querySelector("title");
      if (t) { detail.textContent = t.textContent; }
    };
    var svg = document.getElementById("timeline");
    if (svg) {
      svg.addEventListener("mouseover", show);
      svg.addEventListener("focusin", show);
    }
  }
})();
