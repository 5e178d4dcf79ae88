// advisorchain web: the page. Plain JavaScript, no build step, no dependencies.
// Every request carries the token the page was opened with; all text is shown as text (never HTML).
"use strict";

const TOKEN = document.querySelector('meta[name="advisorchain-token"]').content;
const $ = (id) => document.getElementById(id);

const state = {
  conversation: null, // the open conversation's id (null: a new one, not created yet)
  view: null, // the last conversation JSON rendered
  busy: false, // a turn of this tab is running
  unstored: [], // turns of this tab that failed: memory kept nothing of them, the page shows them
  pending: [], // tool calls the open conversation waits on
  version: -1,
  info: null,
  confirming: null, // the conversation whose delete button waits for its second click
};

// -- small helpers ---------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function oneLine(text) {
  return String(text).replace(/\s+/g, " ").trim();
}

function shorten(text, width) {
  const flat = oneLine(text);
  return flat.length <= width ? flat : flat.slice(0, width - 1) + "…";
}

function pretty(text) {
  if (text === null || text === undefined) return "";
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function ms(value) {
  if (value === null || value === undefined) return "";
  return value < 10 ? `${value.toFixed(1)} ms` : `${Math.round(value)} ms`;
}

function headers() {
  return { "X-Advisorchain-Token": TOKEN, "Content-Type": "application/json" };
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: headers(),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) throw new Error((data && data.error) || `the server answered ${response.status}`);
  return data;
}

function conversationPath(id) {
  return `api/conversations/${encodeURIComponent(id)}`;
}

function showBanner(message) {
  const banner = $("banner");
  banner.textContent = message ? oneLine(message) : "";
  banner.hidden = !message;
}

// -- the sidebar -----------------------------------------------------------------------------

function renderInfo(info) {
  $("model").textContent = info.scripted ? `${info.model} · scripted` : info.model;
  const notice = $("notice");
  notice.textContent = info.notice || "";
  notice.hidden = !info.notice;
  const tools = $("tools");
  tools.replaceChildren(
    ...info.tools.map((t) =>
      el(
        "li",
        { title: t.description },
        el("code", { text: t.name }),
        t.requires_approval ? el("span", { class: "badge", text: "needs approval" }) : null,
      ),
    ),
  );
  if (!info.tools.length) tools.append(el("li", { class: "muted", text: "no tools" }));
}

async function refreshList() {
  const { conversations } = await api("GET", "api/conversations");
  const list = $("conversations");
  const items = conversations
    .filter((c) => c.messages > 0 || c.running || c.id === state.conversation)
    .map((c) => conversationItem(c));
  if (state.conversation === null) {
    items.unshift(el("li", { class: "current" }, el("span", { class: "title", text: "New conversation" })));
  }
  list.replaceChildren(...items);
}

function conversationItem(c) {
  const remove = el("button", {
    class: "delete",
    type: "button",
    title: "delete this conversation",
    "aria-label": `delete conversation ${c.title || c.id}`,
    text: "×",
  });
  if (state.confirming === c.id) {
    remove.classList.add("confirm");
    remove.textContent = "delete?";
  }
  remove.addEventListener("click", async (event) => {
    event.stopPropagation();
    if (state.confirming !== c.id) {
      // a second click deletes; the list may be redrawn in between, so the page remembers which
      state.confirming = c.id;
      remove.classList.add("confirm");
      remove.textContent = "delete?";
      setTimeout(() => {
        if (state.confirming !== c.id) return;
        state.confirming = null;
        remove.classList.remove("confirm");
        remove.textContent = "×";
      }, 4000);
      return;
    }
    state.confirming = null;
    try {
      await api("DELETE", conversationPath(c.id));
      if (c.id === state.conversation) startNew();
      await refreshList();
    } catch (error) {
      showBanner(error.message);
    }
  });
  const item = el(
    "li",
    { class: c.id === state.conversation ? "current" : null, "data-id": c.id, title: c.id },
    el("span", { class: "title", text: c.title || c.id }),
    el("span", { class: "count", text: c.waiting ? "waits" : String(c.messages) }),
    remove,
  );
  item.addEventListener("click", () => openConversation(c.id));
  return item;
}

// -- opening and drawing a conversation -----------------------------------------------------

function setHash(id) {
  const hash = id === null ? "" : `#c=${encodeURIComponent(id)}`;
  if (location.hash !== hash) history.replaceState(null, "", location.pathname + location.search + hash);
}

function idFromHash() {
  const match = /^#c=(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function startNew() {
  state.conversation = null;
  state.unstored = [];
  state.view = null;
  state.pending = [];
  setHash(null);
  $("conversation-title").textContent = "New conversation";
  $("conversation-id").textContent = "";
  $("turns").replaceChildren(emptyState());
  updateComposer();
  refreshList().catch((error) => showBanner(error.message));
  $("question").focus();
}

function emptyState() {
  const info = state.info;
  const tools = info && info.tools.length ? info.tools.map((t) => t.name).join(", ") : "none";
  const examples = info && info.examples.length
    ? el(
        "div",
        { class: "examples" },
        ...info.examples.map((text) =>
          el("button", { class: "example", type: "button", text, onclick: () => !state.busy && ask(text) }),
        ),
      )
    : null;
  return el(
    "div",
    { class: "empty" },
    el("p", { text: "Ask the agent something. Its answer streams in here, with each tool call as it runs and, per turn, the tree of the run: request → advisors → tool-loop rounds → model calls → tool calls." }),
    examples,
    el("p", { class: "muted", text: `Tools: ${tools}` }),
  );
}

async function openConversation(id, options = {}) {
  showBanner("");
  let view;
  try {
    view = await api("GET", conversationPath(id));
  } catch (error) {
    showBanner(error.message);
    if (!options.quiet) startNew();
    return;
  }
  const switched = id !== state.conversation;
  if (switched) state.unstored = [];
  state.conversation = id;
  setHash(id);
  if (!switched && state.view && JSON.stringify(state.view) === JSON.stringify(view)) return;
  state.view = view;
  drawConversation(view, switched);
  if (switched) refreshList().catch((error) => showBanner(error.message));
}

function drawConversation(view, switched) {
  const open = switched ? new Set() : openDetails();
  state.pending = view.pending;
  $("conversation-title").textContent = view.title || "New conversation";
  $("conversation-id").textContent = view.id;
  const turns = view.turns.map((turn, i) => drawTurn(turn, i === view.turns.length - 1 ? view.pending : []));
  turns.push(...state.unstored);
  $("turns").replaceChildren(...(turns.length ? turns : [emptyState()]));
  for (const details of document.querySelectorAll("#turns details[data-key]")) {
    if (open.has(details.dataset.key)) details.open = true;
  }
  updateComposer();
  if (switched || !open.size) scrollToEnd();
}

function openDetails() {
  return new Set([...document.querySelectorAll("#turns details[data-key]")].filter((d) => d.open).map((d) => d.dataset.key));
}

function scrollToEnd() {
  const turns = $("turns");
  turns.scrollTop = turns.scrollHeight;
}

function drawTurn(turn, pending) {
  const key = turn.id || `t${Math.random().toString(16).slice(2)}`;
  const box = el("article", { class: "turn", "data-turn": turn.id });
  if (turn.question !== null) box.append(el("div", { class: "message user", text: turn.question }));
  const waits = new Set(pending.map((c) => c.id));
  let asked = !pending.length;
  for (const step of turn.steps) {
    if (step.type === "text") box.append(answerBlock(step.text, step.agent));
    else if (step.type === "tool") box.append(toolCard(step, key));
    else if (step.type === "run") box.append(runFooter(turn.runs[step.index], `${key}:${step.index}`));
    if (step.type === "tool" && waits.has(step.id)) waits.delete(step.id);
    if (!asked && !waits.size) {
      box.append(approvalCard(pending));
      asked = true;
    }
  }
  if (!asked) box.append(approvalCard(pending));
  return box;
}

function toolCard(step, key) {
  const status = {
    running: "running…",
    waiting: "waits for a decision",
    done: "✓",
    error: "✗ error",
  }[step.state] || step.state;
  const body = el("div", { class: "tool-body" });
  body.append(el("div", { class: "label", text: "arguments" }), el("pre", { class: "tool-arguments", text: pretty(step.arguments) }));
  if (step.state === "done") body.append(el("div", { class: "label", text: "result" }), el("pre", { class: "tool-result", text: pretty(step.result) }));
  if (step.state === "error") body.append(el("div", { class: "label", text: "error" }), el("pre", { class: "tool-error", text: step.error }));
  return el(
    "details",
    { class: `tool-call state-${step.state}`, "data-call-id": step.id, "data-key": `${key}:tool:${step.id}` },
    el(
      "summary",
      {},
      el("span", { class: "tool-icon", text: "⚙" }),
      el("span", { class: "tool-name", text: step.name }),
      el("code", { class: "tool-args", text: shorten(step.arguments || "", 60) }),
      el("span", { class: "tool-status", text: [status, ms(step.ms)].filter(Boolean).join(" · ") }),
    ),
    body,
  );
}

function approvalCard(pending) {
  const decisions = {};
  const card = el("div", { class: "approval" }, el("div", { class: "approval-title", text: "Waiting for your decision" }));
  for (const call of pending) {
    const reason = el("input", { class: "reason", type: "text", placeholder: "reason (optional)", "aria-label": `reason for ${call.name}` });
    const decide = (approved) => {
      decisions[call.id] = { approved, reason: reason.value.trim() || null };
      row.classList.add(approved ? "approved" : "denied");
      for (const button of row.querySelectorAll("button")) button.disabled = true;
      if (pending.every((c) => decisions[c.id])) resume(decisions);
    };
    const row = el(
      "div",
      { class: "pending-call", "data-call-id": call.id },
      el("div", {}, el("span", { class: "tool-name", text: call.name }), " ", el("code", { text: shorten(call.arguments, 120) })),
      el(
        "div",
        { class: "decide" },
        reason,
        el("button", { class: "approve", type: "button", text: "Approve", onclick: () => decide(true) }),
        el("button", { class: "deny", type: "button", text: "Deny", onclick: () => decide(false) }),
      ),
    );
    card.append(row);
  }
  return card;
}

function runFooter(run, key) {
  const box = el("div", { class: `run run-${run.kind}` });
  const facts = [];
  if (run.usage) {
    facts.push(el("span", { class: "usage", text: `tokens ${run.usage.prompt_tokens} in / ${run.usage.completion_tokens} out` }));
    const cost = run.usage.cost === undefined ? "n/a" : `$${run.usage.cost}`;
    facts.push(el("span", { class: "cost", text: `cost ${cost}` }));
  }
  if (run.finish_reason) facts.push(el("span", { class: "finish", text: run.finish_reason }));
  if (run.kind === "approval") facts.unshift(el("span", { class: "muted", text: "resumed after your decision" }));
  if (facts.length) box.append(el("div", { class: "run-facts" }, ...facts));
  if (run.error) box.append(el("div", { class: "error-line", text: run.error }));
  box.append(...contextBlocks(run.context || {}, key));
  if (run.trace && run.trace.length) box.append(traceBlock(run.trace, run.ms, key));
  return box;
}

// -- what the chain left in the context: evaluations, documents, citations -----------------

const CONTEXT_TITLES = { evaluations: "Evaluations", documents: "Retrieved documents", citations: "Citations", run_usage: "Run usage" };

function contextBlocks(context, key) {
  return Object.entries(context).map(([name, value]) => {
    const items = Array.isArray(value) ? value : [value];
    return el(
      "details",
      { class: `context ${name}`, "data-key": `${key}:${name}` },
      el("summary", { text: `${CONTEXT_TITLES[name] || name} (${items.length})` }),
      el("ul", {}, ...items.map((item) => el("li", {}, contextItem(name, item)))),
    );
  });
}

function contextItem(name, item) {
  if (item === null || typeof item !== "object") return el("span", { text: String(item) });
  if (name === "evaluations") {
    const mark = item.passed === true ? "✓ passed" : item.passed === false ? "✗ failed" : "";
    const score = item.score !== undefined && item.score !== null ? `score ${item.score}` : "";
    return el("div", {}, el("strong", { text: [mark, score].filter(Boolean).join(" · ") }), item.feedback ? el("div", { text: item.feedback }) : null);
  }
  const text = item.text || item.content || (item.document && (item.document.text || item.document.content));
  const rest = Object.entries(item).filter(([k, v]) => !["text", "content", "document", "embedding"].includes(k) && (typeof v !== "object" || v === null));
  return el(
    "div",
    {},
    text ? el("div", { class: "doc-text", text: shorten(text, 400) }) : null,
    rest.length ? el("div", { class: "muted", text: rest.map(([k, v]) => `${k}: ${v}`).join(" · ") }) : null,
    !text && !rest.length ? el("pre", { text: JSON.stringify(item, null, 2) }) : null,
  );
}

// -- the trace tree ----------------------------------------------------------------------------

function traceBlock(roots, total, key) {
  return el(
    "details",
    { class: "trace", "data-key": `${key}:trace` },
    el("summary", { text: `Trace · ${ms(total)}` }),
    el("ul", { class: "tree" }, ...roots.map(traceNode)),
  );
}

function traceNode(node) {
  const label = el("span", { class: `node ${node.kind}` }, el("span", { class: "node-name", text: node.name }));
  if (node.ms !== undefined) label.append(el("span", { class: "ms", text: ms(node.ms) }));
  if (node.tokens_in !== undefined || node.tokens_out !== undefined) {
    label.append(el("span", { class: "tokens", text: `tokens ${node.tokens_in ?? "?"} in / ${node.tokens_out ?? "?"} out` }));
  }
  if (node.finish_reasons) label.append(el("span", { class: "finish", text: node.finish_reasons.join(", ") }));
  if (node.arguments !== undefined) label.append(el("code", { class: "args", text: shorten(node.arguments, 60) }));
  if (node.result !== undefined) label.append(el("span", { class: "result", text: `→ ${shorten(node.result, 60)}` }));
  if (node.error !== undefined) label.append(el("span", { class: "node-error", text: `error: ${node.error}` }));
  if (!node.children.length) return el("li", {}, label);
  return el("li", {}, el("details", { open: true }, el("summary", {}, label), el("ul", {}, ...node.children.map(traceNode))));
}

// -- running a turn ----------------------------------------------------------------------------

function answerBlock(text, agent, extra = "") {
  const block = el("div", { class: `message assistant answer${extra}` });
  if (agent) block.append(el("span", { class: "agent muted", text: `[${agent}] ` }));
  block.append(document.createTextNode(text));
  return block;
}

function liveTurn(question) {
  const box = el("article", { class: "turn live" });
  if (question !== null) box.append(el("div", { class: "message user", text: question }));
  const status = el("div", { class: "status", text: "thinking…" });
  box.append(status);
  const empty = document.querySelector("#turns .empty");
  if (empty) empty.remove();
  $("turns").append(box);
  scrollToEnd();
  let text = null;
  let agent = null;
  let handed = 0;
  const cards = {};
  return {
    box,
    handle(name, data) {
      if (name === "queued") status.textContent = data.message;
      else if (name === "run") status.textContent = "thinking…";
      else if (name === "agent") {
        for (const [from, to] of data.handoffs.slice(handed)) {
          box.insertBefore(el("div", { class: "handoff muted", text: `↪ handoff ${from} → ${to}` }), status);
        }
        handed = data.handoffs.length;
        agent = data.name;
        text = null;
      } else if (name === "text") {
        if (text === null) {
          text = answerBlock("", agent, " streaming");
          box.insertBefore(text, status);
        }
        text.append(document.createTextNode(data.text));
      } else if (name === "tool") {
        text = null;
        const card = toolCard(data, "live");
        if (cards[data.id]) cards[data.id].replaceWith(card);
        else box.insertBefore(card, status);
        cards[data.id] = card;
      } else if (name === "approval") status.textContent = "waiting for your decision…";
      else if (name === "error") this.error(data.message);
      else if (name === "trace") box.append(traceBlock(data.tree, data.ms, "live"));
      else if (name === "done") status.textContent = "";
      scrollToEnd();
      return name === "done";
    },
    error(message) {
      status.remove();
      box.append(el("div", { class: "error-line", text: oneLine(message) }));
    },
  };
}

function parseFrame(frame) {
  let name = "message";
  const data = [];
  for (const line of frame.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  if (!data.length) return null;
  return { name, data: JSON.parse(data.join("\n")) };
}

async function runTurn(body, question) {
  state.busy = true;
  updateComposer();
  showBanner("");
  const live = liveTurn(question);
  let finished = false;
  try {
    const response = await fetch(`${conversationPath(state.conversation)}/turns`, {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      let data = null;
      try {
        data = await response.json();
      } catch {
        data = null;
      }
      live.error((data && data.error) || `the server answered ${response.status}`);
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = parseFrame(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (event && live.handle(event.name, event.data)) finished = true;
      }
    }
  } catch (error) {
    live.error(`the connection to the page's server broke: ${error.message}`);
  } finally {
    state.busy = false;
    updateComposer();
  }
  if (finished) {
    state.view = null;
    state.unstored = [];
    await openConversation(state.conversation, { quiet: true });
  } else {
    live.box.classList.add("unstored");
    state.unstored.push(live.box);
  }
  refreshList().catch((error) => showBanner(error.message));
}

async function ask(text) {
  if (state.conversation === null) {
    try {
      state.conversation = (await api("POST", "api/conversations")).id;
    } catch (error) {
      showBanner(error.message);
      return;
    }
    setHash(state.conversation);
  }
  await runTurn({ text }, text);
}

function resume(decisions) {
  const card = document.querySelector("#turns .approval");
  if (card) card.classList.add("decided");
  runTurn({ approvals: decisions }, null);
}

function updateComposer() {
  const waiting = state.pending.length > 0;
  $("send").disabled = state.busy || waiting;
  $("question").placeholder = waiting
    ? "Approve or deny the pending tool call first"
    : "Ask something (Enter sends, Shift+Enter starts a new line)";
}

// -- other tabs: refresh when something changed ------------------------------------------

async function poll() {
  if (state.busy || document.hidden) return;
  try {
    const { version } = await api("GET", "api/version");
    if (version === state.version) return;
    state.version = version;
    await refreshList();
    if (state.conversation !== null && !state.busy) await openConversation(state.conversation, { quiet: true });
  } catch {
    // the server may be restarting: the next poll tries again
  }
}

// -- start ---------------------------------------------------------------------------------

async function start() {
  $("ask").addEventListener("submit", (event) => {
    event.preventDefault();
    const question = $("question");
    const text = question.value.trim();
    if (!text || state.busy || state.pending.length) return;
    question.value = "";
    ask(text);
  });
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("ask").requestSubmit();
    }
  });
  $("new-conversation").addEventListener("click", startNew);
  window.addEventListener("hashchange", () => {
    const id = idFromHash();
    if (id !== null && id !== state.conversation) openConversation(id);
  });
  try {
    state.info = await api("GET", "api/info");
    renderInfo(state.info);
    const id = idFromHash();
    if (id !== null) await openConversation(id);
    else startNew();
    state.version = (await api("GET", "api/version")).version;
    await refreshList();
  } catch (error) {
    showBanner(error.message);
  }
  document.body.dataset.ready = "true";
  setInterval(poll, 1500);
}

start();
