// Interface text in English and Chinese; the browser's language picks one.
const TEXT = {
  en: {
    title: "kb-agent", token: "Access token", signin: "Sign in", signout: "Sign out",
    threads: "Threads", new: "New conversation", memories: "My memories", question: "Your question",
    send: "Send", stop: "Stop (Esc)", close: "Close", approvalTitle: "Approval needed",
    reason: "Reason (optional)", approve: "Approve", reject: "Reject",
    badToken: "That token was not accepted. Enter a valid one.",
    expired: "Your token is no longer accepted. Sign in again.",
    signedInAs: "Signed in as", stillAnswering: "The answer is still being written…", untitled: "New conversation", thinking: "Thinking…",
    executing: "running", done: "done", error: "error", denied: "refused",
    approval_requested: "waiting for approval", approval_granted: "approved", approval_denied: "not approved",
    cut: "The answer was cut off (the connection to the server was lost).", reload: "Reload the conversation",
    stopped: "Stopped.", good: "Good answer", bad: "Bad answer", goodShort: "Good", badShort: "Wrong", rated: "Thanks, your rating was recorded.",
    ratedNoEffect: "Thanks. (This answer was not recorded by the agent, so the rating changes no ranking.)",
    passage: "Cited passage", noPassage: "This passage does not exist or you may not read it.",
    kept: "Facts and preferences", asked: "Questions you asked", pending: "Waiting for your confirmation", none: "Nothing here.",
    delete: "Delete", confirm: "Keep", drop: "Drop", noMemory: "Your roles do not let you see memories.",
    tool: "Tool", failed: "The request failed", empty: "Write a question first.",
  },
  zh: {
    title: "kb-agent", token: "访问令牌", signin: "登录", signout: "退出",
    threads: "会话", new: "新会话", memories: "我的记忆", question: "你的问题",
    send: "发送", stop: "停止 (Esc)", close: "关闭", approvalTitle: "需要审批",
    reason: "理由（可选）", approve: "批准", reject: "拒绝",
    badToken: "令牌无效，请输入有效的令牌。",
    expired: "你的令牌已失效，请重新登录。",
    signedInAs: "当前用户", stillAnswering: "回答仍在生成中…", untitled: "新会话", thinking: "思考中…",
    executing: "执行中", done: "完成", error: "出错", denied: "被拒绝",
    approval_requested: "等待审批", approval_granted: "已批准", approval_denied: "未批准",
    cut: "回答被中断（与服务器的连接断开）。", reload: "重新加载会话",
    stopped: "已停止。", good: "回答有用", bad: "回答有误", goodShort: "有用", badShort: "有误", rated: "谢谢，评价已记录。",
    ratedNoEffect: "谢谢。（这条回答不是助手记录的回答，评价不影响排序。）",
    passage: "引用的段落", noPassage: "该段落不存在，或你无权查看。",
    kept: "关于你的事实和偏好", asked: "你问过的问题", pending: "等待你确认", none: "暂无。",
    delete: "删除", confirm: "保留", drop: "丢弃", noMemory: "你的角色无权查看记忆。",
    tool: "工具", failed: "请求失败", empty: "请先输入问题。",
  },
};

export const LANG = (navigator.languages?.[0] || navigator.language || "en").toLowerCase().startsWith("zh")
  ? "zh"
  : "en";

export function t(key) {
  return TEXT[LANG][key] ?? TEXT.en[key] ?? key;
}

export function translatePage() {
  document.documentElement.lang = LANG === "zh" ? "zh-CN" : "en";
  for (const node of document.querySelectorAll("[data-t]")) node.textContent = t(node.dataset.t);
  for (const node of document.querySelectorAll("[data-t-label]")) node.setAttribute("aria-label", t(node.dataset.tLabel));
}
