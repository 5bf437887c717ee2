// The dashboard's entry point: sign-in, the header (project switch, log position), the one event
// stream, and the router from the URL's fragment (#/servers, #/servers/<id>, #/admin/hosts) to views.

import { aggregatesView } from "./aggregates.js";
import { get, isAdmin, rescope, session, signIn, signOut, whenSignedOut } from "./api.js";
import { auditView } from "./audit.js";
import { chartsView } from "./charts.js";
import { h, show, errorText } from "./dom.js";
import { EventStream } from "./events.js";
import { flavorsView } from "./flavors.js";
import { groupsView } from "./groups.js";
import { hostsView } from "./hosts.js";
import { imagesView } from "./images.js";
import { keypairsView } from "./keypairs.js";
import { migrationsView } from "./migrations.js";
import { placementView } from "./placement.js";
import { quotasView } from "./quotas.js";
import { serverView } from "./server.js";
import { serversView } from "./servers.js";
import { servicesView } from "./services.js";
import { usageView } from "./usage.js";

// The admin and auditor pages: address -> [nav label, view]. Admins only, except the audit page and
// the charts, which show every role what the API answers it (its own project's usage).
const ADMIN_VIEWS = {
  "#/admin/aggregates": ["Aggregates", aggregatesView],
  "#/admin/placement": ["Placement", placementView],
  "#/admin/migrations": ["Migrations", migrationsView],
  "#/admin/services": ["Services", servicesView],
  "#/admin/usage": ["Usage", usageView],
};
const EVERY_ROLE_VIEWS = { "#/audit": ["Audit", auditView], "#/charts": ["Charts", chartsView] };

const main = document.getElementById("main");
const bar = document.getElementById("bar");
const positionLabel = document.getElementById("position");

// What the current view follows of the stream; set by each view, cleared on navigation.
const listeners = new Set();
let stream = null;
// The position the stream began after, once it has (null: it did not begin in time).
let streamBegan = Promise.resolve(null);
// How long a view waits for the stream to begin before it reads without it (the watch may be down).
const STREAM_WAIT_MS = 1000;
let config = null; // a promise of /dashboard/config.json
let leave = () => {};

const context = {
  onEvent(listener) {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
  position() {
    return stream ? stream.position : null;
  },
  // The position to read a view's data at: where the stream began (so that the view misses no
  // event between its read and the stream), or null after STREAM_WAIT_MS without a stream.
  began() {
    const late = new Promise((resolve) => setTimeout(() => resolve(null), STREAM_WAIT_MS));
    return Promise.race([streamBegan.then(() => context.position()), late]);
  },
};

function showPosition(position, live) {
  positionLabel.textContent = `log: ${position ?? "–"}`;
  positionLabel.className = live ? "live" : "away";
  positionLabel.dataset.position = position ?? "";
}

async function startStream() {
  let began;
  streamBegan = new Promise((resolve) => {
    began = resolve;
  });
  const where = await config; // asked for at start, beside the first page's data
  if (stream) {
    stream.stop(); // after the wait: a second start meanwhile leaves one stream, not two
  }
  // every kind the user may see: the project views follow flavors, images, key pairs, groups, quotas
  stream = new EventStream(where.events_url, {
    onEvent: (event) => {
      if (event.type === "stratus.stream.started") {
        began(event.position);
      }
      listeners.forEach((listener) => listener(event));
    },
    onPosition: showPosition,
  });
  stream.start();
}

function signInView(message) {
  const error = h("p", { class: "error", role: "alert" }, message || "");
  const form = h(
    "form",
    { class: "card signin", id: "signin" },
    h("h1", {}, "Sign in to Stratus"),
    h("label", {}, "User", h("input", { name: "user", autocomplete: "username", required: true })),
    h("label", {}, "Password", h("input", { name: "password", type: "password", autocomplete: "current-password", required: true })),
    h("label", {}, "Project (empty: your default project)", h("input", { name: "project" })),
    h("label", {}, "Domain", h("input", { name: "domain", value: "Default", required: true })),
    h("button", { type: "submit" }, "Sign in"),
    error,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    error.textContent = "";
    try {
      await signIn(f.get("user"), f.get("password"), f.get("project"), f.get("domain"));
      signedIn();
    } catch (e) {
      error.textContent = e.message;
    }
  });
  bar.hidden = true;
  show(main, form);
}

async function fillProjects() {
  const select = document.getElementById("project");
  const s = session();
  let projects = [{ id: s.project.id, name: s.project.name }];
  try {
    projects = (await get("/identity/v3/auth/projects")).projects;
  } catch (e) {
    console.warn("cannot list the projects of this user", e.message);
  }
  select.replaceChildren(
    ...projects.map((p) => h("option", { value: p.id, selected: p.id === s.project.id }, p.name)),
  );
}

// The project views (each its own module), by their address.
const PROJECT_VIEWS = {
  "#/flavors": flavorsView,
  "#/images": imagesView,
  "#/keypairs": keypairsView,
  "#/groups": groupsView,
  "#/quotas": quotasView,
};
const PROJECT_LINKS = [
  ["#/flavors", "Flavors"], ["#/images", "Images"], ["#/keypairs", "Key pairs"], ["#/groups", "Server groups"], ["#/quotas", "Quotas"],
];

function fillNav() {
  const links = [["#/servers", "Servers"], ...PROJECT_LINKS];
  if (isAdmin()) {
    links.push(["#/admin/servers", "All servers"], ["#/admin/hosts", "Hosts"]);
    links.push(...Object.entries(ADMIN_VIEWS).map(([href, [text]]) => [href, text]));
  }
  links.push(...Object.entries(EVERY_ROLE_VIEWS).map(([href, [text]]) => [href, text]));
  const current = location.hash || "#/servers";
  document.getElementById("nav").replaceChildren(
    ...links.map(([href, text]) => h("a", { href, class: href === current ? "current" : "" }, text)),
  );
  const s = session();
  document.getElementById("who").textContent = `${s.user.name} (${s.roles.join(", ")})`;
}

function signedIn() {
  bar.hidden = false;
  fillProjects();
  startStream();
  if (!location.hash || location.hash === "#/signin") {
    location.hash = "#/servers";
  } else {
    route();
  }
}

function route() {
  if (!session()) {
    signInView();
    return;
  }
  leave();
  listeners.clear();
  fillNav();
  const hash = location.hash || "#/servers";
  const server = hash.match(/^#\/servers\/([0-9a-f-]{36})$/);
  const serial = hash.match(/^#\/servers\/([0-9a-f-]{36})\/console$/);
  const quotas = hash.match(/^#\/quotas\/([0-9a-zA-Z_-]{1,64})$/);
  if (serial) {
    // xterm.js (345 kB) is loaded when a console is opened, not with every page
    let left = false;
    let close = () => {};
    leave = () => {
      left = true;
      close();
    };
    import("./console.js").then(({ consoleView }) => {
      if (!left) {
        close = consoleView(main, context, serial[1]);
      }
    }, (e) => show(main, errorText(e)));
  } else if (server) {
    leave = serverView(main, context, server[1]);
  } else if (PROJECT_VIEWS[hash]) {
    leave = PROJECT_VIEWS[hash](main, context);
  } else if (quotas) {
    leave = quotasView(main, context, quotas[1]); // another project's: the API answers admins only
  } else if (EVERY_ROLE_VIEWS[hash]) {
    leave = EVERY_ROLE_VIEWS[hash][1](main, context);
  } else if (ADMIN_VIEWS[hash] && isAdmin()) {
    leave = ADMIN_VIEWS[hash][1](main, context);
  } else if (hash === "#/admin/servers" || hash === "#/admin/hosts" || ADMIN_VIEWS[hash]) {
    if (!isAdmin()) {
      leave = () => {};
      show(main, h("h1", {}, "Not available"), h("p", {}, "This page is for administrators."));
    } else if (hash === "#/admin/hosts") {
      leave = hostsView(main, context);
    } else {
      leave = serversView(main, context, { allProjects: true });
    }
  } else {
    leave = serversView(main, context, { allProjects: false });
  }
}

async function start() {
  whenSignedOut(() => {
    if (stream) {
      stream.stop();
      stream = null;
    }
    showPosition(null, false);
    signInView("You are signed out.");
  });
  document.getElementById("signout").addEventListener("click", () => signOut());
  document.getElementById("project").addEventListener("change", async (ev) => {
    try {
      await rescope(ev.target.value);
      signedIn();
    } catch (e) {
      show(main, errorText(e));
    }
  });
  window.addEventListener("hashchange", route);
  config = fetch("/dashboard/config.json").then((resp) => resp.json());
  config.catch((e) => show(main, errorText(e)));
  if (session()) {
    signedIn();
  } else {
    signInView();
  }
}

start();
