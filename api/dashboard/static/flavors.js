// Flavors: every flavor the API lists for this user (for admins, the private ones too), with their
// sizes; admins create and delete them. Live: a flavor's events (auditors') make the list read again.

import { call, get, isAdmin } from "./api.js";
import { h, show, errorText } from "./dom.js";
import { actionForm, deleteButton, follow, onRowAction, table } from "./live.js";

function createForm(done) {
  const number = (name, label, min, value) =>
    h("label", {}, label, h("input", { name, type: "number", min, value, required: true }));
  return actionForm(
    { id: "flavor-create" },
    [
      h("h2", {}, "Create a flavor"),
      h("label", {}, "Name", h("input", { name: "name", required: true, maxlength: 255 })),
      number("vcpus", "vCPUs", 1, 1),
      number("ram", "RAM (MB)", 1, 512),
      number("disk", "Disk (GB)", 0, 1),
      h("label", { class: "check" }, h("input", { name: "public", type: "checkbox", checked: true }), "Public"),
      h("button", { type: "submit" }, "Create"),
    ],
    (f) =>
      done(call("POST", "/v2.1/flavors", {
        body: {
          flavor: {
            name: f.get("name"),
            vcpus: Number(f.get("vcpus")),
            ram: Number(f.get("ram")),
            disk: Number(f.get("disk")),
            "os-flavor-access:is_public": f.get("public") === "on",
          },
        },
      })),
  );
}

export function flavorsView(main, context) {
  const admin = isAdmin();
  const error = h("div");
  const { el, tbody } = table("flavors", [
    "Name", "vCPUs", "RAM (MB)", "Disk (GB)", "Ephemeral (GB)", "Swap (MB)", "Public", admin ? "Actions" : null,
  ]);
  const failed = (e) => error.replaceChildren(errorText(e));

  function row(f) {
    return h(
      "tr",
      { "data-key": f.id, "data-name": f.name },
      h("td", {}, f.name),
      h("td", {}, f.vcpus),
      h("td", {}, f.ram),
      h("td", {}, f.disk),
      h("td", {}, f["OS-FLV-EXT-DATA:ephemeral"] ?? 0),
      h("td", {}, f.swap || 0),
      h("td", {}, f["os-flavor-access:is_public"] === false ? "no" : "yes"),
      admin ? h("td", { class: "actions" }, deleteButton()) : null,
    );
  }

  async function read(position) {
    // an admin lists the private flavors too (Nova's is_public=none, refused to others)
    const body = await get(`/v2.1/flavors/detail${admin ? "?is_public=none" : ""}`, { minPosition: position });
    const flavors = body.flavors.sort((a, b) => a.vcpus - b.vcpus || a.ram - b.ram || (a.name < b.name ? -1 : 1));
    tbody.replaceChildren(...flavors.map(row));
    error.replaceChildren();
  }

  const live = follow(context, ["flavor"], read, failed);
  const reread = async (written) => live.reread((await written).position);
  onRowAction(tbody, (action, id) => reread(call("DELETE", `/v2.1/flavors/${encodeURIComponent(id)}`)), failed);
  show(main, h("h1", {}, "Flavors"), admin ? createForm(reread) : null, error, el);
  return live.stop;
}
