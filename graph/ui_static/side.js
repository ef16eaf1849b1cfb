// The panel beside the conversation (a full-screen sheet on a phone): a cited passage, or the memories.
import { $, SignedOut, api, el, failed } from "./dom.js";
import { t } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";

const passages = new Map(); // chunk id -> Promise of {id, source, title, heading, text} or null

export function openSide(title, ...content) {
  $("side-title").textContent = title;
  $("side-body").replaceChildren(...content);
  $("side").hidden = false;
  $("close-side").focus();
}

export function closeSide() {
  $("side").hidden = true;
  $("question").focus();
}

// A cited passage as the caller may read it (null when they may not), asked once per page.
export function passageInfo(chunk) {
  if (!passages.has(chunk)) {
    passages.set(chunk, api(`/ui/api/passages/${encodeURIComponent(chunk)}`).catch(() => null));
  }
  return passages.get(chunk);
}

// Where a passage sits: its section (without the document's title it repeats) and its file.
export function placeOf(info) {
  let heading = info.heading || "";
  if (info.title && heading.startsWith(info.title)) heading = heading.slice(info.title.length).replace(/^\s*>\s*/, "");
  return [heading, info.source].filter(Boolean).join(" · ");
}

export function forgetPassages() {
  passages.clear();
}

export async function showPassage(chunk) {
  const found = await passageInfo(chunk);
  if (!found) {
    passages.delete(chunk); // it may become readable (or the token valid) later
    openSide(t("passage"), el("p", { text: t("noPassage") }));
    return;
  }
  const body = el("div", { class: "passage" });
  body.append(renderMarkdown(found.text));
  openSide(found.title || `${t("passage")}: ${found.id}`, el("p", { class: "source", text: placeOf(found) }), body);
}

export async function showMemories() {
  let data;
  try {
    data = await api("/ui/api/memories");
  } catch (error) {
    if (!(error instanceof SignedOut)) openSide(t("memories"), el("p", { text: t("noMemory") }));
    return;
  }
  // What holds about the user first; the questions they asked (interaction history) in a list of their own.
  const kept = el("ul", { class: "memories" });
  const asked = el("ul", { class: "history" });
  for (const memory of data.memories) {
    const list = memory.kind === "history" ? asked : kept;
    list.append(el("li", { class: "memory" }, el("span", { text: memory.content }),
      el("button", { type: "button", text: t("delete"), "aria-label": `${t("delete")}: ${memory.content}`,
        onclick: () => memoryAction(`/ui/api/memories/${encodeURIComponent(memory.id)}`, "DELETE") })));
  }
  const held = el("ul", { class: "pending" });
  for (const item of data.pending) {
    held.append(el("li", { class: "pending-memory" }, el("span", { text: item.content }),
      el("button", { type: "button", text: t("confirm"), "aria-label": `${t("confirm")}: ${item.content}`,
        onclick: () => memoryAction(`/ui/api/pending/${item.id}/confirm`, "POST") }),
      el("button", { type: "button", text: t("drop"), "aria-label": `${t("drop")}: ${item.content}`,
        onclick: () => memoryAction(`/ui/api/pending/${item.id}/drop`, "POST") })));
  }
  const none = () => el("p", { class: "none", text: t("none") });
  const history = asked.children.length ? [el("h3", { text: t("asked") }), asked] : [];
  openSide(t("memories"), el("h3", { text: t("pending") }), data.pending.length ? held : none(),
    el("h3", { text: t("kept") }), kept.children.length ? kept : none(), ...history);
}

async function memoryAction(path, method) {
  try {
    await api(path, { method });
  } catch (error) {
    failed(error);
  }
  await showMemories();
}
