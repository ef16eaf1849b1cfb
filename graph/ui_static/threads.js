// The caller's threads: listed newest first, searched by title, renamed, deleted after a confirmation;
// the open one is in the page's address (?thread=ID), so a reload or a shared link opens it again.
import { $, api, el, failed, hooks, state } from "./dom.js";
import { t } from "./i18n.js";

let listed = [];

export function titleOf(thread) {
  if (typeof thread.metadata?.title === "string" && thread.metadata.title) return thread.metadata.title;
  const messages = thread.values?.messages || [];
  const first = messages.find((m) => m.type === "human" && typeof m.content === "string");
  return first ? first.content.slice(0, 60) : t("untitled");
}

export function threadInAddress() {
  return new URL(location.href).searchParams.get("thread");
}

// ``push``: a new entry in the browser's history (opening a thread), else the current one is replaced.
export function setThread(id, { push = false } = {}) {
  state.threadId = id;
  if (id) document.body.dataset.thread = id;
  else delete document.body.dataset.thread;
  const url = new URL(location.href);
  if (id) url.searchParams.set("thread", id);
  else url.searchParams.delete("thread");
  if (url.href !== location.href) history[push ? "pushState" : "replaceState"]({ thread: id }, "", url);
  const current = listed.find((thread) => thread.thread_id === id);
  $("topbar-title").textContent = current ? titleOf(current) : t("untitled");
}

export async function listThreads() {
  listed = await api("/threads/search", {
    method: "POST",
    body: { limit: 100, sort_by: "updated_at", sort_order: "desc" },
  });
  showThreads();
}

export function showThreads() {
  const query = $("thread-search").value.trim().toLowerCase();
  const list = $("threads");
  list.replaceChildren();
  const shown = listed.filter((thread) => !query || titleOf(thread).toLowerCase().includes(query));
  for (const thread of shown) list.append(threadItem(thread));
  if (!shown.length) list.append(el("li", { class: "none", text: t("noThreads") }));
  const current = listed.find((thread) => thread.thread_id === state.threadId);
  if (current) $("topbar-title").textContent = titleOf(current);
}

function threadItem(thread) {
  const title = titleOf(thread);
  const when = thread.updated_at ? new Date(thread.updated_at).toLocaleString() : "";
  const open = el("button", { type: "button", class: "thread", onclick: () => hooks.openThread(thread.thread_id) },
    el("span", { class: "thread-title", text: title }), el("span", { class: "thread-when", text: when }));
  if (thread.thread_id === state.threadId) open.setAttribute("aria-current", "true");
  const item = el("li", { "data-thread": thread.thread_id }, open,
    el("span", { class: "thread-tools" },
      el("button", { type: "button", class: "rename-thread", text: "✎", "aria-label": `${t("rename")}: ${title}`,
        onclick: () => rename(item, thread) }),
      el("button", { type: "button", class: "delete-thread", text: "✕", "aria-label": `${t("delete")}: ${title}`,
        onclick: () => confirmDelete(item, thread) })));
  return item;
}

function rename(item, thread) {
  const field = el("input", { type: "text", class: "thread-rename", name: "thread-title", maxlength: "80",
    "aria-label": t("renameThread") });
  field.value = titleOf(thread);
  let done = false;
  const finish = async (save) => {
    if (done) return;
    done = true;
    const title = field.value.trim();
    if (save && title && title !== titleOf(thread)) {
      try {
        await api(`/threads/${thread.thread_id}`, { method: "PATCH", body: { metadata: { title } } });
        thread.metadata = { ...(thread.metadata || {}), title };
      } catch (error) {
        failed(error);
      }
    }
    showThreads();
  };
  field.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); finish(true); }
    if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); finish(false); }
  });
  field.addEventListener("blur", () => finish(true));
  item.replaceChildren(field);
  field.focus();
  field.select();
}

function confirmDelete(item, thread) {
  const keep = el("button", { type: "button", class: "keep-thread", text: t("cancel"), onclick: () => showThreads() });
  const gone = el("button", { type: "button", class: "confirm-delete", text: t("delete"), onclick: async () => {
    try {
      await api(`/threads/${thread.thread_id}`, { method: "DELETE" });
    } catch (error) {
      failed(error);
    }
    listed = listed.filter((other) => other.thread_id !== thread.thread_id);
    if (thread.thread_id === state.threadId) hooks.newThread();
    showThreads();
  } });
  item.replaceChildren(el("div", { class: "thread-confirm", role: "group", "aria-label": t("deleteThread") },
    el("span", { text: `${t("deleteThread")} ${titleOf(thread)}` }), el("div", {}, gone, keep)));
  keep.focus();
}
