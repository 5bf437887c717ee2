// A server's serial console in the browser: xterm.js (vendored: xterm.mjs 6.0.0 and xterm.css, its
// licence in xterm.LICENSE.txt) over the websocket of `stratus serialproxy` (docs/consoles.md). The
// page asks the API for a one-use console URL (POST /servers/<id>/remote-consoles, Nova's), opens
// it, writes the guest's bytes to the terminal and sends the keys typed. Leaving the page closes
// the websocket, and the proxy closes the host's side.
//
// The page's Content-Security-Policy allows no inline style, and xterm.js writes its dimensions and
// colours into <style> elements it creates: the browser refuses those, so their text is mirrored
// into constructed style sheets (document.adoptedStyleSheets), which the policy does not govern and
// which no markup can inject.

import { Terminal } from "./xterm.mjs";
import { call, get } from "./api.js";
import { h, show, errorText } from "./dom.js";

// xterm.js' <style> elements under ``root``, as constructed sheets; the function undoes it.
function mirrorStyles(root) {
  const sheets = new Map();
  const sync = () => {
    for (const el of root.querySelectorAll("style")) {
      if (!sheets.has(el)) {
        const sheet = new CSSStyleSheet();
        sheets.set(el, sheet);
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
      }
      sheets.get(el).replaceSync(el.textContent);
    }
  };
  const observer = new MutationObserver(sync);
  observer.observe(root, { subtree: true, childList: true, characterData: true });
  sync();
  return () => {
    observer.disconnect();
    const mine = new Set(sheets.values());
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => !mine.has(s));
  };
}

export function consoleView(main, context, id) {
  const status = h("p", { id: "console-status", class: "muted" }, "asking for a console…");
  const screen = h("div", { id: "terminal", class: "terminal" });
  const title = h("h1", {}, "Serial console");
  show(
    main,
    h("p", {}, h("a", { href: `#/servers/${id}` }, "← The server")),
    title,
    status,
    screen,
    h("p", { class: "muted" }, "The guest's first serial port. Another console opened on it takes it over (as virsh console --force)."),
  );
  const unmirror = mirrorStyles(screen);
  const terminal = new Terminal({ convertEol: false, cursorBlink: true, rows: 24, cols: 80, fontSize: 14 });
  terminal.open(screen);
  let socket = null;
  let left = false;

  function state(text, name) {
    status.textContent = text;
    status.dataset.state = name;
  }

  (async () => {
    const server = (await get(`/v2.1/servers/${id}`)).server;
    title.textContent = `Serial console of ${server.name}`;
    const body = { remote_console: { protocol: "serial", type: "serial" } };
    const answer = await call("POST", `/v2.1/servers/${id}/remote-consoles`, { body });
    if (left) {
      return;
    }
    socket = new WebSocket(answer.body.remote_console.url);
    socket.binaryType = "arraybuffer";
    state("connecting…", "connecting");
    socket.addEventListener("open", () => {
      state("connected", "open");
      terminal.focus();
    });
    socket.addEventListener("message", (ev) =>
      terminal.write(typeof ev.data === "string" ? ev.data : new Uint8Array(ev.data)),
    );
    socket.addEventListener("close", (ev) => {
      if (!left) {
        state(`closed${ev.code === 1006 ? " (the proxy refused it or went away)" : ""}`, "closed");
      }
    });
    const encoder = new TextEncoder();
    terminal.onData((data) => {
      if (socket.readyState === WebSocket.OPEN) {
        socket.send(encoder.encode(data));
      }
    });
  })().catch((e) => {
    state("", "error");
    status.replaceChildren(errorText(e));
  });

  return () => {
    left = true;
    if (socket) {
      socket.close();
    }
    terminal.dispose();
    unmirror();
  };
}
