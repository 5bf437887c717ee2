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

// The page sizes offered (Nova answers 1,000 servers a page at most); the choice is the tab's.
const PAGE_SIZES = [50, 100, 250, 1000];
const PAGE_SIZE_KEY = "stratus.servers.pageSize";

function pageSize() {
  const chosen = Number(sessionStorage.getItem(PAGE_SIZE_KEY));
  return PAGE_SIZES.includes(chosen) ? chosen : 100;
}

// One page of servers by id, refreshed from the API when the stream says one changed: the API's
// answer is the truth (the same view and policy as any client), the stream says only when to ask.
// Pages follow Nova's ``limit``/``marker`` (the ``next`` link of ``servers_links``); the markers of
// the pages before are kept to go back.
class Servers {
  constructor(allProjects, render) {
    this.allProjects = allProjects;
    this.render = render;
    this.byId = new Map();
    this.seen = new Map(); // id -> the position of the last answer applied
    this.markers = [null]; // the marker of each page up to the current one (the first has none)
    this.next = null; // the next page's marker, when the API gave a next link
    this.limit = pageSize();
    this.asked = 0; // page requests made: only the newest one's answer is shown
  }

  get page() {
    return this.markers.length; // 1 for the first
  }

  path(marker) {
    const query = new URLSearchParams({ limit: this.limit });
    if (marker) {
      query.set("marker", marker);
    }
    if (this.allProjects) {
      query.set("all_tenants", "1");
    }
    return `/v2.1/servers/detail?${query}`;
  }

  // The page after ``marker`` as of ``minPosition``, or null when the user asked for another page
  // while this one was on its way (a slow first read must not overwrite the page moved to since).
  async read(marker, minPosition) {
    const asked = ++this.asked;
    const body = await get(this.path(marker), { minPosition });
    return asked === this.asked ? body : null;
  }

  // The current page as of ``minPosition``.
  async load(minPosition) {
    const body = await this.read(this.markers[this.markers.length - 1], minPosition);
    if (body) {
      this.show(body);
    }
  }

  show(body) {
    this.byId = new Map(body.servers.map((s) => [s.id, s]));
    const next = (body.servers_links || []).find((link) => link.rel === "next");
    this.next = next ? new URL(next.href, location.href).searchParams.get("marker") : null;
    this.render();
  }

  async forward(minPosition) {
    if (!this.next) {
      return;
    }
    const marker = this.next;
    const body = await this.read(marker, minPosition);
    if (!body) {
      return;
    }
    if (body.servers.length === 0) {
      this.next = null; // a full last page has a next link to an empty page: stay, with no next
      this.render();
      return;
    }
    this.markers.push(marker);
    this.show(body);
  }

  async back(minPosition) {
    if (this.markers.length > 1) {
      this.markers.pop();
      await this.load(minPosition);
    }
  }

  async resize(limit, minPosition) {
    this.limit = limit;
    sessionStorage.setItem(PAGE_SIZE_KEY, String(limit));
    this.markers = [null];
    await this.load(minPosition);
  }

  // Whether a server not on the page is new on the first page: the list is newest first, so it is
  // when it is newer than the page's oldest, or when the page is all there is (no next).
  belongsFirst(server) {
    if (this.page !== 1) {
      return false;
    }
    if (!this.next) {
      return true;
    }
    let oldest = null;
    for (const s of this.byId.values()) {
      oldest = oldest === null || s.created < oldest ? s.created : oldest;
    }
    return oldest === null || server.created > oldest;
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
    if (mine && (this.byId.has(id) || this.belongsFirst(server))) {
      this.byId.set(id, server); // changed on this page, or new on the first
    } else {
      this.byId.delete(id);
    }
    this.render(id);
  }
}

// ``options``: a promise, once the list is drawn, since the API's workers are few and the list is
// what the user waits for.
function createForm(options, onCreated) {
  const error = h("p", { class: "error", role: "alert" });
  const flavor = h("select", { name: "flavor", required: true });
  const image = h("select", { name: "image", required: true });
  const keyName = h("select", { name: "key_name" }, h("option", { value: "" }, "(none)"));
  const group = h("select", { name: "group" }, h("option", { value: "" }, "(none)"));
  const form = h(
    "form",
    { class: "card", id: "create" },
    h("h2", {}, "Create a server"),
    h("label", {}, "Name", h("input", { name: "name", required: true, maxlength: 255 })),
    h("label", {}, "Flavor", flavor),
    h("label", {}, "Image", image),
    h("label", {}, "Key pair", keyName),
    h("label", {}, "Server group", group),
    h("button", { type: "submit" }, "Create"),
    error,
  );
  // Only what this user may use: the flavors and images the API lists for them, their key pairs,
  // their project's server groups.
  options.then(() => Promise.all([
    get("/v2.1/flavors/detail"),
    get("/image/v2/images?status=active&limit=1000"),
    get("/v2.1/os-keypairs"),
    get("/v2.1/os-server-groups"),
  ]).then(([flavors, images, keypairs, groups]) => {
    flavor.append(...flavors.flavors.map((f) => h("option", { value: f.id }, `${f.name} (${f.vcpus} vCPU, ${f.ram} MB)`)));
    image.append(...images.images.map((i) => h("option", { value: i.id }, i.name || i.id)));
    keyName.append(...keypairs.keypairs.map((k) => h("option", { value: k.keypair.name }, k.keypair.name)));
    group.append(...groups.server_groups.map((g) => h("option", { value: g.id }, `${g.name} (${g.policy})`)));
  })).catch((e) => { error.textContent = e.message; });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const server = { name: f.get("name"), flavorRef: f.get("flavor"), imageRef: f.get("image"), networks: "auto" };
    if (f.get("key_name")) {
      server.key_name = f.get("key_name");
    }
    // a group is joined with the scheduler hint, as the CLI's --hint group=<id> does
    const body = f.get("group") ? { server, "os:scheduler_hints": { group: f.get("group") } } : { server };
    error.textContent = "";
    try {
      await call("POST", "/v2.1/servers", { body });
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

  // The image's name once the image list has come (it is asked for beside the servers).
  function imageCell(s) {
    if (!s.image || !s.image.id) {
      return h("td", {}, "(volume)");
    }
    const name = images.get(s.image.id);
    return h("td", { "data-image": name ? null : s.image.id }, name || s.image.id);
  }

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
      imageCell(s),
      admin ? h("td", {}, s["OS-EXT-SRV-ATTR:host"] || "") : null,
      allProjects ? h("td", { class: "mono" }, s.tenant_id) : null,
      h("td", { class: "actions" }, buttons),
    );
  }

  const drawn = new Map(); // id -> its row in the table

  // Every row (``changed`` undefined), or only the row of server ``changed``: a live update of one
  // server redraws one row, not the page's thousand.
  function render(changed) {
    const started = performance.now();
    const old = changed === undefined ? undefined : drawn.get(changed);
    if (old) {
      const server = servers.byId.get(changed);
      if (server) {
        const tr = row(server);
        old.replaceWith(tr);
        drawn.set(changed, tr);
      } else {
        old.remove();
        drawn.delete(changed);
      }
    } else {
      const rows = [...servers.byId.values()].sort((a, b) => (a.created < b.created ? 1 : -1));
      drawn.clear();
      tbody.replaceChildren(...rows.map((s) => {
        const tr = row(s);
        drawn.set(s.id, tr);
        return tr;
      }));
    }
    const shown = servers.byId.size;
    const first = (servers.page - 1) * servers.limit + 1;
    count.textContent = shown
      ? `${first}–${first + shown - 1}${servers.next ? "" : ", the last"}`
      : servers.page === 1 ? "none" : "no more";
    pager.dataset.page = servers.page;
    pageLabel.textContent = `page ${servers.page}`;
    previous.disabled = servers.page === 1;
    nextButton.disabled = !servers.next;
    performance.measure("servers.render", { start: started }); // read by tests/bench/bench_dashboard.py
  }

  const count = h("span", { class: "muted", id: "count" });
  let position = null; // the position the list was read at, or of the last event since
  const paged = (move) => move().catch((e) => error.replaceChildren(errorText(e)));
  const previous = h("button", { type: "button", id: "previous", onclick: () => paged(() => servers.back(position)) }, "Previous");
  const nextButton = h("button", { type: "button", id: "next", onclick: () => paged(() => servers.forward(position)) }, "Next");
  const pageLabel = h("span", { class: "muted" });
  const sizes = h(
    "select",
    { id: "page-size", "aria-label": "Servers per page", onchange: (ev) => paged(() => servers.resize(Number(ev.target.value), position)) },
    PAGE_SIZES.map((n) => h("option", { value: n, selected: n === servers.limit }, `${n} a page`)),
  );
  const pager = h("div", { class: "pager", id: "pager" }, previous, " ", nextButton, " ", pageLabel, " ", sizes);
  let unfollowed = false; // read before the stream began: read again once it has
  const listed = context
    .began()
    .then((began) => {
      unfollowed = began === null;
      position = began;
      return servers.load(began);
    })
    .catch((e) => error.replaceChildren(errorText(e)));
  show(
    main,
    h("h1", {}, allProjects ? "All servers" : `Servers of ${session().project.name}`, " ", count),
    allProjects || !canAct() ? null : createForm(listed, () => {}),
    error,
    pager,
    table,
  );
  // the images' names, for the image column, asked for beside the list: the cells drawn before
  // they came are named in place
  get("/image/v2/images?limit=1000").then((body) => {
    body.images.forEach((i) => images.set(i.id, i.name || i.id));
    tbody.querySelectorAll("td[data-image]").forEach((td) => {
      td.textContent = images.get(td.dataset.image) || td.textContent;
      td.removeAttribute("data-image");
    });
  }, () => {});
  return context.onEvent((event) => {
    if (event.type === "stratus.stream.started" && unfollowed) {
      unfollowed = false;
      position = event.position;
      servers.load(event.position).catch((e) => error.replaceChildren(errorText(e)));
    } else if (event.type.startsWith("stratus.instance.")) {
      position = Math.max(position ?? 0, event.position);
      servers.refresh(event.subject, event.position).catch((e) => error.replaceChildren(errorText(e)));
    }
  });
}
