// tf-fsm ui: live updates over server-sent events (/events). No library, nothing fetched
// from elsewhere. Every text that came from a file arrives as HTML the server escaped or
// sanitized, or is set as textContent.
"use strict";

(function () {
  const body = document.body;
  const page = body.dataset.page;
  const live = document.getElementById("live");

  function setLive(text, ok) {
    live.textContent = text;
    live.classList.toggle("down", !ok);
  }

  function fromHTML(html) {
    const t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }

  // -- the board ---------------------------------------------------------------------------
  function matchesFilter(card) {
    const tag = body.dataset.tag, who = body.dataset.assignee;
    if (tag && !card.tags.includes(tag)) return false;
    return !(who && card.assignee !== who);
  }

  function recount() {
    for (const col of document.querySelectorAll(".column")) {
      col.querySelector(".count").textContent = col.querySelectorAll(".card").length;
    }
  }

  function ageOf(iso) {
    const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (seconds < 60) return Math.floor(seconds) + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min";
    return (seconds / 3600).toFixed(1) + " h";
  }

  function tickElapsed() {
    for (const t of document.querySelectorAll("time.elapsed")) {
      t.textContent = ageOf(t.getAttribute("datetime"));
    }
  }

  function notifyHuman(card) {
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    new Notification("tf-fsm: " + card.id + " needs a human", { body: card.title || "" });
  }

  function applyCards(message) {
    for (const card of message.cards) {
      const old = document.getElementById("card-" + card.id);
      const wasHuman = old && old.dataset.column === "human";
      if (old) old.remove();
      if (!card.column || !matchesFilter(card)) continue;
      const el = fromHTML(card.html);
      const col = document.querySelector("#col-" + card.column + " .cards");
      if (col) col.prepend(el);
      if (card.column === "human" && !wasHuman) {
        notifyHuman({ id: card.id, title: el.querySelector(".card-title").textContent });
      }
    }
    const totals = document.getElementById("totals");
    if (totals) totals.innerHTML = message.totals;
    recount();
    tickElapsed();
  }

  // -- a ticket's page ---------------------------------------------------------------------
  const ticket = body.dataset.ticket;
  let logName = body.dataset.log || "";
  let logSize = Number(body.dataset.logSize || 0);
  const logEl = document.getElementById("log");

  function showLog(name, text, size, reset) {
    if (reset) logEl.textContent = "";
    logEl.textContent += text;
    logName = name;
    logSize = size;
    document.getElementById("log-name").textContent = name || "none yet";
    logEl.scrollTop = logEl.scrollHeight;
  }

  async function resyncLog() {
    const r = await fetch("/ticket/" + ticket + "/log");
    if (!r.ok) return;
    const tail = await r.json();
    showLog(tail.name, tail.text, tail.size, true);
  }

  function applyLog(message) {
    if (message.reset) showLog(message.name, message.text, message.to, true);
    else if (message.name === logName && message.from === logSize) {
      showLog(message.name, message.text, message.to, false);
    } else resyncLog();
  }

  let panelTimer = null;
  function refreshPanel() {
    clearTimeout(panelTimer);
    panelTimer = setTimeout(async function () {
      const r = await fetch("/ticket/" + ticket + "/panel");
      if (!r.ok) return;
      const open = new Set([...document.querySelectorAll("#panel details[open]")].map((d) => d.id || d.querySelector("summary").textContent));
      document.getElementById("panel").innerHTML = await r.text();
      for (const d of document.querySelectorAll("#panel details")) {
        if (open.has(d.id || d.querySelector("summary").textContent)) d.open = true;
      }
      const img = document.getElementById("diagram");
      if (img) img.src = "/ticket/" + ticket + "/diagram.svg?t=" + Date.now();
    }, 150);
  }

  function runAction(name) {
    const out = document.getElementById("action-result");
    out.textContent = name + ": starting…";
    fetch("/ticket/" + ticket + "/action/" + name, {
      method: "POST",
      headers: { "X-TF-FSM-Action": body.dataset.csrf },
    }).then(async function (r) {
      const data = await r.json();
      out.textContent = r.ok ? name + ": running" : name + ": " + data.error;
    });
  }

  function applyAction(message) {
    if (message.ticket !== ticket) return;
    const out = document.getElementById("action-result");
    if (out) out.textContent = message.action + " ended with exit code " + message.exitCode + ": " + message.output;
  }

  // -- the stream --------------------------------------------------------------------------
  function connect() {
    const url = "/events" + (ticket ? "?ticket=" + encodeURIComponent(ticket) : "");
    const source = new EventSource(url);
    source.onopen = function () { setLive("live", true); };
    source.onerror = function () { setLive("reconnecting…", false); };
    source.addEventListener("cards", function (e) {
      if (page === "board") applyCards(JSON.parse(e.data));
    });
    source.addEventListener("ticket", function () { if (ticket) refreshPanel(); });
    source.addEventListener("log", function (e) { if (ticket) applyLog(JSON.parse(e.data)); });
    source.addEventListener("action", function (e) { applyAction(JSON.parse(e.data)); });
    source.addEventListener("reload", function () { location.reload(); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    connect();
    tickElapsed();
    setInterval(tickElapsed, 1000);
    for (const b of document.querySelectorAll("button.action")) {
      b.addEventListener("click", function () { runAction(b.dataset.action); });
    }
    for (const s of document.querySelectorAll(".filters select")) {
      s.addEventListener("change", function () { s.form.submit(); });
    }
    const notify = document.getElementById("notify");
    if (notify && "Notification" in window && Notification.permission === "default") {
      notify.hidden = false;
      notify.addEventListener("click", function () {
        Notification.requestPermission().then(function () { notify.hidden = true; });
      });
    }
    if (logEl) logEl.scrollTop = logEl.scrollHeight;
  });
})();
