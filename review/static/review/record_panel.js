/* MedAlign Review: the record on the rubric pages (writing, reviewing, grading): search the
 * whole record or page through its timeline, newest first, and expand notes. The endpoints are
 * the review page's (each page of events audited there); their HTML is rendered by the server
 * with Django's escaping. */
(function () {
  "use strict";

  var panel = document.getElementById("record-panel");
  if (!panel || !panel.dataset.events) return;
  var list = document.getElementById("record-list");
  var more = document.getElementById("record-more");
  var summary = document.getElementById("record-summary");
  var form = document.getElementById("record-search");
  var input = document.getElementById("record-q");
  var view = { mode: "timeline", query: "", next: "", count: 0, generation: 0 };

  function csrfToken() {
    var m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (m) return decodeURIComponent(m[1]);
    var hidden = document.querySelector("input[name=csrfmiddlewaretoken]");
    return hidden ? hidden.value : "";
  }

  function get(url, payload) {
    var init = { method: payload ? "POST" : "GET", credentials: "same-origin", headers: { Accept: "application/json" } };
    if (payload) {
      init.headers["Content-Type"] = "application/json";
      init.headers["X-CSRFToken"] = csrfToken();
      init.body = JSON.stringify(payload);
    }
    return fetch(url, init).then(function (response) {
      if (response.status === 401) throw new Error("Your session has ended: sign in again to read the record.");
      if (!response.ok) throw new Error("Could not load the record (" + response.status + ").");
      return response.json();
    });
  }

  function fragment(html) {
    var tpl = document.createElement("template");
    tpl.innerHTML = html;
    return tpl.content;
  }

  function load(reset) {
    var generation = ++view.generation;
    if (reset) { view.next = ""; view.count = 0; }
    summary.textContent = "Loading…";
    more.disabled = true;
    var call = view.mode === "search"
      ? get(panel.dataset.search, { q: view.query, cursor: view.next })
      : get(panel.dataset.events + (view.next ? "?cursor=" + encodeURIComponent(view.next) : ""));
    call.then(function (page) {
      if (generation !== view.generation) return; // a newer request superseded this one
      if (reset) list.replaceChildren();
      list.append(fragment(page.html));
      view.count += Number(page.count) || 0;
      view.next = page.next || "";
      more.hidden = !view.next;
      summary.textContent = view.mode === "search"
        ? view.count + (view.next ? "+" : "") + " match" + (view.count === 1 ? "" : "es") + " for “" + view.query + "”, newest first."
        : "Showing the " + view.count + " most recent events" + (view.next ? "" : " (all of them)") + ".";
    }).catch(function (error) {
      if (generation === view.generation) summary.textContent = error.message;
    }).finally(function () { more.disabled = false; });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var q = input.value.trim();
    if (!q) return;
    view.mode = "search";
    view.query = q;
    load(true);
  });
  document.getElementById("record-timeline").addEventListener("click", function () {
    input.value = "";
    view.mode = "timeline";
    load(true);
  });
  more.addEventListener("click", function () { load(false); });

  list.addEventListener("click", function (event) {
    var b = event.target.closest(".note-expand");
    if (!b) return;
    var full = b.nextElementSibling;
    var preview = b.parentElement.querySelector(".note-preview");
    var open = b.getAttribute("aria-expanded") === "true";
    var show = function (on) {
      full.hidden = !on;
      if (preview) preview.hidden = on;
      b.setAttribute("aria-expanded", String(on));
      b.textContent = on ? "Show the preview only" : "Show the whole note";
    };
    if (open) return show(false);
    if (full.childElementCount) return show(true);
    b.disabled = true;
    get(b.dataset.url)
      .then(function (page) { full.replaceChildren(fragment(page.html)); show(true); })
      .catch(function () { full.textContent = "Could not load the note."; full.hidden = false; })
      .finally(function () { b.disabled = false; });
  });
})();
