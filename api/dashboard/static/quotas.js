// Quotas: what a project uses of each limit (Nova's os-quota-sets/<project>/detail: in_use against
// limit), drawn as bars. A user sees their project's; an admin chooses any project (the API
// refuses another project's to others). Live: a server's, a group's, a key pair's or a limit's
// event makes the numbers read again.

import { get, isAdmin, session } from "./api.js";
import { h, show, errorText } from "./dom.js";
import { follow, table } from "./live.js";

// The events that change what is in use or the limits.
const KINDS = ["instance", "servergroup", "keypair", "projectquota", "quotaclass", "projectusage"];
// Shown first, in this order; any other resource the API answers follows, by name.
const ORDER = ["instances", "cores", "ram", "server_groups", "server_group_members", "key_pairs", "metadata_items"];
const LABELS = { ram: "RAM (MB)", cores: "vCPUs", server_group_members: "members per server group", key_pairs: "key pairs (yours)" };

function rank(name) {
  const i = ORDER.indexOf(name);
  return i < 0 ? ORDER.length : i;
}

function bar(name, { in_use: used, limit }) {
  const unlimited = limit < 0;
  const label = unlimited ? `${used} (no limit)` : `${used} of ${limit}`;
  const meter = unlimited
    ? h("span", { class: "muted" }, "–")
    : h("meter", { min: 0, max: Math.max(limit, 1), value: Math.min(used, Math.max(limit, 1)), low: limit * 0.6, high: limit * 0.85, optimum: 0, title: label });
  return h(
    "tr",
    { "data-key": name, "data-in-use": used, "data-limit": limit },
    h("td", {}, LABELS[name] || name.replaceAll("_", " ")),
    h("td", { class: "bar" }, meter),
    h("td", { class: "used" }, label),
  );
}

async function projectChooser(current) {
  const select = h("select", { id: "quota-project", "aria-label": "Project" });
  const { projects } = await get("/identity/v3/projects");
  select.append(
    ...projects
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .map((p) => h("option", { value: p.id, selected: p.id === current }, p.name)),
  );
  select.addEventListener("change", () => {
    location.hash = `#/quotas/${select.value}`;
  });
  return h("label", { class: "chooser" }, "Project ", select);
}

export function quotasView(main, context, projectId) {
  const s = session();
  const project = projectId || s.project.id;
  const error = h("div");
  const chooser = h("div");
  const { el, tbody } = table("quotas", ["Resource", "Used", ""]);
  const failed = (e) => error.replaceChildren(errorText(e));

  async function read(position) {
    const body = await get(`/v2.1/os-quota-sets/${project}/detail`, { minPosition: position });
    const entries = Object.entries(body.quota_set).filter(([name, v]) => name !== "id" && v && typeof v === "object");
    entries.sort(([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : 1));
    tbody.replaceChildren(...entries.map(([name, v]) => bar(name, v)));
    error.replaceChildren();
  }

  const title = project === s.project.id ? `Quotas of ${s.project.name}` : `Quotas of project ${project}`;
  show(main, h("h1", {}, title), chooser, error, el);
  if (isAdmin()) {
    projectChooser(project).then((c) => chooser.replaceChildren(c), failed);
  }
  return follow(context, KINDS, read, failed).stop;
}
