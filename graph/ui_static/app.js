// The kb-agent chat page. It talks to the server's LangGraph API (threads, streamed runs, state, resume)
// and to /ui/api (identity, passages, memories, ratings, documents) with the caller's bearer token.
// Text from the server reaches the page as textContent, or as Markdown through the sanitiser (markdown.js).
import { $, SignedOut, TOKEN_KEY, api, el, failed, hooks, say, state } from "./dom.js";
import { showDocuments } from "./documents.js";
import { LANG, t, translatePage } from "./i18n.js";
import { questionBlock, renderMessages, setToolStatus } from "./messages.js";
import { closeSide, forgetPassages, showMemories } from "./side.js";
import { THEME_KEY, applyTheme, closeDrawer, dark, openDrawer, showEmpty } from "./layout.js";
import { listThreads, setThread, showThreads, threadInAddress } from "./threads.js";

const GRAPH = "kb_agent";

function lost(error) {
  // fetch rejects with a TypeError when the server cannot be reached: what is shown may be cut off
  if (error instanceof TypeError) offerReload();
  else failed(error);
}

// ---- signing in --------------------------------------------------------------------------------------

// ``forget``: the person signed out, so the open thread leaves the address too; a token refused or
// expired keeps it, so signing in again (or following a link before signing in) opens that thread.
function signOut(note = "", { forget = false } = {}) {
  if (state.running) state.running.abort();
  sessionStorage.removeItem(TOKEN_KEY);
  if (forget) setThread(null);
  delete document.body.dataset.ready;
  forgetPassages();
  $("app").hidden = true;
  $("signin").hidden = false;
  $("signin-note").textContent = note;
  $("token").value = "";
  $("token").focus();
}

async function start() {
  let me;
  try {
    const response = await fetch("/ui/api/me", { headers: headersOnly() });
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
  state.me = me;
  $("signin").hidden = true;
  $("app").hidden = false;
  $("who").textContent = `${t("signedInAs")} ${me.user}`;
  $("show-memories").hidden = !me.memory;
  $("show-documents").hidden = !me.documents;
  $("question").focus();
  const wanted = threadInAddress();
  try {
    if (wanted) await openThread(wanted, { push: false });
    else await newThread();
  } catch (error) {
    failed(error);
  }
  if (!$("app").hidden) document.body.dataset.ready = "true"; // everything the page asked at sign-in answered
  $("question").focus();
}

function headersOnly() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

// ---- threads and the empty state ---------------------------------------------------------------------

async function openThread(id, { push = true } = {}) {
  if (state.running) state.running.abort();
  showChat();
  closeDrawer();
  setThread(id, { push });
  $("empty").hidden = true;
  try {
    await reload();
  } catch (error) {
    if (error.status !== 404 && error.status !== 403) throw error;
    await newThread();
    say(t("threadGone"));
    return;
  }
  await listThreads();
  $("question").focus();
}

async function newThread({ push = false } = {}) {
  if (state.running) state.running.abort();
  showChat();
  closeDrawer();
  setThread(null, { push });
  state.pendingApproval = null;
  $("log").replaceChildren();
  $("approval").hidden = true;
  say("");
  $("question").focus();
  try {
    await listThreads();
  } catch (error) {
    if (error instanceof SignedOut) return; // one refused request, then the page waits for a token
    failed(error);
  }
  await showEmpty();
}

// ---- the thread's state ------------------------------------------------------------------------------

function interruptsOf(snapshot) {
  const found = [...(snapshot.interrupts || [])];
  for (const task of snapshot.tasks || []) found.push(...(task.interrupts || []));
  return found.map((i) => i.value).filter((v) => v && v.kind === "tool_approval");
}

// The page's own words for what a call will do: never the account written for the model or the operator.
function describeCall(request) {
  if (request.tool === "delete_document" && request.args?.doc_id) return t("deleteDoc", { doc: request.args.doc_id });
  return t("wantsTo", { tool: request.tool });
}

function showApproval(request) {
  state.pendingApproval = request;
  const box = $("approval");
  box.hidden = !request;
  if (!request) return;
  $("approval-what").textContent = `${request.tool}: ${describeCall(request)}`;
  $("approval-args").textContent = JSON.stringify(request.args, null, 2);
  $("approval-reason").value = "";
  $("reject").focus(); // the safe choice: Enter on an approval card never deletes anything
}

let watching = null;

async function reload() {
  if (!state.threadId) return;
  const id = state.threadId;
  const [snapshot, thread] = await Promise.all([api(`/threads/${id}/state`), api(`/threads/${id}`)]);
  if (id !== state.threadId) return;
  $("empty").hidden = true;
  renderMessages(snapshot.values?.messages || []);
  showApproval(interruptsOf(snapshot)[0] || null);
  clearTimeout(watching);
  if (thread.status === "busy") {
    // a run of this thread is still going (started elsewhere, or resumed by a restarted server): look again
    say(t("stillAnswering"));
    watching = setTimeout(() => { if (id === state.threadId && !state.running) reload().catch(lost); }, 2000);
  } else {
    say("");
  }
}

// ---- asking and streaming ----------------------------------------------------------------------------

function* events(blocks) {
  // Server-sent events: blocks separated by a blank line, "event:" and "data:" lines.
  for (const block of blocks) {
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
    const reason = data.status === "approval_denied" ? (data.reason && !/needs a person/.test(data.reason) ? data.reason : "") : "";
    setToolStatus(data.call_id, data.tool, data.status, { args: data.args, result: data.result ?? data.error, reason });
  } else if (event === "error") {
    say(`${t("failed")}: ${data?.message || data?.error || JSON.stringify(data)}`);
  }
  $("log").scrollTop = $("log").scrollHeight;
}

async function stream(body) {
  const controller = new AbortController();
  state.running = controller;
  $("stop").hidden = false;
  $("send").disabled = true;
  say(t("thinking"));
  const streamed = new Map();
  let cut = false;
  try {
    const response = await fetch(`/threads/${state.threadId}/runs/stream`, {
      method: "POST",
      signal: controller.signal,
      headers: { ...headersOnly(), "Content-Type": "application/json" },
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
    if (controller.signal.aborted) say(t("stopped"));
    else if (error instanceof TypeError) cut = true; // the network failed under the stream: the server went away
    else say(`${t("failed")}: ${error.message}`);
  } finally {
    state.running = null;
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
  $("status").replaceChildren(el("span", { text: `${t("cut")} ` }),
    el("button", { type: "button", id: "reload", text: t("reload"),
      onclick: () => reload().then(listThreads).catch(lost) }));
}

async function ask(event) {
  event.preventDefault();
  if (state.running) return;
  const question = $("question").value.trim();
  if (!question) {
    say(t("empty"));
    return;
  }
  try {
    if (!state.threadId) {
      // titled by its first question (not every runtime lists threads with their messages)
      const thread = await api("/threads", { method: "POST", body: { metadata: { title: question.slice(0, 80) } } });
      setThread(thread.thread_id, { push: true });
      $("empty").hidden = true;
    }
    $("question").value = "";
    for (const old of document.querySelectorAll("#log .edit-question, #log .regenerate")) old.remove();
    $("log").append(questionBlock(question, { last: true }));
    await stream({ input: { messages: [{ role: "user", content: question }] } });
  } catch (error) {
    failed(error);
  }
}

// Regenerate, or ask the last question again as edited: the run starts from the thread's checkpoint just
// before that question, so the thread continues from there (the earlier answer is left on its branch).
async function rerun(question = null) {
  if (state.running || !state.threadId) return;
  try {
    const id = state.threadId;
    const snapshot = await api(`/threads/${id}/state`);
    const messages = snapshot.values?.messages || [];
    const at = messages.findLastIndex((m) => m.type === "human");
    if (at < 0) return;
    const asked = question ?? messages[at].content;
    const past = await api(`/threads/${id}/history`, { method: "POST", body: { limit: 100 } });
    const before = past.find((s) => (s.values?.messages || []).length === at && !(s.next || []).length)
      || past.find((s) => (s.values?.messages || []).length === at);
    const body = { input: { messages: [{ role: "user", content: asked }] } };
    if (before?.checkpoint?.checkpoint_id) body.checkpoint_id = before.checkpoint.checkpoint_id;
    renderMessages(messages.slice(0, at));
    $("log").append(questionBlock(asked, { last: true }));
    await stream(body);
  } catch (error) {
    failed(error);
  }
}

async function decide(approved) {
  const request = state.pendingApproval;
  if (!request || state.running) return;
  const reason = $("approval-reason").value.trim();
  const resume = { approved, call_id: request.call_id, digest: request.digest };
  if (reason) resume.reason = reason;
  showApproval(null);
  if (!approved) setToolStatus(request.call_id, request.tool, "approval_denied", { args: request.args, reason });
  await stream({ command: { resume } });
}

// ---- views, drawer, theme ----------------------------------------------------------------------------

function showChat() {
  $("documents-view").hidden = true;
  for (const id of ["log", "ask-form", "status"]) $(id).hidden = false;
}

function openDocuments() {
  closeDrawer();
  $("empty").hidden = true;
  $("approval").hidden = true;
  for (const id of ["log", "ask-form"]) $(id).hidden = true;
  showDocuments(() => { showChat(); if (state.threadId) reload().catch(failed); else newThread(); });
}

// ---- wiring ------------------------------------------------------------------------------------------

function wire() {
  translatePage();
  applyTheme(localStorage.getItem(THEME_KEY));
  Object.assign(hooks, { signOut, openThread, newThread, regenerate: () => rerun(), resend: (q) => rerun(q) });
  $("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    start();
  });
  $("signout").addEventListener("click", () => signOut("", { forget: true }));
  $("new-thread").addEventListener("click", () => newThread({ push: true }).catch(failed));
  $("show-memories").addEventListener("click", () => { closeDrawer(); showMemories(); });
  $("show-documents").addEventListener("click", openDocuments);
  $("thread-search").addEventListener("input", showThreads);
  $("close-side").addEventListener("click", closeSide);
  $("open-threads").addEventListener("click", openDrawer);
  $("scrim").addEventListener("click", closeDrawer);
  $("theme").addEventListener("click", () => {
    const next = dark() ? "light" : "dark";
    localStorage.setItem(THEME_KEY, next);
    applyTheme(next);
  });
  $("ask-form").addEventListener("submit", ask);
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("ask-form").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => state.running?.abort());
  $("approve").addEventListener("click", () => decide(true));
  $("reject").addEventListener("click", () => decide(false));
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    if (state.running) state.running.abort();
    else if (!$("side").hidden) closeSide();
    else if (document.body.classList.contains("drawer-open")) { closeDrawer(); $("open-threads").focus(); }
  });
  window.addEventListener("popstate", () => {
    const wanted = threadInAddress();
    if (wanted === state.threadId || $("app").hidden) return;
    (wanted ? openThread(wanted, { push: false }) : newThread()).catch(failed);
  });
  document.documentElement.dataset.lang = LANG;
  start();
}

wire();
