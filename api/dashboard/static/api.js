// The API as the dashboard calls it: Keystone sign-in, project switching and JSON requests
// carrying the user's token. The token lives in sessionStorage only (gone when the tab closes),
// never in a URL, a cookie or a log line.

const SESSION_KEY = "stratus.session";
// Nova's microversion the pages are written for: flavors embedded in servers (2.47), networks
// required on create (2.37).
const COMPUTE_VERSION = "2.79";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let onSignedOut = () => {};

export function whenSignedOut(callback) {
  onSignedOut = callback;
}

export function session() {
  const raw = sessionStorage.getItem(SESSION_KEY);
  return raw ? JSON.parse(raw) : null;
}

// Whether the user may act (create, stop, delete): the API refuses a reader's writes.
export function canAct() {
  const s = session();
  return Boolean(s && s.roles.includes("member"));
}

export function isAdmin() {
  const s = session();
  return Boolean(s && s.roles.includes("admin"));
}

function keep(token, body) {
  const t = body.token;
  const s = {
    token,
    expires: t.expires_at,
    user: { id: t.user.id, name: t.user.name, domain: t.user.domain.name },
    project: { id: t.project.id, name: t.project.name },
    roles: t.roles.map((r) => r.name),
  };
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(s));
  return s;
}

async function issue(auth) {
  const resp = await fetch("/identity/v3/auth/tokens?nocatalog", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ auth }),
  });
  if (!resp.ok) {
    throw new ApiError(resp.status, await reason(resp));
  }
  return keep(resp.headers.get("X-Subject-Token"), await resp.json());
}

// Password sign-in, as the CLI does; scoped to ``project`` (a name) or the user's default project.
export function signIn(user, password, project, domain = "Default") {
  const auth = {
    identity: { methods: ["password"], password: { user: { name: user, domain: { name: domain }, password } } },
  };
  if (project) {
    auth.scope = { project: { name: project, domain: { name: domain } } };
  }
  return issue(auth);
}

// A token for another project the user holds a role in, from the current one (Keystone's token
// method: the new token keeps the old one's expiry).
export function rescope(projectId) {
  const s = session();
  return issue({ identity: { methods: ["token"], token: { id: s.token } }, scope: { project: { id: projectId } } });
}

export async function signOut() {
  const s = session();
  sessionStorage.removeItem(SESSION_KEY);
  if (s) {
    // Revoke the token (best effort: the page forgets it either way).
    await fetch("/identity/v3/auth/tokens", {
      method: "DELETE",
      headers: { "X-Auth-Token": s.token, "X-Subject-Token": s.token },
    }).catch(() => {});
  }
  onSignedOut();
}

async function reason(resp) {
  try {
    const body = await resp.json();
    const fault = body && (body.error || Object.values(body)[0]);
    if (fault && fault.message) {
      return fault.message;
    }
  } catch {
    // not JSON: the status says it
  }
  return `${resp.status} ${resp.statusText}`;
}

// A JSON request with the user's token. ``minPosition``: read what the log held at that position
// at least (X-Stratus-Min-Position, docs/api.md). Answers {status, body, position}.
export async function call(method, path, { body, minPosition } = {}) {
  const s = session();
  const headers = { "X-OpenStack-Nova-API-Version": COMPUTE_VERSION };
  if (s) {
    headers["X-Auth-Token"] = s.token;
  }
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
  }
  if (minPosition) {
    headers["X-Stratus-Min-Position"] = String(minPosition);
  }
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (resp.status === 401 && s) {
    await signOut();
    throw new ApiError(401, "Your session has ended; sign in again.");
  }
  if (!resp.ok) {
    throw new ApiError(resp.status, await reason(resp));
  }
  const text = await resp.text();
  const position = Number(resp.headers.get("X-Stratus-Position")) || null;
  return { status: resp.status, body: text ? JSON.parse(text) : null, position };
}

export async function get(path, options) {
  return (await call("GET", path, options)).body;
}
