// tf-fsm ui: the forms (with --allow-actions): a new ticket from the board, a ticket's edit,
// and a hand-off's artifact. Each posts JSON with the X-TF-FSM-Action header (a plain form
// cannot send it). Where something is overwritten, the save button asks a second click.
"use strict";

(function () {
  const body = document.body;

  function post(url, form, data) {
    return fetch(url, {
      method: "POST",
      headers: { "X-TF-FSM-Action": form.dataset.csrf, "Content-Type": "application/json" },
      body: JSON.stringify(data),
    }).then(async function (r) {
      let answer = {};
      try { answer = await r.json(); } catch (e) { answer = { error: r.status + " " + r.statusText }; }
      return { ok: r.ok, status: r.status, data: answer };
    });
  }

  function values(form) {
    const out = {};
    for (const el of form.elements) {
      if (el.name) out[el.name] = el.value;
    }
    return out;
  }

  function showError(form, answer) {
    const p = form.querySelector(".edit-error");
    p.textContent = answer.error || "";
    for (const el of form.elements) el.removeAttribute("aria-invalid");
    const bad = answer.field && form.elements[answer.field];
    if (bad) { bad.setAttribute("aria-invalid", "true"); bad.focus(); }
  }

  function say(text) {
    const out = document.getElementById("edit-result");
    if (out) out.textContent = text;
  }

  function wireDialog(dialog, opener, onOpen) {
    if (!dialog || !opener) return;
    opener.addEventListener("click", async function () {
      if (onOpen && !(await onOpen())) return;
      dialog.showModal();
    });
    dialog.querySelector(".edit-cancel").addEventListener("click", function () { dialog.close(); });
  }

  // -- the board: a new ticket --------------------------------------------------------------

  function setUpCreate() {
    const dialog = document.getElementById("new-ticket");
    const form = document.getElementById("new-ticket-form");
    if (!form) return;
    wireDialog(dialog, document.getElementById("new-ticket-open"), null);
    form.addEventListener("submit", async function (e) {
      e.preventDefault();
      const answer = await post("/tickets", form, values(form));
      if (!answer.ok) { showError(form, answer.data); return; }
      showError(form, {});
      form.reset();
      dialog.close();
      say("created " + answer.data.ticket);
    });
  }

  // -- a ticket's page: its edit ------------------------------------------------------------

  const FIELDS = ["title", "description", "priority", "tags", "deps"];
  let loaded = null;

  async function loadFields(form) {
    const r = await fetch("/ticket/" + body.dataset.ticket + "/fields");
    if (!r.ok) { say("cannot read the ticket: " + r.status); return false; }
    loaded = await r.json();
    for (const name of FIELDS) form.elements[name].value = loaded[name];
    form.elements.hash.value = loaded.hash;
    resetSave(form);
    showError(form, {});
    return true;
  }

  function changedFields(form) {
    return FIELDS.filter(function (name) { return form.elements[name].value !== loaded[name]; });
  }

  function resetSave(form) {
    const save = form.querySelector(".edit-save");
    save.textContent = save.dataset.label || save.textContent;
    delete form.dataset.confirming;
  }

  function setUpEdit() {
    const dialog = document.getElementById("edit-ticket");
    const form = document.getElementById("edit-ticket-form");
    if (!form) return;
    const save = form.querySelector(".edit-save");
    save.dataset.label = save.textContent;
    wireDialog(dialog, document.getElementById("edit-open"), function () { return loadFields(form); });
    form.addEventListener("input", function () { resetSave(form); });
    form.addEventListener("submit", async function (e) {
      e.preventDefault();
      const changed = changedFields(form);
      if (!changed.length) { dialog.close(); say("nothing changed"); return; }
      if (!form.dataset.confirming) {  // an in-page confirmation: the second click saves
        form.dataset.confirming = "yes";
        save.textContent = "confirm: overwrite " + changed.join(", ");
        return;
      }
      const data = { hash: form.elements.hash.value };
      for (const name of changed) data[name] = form.elements[name].value;
      const answer = await post("/ticket/" + body.dataset.ticket + "/edit", form, data);
      resetSave(form);
      if (!answer.ok) { showError(form, answer.data); return; }
      dialog.close();
      say("saved: " + (answer.data.changed.join(", ") || "nothing changed"));
    });
  }

  // -- a ticket's page: the hand-off ---------------------------------------------------------

  function setUpHandoff() {
    const form = document.getElementById("handoff-form");
    if (!form || form.dataset.wired) return;
    form.dataset.wired = "yes";
    const save = form.querySelector(".edit-save");
    save.dataset.label = save.textContent;
    form.addEventListener("input", function () { resetSave(form); });
    form.addEventListener("submit", async function (e) {
      e.preventDefault();
      const data = values(form);
      if (form.dataset.exists && !form.dataset.confirming) {
        form.dataset.confirming = "yes";
        save.textContent = "confirm: overwrite " + data.output;
        return;
      }
      if (form.dataset.confirming) data.overwrite = "yes";
      const answer = await post("/ticket/" + body.dataset.ticket + "/handoff", form, data);
      resetSave(form);
      if (!answer.ok) {
        if (answer.data.confirm) form.dataset.exists = "yes";
        showError(form, answer.data);
        return;
      }
      showError(form, {});
      form.dataset.exists = "yes";
      const seconds = answer.data.resumeIn.toFixed(1);
      form.querySelector(".edit-error").textContent =
        "written: " + answer.data.written + "; tf-fsm resume runs in " + seconds + " s";
    });
  }

  // The ticket changed (the stream): the edit button follows the lock, and the hand-off
  // section follows what the ticket waits for (kept while the same hand-off is being typed).
  let refreshing = null;
  function refresh() {
    clearTimeout(refreshing);
    refreshing = setTimeout(async function () {
      const ticket = body.dataset.ticket;
      const opener = document.getElementById("edit-open");
      if (opener) {
        const r = await fetch("/ticket/" + ticket + "/fields");
        if (r.ok) {
          const f = await r.json();
          opener.disabled = f.held !== null;
          opener.title = f.held !== null ? "a run holds this ticket (pid " + f.held + ")" : "";
        }
      }
      const old = document.getElementById("handoff");
      const r = await fetch("/ticket/" + ticket + "/handoff");
      if (!old || !r.ok) return;
      const fresh = window.tfFsm.fromHTML(await r.text());
      if (fresh.dataset.key === old.dataset.key) {
        const button = old.querySelector(".edit-save"), now = fresh.querySelector(".edit-save");
        if (button && now) button.disabled = now.disabled;
        return;
      }
      old.replaceWith(fresh);
      setUpHandoff();
    }, 200);
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (body.dataset.page === "board") setUpCreate();
    if (body.dataset.page !== "ticket") return;
    setUpEdit();
    setUpHandoff();
    document.addEventListener("tf:ticket", refresh);
  });
})();
