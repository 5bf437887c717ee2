// Key pairs: the user's own (Nova's key pairs belong to a user, whatever the role: a reader manages
// theirs too). Create one (the API generates it and answers its private key once: shown here once,
// with a download, and never kept), import a public key, delete.

import { call, get } from "./api.js";
import { h, show, errorText } from "./dom.js";
import { actionForm, deleteButton, follow, onRowAction, table } from "./live.js";

// The private key of the pair just created, shown until dismissed; only in this element's text.
function secret(name, privateKey) {
  const url = URL.createObjectURL(new Blob([privateKey], { type: "application/x-pem-file" }));
  const box = h(
    "div",
    { class: "card secret", id: "private-key" },
    h("h2", {}, `Private key of ${name}`),
    h("p", {}, "Save it now: this is the only time it is shown. Stratus keeps only the public key."),
    h("pre", { class: "mono" }, privateKey),
    h("a", { href: url, download: `${name}.pem`, class: "button" }, "Download"),
    " ",
    h("button", { type: "button", onclick: () => { URL.revokeObjectURL(url); box.remove(); } }, "Done"),
  );
  return box;
}

export function keypairsView(main, context) {
  const error = h("div");
  const revealed = h("div");
  const { el, tbody } = table("keypairs", ["Name", "Type", "Fingerprint", "Actions"]);
  const failed = (e) => error.replaceChildren(errorText(e));

  function row({ keypair: k }) {
    return h(
      "tr",
      { "data-key": k.name },
      h("td", {}, k.name),
      h("td", {}, k.type),
      h("td", { class: "mono" }, k.fingerprint),
      h("td", { class: "actions" }, deleteButton()),
    );
  }

  async function read(position) {
    const body = await get("/v2.1/os-keypairs", { minPosition: position });
    tbody.replaceChildren(...body.keypairs.map(row));
    error.replaceChildren();
  }

  const live = follow(context, ["keypair"], read, failed);
  const reread = (written) => live.reread(written.position);
  const create = actionForm(
    { id: "keypair-create" },
    [
      h("h2", {}, "Create a key pair"),
      h("label", {}, "Name", h("input", { name: "name", required: true, maxlength: 255 })),
      h("button", { type: "submit" }, "Create"),
    ],
    async (f) => {
      const written = await call("POST", "/v2.1/os-keypairs", { body: { keypair: { name: f.get("name") } } });
      const k = written.body.keypair;
      revealed.replaceChildren(secret(k.name, k.private_key));
      reread(written);
    },
  );
  const importForm = actionForm(
    { id: "keypair-import" },
    [
      h("h2", {}, "Import a public key"),
      h("label", {}, "Name", h("input", { name: "name", required: true, maxlength: 255 })),
      h("label", { class: "wide" }, "Public key (OpenSSH)", h("textarea", { name: "public_key", required: true, rows: 3 })),
      h("button", { type: "submit" }, "Import"),
    ],
    async (f) => {
      const keypair = { name: f.get("name"), public_key: f.get("public_key").trim() };
      reread(await call("POST", "/v2.1/os-keypairs", { body: { keypair } }));
    },
  );
  onRowAction(
    tbody,
    async (action, name) => reread(await call("DELETE", `/v2.1/os-keypairs/${encodeURIComponent(name)}`)),
    failed,
  );
  show(main, h("h1", {}, "Key pairs"), revealed, h("div", { class: "forms" }, create, importForm), error, el);
  return live.stop;
}
