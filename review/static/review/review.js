/* MedAlign Review: the review page.
 *
 * Loaded as a file (the CSP forbids inline script); its data comes from the JSON block
 * #review-data, which holds response ids, positions and neutral labels only, never model names.
 * Sections: ranking (drag-and-drop with the vendored SortableJS, and keyboard), autosave with
 * retry, submit, time spent, and the record panel (excerpt, timeline, search, notes).
 */
(function () {
  "use strict";

  var dataEl = document.getElementById("review-data");
  var form = document.getElementById("review-form");
  if (!dataEl || !form) return;
  var data = JSON.parse(dataEl.textContent);
  var csrfInput = form.querySelector("input[name=csrfmiddlewaretoken]");
  var csrf = csrfInput ? csrfInput.value : "";
  var editable = Boolean(data.editable);
  var version = data.version;
  var labels = {};
  data.responses.forEach(function (r) { labels[r.id] = r.label; });

  var statusEl = document.getElementById("save-status");
  var announcer = document.getElementById("rank-announcer");
  var rankedEl = document.getElementById("ranked");
  var unrankedEl = document.getElementById("unranked");
  var submitBtn = document.getElementById("submit-review");
  var errorsEl = document.getElementById("submit-errors");

  var SAVE_DEBOUNCE_MS = 800;
  var MAX_RETRY_MS = 30000;

  function setStatus(state, text) {
    statusEl.dataset.state = state;
    statusEl.textContent = text;
  }

  function announce(text) {
    // Clear first so the same sentence twice is still read out.
    announcer.textContent = "";
    window.setTimeout(function () { announcer.textContent = text; }, 30);
  }

  /* ---------------------------------------------------------------- ranking state */
  // ranked: [{id, tied}] best first; "tied" = shares the rank of the item above.
  var ranked = [];
  var unranked = [];

  (function initRanking() {
    var withRank = data.responses
      .filter(function (r) { return r.rank !== null; })
      .sort(function (a, b) { return a.rank - b.rank || a.position - b.position; });
    var previous = null;
    withRank.forEach(function (r) {
      ranked.push({ id: r.id, tied: previous !== null && previous.rank === r.rank });
      previous = r;
    });
    unranked = data.responses
      .filter(function (r) { return r.rank === null; })
      .map(function (r) { return r.id; });
  })();

  function ranks() {
    // Competition ranking: ties share a rank, and the next rank skips (1, 1, 3).
    var out = {};
    var rank = 0;
    ranked.forEach(function (item, i) {
      if (i === 0 || !item.tied) rank = i + 1;
      out[item.id] = rank;
    });
    return out;
  }

  function sharedRanks(r) {
    var seen = {};
    var shared = {};
    Object.keys(r).forEach(function (id) {
      if (seen[r[id]]) shared[r[id]] = true;
      seen[r[id]] = true;
    });
    return shared;
  }

  function indexOfRanked(id) {
    for (var i = 0; i < ranked.length; i++) if (ranked[i].id === id) return i;
    return -1;
  }

  function normalise() {
    if (ranked.length) ranked[0].tied = false;
  }

  function detach(i) {
    // Removing a group's first item: the next one, tied to it, heads the group now.
    var item = ranked[i];
    if (!item.tied && ranked[i + 1] && ranked[i + 1].tied) ranked[i + 1].tied = false;
    ranked.splice(i, 1);
    return item;
  }

  function describe(id) {
    var r = ranks();
    var shared = sharedRanks(r);
    return "Response " + labels[id] + (r[id] ? " is at rank " + r[id] + (shared[r[id]] ? ", tied" : "") : " is not ranked");
  }

  function addToRanking(id) {
    var at = unranked.indexOf(id);
    if (at < 0) return;
    unranked.splice(at, 1);
    ranked.push({ id: id, tied: false });
    rankingChanged(id, describe(id) + ".");
  }

  function removeFromRanking(id) {
    var i = indexOfRanked(id);
    if (i < 0) return;
    detach(i);
    normalise();
    unranked.push(id);
    unranked.sort(function (a, b) { return positionOf(a) - positionOf(b); });
    rankingChanged(id, "Response " + labels[id] + " removed from the ranking.");
  }

  function move(id, delta) {
    var i = indexOfRanked(id);
    var j = i + delta;
    if (i < 0 || j < 0 || j >= ranked.length) {
      announce("Response " + labels[id] + " cannot move further.");
      return;
    }
    var item = detach(i);
    item.tied = false;
    ranked.splice(j, 0, item);
    normalise();
    rankingChanged(id, describe(id) + ".");
  }

  function toggleTie(id) {
    var i = indexOfRanked(id);
    if (i <= 0) {
      announce("The first response has nothing above it to tie with.");
      return;
    }
    ranked[i].tied = !ranked[i].tied;
    var above = labels[ranked[i - 1].id];
    var text = ranked[i].tied
      ? "Response " + labels[id] + " tied with Response " + above + " at rank " + ranks()[id] + "."
      : "Response " + labels[id] + " no longer tied: " + describe(id) + ".";
    rankingChanged(id, text);
  }

  function positionOf(id) {
    for (var i = 0; i < data.responses.length; i++) if (data.responses[i].id === id) return data.responses[i].position;
    return 0;
  }

  function syncFromDom() {
    // After a drag: read both lists back; a response keeps its tie only if it kept its neighbour.
    var before = {};
    ranked.forEach(function (item, i) { before[item.id] = { tied: item.tied, above: i ? ranked[i - 1].id : null }; });
    var ids = function (list) {
      return Array.prototype.map.call(list.querySelectorAll(".rank-item"), function (li) { return Number(li.dataset.id); });
    };
    var newRanked = ids(rankedEl);
    ranked = newRanked.map(function (id, i) {
      var was = before[id];
      var above = i ? newRanked[i - 1] : null;
      return { id: id, tied: Boolean(was && was.tied && was.above === above) };
    });
    normalise();
    unranked = ids(unrankedEl).sort(function (a, b) { return positionOf(a) - positionOf(b); });
  }

  function rankingChanged(focusId, message) {
    renderRanking(focusId);
    if (message) announce(message);
    changed();
  }

  function button(action, text, label) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "icon-button";
    b.dataset.action = action;
    b.tabIndex = -1; // the item itself takes keyboard focus and shortcuts; buttons are for pointers
    b.textContent = text;
    b.setAttribute("aria-label", label);
    b.title = label;
    return b;
  }

  function makeItem(id, isRanked, rank, tied, shared) {
    var li = document.createElement("li");
    li.className = "rank-item" + (tied ? " tied" : "") + (shared ? " shared" : "");
    li.dataset.id = String(id);
    li.tabIndex = editable ? 0 : -1;
    var name = "Response " + labels[id];
    li.setAttribute(
      "aria-label",
      name + (isRanked ? ", rank " + rank + (shared ? ", tied" : "") : ", not ranked")
    );
    var handle = document.createElement("span");
    handle.className = "drag-handle";
    handle.setAttribute("aria-hidden", "true");
    handle.textContent = "⠿";
    var badge = document.createElement("span");
    badge.className = "rank-badge";
    badge.setAttribute("aria-hidden", "true");
    badge.textContent = isRanked ? String(rank) : "–";
    var text = document.createElement("span");
    text.className = "rank-name";
    text.textContent = name;
    li.append(handle, badge, text);
    if (tied) {
      var mark = document.createElement("span");
      mark.className = "tie-mark";
      mark.textContent = "tied";
      li.append(mark);
    }
    if (editable) {
      var tools = document.createElement("span");
      tools.className = "rank-tools";
      if (isRanked) {
        tools.append(
          button("up", "↑", "Move " + name + " up"),
          button("down", "↓", "Move " + name + " down"),
          button("tie", tied ? "Untie" : "Tie", (tied ? "Untie " : "Tie ") + name + " with the response above"),
          button("remove", "✕", "Return " + name + " to not ranked")
        );
      } else {
        tools.append(button("add", "Rank", "Add " + name + " to the ranking"));
      }
      li.append(tools);
    }
    return li;
  }

  function renderRanking(focusId) {
    var r = ranks();
    var shared = sharedRanks(r);
    rankedEl.replaceChildren.apply(
      rankedEl,
      ranked.map(function (item) { return makeItem(item.id, true, r[item.id], item.tied, shared[r[item.id]]); })
    );
    unrankedEl.replaceChildren.apply(
      unrankedEl,
      unranked.map(function (id) { return makeItem(id, false); })
    );
    if (!unranked.length) unrankedEl.dataset.empty = "All responses are ranked.";
    else delete unrankedEl.dataset.empty;
    document.querySelectorAll("[data-rank-chip]").forEach(function (chip) {
      var id = Number(chip.dataset.rankChip);
      chip.textContent = r[id] ? "Rank " + r[id] + (shared[r[id]] ? " (tie)" : "") : "Not ranked";
      chip.classList.toggle("unranked", !r[id]);
    });
    if (focusId !== undefined && focusId !== null) {
      var el = document.querySelector('.rank-item[data-id="' + focusId + '"]');
      if (el) el.focus();
    }
  }

  function onRankClick(event) {
    var b = event.target.closest("button[data-action]");
    if (!b || !editable) return;
    var id = Number(b.closest(".rank-item").dataset.id);
    var action = b.dataset.action;
    if (action === "add") addToRanking(id);
    else if (action === "remove") removeFromRanking(id);
    else if (action === "up") move(id, -1);
    else if (action === "down") move(id, 1);
    else if (action === "tie") toggleTie(id);
  }

  function onRankKey(event) {
    var li = event.target.closest(".rank-item");
    if (!li || event.target !== li || !editable) return;
    var id = Number(li.dataset.id);
    var inRanking = indexOfRanked(id) >= 0;
    var key = event.key;
    var handled = true;
    if ((key === "ArrowUp" || key === "ArrowDown") && event.altKey) {
      if (inRanking) move(id, key === "ArrowUp" ? -1 : 1);
      else addToRanking(id);
    } else if (key === "ArrowUp" || key === "ArrowDown") {
      var sibling = key === "ArrowUp" ? li.previousElementSibling : li.nextElementSibling;
      if (sibling) sibling.focus();
    } else if ((key === "Enter" || key === " ") && !inRanking) {
      addToRanking(id);
    } else if ((key === "t" || key === "T") && inRanking) {
      toggleTie(id);
    } else if ((key === "Delete" || key === "Backspace") && inRanking) {
      removeFromRanking(id);
    } else {
      handled = false;
    }
    if (handled) event.preventDefault();
  }

  var sortables = [];
  function initSortable() {
    if (!editable || typeof window.Sortable === "undefined") return;
    [unrankedEl, rankedEl].forEach(function (list) {
      sortables.push(
        window.Sortable.create(list, {
          group: "ranking",
          animation: 120,
          draggable: ".rank-item",
          filter: ".icon-button",
          preventOnFilter: false,
          // Mouse and touch events rather than native drag-and-drop: consistent on tablets.
          forceFallback: true,
          fallbackTolerance: 3,
          ghostClass: "dragging",
          onEnd: function (evt) {
            syncFromDom();
            var id = Number(evt.item.dataset.id);
            rankingChanged(id, describe(id) + ".");
          },
        })
      );
    });
  }

  rankedEl.addEventListener("click", onRankClick);
  unrankedEl.addEventListener("click", onRankClick);
  rankedEl.addEventListener("keydown", onRankKey);
  unrankedEl.addEventListener("keydown", onRankKey);

  /* ---------------------------------------------------------------- collecting the form */
  function collect() {
    var r = ranks();
    return {
      version: version,
      active_seconds: Math.min(activeSeconds, 86400),
      cannot_assess: document.getElementById("cannot-assess").value,
      cannot_assess_note: document.getElementById("cannot-assess-note").value,
      judgements: data.responses.map(function (resp) {
        var checked = form.querySelector('input[name="correct-' + resp.id + '"]:checked');
        var tags = form.querySelectorAll('input[name="tags-' + resp.id + '"]:checked');
        return {
          response: resp.id,
          position: resp.position,
          rank: r[resp.id] || null,
          is_correct: checked ? checked.value === "true" : null,
          error_tags: Array.prototype.map.call(tags, function (t) { return t.value; }),
          comment: document.getElementById("comment-" + resp.id).value,
        };
      }),
    };
  }

  function problems(state) {
    var out = [];
    if (state.cannot_assess) {
      if (state.cannot_assess === "other" && !state.cannot_assess_note.trim()) {
        out.push("Say why the responses cannot be assessed.");
      }
      return out;
    }
    if (unranked.length) {
      out.push("Rank every response: " + unranked.map(function (id) { return "Response " + labels[id]; }).join(", ") + " not ranked yet.");
    }
    state.judgements.forEach(function (j) {
      if (j.is_correct === null) out.push("Mark Response " + labels[j.response] + " correct or incorrect.");
    });
    return out;
  }

  function showErrors(list) {
    errorsEl.replaceChildren();
    if (!list.length) {
      errorsEl.hidden = true;
      return;
    }
    var p = document.createElement("p");
    p.textContent = "Before submitting:";
    var ul = document.createElement("ul");
    list.forEach(function (text) {
      var li = document.createElement("li");
      li.textContent = text;
      ul.append(li);
    });
    errorsEl.append(p, ul);
    errorsEl.hidden = false;
    errorsEl.focus();
  }

  /* ---------------------------------------------------------------- time spent */
  // Seconds with the page visible and someone active in the last minute; sent with each save
  // and subtracted once the server has counted them.
  var activeSeconds = 0;
  var lastActivity = Date.now();
  ["keydown", "pointerdown", "wheel", "scroll", "input"].forEach(function (name) {
    document.addEventListener(name, function () { lastActivity = Date.now(); }, { passive: true, capture: true });
  });
  window.setInterval(function () {
    if (editable && document.visibilityState === "visible" && Date.now() - lastActivity < 60000) {
      activeSeconds += 1;
      // Reading without editing still counts: flush the time now and then.
      if (activeSeconds >= 60 && !dirty && !inFlight && !blocked) changed(true);
    }
  }, 1000);

  /* ---------------------------------------------------------------- autosave */
  var dirty = false;
  var inFlight = null;
  var timer = null;
  var retryMs = 0;
  var blocked = false; // stale version or read-only: saving stops until a reload
  var submitting = false;

  function post(url, payload, keepalive) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      redirect: "manual", // an expired session redirects to sign-in: treat it as an error
      keepalive: Boolean(keepalive),
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, Accept: "application/json" },
      body: JSON.stringify(payload),
    }).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      var body = type.indexOf("application/json") >= 0 ? response.json() : Promise.resolve({});
      return body.then(function (json) { return { status: response.status, type: response.type, body: json }; });
    });
  }

  function changed(timeOnly) {
    if (!editable || blocked || submitting) return;
    dirty = true;
    if (!timeOnly) setStatus("pending", "Unsaved changes…");
    window.clearTimeout(timer);
    timer = window.setTimeout(save, timeOnly ? 0 : SAVE_DEBOUNCE_MS);
  }

  function scheduleRetry(message) {
    dirty = true;
    retryMs = retryMs ? Math.min(retryMs * 2, MAX_RETRY_MS) : 1000;
    setStatus("offline", message + " Retrying in " + Math.round(retryMs / 1000) + " s; keep this page open.");
    window.clearTimeout(timer);
    timer = window.setTimeout(save, retryMs);
  }

  function stop(state, message) {
    blocked = true;
    dirty = false;
    window.clearTimeout(timer);
    setStatus(state, message);
  }

  function save() {
    timer = null;
    if (inFlight || !dirty || blocked || !editable || submitting) return;
    dirty = false;
    var payload = collect();
    var sent = payload.active_seconds;
    setStatus("saving", "Saving…");
    inFlight = post(data.urls.save, payload)
      .then(function (res) {
        if (res.status === 200) {
          version = res.body.version;
          activeSeconds = Math.max(0, activeSeconds - sent);
          retryMs = 0;
          if (dirty) timer = window.setTimeout(save, SAVE_DEBOUNCE_MS);
          else setStatus("saved", "All changes saved at " + new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) + ".");
        } else if (res.status === 409) {
          stop("conflict", (res.body.message || "This review changed elsewhere.") + " Reload the page to continue.");
        } else if (res.status === 400) {
          setStatus("error", "Could not save: " + (res.body.message || "the server refused the change") + ".");
        } else if (res.type === "opaqueredirect" || res.status === 403) {
          scheduleRetry("Your session has ended: sign in again in another tab; nothing is lost.");
        } else {
          // A 503 from the server (database away) carries a message saying so: show it.
          scheduleRetry(res.body.message || "The server had a problem saving (" + res.status + ").");
        }
      })
      .catch(function () {
        scheduleRetry("Offline: can't reach the server.");
      })
      .finally(function () {
        inFlight = null;
      });
    return inFlight;
  }

  function flushOnLeave() {
    // The tab is being hidden or closed: send what is pending without waiting for the timer.
    if (!editable || blocked || submitting || inFlight) return;
    if (!dirty && activeSeconds < 5) return;
    window.clearTimeout(timer);
    dirty = false;
    post(data.urls.save, collect(), true).catch(function () {});
  }
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") flushOnLeave();
  });
  window.addEventListener("pagehide", flushOnLeave);

  form.addEventListener("input", function (event) {
    if (event.target.closest(".rank-list")) return;
    changed();
  });
  form.addEventListener("change", function (event) {
    if (event.target.closest(".rank-list")) return;
    changed();
  });

  /* ---------------------------------------------------------------- submit */
  function lockPage() {
    editable = false;
    sortables.forEach(function (s) { s.destroy(); });
    sortables = [];
    form.querySelectorAll("input, textarea, select, button[type=submit]").forEach(function (el) {
      if (el.name !== "csrfmiddlewaretoken") el.disabled = true;
    });
    renderRanking();
  }

  function submitNow() {
    setStatus("saving", "Submitting…");
    var payload = collect();
    var sent = payload.active_seconds;
    post(data.urls.submit, payload)
      .then(function (res) {
        if (res.status === 200 && res.body.status === "submitted") {
          version = res.body.version;
          activeSeconds = Math.max(0, activeSeconds - sent);
          lockPage();
          setStatus("submitted", "Submitted. Thank you. The review is now read-only.");
          showErrors([]);
          var next = document.getElementById("next-review");
          next.classList.add("primary");
          next.focus();
        } else if (res.status === 409) {
          stop("conflict", (res.body.message || "This review changed elsewhere.") + " Reload the page to continue.");
        } else if (res.status === 400) {
          submitting = false;
          submitBtn.disabled = false;
          setStatus("error", "Not submitted.");
          showErrors([res.body.message || "The server refused the review."]);
        } else {
          retrySubmit(res.body.message || "The server had a problem (" + res.status + ").");
        }
      })
      .catch(function () { retrySubmit("Offline: can't reach the server."); });
  }

  function retrySubmit(message) {
    // Submitting is idempotent on the server, so retrying can never make two reviews.
    retryMs = retryMs ? Math.min(retryMs * 2, MAX_RETRY_MS) : 1000;
    setStatus("offline", message + " Retrying the submission in " + Math.round(retryMs / 1000) + " s.");
    window.setTimeout(submitNow, retryMs);
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (!editable || submitting || blocked) return;
    var state = collect();
    var found = problems(state);
    showErrors(found);
    if (found.length) return;
    submitting = true;
    submitBtn.disabled = true;
    window.clearTimeout(timer);
    Promise.resolve(inFlight).catch(function () {}).then(submitNow);
  });

  /* ---------------------------------------------------------------- the record panel */
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
  var record = { mode: "timeline", next: "", loaded: false, loading: false, count: 0, query: "" };

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
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
    var groups = list.querySelectorAll(".tl-group");
    var last = groups[groups.length - 1];
    var first = content.firstElementChild;
    // A page that continues the previous page's day and encounter doesn't repeat its header.
    if (!reset && last && first && first.classList.contains("tl-group") && first.dataset.key === last.dataset.key) first.remove();
    list.append(content);
  }

  function loadRecord(reset) {
    if (record.loading) return;
    record.loading = true;
    more.disabled = true;
    list.setAttribute("aria-busy", "true");
    var params = new URLSearchParams();
    var base = urls.events;
    if (record.mode === "search") {
      base = urls.search;
      params.set("q", record.query);
    } else {
      if (typeSelect.value) params.set("type", typeSelect.value);
      if (reset && dayInput.value) params.set("day", dayInput.value);
    }
    if (!reset && record.next) params.set("cursor", record.next);
    getJSON(base + "?" + params.toString())
      .then(function (page) {
        appendRows(page.html, reset);
        record.count = (reset ? 0 : record.count) + page.count;
        record.next = page.next;
        more.hidden = !page.next;
        if (page.types) fillTypes(page.types);
        if (record.mode === "search") {
          summary.textContent = record.count + (page.next ? "+" : "") + " match" + (record.count === 1 ? "" : "es") + " for “" + record.query + "”, newest first.";
        } else {
          summary.textContent = "Showing the " + record.count + " " + (page.next ? "most recent " : "") + "events" +
            (typeSelect.value ? " of type " + typeSelect.value : "") + (dayInput.value ? " up to " + dayInput.value : "") + ", newest first.";
        }
      })
      .catch(function () {
        summary.textContent = "Could not load the record. Check your connection and try again.";
        more.hidden = false;
      })
      .finally(function () {
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

  function selectTab(tab) {
    [tabExcerpt, tabFull].forEach(function (t) {
      var on = t === tab;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    });
    if (tab === tabFull && !record.loaded) {
      record.loaded = true;
      loadRecord(true);
    }
  }

  if (tabExcerpt && tabFull) {
    [tabExcerpt, tabFull].forEach(function (tab) {
      tab.addEventListener("click", function () { selectTab(tab); });
      tab.addEventListener("keydown", function (event) {
        if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
          var other = tab === tabExcerpt ? tabFull : tabExcerpt;
          selectTab(other);
          other.focus();
          event.preventDefault();
        }
      });
    });
    more.addEventListener("click", function () { loadRecord(false); });
    typeSelect.addEventListener("change", function () { record.mode = "timeline"; loadRecord(true); });
    dayInput.addEventListener("change", function () { record.mode = "timeline"; loadRecord(true); });
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
      record.mode = "timeline";
      searchInput.value = "";
      searchClear.hidden = true;
      loadRecord(true);
      searchInput.focus();
    });

    var excerptBody = document.getElementById("excerpt-body");
    getJSON(urls.excerpt)
      .then(function (page) { excerptBody.replaceChildren(fragment(page.html)); })
      .catch(function () { excerptBody.textContent = "Could not load the excerpt. Open the full record instead."; })
      .finally(function () { excerptBody.removeAttribute("aria-busy"); });
  }

  // Notes expand in place; the whole text is fetched only when asked for.
  document.addEventListener("click", function (event) {
    var b = event.target.closest(".note-expand");
    if (!b) return;
    var full = b.nextElementSibling;
    var open = b.getAttribute("aria-expanded") === "true";
    if (open) {
      full.hidden = true;
      b.setAttribute("aria-expanded", "false");
      b.textContent = "Show the whole note";
      return;
    }
    var show = function () {
      full.hidden = false;
      b.setAttribute("aria-expanded", "true");
      b.textContent = "Hide the whole note";
    };
    if (full.childElementCount) return show();
    b.disabled = true;
    getJSON(b.dataset.url)
      .then(function (page) { full.replaceChildren(fragment(page.html)); show(); })
      .catch(function () { full.textContent = "Could not load the note."; full.hidden = false; })
      .finally(function () { b.disabled = false; });
  });

  /* ---------------------------------------------------------------- start */
  renderRanking();
  initSortable();
  if (!editable) lockPage();
})();
