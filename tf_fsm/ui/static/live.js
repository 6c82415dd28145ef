// tf-fsm ui: the live stream (/events, server-sent events) shared by every page. No library,
// nothing fetched from elsewhere. Each message is handed to the page's own script as a
// document event "tf:<type>" (board.js, ticket.js), so each page's script stays its own.
// Every text that came from a file arrives as HTML the server escaped or sanitized, or is set
// as textContent.
"use strict";

window.tfFsm = (function () {
  const body = document.body;

  function setLive(text, ok) {
    const live = document.getElementById("live");
    live.textContent = text;
    live.classList.toggle("down", !ok);
  }

  function fromHTML(html) {
    const t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
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

  // The stream's URL: a ticket's page names its ticket; the board names its filter and the
  // version of what it shows (a board older than the server's is told to resync).
  function streamURL() {
    const params = new URLSearchParams();
    if (body.dataset.ticket) params.set("ticket", body.dataset.ticket);
    for (const name of ["tag", "assignee", "q", "version"]) {
      if (body.dataset[name]) params.set(name === "version" ? "since" : name, body.dataset[name]);
    }
    const query = params.toString();
    return "/events" + (query ? "?" + query : "");
  }

  const TYPES = ["cards", "ticket", "log", "action", "resync"];

  function dispatch(type, detail) {
    document.dispatchEvent(new CustomEvent("tf:" + type, { detail: detail }));
  }

  // A stream that ends (the server dropped a page too far behind, or restarted) is opened
  // again with the page's current URL; a ticket's page then fetches its panel and log again,
  // a board learns from its version whether it must.
  let broken = false;
  function connect() {
    const source = new EventSource(streamURL());
    source.onopen = function () {
      setLive("live", true);
      if (broken && body.dataset.page !== "board") dispatch("resync", {});
      broken = false;
    };
    source.onerror = function () {
      setLive("reconnecting…", false);
      broken = true;
      source.close();
      setTimeout(connect, 1000);
    };
    for (const type of TYPES) {
      source.addEventListener(type, function (e) { dispatch(type, JSON.parse(e.data)); });
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    connect();
    tickElapsed();
    setInterval(tickElapsed, 1000);
  });

  return { fromHTML: fromHTML, tickElapsed: tickElapsed };
})();
