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

  document.addEventListener("tf:ticket", refreshPanel);
  document.addEventListener("tf:log", function (e) { applyLog(e.detail); });

  document.addEventListener("DOMContentLoaded", function () {
    if (logEl) logEl.scrollTop = logEl.scrollHeight;
  });
})();
