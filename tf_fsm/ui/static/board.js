// tf-fsm ui: the board's page. Cards move when the stream says they changed (live.js).
"use strict";

(function () {
  const body = document.body;
  if (body.dataset.page !== "board") return;

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
      const el = window.tfFsm.fromHTML(card.html);
      const col = document.querySelector("#col-" + card.column + " .cards");
      if (col) col.prepend(el);
      if (card.column === "human" && !wasHuman) {
        notifyHuman({ id: card.id, title: el.querySelector(".card-title").textContent });
      }
    }
    const totals = document.getElementById("totals");
    if (totals) totals.innerHTML = message.totals;
    recount();
    window.tfFsm.tickElapsed();
  }

  document.addEventListener("tf:cards", function (e) { applyCards(e.detail); });

  document.addEventListener("DOMContentLoaded", function () {
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
  });
})();
