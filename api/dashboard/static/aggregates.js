// Admins only: host aggregates (name, zone, hosts, metadata) and the availability zones with their
// hosts and services' state, as Nova's os-aggregates and os-availability-zone/detail answer them.

import { get } from "./api.js";
import { h } from "./dom.js";
import { follow } from "./live.js";
import { frame, table } from "./tables.js";

function zoneRows(zones) {
  const rows = [];
  for (const zone of zones) {
    const state = zone.zoneState && zone.zoneState.available ? "available" : "not available";
    const hosts = Object.entries(zone.hosts || {});
    if (hosts.length === 0) {
      rows.push([zone.zoneName, state, "", "", ""]);
    }
    for (const [host, services] of hosts) {
      for (const [service, s] of Object.entries(services)) {
        rows.push([zone.zoneName, state, host, service, `${s.active ? "enabled" : "disabled"}, ${s.available ? "up" : "down"}`]);
      }
    }
  }
  return rows;
}

export function aggregatesView(main, context) {
  const aggregates = table("aggregates", ["Name", "Zone", "Hosts", "Metadata", "ID"]);
  const zones = table("zones", ["Zone", "State", "Host", "Service", "Service state"]);
  const fail = frame(main, "Aggregates and zones", h("h2", {}, "Host aggregates"), aggregates.el,
    h("h2", {}, "Availability zones"), zones.el);
  async function read(position) {
    const [body, zoneInfo] = await Promise.all([
      get("/v2.1/os-aggregates", { minPosition: position }),
      get("/v2.1/os-availability-zone/detail", { minPosition: position }),
    ]);
    aggregates.rows(body.aggregates.map((a) => [
      a.name,
      a.availability_zone || "",
      (a.hosts || []).join(", "),
      Object.entries(a.metadata || {}).map(([k, v]) => `${k}=${v}`).join(", "),
      a.uuid || String(a.id),
    ]));
    zones.rows(zoneRows(zoneInfo.availabilityZoneInfo));
  }
  // read again on every aggregate's or host's event (a zone's hosts, a service disabled)
  return follow(context, ["hostaggregate", "host"], read, fail).stop;
}
