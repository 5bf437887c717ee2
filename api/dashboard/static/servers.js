// The servers page: the list (status, addresses, flavor, image; the host for admins), kept live by
// the event stream, the create form, and the actions the server's state allows.

import { call, canAct, get, isAdmin, session } from "./api.js";
import { h, show, errorText } from "./dom.js";

// Nova's actions by the server's state (a server busy with a task may only be deleted).
const ACTIONS = {
  ACTIVE: ["stop", "reboot"],
  SHUTOFF: ["start"],
};
const BODIES = {
  stop: { "os-stop": null },
  start: { "os-start": null },
  reboot: { reboot: { type: "SOFT" } },
};

export function allowedActions(server) {
  if (!canAct()) {
    return []; // a reader reads
  }
  const busy = server["OS-EXT-STS:task_state"];
  return [...(busy ? [] : ACTIONS[server.status] || []), "delete"];
}

export async function act(server, action) {
  if (action === "delete") {
    return call("DELETE", `/v2.1/servers/${server.id}`);
  }
  return call("POST", `/v2.1/servers/${server.id}/action`, { body: BODIES[action] });
}

export function addresses(server) {
  return Object.entries(server.addresses || {})
    .map(([net, ips]) => `${net}: ${ips.map((ip) => ip.addr).join(", ")}`)
    .join("; ");
}

export function statusCell(server) {
  const task = server["OS-EXT-STS:task_state"];
  return h("td", { class: `status ${server.status}` }, server.status, task ? h("span", { class: "muted" }, ` (${task})`) : null);
}

// Servers by id, refreshed from the API when the stream says one changed: the API's answer is the
// truth (the same view and policy as any client), the stream says only when to ask.
class Servers {
  constructor(allProjects, render) {
    this.allProjects = allProjects;
    this.render = render;
    this.byId = new Map();
    this.seen = new Map(); // id -> the position of the last answer applied
  }

  // Every page of the list (the API answers 1,000 servers at most per page, with a link to the
  // next), drawn as each page arrives.
  async load(minPosition) {
    const byId = new Map();
    let path = `/v2.1/servers/detail${this.allProjects ? "?all_tenants=1" : ""}`;
    while (path) {
      const body = await get(path, { minPosition });
      body.servers.forEach((s) => byId.set(s.id, s));
      this.byId = byId;
      this.render();
      const next = (body.servers_links || []).find((link) => link.rel === "next");
      path = next ? next.href.slice(next.href.indexOf("/v2.1/")) : null;
    }
  }

  async refresh(id, position) {
    let server = null;
    try {
      server = (await get(`/v2.1/servers/${id}`, { minPosition: position })).server;
    } catch (e) {
      if (e.status !== 404) {
        throw e;
      }
    }
    if ((this.seen.get(id) || 0) > position) {
      return; // a later event's answer is already here
    }
    this.seen.set(id, position);
    const mine = server && (this.allProjects || server.tenant_id === session().project.id);
    if (mine) {
      this.byId.set(id, server);
    } else {
      this.byId.delete(id);
    }
    this.render();
  }
}

// ``options``: a promise, once the list is drawn, since the API's workers are few and the list is
// what the user waits for.
function createForm(options, onCreated) {
  const error = h("p", { class: "error", role: "alert" });
  const flavor = h("select", { name: "flavor", required: true });
  const image = h("select", { name: "image", required: true });
  const keyName = h("select", { name: "key_name" }, h("option", { value: "" }, "(none)"));
  const form = h(
    "form",
    { class: "card", id: "create" },
    h("h2", {}, "Create a server"),
    h("label", {}, "Name", h("input", { name: "name", required: true, maxlength: 255 })),
    h("label", {}, "Flavor", flavor),
    h("label", {}, "Image", image),
    h("label", {}, "Key pair", keyName),
    h("button", { type: "submit" }, "Create"),
    error,
  );
  // Only what this user may use: the flavors and images the API lists for them, their key pairs.
  options.then(() => Promise.all([
    get("/v2.1/flavors/detail"),
    get("/image/v2/images?status=active"),
    get("/v2.1/os-keypairs"),
  ]).then(([flavors, images, keypairs]) => {
    flavor.append(...flavors.flavors.map((f) => h("option", { value: f.id }, `${f.name} (${f.vcpus} vCPU, ${f.ram} MB)`)));
    image.append(...images.images.map((i) => h("option", { value: i.id }, i.name || i.id)));
    keyName.append(...keypairs.keypairs.map((k) => h("option", { value: k.keypair.name }, k.keypair.name)));
  })).catch((e) => { error.textContent = e.message; });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const server = { name: f.get("name"), flavorRef: f.get("flavor"), imageRef: f.get("image"), networks: "auto" };
    if (f.get("key_name")) {
      server.key_name = f.get("key_name");
    }
    error.textContent = "";
    try {
      await call("POST", "/v2.1/servers", { body: { server } });
      form.reset();
      onCreated();
    } catch (e) {
      error.textContent = e.message;
    }
  });
  return form;
}

export function serversView(main, context, { allProjects }) {
  const admin = isAdmin();
  const error = h("div");
  const tbody = h("tbody");
  const images = new Map();
  const heads = ["Name", "Status", "Addresses", "Flavor", "Image", ...(admin ? ["Host"] : []), allProjects ? "Project" : null, "Actions"];
  const table = h("table", { id: "servers" }, h("thead", {}, h("tr", {}, heads.filter(Boolean).map((t) => h("th", {}, t)))), tbody);
  const servers = new Servers(allProjects, render);

  // One listener for every row's buttons (a thousand rows need no thousands of listeners).
  tbody.addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-action]");
    const server = button && servers.byId.get(button.closest("tr").dataset.id);
    if (server) {
      act(server, button.dataset.action).catch((e) => error.replaceChildren(errorText(e)));
    }
  });

  function row(s) {
    const buttons = allowedActions(s).map((action) =>
      h("button", { type: "button", class: action === "delete" ? "danger" : "", "data-action": action }, action),
    );
    return h(
      "tr",
      { "data-id": s.id, "data-status": s.status },
      h("td", {}, h("a", { href: `#/servers/${s.id}` }, s.name)),
      statusCell(s),
      h("td", { class: "mono" }, addresses(s)),
      h("td", {}, s.flavor ? s.flavor.original_name : ""),
      h("td", {}, s.image && s.image.id ? images.get(s.image.id) || s.image.id : "(volume)"),
      admin ? h("td", {}, s["OS-EXT-SRV-ATTR:host"] || "") : null,
      allProjects ? h("td", { class: "mono" }, s.tenant_id) : null,
      h("td", { class: "actions" }, buttons),
    );
  }

  function render() {
    const started = performance.now();
    const rows = [...servers.byId.values()].sort((a, b) => (a.created < b.created ? 1 : -1));
    tbody.replaceChildren(...rows.map(row));
    count.textContent = `${rows.length} server${rows.length === 1 ? "" : "s"}`;
    performance.measure("servers.render", { start: started }); // read by tests/bench/bench_dashboard.py
  }

  const count = h("span", { class: "muted", id: "count" });
  let unfollowed = false; // read before the stream began: read again once it has
  const listed = context
    .began()
    .then((position) => {
      unfollowed = position === null;
      return servers.load(position);
    })
    .catch((e) => error.replaceChildren(errorText(e)));
  show(
    main,
    h("h1", {}, allProjects ? "All servers" : `Servers of ${session().project.name}`, " ", count),
    allProjects || !canAct() ? null : createForm(listed, () => {}),
    error,
    table,
  );
  // the images' names, for the image column (the form lists them too: the cache has them then)
  listed.then(() => get("/image/v2/images")).then((body) => {
    body.images.forEach((i) => images.set(i.id, i.name || i.id));
    render();
  }, () => {});
  return context.onEvent((event) => {
    if (event.type === "stratus.stream.started" && unfollowed) {
      servers.load(event.position).catch((e) => error.replaceChildren(errorText(e)));
    } else if (event.type.startsWith("stratus.instance.")) {
      servers.refresh(event.subject, event.position).catch((e) => error.replaceChildren(errorText(e)));
    }
  });
}
