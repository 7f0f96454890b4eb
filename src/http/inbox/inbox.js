// imrelay web inbox: follows /v1/events, shows pending interactions, answers them.
// All untrusted text goes through textContent; nothing from the server is parsed as HTML.
"use strict";

const TOKEN_KEY = "imrelay.token";
const WHO_KEY = "imrelay.who";
const RECENT_MAX = 30;

const state = {
  token: localStorage.getItem(TOKEN_KEY) || "",
  // Who answers from this browser: asked for at the first answer, remembered, changed from
  // the header.
  who: (localStorage.getItem(WHO_KEY) || "").trim(),
  // Who the token answers as, when it has a label ({ name, label } from /v1/me): the server
  // records that name whatever the page says, so the page asks for none.
  operator: null,
  // While the name dialog is open: { promise, resolve } of what it gives (null: cancelled).
  naming: null,
  // Whether the event stream is up. Answering needs it: without it the page cannot know what
  // was answered elsewhere, and the server may not be there to take an answer.
  live: false,
  // The stream was lost (and not yet back): the banner says so.
  lost: false,
  retryTimer: null,
  retryAt: 0,
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

// Answering on or off, for every pending card at once (their fieldset keeps what each
// control was, and everything typed).
function setLive(live) {
  state.live = live;
  $("answering").disabled = !live;
  if (live) state.lost = false;
  renderOffline();
}

// The banner while the server cannot be reached: what it means, and when the next try is.
function renderOffline() {
  const banner = $("offline");
  banner.hidden = state.live || !state.lost || !$("login").hidden;
  if (banner.hidden) return;
  const left = Math.ceil((state.retryAt - Date.now()) / 1000);
  $("offline-detail").textContent = "Answering is paused until the connection is back; nothing you typed is lost. " +
    (state.retryTimer && left > 0 ? "Trying again in " + left + " s." : "Trying to reconnect…");
}

function showLogin(message) {
  $("login").hidden = false;
  $("main").hidden = true;
  $("who-box").hidden = true;
  closeName(null);
  const err = $("login-error");
  err.hidden = !message;
  err.textContent = message || "";
  setConnected(false, "token required");
  setLive(false);
}

function hideLogin() {
  $("login").hidden = true;
  $("logout").hidden = !state.token;
  showMain();
  // Signed in: say at once whether this person is at the desk (passkeys.js).
  if (typeof presenceChanged === "function") presenceChanged();
}

// The inbox, and in the header who answers from here (or a way to say it beforehand; a
// labelled token's name cannot be changed here).
function showMain() {
  $("main").hidden = false;
  $("who-box").hidden = false;
  const name = answersAs();
  $("who-named").hidden = !name;
  $("who-name").textContent = name;
  $("who-token").hidden = !state.operator;
  $("who-token").textContent = state.operator ? "(token " + state.operator.label + ")" : "";
  $("who-change").hidden = !!state.operator;
  $("who-change").textContent = state.who ? "Change" : "Set your name";
}

// The name answers from here go under: the token's person, or the name given here.
function answersAs() {
  return state.operator ? state.operator.name : state.who;
}

// Whether a name must be asked for before answering: only without a labelled token.
function needsName() {
  return !state.operator && !state.who;
}

// Reads who the token answers as (a labelled token's person); unknown, the page asks for a
// name as before.
async function loadMe() {
  state.operator = null;
  try {
    const r = await fetch("/v1/me", { headers: authHeaders() });
    const me = r.ok ? await r.json() : {};
    if (me.name && me.label) state.operator = { name: me.name, label: me.label };
  } catch (_) { /* the stream reports connectivity */ }
  // A labelled token's votes are its person's: no card needs the note about this page.
  if (state.operator) document.querySelectorAll(".votes-note").forEach((n) => n.remove());
  if ($("login").hidden) showMain();
  loadPasskeys();
  presenceChanged();
}

function setWho(name) {
  state.who = name;
  localStorage.setItem(WHO_KEY, name);
  if ($("login").hidden) showMain();
}

// Asks who is answering (at the first answer, `forAnswer`, or to change it): resolves to the
// name given, or null when cancelled.
function askName(forAnswer) {
  if (state.naming) return state.naming.promise;
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  state.naming = { promise, resolve };
  $("name-then").hidden = !forAnswer;
  $("who").value = state.who;
  $("name-panel").showModal();
  $("who").focus();
  return promise;
}

function closeName(name) {
  const dialog = $("name-panel");
  const naming = state.naming;
  state.naming = null;
  if (dialog.open) dialog.close();
  if (naming) naming.resolve(name);
}

// ---------- rendering ----------

// A time of today as a time; an older one with its date.
function fmtTime(ts) {
  try {
    const d = new Date(ts);
    if (isNaN(d)) return String(ts);
    return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  } catch (_) { return String(ts); }
}

function metaLine(i) {
  const parts = [];
  if (i.agent) parts.push("agent " + i.agent);
  if (i.session) parts.push("session " + i.session);
  if (i.cwd) parts.push(i.cwd);
  if (i.route && i.route.name) parts.push("route " + i.route.name);
  parts.push("asked " + fmtTime(i.created_at));
  // Nobody on its route answered in time: posted to the places it escalates to as well.
  if (i.escalated_at) parts.push("escalated " + fmtTime(i.escalated_at));
  if (i.route && i.route.step_up) parts.push("needs a passkey");
  return parts.join(" · ");
}

function describeResolution(i) {
  const r = i.resolution;
  if (!r) return "";
  // A question or form is declined rather than denied.
  let s = i.kind !== "approval" && r.outcome === "denied" ? "declined" : r.outcome;
  // Decided by a policy rule or a grant, never shown to a person: "allowed by policy rule git-read".
  if (r.via === "policy") s += " by policy rule " + (r.by || "");
  else {
    if (r.by) s += " by " + r.by;
    if (r.via && r.via !== "system") s += " via " + r.via;
  }
  s += " at " + fmtTime(r.at);
  return s;
}

function baseCard(i) {
  const card = document.getElementById("card-template").content.firstElementChild.cloneNode(true);
  card.dataset.id = i.id;
  card.dataset.kind = i.kind;
  card.querySelector(".kind").textContent = kindOf(i);
  // A question or a form is headed by what it asks: its tool's name (AskUserQuestion,
  // imrelay:form) says nothing to a person.
  card.querySelector(".tool").textContent = i.kind === "approval" ? i.tool_name : "";
  card.querySelector(".meta").textContent = metaLine(i);
  card.querySelector(".title").textContent = i.title || i.description || "";
  return card;
}

// The votes so far on an approval that needs several people: "Needs 2 people · votes: 1 of
// 2: alice via telegram".
function votesText(i) {
  if (!i || !i.quorum || i.kind !== "approval") return "";
  const who = (vs) => vs.map((v) => v.by + " via " + v.via).join(", ");
  const allows = (i.votes || []).filter((v) => v.allow);
  const denies = (i.votes || []).filter((v) => !v.allow);
  let s = "Needs " + i.quorum.allow + " people · votes: " + allows.length + " of " + i.quorum.allow;
  if (allows.length) s += ": " + who(allows);
  if (denies.length) s += "; " + denies.length + " of " + i.quorum.deny + " to deny: " + who(denies);
  return s;
}

function showVotes(card, i) {
  const text = votesText(i);
  let line = card.querySelector(".votes");
  if (!text) { if (line) line.remove(); return; }
  if (!line) {
    line = el("p", { class: "votes" });
    card.querySelector(".body").prepend(line);
  }
  line.textContent = text;
  // Without a labelled token, every answer from this page is the administrator's one vote:
  // say so where it bites, with the way out.
  let note = card.querySelector(".votes-note");
  if (state.operator) { if (note) note.remove(); return; }
  if (!note) {
    note = el("p", { class: "votes-note" });
    line.after(note);
  }
  note.textContent = "Answers from this page count as one person (the administrator): the " +
    "other votes come from each person's own labelled token or chat.";
}

// A vote that did not decide yet, from anywhere: the card shows the votes so far.
function voted(i) {
  const entry = i && state.pending.get(i.id);
  if (!entry || i.status !== "pending") return;
  entry.interaction = i;
  showVotes(entry.el, i);
}

// A second vote by the same person, said as a person would (and as the chats say it): "You
// already voted on this (allowed by alice via telegram at 10:02:11): each person counts once."
function alreadyVoted(error) {
  const v = error.vote;
  if (!v || typeof v !== "object") return error.message || "You already voted on this: each person counts once.";
  return "You already voted on this (" + (v.allow ? "allowed" : "denied") + " by " + v.by + " via " + v.via + " at " +
    fmtTime(v.at) + "): each person counts once.";
}

function notice(card, text, isError) {
  const n = card.querySelector(".notice");
  n.hidden = false;
  n.textContent = text;
  n.className = "notice" + (isError ? " error" : "");
}

function setBusy(card, busy) {
  card.querySelectorAll("button, input, textarea, select").forEach((b) => { b.disabled = busy; });
}

// The name sent with an answer: none with a labelled token (the server knows it).
function who() {
  return state.operator ? undefined : (state.who || undefined);
}

// `onInvalid(data)` may show a 400 itself (a form shows it next to its field): true if it did.
async function respond(card, id, body, onInvalid) {
  // The name goes with the answer: asked for here the first time (cancelled: nothing is sent).
  if (needsName() && !(await askName(true))) return;
  // Answered elsewhere while the name was asked: that card has moved to the recent list.
  if (!state.pending.has(id)) return;
  if (!state.live) {
    notice(card, "Not connected to imrelay: answer once the connection is back.", true);
    return;
  }
  setBusy(card, true);
  try {
    // A route with step_up takes an answer made with a passkey only (passkeys.js).
    const entry = state.pending.get(id);
    if (entry && needsPasskey(entry.interaction)) {
      const passkey = await passkeyFor(card, id);
      if (!passkey) { setBusy(card, false); return; }
      body = Object.assign({}, body, { passkey });
    }
    const resp = await fetch("/v1/interactions/" + encodeURIComponent(id) + "/respond", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify(Object.assign({ by: who(), via: "desktop" }, body)),
    });
    const data = await resp.json().catch(() => ({}));
    // Recorded as a vote: more people must allow it.
    if (resp.status === 202 && data.vote === "recorded") {
      setBusy(card, false);
      voted(data.interaction);
      notice(card, "Vote recorded: " + (data.votes || ""), false);
      return;
    }
    if (resp.ok) { resolved(data.interaction); return; }
    if (resp.status === 409 && data.error && data.error.code === "already_voted") {
      setBusy(card, false);
      notice(card, alreadyVoted(data.error), true);
      return;
    }
    if (resp.status === 409 && data.error && data.error.interaction) {
      resolved(data.error.interaction, "Already " + describeResolution(data.error.interaction));
      return;
    }
    if (resp.status === 401) { showLogin("The token was refused."); return; }
    setBusy(card, false);
    if (resp.status === 400 && onInvalid && onInvalid(data)) return;
    notice(card, (data.error && data.error.message) || ("HTTP " + resp.status), true);
  } catch (e) {
    setBusy(card, false);
    notice(card, "Could not reach imrelay: " + e.message, true);
  }
}

// Monospace lines that wrap only between words: every run of non-spaces stays whole (a
// command's `--release` never splits into `--` and `release`), a wrapped line goes on
// indented under a ↪ mark, and a run too long for the line scrolls.
const WRAP_MAX = 20000; // characters; longer text scrolls instead of one element per word

// `lines` are strings, or { text, class } for a line of its own class (a diff's).
function codeBlock(lines, extraClass) {
  const pre = el("pre", { class: "code" + (extraClass ? " " + extraClass : "") });
  const texts = lines.map((l) => typeof l === "string" ? l : l.text);
  const whole = texts.reduce((n, t) => n + t.length, 0) <= WRAP_MAX;
  if (!whole) pre.classList.add("scroll");
  lines.forEach((l, n) => {
    const row = el("span", { class: "line" + (typeof l === "string" ? "" : " " + l.class) });
    if (whole) row.append(...words(texts[n])); else row.textContent = texts[n];
    if (n < lines.length - 1) row.append("\n");
    pre.append(row);
  });
  return pre;
}

// A line as its words (each kept whole) and the spaces between them, where it may wrap.
function words(line) {
  return line.split(/([ \t]+)/).filter((part) => part)
    .map((part) => /^[ \t]+$/.test(part) ? document.createTextNode(part) : el("span", { class: "word", text: part }));
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
      add(el("p", { class: "label", text: b.label }), codeBlock(b.lines || []), cutNote(b.cut));
    } else if (b.type === "diff") {
      const lines = (b.lines || []).map((l) => {
        const sign = { removed: "-", added: "+", context: " " }[l.op];
        return sign === undefined ? { text: "⋯", class: "gap" } : { text: sign + l.text, class: l.op };
      });
      add(el("p", { class: "label", text: b.label }), codeBlock(lines, "diff"), cutNote(b.cut));
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
  const raw = el("details", { class: "raw" }, el("summary", { text: "Raw JSON" }), codeBlock(JSON.stringify(i.input, null, 2).split("\n")));
  body.append(raw);
  loadDisplay(display, i.id, linkedId() === i.id);
  const actions = card.querySelector(".actions");
  const reason = el("input", { type: "text", class: "reason", placeholder: "Deny and say what to do instead…", "aria-label": "Deny and tell the agent what to do instead (optional: the agent reads it as your instruction)", maxlength: "4096" });
  // "Edit & approve…" opens an editor of the input with its own Approve and Cancel; what
  // is wrong with the JSON shows under it as it is typed.
  const original = JSON.stringify(i.input, null, 2);
  const editor = el("textarea", { spellcheck: "false", "aria-label": "Tool input to approve, as JSON" });
  editor.value = original;
  const editError = el("p", { class: "edit-error error", hidden: true, role: "alert" });
  const parseEdited = () => {
    let parsed;
    try { parsed = JSON.parse(editor.value); } catch (e) { return { error: "Not valid JSON: " + e.message }; }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return { error: "The input must be a JSON object ({ … })." };
    return { parsed };
  };
  const approveEdited = el("button", { class: "primary", type: "button", text: "Approve edited input", onclick: () => {
    const r = parseEdited();
    if (r.error) { editError.hidden = false; editError.textContent = r.error; return; }
    respond(card, i.id, { decision: "allow", updated_input: r.parsed });
  } });
  // While editing, only the edited approval and Cancel: the plain Approve (of the input as
  // the agent sent it) is out of reach until the edit is cancelled.
  const cancelEdit = el("button", { type: "button", text: "Cancel", onclick: () => {
    editBox.hidden = true; actions.hidden = false; editor.value = original; editError.hidden = true; approveEdited.disabled = false;
  } });
  editor.addEventListener("input", () => {
    const r = parseEdited();
    editError.hidden = !r.error;
    editError.textContent = r.error || "";
    approveEdited.disabled = !!r.error;
  });
  const editBox = el("div", { class: "edit-box", hidden: true }, editor, editError, el("div", { class: "actions" }, approveEdited, cancelEdit));
  body.append(editBox);
  const approve = el("button", { class: "primary", type: "button", text: "Approve", onclick: () => respond(card, i.id, { decision: "allow" }) });
  const deny = el("button", { class: "danger", type: "button", text: "Deny", onclick: () => {
    const message = reason.value.trim();
    respond(card, i.id, message ? { decision: "deny", message } : { decision: "deny" });
  } });
  const edit = el("button", { type: "button", text: "Edit & approve…", onclick: () => {
    editBox.hidden = false; actions.hidden = true; editor.focus();
  } });
  // "Allow similar…": the rule imrelay proposes, editable, for this session or until revoked.
  const rule = el("input", { type: "text", class: "grant-rule", spellcheck: "false", maxlength: "1000", "aria-label": "Rule of the calls to allow", placeholder: "e.g. Bash(npm run test:*)" });
  const scope = el("select", { class: "grant-scope", "aria-label": "For how long" },
    ...(i.session ? [el("option", { value: "session", text: "for this session" })] : []),
    el("option", { value: "standing", text: "until revoked" }));
  const grantError = el("p", { class: "edit-error error", hidden: true, role: "alert" });
  // An agent's "always" that outlives the session (OpenCode's: every session, while its
  // server runs) is never applied along with a grant, and is labelled as what it is.
  const lasting = Array.isArray(i.suggestions) && i.suggestions.some((u) => u && u.destination === "cliArg");
  // As the server decides (interaction::applied_with_a_grant): only scoped allow rules that
  // last no longer than the session are applied with a grant.
  const scopedRule = (r) => r && typeof r.ruleContent === "string" && r.ruleContent.trim() !== "";
  const appliedWithGrant = Array.isArray(i.suggestions) && i.suggestions.length > 0 && i.suggestions.every((u) =>
    u && u.type === "addRules" && u.behavior === "allow" && u.destination !== "cliArg" &&
    Array.isArray(u.rules) && u.rules.length > 0 && u.rules.every(scopedRule));
  const grantNote = el("p", { class: "muted", text: appliedWithGrant ? "The agent also remembers its own suggestion for this session." : "" });
  const approveSimilar = el("button", { class: "primary", type: "button", text: "Approve and allow similar", onclick: () => {
    respond(card, i.id, { decision: "allow", grant: { rule: rule.value.trim(), scope: scope.value } }, (data) => {
      const e = data.error || {};
      if (!String(e.field || "").startsWith("grant")) return false;
      // The message names the field it is about ("grant.rule: …"): the box is that field.
      const message = String(e.message || "This rule cannot be granted.");
      grantError.hidden = false;
      grantError.textContent = message.startsWith(e.field + ": ") ? message.slice(e.field.length + 2) : message;
      return true;
    }).then(loadGrants);
  } });
  const cancelSimilar = el("button", { type: "button", text: "Cancel", onclick: () => { similarBox.hidden = true; actions.hidden = false; grantError.hidden = true; } });
  const similarBox = el("div", { class: "similar-box", hidden: true },
    el("p", { class: "label", text: "Allow this and similar calls by the rule:" }), rule, scope, grantError, grantNote,
    el("div", { class: "actions" }, approveSimilar, cancelSimilar));
  body.append(similarBox);
  const similar = el("button", { type: "button", text: "Allow similar…", title: "Approve, and let imrelay allow calls this rule matches from now on", onclick: async () => {
    similarBox.hidden = false; actions.hidden = true; rule.focus();
    if (rule.value) return;
    try {
      const r = await fetch("/v1/interactions/" + encodeURIComponent(i.id) + "/display", { headers: authHeaders() });
      if (r.ok) rule.value = (await r.json()).proposed_rule || "";
    } catch (_) { /* typed by hand */ }
  } });
  // An agent that cannot run an edited input (Codex) gets no editor: imrelay would refuse it.
  actions.append(approve);
  // Several people decide it (a quorum): each approves it as it is, and no grant stands for
  // them, so neither an editor nor "allow similar" nor "always" is offered.
  const voted = !!i.quorum;
  // A passkey approval (step_up) allows this call only: a grant or an "always" would let
  // later calls through without one, and the server refuses both.
  const once = voted || needsPasskey(i);
  if (!i.input_fixed && !voted) actions.append(edit);
  if (!once) actions.append(similar);
  if (i.suggestions && !once) {
    actions.append(el("button", { type: "button", text: "Always allow", title: lasting
      ? "Approve, and let the agent allow what it suggested in every session, for as long as its server runs"
      : "Approve, and allow what the agent suggested for the rest of its session",
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
  card.querySelector(".actions").append(submit, ...declining((message) =>
    respond(card, i.id, message ? { decision: "deny", message } : { decision: "deny" })));
}

// Decline and its reason box, alike on a question, a form and a prompt: `send(message)`
// declines (the reason typed, or none).
function declining(send) {
  const reason = el("input", { type: "text", class: "reason", placeholder: "reason (optional, shown to the agent)", "aria-label": "Reason for declining (optional, shown to the agent)", maxlength: "4096" });
  const decline = el("button", { class: "danger", type: "button", text: "Decline", onclick: () => send(reason.value.trim()) });
  return [decline, reason];
}

// ---------- forms ----------
// A form is MCP elicitation's flat schema: a message and fields, each a text, number, yes/no,
// single choice or multiple choice. The server checked the schema when the form was created
// and checks every answer again; the checks here mirror its rules so that a person sees what
// is wrong next to the field before anything is sent.

const SELECT_OVER = 5; // a single choice with more options than this is a select, not radios

function nonBlank(s) {
  return typeof s === "string" && s.trim() ? s : null;
}

// The options of a choice: `enum` (with the older `enumNames` as titles) or `oneOf`/`anyOf`
// of `{const, title}`, as { value, label }.
function formOptions(p, listKey) {
  if (!p || typeof p !== "object") return [];
  if (Array.isArray(p.enum)) {
    const names = Array.isArray(p.enumNames) ? p.enumNames : [];
    return p.enum.map((v, n) => ({ value: String(v), label: nonBlank(names[n]) || String(v) }));
  }
  if (Array.isArray(p[listKey])) {
    return p[listKey].filter((o) => o && typeof o === "object")
      .map((o) => ({ value: String(o.const), label: nonBlank(o.title) || String(o.const) }));
  }
  return [];
}

// An untitled field's label, from its property name in words: `room_size`, `roomSize` and
// `room-size` are "Room size"; an acronym (URL) stays as it is. (Only here: where a person
// types a field's name, as in DingTalk's `name: value` lines, and in what an agent is told,
// the name stays as the schema has it.)
function nameLabel(name) {
  const words = [];
  let word = "", afterLower = false;
  for (const c of name) {
    if (c === "_" || c === "-" || /\s/.test(c)) {
      if (word) words.push(word);
      word = ""; afterLower = false;
      continue;
    }
    if (c !== c.toLowerCase() && afterLower) { words.push(word); word = ""; }
    afterLower = c !== c.toUpperCase() || (c >= "0" && c <= "9");
    word += c;
  }
  if (word) words.push(word);
  if (!words.length) return name;
  return words.map((w, n) => {
    const chars = [...w];
    const acronym = chars.length > 1 && !chars.some((c) => c !== c.toUpperCase());
    const shown = acronym ? w : w.toLowerCase();
    return n === 0 ? [...shown][0].toUpperCase() + [...shown].slice(1).join("") : shown;
  }).join(" ");
}

// A form interaction's fields, in the schema's order.
function formFields(input) {
  const schema = (input && input.requestedSchema) || {};
  const props = schema.properties && typeof schema.properties === "object" ? schema.properties : {};
  const required = Array.isArray(schema.required) ? schema.required : [];
  return Object.entries(props).map(([name, raw]) => {
    const p = raw && typeof raw === "object" ? raw : {};
    const f = {
      name, p,
      label: nonBlank(p.title) || nameLabel(name),
      description: nonBlank(p.description),
      required: required.includes(name),
      def: p.default,
    };
    if (p.type === "array") {
      f.type = "multi";
      f.options = formOptions(p.items, "anyOf");
    } else if (p.type === "string" && ("enum" in p || "oneOf" in p)) {
      f.type = "choice";
      f.options = formOptions(p, "oneOf");
    } else if (p.type === "number" || p.type === "integer") {
      f.type = "number";
      f.integer = p.type === "integer";
    } else if (p.type === "boolean") {
      f.type = "boolean";
    } else {
      f.type = "text";
    }
    return f;
  });
}

// A single free-text question (a prompt, or a form of one text field): shown and answered as
// a question — the question, one box, Send answer — not as a form to fill in and submit.
function isSingleText(i) {
  if (i.kind !== "form") return false;
  const fields = formFields(i.input);
  return fields.length === 1 && fields[0].type === "text";
}

// The title a prompt's one field has when the agent gave none of its own.
const PROMPT_TITLE = "Answer";

// A value as people read it: a choice by its title, a boolean as Yes/No.
function showFormValue(f, v) {
  const label = (s) => {
    const o = f && f.options ? f.options.find((o) => o.value === s) : null;
    return o ? o.label : s;
  };
  if (v === null || v === undefined) return "(none)";
  if (typeof v === "boolean") return v ? "Yes" : "No";
  if (typeof v === "string" && f && f.p && f.p.format === "date-time" && !isNaN(new Date(v))) return new Date(v).toLocaleString();
  if (typeof v === "string") return label(v);
  if (Array.isArray(v)) return v.length ? v.map((x) => typeof x === "string" ? label(x) : JSON.stringify(x)).join(", ") : "(none)";
  if (typeof v === "number") return String(v);
  return JSON.stringify(v);
}

// "Label: value" lines for accepted content, in the schema's order (anything the schema does
// not name after it, by its key).
function formAnswers(i, content) {
  const fields = formFields(i.input);
  const lines = [];
  for (const f of fields) {
    if (Object.prototype.hasOwnProperty.call(content, f.name)) lines.push([f.label, showFormValue(f, content[f.name])]);
  }
  for (const [k, v] of Object.entries(content)) {
    if (!fields.some((f) => f.name === k)) lines.push([k, showFormValue(null, v)]);
  }
  return lines;
}

const pad = (n, width) => String(n).padStart(width || 2, "0");

// A Date as a datetime-local control's value, in this browser's time zone (seconds only
// when there are some, or when `seconds` asks for them).
function localDateTime(d, seconds) {
  const s = pad(d.getFullYear(), 4) + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes());
  return seconds || d.getSeconds() ? s + ":" + pad(d.getSeconds()) : s;
}

// A datetime-local value ("2026-11-25T17:00") as RFC 3339 with this browser's offset.
function rfc3339(local) {
  const d = new Date(local); // without an offset: local time
  if (isNaN(d)) return null;
  const off = -d.getTimezoneOffset();
  const a = Math.abs(off);
  return localDateTime(d, true) + (off >= 0 ? "+" : "-") + pad(Math.floor(a / 60)) + ":" + pad(a % 60);
}

// What the server accepts as an e-mail address: something@domain, no spaces.
function isEmail(s) {
  const at = s.lastIndexOf("@");
  if (at <= 0 || at === s.length - 1) return false;
  const domain = s.slice(at + 1);
  return !domain.startsWith(".") && !domain.endsWith(".") && !/[\s\u0000-\u001f\u007f-\u009f]/u.test(s);
}

// A calendar date as the API takes it: 2026-11-25, and a day that exists.
function isDate(s) {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const [y, m, d] = s.split("-").map(Number);
  const t = new Date(0);
  t.setUTCFullYear(y, m - 1, d);
  return t.getUTCFullYear() === y && t.getUTCMonth() === m - 1 && t.getUTCDate() === d;
}

function isUri(s) {
  try { new URL(s); return true; } catch (_) { return false; }
}

const FORMAT_HINT = {
  email: "an e-mail address, like name@example.com",
  uri: "a full address, like https://example.com/page",
  date: "a date, like 2026-11-25",
  "date-time": "a date and time",
};

function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

// "A whole number from 2 to 40", "At most 200 characters", "Choose at most 2 options": a
// field's bounds in words.
function fieldHint(f) {
  const p = f.p;
  const num = (k) => typeof p[k] === "number" ? p[k] : null;
  const range = (lo, hi, unit) => {
    if (lo !== null && hi !== null) return lo === hi ? "Exactly " + plural(lo, unit[0], unit[1]) : "From " + lo + " to " + plural(hi, unit[0], unit[1]);
    if (lo !== null) return "At least " + plural(lo, unit[0], unit[1]);
    if (hi !== null) return "At most " + plural(hi, unit[0], unit[1]);
    return null;
  };
  if (f.type === "number") {
    const what = f.integer ? "A whole number" : "A number";
    const lo = num("minimum"), hi = num("maximum");
    if (lo !== null && hi !== null) return what + " from " + lo + " to " + hi;
    if (lo !== null) return what + ", at least " + lo;
    if (hi !== null) return what + ", at most " + hi;
    return f.integer ? what : null;
  }
  if (f.type === "text" && p.format === "date") return "A date, like 2026-11-25";
  if (f.type === "text") {
    const min = num("minLength");
    return range(min !== null && min > 1 ? min : null, num("maxLength"), ["character", "characters"]);
  }
  if (f.type === "multi") {
    const r = range(num("minItems"), num("maxItems"), ["option", "options"]);
    return r && "Choose " + r.charAt(0).toLowerCase() + r.slice(1);
  }
  return null;
}

// Builds one field: its label, description, control and error line. Returns { el, check,
// show, focus }: `check()` is { value } (undefined when left empty) or { error }, `show(text)`
// puts an error next to the field (none when empty).
function formControl(f, base) {
  const p = f.p;
  const ids = { desc: base + "-desc", err: base + "-err" };
  // The description, then the bounds a person would otherwise learn only from an error.
  const hint = fieldHint(f);
  const desc = f.description || hint
    ? el("div", { class: "field-desc", id: ids.desc },
      f.description ? el("p", { text: f.description }) : null, hint ? el("p", { class: "hint", text: hint }) : null)
    : null;
  const describedBy = (desc ? ids.desc + " " : "") + ids.err;
  const err = el("p", { class: "field-error", id: ids.err, "aria-live": "polite" });
  const mark = () => f.required ? el("span", { class: "req", "aria-hidden": "true", text: "*" }) : null;
  let controls = [];  // the inputs (aria-invalid goes on them, or on a radio group)
  let invalidOn = null;
  let box, read;

  const single = (control) => {
    control.id = base;
    control.setAttribute("aria-describedby", describedBy);
    if (f.required) control.setAttribute("aria-required", "true");
    controls = [control];
    box = el("div", { class: "form-field" }, el("label", { for: base, class: "field-label" }, f.label, mark()), desc, control, err);
  };
  const group = (options, kind) => {
    const fs = el("fieldset", { class: "field-group", "aria-labelledby": base + "-label", "aria-describedby": describedBy });
    if (kind === "radio") {
      fs.setAttribute("role", "radiogroup");
      if (f.required) fs.setAttribute("aria-required", "true");
      invalidOn = [fs];
    }
    fs.append(el("legend", { class: "field-label", id: base + "-label" }, f.label, mark(),
      f.required && kind !== "radio" ? el("span", { class: "sr-only", text: " (required)" }) : null));
    if (desc) fs.append(desc);
    options.forEach((o, n) => {
      const input = el("input", { type: kind, name: base, value: o.value, id: base + "-" + n });
      controls.push(input);
      fs.append(el("label", { class: "option", for: input.id }, input, " ", o.label));
    });
    fs.append(err);
    box = el("div", { class: "form-field" }, fs);
    return fs;
  };

  if (f.type === "boolean") {
    const input = el("input", { type: "checkbox", id: base, "aria-describedby": describedBy });
    input.checked = f.def === true;
    controls = [input];
    box = el("div", { class: "form-field" },
      el("label", { class: "option check", for: base }, input, " ", el("span", { class: "field-label" }, f.label, mark())), desc, err);
    read = () => ({ value: input.checked });
  } else if (f.type === "choice" && f.options.length > SELECT_OVER) {
    const select = el("select", {});
    select.append(el("option", { value: "", text: f.required ? "Choose…" : "—" }));
    for (const o of f.options) select.append(el("option", { value: o.value, text: o.label }));
    select.value = typeof f.def === "string" && f.options.some((o) => o.value === f.def) ? f.def : "";
    single(select);
    read = () => select.value === "" ? { value: undefined } : { value: select.value };
  } else if (f.type === "choice") {
    const fs = group(f.options, "radio");
    controls.forEach((c) => { c.checked = c.value === f.def; });
    if (!f.required) {
      // Radios cannot be unticked: an optional choice can be cleared.
      fs.insertBefore(el("button", { type: "button", class: "link clear", text: "Clear choice",
        onclick: () => { controls.forEach((c) => { c.checked = false; }); controls[0].dispatchEvent(new Event("change", { bubbles: true })); } }), err);
    }
    read = () => {
      const c = controls.find((c) => c.checked);
      return { value: c ? c.value : undefined };
    };
  } else if (f.type === "multi") {
    group(f.options, "checkbox");
    const def = Array.isArray(f.def) ? f.def : [];
    controls.forEach((c) => { c.checked = def.includes(c.value); });
    read = () => {
      const chosen = controls.filter((c) => c.checked).map((c) => c.value);
      const min = p.minItems, max = p.maxItems;
      if (typeof min === "number" && chosen.length < min) return { error: "Choose at least " + min + "." };
      if (typeof max === "number" && chosen.length > max) return { error: "Choose at most " + max + "." };
      return { value: chosen };
    };
  } else if (f.type === "number") {
    // A phone's numeric keypad has no minus sign: only for whole numbers that cannot be negative.
    const keypad = f.integer && typeof p.minimum === "number" && p.minimum >= 0 ? "numeric" : null;
    const input = el("input", { type: "number", inputmode: keypad, step: f.integer ? "1" : "any" });
    if (typeof p.minimum === "number") input.min = String(p.minimum);
    if (typeof p.maximum === "number") input.max = String(p.maximum);
    if (typeof f.def === "number") input.value = String(f.def);
    single(input);
    read = () => {
      if (input.validity.badInput) return { error: f.integer ? "Must be a whole number." : "Must be a number." };
      if (input.value === "") return { value: undefined };
      const x = Number(input.value);
      if (!isFinite(x)) return { error: "Must be a number." };
      if (f.integer && !Number.isInteger(x)) return { error: "Must be a whole number." };
      if (typeof p.minimum === "number" && x < p.minimum) return { error: "Must be at least " + p.minimum + "." };
      if (typeof p.maximum === "number" && x > p.maximum) return { error: "Must be at most " + p.maximum + "." };
      return { value: x };
    };
  } else {
    const format = p.format;
    let input;
    if (p.multiline === true) {
      input = el("textarea", { rows: "4", class: "field-text" });
    } else {
      // A date is typed as the API speaks it (2026-11-25), not in this browser's own order.
      const type = { email: "email", uri: "url", "date-time": "datetime-local" }[format] || "text";
      input = el("input", { type, class: "field-text" + (format === "date" ? " field-date" : "") });
      if (format === "email") input.autocomplete = "email";
      if (format === "date") { input.placeholder = "YYYY-MM-DD"; input.autocomplete = "off"; input.spellcheck = false; }
    }
    const def = typeof f.def === "string" ? f.def : "";
    let shown = def;
    if (format === "date-time" && def) {
      const d = new Date(def);
      shown = isNaN(d) ? "" : localDateTime(d);
    }
    input.value = shown;
    single(input);
    read = () => {
      if (input.validity.badInput) return { error: "Must be " + (FORMAT_HINT[format] || "valid") + " (this one is not complete)." };
      let s = input.value;
      if (!s.trim()) return { value: undefined };
      if (format === "date-time") {
        // Left as it was given: the default exactly; else this browser's local time.
        s = def && input.value === shown ? def : rfc3339(s);
        if (!s) return { error: "Must be " + FORMAT_HINT["date-time"] + "." };
      }
      const n = [...s].length;
      if (typeof p.maxLength === "number" && n > p.maxLength) return { error: "Must be at most " + plural(p.maxLength, "character", "characters") + " (now " + n + ")." };
      if (typeof p.minLength === "number" && n < p.minLength) return { error: "Must be at least " + plural(p.minLength, "character", "characters") + " (now " + n + ")." };
      if (format === "email" && !isEmail(s)) return { error: "Must be " + FORMAT_HINT.email + "." };
      if (format === "uri" && !isUri(s)) return { error: "Must be " + FORMAT_HINT.uri + "." };
      if (format === "date" && !isDate(s)) return { error: "Must be " + FORMAT_HINT.date + "." };
      // A `pattern` is the agent's regular expression: only the server checks it, in linear
      // time. The browser's engine backtracks, and a pattern like (a+)+$ would freeze the page
      // for minutes on a few dozen characters. A mismatch comes back as a 400 naming the
      // field, shown next to it like any other error.
      return { value: s };
    };
  }

  const show = (message) => {
    err.textContent = message || "";
    for (const c of invalidOn || controls) {
      if (message) c.setAttribute("aria-invalid", "true"); else c.removeAttribute("aria-invalid");
    }
    box.classList.toggle("invalid", !!message);
  };
  const check = () => {
    const r = read();
    if (!r.error && r.value === undefined && f.required) return { error: "Required." };
    return r;
  };
  const focus = () => {
    const c = controls.find((c) => c.checked && c.type === "radio") || controls[0];
    if (c) c.focus();
  };
  return { el: box, check, show, focus };
}

function formBody(card, i) {
  const body = card.querySelector(".body");
  const input = i.input || {};
  const form = el("form", { id: "answer-" + i.id, class: "elicit", novalidate: true });
  if (nonBlank(input.message)) form.append(el("p", { class: "form-message", text: input.message }));
  const fields = formFields(input).map((f, n) => {
    const c = formControl(f, "f-" + i.id + "-" + n);
    form.append(c.el);
    // Checked once changed (not while tabbing past an empty field), then as it is fixed.
    c.el.addEventListener("change", () => c.show(c.check().error));
    c.el.addEventListener("input", () => { if (c.el.classList.contains("invalid")) c.show(c.check().error); });
    return { f, c };
  });
  const single = isSingleText(i);
  if (single) {
    // The question is the label: a box for the answer, without a form's marks.
    form.classList.add("single");
    const message = form.querySelector(".form-message");
    if (message) message.classList.add("question-text");
    const { f, c } = fields[0];
    const label = c.el.querySelector("label.field-label");
    const mark = label && label.querySelector(".req");
    if (mark) mark.remove();
    if (label && f.label === PROMPT_TITLE) {
      label.className = "sr-only";
      label.textContent = "Your answer";
    }
    const box = c.el.querySelector("input, textarea");
    if (box && !box.placeholder) box.placeholder = "Your answer";
  } else if (fields.some(({ f }) => f.required)) {
    form.append(el("p", { class: "form-legend muted" }, el("span", { class: "req", "aria-hidden": "true", text: "*" }), " required"));
  }
  body.append(form);

  const byName = new Map(fields.map((x) => [x.f.name, x]));
  // A 400 that names a field (`content.<name>`) is shown next to it.
  const serverError = (data) => {
    const e = data && data.error;
    const field = e && typeof e.field === "string" && e.field.startsWith("content.") ? e.field.slice(8) : null;
    const hit = field !== null ? byName.get(field) : null;
    if (!hit) return false;
    let message = String(e.message || "is not valid");
    if (message.startsWith(e.field + ": ")) message = message.slice(e.field.length + 2);
    hit.c.show(message.charAt(0).toUpperCase() + message.slice(1) + (/[.!?]$/.test(message) ? "" : "."));
    hit.c.focus();
    notice(card, "The answer was not accepted: see " + hit.f.label + ".", true);
    return true;
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const content = Object.create(null); // a field may be called __proto__
    let first = null, bad = 0;
    for (const { f, c } of fields) {
      const r = c.check();
      c.show(r.error);
      if (r.error) { bad++; if (!first) first = c; continue; }
      if (r.value !== undefined) content[f.name] = r.value;
    }
    if (first) {
      notice(card, bad === 1 ? "One field needs attention." : bad + " fields need attention.", true);
      first.focus();
      return;
    }
    card.querySelector(".notice").hidden = true;
    respond(card, i.id, { action: "accept", content }, serverError);
  });
  const submit = el("button", { class: "primary", type: "submit", form: form.id, text: single ? "Send answer" : "Submit" });
  card.querySelector(".actions").append(submit, ...declining((message) =>
    respond(card, i.id, message ? { action: "decline", message } : { action: "decline" })));
}

function pendingCard(i) {
  const card = baseCard(i);
  // Ticked, it is among what "Approve selected" / "Deny selected" answer.
  card.querySelector(".card-head").prepend(el("input", { type: "checkbox", class: "pick", "aria-label": "Select " + (i.kind === "approval" ? i.tool_name : kindOf(i)) + " " + i.id, onchange: refreshBulk }));
  if (i.kind === "question") questionBody(card, i);
  else if (i.kind === "form") formBody(card, i);
  else approvalBody(card, i);
  showVotes(card, i);
  return card;
}

// What a resolved form asked and what was answered: "Label: value" lines (option titles,
// Yes/No), or why it was declined or cancelled.
function formResult(card, i) {
  const body = card.querySelector(".body");
  const input = i.input || {};
  if (nonBlank(input.message)) body.append(el("p", { class: "form-message asked", text: input.message }));
  const result = (i.resolution && i.resolution.result) || {};
  if (result.action === "accept" && result.content && typeof result.content === "object") {
    const lines = formAnswers(i, result.content);
    const list = el("div", { class: "answers" });
    const single = isSingleText(i);
    for (const [label, value] of lines) {
      // A single question's answer needs no label: the question is just above.
      list.append(el("p", { class: "answer" }, single ? null : el("span", { class: "answer-label", text: label + ": " }), el("span", { class: "answer-value", text: value })));
    }
    if (!lines.length) list.append(el("p", { class: "muted", text: "Submitted with no fields filled in." }));
    body.append(list);
  } else if (nonBlank(result.message)) {
    body.append(el("p", { class: "muted", text: "“" + result.message + "”" }));
  }
}

function recentCard(i) {
  const card = baseCard(i);
  const r = i.resolution || {};
  card.classList.add(r.outcome || "");
  card.querySelector(".deadline").textContent = "";
  const body = card.querySelector(".body");
  // A line of its own, so it starts as a sentence: "Allowed by Dana via desktop at …".
  const said = describeResolution(i);
  body.append(el("p", {}, el("span", { class: "outcome", text: said.charAt(0).toUpperCase() + said.slice(1) })));
  // An approval of an edited input: the agent ran that, not what it asked for.
  const allowed = r.result && r.result.behavior === "allow" ? r.result.updatedInput : null;
  const edited = i.kind === "approval" && allowed && JSON.stringify(allowed) !== JSON.stringify(i.input) ? allowed : null;
  if (i.kind === "approval") {
    // What was approved or denied, in a line: "Run: cargo test", "Edit src/lib.rs" (what was
    // asked, when an edited input was approved instead).
    const what = el("p", { class: "summary muted" });
    body.append(what);
    fetch("/v1/interactions/" + encodeURIComponent(i.id) + "/display", { headers: authHeaders() })
      .then((r) => r.ok ? r.json() : null)
      .then((d) => { if (d && d.summary) what.replaceChildren(...(edited ? ["Asked: "] : []), ...words(d.summary)); })
      .catch(() => {});
  }
  if (i.kind === "approval") showVotes(card, i);
  if (i.kind === "form") {
    formResult(card, i);
    return card;
  }
  if (i.kind === "question") questionResult(body, i);
  const msg = r.result && r.result.behavior === "deny" ? r.result.message : null;
  if (msg) body.append(el("p", { class: "muted", text: "“" + msg + "”" }));
  if (edited) {
    body.append(el("p", { class: "edited-label", text: "Approved as edited:" }), codeBlock(JSON.stringify(edited, null, 2).split("\n"), "edited"));
  }
  return card;
}

// What a resolved question asked, each with its answer ("Which database? → Postgres"), or
// only the questions when it was declined.
function questionResult(body, i) {
  const answers = (i.resolution && i.resolution.result && i.resolution.result.updatedInput &&
    i.resolution.result.updatedInput.answers) || {};
  const asked = Array.isArray(i.input && i.input.questions) ? i.input.questions.map((q) => q && String(q.question)) : [];
  const list = el("div", { class: "answers" });
  for (const q of new Set([...asked, ...Object.keys(answers)])) {
    const a = answers[q];
    const shown = a === undefined ? null : Array.isArray(a) ? a.join(", ") : String(a);
    list.append(el("p", { class: "answer" }, el("span", { class: shown === null ? "muted" : "answer-label", text: q }),
      shown === null ? null : el("span", { class: "answer-value", text: " → " + shown })));
  }
  if (list.children.length) body.append(list);
}

function renderCounts() {
  const n = state.pending.size;
  $("pending-count").textContent = String(n);
  $("empty").hidden = n > 0;
  $("recent-section").hidden = $("recent").children.length === 0;
  document.title = (n ? "(" + n + ") " : "") + "imrelay inbox";
  refreshBulk();
}

// ---------- many at once: filters, Approve selected, Deny selected ----------

const filters = { agent: "", session: "", route: "", kind: "" };
const FILTER_ANY = { agent: "any agent", session: "any session", route: "any route", kind: "any kind" };

function kindOf(i) { return isSingleText(i) ? "question" : i.kind; }
function routeOf(i) { return (i.route && i.route.name) || ""; }

// The value of filter `key` for interaction `i`.
function facet(i, key) {
  if (key === "kind") return kindOf(i);
  if (key === "route") return routeOf(i);
  return i[key] || "";
}

function shownBy(i) {
  return Object.keys(filters).every((key) => !filters[key] || facet(i, key) === filters[key]);
}

// The ticked cards the filters show (a hidden card is never answered by a bulk button).
function picked() {
  return [...state.pending.values()].filter(({ el: card }) => !card.hidden && card.querySelector(".pick").checked);
}

// Filters offer what is pending (and keep a chosen value that is gone); cards are shown
// or hidden by them; the buttons count what they would answer.
function refreshBulk() {
  for (const key of Object.keys(filters)) {
    const select = $("f-" + key);
    const values = new Set();
    for (const { interaction: i } of state.pending.values()) {
      const v = facet(i, key);
      if (v) values.add(v);
    }
    if (filters[key]) values.add(filters[key]);
    // A filter that would narrow nothing (every pending request has the same agent, or no
    // routes are configured) is not shown, unless it is in use.
    select.hidden = values.size < 2 && !filters[key];
    select.replaceChildren(el("option", { value: "", text: FILTER_ANY[key] }),
      ...[...values].sort().map((v) => el("option", { value: v, text: v })));
    select.value = filters[key];
  }
  let shown = 0;
  for (const { interaction: i, el: card } of state.pending.values()) {
    card.hidden = !shownBy(i);
    if (!card.hidden) shown++;
  }
  const ticked = picked();
  const approvals = ticked.filter(({ interaction: i }) => i.kind === "approval").length;
  // Many at once needs several: with one pending request its own card answers it (unless a
  // filter chosen earlier hides it: then the filters stay, to be cleared).
  const several = state.pending.size > 1 || Object.values(filters).some(Boolean);
  $("bulk").hidden = !several;
  $("pending").classList.toggle("single", !several);
  $("bulk-actions").hidden = ticked.length === 0;
  $("bulk-approve").textContent = "Approve selected (" + approvals + ")";
  $("bulk-approve").disabled = approvals === 0;
  $("bulk-deny").textContent = "Deny selected (" + ticked.length + ")";
  $("bulk-deny").disabled = ticked.length === 0;
  $("pick-all").checked = shown > 0 && ticked.length === shown;
  $("bulk-shown").textContent = shown < state.pending.size ? shown + " of " + state.pending.size + " shown" : "";
}

function bulkNotice(text, isError) {
  const n = $("bulk-notice");
  n.hidden = !text;
  n.textContent = text || "";
  n.className = "notice" + (isError ? " error" : "");
}

// Answers the ticked cards shown in one request (`POST /v1/respond`): each is answered on
// its own; the ones refused (answered elsewhere first, or not fitting) say why on their card.
// Approve answers approvals only: a question or form is answered on its own card.
async function answerSelected(decision) {
  if (needsName() && !(await askName(true))) return;
  if (!state.live) { bulkNotice("Not connected to imrelay: answer once the connection is back.", true); return; }
  const chosen = picked().filter(({ interaction: i }) => decision === "deny" || i.kind === "approval");
  if (!chosen.length) return;
  const left = picked().length - chosen.length;
  const body = { ids: chosen.map(({ interaction: i }) => i.id), decision, by: who(), via: "desktop" };
  const reason = $("bulk-reason").value.trim();
  if (decision === "deny" && reason) body.message = reason;
  chosen.forEach(({ el: card }) => setBusy(card, true));
  try {
    const resp = await fetch("/v1/respond", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify(body),
    });
    const data = await resp.json().catch(() => ({}));
    if (resp.status === 401) { showLogin("The token was refused."); return; }
    if (!resp.ok) {
      chosen.forEach(({ el: card }) => setBusy(card, false));
      bulkNotice((data.error && data.error.message) || ("HTTP " + resp.status), true);
      return;
    }
    const refused = [];
    for (const r of data.results || []) {
      if (r.status === 200) continue; // the event stream moves it to Recent
      const entry = state.pending.get(r.id);
      // 202: a vote recorded on an approval that needs more people, said on its card.
      if (r.status !== 202) refused.push(r);
      if (entry) { setBusy(entry.el, false); notice(entry.el, (r.error && r.error.message) || ("HTTP " + r.status), r.status !== 202); }
    }
    const verb = decision === "allow" ? "Approved " : "Denied ";
    let text = verb + plural(data.answered || 0, "request", "requests") + ".";
    if (data.voted) text += " " + plural(data.voted, "vote", "votes") + " recorded on approvals that need more people.";
    if (refused.length) text += " " + refused.length + " not answered: " + refused.map((r) => (r.error && r.error.message) || r.id).join("; ");
    if (left) text += " " + plural(left, "question or form", "questions or forms") + " left ticked: answer each on its card, or deny them.";
    bulkNotice(text, refused.length > 0);
    if (decision === "deny") $("bulk-reason").value = "";
  } catch (e) {
    chosen.forEach(({ el: card }) => setBusy(card, false));
    bulkNotice("Could not reach imrelay: " + e.message, true);
  }
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
  markLinked(card);
}

// One desktop notification per interaction, while the page is hidden; closed once answered.
function notify(i) {
  if (!document.hidden || state.notifications.has(i.id)) return;
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  try {
    const asked = i.kind === "question" && Array.isArray(i.input && i.input.questions) && i.input.questions[0];
    const what = i.kind === "form" ? (i.title || (i.input && i.input.message) || "a form")
      : asked ? String(asked.question || "a question") : i.tool_name;
    state.notifications.set(i.id, new Notification("imrelay: " + what, { body: metaLine(i), tag: i.id }));
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
  markLinked(card);
}

// ---------- a linked item: /#<id> ----------
// Telegram and Feishu link a tool call they had to cut to its item here: it is marked,
// scrolled to, and shown whole.

function linkedId() {
  let h = location.hash.slice(1);
  try { h = decodeURIComponent(h); } catch (_) { return null; }
  return /^[A-Za-z0-9._:-]{1,128}$/.test(h) ? h : null;
}

function markLinked(card) {
  const id = linkedId();
  if (!id || !card || card.dataset.id !== id) return;
  for (const c of document.querySelectorAll(".card.linked")) c.classList.remove("linked");
  card.classList.add("linked");
  let box = card.querySelector(".display");
  if (!box && card.dataset.kind === "approval") {
    box = el("div", { class: "display" });
    card.querySelector(".body").append(box);
  }
  if (box) loadDisplay(box, id, true);
  card.scrollIntoView({ block: "center" });
}

// The linked item: from the lists when it is there, else fetched (an older answered one).
async function showLinked() {
  const id = linkedId();
  if (!id) return;
  const card = document.querySelector('.card[data-id="' + CSS.escape(id) + '"]');
  if (card) { markLinked(card); return; }
  try {
    const r = await fetch("/v1/interactions/" + encodeURIComponent(id), { headers: authHeaders() });
    if (!r.ok) return; // unknown, or pruned after the retention time: nothing to show
    const i = await r.json();
    if (i.status === "pending") created(i); else resolved(i);
  } catch (_) { /* the stream reports connectivity */ }
}

function tick() {
  renderOffline();
  const now = Date.now();
  for (const { interaction, el: card } of state.pending.values()) {
    const left = Math.max(0, Math.round((new Date(interaction.deadline).getTime() - now) / 1000));
    const d = card.querySelector(".deadline");
    d.textContent = left > 0 ? "expires in " + (left >= 60 ? Math.floor(left / 60) + "m " : "") + (left % 60) + "s" : "expiring…";
    // "Desk first": the phones hear of it once the hold ends, unless it is answered here.
    const hold = holdText(interaction);
    if (hold) d.textContent += " · " + hold;
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
    else if (name === "interaction.voted") voted(i);
    else if (name === "interaction.resolved") {
      resolved(i);
      // A grant may have been made or used elsewhere: the list follows.
      if (i && i.resolution && (i.resolution.via === "policy" || i.resolution.outcome === "allowed")) loadGrants();
    }
    // A session waits, or stops waiting: its line follows (once for a burst of events).
    if (i && i.session && (name === "interaction.created" || name === "interaction.resolved")) {
      clearTimeout(state.sessionsTimer);
      state.sessionsTimer = setTimeout(loadSessions, 300);
    }
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

// ---------- grants ----------

function grantLine(g) {
  const bound = [g.route && "route " + g.route, g.agent, g.cwd && "in " + g.cwd, g.session && "session " + g.session].filter(Boolean).join(", ");
  let s = (g.scope === "session" ? "This session" : "Until revoked") + (bound ? " · " + bound : "");
  if (g.by) s += " · by " + g.by;
  if (g.via) s += " via " + g.via;
  if (g.expires_at) s += " · until " + fmtTime(g.expires_at);
  return s;
}

async function loadGrants() {
  try {
    const r = await fetch("/v1/grants", { headers: authHeaders() });
    if (!r.ok) return;
    const list = (await r.json()).grants || [];
    $("grant-count").textContent = String(list.length);
    $("grants-empty").hidden = list.length > 0;
    $("grants").replaceChildren(...list.map((g) => {
      const card = el("article", { class: "card grant", "data-grant": g.id },
        el("div", { class: "card-head" }, el("span", { class: "kind", text: "grant" }), el("code", { class: "tool", text: g.rule })),
        el("div", { class: "meta", text: grantLine(g) }));
      const revoke = el("button", { type: "button", class: "danger", text: "Revoke", onclick: async () => {
        revoke.disabled = true;
        const q = new URLSearchParams({ via: "desktop" });
        if (who()) q.set("by", who());
        try {
          const resp = await fetch("/v1/grants/" + encodeURIComponent(g.id) + "?" + q, { method: "DELETE", headers: authHeaders() });
          if (!resp.ok && resp.status !== 404) {
            const data = await resp.json().catch(() => ({}));
            notice(card, (data.error && data.error.message) || ("HTTP " + resp.status), true);
            revoke.disabled = false;
            return;
          }
        } catch (e) { notice(card, "Could not reach imrelay: " + e.message, true); revoke.disabled = false; return; }
        loadGrants();
      } });
      card.append(el("p", { class: "notice", hidden: true }), el("div", { class: "actions" }, revoke));
      return card;
    }));
  } catch (_) { /* the stream reports connectivity */ }
}

// ---------- sessions ----------

function sessionLine(s) {
  const parts = [s.agent, s.route && "route " + s.route, s.cwd && "in " + s.cwd, "last " + fmtTime(s.last_activity)];
  if (s.pending && s.pending.length) parts.push(s.pending.length + " waiting");
  const queued = (s.messages || []).filter((m) => !m.delivered_at).length;
  if (queued) parts.push(queued + " message" + (queued > 1 ? "s" : "") + " queued");
  return parts.filter(Boolean).join(" · ");
}

function sessionCard(s) {
  const card = el("article", { class: "card session", "data-session": s.agent + "/" + s.id },
    el("div", { class: "card-head" }, el("span", { class: "kind state-" + s.state, text: s.state }), el("code", { class: "tool", text: s.id })),
    el("div", { class: "meta", text: sessionLine(s) }));
  if (s.state === "finished" && s.last_message) card.append(el("p", { class: "said", text: s.last_message }));
  for (const m of (s.messages || []).slice(-3)) {
    const when = m.delivered_at ? "delivered " + fmtTime(m.delivered_at) : "queued";
    card.append(el("p", { class: "muted", text: m.by + ": " + m.text + " (" + when + ")" }));
  }
  if (s.state !== "gone") {
    // When it reaches the agent is said under the box: a placeholder is cut on a phone.
    const when = s.delivery === "turn_end" ? "Sent when its turn ends." : "Reaches it at its next step.";
    const text = el("input", { type: "text", class: "reason", maxlength: "4000", placeholder: "Tell the agent…", "aria-label": "A message to this session (" + when + ")" });
    const send = el("button", { type: "button", text: "Send", onclick: async () => {
      if (!text.value.trim()) return;
      send.disabled = true;
      const body = { text: text.value, via: "desktop" };
      if (who()) body.by = who();
      try {
        const path = "/v1/sessions/" + encodeURIComponent(s.agent) + "/" + encodeURIComponent(s.id) + "/messages";
        const resp = await fetch(path, { method: "POST", headers: authHeaders({ "Content-Type": "application/json" }), body: JSON.stringify(body) });
        if (!resp.ok) {
          const data = await resp.json().catch(() => ({}));
          notice(card, (data.error && data.error.message) || ("HTTP " + resp.status), true);
          send.disabled = false;
          return;
        }
      } catch (e) { notice(card, "Could not reach imrelay: " + e.message, true); send.disabled = false; return; }
      loadSessions();
    } });
    card.append(el("p", { class: "notice", hidden: true }), el("div", { class: "actions" }, text, send),
      el("p", { class: "muted hint", text: when }));
  }
  return card;
}

async function loadSessions() {
  try {
    const route = $("s-route").value;
    const r = await fetch("/v1/sessions" + (route ? "?route=" + encodeURIComponent(route) : ""), { headers: authHeaders() });
    if (!r.ok) return;
    const list = (await r.json()).sessions || [];
    if (!route) {
      const routes = [...new Set(list.map((s) => s.route))].sort();
      const select = $("s-route");
      select.replaceChildren(el("option", { value: "", text: "every route" }), ...routes.map((n) => el("option", { value: n, text: "route " + n })));
      select.hidden = routes.length < 2;
    }
    $("session-count").textContent = String(list.length);
    $("sessions-empty").hidden = list.length > 0;
    $("sessions").replaceChildren(...list.map(sessionCard));
  } catch (_) { /* the stream reports connectivity */ }
}

async function loadRecent() {
  try {
    const resp = await fetch("/v1/interactions?status=resolved&limit=" + RECENT_MAX, { headers: authHeaders() });
    if (!resp.ok) return;
    const data = await resp.json();
    for (const i of (data.interactions || []).slice().reverse()) resolved(i.truncated ? await whole(i) : i);
  } catch (_) { /* the stream reports connectivity */ }
}

// A listing summarizes an interaction with a big input (`truncated`): the card shows what
// was approved or edited from the whole one, read from its own endpoint.
async function whole(i) {
  try {
    const r = await fetch("/v1/interactions/" + encodeURIComponent(i.id), { headers: authHeaders() });
    return r.ok ? await r.json() : i;
  } catch (_) { return i; }
}

async function connect() {
  clearTimeout(state.retryTimer);
  state.retryTimer = null;
  renderOffline();
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
      await loadMe();
      state.unconfirmed = null;
      clearPending();
      loadRecent().then(showLinked);
      loadGrants();
      loadSessions();
    } else if (state.lost) {
      // Back after an outage: the stream replays what happened meanwhile; the recent list
      // is read again too.
      loadRecent();
    }
    hideLogin();
    setConnected(true, "live");
    setLive(true);
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
    state.lost = true;
    state.retryAt = Date.now() + state.retry;
    state.retryTimer = setTimeout(connect, state.retry);
    setLive(false);
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
    if (!name) return;
    setWho(name);
    closeName(name);
  });
  $("who-change").addEventListener("click", () => { askName(false); });
  $("who-cancel").addEventListener("click", () => closeName(null));
  // Esc, or the dialog closed any other way: cancelled. (Not the late event of a dialog
  // closed by closeName and opened again since: that one is open, and still asking.)
  $("name-panel").addEventListener("close", () => { if (!$("name-panel").open) closeName(null); });
  // A name given or changed in another tab of this browser.
  window.addEventListener("storage", (ev) => {
    if (ev.key !== WHO_KEY) return;
    state.who = (ev.newValue || "").trim();
    if ($("login").hidden) showMain();
  });
  $("offline-retry").addEventListener("click", () => connect());
  for (const key of Object.keys(filters)) {
    $("f-" + key).addEventListener("change", (ev) => { filters[key] = ev.target.value; refreshBulk(); });
  }
  $("pick-all").addEventListener("change", (ev) => {
    for (const { el: card } of state.pending.values()) if (!card.hidden) card.querySelector(".pick").checked = ev.target.checked;
    refreshBulk();
  });
  $("s-route").addEventListener("change", () => loadSessions());
  // Sessions also change with no interaction (a tool ran, a turn ended): read them again now
  // and then while the page is shown.
  setInterval(() => { if (!document.hidden && $("login").hidden) loadSessions(); }, 15000);
  $("bulk-approve").addEventListener("click", () => answerSelected("allow"));
  $("bulk-deny").addEventListener("click", () => answerSelected("deny"));
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.token = $("token").value.trim();
    localStorage.setItem(TOKEN_KEY, state.token);
    state.operator = null;
    // A fresh connection resends every pending interaction; cards from before are stale.
    state.lastEventId = null;
    connect();
  });
  $("logout").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    state.token = "";
    state.operator = null;
    clearTimeout(state.retryTimer);
    state.retryTimer = null;
    if (state.controller) state.controller.abort();
    showLogin(null);
  });
  if ("Notification" in window && Notification.permission === "default") {
    document.addEventListener("click", () => Notification.requestPermission().catch(() => {}), { once: true });
  }
  window.addEventListener("hashchange", showLinked);
  setInterval(tick, 1000);
  renderCounts();
  setLive(false);
  showMain();
  connect();
});
