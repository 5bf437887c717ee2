// Server groups: the project's groups with their policy and members (servers join one when created
// with the ``group`` scheduler hint); members create and delete them. Live on the groups' events.

import { call, canAct, get } from "./api.js";
import { h, show, errorText } from "./dom.js";
import { actionForm, deleteButton, follow, onRowAction, table } from "./live.js";

const POLICIES = ["anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity"];

export function groupsView(main, context) {
  const act = canAct();
  const error = h("div");
  const { el, tbody } = table("groups", ["Name", "Policy", "Members", act ? "Actions" : null]);
  const failed = (e) => error.replaceChildren(errorText(e));

  function row(g) {
    const members = g.members.map((id) => h("a", { href: `#/servers/${id}`, class: "mono", title: id }, id.slice(0, 8)));
    return h(
      "tr",
      { "data-key": g.id, "data-name": g.name },
      h("td", {}, g.name),
      h("td", {}, g.policy),
      h("td", { class: "members", "data-count": g.members.length }, members.length ? members : h("span", { class: "muted" }, "none")),
      act ? h("td", { class: "actions" }, deleteButton()) : null,
    );
  }

  async function read(position) {
    const body = await get("/v2.1/os-server-groups", { minPosition: position });
    tbody.replaceChildren(...body.server_groups.sort((a, b) => (a.name < b.name ? -1 : 1)).map(row));
    error.replaceChildren();
  }

  const live = follow(context, ["servergroup"], read, failed);
  const reread = (written) => live.reread(written.position);
  const create = act
    ? actionForm(
        { id: "group-create" },
        [
          h("h2", {}, "Create a server group"),
          h("label", {}, "Name", h("input", { name: "name", required: true, maxlength: 255 })),
          h("label", {}, "Policy", h("select", { name: "policy" }, POLICIES.map((p) => h("option", { value: p }, p)))),
          h("button", { type: "submit" }, "Create"),
        ],
        async (f) => {
          const group = { name: f.get("name"), policy: f.get("policy") };
          reread(await call("POST", "/v2.1/os-server-groups", { body: { server_group: group } }));
        },
      )
    : null;
  onRowAction(tbody, async (action, id) => reread(await call("DELETE", `/v2.1/os-server-groups/${id}`)), failed);
  show(main, h("h1", {}, "Server groups"), create, error, el);
  return live.stop;
}
