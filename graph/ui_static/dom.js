// What every part of the page shares: building elements (text always as textContent), the API with the
// caller's bearer token, the status line, and the page's state.
import { t } from "./i18n.js";

export const TOKEN_KEY = "kb-agent-token";
export const $ = (id) => document.getElementById(id);

// threadId: the open thread; running: the AbortController of the run being streamed; me: /ui/api/me.
export const state = { threadId: null, running: null, pendingApproval: null, me: null };
// Functions one part of the page offers another (set by app.js), so the modules import one way.
export const hooks = {};

export class SignedOut extends Error {}

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

export function headers(extra = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

export async function api(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.status === 401) {
    hooks.signOut?.(t("expired"));
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
    const error = new Error(detail);
    error.status = response.status;
    throw error;
  }
  return data;
}

export function say(text) {
  $("status").textContent = text;
}

export function failed(error) {
  if (!(error instanceof SignedOut)) say(`${t("failed")}: ${error.message}`);
}

export async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = t("copied");
  } catch {
    button.textContent = t("copyFailed");
  }
  setTimeout(() => { button.textContent = t("copy"); }, 2000);
}
