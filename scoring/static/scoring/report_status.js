/* Report page: while the report is computed, poll its status and reload when it is done.
   Loaded only on pending pages; without JavaScript a <noscript> meta refresh does the same. */
(function () {
  "use strict";
  var box = document.getElementById("report-pending");
  if (!box) return;
  var url = box.getAttribute("data-status-url");
  var delay = 1500;
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (data && (data.status === "done" || data.status === "failed")) {
          window.location.reload();
          return;
        }
        delay = Math.min(delay * 1.5, 10000); // back off: a long report needs no hammering
        window.setTimeout(poll, delay);
      })
      .catch(function () { window.setTimeout(poll, 10000); });
  }
  window.setTimeout(poll, delay);
})();
