// Admins only: every migration (cold, live, resize, evacuation) with its hosts and status, newest
// first, as Nova's GET /os-migrations answers it.

import { get } from "./api.js";
import { h } from "./dom.js";
import { follow } from "./live.js";
import { frame, table } from "./tables.js";

export function migrationsView(main, context) {
  const migrations = table("migrations", ["Server", "Type", "Status", "From", "To", "Flavor", "Created", "Updated"]);
  const fail = frame(main, "Migrations", migrations.el);
  async function read(position) {
    const body = await get("/v2.1/os-migrations", { minPosition: position });
    const rows = body.migrations.map((m) => [
      h("a", { href: `#/servers/${m.instance_uuid}`, class: "mono" }, m.instance_uuid),
      m.migration_type,
      m.status,
      m.source_compute || "",
      m.dest_compute || "",
      m.old_instance_type_id === m.new_instance_type_id ? "" : `${m.old_instance_type_id} → ${m.new_instance_type_id}`,
      m.created_at,
      m.updated_at || "",
    ]);
    migrations.rows(rows.length ? rows : [["No migrations.", "", "", "", "", "", "", ""]]);
  }
  return follow(context, ["instance"], read, fail).stop; // a migration is its server's
}
