// Live progress for a scoring or generation run: polls the JSON endpoint until the run is done or failed.
(function () {
  "use strict";
  var box = document.getElementById("run-progress");
  if (!box) { return; }
  var url = box.getAttribute("data-url");
  var bar = box.querySelector("progress");
  function set(field, value) {
    var el = box.querySelector('[data-field="' + field + '"]');
    if (el) { el.textContent = value; }
  }
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (p) {
        ["produced", "total", "percent", "batches_done", "batches_running",
          "batches_total", "batches_failed"].forEach(function (k) { if (k in p) { set(k, p[k]); } });
        set("status", p.status);
        bar.value = p.percent;
        // What the worker is doing before results appear (a generation run hashing its model).
        var phase = box.querySelector('[data-field="phase"]');
        if (phase) { phase.textContent = p.phase || ""; phase.hidden = !p.phase; }
        var err = box.querySelector('[data-field="error"]');
        if (p.error) { err.textContent = p.error; err.hidden = false; }
        if (p.status !== "done" && p.status !== "failed") { setTimeout(poll, 2000); }
      })
      .catch(function () { setTimeout(poll, 5000); });
  }
  if (box.getAttribute("data-status") !== "done") { setTimeout(poll, 1000); }
})();
