// The auditor's page: the hash chain's verification (GET /v2.1/stratus/audit/verify, admins), and
// two time sliders over the log: the current project's quota usage as it was at any position
// (every role: the project's own), and the whole cloud's capacity as it was (admins).

import { get, isAdmin, session } from "./api.js";
import { h } from "./dom.js";
import { capacityAt, headPosition, hostNames, projectUsageAt } from "./past.js";
import { frame, ratio } from "./tables.js";

const SETTLE_MS = 120; // a slider being dragged asks for its last position only

function field(name, value, id) {
  return [h("dt", {}, name), h("dd", { "data-field": id || name }, value ?? "")];
}

// ``reached(position)``: the log's last position, as the verification read it (the stream shows the
// page only the events it may see: the log goes further).
function verification(fail, reached) {
  const result = h("dl", { class: "fields", id: "chain" }, ...field("Result", "verifying…", "result"));
  const button = h("button", { type: "button", id: "verify" }, "Verify again");
  async function run() {
    button.disabled = true;
    try {
      const r = (await get("/v2.1/stratus/audit/verify")).verification;
      const broken = r.first_break;
      result.replaceChildren(
        ...field("Result", r.ok ? "OK: chain unbroken" : "BROKEN", "result"),
        ...field("Events checked", `${r.checked} (positions 1..${r.last_position})`, "checked"),
        ...field("Speed", `${r.seconds} s, ${r.events_per_second} events/s`, "speed"),
        ...(broken ? field("First break", `position ${broken.position} (event ${broken.event_id}): ${broken.reason}`, "break") : []),
        ...(r.anchor ? field("Anchor to record", r.anchor, "anchor") : []),
      );
      result.dataset.ok = String(r.ok);
      reached(r.last_position);
    } catch (e) {
      fail(e);
    } finally {
      button.disabled = false;
    }
  }
  button.addEventListener("click", run);
  run();
  return [
    h("h2", {}, "Hash chain"),
    h("p", { class: "muted" }, "Every event of the log from position 1, checked against its hash and its aggregate's previous one (docs/audit.md). Record the anchor elsewhere: a later check proves nothing before it changed."),
    result,
    button,
  ];
}

// A slider from position 1 to the head; ``render(position)`` answers what to show there.
function slider(id, head, render, fail) {
  const input = h("input", { type: "range", min: 1, max: head, value: head, id, "aria-label": "Log position" });
  const label = h("span", { class: "mono", id: `${id}-position` });
  const out = h("dl", { class: "fields", id: `${id}-at` });
  let timer = null;
  async function showAt() {
    const position = Number(input.value);
    label.textContent = `position ${position} of ${input.max}`;
    try {
      const shown = await render(position);
      if (Number(input.value) === position) {
        out.replaceChildren(...shown);
        out.dataset.position = String(position);
      }
    } catch (e) {
      fail(e);
    }
  }
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(showAt, SETTLE_MS);
  });
  showAt();
  return {
    nodes: [h("div", { class: "slider" }, input, label), out],
    // The log grew: the slider reaches further, and follows when it was at the end.
    grow(position) {
      if (position > Number(input.max)) {
        const atEnd = Number(input.value) === Number(input.max);
        input.max = position;
        if (atEnd) {
          input.value = position;
          showAt();
        }
      }
    },
  };
}

export function auditView(main, context) {
  const admin = isAdmin();
  const project = session().project;
  const content = h("div");
  const fail = frame(main, "Audit", content);
  const sliders = [];
  (async () => {
    const head = await headPosition(context);
    const usage = slider("usage-slider", head, async (position) => {
      const u = await projectUsageAt(project.id, position);
      return [
        ...field("Servers", u.instances, "instances"),
        ...field("vCPUs", u.cores, "cores"),
        ...field("RAM (MB)", u.ram, "ram"),
        ...field("Server ids", u.servers.join(", "), "servers"),
      ];
    }, fail);
    sliders.push(usage);
    const parts = [
      h("h2", {}, `Usage of ${project.name} as it was`),
      h("p", { class: "muted" }, "The project's quota usage computed from the log at the position chosen."),
      ...usage.nodes,
    ];
    if (admin) {
      const names = await hostNames();
      const capacity = slider("capacity-slider", head, async (position) => {
        const c = await capacityAt(names, position);
        return [
          ...field("Hosts", c.hosts, "hosts"),
          ...field("Servers placed", c.servers, "servers"),
          ...field("vCPU", ratio(c.vcpus_used, c.vcpus), "vcpus"),
          ...field("RAM (MB)", ratio(c.memory_mb_used, c.memory_mb), "ram"),
          ...field("Disk (GB)", ratio(c.disk_gb_used, c.disk_gb), "disk"),
        ];
      }, fail);
      sliders.push(capacity);
      parts.unshift(...verification(fail, (position) => sliders.forEach((s) => s.grow(position))));
      parts.push(h("h2", {}, "The cloud's capacity as it was"), ...capacity.nodes);
    }
    content.replaceChildren(...parts);
  })().catch(fail);
  return context.onEvent((event) => sliders.forEach((s) => s.grow(event.position)));
}
