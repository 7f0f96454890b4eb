// imrelay web inbox: passkeys (WebAuthn) for answers that need one (`step_up`), and the
// presence this page reports for "desk first". Loaded after inbox.js, whose `state`,
// `authHeaders`, `el` and `$` it uses; inbox.js calls `passkeyFor` before answering a card
// whose route needs a passkey, and `holdText` for the hold a card shows.
"use strict";

// ---------- base64url <-> bytes (WebAuthn's JSON carries binary as base64url) ----------

function b64uToBytes(s) {
  const b64 = s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4);
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let k = 0; k < bin.length; k++) out[k] = bin.charCodeAt(k);
  return out;
}

function bytesToB64u(buf) {
  const bytes = new Uint8Array(buf);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// The server's `publicKey` options with their binary fields as bytes.
function creationOptions(o) {
  const pk = Object.assign({}, o.publicKey);
  pk.challenge = b64uToBytes(pk.challenge);
  pk.user = Object.assign({}, pk.user, { id: b64uToBytes(pk.user.id) });
  pk.excludeCredentials = (pk.excludeCredentials || []).map((c) => Object.assign({}, c, { id: b64uToBytes(c.id) }));
  return { publicKey: pk };
}

function requestOptions(o) {
  const pk = Object.assign({}, o.publicKey);
  pk.challenge = b64uToBytes(pk.challenge);
  pk.allowCredentials = (pk.allowCredentials || []).map((c) => Object.assign({}, c, { id: b64uToBytes(c.id) }));
  return { publicKey: pk };
}

function credentialJson(cred) {
  const r = cred.response;
  const response = { clientDataJSON: bytesToB64u(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = bytesToB64u(r.attestationObject);
    if (r.getTransports) response.transports = r.getTransports();
  } else {
    response.authenticatorData = bytesToB64u(r.authenticatorData);
    response.signature = bytesToB64u(r.signature);
    response.userHandle = r.userHandle ? bytesToB64u(r.userHandle) : null;
  }
  return {
    id: cred.id,
    rawId: bytesToB64u(cred.rawId),
    type: cred.type,
    response,
    extensions: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
  };
}

// ---------- passkeys: the list, registering, removing ----------

const passkeys = { origin: null, rpId: null, mine: [], needsCode: false };

async function apiJson(path, method, body) {
  const init = { method: method || "GET", headers: authHeaders(body ? { "Content-Type": "application/json" } : {}) };
  if (body) init.body = JSON.stringify(body);
  const r = await fetch(path, init);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = new Error((data.error && data.error.message) || ("HTTP " + r.status));
    e.code = data.error && data.error.code;
    throw e;
  }
  return data;
}

// Passkeys work only at the origin they are made for (never an IP address such as
// 127.0.0.1): where to open the inbox for them, or null when this page is there.
function passkeyPlace() {
  if (passkeys.origin) return passkeys.origin !== location.origin ? passkeys.origin : null;
  if (passkeys.rpId && location.hostname !== passkeys.rpId) {
    return location.protocol + "//" + passkeys.rpId + (location.port ? ":" + location.port : "");
  }
  return null;
}

async function loadPasskeys() {
  const box = $("passkeys");
  if (!box) return;
  try {
    const data = await apiJson("/v1/passkeys");
    passkeys.origin = data.origin || null;
    passkeys.rpId = data.rp_id || null;
    passkeys.mine = data.passkeys || [];
    $("passkey-count").textContent = String(passkeys.mine.length);
    box.replaceChildren(...passkeys.mine.map(passkeyLine));
    $("passkeys-empty").hidden = passkeys.mine.length > 0;
    // A person's first passkey needs an enrolment code from an administrator.
    passkeys.needsCode = !!data.needs_code;
    $("passkey-code").hidden = !passkeys.needsCode;
    $("passkey-code-hint").hidden = !passkeys.needsCode;
    // An administrator issues those codes (the list of waiting ones comes only to them).
    const admin = Array.isArray(data.enrolment);
    $("enrol-admin").hidden = !admin;
    if (admin) {
      $("enrol-waiting").replaceChildren(...data.enrolment.map((c) =>
        el("div", { class: "grant", text: "code waiting for " + c.person + " · good until " + new Date(c.expires_at).toLocaleString() })));
    }
    const hint = $("passkey-origin");
    const place = passkeyPlace();
    hint.hidden = !place;
    if (place) hint.textContent = "Passkeys work at " + place + " only (never at an IP address): open the inbox there to register or use one.";
  } catch (e) {
    $("passkey-notice").hidden = false;
    $("passkey-notice").textContent = "Passkeys: " + e.message;
  }
}

function passkeyLine(p) {
  const used = p.last_used_at ? "last used " + new Date(p.last_used_at).toLocaleString() : "never used";
  return el("div", { class: "grant passkey" },
    el("span", { text: p.label + " · " + p.person + " · " + used }),
    el("button", {
      type: "button", class: "link", text: "Remove",
      onclick: async () => {
        try { await apiJson("/v1/passkeys/" + encodeURIComponent(p.id), "DELETE"); } catch (e) { passkeyNotice(e.message, true); }
        loadPasskeys();
      },
    }));
}

function passkeyNotice(text, isError) {
  const n = $("passkey-notice");
  n.hidden = false;
  n.textContent = text;
  n.classList.toggle("error", !!isError);
}

async function registerPasskey() {
  if (!window.PublicKeyCredential) { passkeyNotice("This browser has no passkeys (WebAuthn).", true); return; }
  try {
    const label = ($("passkey-label").value || "").trim();
    const code = passkeys.needsCode ? ($("passkey-code").value || "").trim() : "";
    if (passkeys.needsCode && !code) { passkeyNotice("Your first passkey needs an enrolment code: ask an administrator for one and enter it here.", true); $("passkey-code").focus(); return; }
    let start;
    try {
      start = await apiJson("/v1/passkeys/register", "POST", { label: label || undefined, code: code || undefined });
    } catch (e) {
      // The person has a passkey: adding another needs an assertion with one of them.
      if (e.code !== "passkey_required") throw e;
      const proof = await apiJson("/v1/passkeys/assert", "POST");
      const got = await navigator.credentials.get(requestOptions(proof.options));
      const passkey = { challenge: proof.challenge, credential: credentialJson(got) };
      start = await apiJson("/v1/passkeys/register", "POST", { label: label || undefined, passkey });
    }
    const cred = await navigator.credentials.create(creationOptions(start.options));
    await apiJson("/v1/passkeys", "POST", { challenge: start.challenge, credential: credentialJson(cred) });
    $("passkey-code").value = "";
    passkeyNotice("Passkey registered.", false);
  } catch (e) {
    passkeyNotice("No passkey registered: " + e.message, true);
  }
  loadPasskeys();
}

// An administrator issues a single-use enrolment code for a person's first passkey.
async function issueEnrolment() {
  const out = $("enrol-code");
  out.hidden = false;
  try {
    const person = ($("enrol-person").value || "").trim();
    const c = await apiJson("/v1/passkeys/enrolment", "POST", { person });
    out.classList.remove("error");
    out.textContent = "Code for " + c.person + ": " + c.code + " (good once, until " + new Date(c.expires_at).toLocaleString() + ")";
  } catch (e) {
    out.classList.add("error");
    out.textContent = "No code issued: " + e.message;
  }
  loadPasskeys();
}

// The passkey assertion for answering interaction `id` (`{challenge, credential}`), or null
// when none could be made (the card says why).
async function passkeyFor(card, id) {
  if (!window.PublicKeyCredential) { notice(card, "This answer needs a passkey, and this browser has none (WebAuthn).", true); return null; }
  const place = passkeyPlace();
  if (place) { notice(card, "This answer needs a passkey: open the inbox at " + place + " to answer it.", true); return null; }
  try {
    const start = await apiJson("/v1/interactions/" + encodeURIComponent(id) + "/passkey", "POST");
    const cred = await navigator.credentials.get(requestOptions(start.options));
    return { challenge: start.challenge, credential: credentialJson(cred) };
  } catch (e) {
    const why = e.code === "no_passkey" ? "register one under Passkeys first" : e.message;
    notice(card, "This answer needs a passkey: " + why, true);
    return null;
  }
}

// Whether answering `i` needs a passkey.
function needsPasskey(i) {
  return !!(i && i.route && i.route.step_up);
}

// ---------- presence ("desk first") ----------

// While this page is shown and focused, it tells the server every 10 s that its person is at
// the desk; hidden or blurred, it says it left at once.
const PRESENCE_MS = 10000;
let presenceTimer = null;

function atDesk() {
  return document.visibilityState === "visible" && document.hasFocus();
}

async function reportPresence() {
  if (!$("login").hidden) return;
  const present = atDesk();
  try {
    await fetch("/v1/presence", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify({ present, via: "desktop" }),
      keepalive: true,
    });
  } catch (_) { /* the stream reports connectivity */ }
}

function presenceChanged() {
  clearInterval(presenceTimer);
  reportPresence();
  if (atDesk()) presenceTimer = setInterval(reportPresence, PRESENCE_MS);
}

// "phones notified in 12 s" while a route's desk-first hold lasts.
function holdText(i) {
  if (!i || !i.phones_at) return "";
  const left = Math.ceil((new Date(i.phones_at).getTime() - Date.now()) / 1000);
  return left > 0 ? "phones notified in " + left + " s" : "";
}

document.addEventListener("DOMContentLoaded", () => {
  const reg = $("passkey-register");
  if (reg) reg.addEventListener("click", registerPasskey);
  const enrol = $("enrol-issue");
  if (enrol) enrol.addEventListener("click", issueEnrolment);
  document.addEventListener("visibilitychange", presenceChanged);
  window.addEventListener("focus", presenceChanged);
  window.addEventListener("blur", presenceChanged);
  window.addEventListener("pagehide", () => {
    fetch("/v1/presence", {
      method: "POST", keepalive: true,
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify({ present: false, via: "desktop" }),
    }).catch(() => {});
  });
  setTimeout(() => { loadPasskeys(); presenceChanged(); }, 0);
});
