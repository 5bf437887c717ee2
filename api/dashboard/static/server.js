// One server: its fields and actions, live; its timeline from the log (every event with its actor,
// request id and cause); a time slider showing the server as it was at an event's position; and
// its console log (Nova's os-getConsoleOutput), for the roles the API's policy lets read it.

import { call, canAct, get, isAdmin } from "./api.js";
import { h, show, errorText } from "./dom.js";
import { act, addresses, allowedActions } from "./servers.js";

const PAGE = 200;
// The console log's lengths offered (lines from its end; 0: the whole log, as the API caps it).
const CONSOLE_LENGTHS = [50, 200, 1000, 0];

// The server's console log: its last lines as the API answers them (POST .../action
// {"os-getConsoleOutput": {"length": N}}), read again on "refresh" or another length. A refusal by
// policy (403) hides the section; a console the host cannot give (404, 409) is the API's message.
function consoleLog(id) {
  const output = h("pre", { id: "console-log", class: "console-log" });
  const note = h("p", { class: "muted", id: "console-log-note" });
  const length = h(
    "select",
    { id: "console-length", "aria-label": "Lines", onchange: () => read() },
    CONSOLE_LENGTHS.map((n) => h("option", { value: n, selected: n === CONSOLE_LENGTHS[0] }, n ? `last ${n} lines` : "whole log")),
  );
  const refresh = h("button", { type: "button", id: "console-refresh", onclick: () => read() }, "refresh");
  const section = h("section", { id: "console-section" },
    h("h2", {}, "Console log"), h("div", { class: "actions" }, length, " ", refresh), note, output);
  async function read() {
    const n = Number(length.value);
    refresh.disabled = true;
    try {
      const answer = await call("POST", `/v2.1/servers/${id}/action`, { body: { "os-getConsoleOutput": n ? { length: n } : {} } });
      output.textContent = answer.body.output;
      note.textContent = answer.body.output ? "" : "The console log is empty.";
      section.dataset.state = "shown";
    } catch (e) {
      if (e.status === 403) {
        section.remove(); // the policy refuses this user the console log
        return;
      }
      output.textContent = "";
      note.textContent = e.message;
      section.dataset.state = "unavailable";
    } finally {
      refresh.disabled = false;
    }
  }
  return { section, read };
}

// The leaves of a JSON value by path ("flavor.ram": 256), for a diff of two states.
function leaves(value, path = "", out = new Map()) {
  if (value !== null && typeof value === "object" && Object.keys(value).length > 0) {
    for (const [key, inner] of Object.entries(value)) {
      leaves(inner, path ? `${path}.${key}` : key, out);
    }
  } else if (path) {
    out.set(path, JSON.stringify(value));
  }
  return out;
}

// [path, before, after] for every leaf that differs ("" where there was none).
export function changes(before, after) {
  const a = leaves(before);
  const b = leaves(after);
  const paths = [...new Set([...a.keys(), ...b.keys()])].sort();
  return paths.filter((p) => a.get(p) !== b.get(p)).map((p) => [p, a.get(p) ?? "", b.get(p) ?? ""]);
}

async function history(id) {
  const events = [];
  let marker = null;
  for (;;) {
    const query = `?limit=${PAGE}${marker ? `&marker=${marker}` : ""}`;
    const body = await get(`/v2.1/stratus/history/server/${id}${query}`);
    events.push(...body.events);
    if (!body.next_marker) {
      return events;
    }
    marker = body.next_marker;
  }
}

// The event's name without its prefix, and the action it concerns (stop, reboot...) if any.
function describe(event) {
  const name = event.type.replace(/^stratus\.instance\./, "");
  const action = event.data && event.data.action;
  return action ? `${name}: ${action}` : name;
}

export function serverView(main, context, id) {
  const admin = isAdmin();
  const error = h("div");
  const title = h("h1", {}, "Server");
  const fields = h("dl", { class: "fields", id: "fields" });
  const actions = h("div", { class: "actions" });
  const timeline = h("tbody");
  const slider = h("input", { type: "range", min: 0, max: 0, value: 0, id: "slider", "aria-label": "Position" });
  const sliderLabel = h("span", { class: "mono", id: "slider-position" });
  const past = h("pre", { id: "past" });
  const diff = h("tbody");
  let events = [];
  let gone = false;
  // members and admins may read it (a reader is refused by policy: no section at all)
  const log = canAct() || admin ? consoleLog(id) : null;

  function field(name, value) {
    return [h("dt", {}, name), h("dd", { "data-field": name }, value ?? "")];
  }

  function renderServer(s) {
    title.textContent = `Server ${s.name}`;
    fields.replaceChildren(
      ...field("ID", s.id),
      ...field("Status", s.status + (s["OS-EXT-STS:task_state"] ? ` (${s["OS-EXT-STS:task_state"]})` : "")),
      ...field("Power state", s["OS-EXT-STS:power_state"]),
      ...field("Addresses", addresses(s)),
      ...field("Flavor", s.flavor ? s.flavor.original_name : ""),
      ...field("Image", s.image && s.image.id ? s.image.id : ""),
      ...field("Key pair", s.key_name),
      ...field("Project", s.tenant_id),
      ...(admin ? field("Host", s["OS-EXT-SRV-ATTR:host"]) : []),
      ...field("Created", s.created),
      ...field("Updated", s.updated),
    );
    actions.replaceChildren(
      ...(s.status === "ACTIVE" && !s["OS-EXT-STS:task_state"]
        ? [h("a", { href: `#/servers/${id}/console`, id: "open-console", class: "button" }, "serial console")]
        : []),
      ...allowedActions(s).map((action) =>
        h("button", {
          type: "button",
          "data-action": action,
          class: action === "delete" ? "danger" : "",
          onclick: () => act(s, action).catch((e) => error.replaceChildren(errorText(e))),
        }, action),
      ),
    );
  }

  function renderTimeline() {
    timeline.replaceChildren(
      ...events.map((e) =>
        h(
          "tr",
          { "data-position": e.position },
          h("td", { class: "mono" }, e.position),
          h("td", { class: "mono" }, e.time),
          h("td", {}, describe(e)),
          h("td", { class: "mono" }, e.actoruser ? `${e.actoruser} (${e.actorroles})` : "(system)"),
          h("td", { class: "mono" }, e.requestid || ""),
          h("td", { class: "mono" }, e.causationid || ""),
        ),
      ),
    );
    const last = Math.max(0, events.length - 1);
    const atEnd = Number(slider.value) === Number(slider.max);
    slider.max = last;
    if (atEnd) {
      slider.value = last;
    }
    slider.disabled = events.length === 0;
  }

  async function loadServer(position) {
    try {
      renderServer((await get(`/v2.1/servers/${id}`, { minPosition: position })).server);
    } catch (e) {
      if (e.status !== 404) {
        throw e;
      }
      gone = true;
      fields.replaceChildren(...field("Status", "DELETED"));
      actions.replaceChildren();
    }
  }

  // The server's state at a position (GET /v2.1/stratus/state/server/<id>?as_of=), kept: a past
  // state never changes.
  const states = new Map();
  function stateAt(position) {
    if (!states.has(position)) {
      const asked = get(`/v2.1/stratus/state/server/${id}?as_of=${position}`).then((body) => body.state);
      asked.catch(() => states.delete(position));
      states.set(position, asked);
    }
    return states.get(position);
  }

  // The server as it was at the slider's event, and what that event changed.
  async function showPast() {
    const index = Number(slider.value);
    const event = events[index];
    if (!event) {
      return;
    }
    sliderLabel.textContent = `position ${event.position} · ${describe(event)} · ${event.time}`;
    for (const tr of timeline.children) {
      tr.classList.toggle("current-position", Number(tr.dataset.position) === event.position);
    }
    try {
      const before = index > 0 ? stateAt(events[index - 1].position) : Promise.resolve({});
      const [was, is] = await Promise.all([before, stateAt(event.position)]);
      if (Number(slider.value) !== index) {
        return; // the slider moved on meanwhile
      }
      past.textContent = JSON.stringify(is, null, 2);
      diff.replaceChildren(
        ...changes(was, is).map(([path, a, b]) =>
          h("tr", {}, h("td", { class: "mono" }, path), h("td", { class: "mono" }, a), h("td", { class: "mono" }, b)),
        ),
      );
    } catch (e) {
      past.textContent = e.message;
      diff.replaceChildren();
    }
  }
  slider.addEventListener("input", showPast);

  show(
    main,
    h("p", {}, h("a", { href: "#/servers" }, "← Servers")),
    title,
    error,
    fields,
    actions,
    log ? log.section : null,
    h("h2", {}, "Timeline"),
    h("table", { id: "timeline" },
      h("thead", {}, h("tr", {}, ["Position", "Time", "Event", "Actor", "Request", "Caused by"].map((t) => h("th", {}, t)))),
      timeline),
    h("h2", {}, "As it was"),
    h("div", { class: "slider" }, slider, sliderLabel),
    h("h2", {}, "What this event changed"),
    h("table", { id: "diff" },
      h("thead", {}, h("tr", {}, ["Field", "Before", "After"].map((t) => h("th", {}, t)))),
      diff),
    h("h2", {}, "The whole state"),
    past,
  );
  if (log) {
    context.began().then(() => log.read());
  }
  context.began().then((position) => Promise.all([loadServer(position), history(id)])).then(
    ([, found]) => {
      // the log's history, and any event the stream brought while it was read
      const known = new Set(found.map((e) => e.position));
      events = [...found, ...events.filter((e) => !known.has(e.position))];
      events.sort((a, b) => a.position - b.position);
      slider.value = Math.max(0, events.length - 1);
      renderTimeline();
      showPast();
    },
    (e) => error.replaceChildren(errorText(e)),
  );
  return context.onEvent((event) => {
    if (event.subject !== id || gone) {
      return;
    }
    if (!events.some((e) => e.position === event.position)) {
      events.push(event);
      renderTimeline();
      if (Number(slider.value) === events.length - 1) {
        showPast();
      }
    }
    loadServer(event.position).catch((e) => error.replaceChildren(errorText(e)));
  });
}
