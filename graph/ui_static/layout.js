// The page's frame: the drawer the threads become on a narrow screen, light or dark, and what an empty
// conversation shows (a greeting, what the knowledge base holds, questions to start from).
import { $, api, el, state } from "./dom.js";
import { t } from "./i18n.js";

export const THEME_KEY = "kb-agent-theme";

export function openDrawer() {
  document.body.classList.add("drawer-open");
  $("open-threads").setAttribute("aria-expanded", "true");
  $("new-thread").focus();
}

export function closeDrawer() {
  if (!document.body.classList.contains("drawer-open")) return;
  document.body.classList.remove("drawer-open");
  $("open-threads").setAttribute("aria-expanded", "false");
}

export function dark() {
  const chosen = document.documentElement.dataset.theme;
  return chosen ? chosen === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
}

export function applyTheme(theme) {
  if (theme === "dark" || theme === "light") document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
  $("theme").setAttribute("aria-pressed", String(dark()));
}

export async function showEmpty() {
  const empty = $("empty");
  $("empty-hello").textContent = t("hello", { user: state.me?.user || "" });
  empty.hidden = false;
  let overview;
  try {
    overview = await api("/ui/api/overview");
  } catch {
    overview = { documents: 0, languages: [], titles: [] };
  }
  if (state.threadId) return;
  const langs = (overview.languages || []).map((code) => t(`lang_${code}`)).join(t("and"));
  $("empty-holds").textContent = overview.documents
    ? t("holds", { n: overview.documents, langs }) : t("holdsNone");
  const examples = (overview.titles || []).slice(0, 3).map((title) => t("exampleQ", { title }));
  $("empty-try").hidden = !examples.length;
  $("examples").replaceChildren(...examples.map((question) => el("li", {}, el("button", { type: "button",
    class: "example", text: question, onclick: () => { $("question").value = question; $("ask-form").requestSubmit(); } }))));
}
