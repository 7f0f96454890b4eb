// imrelay web inbox: follows /v1/events, shows pending interactions, answers them.
// All untrusted text goes through textContent; nothing from the server is parsed as HTML.
"use strict";

const TOKEN_KEY = "imrelay.token";
const WHO_KEY = "imrelay.who";
const RECENT_MAX = 30;

const state = {
  token: localStorage.getItem(TOKEN_KEY) || "",
  // Who answers from this browser: asked for once, remembered, changed from the header.
  who: (localStorage.getItem(WHO_KEY) || "").trim(),
  renaming: false,
  pending: new Map(),   // id -> { interaction, el }
  recent: new Map(),    // id -> interaction (resolved)
  lastEventId: null,
  controller: null,
  retry: 1000,
  // After a `reset`: ids of the cards not yet seen in the pending list that follows it.
  unconfirmed: null,
  notifications: new Map(), // id -> Notification shown for it
};

// A stream that delivers nothing (not even the 15 s keep-alive) for this long is stalled.
const STALL_MS = 45000;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, "");
    else if (v !== false && v != null) e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  if (state.token) h.Authorization = "Bearer " + state.token;
  return h;
}

function setConnected(on, text) {
  $("conn").className = "dot " + (on ? "on" : "off");
  $("conn-text").textContent = text;
}

function showLogin(message) {
  $("login").hidden = false;
  $("main").hidden = true;
  $("name-panel").hidden = true;
  const err = $("login-error");
  err.hidden = !message;
  err.textContent = message || "";
  setConnected(false, "token required");
}

function hideLogin() {
  $("login").hidden = true;
  $("logout").hidden = !state.token;
  showMain();
}

// The inbox, or the name prompt instead while no name is known (or it is being changed).
function showMain() {
  const naming = !state.who || state.renaming;
  const opening = naming && $("name-panel").hidden;
  $("name-panel").hidden = !naming;
  $("main").hidden = naming;
  $("who-cancel").hidden = !state.who;
  $("who-box").hidden = !state.who;
  $("who-name").textContent = state.who;
  if (opening) {
    $("who").value = state.who;
    $("who").focus();
  }
}

function setWho(name) {
  state.who = name;
  state.renaming = false;
  localStorage.setItem(WHO_KEY, name);
  if ($("login").hidden) showMain();
}

// ---------- rendering ----------

function fmtTime(ts) {
  try { return new Date(ts).toLocaleTimeString(); } catch (_) { return String(ts); }
}

function metaLine(i) {
  const parts = [];
  if (i.agent) parts.push("agent " + i.agent);
  if (i.session) parts.push("session " + i.session);
  if (i.cwd) parts.push(i.cwd);
  parts.push("asked " + fmtTime(i.created_at));
  return parts.join(" · ");
}

function describeResolution(i) {
  const r = i.resolution;
  if (!r) return "";
  let s = r.outcome;
  if (r.by) s += " by " + r.by;
  if (r.via && r.via !== "system") s += " via " + r.via;
  s += " at " + fmtTime(r.at);
  return s;
}

function baseCard(i) {
  const card = document.getElementById("card-template").content.firstElementChild.cloneNode(true);
  card.dataset.id = i.id;
  card.querySelector(".kind").textContent = i.kind;
  card.querySelector(".tool").textContent = i.tool_name;
  card.querySelector(".meta").textContent = metaLine(i);
  card.querySelector(".title").textContent = i.title || i.description || "";
  return card;
}

function notice(card, text, isError) {
  const n = card.querySelector(".notice");
  n.hidden = false;
  n.textContent = text;
  n.className = "notice" + (isError ? " error" : "");
}

function setBusy(card, busy) {
  card.querySelectorAll("button, input, textarea").forEach((b) => { b.disabled = busy; });
}

function who() {
  return state.who || undefined;
}

async function respond(card, id, body) {
  setBusy(card, true);
  try {
    const resp = await fetch("/v1/interactions/" + encodeURIComponent(id) + "/respond", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify(Object.assign({ by: who(), via: "desktop" }, body)),
    });
    const data = await resp.json().catch(() => ({}));
    if (resp.ok) { resolved(data.interaction); return; }
    if (resp.status === 409 && data.error && data.error.interaction) {
      resolved(data.error.interaction, "Already " + describeResolution(data.error.interaction));
      return;
    }
    if (resp.status === 401) { showLogin("The token was refused."); return; }
    setBusy(card, false);
    notice(card, (data.error && data.error.message) || ("HTTP " + resp.status), true);
  } catch (e) {
    setBusy(card, false);
    notice(card, "Could not reach imrelay: " + e.message, true);
  }
}

// The tool call as a person reads it (a command, a diff, a file's first lines), as the
// server presents it; the raw JSON stays one click away.
function renderDisplay(box, d, id) {
  box.replaceChildren();
  const add = (...nodes) => box.append(...nodes.filter((n) => n != null));
  const cutNote = (note) => note ? el("p", { class: "cut muted", text: "… " + note }) : null;
  for (const b of d.blocks || []) {
    if (b.type === "field") {
      add(el("p", { class: "field" }, el("span", { class: "label", text: b.label + ": " }), el("code", { text: b.value })), cutNote(b.cut));
    } else if (b.type === "text") {
      add(el("p", { class: "label", text: b.label }), el("pre", { text: (b.lines || []).join("\n") }), cutNote(b.cut));
    } else if (b.type === "diff") {
      const pre = el("pre", { class: "diff" });
      for (const l of b.lines || []) {
        const sign = { removed: "-", added: "+", context: " " }[l.op];
        pre.append(sign === undefined ? el("span", { class: "gap", text: "⋯" }) : el("span", { class: l.op, text: sign + l.text }));
      }
      add(el("p", { class: "label", text: b.label }), pre, cutNote(b.cut));
    } else if (b.type === "note") {
      box.append(el("p", { class: "note", text: "⚠ " + b.text }));
    }
  }
  if (d.cut) {
    box.append(el("button", { type: "button", class: "link", text: "Show all", onclick: () => loadDisplay(box, id, true) }));
  }
}

async function loadDisplay(box, id, all) {
  try {
    const r = await fetch("/v1/interactions/" + encodeURIComponent(id) + "/display" + (all ? "?all=true" : ""), { headers: authHeaders() });
    if (!r.ok) return;
    renderDisplay(box, await r.json(), id);
  } catch (e) { /* the raw JSON below still shows everything */ }
}

function approvalBody(card, i) {
  const body = card.querySelector(".body");
  const display = el("div", { class: "display" });
  body.append(display);
  const raw = el("details", { class: "raw" }, el("summary", { text: "Raw JSON" }), el("pre", { text: JSON.stringify(i.input, null, 2) }));
  body.append(raw);
  loadDisplay(display, i.id, false);
  const actions = card.querySelector(".actions");
  const reason = el("input", { type: "text", class: "reason", placeholder: "reason (optional, shown to the agent)", "aria-label": "Reason for denying (optional, shown to the agent)", maxlength: "4096" });
  const editor = el("textarea", { hidden: true, spellcheck: "false", "aria-label": "Tool input to approve, as JSON" });
  editor.value = JSON.stringify(i.input, null, 2);
  body.append(editor);
  const approve = el("button", { class: "primary", type: "button", text: "Approve", onclick: () => respond(card, i.id, { decision: "allow" }) });
  const deny = el("button", { class: "danger", type: "button", text: "Deny", onclick: () => {
    const message = reason.value.trim();
    respond(card, i.id, message ? { decision: "deny", message } : { decision: "deny" });
  } });
  const edit = el("button", { type: "button", text: "Edit & approve", onclick: () => {
    if (editor.hidden) { editor.hidden = false; edit.textContent = "Approve edited input"; editor.focus(); return; }
    let parsed;
    try { parsed = JSON.parse(editor.value); } catch (e) { notice(card, "The input is not valid JSON: " + e.message, true); return; }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) { notice(card, "The input must be a JSON object.", true); return; }
    respond(card, i.id, { decision: "allow", updated_input: parsed });
  } });
  actions.append(approve, edit);
  if (i.suggestions) {
    actions.append(el("button", { type: "button", text: "Always allow", title: "Approve, and allow what the agent suggested for the rest of its session",
      onclick: () => respond(card, i.id, { decision: "allow", always: true }) }));
  }
  actions.append(deny, reason);
}

function questionBody(card, i) {
  const form = el("form", { id: "answer-" + i.id });
  const questions = (i.input && i.input.questions) || [];
  questions.forEach((q, qi) => {
    const name = "q" + qi + "-" + i.id;
    const fs = el("fieldset", {}, el("legend", {}, el("span", { class: "chip", text: q.header }), q.question));
    const type = q.multiSelect ? "checkbox" : "radio";
    (q.options || []).forEach((o) => {
      const input = el("input", { type, name, value: o.label });
      const label = el("label", { class: "option" }, input, " " + o.label);
      if (o.description) label.append(el("small", { text: o.description }));
      fs.append(label);
    });
    const otherBox = el("input", { type, name, value: "__other__" });
    const otherText = el("input", { type: "text", class: "other-text", placeholder: "Other…", "aria-label": "Other answer to: " + q.question, maxlength: "4096" });
    otherText.addEventListener("input", () => { if (otherText.value.trim()) otherBox.checked = true; });
    fs.append(el("label", { class: "option" }, otherBox, " Other: ", otherText));
    fs.dataset.question = q.question;
    fs.dataset.multi = q.multiSelect ? "1" : "";
    form.append(fs);
  });
  card.querySelector(".body").append(form);
  // Enter in a field submits the form: answer, never navigate.
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const answers = {};
    for (const fs of form.querySelectorAll("fieldset")) {
      const picked = [];
      for (const box of fs.querySelectorAll("input[type=radio], input[type=checkbox]")) {
        if (!box.checked) continue;
        if (box.value === "__other__") {
          const text = fs.querySelector(".other-text").value.trim();
          if (!text) { notice(card, "Type your answer next to Other, or untick it.", true); return; }
          picked.push(text);
        } else picked.push(box.value);
      }
      if (!picked.length) { notice(card, "Answer every question: " + fs.dataset.question, true); return; }
      answers[fs.dataset.question] = fs.dataset.multi ? picked : picked[0];
    }
    respond(card, i.id, { answers });
  });
  // A submit button of the form (by its `form` attribute) though it sits in the actions row,
  // so that Enter in any field of the form answers.
  const submit = el("button", { class: "primary", type: "submit", form: form.id, text: "Submit" });
  const decline = el("button", { type: "button", text: "Decline", onclick: () => respond(card, i.id, { decision: "deny" }) });
  card.querySelector(".actions").append(submit, decline);
}

function pendingCard(i) {
  const card = baseCard(i);
  if (i.kind === "question") questionBody(card, i); else approvalBody(card, i);
  return card;
}

function recentCard(i) {
  const card = baseCard(i);
  const r = i.resolution || {};
  card.classList.add(r.outcome || "");
  card.querySelector(".deadline").textContent = "";
  const body = card.querySelector(".body");
  body.append(el("p", {}, el("span", { class: "outcome", text: describeResolution(i) })));
  const msg = r.result && r.result.behavior === "deny" ? r.result.message : null;
  if (msg) body.append(el("p", { class: "muted", text: "“" + msg + "”" }));
  const answers = r.result && r.result.updatedInput && r.result.updatedInput.answers;
  if (i.kind === "question" && answers) {
    for (const [q, a] of Object.entries(answers)) body.append(el("p", { class: "muted", text: q + " → " + a }));
  }
  return card;
}

function renderCounts() {
  const n = state.pending.size;
  $("pending-count").textContent = String(n);
  $("empty").hidden = n > 0;
  document.title = (n ? "(" + n + ") " : "") + "imrelay inbox";
}

function insertPending(card, i) {
  const list = $("pending");
  // Most urgent (earliest deadline) first.
  for (const child of list.children) {
    const other = state.pending.get(child.dataset.id);
    if (other && Date.parse(other.interaction.deadline) > Date.parse(i.deadline)) { list.insertBefore(card, child); return; }
  }
  list.append(card);
}

function created(i) {
  if (!i || i.status !== "pending") return;
  // Still pending: a card kept across a reset stays as it is (with whatever was typed in it).
  if (state.unconfirmed) state.unconfirmed.delete(i.id);
  if (state.pending.has(i.id) || state.recent.has(i.id)) return;
  const card = pendingCard(i);
  state.pending.set(i.id, { interaction: i, el: card });
  insertPending(card, i);
  renderCounts();
  tick();
  notify(i);
}

// One desktop notification per interaction, while the page is hidden; closed once answered.
function notify(i) {
  if (!document.hidden || state.notifications.has(i.id)) return;
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  try {
    state.notifications.set(i.id, new Notification("imrelay: " + i.tool_name, { body: metaLine(i), tag: i.id }));
  } catch (_) { /* notifications are a convenience */ }
}

function unnotify(id) {
  const n = state.notifications.get(id);
  if (n) { try { n.close(); } catch (_) {} }
  state.notifications.delete(id);
}

function resolved(i, message) {
  if (!i || !i.resolution) return;
  unnotify(i.id);
  const entry = state.pending.get(i.id);
  if (entry) { entry.el.remove(); state.pending.delete(i.id); }
  const existing = $("recent").querySelector('[data-id="' + CSS.escape(i.id) + '"]');
  if (existing) existing.remove();
  state.recent.set(i.id, i);
  const card = recentCard(i);
  if (message) notice(card, message, false);
  $("recent").prepend(card);
  while ($("recent").children.length > RECENT_MAX) {
    const last = $("recent").lastElementChild;
    state.recent.delete(last.dataset.id);
    last.remove();
  }
  renderCounts();
}

function tick() {
  const now = Date.now();
  for (const { interaction, el: card } of state.pending.values()) {
    const left = Math.max(0, Math.round((new Date(interaction.deadline).getTime() - now) / 1000));
    const d = card.querySelector(".deadline");
    d.textContent = left > 0 ? "expires in " + (left >= 60 ? Math.floor(left / 60) + "m " : "") + (left % 60) + "s" : "expiring…";
    d.classList.toggle("soon", left < 30);
  }
}

// ---------- event stream ----------

// Forgets every pending card: the stream that follows (a reset, or a fresh connection)
// sends the whole pending list again.
function clearPending() {
  for (const { el: card } of state.pending.values()) card.remove();
  state.pending.clear();
  renderCounts();
}

// After a `reset` the pending list follows, its last event carrying an id. Cards it did not
// include were answered while this page was away: drop them, and show how they ended.
function confirmPending() {
  const gone = state.unconfirmed;
  state.unconfirmed = null;
  for (const id of gone) {
    const entry = state.pending.get(id);
    if (entry) { entry.el.remove(); state.pending.delete(id); unnotify(id); }
  }
  renderCounts();
  if (gone.size) loadRecent();
}

function handleEvent(name, data, id) {
  if (id) state.lastEventId = id;
  if (name === "reset") {
    state.unconfirmed = new Set(state.pending.keys());
  } else {
    let i = null;
    try { i = JSON.parse(data); } catch (_) { /* skip a malformed event */ }
    if (name === "interaction.created") created(i);
    else if (name === "interaction.resolved") resolved(i);
  }
  if (id && state.unconfirmed) confirmPending();
}

function parseBlock(block) {
  let name = "message", data = [], id = null;
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (data.length || name === "reset") handleEvent(name, data.join("\n"), id);
}

async function loadRecent() {
  try {
    const resp = await fetch("/v1/interactions?status=resolved&limit=" + RECENT_MAX, { headers: authHeaders() });
    if (!resp.ok) return;
    const data = await resp.json();
    for (const i of (data.interactions || []).slice().reverse()) resolved(i);
  } catch (_) { /* the stream reports connectivity */ }
}

async function connect() {
  if (state.controller) state.controller.abort();
  const controller = new AbortController();
  state.controller = controller;
  let watchdog = null;
  let stalled = false;
  const headers = authHeaders({ Accept: "text/event-stream" });
  if (state.lastEventId) headers["Last-Event-ID"] = state.lastEventId;
  try {
    const resp = await fetch("/v1/events", { headers, signal: controller.signal, cache: "no-store" });
    if (resp.status === 401 || resp.status === 403) {
      const data = await resp.json().catch(() => ({}));
      const message = data.error && data.error.message;
      // Without a token a 401 just means "sign in"; any other refusal says why.
      showLogin(state.token || resp.status === 403 ? (message || "The token was refused.") : null);
      return;
    }
    if (!resp.ok || !resp.body) throw new Error("HTTP " + resp.status);
    // Without an id the stream starts with every pending interaction, so cards kept from an
    // earlier stream (say one that dropped mid-list) may be stale, and some of them may have
    // been answered meanwhile.
    if (!headers["Last-Event-ID"]) {
      state.unconfirmed = null;
      clearPending();
      loadRecent();
    }
    hideLogin();
    setConnected(true, "live");
    state.retry = 1000;
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    let lastData = Date.now();
    watchdog = setInterval(() => {
      if (Date.now() - lastData > STALL_MS) { stalled = true; controller.abort(); }
    }, 5000);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      lastData = Date.now();
      buf += value.replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        parseBlock(buf.slice(0, cut));
        buf = buf.slice(cut + 2);
      }
    }
    throw new Error("stream ended");
  } catch (e) {
    // Aborted on purpose (a new connection, or forgetting the token): nothing to retry.
    if (controller.signal.aborted && !stalled) return;
    setConnected(false, stalled ? "stalled, reconnecting…" : "reconnecting…");
    setTimeout(connect, state.retry);
    state.retry = Math.min(state.retry * 2, 15000);
  } finally {
    clearInterval(watchdog);
  }
}

// ---------- start ----------

document.addEventListener("DOMContentLoaded", () => {
  $("name-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const name = $("who").value.trim();
    if (name) setWho(name);
  });
  $("who-change").addEventListener("click", () => { state.renaming = true; showMain(); });
  $("who-cancel").addEventListener("click", () => { state.renaming = false; showMain(); });
  // A name given or changed in another tab of this browser.
  window.addEventListener("storage", (ev) => {
    if (ev.key !== WHO_KEY) return;
    state.who = (ev.newValue || "").trim();
    if ($("login").hidden) showMain();
  });
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.token = $("token").value.trim();
    localStorage.setItem(TOKEN_KEY, state.token);
    // A fresh connection resends every pending interaction; cards from before are stale.
    state.lastEventId = null;
    connect();
  });
  $("logout").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    state.token = "";
    if (state.controller) state.controller.abort();
    showLogin(null);
  });
  if ("Notification" in window && Notification.permission === "default") {
    document.addEventListener("click", () => Notification.requestPermission().catch(() => {}), { once: true });
  }
  setInterval(tick, 1000);
  renderCounts();
  showMain();
  connect();
});
