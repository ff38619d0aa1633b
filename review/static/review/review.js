/* MedAlign Review: the review page.
 *
 * Loaded as a file (the CSP forbids inline script); its data comes from the JSON block
 * #review-data: per-review response handles, neutral labels and current values, never model
 * names or database ids.
 *
 * Saving (review/services/reviews.py has the server's half):
 * - every change is an edit {handle, field, value, at}; edits wait in `pending`, mirrored in
 *   sessionStorage (this tab only, cleared as soon as the server acknowledges them, and on
 *   submit), so a reload, a crash or a sign-out cannot lose them;
 * - the server merges edits per response and field (the later edit wins), so resending is
 *   always safe and two tabs never refuse each other;
 * - the status says "saved" only when nothing is pending and the server said so;
 * - a 401 opens a sign-in window without leaving the page, and the edits go once it is done.
 * Sections: state and saving, the cards and ranking, keyboard, submit, the record panel.
 *
 * The adjudication page runs this same script (data.kind "adjudication"): its own fields
 * (data.fields: a reason, required) take the place of the review's cannot-assess fields.
 */
(function () {
  "use strict";

  var dataEl = document.getElementById("review-data");
  var form = document.getElementById("review-form");
  if (!dataEl || !form) return;
  var data = JSON.parse(dataEl.textContent);
  var editable = Boolean(data.editable);
  var N = data.responses.length;
  var kind = data.kind || "review";
  var noun = kind === "adjudication" ? "adjudication" : "review";

  var statusEl = document.getElementById("save-status");
  var announcer = document.getElementById("announcer");
  var submitBtn = document.getElementById("submit-review");
  var errorsEl = document.getElementById("submit-errors");
  var noticeBar = document.getElementById("notice-bar");
  var noticeText = document.getElementById("notice-text");
  var noticeActions = document.getElementById("notice-actions");
  var signinDialog = document.getElementById("signin-dialog");

  var SAVE_DEBOUNCE_MS = 600;
  var MAX_RETRY_MS = 10000;
  var SYNC_EVERY_MS = 20000;

  /* ================================================================ state */
  // values[handle] = {rank, is_correct, tags, comment}; review-level fields under "".
  var values = {};
  var labels = {};
  var previews = {};
  data.responses.forEach(function (r) {
    values[r.handle] = { rank: r.rank, is_correct: r.is_correct, tags: r.tags.slice(), comment: r.comment };
    labels[r.handle] = r.label;
    previews[r.handle] = r.preview;
  });
  values[""] = data.fields ? Object.assign({}, data.fields) : { cannot_assess: data.cannot_assess, cannot_assess_note: data.cannot_assess_note };

  function keyOf(handle, field) { return handle ? handle + "." + field : field; }

  var storageKey = "medalign-" + kind + ":" + data.owner + ":" + data.review;
  var store = (function () {
    try { return window.sessionStorage; } catch (e) { return null; }
  })();
  var saved = null;
  try { saved = store && JSON.parse(store.getItem(storageKey) || "null"); } catch (e) { saved = null; }
  var tab = saved && saved.tab ? saved.tab : Math.random().toString(36).slice(2) + Date.now().toString(36);
  var seq = saved && saved.seq ? saved.seq : 0;
  // Edits the server has not acknowledged, oldest first, at most one per key (the newest).
  var pending = editable && saved && Array.isArray(saved.edits) ? saved.edits : [];

  function persist() {
    if (!store) return;
    try {
      if (pending.length || seq) store.setItem(storageKey, JSON.stringify({ tab: tab, seq: seq, edits: pending }));
      if (!pending.length && !editable) store.removeItem(storageKey);
    } catch (e) { /* storage full or off: the edits are still in memory */ }
  }

  function forget() {
    pending = [];
    if (store) try { store.removeItem(storageKey); } catch (e) { /* ignore */ }
  }

  function applyValue(key, value) {
    var dot = key.indexOf(".");
    var handle = dot < 0 ? "" : key.slice(0, dot);
    var field = dot < 0 ? key : key.slice(dot + 1);
    if (!values[handle]) return;
    values[handle][field] = value;
  }

  // Edits this tab kept from before a reload go on top of what the server rendered.
  pending.forEach(function (e) { applyValue(keyOf(e.handle, e.field), e.value); });

  function changes(n) { return n + " change" + (n === 1 ? "" : "s"); }

  function setStatus(state, text) {
    statusEl.dataset.state = state;
    statusEl.textContent = text;
  }

  function announce(text) {
    announcer.textContent = "";
    window.setTimeout(function () { announcer.textContent = text; }, 30);
  }

  function notice(text, actions) {
    noticeText.textContent = text;
    noticeActions.replaceChildren();
    (actions || []).forEach(function (a) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "button" + (a.primary ? " primary" : "");
      b.textContent = a.label;
      b.addEventListener("click", a.run);
      noticeActions.append(b);
    });
    noticeBar.hidden = !text;
  }

  // Text over its limit (a comment, the cannot-assess details) is kept here and in this tab's
  // storage but not sent: the server refuses it, and cutting it would lose the clinician's words.
  var LIMITS = data.limits || {};
  function overBy(e) {
    var max = LIMITS[e.field];
    return max && typeof e.value === "string" && e.value.length > max ? e.value.length - max : 0;
  }
  // Text the server refused because it cannot store it (a NUL, half of a surrogate pair: a paste
  // from another program) is held the same way, flagged ``refused``, until the clinician changes it.
  function sendable(e) { return !overBy(e) && !e.refused; }
  function held() { return pending.filter(function (e) { return !sendable(e); }); }
  function describeField(e) {
    if (e.handle) return "the comment on Response " + labels[e.handle];
    return e.field === "reason" ? "the reason" : "the cannot-assess details";
  }
  function heldReason(e) {
    if (e.refused) return describeField(e) + " holds a character that cannot be saved (a NUL or a broken character, often from a paste)";
    return describeField(e) + " is " + overBy(e).toLocaleString("en") + " characters over the limit of " + LIMITS[e.field].toLocaleString("en");
  }
  function heldText() {
    return held().map(heldReason).join("; ");
  }
  function showHeld() {
    setStatus("error", "Not saved: " + heldText() + ". " + (held().some(function (e) { return e.refused; }) ? "Change it to save." : "Shorten it to save."));
  }

  function edit(handle, field, value) {
    if (!editable) return;
    var key = keyOf(handle, field);
    applyValue(key, value);
    pending = pending.filter(function (e) { return keyOf(e.handle, e.field) !== key; });
    var item = { field: field, value: value, at: Date.now() };
    if (handle) item.handle = handle;
    pending.push(item);
    persist();
    schedule(SAVE_DEBOUNCE_MS);
    if (handle) rememberEdited(handle);
  }

  /* ================================================================ talking to the server */
  function csrfToken() {
    // Read at every request: signing in again (in any tab) rotates it.
    var m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (m) return decodeURIComponent(m[1]);
    var input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function request(method, url, payload, keepalive) {
    var init = {
      method: method,
      credentials: "same-origin",
      redirect: "manual",
      keepalive: Boolean(keepalive),
      headers: { Accept: "application/json" },
    };
    if (payload !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.headers["X-CSRFToken"] = csrfToken();
      init.body = JSON.stringify(payload);
    }
    return fetch(url, init).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      var body = type.indexOf("application/json") >= 0 ? response.json().catch(function () { return {}; }) : Promise.resolve({});
      return body.then(function (json) {
        // A redirect or an HTML page is never drawn: it means the session is gone.
        var status = response.type === "opaqueredirect" ? 401 : response.status;
        if (status === 200 && type.indexOf("application/json") < 0) status = 401;
        // A refusal names the account it was for (X-Account): another than this page's means
        // the browser signed in as someone else since the page opened.
        var account = response.headers.get("X-Account") || "";
        return { status: status, body: json, otherAccount: Boolean(account) && account !== data.owner };
      });
    });
  }

  var inFlight = null;
  var timer = null;
  var retryMs = 0;
  var signedOut = false;
  var stopped = false; // submitted (here or elsewhere): nothing more to send
  var submitting = false;
  var activeSeconds = 0;
  var lastAck = null;

  function schedule(ms) {
    if (stopped || blocked) return;
    window.clearTimeout(timer);
    timer = window.setTimeout(flush, ms);
    var n = pending.filter(sendable).length;
    if (signedOut) return;
    if (n) setStatus("pending", "Saving soon: " + changes(n) + " not saved yet.");
    else if (held().length) showHeld();
  }

  function batch() {
    seq += 1;
    persist();
    return { edits: pending.filter(sendable), tab: tab, seq: seq, active_seconds: Math.min(activeSeconds, 86400) };
  }

  function acknowledge(sent, body) {
    // Drop the edits the server now has, unless the clinician changed them again meanwhile.
    pending = pending.filter(function (e) { return sent.edits.indexOf(e) < 0; });
    activeSeconds = Math.max(0, activeSeconds - sent.active_seconds);
    persist();
    if (body && body.draft) {
      mergeServer(body.draft);
      // Other tabs of this review take the new values at once (they hear about sessions the
      // same way); each keeps whatever it has not sent yet.
      if (reviewChannel && sent.edits.length) reviewChannel.postMessage({ tab: tab, draft: body.draft });
    }
    retryMs = 0;
    lastAck = new Date();
  }

  function mergeServer(draft) {
    // Another tab's edits: take every field this tab has nothing pending for.
    var mine = {};
    pending.forEach(function (e) { mine[keyOf(e.handle, e.field)] = true; });
    var touched = {};
    Object.keys(draft).forEach(function (key) {
      if (mine[key]) return;
      var dot = key.indexOf(".");
      var handle = dot < 0 ? "" : key.slice(0, dot);
      var field = dot < 0 ? key : key.slice(dot + 1);
      if (!values[handle]) return;
      if (JSON.stringify(values[handle][field]) === JSON.stringify(draft[key])) return;
      values[handle][field] = draft[key];
      touched[handle] = true;
    });
    Object.keys(touched).forEach(function (h) { if (h) renderCard(h); else renderReviewFields(); });
    if (Object.keys(touched).length) renderSummary();
  }

  function two(n) { return (n < 10 ? "0" : "") + n; }
  function savedText() {
    // 24-hour, as every other time on the site, whatever the browser's locale.
    return "All changes saved" + (lastAck ? " at " + two(lastAck.getHours()) + ":" + two(lastAck.getMinutes()) : "") + ".";
  }

  function flush() {
    timer = null;
    if (inFlight || stopped || submitting || !editable || blocked) return inFlight;
    var ready = pending.filter(sendable).length;
    if (!ready && activeSeconds < 1 && !syncDue) {
      if (held().length) showHeld();
      return null;
    }
    syncDue = false;
    var sent = batch();
    if (ready) setStatus("saving", "Saving…");
    inFlight = request("POST", data.urls.save, sent)
      .then(function (res) { handleSave(res, sent); })
      .catch(function () { trouble("You are offline or the server cannot be reached."); })
      .finally(function () { inFlight = null; });
    return inFlight;
  }

  function handleSave(res, sent) {
    if (res.status === 200) {
      if (signedOut) signedIn();
      if (accountHeader) ownerBack();
      acknowledge(sent, res.body);
      if (pending.some(sendable)) schedule(SAVE_DEBOUNCE_MS);
      else if (pending.length) showHeld();
      else {
        setStatus("saved", savedText());
        notice("");
      }
      return;
    }
    if (res.status === 401) return sessionEnded(res.body);
    if (res.otherAccount && res.body.error !== "csrf") return otherAccount();
    if (res.status === 403 && res.body.error === "csrf") {
      // The token changed (signed in again elsewhere): the next try reads the new cookie.
      return trouble(res.body.message || "Sending your changes again.", 500);
    }
    if (res.status === 403) return accessLost(res.body);
    if (res.status === 409 && res.body.error === "read_only") return submittedElsewhere(res.body);
    if (res.status === 400) return refused(res.body, sent);
    trouble(res.body.message || "The server had a problem saving (" + res.status + ").");
  }

  function trouble(message, waitMs) {
    retryMs = waitMs || (retryMs ? Math.min(retryMs * 2, MAX_RETRY_MS) : 1000);
    var n = pending.length;
    setStatus("offline", (n ? "Not saved yet: " + changes(n) + " waiting. " : "") + message + " Trying again in " + Math.max(1, Math.round(retryMs / 1000)) + " s.");
    if (n) notice("Not saved yet. " + message + " Your changes are kept in this tab and sent as soon as the server answers.", [{ label: "Try now", run: function () { schedule(0); } }]);
    window.clearTimeout(timer);
    timer = window.setTimeout(submitting ? submitNow : flush, retryMs);
  }

  // The edits of ``sent`` a 400 names: every one in ``refused`` (text the server cannot store),
  // else the one its ``field`` names, else none.
  function namedEdits(body, sent) {
    var names = Array.isArray(body.refused) ? body.refused : [body.field || ""];
    var named = [];
    names.forEach(function (name) {
      var m = /^edits\[(\d+)\]/.exec(name);
      var e = m && sent.edits[Number(m[1])];
      if (e && named.indexOf(e) < 0) named.push(e);
    });
    return named;
  }

  // Text the server cannot store: the rest of the batch was saved (``state``); the refused edits
  // stay in this tab, held, until the clinician changes them. Returns whether it was that.
  function holdRefused(body, sent) {
    if (!Array.isArray(body.refused)) return false;
    var named = namedEdits(body, sent);
    named.forEach(function (e) { e.refused = true; });
    if (body.state) acknowledge({ edits: sent.edits.filter(function (e) { return named.indexOf(e) < 0; }), active_seconds: sent.active_seconds }, body.state);
    persist();
    return true;
  }

  function refused(body, sent) {
    if (holdRefused(body, sent)) {
      showHeld();
      notice("Not saved: " + heldText() + ". Change that text; everything else is saved.");
      if (pending.some(sendable)) schedule(SAVE_DEBOUNCE_MS);
      return;
    }
    var bad = namedEdits(body, sent)[0];
    if (!bad) {
      // A 400 that names no edit (a proxy's HTML page, a body the server could not read) says
      // nothing against any one edit: none is dropped, and they all go again later.
      return trouble((body.message || "The server refused the request (400)") + ".");
    }
    // A malformed edit (a bug, or a tag an admin just retired): drop it so the rest can go.
    pending = pending.filter(function (e) { return e !== bad; });
    persist();
    setStatus("error", "One change was refused: " + (body.message || "the server refused it") + ".");
    notice("One change was refused: " + (body.message || "the server refused it") + ". Everything else is kept.");
    if (pending.length) schedule(SAVE_DEBOUNCE_MS);
  }

  function sessionEnded(body) {
    signedOut = true;
    // Sign in again, or only the second factor when the session lacks it: the server says where.
    if (body && body.login_url) loginUrl = body.login_url;
    var link = document.getElementById("signin-open");
    if (link) link.href = loginUrl;
    var said = document.getElementById("signin-text");
    // The dialog's title already says the session ended: its text says what to do.
    if (said && body && body.message) said.textContent = body.message.replace(/^Your session has ended\.\s*/, "");
    window.clearTimeout(timer);
    var n = pending.length;
    setStatus("signed-out", "Signed out: " + changes(n) + " kept on this page, not saved yet.");
    notice("Your session has ended. Sign in again to save; your changes stay on this page.", [
      { label: "Sign in again", primary: true, run: openSignin },
    ]);
    if (signinDialog && !signinDialog.open && typeof signinDialog.showModal === "function") signinDialog.showModal();
    // Also try now and then: the clinician may sign in in another tab without coming back here.
    timer = window.setTimeout(submitting ? submitNow : flush, 15000);
  }

  // Access lapsed (revoked, expired, a new DUA, no second factor): retrying cannot help until
  // the clinician acts, so the page stops, says which requirement failed and keeps the edits.
  var blocked = false;
  function accessLost(body) {
    blocked = true;
    window.clearTimeout(timer);
    timer = null;
    var message = (body && body.message) || "Your access to the records needs attention.";
    var n = pending.length;
    setStatus("blocked", "Not saved: " + (body && body.requirement ? body.requirement + " needed" : "access needed") + (n ? ", " + changes(n) + " kept on this page." : "."));
    notice(message, [
      { label: "Open your access page", primary: true, run: function () { window.open((body && body.access_url) || data.urls.access, "_blank", "noopener"); } },
      { label: "Try again", run: function () { blocked = false; notice(""); resume(); } },
    ]);
    noticeBar.dataset.requirement = (body && body.requirement) || "";
  }

  // The browser is signed in as another account than the one that opened this page (a sign-in
  // in another tab): the server refuses this review to it (404, or 403 for a role without
  // reviews), and would until that account signs in again. Retrying cannot help, and "Not
  // found" says nothing: the page stops, says whose review this is, and keeps every edit.
  var accountHeader = null;
  function otherAccount() {
    blocked = true;
    submitting = false;
    submitBtn.disabled = !editable;
    window.clearTimeout(timer);
    timer = null;
    if (signinDialog && signinDialog.open) signinDialog.close();
    var nav = document.querySelector("[data-testid=nav-account]");
    var who = nav && nav.querySelector(".who");
    var note = nav && nav.querySelector(".menu-note");
    if (!accountHeader) accountHeader = { who: who ? who.textContent : "", note: note ? note.textContent : "" };
    var opener = accountHeader.who || "the account that opened it";
    // The header named the opener as signed in; it is not, in this browser, any more.
    if (who) who.textContent = "Another account";
    if (note) note.textContent = "This page was opened by " + opener + "; this browser is now signed in as a different account.";
    var n = pending.length;
    setStatus("other-account", "Not saved: this browser is signed in as a different account" + (n ? "; " + changes(n) + " kept in this tab." : "."));
    notice("This browser is now signed in as a different account. This " + noun + " belongs to " + opener +
      ", the account that opened it" + (n ? "; your edits are kept in this tab. Sign in as " + opener + " to save them." : ". Sign in as " + opener + " to go on."), [
      { label: "Try again", run: function () { notice(""); resume(); } },
    ]);
  }
  function ownerBack() {
    var nav = document.querySelector("[data-testid=nav-account]");
    var who = nav && nav.querySelector(".who");
    var note = nav && nav.querySelector(".menu-note");
    if (who) who.textContent = accountHeader.who;
    if (note) note.textContent = accountHeader.note;
    accountHeader = null;
    notice("");
  }

  var loginUrl = data.urls.login;
  function openSignin(event) {
    if (event) event.preventDefault();
    window.open(loginUrl, "medalign-signin", "width=520,height=720");
  }

  function signedIn() {
    signedOut = false;
    if (signinDialog && signinDialog.open) signinDialog.close();
    notice("");
    announce("Signed in again. Saving your changes.");
  }

  function resume() {
    if (stopped) return;
    blocked = false;
    if (signedOut) signedIn();
    window.clearTimeout(timer);
    syncDue = true;
    if (submitting) submitNow();
    else flush();
  }

  var reviewChannel = null;
  if ("BroadcastChannel" in window) {
    new BroadcastChannel("medalign-session").addEventListener("message", resume);
    reviewChannel = new BroadcastChannel("medalign-" + kind + ":" + data.owner + ":" + data.review);
    reviewChannel.addEventListener("message", function (event) {
      var message = event.data || {};
      if (message.tab === tab || stopped) return;
      if (message.draft) mergeServer(message.draft);
      if (message.submitted) { syncDue = true; flush(); } // the server says what was not applied
    });
  }
  window.addEventListener("message", function (event) {
    if (event.origin === window.location.origin && event.data === "medalign-signed-in") resume();
  });
  if (signinDialog) {
    document.getElementById("signin-open").addEventListener("click", openSignin);
    document.getElementById("signin-retry").addEventListener("click", function () { signinDialog.close(); resume(); });
  }
  window.addEventListener("online", function () { if (pending.length) schedule(0); });

  function submittedElsewhere(body) {
    var unapplied = body.unapplied || [];
    stopped = true;
    window.clearTimeout(timer);
    forget();
    editable = false;
    lockPage();
    var list = unapplied.map(describeKey).join("; ");
    var text = (body.message || "This " + noun + " was submitted elsewhere") + ". " +
      (unapplied.length
        ? "These changes made here were not applied: " + list + ". Ask an admin to reopen the review if they matter."
        : "Everything you changed here is in the submitted " + noun + ".");
    setStatus("conflict", "Submitted elsewhere: read-only.");
    notice(text, [{ label: "Show the submitted " + noun, primary: true, run: function () { window.location.reload(); } }]);
    showErrors([text], "");
  }

  function describeKey(key) {
    var dot = key.indexOf(".");
    if (dot < 0) return key === "cannot_assess" ? "the cannot-assess reason" : key === "reason" ? "the reason" : "the cannot-assess details";
    return "Response " + labels[key.slice(0, dot)] + " " + key.slice(dot + 1).replace("is_correct", "correct/incorrect");
  }

  /* time spent, and keeping two tabs in step */
  var lastActivity = Date.now();
  var syncDue = false;
  ["keydown", "pointerdown", "wheel", "scroll", "input"].forEach(function (name) {
    document.addEventListener(name, function () { lastActivity = Date.now(); }, { passive: true, capture: true });
  });
  window.setInterval(function () {
    if (editable && document.visibilityState === "visible" && Date.now() - lastActivity < 60000) activeSeconds += 1;
  }, 1000);
  window.setInterval(function () {
    if (document.visibilityState === "visible" && !signedOut && !inFlight && !timer) {
      syncDue = true;
      flush();
    }
  }, SYNC_EVERY_MS);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") flushOnLeave();
    else if (!signedOut) { syncDue = true; if (!timer) flush(); }
  });
  window.addEventListener("pagehide", flushOnLeave);

  function flushOnLeave() {
    // The tab is hidden or closing: send now. The edits stay pending (and in this tab's
    // storage) until acknowledged, so a reload resends them; resending is harmless.
    if (!editable || stopped || submitting || !pending.length) return;
    request("POST", data.urls.save, batch(), true).catch(function () {});
  }

  /* ================================================================ cards and ranking */
  var cards = {};
  Array.prototype.forEach.call(document.querySelectorAll(".response[data-handle]"), function (card) {
    cards[card.dataset.handle] = card;
  });
  var handles = data.responses.map(function (r) { return r.handle; });

  function renderCard(handle) {
    var v = values[handle];
    var card = cards[handle];
    if (!card) return;
    card.querySelector("select[data-field=rank]").value = v.rank ? String(v.rank) : "";
    card.querySelectorAll("button[data-field=is_correct]").forEach(function (b) {
      b.setAttribute("aria-pressed", String(v.is_correct !== null && String(v.is_correct) === b.dataset.value));
    });
    card.querySelectorAll("input[data-field=tags]").forEach(function (box) { box.checked = v.tags.indexOf(box.value) >= 0; });
    card.querySelector("[data-tag-count]").textContent = v.tags.length ? "(" + v.tags.length + ")" : "";
    if (v.tags.length) card.querySelector(".tags-box").open = true;
    if (v.comment) card.querySelector(".comment-box").open = true;
    var area = card.querySelector("textarea[data-field=comment]");
    if (document.activeElement !== area) area.value = v.comment;
    showCount(area);
    card.dataset.rank = v.rank || "";
    card.dataset.correct = v.is_correct === null ? "" : String(v.is_correct);
  }

  function renderReviewFields() {
    // The page's own fields (outside every response): the cannot-assess reason and details,
    // or an adjudication's reason.
    var v = values[""];
    Array.prototype.forEach.call(form.querySelectorAll("[data-field]"), function (el) {
      var field = el.dataset.field;
      if (el.closest(".response") || !(field in v)) return;
      if (el.tagName === "TEXTAREA") {
        if (document.activeElement !== el) el.value = v[field] || "";
        showCount(el);
      } else el.value = v[field] || "";
    });
  }

  /* text boxes: grow with their text, count characters, refuse (never cut) past the limit */
  var growByItself = window.CSS && CSS.supports && CSS.supports("field-sizing", "content");
  function showCount(area) {
    var max = Number(area.dataset.max) || 0;
    var counter = max && document.getElementById(area.getAttribute("aria-describedby"));
    if (!growByItself) {
      area.style.height = "auto";
      area.style.height = area.scrollHeight + 2 + "px";
    }
    if (!counter) return;
    var n = area.value.length;
    var over = n > max;
    counter.textContent = n.toLocaleString("en") + " / " + max.toLocaleString("en") + " characters" +
      (over ? ": " + (n - max).toLocaleString("en") + " over the limit. Shorten it to save; nothing has been cut." : "");
    counter.classList.toggle("over", over);
    if (over) area.setAttribute("aria-invalid", "true");
    else area.removeAttribute("aria-invalid");
    if (over !== (area.dataset.over === "true")) {
      area.dataset.over = String(over);
      announce(over ? "Over the limit of " + max.toLocaleString("en") + " characters: not saved until shortened." : "Within the limit again.");
    }
  }

  function groups() {
    // Ranked responses grouped by rank, best first; within a rank in the order shown.
    var byRank = {};
    handles.forEach(function (h) {
      var r = values[h].rank;
      if (r) (byRank[r] = byRank[r] || []).push(h);
    });
    return Object.keys(byRank).map(Number).sort(function (a, b) { return a - b; }).map(function (r) {
      return { rank: r, handles: byRank[r] };
    });
  }

  var rankOrder = document.getElementById("rank-order");
  var rankUnranked = document.getElementById("rank-unranked");

  function renderSummary() {
    var items = groups().map(function (g) {
      var li = document.createElement("li");
      li.className = "rank-group" + (g.handles.length > 1 ? " tied" : "");
      li.dataset.rank = String(g.rank);
      var badge = document.createElement("span");
      badge.className = "rank-badge";
      badge.textContent = String(g.rank);
      li.append(badge);
      g.handles.forEach(function (h) {
        var a = document.createElement("a");
        a.href = "#label-" + h;
        a.className = "rank-entry";
        a.dataset.handle = h;
        var strong = document.createElement("strong");
        strong.textContent = labels[h];
        var words = document.createElement("span");
        words.className = "rank-words";
        words.textContent = previews[h];
        a.append(strong, " ", words);
        a.setAttribute("aria-label", "Response " + labels[h] + ", rank " + g.rank + (g.handles.length > 1 ? ", tied" : "") + ": " + previews[h]);
        li.append(a);
      });
      return li;
    });
    rankOrder.replaceChildren.apply(rankOrder, items);
    var unranked = handles.filter(function (h) { return !values[h].rank; });
    rankUnranked.textContent = unranked.length
      ? "Not ranked yet: " + unranked.map(function (h) { return labels[h]; }).join(", ") + "."
      : "Every response is ranked.";
    rankUnranked.classList.toggle("done", !unranked.length);
  }

  function setRank(handle, rank) {
    if (!editable) return;
    rank = rank ? Math.max(1, Math.min(N, rank)) : null;
    if (values[handle].rank === rank) return;
    edit(handle, "rank", rank);
    renderCard(handle);
    renderSummary();
    var tied = rank && handles.filter(function (h) { return values[h].rank === rank; }).length > 1;
    announce("Response " + labels[handle] + (rank ? " ranked " + rank + (tied ? ", tied" : "") : " not ranked") + ".");
  }

  function setCorrect(handle, value) {
    if (!editable) return;
    if (values[handle].is_correct === value) value = null; // pressing again clears
    edit(handle, "is_correct", value);
    renderCard(handle);
    announce("Response " + labels[handle] + (value === null ? " not marked" : value ? " marked correct" : " marked incorrect") + ".");
  }

  // Drag the summary's rank groups to reorder: ranks become 1…k in the new order.
  var sortable = null;
  function initSortable() {
    if (!editable || typeof window.Sortable === "undefined") return;
    sortable = window.Sortable.create(rankOrder, {
      animation: 120,
      draggable: ".rank-group",
      forceFallback: true,
      fallbackTolerance: 3,
      ghostClass: "dragging",
      onEnd: function () {
        Array.prototype.forEach.call(rankOrder.querySelectorAll(".rank-group"), function (li, i) {
          Array.prototype.forEach.call(li.querySelectorAll(".rank-entry"), function (a) {
            var h = a.dataset.handle;
            if (values[h].rank !== i + 1) { edit(h, "rank", i + 1); renderCard(h); }
          });
        });
        renderSummary();
        announce("Ranking reordered.");
      },
    });
  }

  form.addEventListener("change", function (event) {
    var el = event.target;
    var card = el.closest(".response");
    var field = el.dataset.field;
    if (!field) return;
    if (!card) {
      edit("", field, el.value);
      return;
    }
    var h = card.dataset.handle;
    if (field === "rank") setRank(h, el.value ? Number(el.value) : null);
    else if (field === "tags") {
      var tags = Array.prototype.filter.call(card.querySelectorAll("input[data-field=tags]"), function (b) { return b.checked; })
        .map(function (b) { return b.value; });
      edit(h, "tags", tags);
      renderCard(h);
    }
  });
  form.addEventListener("input", function (event) {
    var el = event.target;
    if (el.tagName !== "TEXTAREA" || !el.dataset.field) return;
    var card = el.closest(".response");
    showCount(el);
    edit(card ? card.dataset.handle : "", el.dataset.field, el.value);
  });
  form.addEventListener("click", function (event) {
    var b = event.target.closest("button[data-field=is_correct]");
    if (!b) return;
    setCorrect(b.closest(".response").dataset.handle, b.dataset.value === "true");
  });

  /* compare any two: one click opens this response beside the next; either side can change */
  var compareDialog = document.getElementById("compare-dialog");
  var compareSides = ["L", "R"].map(function (side) {
    return { select: document.getElementById("compare-" + side), text: document.getElementById("compare-text-" + side) };
  });
  function showCompared() {
    compareSides.forEach(function (side) {
      var source = cards[side.select.value].querySelector(".response-text");
      side.text.replaceChildren(source.cloneNode(true));
    });
  }
  compareSides.forEach(function (side) { side.select.addEventListener("change", showCompared); });
  form.addEventListener("click", function (event) {
    var b = event.target.closest("[data-compare]");
    if (!b) return;
    var h = b.closest(".response").dataset.handle;
    var i = handles.indexOf(h);
    compareSides[0].select.value = h;
    compareSides[1].select.value = handles[(i + 1) % handles.length];
    showCompared();
    compareDialog.showModal();
  });
  document.querySelectorAll("dialog [data-close]").forEach(function (b) {
    b.addEventListener("click", function () { b.closest("dialog").close(); });
  });

  /* ================================================================ keyboard */
  var helpDialog = document.getElementById("help-dialog");
  document.getElementById("show-help").addEventListener("click", function () { helpDialog.showModal(); });

  function focusCard(i) {
    var h = handles[Math.max(0, Math.min(handles.length - 1, i))];
    if (!h) return;
    cards[h].focus();
    cards[h].scrollIntoView({ block: "nearest" });
  }

  // Where keyboard work starts: the response last edited in this tab (kept across reloads,
  // like the unsent edits), else the first one still missing a rank or a verdict.
  var focusKey = "medalign-" + kind + "-focus:" + data.owner + ":" + data.review;
  function rememberEdited(handle) {
    if (!store) return;
    try { store.setItem(focusKey, handle); } catch (e) { /* storage off: start at the first */ }
  }
  function startCard() {
    var last = null;
    try { last = store && store.getItem(focusKey); } catch (e) { last = null; }
    if (last && cards[last]) return handles.indexOf(last);
    for (var i = 0; i < handles.length; i++) {
      var v = values[handles[i]];
      if (!v.rank || v.is_correct === null) return i;
    }
    return 0;
  }

  document.getElementById("skip-to-responses").addEventListener("click", function (event) {
    event.preventDefault();
    focusCard(startCard());
  });

  // The page's first Tab goes to the responses, not to the skip links and the site's menu in
  // front of them: ranking is what this page is for. Only the first, and only before a click
  // (which sets where the browser's Tab order continues from).
  var firstTab = editable;
  document.addEventListener("pointerdown", function () { firstTab = false; }, { capture: true });
  document.addEventListener("keydown", function (event) {
    if (!firstTab || event.key !== "Tab") return;
    firstTab = false;
    var active = document.activeElement;
    if (event.shiftKey || (active && active !== document.body && active !== document.documentElement)) return;
    event.preventDefault();
    focusCard(startCard());
  }, { capture: true });

  // Keys pressed outside every response used to do nothing; now the page says where they work.
  var keyHint = document.getElementById("key-hint");
  var keyHintTimer = null;
  function hintKeys() {
    var text = "These keys work on a response: press J to go to Response " + labels[handles[startCard()]] + ".";
    keyHint.textContent = text;
    keyHint.hidden = false;
    announce(text);
    window.clearTimeout(keyHintTimer);
    keyHintTimer = window.setTimeout(function () { keyHint.hidden = true; }, 6000);
  }
  document.addEventListener("focusin", function (event) {
    if (keyHint && event.target.closest && event.target.closest(".response")) keyHint.hidden = true;
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    var inCard = target.closest && target.closest(".response");
    if (event.key === "Escape" && inCard && target !== inCard) {
      // Back from a comment, a tag or the rank list to the response, for its single keys.
      inCard.focus();
      event.preventDefault();
      return;
    }
    if (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type !== "checkbox") || target.tagName === "SELECT") return;
    if (event.key === "?") {
      helpDialog.showModal();
      event.preventDefault();
      return;
    }
    if (event.key === "S" && event.shiftKey) {
      submitBtn.focus();
      event.preventDefault();
      return;
    }
    // On a response, or on a button or box inside one: its keys act on that response.
    var card = inCard;
    if (!card) {
      if (!editable || target.closest("dialog")) return;
      if (event.key === "j" || event.key === "J" || event.key === "k" || event.key === "K") {
        focusCard(startCard());
        event.preventDefault();
      } else if (/^[0-9=tTcCxXeEmM]$/.test(event.key)) {
        hintKeys();
        event.preventDefault();
      }
      return;
    }
    var h = card.dataset.handle;
    var i = handles.indexOf(h);
    var key = event.key;
    var handled = true;
    if (/^[1-9]$/.test(key) && Number(key) <= N) setRank(h, Number(key));
    else if (key === "0" || key === "Backspace" || key === "Delete") setRank(h, null);
    else if (key === "=" || key === "t" || key === "T") {
      if (i === 0) announce("Nothing above Response " + labels[h] + " to tie with.");
      else if (!values[handles[i - 1]].rank) announce("Rank Response " + labels[handles[i - 1]] + " first.");
      else setRank(h, values[handles[i - 1]].rank);
    } else if (key === "c" || key === "C") setCorrect(h, true);
    else if (key === "x" || key === "X") setCorrect(h, false);
    // The arrows move between responses from a response itself; on a box or button inside
    // one they keep their own meaning (scrolling).
    else if (key === "j" || (key === "ArrowDown" && target === card)) focusCard(i + 1);
    else if (key === "k" || (key === "ArrowUp" && target === card)) focusCard(i - 1);
    else if (key === "m" || key === "M") {
      var box = card.querySelector(".comment-box");
      box.open = true;
      box.querySelector("textarea").focus();
    } else if (key === "e" || key === "E") {
      var tags = card.querySelector(".tags-box");
      tags.open = true;
      var first = tags.querySelector("input");
      if (first) first.focus();
    } else handled = false;
    if (handled) event.preventDefault();
  });

  /* ================================================================ submit */
  function lockPage() {
    if (sortable) sortable.destroy();
    sortable = null;
    form.querySelectorAll("input, textarea, select, button").forEach(function (el) {
      if (el.name !== "csrfmiddlewaretoken" && !el.matches("[data-compare]")) el.disabled = true;
    });
  }

  function problems() {
    var out = [];
    var r = values[""];
    if (r.cannot_assess) {
      if (r.cannot_assess === "other" && !(r.cannot_assess_note || "").trim()) out.push("Say why the responses cannot be assessed.");
      return out.concat(tooLong());
    }
    var unranked = handles.filter(function (h) { return !values[h].rank; });
    if (unranked.length) out.push("Rank every response: " + unranked.map(function (h) { return "Response " + labels[h]; }).join(", ") + " not ranked yet.");
    handles.forEach(function (h) {
      if (values[h].is_correct === null) out.push("Mark Response " + labels[h] + " correct or incorrect.");
    });
    if (data.require_reason && !(r.reason || "").trim()) out.push("Say why you resolve the disagreement so.");
    return out.concat(tooLong());
  }

  function tooLong() {
    return held().map(function (e) {
      var text = heldReason(e);
      return text.charAt(0).toUpperCase() + text.slice(1) + (e.refused ? ": change that text." : ": shorten it.");
    });
  }

  function showErrors(list, heading) {
    errorsEl.replaceChildren();
    if (!list.length) {
      errorsEl.hidden = true;
      return;
    }
    if (heading !== "") {
      var p = document.createElement("p");
      p.textContent = heading || "Before submitting:";
      errorsEl.append(p);
    }
    var ul = document.createElement("ul");
    list.forEach(function (text) {
      var li = document.createElement("li");
      li.textContent = text;
      ul.append(li);
    });
    errorsEl.append(ul);
    errorsEl.hidden = false;
    errorsEl.focus();
  }

  function submitNow() {
    window.clearTimeout(timer);
    timer = null;
    setStatus("saving", "Submitting…");
    var sent = batch();
    request("POST", data.urls.submit, sent)
      .then(function (res) {
        if (res.status === 200 && res.body.status === "submitted") {
          if (signedOut) signedIn();
          stopped = true;
          forget();
          editable = false;
          lockPage();
          setStatus("submitted", "Submitted. Thank you. The " + noun + " is now read-only.");
          notice("");
          showErrors([]);
          // Said where the clinician is (beside Submit), not only in the header far above.
          var done = document.getElementById("submit-done");
          done.textContent = "Submitted. Thank you. The " + noun + " is now read-only; the next " + noun + " is one click away.";
          done.hidden = false;
          var next = document.getElementById("next-review");
          next.classList.remove("quiet");
          next.classList.add("primary");
          next.focus();
          done.scrollIntoView({ block: "nearest" });
          if (reviewChannel) reviewChannel.postMessage({ tab: tab, submitted: true });
          // A calibration review shows the reference beside the clinician's once submitted:
          // the page the server renders now has it.
          if (data.calibration) window.location.reload();
        } else if (res.status === 401) {
          sessionEnded(res.body);
        } else if (res.otherAccount && res.body.error !== "csrf") {
          otherAccount();
        } else if (res.status === 409 && res.body.error === "read_only") {
          submitting = false;
          submittedElsewhere(res.body);
        } else if (res.status === 400) {
          submitting = false;
          submitBtn.disabled = false;
          if (holdRefused(res.body, sent)) {
            // Not submitted; the other edits are saved as a draft, the refused ones held here.
            setStatus("error", "Not submitted: " + heldText() + ".");
            showErrors(problems());
            return;
          }
          setStatus("error", "Not submitted: " + (res.body.message || "the server refused the review") + ".");
          showErrors([res.body.message || "The server refused the review."]);
        } else if (res.status === 403 && res.body.error === "csrf") {
          trouble(res.body.message || "Sending again.", 500);
        } else if (res.status === 403) {
          submitting = false;
          submitBtn.disabled = false;
          accessLost(res.body);
        } else {
          trouble(res.body.message || "The server had a problem (" + res.status + ").");
        }
      })
      .catch(function () { trouble("You are offline or the server cannot be reached."); });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (!editable || submitting || stopped) return;
    var found = problems();
    showErrors(found);
    if (found.length) return;
    submitting = true;
    submitBtn.disabled = true;
    window.clearTimeout(timer);
    Promise.resolve(inFlight).catch(function () {}).then(submitNow);
  });

  /* ================================================================ the record panel */
  var urls = data.urls;
  var tabExcerpt = document.getElementById("tab-excerpt");
  var tabFull = document.getElementById("tab-full");
  var list = document.getElementById("record-list");
  var more = document.getElementById("record-more");
  var summary = document.getElementById("record-summary");
  var typeSelect = document.getElementById("record-type");
  var dayInput = document.getElementById("record-day");
  var searchForm = document.getElementById("record-search");
  var searchInput = document.getElementById("record-q");
  var searchClear = document.getElementById("record-search-clear");
  // Every load is for one view (timeline with its type and date, or a search), described when
  // it is asked for. A newer request supersedes it: its answer is dropped, never painted, so
  // the list and the sentence above it always describe the same view.
  var record = { mode: "timeline", next: "", loaded: false, loading: false, count: 0, query: "", generation: 0, view: null };

  function getRecord(url, payload) {
    return request(payload === undefined ? "GET" : "POST", url, payload).then(function (res) {
      if (res.status === 401) {
        sessionEnded(res.body);
        throw new Error("signed out");
      }
      if (res.otherAccount) {
        otherAccount();
        throw new Error("another account");
      }
      if (res.status === 403 && res.body.error === "forbidden") {
        accessLost(res.body);
        throw new Error(res.body.message || "no access");
      }
      if (res.status !== 200 || typeof res.body.html !== "string") throw new Error("HTTP " + res.status);
      return res.body;
    });
  }

  function fragment(html) {
    var tpl = document.createElement("template");
    tpl.innerHTML = html; // server-rendered with Django's escaping; <mark> is the only markup added
    return tpl.content;
  }

  function appendRows(html, reset) {
    var content = fragment(html);
    if (reset) list.replaceChildren();
    var groupsEls = list.querySelectorAll(".tl-group");
    var last = groupsEls[groupsEls.length - 1];
    var first = content.firstElementChild;
    // A page that continues the previous page's day and encounter doesn't repeat its header.
    if (!reset && last && first && first.classList.contains("tl-group") && first.dataset.key === last.dataset.key) first.remove();
    list.append(content);
  }

  function typeLabel(type) { return type.replace(/_/g, " "); }

  function describe(view, count, more, concepts) {
    if (view.mode === "search") {
      var also = [];
      (concepts || []).forEach(function (c) { also = also.concat(c.also || []); });
      return count + (more ? "+" : "") + " match" + (count === 1 ? "" : "es") + " for “" + view.query + "” in every event type, newest first." +
        (also.length ? " Also searched for: " + also.slice(0, 8).join(", ") + (also.length > 8 ? ", …" : "") + "." : "");
    }
    return "Showing " + (more ? "the " + count + " most recent" : (count === 1 ? "the only" : "all " + count)) + " " +
      (view.type ? "events of type " + typeLabel(view.type) : "events") + (view.day ? " up to " + view.day : "") + ", newest first.";
  }

  function loadRecord(reset) {
    if (!reset && record.loading) return; // "Load older events" pages one at a time
    var generation = ++record.generation;
    if (reset) {
      record.view = { mode: record.mode, query: record.query, type: typeSelect.value, day: dayInput.value };
      record.next = "";
      summary.textContent = record.view.mode === "search"
        ? "Searching for “" + record.view.query + "”…"
        : "Loading " + (record.view.type ? "events of type " + typeLabel(record.view.type) : "the events") + (record.view.day ? " up to " + record.view.day : "") + "…";
    }
    var view = record.view;
    record.loading = true;
    more.disabled = true;
    list.setAttribute("aria-busy", "true");
    var cursor = reset ? "" : record.next;
    var call;
    if (view.mode === "search") {
      call = getRecord(urls.search, { q: view.query, cursor: cursor });
    } else {
      var params = new URLSearchParams();
      if (view.type) params.set("type", view.type);
      if (reset && view.day) params.set("day", view.day);
      if (cursor) params.set("cursor", cursor);
      call = getRecord(urls.events + "?" + params.toString());
    }
    call
      .then(function (page) {
        if (generation !== record.generation) return; // superseded: never painted
        appendRows(page.html, reset);
        record.count = (reset ? 0 : record.count) + (Number(page.count) || 0);
        record.next = page.next || "";
        more.hidden = !page.next;
        if (page.types) fillTypes(page.types);
        if (page.concepts) view.concepts = page.concepts;
        summary.textContent = describe(view, record.count, Boolean(page.next), view.concepts);
      })
      .catch(function (error) {
        if (generation !== record.generation) return;
        summary.textContent = signedOut ? "Sign in again to load the record." : blocked ? error.message : "Could not load the record. Check your connection and try again.";
        more.hidden = false;
      })
      .finally(function () {
        if (generation !== record.generation) return;
        record.loading = false;
        more.disabled = false;
        list.removeAttribute("aria-busy");
      });
  }

  function fillTypes(types) {
    if (typeSelect.options.length > 1) return;
    types.forEach(function (t) {
      var option = document.createElement("option");
      option.value = t;
      option.textContent = t.replace(/_/g, " ");
      typeSelect.append(option);
    });
  }

  function selectTab(tabEl) {
    [tabExcerpt, tabFull].forEach(function (t) {
      var on = t === tabEl;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    });
    if (tabEl === tabFull && !record.loaded) {
      record.loaded = true;
      loadRecord(true);
    }
  }

  if (tabExcerpt && tabFull) {
    [tabExcerpt, tabFull].forEach(function (t) {
      t.addEventListener("click", function () { selectTab(t); });
      t.addEventListener("keydown", function (event) {
        if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
          var other = t === tabExcerpt ? tabFull : tabExcerpt;
          selectTab(other);
          other.focus();
          event.preventDefault();
        }
      });
    });
    more.addEventListener("click", function () { if (record.next) loadRecord(false); else loadRecord(true); });
    // The type and the date filter the timeline: changing either leaves a search.
    function showTimeline() {
      record.mode = "timeline";
      record.loaded = true;
      searchClear.hidden = true;
      loadRecord(true);
    }
    typeSelect.addEventListener("change", function () { searchInput.value = ""; showTimeline(); });
    dayInput.addEventListener("change", function () { searchInput.value = ""; showTimeline(); });
    searchForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var q = searchInput.value.trim();
      if (!q) return;
      record.mode = "search";
      record.query = q;
      record.loaded = true;
      searchClear.hidden = false;
      loadRecord(true);
    });
    searchClear.addEventListener("click", function () {
      searchInput.value = "";
      showTimeline();
      searchInput.focus();
    });
  }

  // Notes expand in place, replacing their preview; the whole text is fetched when asked for.
  document.addEventListener("click", function (event) {
    var b = event.target.closest(".note-expand");
    if (!b) return;
    var full = b.nextElementSibling;
    var preview = b.parentElement.querySelector(".note-preview");
    var open = b.getAttribute("aria-expanded") === "true";
    if (open) {
      full.hidden = true;
      if (preview) preview.hidden = false;
      b.setAttribute("aria-expanded", "false");
      b.textContent = "Show the whole note";
      return;
    }
    var show = function () {
      full.hidden = false;
      if (preview) preview.hidden = true;
      b.setAttribute("aria-expanded", "true");
      b.textContent = "Show the preview only";
    };
    if (full.childElementCount) return show();
    b.disabled = true;
    getRecord(b.dataset.url)
      .then(function (page) { full.replaceChildren(fragment(page.html)); show(); })
      .catch(function () { full.textContent = "Could not load the note."; full.hidden = false; })
      .finally(function () { b.disabled = false; });
  });

  /* ================================================================ start */
  handles.forEach(renderCard);
  renderReviewFields();
  renderSummary();
  if (editable) {
    initSortable();
    // After a reload the clinician is back on the response they last changed, not at the top.
    var navigation = window.performance && performance.getEntriesByType ? performance.getEntriesByType("navigation")[0] : null;
    var lastKept = null;
    try { lastKept = store && store.getItem(focusKey); } catch (e) { lastKept = null; }
    if (navigation && (navigation.type === "reload" || navigation.type === "back_forward") && lastKept && cards[lastKept]) {
      firstTab = false;
      focusCard(handles.indexOf(lastKept));
    }
    if (pending.length) {
      setStatus("pending", "Sending " + changes(pending.length) + " kept from before the reload…");
      schedule(0);
    }
  } else {
    forget();
    lockPage();
  }
  // For tests and benchmarks: the page is live (ms since navigation start).
  document.body.dataset.reviewReady = String(Math.round(performance.now()));
})();
