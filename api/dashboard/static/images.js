// Images: what Glance lists for this user (the project's own, public, shared and community images),
// with their status and size. Members upload one (Glance's create, then its data with PUT .../file,
// with a progress bar) and delete their project's own; admins may delete any and make one public.

import { call, canAct, get, isAdmin, session, signOut } from "./api.js";
import { h, show, errorText } from "./dom.js";
import { actionForm, bytes, deleteButton, follow, onRowAction, table } from "./live.js";

const DISK_FORMATS = ["raw", "qcow2", "iso", "vmdk", "vdi", "vhd", "vhdx", "ami", "aki", "ari", "ploop"];

// Every page of Glance's list (``next`` is relative to the image endpoint, /image).
async function allImages(position) {
  const images = [];
  let path = "/image/v2/images?limit=1000";
  while (path) {
    const body = await get(path, { minPosition: position });
    images.push(...body.images);
    path = body.next ? `/image${body.next}` : null;
  }
  return images;
}

// PUT the file as the image's data; ``onProgress(loaded, total)`` as the browser sends it (fetch
// reports no upload progress: XMLHttpRequest does). Answers the write's log position.
function upload(imageId, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", `/image/v2/images/${imageId}/file`);
    xhr.setRequestHeader("X-Auth-Token", session().token);
    xhr.setRequestHeader("Content-Type", "application/octet-stream");
    xhr.upload.addEventListener("progress", (ev) => onProgress(ev.loaded, ev.lengthComputable ? ev.total : file.size));
    xhr.addEventListener("load", () => {
      if (xhr.status === 401) {
        signOut();
        reject(new Error("Your session has ended; sign in again."));
      } else if (xhr.status >= 300) {
        let message = `${xhr.status} ${xhr.statusText}`;
        try {
          message = Object.values(JSON.parse(xhr.responseText))[0].message || message;
        } catch {
          // not JSON: the status says it
        }
        reject(new Error(message));
      } else {
        onProgress(file.size, file.size);
        resolve(Number(xhr.getResponseHeader("X-Stratus-Position")) || null);
      }
    });
    xhr.addEventListener("error", () => reject(new Error("The upload was interrupted.")));
    xhr.send(file);
  });
}

function uploadForm(admin, reread) {
  const progress = h("progress", { id: "upload-progress", max: 1, value: 0, hidden: true });
  const percent = h("span", { id: "upload-percent", class: "muted" });
  const visibilities = ["private", "shared", "community", ...(admin ? ["public"] : [])];
  return actionForm(
    { id: "image-upload" },
    [
      h("h2", {}, "Upload an image"),
      h("label", {}, "Name", h("input", { name: "name", required: true, maxlength: 255 })),
      h("label", {}, "Disk format", h("select", { name: "disk_format" }, DISK_FORMATS.map((f) => h("option", { value: f }, f)))),
      h("label", {}, "Visibility", h("select", { name: "visibility" }, visibilities.map((v) => h("option", { value: v }, v)))),
      h("label", {}, "File", h("input", { name: "file", type: "file", required: true })),
      h("button", { type: "submit" }, "Upload"),
      h("div", { class: "progress" }, progress, " ", percent),
    ],
    async (f) => {
      const file = f.get("file");
      const spec = { name: f.get("name"), disk_format: f.get("disk_format"), container_format: "bare", visibility: f.get("visibility") };
      const created = await call("POST", "/image/v2/images", { body: spec });
      reread(created.position); // listed (queued) at once, then active once its data is in
      progress.hidden = false;
      const shown = (loaded, total) => {
        progress.max = Math.max(total, 1);
        progress.value = loaded;
        percent.textContent = `${Math.floor((100 * loaded) / Math.max(total, 1))} % of ${bytes(total)}`;
      };
      shown(0, file.size);
      reread(await upload(created.body.id, file, shown));
    },
  );
}

export function imagesView(main, context) {
  const admin = isAdmin();
  const act = canAct();
  const project = session().project.id;
  const error = h("div");
  const { el, tbody } = table("images", ["Name", "Status", "Visibility", "Size", "Format", "Owner", act ? "Actions" : null]);
  const failed = (e) => error.replaceChildren(errorText(e));
  // Glance lets an image's owner (a member of its project) or an admin delete it, unless protected.
  const deletable = (i) => act && !i.protected && (admin || i.owner === project);

  function row(i) {
    return h(
      "tr",
      { "data-key": i.id, "data-name": i.name || "", "data-status": i.status },
      h("td", {}, i.name || h("span", { class: "muted" }, i.id)),
      h("td", { class: `status ${i.status}` }, i.status),
      h("td", {}, i.visibility),
      h("td", {}, bytes(i.size)),
      h("td", {}, i.disk_format || ""),
      h("td", { class: "mono" }, i.owner === project ? "this project" : i.owner || ""),
      act ? h("td", { class: "actions" }, deletable(i) ? deleteButton() : null) : null,
    );
  }

  async function read(position) {
    const images = await allImages(position);
    images.sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
    tbody.replaceChildren(...images.map(row));
    error.replaceChildren();
  }

  const live = follow(context, ["image"], read, failed);
  const reread = (position) => live.reread(position);
  onRowAction(tbody, async (action, id) => reread((await call("DELETE", `/image/v2/images/${id}`)).position), failed);
  show(main, h("h1", {}, "Images"), act ? uploadForm(admin, reread) : null, error, el);
  return live.stop;
}
