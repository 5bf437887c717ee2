// Admins only: Placement's resource providers, each with its inventories (total, reserved,
// allocation ratio) and its usages, as GET /placement/resource_providers/<uuid>/{inventories,usages}
// answer them.

import { get } from "./api.js";
import { h } from "./dom.js";
import { follow } from "./live.js";
import { frame, ratio, row, table } from "./tables.js";

async function provider(p, position) {
  const [inventories, usages] = await Promise.all([
    get(`/placement/resource_providers/${p.uuid}/inventories`, { minPosition: position }),
    get(`/placement/resource_providers/${p.uuid}/usages`, { minPosition: position }),
  ]);
  return Object.entries(inventories.inventories).map(([rc, inv]) => {
    const capacity = Math.floor((inv.total - inv.reserved) * inv.allocation_ratio);
    const used = usages.usages[rc] || 0;
    return row([p.name, rc, inv.total, inv.reserved, inv.allocation_ratio, ratio(used, capacity)], {
      "data-provider": p.name,
      "data-class": rc,
    });
  });
}

export function placementView(main, context) {
  const providers = table("providers", ["Provider", "Resource class", "Total", "Reserved", "Ratio", "Used / capacity"]);
  const fail = frame(main, "Placement", h("p", { class: "muted" },
    "Capacity is (total − reserved) × allocation ratio; used is the sum of the consumers' allocations."),
  providers.el);
  async function read(position) {
    const body = await get("/placement/resource_providers", { minPosition: position });
    const rows = await Promise.all(body.resource_providers.map((p) => provider(p, position)));
    providers.rows(rows.flat());
  }
  // read again on every provider's, host's, consumer's or server's event (inventories, allocations)
  return follow(context, ["resourceprovider", "host", "consumer", "instance"], read, fail).stop;
}
