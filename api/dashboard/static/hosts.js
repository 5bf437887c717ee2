// Admins only: the compute hosts with their capacity (vCPU, RAM, disk used against total), their
// state and status. A member never reaches this view (app.js), and the API refuses them anyway.

import { get } from "./api.js";
import { h, show, errorText } from "./dom.js";

export function hostsView(main) {
  const tbody = h("tbody");
  const error = h("div");
  show(
    main,
    h("h1", {}, "Hosts"),
    error,
    h("table", { id: "hosts" },
      h("thead", {}, h("tr", {}, ["Host", "State", "Status", "vCPU", "RAM (MB)", "Disk (GB)", "Servers"].map((t) => h("th", {}, t)))),
      tbody),
  );
  get("/v2.1/os-hypervisors/detail").then((body) => {
    tbody.replaceChildren(
      ...body.hypervisors.map((hv) =>
        h(
          "tr",
          {},
          h("td", {}, hv.hypervisor_hostname),
          h("td", {}, hv.state),
          h("td", {}, hv.status),
          h("td", {}, `${hv.vcpus_used} / ${hv.vcpus}`),
          h("td", {}, `${hv.memory_mb_used} / ${hv.memory_mb}`),
          h("td", {}, `${hv.local_gb_used} / ${hv.local_gb}`),
          h("td", {}, hv.running_vms),
        ),
      ),
    );
  }, (e) => error.replaceChildren(errorText(e)));
  return () => {};
}
