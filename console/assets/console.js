// postured console: live fleet counts and timeline event details. No
// inline script anywhere; the Content-Security-Policy allows this file only.
"use strict";
(function () {
  var counts = document.getElementById("counts");
  if (counts && window.fetch) {
    var refresh = function () {
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
    setInterval(refresh, 5000);
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
