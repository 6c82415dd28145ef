// tf-fsm ui: keyboard navigation, on every page (the keys are listed on the page itself, in
// the "keys" help, and in docs/ui.md). On the board: j/k or the up/down arrows move between
// the cards of a column, h/l or left/right between columns, Enter opens the card (its link
// has the focus), "/" focuses the search box. On a ticket's page: Escape or u goes back to the
// board, n/p to the next/previous ticket in the board's order. "?" shows or hides the help.
"use strict";

(function () {
  const body = document.body;

  function typing(target) {
    const tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  function toggleHelp() {
    const help = document.getElementById("keys");
    if (help) help.open = !help.open;
  }

  // -- the board -------------------------------------------------------------------------

  function columns() {
    return [...document.querySelectorAll(".column")];
  }

  function cardsOf(column) {
    return [...column.querySelectorAll(".card")];
  }

  function focusCard(card) {
    const link = card.querySelector(".card-id");
    link.focus();
    card.scrollIntoView({ block: "nearest", inline: "nearest" });
  }

  function currentCard() {
    const el = document.activeElement;
    return el && el.closest ? el.closest(".card") : null;
  }

  // Within the column (step -1/+1), or to the nearest column with cards on that side (the
  // card at the same place, or its last).
  function moveCard(down, across) {
    const card = currentCard();
    if (!card) {
      const first = document.querySelector(".column .card");
      if (first) focusCard(first);
      return;
    }
    const cols = columns();
    const col = card.closest(".column");
    const index = cardsOf(col).indexOf(card);
    if (down) {
      const next = cardsOf(col)[index + down];
      if (next) focusCard(next);
      return;
    }
    for (let i = cols.indexOf(col) + across; i >= 0 && i < cols.length; i += across) {
      const there = cardsOf(cols[i]);
      if (there.length) {
        focusCard(there[Math.min(index, there.length - 1)]);
        return;
      }
    }
  }

  const BOARD_KEYS = {
    j: [1, 0], ArrowDown: [1, 0], k: [-1, 0], ArrowUp: [-1, 0],
    l: [0, 1], ArrowRight: [0, 1], h: [0, -1], ArrowLeft: [0, -1],
  };

  function onBoardKey(e) {
    if (e.key === "/") {
      const search = document.getElementById("q");
      if (search) {
        e.preventDefault();
        search.focus();
      }
      return;
    }
    const move = BOARD_KEYS[e.key];
    // the arrows scroll the page as usual unless a card has the focus
    if (!move || (e.key.startsWith("Arrow") && !currentCard())) return;
    e.preventDefault();
    moveCard(move[0], move[1]);
  }

  // -- a ticket's page ---------------------------------------------------------------------

  function go(id) {
    const link = document.getElementById(id);
    if (link) location.assign(link.href);
  }

  function onTicketKey(e) {
    const help = document.getElementById("keys");
    if (e.key === "Escape" && help && help.open) help.open = false;
    else if (e.key === "Escape" || e.key === "u") go("back");
    else if (e.key === "n") go("next-ticket");
    else if (e.key === "p") go("prev-ticket");
  }

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    if (e.key === "?") {
      toggleHelp();
      return;
    }
    if (body.dataset.page === "board") onBoardKey(e);
    else if (body.dataset.page === "ticket") onTicketKey(e);
  });
})();
