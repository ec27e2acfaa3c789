// Rollcall console: live card updates over SSE, local times, copy buttons.
// Plain JavaScript, no dependencies; every page also works without it.
(function () {
  'use strict';
  var live = document.getElementById('live');
  var tz = 'UTC';
  try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; } catch (e) { /* keep UTC */ }

  function announce(text) {
    if (!live) return;
    live.textContent = '';
    window.setTimeout(function () { live.textContent = text; }, 50);
  }

  // Relative times ("12s ago", "in 3h 5m"), re-computed every 10 s; the
  // title shows the absolute local time.
  function relative(ms) {
    var future = ms > 0, d = Math.abs(ms) / 1000, s;
    if (d < 2) return 'just now';
    if (d < 60) s = Math.floor(d) + 's';
    else if (d < 3600) s = Math.floor(d / 60) + 'm';
    else if (d < 172800) s = Math.floor(d / 3600) + 'h ' + Math.floor(d / 60) % 60 + 'm';
    else s = Math.floor(d / 86400) + 'd';
    return future ? 'in ' + s : s + ' ago';
  }
  var absFormat = { weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit' };
  function tick(root) {
    root.querySelectorAll('time[data-abs]').forEach(function (t) {
      var at = new Date(t.getAttribute('datetime'));
      if (!isNaN(at)) t.textContent = at.toLocaleString([], absFormat);
    });
    root.querySelectorAll('time[data-rel]').forEach(function (t) {
      var at = new Date(t.getAttribute('datetime'));
      if (isNaN(at)) return;
      t.textContent = relative(at - Date.now());
      t.title = at.toLocaleString() + ' (' + tz + ')';
    });
  }
  // datetime-local fields are read in the browser's zone: tell the server.
  function zones(root) {
    root.querySelectorAll('input[data-tz]').forEach(function (i) { i.value = tz; });
    root.querySelectorAll('[data-tz-name]').forEach(function (e) { e.textContent = tz; });
  }
  zones(document);
  tick(document);
  window.setInterval(function () { tick(document); }, 10000);

  // Copy buttons: data-copy names the id of the field to copy.
  document.addEventListener('click', function (ev) {
    var b = ev.target.closest('[data-copy]');
    if (!b) return;
    var field = document.getElementById(b.getAttribute('data-copy'));
    if (!field) return;
    field.focus();
    field.select();
    var done = function () { announce('Copied to the clipboard.'); b.firstChild.textContent = 'Copied'; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(done, function () { announce('Selected: press Control+C to copy.'); });
    } else if (document.execCommand && document.execCommand('copy')) {
      done();
    } else {
      announce('Selected: press Control+C to copy.');
    }
  });

  // Live updates: on an agent event, fetch that card's fragment and replace
  // its status part (the controls stay, so focus and typed input survive).
  var region = document.querySelector('[data-events]');
  if (!region || !window.EventSource) return;
  function refresh(card, quiet) {
    return fetch(card.getAttribute('data-card'), { credentials: 'same-origin', headers: { Accept: 'text/html' } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var t = document.createElement('template');
        t.innerHTML = html.trim();
        var next = t.content.querySelector('article.card');
        if (!next) return;
        var before = card.getAttribute('data-summary');
        card.className = next.className;
        card.setAttribute('data-summary', next.getAttribute('data-summary'));
        var oldStatus = card.querySelector('[data-status]'), newStatus = next.querySelector('[data-status]');
        if (oldStatus && newStatus) oldStatus.replaceWith(newStatus);
        // The controls stay, but "Clear override" follows the override.
        var oldClear = card.querySelector('[data-clear]'), newClear = next.querySelector('[data-clear]');
        if (oldClear && newClear) oldClear.hidden = newClear.hidden;
        tick(card);
        if (!quiet && before !== next.getAttribute('data-summary')) announce(next.getAttribute('data-summary'));
      })
      .catch(function () { /* the next event or reconnect retries */ });
  }
  function refreshAll() {
    document.querySelectorAll('article.card[data-card]').forEach(function (c) { refresh(c, true); });
  }
  // The page names the newest event it had seen before it read the cards
  // (?since=…), so the stream replays what came in between; without one
  // (no event buffered yet) the first open refreshes every card instead,
  // announcing what changed as an event would have.
  var es = new EventSource(region.getAttribute('data-events'));
  var first = region.getAttribute('data-events').indexOf('since=') < 0;
  var dropped = false;
  es.addEventListener('agent', function (ev) {
    var data;
    try { data = JSON.parse(ev.data); } catch (e) { return; }
    var card = document.getElementById('agent-' + data.agent_id);
    if (card) refresh(card, false);
  });
  es.addEventListener('missed', refreshAll);
  es.onerror = function () { dropped = true; };
  es.onopen = function () {
    if (first) {
      document.querySelectorAll('article.card[data-card]').forEach(function (c) { refresh(c, false); });
    } else if (dropped) {
      refreshAll(); // events may have passed while disconnected
    }
    first = dropped = false;
  };
})();
