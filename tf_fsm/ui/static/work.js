// tf-fsm ui: a ticket page's actions (tf-fsm ui --allow-actions). Each asks first in the page
// (the <dialog> names the command it runs), then starts with the page's action header; the
// stream (live.js) says when it runs and how it ended. The buttons are fetched again whenever
// the ticket changes, so they stay disabled while a run holds it (the server refuses too).
"use strict";

(function () {
  const body = document.body;
  const ticket = body.dataset.ticket;
  if (body.dataset.page !== "ticket") return;
  let pending = null;

  function say(text) {
    const out = document.getElementById("action-result");
    if (out) out.textContent = text;
  }

  let refreshTimer = null;
  function refreshButtons() {
    if (!document.getElementById("work-buttons")) return;
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(async function () {
      const r = await fetch("/ticket/" + ticket + "/actions");
      if (r.status !== 200) return;
      const fresh = window.tfFsm.fromHTML(await r.text());
      const old = document.getElementById("work-buttons");
      if (old && fresh) old.replaceWith(fresh);
    }, 100);
  }

  async function start(name) {
    say(name + ": starting…");
    const r = await fetch("/ticket/" + ticket + "/action/" + name, {
      method: "POST",
      headers: { "X-TF-FSM-Action": body.dataset.csrf },
    });
    const data = await r.json();
    if (!r.ok) say(name + ": refused: " + data.error);
    refreshButtons();
  }

  function ask(button) {
    const dialog = document.getElementById("work-confirm");
    pending = button.dataset.action;
    document.getElementById("work-confirm-command").textContent =
      "tf-fsm " + button.dataset.command + " " + ticket;
    dialog.returnValue = "";
    dialog.showModal();
  }

  function applyAction(message) {
    if (message.ticket !== ticket) return;
    if (message.state === "running") say(message.action + ": running…");
    else {
      const output = message.output ? ": " + message.output : "";
      say(message.action + ": done, exit code " + message.exitCode + output);
    }
    refreshButtons();
  }

  document.addEventListener("tf:action", function (e) { applyAction(e.detail); });
  document.addEventListener("tf:ticket", refreshButtons);

  document.addEventListener("DOMContentLoaded", function () {
    const dialog = document.getElementById("work-confirm");
    if (!dialog) return;
    dialog.addEventListener("close", function () {
      if (dialog.returnValue === "confirm" && pending) start(pending);
      pending = null;
    });
    document.addEventListener("click", function (e) {
      const button = e.target.closest("#work-buttons button.action");
      if (button && !button.disabled) ask(button);
    });
  });
})();
