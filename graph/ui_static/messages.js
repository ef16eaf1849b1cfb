// The conversation as the page shows it: questions, answers in Markdown with numbered sources, one
// collapsed line per tool call, and what a person can do with each (copy, regenerate, edit, rate).
import { $, api, copyText, el, failed, hooks, state } from "./dom.js";
import { t } from "./i18n.js";
import { citedIn, renderMarkdown } from "./markdown.js";
import { passageInfo, placeOf, showPassage } from "./side.js";

// The tool executor's wording for a call a person rejected, or that needed a person and had none: shown
// as a rejection (with the person's own reason), never as the sentence written for the model.
const REJECTED = /^Error: the user rejected '[^']*'(?:: ([\s\S]*?))?\. Nothing was changed/;
const UNASKED = /^Error: tool '[^']*' needs a person's approval/;
const RESULT_PREVIEW = 160;

function brief(value, limit = 60) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

function argsInline(args) {
  if (!args || typeof args !== "object") return "";
  return Object.entries(args).map(([k, v]) => `${k}: ${brief(v, 40)}`).join(", ");
}

// One line per call id, however many times its status arrives (stream, then the thread's state).
export function toolLine(callId, name) {
  const id = `tool-${callId}`;
  let line = document.getElementById(id);
  if (!line) {
    line = el("details", { class: "tool", id, "data-tool": name },
      el("summary", {}, el("span", { class: "tool-name" }), el("span", { class: "tool-status" })),
      el("div", { class: "tool-body" }));
    line.toolArgs = null;
    $("log").append(line);
  }
  return line;
}

export function setToolStatus(callId, name, status, { args, result, reason } = {}) {
  const line = toolLine(callId, name);
  if (args && typeof args === "object") line.toolArgs = args;
  line.dataset.status = status;
  const shownArgs = argsInline(line.toolArgs);
  line.querySelector(".tool-name").textContent = `${t("tool")} ${name}${shownArgs ? ` (${shownArgs})` : ""}`;
  let tail = "";
  if (status === "approval_denied") tail = reason ? `: ${reason}` : "";
  else if (status === "done" && typeof result === "string" && result) tail = ` · ${brief(result, 60)}`;
  line.querySelector(".tool-status").textContent = ` — ${t(status)}${tail}`;
  const body = line.querySelector(".tool-body");
  const parts = [];
  if (line.toolArgs) parts.push(el("p", { text: t("args") }), el("pre", { text: JSON.stringify(line.toolArgs, null, 2) }));
  const detail = status === "error" ? String(result || "").replace(/^Error: /, "") : result;
  if (typeof detail === "string" && detail && status !== "approval_denied") {
    parts.push(el("p", { text: t("result") }), el("pre", { text: brief(detail, RESULT_PREVIEW * 4) }));
  }
  body.replaceChildren(...parts);
}

// What a finished call shows, read from its tool message in the thread's state.
function outcomeOf(result) {
  const content = typeof result.content === "string" ? result.content : JSON.stringify(result.content);
  const rejected = REJECTED.exec(content);
  if (rejected) return { status: "approval_denied", reason: rejected[1] || "" };
  if (UNASKED.test(content)) return { status: "approval_denied", reason: t("notApproved") };
  if (result.status === "error") return { status: "error", result: content };
  return { status: "done", result: content };
}

function citationLink(chunk, number) {
  return el("a", { href: "#", class: "citation", "data-chunk": chunk, text: `[${number}]`,
    "aria-label": `${t("source")} ${number}: ${chunk}`,
    onclick: (event) => { event.preventDefault(); showPassage(chunk); } });
}

function sourcesList(cited) {
  const list = el("ol", { class: "sources", "aria-label": t("sources") });
  for (const chunk of cited) {
    const label = el("span", { class: "source-title", text: chunk });
    const heading = el("span", { class: "source-heading" });
    const preview = el("span", { class: "preview", hidden: true });
    const open = el("button", { type: "button", class: "source-open", "data-chunk": chunk,
      onclick: () => showPassage(chunk) }, label, heading);
    const show = async () => {
      const info = await passageInfo(chunk);
      if (info) preview.textContent = info.text.slice(0, 400);
      preview.hidden = !info;
    };
    const hide = () => { preview.hidden = true; };
    open.addEventListener("mouseenter", show);
    open.addEventListener("focus", show);
    open.addEventListener("mouseleave", hide);
    open.addEventListener("blur", hide);
    list.append(el("li", {}, open, preview));
    passageInfo(chunk).then((info) => {
      if (!info) return;
      label.textContent = info.title || info.source;
      const where = placeOf(info);
      heading.textContent = where ? ` — ${where}` : "";
    });
  }
  return list;
}

function rateBox(message) {
  const box = el("span", { class: "rate" });
  const good = el("button", { type: "button", class: "rate-good", "aria-label": t("good"), text: t("goodShort"),
    onclick: () => rate(message.id, "good", "", box) });
  const bad = el("button", { type: "button", class: "rate-bad", "aria-label": t("bad"), text: t("badShort"),
    onclick: () => askWhy(message.id, box) });
  box.append(good, bad);
  return box;
}

function askWhy(messageId, box) {
  const reason = el("input", { type: "text", name: "wrong-reason", "aria-label": t("whyWrong"), placeholder: t("whyWrong"), maxlength: "2000" });
  const form = el("form", { class: "wrong-form" }, reason,
    el("button", { type: "submit", class: "primary", text: t("sendRating") }),
    el("button", { type: "button", text: t("cancel"), onclick: () => box.replaceWith(rateBox({ id: messageId })) }));
  form.addEventListener("submit", (event) => { event.preventDefault(); rate(messageId, "bad", reason.value.trim(), box); });
  box.replaceChildren(form);
  reason.focus();
}

async function rate(messageId, rating, reason, box) {
  const body = { message_id: messageId, rating };
  if (reason) body.reason = reason;
  try {
    const result = await api(`/ui/api/threads/${state.threadId}/feedback`, { method: "POST", body });
    box.replaceChildren(el("span", { class: "rated", role: "status", text: result.counts ? t("rated") : t("ratedNoEffect") }));
  } catch (error) {
    failed(error);
  }
}

function modelOf(message) {
  const meta = message.response_metadata || {};
  return meta.model_name || meta.model || "";
}

export function answerBlock(message, { last = false } = {}) {
  const text = typeof message.content === "string" ? message.content : "";
  const cited = citedIn(text);
  const body = el("div", { class: "text" });
  body.append(renderMarkdown(text, (chunk) => citationLink(chunk, cited.indexOf(chunk) + 1)));
  const block = el("article", { class: "message ai", "data-id": message.id || "" }, body);
  if (cited.length) block.append(sourcesList(cited));
  const copy = el("button", { type: "button", class: "copy-answer", text: t("copy"), "aria-label": t("copyAnswer") });
  copy.addEventListener("click", () => copyText(text, copy));
  const actions = el("div", { class: "answer-tools" }, copy);
  if (last) actions.append(el("button", { type: "button", class: "regenerate", text: t("regenerate"), onclick: () => hooks.regenerate?.() }));
  if (message.id && state.me?.feedback) actions.append(rateBox(message));
  const model = modelOf(message);
  if (model) actions.append(el("span", { class: "model", text: `${t("answeredBy")}: ${model}` }));
  block.append(actions);
  return block;
}

export function questionBlock(text, { last = false } = {}) {
  const block = el("article", { class: "message human" }, el("div", { class: "text", text }));
  if (last) {
    block.append(el("div", { class: "human-tools" }, el("button", { type: "button", class: "edit-question", text: t("edit"),
      "aria-label": t("editQuestion"), onclick: () => editQuestion(block, text) })));
  }
  return block;
}

function editQuestion(block, text) {
  const area = el("textarea", { name: "edited-question", "aria-label": t("editQuestion") });
  area.value = text;
  const form = el("form", { class: "edit-form" }, area, el("div", { class: "human-tools" },
    el("button", { type: "submit", class: "primary", text: t("save") }),
    el("button", { type: "button", text: t("cancel"), onclick: () => block.replaceWith(questionBlock(text, { last: true })) })));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const changed = area.value.trim();
    if (changed) hooks.resend?.(changed);
  });
  block.replaceChildren(form);
  area.focus();
}

export function renderMessages(messages) {
  const log = $("log");
  log.replaceChildren();
  const outcome = new Map(messages.filter((m) => m.type === "tool").map((m) => [m.tool_call_id, m]));
  const lastHuman = messages.findLastIndex((m) => m.type === "human");
  const lastAnswer = messages.findLastIndex((m) => m.type === "ai" && typeof m.content === "string" && m.content && !(m.tool_calls || []).length);
  messages.forEach((m, i) => {
    if (m.type === "human" && typeof m.content === "string") {
      log.append(questionBlock(m.content, { last: i === lastHuman }));
    } else if (m.type === "ai") {
      for (const call of m.tool_calls || []) {
        const result = outcome.get(call.id);
        if (!result) setToolStatus(call.id, call.name, "approval_requested", { args: call.args });
        else setToolStatus(call.id, call.name, outcomeOf(result).status, { args: call.args, ...outcomeOf(result) });
      }
      if (typeof m.content === "string" && m.content && !(m.tool_calls || []).length) {
        log.append(answerBlock(m, { last: i === lastAnswer && i > lastHuman }));
      }
    }
  });
  log.scrollTop = log.scrollHeight;
}
