// Admins only: every project's usage over a period (os-simple-tenant-usage, detailed): its servers
// and the hours of vCPU, RAM and disk they used, with the project's name from Keystone.

import { get } from "./api.js";
import { h } from "./dom.js";
import { follow } from "./live.js";
import { frame, table } from "./tables.js";

const PERIODS = [["1", "the last 24 hours"], ["7", "the last 7 days"], ["30", "the last 30 days"]];

// Nova's times: ISO 8601 without a zone, UTC.
function novaTime(date) {
  return date.toISOString().replace(/Z$/, "");
}

async function projectNames() {
  try {
    const body = await get("/identity/v3/projects");
    return new Map(body.projects.map((p) => [p.id, p.name]));
  } catch {
    return new Map(); // the ids alone, then
  }
}

export function usageView(main, context) {
  const usages = table("usage", ["Project", "Servers", "Running now", "vCPU hours", "RAM MB hours", "Disk GB hours", "Server hours"]);
  const period = h("select", { id: "period", "aria-label": "Period" },
    PERIODS.map(([days, text]) => h("option", { value: days }, text)));
  const fail = frame(main, "Usage of every project", h("p", {}, "Over ", period), usages.el);
  const names = projectNames();

  async function load(position) {
    const end = new Date();
    const start = new Date(end.getTime() - Number(period.value) * 86_400_000);
    const query = `?detailed=1&start=${novaTime(start)}&end=${novaTime(end)}`;
    const [body, known] = await Promise.all([get(`/v2.1/os-simple-tenant-usage${query}`, { minPosition: position }), names]);
    const fixed = (n) => n.toFixed(2);
    const rows = body.tenant_usages.map((u) => {
      const servers = u.server_usages || [];
      return [
        known.get(u.tenant_id) || u.tenant_id,
        servers.length,
        servers.filter((s) => s.state !== "terminated").length,
        fixed(u.total_vcpus_usage),
        fixed(u.total_memory_mb_usage),
        fixed(u.total_local_gb_usage),
        fixed(u.total_hours),
      ];
    });
    usages.rows(rows.length ? rows : [["No usage in this period.", "", "", "", "", "", ""]]);
  }
  period.addEventListener("change", () => load().catch(fail));
  return follow(context, ["instance"], load, fail).stop;
}
