// The documents area: what the knowledge base holds for the caller (title, file, chunks, groups, when),
// searched by title or file; for roles that may change it, files added by drag and drop or a file input
// with their upload's progress, a delete to the trash and a restore from it.
import { $, api, el, failed, headers, hooks } from "./dom.js";
import { t } from "./i18n.js";

let back = null;
let searchTimer = null;

export async function showDocuments(onBack) {
  back = onBack;
  const view = $("documents-view");
  const search = el("input", { type: "search", id: "doc-search", name: "doc-search", autocomplete: "off" });
  search.addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(() => load(search.value), 250); });
  view.replaceChildren(
    el("div", { class: "doc-tools" },
      el("h2", { id: "documents-title", text: t("documents") }),
      el("button", { type: "button", id: "documents-back", text: t("back"), onclick: () => { view.hidden = true; back?.(); } })),
    el("div", { class: "doc-tools" }, el("label", { for: "doc-search", text: t("docSearch") }), search),
    el("div", { id: "doc-upload" }),
    el("div", { id: "doc-list" }),
    el("div", { id: "doc-trash" }),
  );
  view.hidden = false;
  await load("");
  search.focus();
}

async function load(query) {
  let data;
  try {
    data = await api(`/ui/api/documents${query ? `?q=${encodeURIComponent(query)}` : ""}`);
  } catch (error) {
    failed(error);
    return;
  }
  $("doc-list").replaceChildren(table(data.documents, data.may_change));
  if (data.may_change && !$("doc-upload").children.length) $("doc-upload").replaceChildren(dropzone());
  if (data.may_change) await loadTrash();
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

function table(documents, mayChange) {
  if (!documents.length) return el("p", { class: "none", text: t("noDocs") });
  const head = el("tr", {}, ...["docTitle", "docFile", "docChunks", "docGroups", "docWhen", "docBy"].map((k) => el("th", { scope: "col", text: t(k) })));
  if (mayChange) head.append(el("th", { scope: "col", text: t("delete") }));
  const body = el("tbody");
  for (const doc of documents) {
    // data-label: on a phone each row is a card, each cell saying what it is
    const cell = (key, text) => el("td", { "data-label": t(key), text });
    const row = el("tr", { "data-source": doc.source }, cell("docTitle", doc.title), cell("docFile", doc.source),
      cell("docChunks", String(doc.chunks)), cell("docGroups", doc.groups.join(", ")),
      cell("docWhen", when(doc.ingested_at)), cell("docBy", doc.added_by || "—"));
    if (mayChange) {
      const cell = el("td", { class: "doc-actions" });
      cell.append(el("button", { type: "button", class: "delete-doc", text: t("delete"), "aria-label": `${t("delete")}: ${doc.source}`,
        onclick: () => confirmDelete(cell, doc) }));
      row.append(cell);
    }
    body.append(row);
  }
  return el("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": t("documents") },
    el("table", { class: "docs-table" }, el("thead", {}, head), body));
}

function confirmDelete(cell, doc) {
  const yes = el("button", { type: "button", class: "danger confirm-delete-doc", text: t("delete"), onclick: async () => {
    try {
      await api(`/ui/api/documents/${encodeURIComponent(doc.source)}`, { method: "DELETE" });
      $("status").textContent = `${doc.source}: ${t("deleted")}`;
    } catch (error) {
      failed(error);
    }
    await load($("doc-search").value);
  } });
  const no = el("button", { type: "button", text: t("cancel"), onclick: () => load($("doc-search").value) });
  cell.replaceChildren(el("span", { text: t("deleteDoc2", { doc: doc.source }) }), yes, no);
  no.focus();
}

async function loadTrash() {
  let data;
  try {
    data = await api("/ui/api/trash");
  } catch (error) {
    failed(error);
    return;
  }
  if (!data.trash.length) {
    $("doc-trash").replaceChildren();
    return;
  }
  const list = el("ul", { class: "trash-list" });
  for (const item of data.trash) {
    list.append(el("li", { "data-source": item.source }, el("span", { text: `${item.source} (${when(item.deleted_at)}) ` }),
      el("button", { type: "button", class: "restore-doc", text: t("restore"), "aria-label": `${t("restore")}: ${item.source}`,
        onclick: async () => {
          try {
            await api(`/ui/api/trash/${item.id}/restore`, { method: "POST" });
            $("status").textContent = `${item.source}: ${t("restored")}`;
          } catch (error) {
            failed(error);
          }
          await load($("doc-search").value);
        } })));
  }
  $("doc-trash").replaceChildren(el("h3", { text: t("trash") }), list);
}

function dropzone() {
  const files = el("input", { type: "file", id: "doc-file", name: "doc-file", multiple: true,
    accept: ".txt,.md,.markdown,.html,.htm,.pdf,.docx" });
  const groups = el("input", { type: "text", id: "doc-groups", name: "doc-groups", autocomplete: "off" });
  const uploads = el("ul", { class: "uploads", "aria-live": "polite" });
  const zone = el("div", { class: "dropzone" },
    el("label", { for: "doc-file", text: `${t("upload")}: ${t("uploadHint")}` }), files,
    el("label", { for: "doc-groups", text: t("uploadGroups") }), groups, uploads);
  const send = (list) => { for (const file of list) upload(file, groups.value, uploads); };
  files.addEventListener("change", () => { send([...files.files]); files.value = ""; });
  zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => { event.preventDefault(); zone.classList.remove("over"); send([...event.dataTransfer.files]); });
  return zone;
}

// XMLHttpRequest rather than fetch: it reports the upload's progress.
function upload(file, groups, uploads) {
  const bar = el("progress", { max: "100", value: "0", "aria-label": `${t("uploading")}: ${file.name}` });
  const note = el("span", { class: "upload-note", text: ` ${t("uploading")}` });
  const item = el("li", { class: "upload", "data-name": file.name }, el("span", { text: `${file.name} ` }), bar, note);
  uploads.append(item);
  const request = new XMLHttpRequest();
  const query = new URLSearchParams({ name: file.name, groups: groups || "" });
  request.open("POST", `/ui/api/documents?${query}`);
  for (const [key, value] of Object.entries(headers({ "Content-Type": "application/octet-stream" }))) request.setRequestHeader(key, value);
  request.upload.addEventListener("progress", (event) => { if (event.lengthComputable) bar.value = String(Math.round((100 * event.loaded) / event.total)); });
  request.addEventListener("load", async () => {
    let data = {};
    try { data = JSON.parse(request.responseText); } catch { data = {}; }
    if (request.status === 401) { hooks.signOut?.(t("expired")); return; }
    bar.value = "100";
    item.dataset.status = request.status === 200 ? "done" : "error";
    const added = data.status === "updated" ? t("replaced") : data.status === "unchanged" ? t("unchanged") : t("uploaded");
    note.textContent = request.status === 200 ? ` ${added}` : ` ${t("skipped")}: ${data.detail || request.status}`;
    await load($("doc-search").value);
  });
  request.addEventListener("error", () => { item.dataset.status = "error"; note.textContent = ` ${t("failed")}`; });
  request.send(file);
}
