/* MedAlign Review: grading responses against a rubric (criterion met / not met).
 *
 * The review page's save protocol (review.js; review/services/grading.py has the server's half):
 * every change is an edit {handle, field: "c<criterion>", value, at}; edits wait in `pending`,
 * mirrored in sessionStorage until the server acknowledges them, so a reload, a crash or a
 * sign-out loses nothing; resending is always safe (the server keeps the later edit per key);
 * the status says "saved" only when nothing is pending and the server said so; submit carries
 * the last edits itself and is idempotent.
 */
(function () {
  "use strict";

  var dataEl = document.getElementById("grading-data");
  var form = document.getElementById("grading-form");
  if (!dataEl || !form) return;
  var data = JSON.parse(dataEl.textContent);
  var editable = Boolean(data.editable);
  var values = data.values;
  var statusEl = document.getElementById("save-status");
  var announcer = document.getElementById("announcer");
  var submitBtn = document.getElementById("submit-grading");
  var errorsEl = document.getElementById("submit-errors");
  var noticeBar = document.getElementById("notice-bar");
  var noticeText = document.getElementById("notice-text");
  var SAVE_DEBOUNCE_MS = 600;
  var MAX_RETRY_MS = 10000;

  var storageKey = "medalign-grading:" + data.owner + ":" + data.grading;
  var store = (function () { try { return window.sessionStorage; } catch (e) { return null; } })();
  var saved = null;
  try { saved = store && JSON.parse(store.getItem(storageKey) || "null"); } catch (e) { saved = null; }
  var tab = saved && saved.tab ? saved.tab : Math.random().toString(36).slice(2) + Date.now().toString(36);
  var seq = saved && saved.seq ? saved.seq : 0;
  var pending = editable && saved && Array.isArray(saved.edits) ? saved.edits : [];
  pending.forEach(function (e) { values[e.handle + "." + e.field] = e.value; });

  function persist() {
    if (!store) return;
    try {
      if (pending.length || seq) store.setItem(storageKey, JSON.stringify({ tab: tab, seq: seq, edits: pending }));
    } catch (e) { /* storage full or off: the edits are still in memory */ }
  }
  function forget() {
    pending = [];
    if (store) try { store.removeItem(storageKey); } catch (e) { /* ignore */ }
  }
  function setStatus(state, text) { statusEl.dataset.state = state; statusEl.textContent = text; }
  function announce(text) {
    announcer.textContent = "";
    window.setTimeout(function () { announcer.textContent = text; }, 30);
  }
  function notice(text) { noticeText.textContent = text; noticeBar.hidden = !text; }
  function changes(n) { return n + " change" + (n === 1 ? "" : "s"); }

  /* ---------------------------------------------------------------- rows */
  var rows = Array.prototype.slice.call(form.querySelectorAll("li.criterion"));
  function keyOf(row) { return row.dataset.handle + "." + row.dataset.field; }
  function render(row) {
    var v = values[keyOf(row)];
    row.dataset.met = v === null || v === undefined ? "" : String(v);
    row.querySelectorAll("button[data-value]").forEach(function (b) {
      b.setAttribute("aria-pressed", String(v !== null && v !== undefined && String(v) === b.dataset.value));
      b.disabled = !editable;
    });
  }
  rows.forEach(render);

  function describe(row) {
    return "Response " + data.labels[row.dataset.handle] + ", criterion " + (Array.prototype.indexOf.call(row.parentNode.children, row) + 1);
  }

  function mark(row, value, advance) {
    if (!editable) return;
    var key = keyOf(row);
    if (values[key] === value && !advance) value = null; // pressing again clears
    values[key] = value;
    pending = pending.filter(function (e) { return e.handle + "." + e.field !== key; });
    pending.push({ handle: row.dataset.handle, field: row.dataset.field, value: value, at: Date.now() });
    persist();
    render(row);
    announce(describe(row) + (value === null ? " cleared" : value ? " met" : " not met") + ".");
    schedule(SAVE_DEBOUNCE_MS);
    if (advance) focusRow(rows.indexOf(row) + 1);
  }

  function focusRow(i) {
    var row = rows[Math.max(0, Math.min(rows.length - 1, i))];
    if (row) { row.focus(); row.scrollIntoView({ block: "nearest" }); }
  }

  form.addEventListener("click", function (event) {
    var b = event.target.closest("button[data-value]");
    if (!b) return;
    mark(b.closest("li.criterion"), b.dataset.value === "true", false);
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var row = event.target.closest && event.target.closest("li.criterion");
    if (!row || event.target !== row) return;
    var i = rows.indexOf(row);
    var key = event.key.toLowerCase();
    var handled = true;
    if (key === "y" || key === "m") mark(row, true, true);
    else if (key === "n" || key === "x") mark(row, false, true);
    else if (key === "0" || key === "backspace" || key === "delete") mark(row, null, false);
    else if (key === "j" || key === "arrowdown") focusRow(i + 1);
    else if (key === "k" || key === "arrowup") focusRow(i - 1);
    else handled = false;
    if (handled) event.preventDefault();
  });

  /* ---------------------------------------------------------------- the server */
  function csrfToken() {
    var m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (m) return decodeURIComponent(m[1]);
    var input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }
  function request(url, payload, keepalive) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      redirect: "manual",
      keepalive: Boolean(keepalive),
      headers: { Accept: "application/json", "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(payload),
    }).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      var body = type.indexOf("application/json") >= 0 ? response.json().catch(function () { return {}; }) : Promise.resolve({});
      return body.then(function (json) {
        // A redirect or an HTML page means the session is gone.
        var status = response.type === "opaqueredirect" ? 401 : response.status;
        if (status === 200 && type.indexOf("application/json") < 0) status = 401;
        // A refusal names the account it was for (X-Account): another than this page's means
        // the browser signed in as someone else since the page opened.
        var account = response.headers.get("X-Account") || "";
        return { status: status, body: json, otherAccount: Boolean(account) && account !== data.owner };
      });
    });
  }

  var timer = null;
  var inFlight = null;
  var retryMs = 0;
  var stopped = false;
  var submitting = false;
  var activeSeconds = 0;
  var lastActivity = Date.now();
  ["keydown", "pointerdown", "scroll"].forEach(function (name) {
    document.addEventListener(name, function () { lastActivity = Date.now(); }, { passive: true, capture: true });
  });
  window.setInterval(function () {
    if (editable && document.visibilityState === "visible" && Date.now() - lastActivity < 60000) activeSeconds += 1;
  }, 1000);

  function batch() {
    seq += 1;
    persist();
    return { edits: pending.slice(), tab: tab, seq: seq, active_seconds: Math.min(activeSeconds, 86400) };
  }
  function schedule(ms) {
    if (stopped || blocked) return;
    window.clearTimeout(timer);
    timer = window.setTimeout(flush, ms);
    if (pending.length) setStatus("pending", "Saving soon: " + changes(pending.length) + " not saved yet.");
  }
  function acknowledge(sent) {
    pending = pending.filter(function (e) { return sent.edits.indexOf(e) < 0; });
    activeSeconds = Math.max(0, activeSeconds - sent.active_seconds);
    persist();
    retryMs = 0;
  }
  function two(n) { return (n < 10 ? "0" : "") + n; }
  function flush() {
    timer = null;
    if (inFlight || stopped || blocked || submitting || !editable || !pending.length) return inFlight;
    var sent = batch();
    setStatus("saving", "Saving…");
    inFlight = request(data.urls.save, sent)
      .then(function (res) { handle(res, sent); })
      .catch(function () { trouble("You are offline or the server cannot be reached."); })
      .finally(function () { inFlight = null; });
    return inFlight;
  }
  function handle(res, sent) {
    if (res.status === 200) {
      if (accountHeader) ownerBack();
      acknowledge(sent);
      notice("");
      if (pending.length) schedule(SAVE_DEBOUNCE_MS);
      else { var t = new Date(); setStatus("saved", "All changes saved at " + two(t.getHours()) + ":" + two(t.getMinutes()) + "."); }
      return;
    }
    if (res.status === 401) {
      setStatus("signed-out", "Signed out: " + changes(pending.length) + " kept on this page, not saved yet.");
      notice("Your session has ended. Sign in again and your changes are sent; they stay on this page meanwhile.");
      signinLink.href = (res.body && res.body.login_url) || data.urls.login;
      signinLink.hidden = false;
      window.clearTimeout(timer);
      timer = window.setTimeout(submitting ? submitNow : flush, 15000);
      return;
    }
    if (res.otherAccount && res.body.error !== "csrf") return otherAccount();
    if (res.status === 403 && res.body.error !== "csrf") {
      // Access lapsed (revoked, expired, a new DUA): retrying cannot help until the clinician
      // acts; the edits stay in this tab.
      window.clearTimeout(timer);
      setStatus("blocked", "Not saved: " + (res.body.requirement ? res.body.requirement + " needed" : "access needed") + ", " + changes(pending.length) + " kept on this page.");
      notice(res.body.message || "Your access to the records needs attention.");
      return;
    }
    if (res.status === 409 && res.body.error === "read_only") return submittedElsewhere(res.body);
    if (res.status === 400) {
      var m = /^edits\[(\d+)\]/.exec(res.body.field || "");
      var bad = m && sent.edits[Number(m[1])];
      // A 400 that names no edit (a proxy's HTML page, a body the server could not read) says
      // nothing against any one edit: none is dropped, and they all go again later.
      if (!bad) return trouble((res.body.message || "The server refused the request (400)") + ".");
      pending = pending.filter(function (e) { return e !== bad; });
      persist();
      setStatus("error", "One change was refused: " + (res.body.message || "the server refused it") + ".");
      if (pending.length) schedule(SAVE_DEBOUNCE_MS);
      return;
    }
    trouble(res.body.message || "The server had a problem saving (" + res.status + ").");
  }
  // The browser is signed in as another account than the one that opened this page (a sign-in
  // in another tab): the server refuses this grading to it, and would until that account signs
  // in again. The page stops, says whose grading this is, and keeps every edit.
  var blocked = false;
  var accountHeader = null;
  function accountNav() {
    var nav = document.querySelector("[data-testid=nav-account]");
    return { who: nav && nav.querySelector(".who"), note: nav && nav.querySelector(".menu-note") };
  }
  function otherAccount() {
    blocked = true;
    submitting = false;
    submitBtn.disabled = !editable;
    window.clearTimeout(timer);
    timer = null;
    var nav = accountNav();
    if (!accountHeader) accountHeader = { who: nav.who ? nav.who.textContent : "", note: nav.note ? nav.note.textContent : "" };
    var opener = accountHeader.who || "the account that opened it";
    if (nav.who) nav.who.textContent = "Another account";
    if (nav.note) nav.note.textContent = "This page was opened by " + opener + "; this browser is now signed in as a different account.";
    var n = pending.length;
    setStatus("other-account", "Not saved: this browser is signed in as a different account" + (n ? "; " + changes(n) + " kept in this tab." : "."));
    notice("This browser is now signed in as a different account. This grading belongs to " + opener + ", the account that opened it" +
      (n ? "; your edits are kept in this tab. Sign in as " + opener + " to save them." : ". Sign in as " + opener + " to go on."));
  }
  function ownerBack() {
    var nav = accountNav();
    if (nav.who) nav.who.textContent = accountHeader.who;
    if (nav.note) nav.note.textContent = accountHeader.note;
    accountHeader = null;
  }
  function trouble(message) {
    retryMs = retryMs ? Math.min(retryMs * 2, MAX_RETRY_MS) : 1000;
    setStatus("offline", "Not saved yet: " + changes(pending.length) + " waiting. " + message + " Trying again in " + Math.max(1, Math.round(retryMs / 1000)) + " s.");
    window.clearTimeout(timer);
    timer = window.setTimeout(submitting ? submitNow : flush, retryMs);
  }
  function lock() {
    editable = false;
    rows.forEach(render);
    submitBtn.disabled = true;
  }
  function submittedElsewhere(body) {
    stopped = true;
    window.clearTimeout(timer);
    forget();
    lock();
    var unapplied = body.unapplied || [];
    setStatus("conflict", "Submitted elsewhere: read-only.");
    showErrors([(body.message || "This grading was submitted elsewhere") + ". " +
      (unapplied.length ? unapplied.length + " change(s) made here were not applied." : "Everything you changed here is in the submitted grading.")]);
  }
  window.addEventListener("online", function () { if (pending.length) schedule(0); });
  // Signing in again (the window the link opens, or any tab) sends what was kept at once.
  var signinLink = document.getElementById("signin-open");
  signinLink.addEventListener("click", function (event) {
    event.preventDefault();
    window.open(signinLink.href, "medalign-signin", "width=520,height=720");
  });
  function resume() {
    signinLink.hidden = true;
    notice("");
    blocked = false;
    if (stopped) return;
    if (submitting) submitNow();
    else schedule(0);
  }
  if ("BroadcastChannel" in window) new BroadcastChannel("medalign-session").addEventListener("message", resume);
  window.addEventListener("message", function (event) {
    if (event.origin === window.location.origin && event.data === "medalign-signed-in") resume();
  });
  window.addEventListener("pagehide", function () {
    if (editable && !stopped && !submitting && pending.length) request(data.urls.save, batch(), true).catch(function () {});
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden" && editable && !stopped && !submitting && pending.length) {
      request(data.urls.save, batch(), true).catch(function () {});
    }
  });

  /* ---------------------------------------------------------------- submit */
  function showErrors(list) {
    errorsEl.replaceChildren();
    if (!list.length) { errorsEl.hidden = true; return; }
    var ul = document.createElement("ul");
    list.forEach(function (text) { var li = document.createElement("li"); li.textContent = text; ul.append(li); });
    errorsEl.append(ul);
    errorsEl.hidden = false;
    errorsEl.focus();
  }
  function unmarked() {
    return rows.filter(function (row) { var v = values[keyOf(row)]; return v === null || v === undefined; });
  }
  function submitNow() {
    window.clearTimeout(timer);
    timer = null;
    setStatus("saving", "Submitting…");
    var sent = batch();
    request(data.urls.submit, sent).then(function (res) {
      if (res.status === 200 && res.body.status === "submitted") {
        stopped = true;
        forget();
        lock();
        setStatus("submitted", "Submitted. Thank you. The grading is now read-only.");
        showErrors([]);
        announce("Grading submitted.");
      } else if (res.status === 401 || res.status >= 500 || (res.otherAccount && res.body.error !== "csrf")) {
        handle(res, sent);
      } else if (res.status === 409 && res.body.error === "read_only") {
        submitting = false;
        submittedElsewhere(res.body);
      } else {
        submitting = false;
        submitBtn.disabled = false;
        if (pending.length) schedule(SAVE_DEBOUNCE_MS); // a refused submit applied nothing: save the edits as a draft
        setStatus("error", "Not submitted: " + (res.body.message || "the server refused it") + ".");
        showErrors([res.body.message || "The server refused the grading."]);
      }
    }).catch(function () { trouble("You are offline or the server cannot be reached."); });
  }
  submitBtn.addEventListener("click", function () {
    if (!editable || submitting) return;
    var left = unmarked();
    if (left.length) {
      showErrors(["Mark every criterion for every response: " + left.length + " not marked yet (first: " + describe(left[0]) + ")."]);
      left[0].focus();
      return;
    }
    submitting = true;
    submitBtn.disabled = true;
    submitNow();
  });
  if (pending.length) schedule(0);
  // Keys typed before this point went nowhere: tests (and assistive tools) wait for this mark.
  form.dataset.ready = "true";
})();
