// The kb-agent chat page. It talks to the server's LangGraph API (threads, streamed runs, state, resume)
// and to /ui/api (identity, cited passages, memories, ratings) with the caller's bearer token.
// Every piece of text from the server is put on the page with textContent: never parsed as HTML.
import { t, translatePage } from "./i18n.js";

const GRAPH = "kb_agent";
const TOKEN_KEY = "kb-agent-token";
const CITATION = /\[([^\[\]\s]+#\d+)\]/g;
const $ = (id) => document.getElementById(id);

let threadId = null;
let running = null; // the AbortController of the run being streamed
let pendingApproval = null;
let mayRate = false;

class SignedOut extends Error {}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function headers(extra = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function api(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.status === 401) {
    signOut(t("expired"));
    throw new SignedOut();
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const detail = data && typeof data.detail === "string" ? data.detail : `${response.status}`;
    throw new Error(detail);
  }
  return data;
}

function say(text) {
  $("status").textContent = text;
}

function failed(error) {
  if (!(error instanceof SignedOut)) say(`${t("failed")}: ${error.message}`);
}

function lost(error) {
  // fetch rejects with a TypeError when the server cannot be reached: what is shown may be cut off
  if (error instanceof TypeError) offerReload();
  else failed(error);
}

// ---- signing in --------------------------------------------------------------------------------------

function signOut(note = "") {
  if (running) running.abort();
  sessionStorage.removeItem(TOKEN_KEY);
  setThread(null);
  $("app").hidden = true;
  $("signin").hidden = false;
  $("signin-note").textContent = note;
  $("token").value = "";
  $("token").focus();
}

async function start() {
  let me;
  try {
    const response = await fetch("/ui/api/me", { headers: headers() });
    if (!response.ok) throw new Error(`${response.status}`);
    me = await response.json();
    if (!me.signed_in) {
      const hadToken = sessionStorage.getItem(TOKEN_KEY) !== null;
      signOut(hadToken ? t("badToken") : "");
      return;
    }
  } catch (error) {
    $("signin").hidden = false;
    $("signin-note").textContent = `${t("failed")}: ${error.message}`;
    return;
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  $("who").textContent = `${t("signedInAs")} ${me.user}`;
  $("show-memories").hidden = !me.memory;
  mayRate = Boolean(me.feedback);
  await listThreads();
  $("question").focus();
}

// ---- threads -----------------------------------------------------------------------------------------

function titleOf(thread) {
  if (typeof thread.metadata?.title === "string" && thread.metadata.title) return thread.metadata.title;
  const messages = thread.values?.messages || [];
  const first = messages.find((m) => m.type === "human" && typeof m.content === "string");
  return first ? first.content.slice(0, 60) : t("untitled");
}

async function listThreads() {
  const threads = await api("/threads/search", {
    method: "POST",
    body: { limit: 50, sort_by: "updated_at", sort_order: "desc" },
  });
  const list = $("threads");
  list.replaceChildren();
  for (const thread of threads) {
    const when = thread.updated_at ? new Date(thread.updated_at).toLocaleString() : "";
    const button = el("button", { type: "button", class: "thread", onclick: () => openThread(thread.thread_id) },
      el("span", { class: "thread-title", text: titleOf(thread) }), el("span", { class: "thread-when", text: when }));
    if (thread.thread_id === threadId) button.setAttribute("aria-current", "true");
    list.append(el("li", {}, button));
  }
}

function setThread(id) {
  threadId = id;
  if (id) document.body.dataset.thread = id;
  else delete document.body.dataset.thread;
}

async function openThread(id) {
  if (running) running.abort();
  setThread(id);
  await reload();
  await listThreads();
  $("question").focus();
}

function newThread() {
  if (running) running.abort();
  setThread(null);
  pendingApproval = null;
  $("log").replaceChildren();
  $("approval").hidden = true;
  say("");
  listThreads().catch(failed);
  $("question").focus();
}

// ---- rendering messages ------------------------------------------------------------------------------

function withCitations(text) {
  const out = document.createDocumentFragment();
  let last = 0;
  for (const match of text.matchAll(CITATION)) {
    out.append(text.slice(last, match.index));
    const chunk = match[1];
    out.append(el("a", { href: "#", class: "citation", "data-chunk": chunk, text: match[0],
      onclick: (event) => { event.preventDefault(); showPassage(chunk); } }));
    last = match.index + match[0].length;
  }
  out.append(text.slice(last));
  return out;
}

function toolLine(callId, name) {
  const id = `tool-${callId}`;
  let line = document.getElementById(id);
  if (!line) {
    line = el("p", { class: "tool", id, "data-tool": name },
      el("span", { class: "tool-name", text: `${t("tool")} ${name}` }), el("span", { class: "tool-status" }));
    $("log").append(line);
  }
  return line;
}

function setToolStatus(callId, name, status, detail = "") {
  const line = toolLine(callId, name);
  line.dataset.status = status;
  const why = detail ? `: ${String(detail).replace(/^Error: /, "").slice(0, 300)}` : "";
  line.querySelector(".tool-status").textContent = ` — ${t(status)}${why}`;
}

function rateButtons(message) {
  const box = el("span", { class: "rate" });
  for (const rating of ["good", "bad"]) {
    box.append(el("button", { type: "button", class: `rate-${rating}`, "aria-label": t(rating), text: t(`${rating}Short`),
      onclick: () => rate(message.id, rating, box) }));
  }
  return box;
}

function answerBlock(message, { final = true } = {}) {
  const text = typeof message.content === "string" ? message.content : "";
  const body = el("div", { class: "text" });
  body.append(withCitations(text));
  const block = el("article", { class: "message ai", "data-id": message.id || "" }, body);
  if (final && message.id && mayRate) block.append(rateButtons(message));
  return block;
}

function renderMessages(messages) {
  const log = $("log");
  log.replaceChildren();
  const outcome = new Map(messages.filter((m) => m.type === "tool").map((m) => [m.tool_call_id, m]));
  for (const m of messages) {
    if (m.type === "human" && typeof m.content === "string") {
      log.append(el("article", { class: "message human" }, el("div", { class: "text", text: m.content })));
    } else if (m.type === "ai") {
      for (const call of m.tool_calls || []) {
        const result = outcome.get(call.id);
        if (!result) setToolStatus(call.id, call.name, "approval_requested");
        else if (result.status === "error") setToolStatus(call.id, call.name, "error", typeof result.content === "string" ? result.content : "");
        else setToolStatus(call.id, call.name, "done");
      }
      if (typeof m.content === "string" && m.content && !(m.tool_calls || []).length) log.append(answerBlock(m));
    }
  }
  log.scrollTop = log.scrollHeight;
}

function interruptsOf(state) {
  const found = [...(state.interrupts || [])];
  for (const task of state.tasks || []) found.push(...(task.interrupts || []));
  return found.map((i) => i.value).filter((v) => v && v.kind === "tool_approval");
}

function showApproval(request) {
  pendingApproval = request;
  const box = $("approval");
  box.hidden = !request;
  if (!request) return;
  $("approval-what").textContent = `${request.tool}: ${request.description || ""}`;
  $("approval-args").textContent = JSON.stringify(request.args, null, 2);
  $("approval-reason").value = "";
  $("approve").focus();
}

let watching = null;

async function reload() {
  if (!threadId) return;
  const id = threadId;
  const [state, thread] = await Promise.all([api(`/threads/${id}/state`), api(`/threads/${id}`)]);
  if (id !== threadId) return;
  renderMessages(state.values?.messages || []);
  const approvals = interruptsOf(state);
  showApproval(approvals[0] || null);
  clearTimeout(watching);
  if (thread.status === "busy") {
    // a run of this thread is still going (started elsewhere, or resumed by a restarted server): look again
    say(t("stillAnswering"));
    watching = setTimeout(() => { if (id === threadId && !running) reload().catch(lost); }, 2000);
  } else {
    say("");
  }
}

// ---- asking and streaming ----------------------------------------------------------------------------

function* events(buffer) {
  // Server-sent events: blocks separated by a blank line, "event:" and "data:" lines.
  for (const block of buffer) {
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (!data.length) continue;
    try {
      yield [event, JSON.parse(data.join("\n"))];
    } catch {
      // a keep-alive or a partial line: nothing to show
    }
  }
}

function onEvent(event, data, streamed) {
  if (event === "messages" && Array.isArray(data)) {
    const [chunk, meta] = data;
    if (meta?.langgraph_node !== "agent" || typeof chunk?.content !== "string" || !chunk.content) return;
    let block = streamed.get(chunk.id);
    if (!block) {
      block = el("article", { class: "message ai streaming" }, el("div", { class: "text" }));
      streamed.set(chunk.id, block);
      $("log").append(block);
    }
    block.querySelector(".text").textContent += chunk.content;
    document.body.dataset.streamed = String(Number(document.body.dataset.streamed || 0) + 1);
  } else if (event === "custom" && data?.type === "tool_call" && data.call_id) {
    setToolStatus(data.call_id, data.tool, data.status, data.error || data.reason || "");
  } else if (event === "error") {
    say(`${t("failed")}: ${data?.message || data?.error || JSON.stringify(data)}`);
  }
  $("log").scrollTop = $("log").scrollHeight;
}

async function stream(body) {
  const controller = new AbortController();
  running = controller;
  $("stop").hidden = false;
  $("send").disabled = true;
  say(t("thinking"));
  const streamed = new Map();
  let cut = false;
  try {
    const response = await fetch(`/threads/${threadId}/runs/stream`, {
      method: "POST",
      signal: controller.signal,
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify({ assistant_id: GRAPH, stream_mode: ["messages-tuple", "custom"], on_disconnect: "cancel", ...body }),
    });
    if (response.status === 401) {
      signOut(t("expired"));
      return;
    }
    if (!response.ok) {
      const detail = await response.json().catch(() => ({}));
      throw new Error(typeof detail.detail === "string" ? detail.detail : `${response.status}`);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let pending = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      pending += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      const blocks = pending.split("\n\n");
      pending = blocks.pop();
      for (const [event, data] of events(blocks)) onEvent(event, data, streamed);
    }
  } catch (error) {
    if (controller.signal.aborted) {
      say(t("stopped"));
    } else if (error instanceof TypeError) {
      cut = true; // the network failed under the stream: the server went away
    } else {
      say(`${t("failed")}: ${error.message}`);
    }
  } finally {
    running = null;
    $("stop").hidden = true;
    $("send").disabled = false;
  }
  if (cut) {
    offerReload();
    return;
  }
  if (controller.signal.aborted) return;
  try {
    // The thread's state replaces what was streamed, so nothing is shown twice. A stream can also end
    // cleanly before its run has (a server shutting down closes it): the state then says the thread is
    // busy and the page watches it, and a server gone while watching is said as a cut-off answer.
    await reload();
    await listThreads();
  } catch (error) {
    lost(error);
  }
}

function offerReload() {
  for (const block of document.querySelectorAll(".streaming")) block.classList.add("cut");
  const status = $("status");
  status.replaceChildren(el("span", { text: `${t("cut")} ` }),
    el("button", { type: "button", id: "reload", text: t("reload"),
      onclick: () => reload().then(listThreads).catch(lost) }));
}

async function ask(event) {
  event.preventDefault();
  if (running) return;
  const question = $("question").value.trim();
  if (!question) {
    say(t("empty"));
    return;
  }
  try {
    if (!threadId) {
      // titled by its first question (not every runtime lists threads with their messages)
      const thread = await api("/threads", { method: "POST", body: { metadata: { title: question.slice(0, 80) } } });
      setThread(thread.thread_id);
    }
    $("question").value = "";
    $("log").append(el("article", { class: "message human" }, el("div", { class: "text", text: question })));
    await stream({ input: { messages: [{ role: "user", content: question }] } });
  } catch (error) {
    failed(error);
  }
}

async function decide(approved) {
  const request = pendingApproval;
  if (!request || running) return;
  const reason = $("approval-reason").value.trim();
  const resume = { approved, call_id: request.call_id, digest: request.digest };
  if (reason) resume.reason = reason;
  showApproval(null);
  await stream({ command: { resume } });
}

// ---- ratings, passages, memories ---------------------------------------------------------------------

async function rate(messageId, rating, box) {
  try {
    const result = await api(`/ui/api/threads/${threadId}/feedback`, { method: "POST", body: { message_id: messageId, rating } });
    box.replaceChildren(el("span", { class: "rated", text: result.counts ? t("rated") : t("ratedNoEffect") }));
  } catch (error) {
    failed(error);
  }
}

function openSide(title, ...content) {
  $("side-title").textContent = title;
  $("side-body").replaceChildren(...content);
  $("side").hidden = false;
  $("close-side").focus();
}

async function showPassage(chunk) {
  try {
    const found = await api(`/ui/api/passages/${encodeURIComponent(chunk)}`);
    openSide(`${t("passage")}: ${found.id}`, el("p", { class: "source", text: found.source }),
      el("div", { class: "passage", text: found.text }));
  } catch (error) {
    if (!(error instanceof SignedOut)) openSide(t("passage"), el("p", { text: t("noPassage") }));
  }
}

async function showMemories() {
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

// ---- wiring ------------------------------------------------------------------------------------------

function wire() {
  translatePage();
  $("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    start();
  });
  $("signout").addEventListener("click", () => signOut());
  $("new-thread").addEventListener("click", newThread);
  $("show-memories").addEventListener("click", showMemories);
  $("close-side").addEventListener("click", () => { $("side").hidden = true; $("question").focus(); });
  $("ask-form").addEventListener("submit", ask);
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("ask-form").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => running?.abort());
  $("approve").addEventListener("click", () => decide(true));
  $("reject").addEventListener("click", () => decide(false));
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    if (running) running.abort();
    else if (!$("side").hidden) { $("side").hidden = true; $("question").focus(); }
  });
  start();
}

wire();
