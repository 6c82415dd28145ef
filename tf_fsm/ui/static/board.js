// tf-fsm ui: the board's page. The server works out, for this page's filter, which of the
// cards it shows changed (live.js hands each message over as tf:cards): each comes with its
// column and the card it follows; the counts are the backlog's, never the cards on the page.
"use strict";

(function () {
  const body = document.body;
  if (body.dataset.page !== "board") return;

  // The page's filter as a query string (with `extra` pairs), as the server reads it.
  function filterQuery(extra) {
    const params = new URLSearchParams(extra || {});
    for (const name of ["tag", "assignee", "q"]) {
      if (body.dataset[name]) params.set(name, body.dataset[name]);
    }
    return params.toString();
  }

  // A column's "and N more" line and its "show more" button, from its count and its cards.
  function showRest(col) {
    const shown = col.querySelectorAll(".card").length;
    const count = Number(col.dataset.count);
    const cap = Number(col.dataset.cap);
    const more = col.querySelector(".more");
    const rest = count - shown;
    col.querySelector(".empty").hidden = count > 0;
    more.hidden = rest <= 0;
    more.querySelector(".show-more").hidden = shown >= cap;
    more.querySelector(".more-text").textContent =
      "and " + rest + " more" + (shown >= cap ? ": filter or search to narrow" : "");
  }

  // The phone's column bar says each column's count too.
  function showCount(key, count) {
    const chip = document.querySelector('[data-count-for="' + key + '"]');
    if (chip) chip.textContent = count;
  }

  function notifyHuman(card) {
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    new Notification("tf-fsm: " + card.id + " needs a human", { body: card.title || "" });
  }

  function place(change) {
    const old = document.getElementById("card-" + change.id);
    const wasHuman = old && old.dataset.column === "human";
    // a reader moving with the keys keeps the card it is on, wherever the card goes
    const focused = old && old.contains(document.activeElement);
    if (old) old.remove();
    if (!change.column) return;
    const list = document.querySelector("#col-" + change.column + " .cards");
    if (!list) return;
    const el = window.tfFsm.fromHTML(change.html);
    if (change.after === null) list.prepend(el);
    else {
      const prev = document.getElementById("card-" + change.after);
      if (!prev || prev.parentNode !== list) return; // past the cards this page shows
      prev.after(el);
    }
    if (focused) el.querySelector(".card-id").focus({ preventScroll: true });
    if (change.column === "human" && !wasHuman) {
      notifyHuman({ id: change.id, title: el.querySelector(".card-title").textContent });
    }
  }

  function applyCards(message) {
    for (const change of message.cards) place(change);
    for (const [key, count] of Object.entries(message.counts)) {
      const col = document.getElementById("col-" + key);
      if (!col) continue;
      col.dataset.count = count;
      col.querySelector(".count").textContent = count;
      showCount(key, count);
      const cards = col.querySelectorAll(".card");
      for (let i = Number(col.dataset.cap); i < cards.length; i++) cards[i].remove();
      showRest(col);
    }
    const totals = document.getElementById("totals");
    if (totals) totals.innerHTML = message.totals;
    body.dataset.version = message.version;
    window.tfFsm.tickElapsed();
  }

  // The columns fetched again (a change too large for one event, or a stream that ended).
  async function resync() {
    const r = await fetch("/columns?" + filterQuery());
    if (!r.ok) return;
    const fresh = window.tfFsm.fromHTML(await r.text());
    document.querySelector(".board").replaceWith(fresh);
    for (const col of fresh.querySelectorAll(".column")) showCount(col.dataset.column, col.dataset.count);
    body.dataset.version = fresh.dataset.version;
    window.tfFsm.tickElapsed();
  }

  async function showMore(col) {
    const shown = col.querySelectorAll(".card").length;
    const r = await fetch("/column/" + col.dataset.column + "?" + filterQuery({ offset: shown }));
    if (!r.ok) return;
    const t = document.createElement("template");
    t.innerHTML = await r.text();
    const list = col.querySelector(".cards");
    for (const el of [...t.content.children]) {
      if (!document.getElementById(el.id)) list.append(el);
    }
    showRest(col);
    window.tfFsm.tickElapsed();
  }

  document.addEventListener("tf:cards", function (e) { applyCards(e.detail); });
  document.addEventListener("tf:resync", resync);

  document.addEventListener("DOMContentLoaded", function () {
    for (const s of document.querySelectorAll(".filters select")) {
      s.addEventListener("change", function () { s.form.submit(); });
    }
    document.addEventListener("click", function (e) {
      const button = e.target.closest(".show-more");
      if (button) showMore(button.closest(".column"));
    });
    const notify = document.getElementById("notify");
    if (notify && "Notification" in window && Notification.permission === "default") {
      notify.hidden = false;
      notify.addEventListener("click", function () {
        Notification.requestPermission().then(function () { notify.hidden = true; });
      });
    }
  });
})();
