// Markdown in answers and passages: markdown-it (raw HTML off, images off, links only http(s) and mailto)
// turns the text into HTML, DOMPurify turns that HTML into nodes with only the tags and attributes below.
// The page never parses a string as HTML itself: what reaches the DOM is the sanitiser's fragment.
import MarkdownIt from "./vendor/markdown-it.js";
import DOMPurify from "./vendor/purify.js";
import { copyText, el } from "./dom.js";
import { t } from "./i18n.js";

export const CITATION = /\[([^\[\]\s]+#\d+)\]/g;
const SAFE_URL = /^(?:https?:|mailto:)/i;

const md = new MarkdownIt({ html: false, linkify: true, breaks: true, typographer: false });
md.disable(["image"]);
md.linkify.set({ fuzzyLink: false, fuzzyEmail: false });  // "travel.md" is a file name, not a web address
md.validateLink = (url) => SAFE_URL.test(url.trim());

const PURIFY = {
  ALLOWED_TAGS: ["p", "br", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "h1", "h2",
    "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th", "td", "a"],
  ALLOWED_ATTR: ["href", "title", "start"],  // no style: the policy forbids inline styles
  ALLOWED_URI_REGEXP: SAFE_URL,
  RETURN_DOM_FRAGMENT: true,
};
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("rel", "noopener noreferrer nofollow");
    node.setAttribute("target", "_blank");
  }
});

// Citations ([path#n]) become numbered links, except inside code and links.
function linkCitations(root, cite) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement?.closest("code, pre, a")) continue;
    CITATION.lastIndex = 0;
    if (CITATION.test(node.data)) found.push(node);
  }
  for (const node of found) {
    const out = document.createDocumentFragment();
    let last = 0;
    for (const match of node.data.matchAll(CITATION)) {
      out.append(node.data.slice(last, match.index));
      out.append(cite(match[1]));
      last = match.index + match[0].length;
    }
    out.append(node.data.slice(last));
    node.replaceWith(out);
  }
}

function dressBlocks(root) {
  for (const pre of root.querySelectorAll("pre")) {
    const code = pre.textContent;
    const copy = el("button", { type: "button", class: "copy-code", text: t("copy"), "aria-label": t("copyCode") });
    copy.addEventListener("click", () => copyText(code, copy));
    pre.setAttribute("tabindex", "0");
    const box = el("div", { class: "code" });
    pre.replaceWith(box);
    box.append(copy, pre);
  }
  for (const table of root.querySelectorAll("table")) {
    const wrap = el("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": t("table") });
    table.replaceWith(wrap);
    wrap.append(table);
  }
}

// ``cite(chunkId)`` returns the node a citation becomes (or null to leave it as text).
export function renderMarkdown(text, cite = null) {
  const fragment = DOMPurify.sanitize(md.render(String(text || "")), PURIFY);
  if (cite) linkCitations(fragment, cite);
  dressBlocks(fragment);
  return fragment;
}

// The cited chunk ids of a text, each once, in the order they first appear (the sources' numbers).
export function citedIn(text) {
  return [...new Set([...String(text || "").matchAll(CITATION)].map((m) => m[1]))];
}
