// Admins only: the compute services (state up/down, status enabled/disabled, the disabled reason),
// and enabling or disabling a host's nova-compute (Nova 2.53's PUT /os-services/<id>). The list is
// read again after each change, at the position the change was written (X-Stratus-Min-Position).

import { call, get } from "./api.js";
import { h } from "./dom.js";
import { follow } from "./live.js";
import { frame, row, table } from "./tables.js";

export function servicesView(main, context) {
  const services = table("services", ["Binary", "Host", "Zone", "State", "Status", "Disabled reason", "Updated", ""]);
  const fail = frame(main, "Compute services", services.el);

  async function change(service, body) {
    try {
      const done = await call("PUT", `/v2.1/os-services/${service.id}`, { body });
      await load(done.position);
    } catch (e) {
      fail(e);
    }
  }

  function controls(s) {
    if (s.binary !== "nova-compute") {
      return "";
    }
    if (s.status === "disabled") {
      return h("button", { type: "button", "data-action": "enable", onclick: () => change(s, { status: "enabled" }) }, "enable");
    }
    const reason = h("input", { name: "reason", placeholder: "reason", "aria-label": `Why ${s.host} is disabled` });
    return h("span", { class: "actions" }, reason,
      h("button", {
        type: "button",
        "data-action": "disable",
        onclick: () => change(s, reason.value ? { status: "disabled", disabled_reason: reason.value } : { status: "disabled" }),
      }, "disable"));
  }

  async function load(position) {
    const body = await get("/v2.1/os-services", { minPosition: position });
    services.rows(body.services.map((s) =>
      row([s.binary, s.host, s.zone, h("span", { class: `state ${s.state}` }, s.state), s.status,
        s.disabled_reason || "", s.updated_at || "", controls(s)], {
        "data-host": s.host, "data-binary": s.binary, "data-status": s.status,
      }),
    ));
  }
  return follow(context, ["host"], load, fail).stop; // a service's status is its host's
}
