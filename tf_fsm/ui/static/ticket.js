// tf-fsm ui: a ticket's page. Its panel is fetched again when the stream says the ticket
// changed; its log grows by the lines the stream sends (live.js). Its actions: work.js.
"use strict";

(function () {
  const body = document.body;
  const ticket = body.dataset.ticket;
  if (body.dataset.page !== "ticket") return;
  let logName = body.dataset.log || "";
  let logSize = Number(body.dataset.logSize || 0);
  const logEl = document.getElementById("log");
  // The log follows its tail only while the reader is at its bottom: scrolled up, new lines
  // arrive below without moving the view (a button offers to follow again); back at the
  // bottom, it follows again.
  let following = true;

  function atBottom() {
    return logEl.scrollHeight - logEl.scrollTop - logEl.clientHeight < 4;
  }

  function follow() {
    following = true;
    logEl.scrollTop = logEl.scrollHeight;
    document.getElementById("log-follow").hidden = true;
  }

  function showLog(name, text, size, reset) {
    if (reset) logEl.textContent = "";
    logEl.textContent += text;
    logName = name;
    logSize = size;
    document.getElementById("log-name").textContent = name || "none yet";
    if (following) follow();
    else if (text) document.getElementById("log-follow").hidden = false;
  }

  // The panel is replaced as a whole; the log (its node, its lines and where the reader is in
  // it) moves into the new panel's slot: first while the ticket runs, last otherwise.
  function keepLog() {
    const top = logEl.scrollTop;
    const section = document.getElementById("log-section");
    return function () {
      const slot = document.getElementById("log-slot");
      if (slot && section) slot.append(section);
      if (following) follow();
      else logEl.scrollTop = top;
    };
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
      const restore = keepLog();
      document.getElementById("panel").innerHTML = await r.text();
      restore();
      for (const d of document.querySelectorAll("#panel details")) {
        if (open.has(d.id || d.querySelector("summary").textContent)) d.open = true;
      }
      const img = document.getElementById("diagram");
      if (img) img.src = "/ticket/" + ticket + "/diagram.svg?t=" + Date.now();
    }, 150);
  }

  document.addEventListener("tf:ticket", refreshPanel);
  document.addEventListener("tf:log", function (e) { applyLog(e.detail); });
  document.addEventListener("tf:resync", function () { refreshPanel(); resyncLog(); });

  document.addEventListener("DOMContentLoaded", function () {
    logEl.addEventListener("scroll", function () {
      following = atBottom();
      if (following) document.getElementById("log-follow").hidden = true;
    });
    document.getElementById("log-follow").addEventListener("click", follow);
    follow();
  });
})();
