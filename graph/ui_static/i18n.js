// Interface text in English and Chinese; the browser's language picks one. Words for the people who ask
// the knowledge base: no command lines, no setting names, no internal ids.
const TEXT = {
  en: {
    title: "kb-agent", token: "Access token", signin: "Sign in", signout: "Sign out",
    threads: "Threads", new: "New conversation", memories: "My memories", question: "Your question",
    send: "Send", stop: "Stop (Esc)", close: "Close", approvalTitle: "Approval needed",
    reason: "Reason (optional)", approve: "Approve", reject: "Reject",
    badToken: "That token was not accepted. Enter a valid one.",
    expired: "Your token is no longer accepted. Sign in again.",
    signedInAs: "Signed in as", stillAnswering: "The answer is still being written…", untitled: "New conversation", thinking: "Thinking…",
    executing: "running", done: "done", error: "failed", denied: "not allowed",
    approval_requested: "waiting for approval", approval_granted: "approved", approval_denied: "rejected",
    cut: "The answer was cut off (the connection to the server was lost).", reload: "Reload the conversation",
    stopped: "Stopped.", good: "Good answer", bad: "Wrong answer", goodShort: "Good", badShort: "Wrong", rated: "Thanks, your rating was recorded.",
    ratedNoEffect: "Thanks. (This answer was not recorded by the assistant, so the rating changes no ranking.)",
    whyWrong: "What was wrong? (optional)", sendRating: "Send rating",
    passage: "Cited passage", noPassage: "This passage does not exist or you may not read it.",
    kept: "Facts and preferences", asked: "Questions you asked", pending: "Waiting for your confirmation", none: "Nothing here.",
    delete: "Delete", confirm: "Keep", drop: "Drop", noMemory: "Your roles do not let you see memories.",
    tool: "Tool", failed: "The request failed", empty: "Write a question first.",
    copy: "Copy", copied: "Copied", copyFailed: "Could not copy", copyCode: "Copy the code", copyAnswer: "Copy the answer",
    table: "Table", regenerate: "Regenerate", edit: "Edit", editQuestion: "Edit the question", save: "Send again", cancel: "Cancel",
    sources: "Sources", source: "Source", answeredBy: "Answered by", args: "Arguments", result: "Result",
    searchThreads: "Search conversations", rename: "Rename", renameThread: "New name", deleteThread: "Delete this conversation?",
    threadGone: "That conversation does not exist or is not yours.", noThreads: "No conversations yet.",
    openThreads: "Conversations", theme: "Dark mode",
    hello: "Hello, {user}.", holds: "The knowledge base holds {n} documents in {langs}.", holdsNone: "The knowledge base holds no documents yet.",
    tryAsking: "Try asking:", exampleQ: "What does “{title}” say?", lang_en: "English", lang_zh: "Chinese", and: " and ",
    wantsTo: "The assistant wants to run “{tool}” with these arguments.",
    deleteDoc: "Delete the document “{doc}” from the knowledge base. It goes to the trash and can be restored.",
    rejectedNote: "You rejected this.", notApproved: "This needs a person's approval, which could not be asked here.",
    documents: "Documents", docSearch: "Search documents", docTitle: "Title", docFile: "File", docChunks: "Chunks",
    docGroups: "Groups", docWhen: "Added", docBy: "Added by", upload: "Add documents", uploadHint: "Drop files here or choose them",
    uploadGroups: "Groups (comma-separated, optional)", uploading: "Uploading", uploaded: "Added", replaced: "Replaced the document of that name", unchanged: "Already there, unchanged",
    skipped: "Not added", trash: "Trash", restore: "Restore", deleteDoc2: "Delete “{doc}”?", noDocs: "No documents.",
    deleted: "Moved to the trash.", restored: "Restored.", back: "Back to the conversation",
  },
  zh: {
    title: "kb-agent", token: "访问令牌", signin: "登录", signout: "退出",
    threads: "会话", new: "新会话", memories: "我的记忆", question: "你的问题",
    send: "发送", stop: "停止 (Esc)", close: "关闭", approvalTitle: "需要审批",
    reason: "理由（可选）", approve: "批准", reject: "拒绝",
    badToken: "令牌无效，请输入有效的令牌。",
    expired: "你的令牌已失效，请重新登录。",
    signedInAs: "当前用户", stillAnswering: "回答仍在生成中…", untitled: "新会话", thinking: "思考中…",
    executing: "执行中", done: "完成", error: "失败", denied: "不允许",
    approval_requested: "等待审批", approval_granted: "已批准", approval_denied: "已拒绝",
    cut: "回答被中断（与服务器的连接断开）。", reload: "重新加载会话",
    stopped: "已停止。", good: "回答有用", bad: "回答有误", goodShort: "有用", badShort: "有误", rated: "谢谢，评价已记录。",
    ratedNoEffect: "谢谢。（这条回答不是助手记录的回答，评价不影响排序。）",
    whyWrong: "哪里有误？（可选）", sendRating: "提交评价",
    passage: "引用的段落", noPassage: "该段落不存在，或你无权查看。",
    kept: "关于你的事实和偏好", asked: "你问过的问题", pending: "等待你确认", none: "暂无。",
    delete: "删除", confirm: "保留", drop: "丢弃", noMemory: "你的角色无权查看记忆。",
    tool: "工具", failed: "请求失败", empty: "请先输入问题。",
    copy: "复制", copied: "已复制", copyFailed: "无法复制", copyCode: "复制代码", copyAnswer: "复制回答",
    table: "表格", regenerate: "重新生成", edit: "编辑", editQuestion: "编辑问题", save: "重新发送", cancel: "取消",
    sources: "来源", source: "来源", answeredBy: "回答模型", args: "参数", result: "结果",
    searchThreads: "搜索会话", rename: "重命名", renameThread: "新名称", deleteThread: "删除这个会话？",
    threadGone: "该会话不存在，或不属于你。", noThreads: "还没有会话。",
    openThreads: "会话列表", theme: "深色模式",
    hello: "你好，{user}。", holds: "知识库中有 {n} 篇{langs}文档。", holdsNone: "知识库中还没有文档。",
    tryAsking: "可以这样问：", exampleQ: "“{title}”讲了什么？", lang_en: "英文", lang_zh: "中文", and: "和",
    wantsTo: "助手想用以下参数运行“{tool}”。",
    deleteDoc: "从知识库删除文档“{doc}”。它会进入回收站，可以恢复。",
    rejectedNote: "你已拒绝。", notApproved: "此操作需要人工审批，但这里无法发起审批。",
    documents: "文档", docSearch: "搜索文档", docTitle: "标题", docFile: "文件", docChunks: "分块",
    docGroups: "访问组", docWhen: "添加时间", docBy: "添加者", upload: "添加文档", uploadHint: "把文件拖到这里，或选择文件",
    uploadGroups: "访问组（逗号分隔，可选）", uploading: "上传中", uploaded: "已添加", replaced: "已替换同名文档", unchanged: "已存在，未变化",
    skipped: "未添加", trash: "回收站", restore: "恢复", deleteDoc2: "删除“{doc}”？", noDocs: "没有文档。",
    deleted: "已移入回收站。", restored: "已恢复。", back: "回到会话",
  },
};

export const LANG = (navigator.languages?.[0] || navigator.language || "en").toLowerCase().startsWith("zh")
  ? "zh"
  : "en";

// ``t("hello", {user: "alice"})`` fills {user}; the values are text and stay text where they are shown.
export function t(key, values = {}) {
  const text = TEXT[LANG][key] ?? TEXT.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
}

export function translatePage() {
  document.documentElement.lang = LANG === "zh" ? "zh-CN" : "en";
  for (const node of document.querySelectorAll("[data-t]")) node.textContent = t(node.dataset.t);
  for (const node of document.querySelectorAll("[data-t-label]")) node.setAttribute("aria-label", t(node.dataset.tLabel));
  for (const node of document.querySelectorAll("[data-t-placeholder]")) node.setAttribute("placeholder", t(node.dataset.tPlaceholder));
}
