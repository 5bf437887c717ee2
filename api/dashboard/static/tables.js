// Tables for the admin and auditor views: a header row and rows of text cells, built with dom.js
// (text nodes only), and a view's frame (title, an error line, the content).

import { h, show, errorText } from "./dom.js";

// A table with ``id`` and its header; fill its body with ``rows``.
export function table(id, headers) {
  const body = h("tbody");
  const el = h("table", { id }, h("thead", {}, h("tr", {}, headers.map((t) => h("th", {}, t)))), body);
  return {
    el,
    rows(rows) {
      body.replaceChildren(...rows.map((cells) => (cells instanceof Node ? cells : row(cells))));
    },
  };
}

// A row of cells: text, or an element (a button, say).
export function row(cells, attrs = {}) {
  return h("tr", attrs, cells.map((c) => (c instanceof Node && c.tagName === "TD" ? c : h("td", {}, c ?? ""))));
}

// A view's frame: its title and an error line above ``content``; ``fail(e)`` shows an error there.
export function frame(main, title, ...content) {
  const error = h("div", { class: "view-error" });
  show(main, h("h1", {}, title), error, ...content);
  return (e) => error.replaceChildren(errorText(e));
}

// "used / total (percent)"
export function ratio(used, total) {
  const percent = total ? ` (${Math.round((100 * used) / total)}%)` : "";
  return `${used} / ${total}${percent}`;
}
