// Admins only: the compute hosts with their capacity (vCPU, RAM, disk used against total, and the
// allocation ratio Placement applies to each), their state (up or down), their status (enabled or
// disabled, with the reason). A member never reaches this view (app.js), and the API refuses them
// anyway. The list is read again on every host, service or resource provider event.

import { get } from "./api.js";
import { h } from "./dom.js";
import { follow } from "./live.js";
import { frame, row, table } from "./tables.js";

// Each provider's allocation ratios by resource class, by provider name (a host's name).
async function ratios() {
  const body = await get("/placement/resource_providers");
  const entries = await Promise.all(
    body.resource_providers.map(async (p) => {
      const inv = (await get(`/placement/resource_providers/${p.uuid}/inventories`)).inventories;
      return [p.name, Object.fromEntries(Object.entries(inv).map(([rc, i]) => [rc, i.allocation_ratio]))];
    }),
  );
  return Object.fromEntries(entries);
}

function used(usedNow, total, ratio) {
  return ratio === undefined ? `${usedNow} / ${total}` : `${usedNow} / ${total} × ${ratio}`;
}

export function hostsView(main, context) {
  const hosts = table("hosts", [
    "Host", "State", "Status", "Disabled reason", "vCPU (× ratio)", "RAM MB (× ratio)", "Disk GB (× ratio)", "Servers",
  ]);
  const fail = frame(main, "Hosts", h("p", { class: "muted" },
    "Used against total; the ratio is Placement's allocation ratio: a host takes up to total × ratio."),
  hosts.el);
  async function read() {
    const [body, byHost] = await Promise.all([get("/v2.1/os-hypervisors/detail"), ratios()]);
    hosts.rows(
      body.hypervisors.map((hv) => {
        const r = byHost[hv.hypervisor_hostname] || {};
        return row([
          hv.hypervisor_hostname,
          hv.state,
          hv.status,
          (hv.service && hv.service.disabled_reason) || "",
          used(hv.vcpus_used, hv.vcpus, r.VCPU),
          used(hv.memory_mb_used, hv.memory_mb, r.MEMORY_MB),
          used(hv.local_gb_used, hv.local_gb, r.DISK_GB),
          hv.running_vms,
        ], { "data-host": hv.hypervisor_hostname });
      }),
    );
  }
  return follow(context, ["host", "resourceprovider", "instance"], read, fail).stop;
}
