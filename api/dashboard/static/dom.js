// Building the page: elements made with text nodes only (no HTML strings, so nothing the API
// answers is ever parsed as markup).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) {
      continue;
    }
    if (key.startsWith("on")) {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      el.append(child instanceof Node ? child : String(child));
    }
  }
  return el;
}

export function show(main, ...children) {
  main.replaceChildren(...children);
}

export function errorText(e) {
  return h("p", { class: "error", role: "alert" }, e.message || String(e));
}
