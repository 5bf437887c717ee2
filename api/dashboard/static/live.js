// What the project views (flavors, images, key pairs, server groups, quotas) share: their data read
// once the stream has begun, and read again when the stream brings an event of a kind they show, at
// that event's position (the API's answer is the truth; the event says only when to ask).

import { h } from "./dom.js";

// ``kinds``: the event kinds that change the view's data (``keypair`` for stratus.keypair.*).
// ``read(position)``: reads and draws the data as of ``position`` at least (null: as it is now).
// Reads never overlap: events that arrive during one make one more read, at the latest position.
// Answers ``{stop, reread}``: ``stop`` ends the following (a view's ``leave``); ``reread(position)``
// reads again after the user's own write (its ``X-Stratus-Position``), for kinds whose events the
// stream shows auditors only (docs/dashboard.md).
export function follow(context, kinds, read, onError) {
  const prefixes = kinds.map((kind) => `stratus.${kind}.`);
  let running = false;
  let pending = null;
  let unfollowed = false; // read before the stream began: read again once it has

  async function run(position) {
    if (running) {
      pending = Math.max(pending ?? 0, position ?? 0);
      return;
    }
    running = true;
    try {
      await read(position);
    } catch (e) {
      onError(e);
    }
    running = false;
    if (pending !== null) {
      const next = pending;
      pending = null;
      run(next);
    }
  }

  context.began().then((position) => {
    unfollowed = position === null;
    run(position);
  });
  const stop = context.onEvent((event) => {
    if (event.type === "stratus.stream.started") {
      if (unfollowed) {
        unfollowed = false;
        run(event.position);
      }
    } else if (prefixes.some((prefix) => event.type.startsWith(prefix))) {
      run(event.position);
    }
  });
  return { stop, reread: run };
}

// A table with its header row; ``tbody`` is filled by the view.
export function table(id, heads) {
  const tbody = h("tbody");
  const el = h("table", { id }, h("thead", {}, h("tr", {}, heads.filter(Boolean).map((t) => h("th", {}, t)))), tbody);
  return { el, tbody };
}

// A form whose submit runs ``action(formData)``, shows its error and resets on success.
export function actionForm(attrs, children, action) {
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "card", ...attrs }, ...children, error);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      await action(new FormData(form), form);
      form.reset();
    } catch (e) {
      error.textContent = e.message;
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

// A delete button (rows use one listener on their tbody, see ``onRowAction``).
export function deleteButton(label = "delete") {
  return h("button", { type: "button", class: "danger", "data-action": "delete" }, label);
}

// One listener for every row's buttons: ``handler(action, rowKey)`` (the row's ``data-key``).
export function onRowAction(tbody, handler, onError) {
  tbody.addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-action]");
    const row = button && button.closest("tr[data-key]");
    if (row) {
      button.disabled = true;
      Promise.resolve(handler(button.dataset.action, row.dataset.key)).catch((e) => {
        button.disabled = false;
        onError(e);
      });
    }
  });
}

export function bytes(n) {
  if (n === null || n === undefined) {
    return "";
  }
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit ? value.toFixed(1) : value} ${units[unit]}`;
}
