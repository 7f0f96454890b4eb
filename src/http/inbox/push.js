// imrelay web inbox, its app and Web Push part (loaded after inbox.js, whose `state`,
// `authHeaders`, `el` and `$` it uses): installs the service worker (sw.js), so the inbox can be
// added to a home screen; and, when the server's `push` channel is on, offers "Notify me on this
// device" and lists the person's devices, each removable.
"use strict";

const pushState = { info: null, busy: false };

// The bytes of a base64url text.
function pushKeyBytes(b64) {
  const s = b64.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((b64.length + 3) % 4);
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

// A name for this device, from what the browser says of itself.
function pushDeviceName() {
  const ua = navigator.userAgent || "";
  const os = /iPhone|iPad/.test(ua) ? "iPhone or iPad" : /Android/.test(ua) ? "Android" : /Mac OS X/.test(ua) ? "Mac" : /Windows/.test(ua) ? "Windows" : /Linux/.test(ua) ? "Linux" : "this device";
  const browser = /Edg\//.test(ua) ? "Edge" : /Firefox\//.test(ua) ? "Firefox" : /Chrome\//.test(ua) ? "Chrome" : /Safari\//.test(ua) ? "Safari" : "a browser";
  return os + " (" + browser + ")";
}

function pushSay(text, error) {
  const p = $("devices-notice");
  p.textContent = text;
  p.classList.toggle("error", !!error);
  p.hidden = !text;
}

function pushRender() {
  const section = $("devices-section");
  const info = pushState.info;
  section.hidden = !info;
  if (!info) return;
  const list = $("devices");
  list.replaceChildren();
  $("device-count").textContent = String(info.devices.length);
  $("devices-empty").hidden = info.devices.length > 0;
  $("devices-who").textContent = info.admin ? "Every person's devices (administrator's token)." : "Devices notified for " + (info.person || "you") + ".";
  for (const d of info.devices) {
    const remove = el("button", { type: "button", class: "danger", text: "Remove" });
    remove.addEventListener("click", () => pushRemove(d, remove));
    list.append(el("div", { class: "device", "data-device": d.id },
      el("span", { class: "device-name", text: d.name }),
      el("span", { class: "muted", text: (info.admin ? d.person + " · " : "") + (d.endpoint_host || "") + " · since " + new Date(d.created_at).toLocaleDateString() }),
      remove));
  }
  const subscribe = $("push-subscribe");
  const supported = "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
  subscribe.disabled = pushState.busy || !supported || info.admin;
  $("push-unsupported").hidden = supported;
  $("push-needs-label").hidden = !info.admin;
}

async function pushRefresh() {
  try {
    const r = await fetch("/v1/push", { headers: authHeaders(), cache: "no-store" });
    // 404: the server's push channel is off; 401: no token yet (the login shows).
    pushState.info = r.ok ? await r.json() : null;
  } catch (_) {
    pushState.info = null;
  }
  pushRender();
}

// Sends a subscription (a PushSubscription's JSON) to imrelay for this device.
async function pushRegister(json, name) {
  const r = await fetch("/v1/push/devices", {
    method: "POST",
    headers: authHeaders({ "Content-Type": "application/json" }),
    body: JSON.stringify({ endpoint: json.endpoint, keys: json.keys, name }),
  });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((body.error && body.error.message) || ("imrelay answered " + r.status));
  return body.device;
}

async function pushSubscribe() {
  pushState.busy = true;
  pushRender();
  try {
    const permission = await Notification.requestPermission();
    if (permission !== "granted") {
      pushSay("Notifications are blocked for this site: allow them in the browser's site settings (on an iPhone, add the inbox to the home screen first), then try again.", true);
      return;
    }
    const reg = await navigator.serviceWorker.ready;
    let sub = await reg.pushManager.getSubscription();
    if (!sub) {
      sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: pushKeyBytes(pushState.info.public_key) });
    }
    const device = await pushRegister(sub.toJSON(), pushDeviceName());
    pushSay("This device is notified now: " + device.name + ".");
  } catch (e) {
    pushSay("This device could not subscribe: " + (e && e.message ? e.message : e), true);
  } finally {
    pushState.busy = false;
    await pushRefresh();
  }
}

async function pushRemove(d, button) {
  button.disabled = true;
  try {
    const r = await fetch("/v1/push/devices/" + encodeURIComponent(d.id), { method: "DELETE", headers: authHeaders() });
    if (!r.ok && r.status !== 404) {
      const body = await r.json().catch(() => ({}));
      throw new Error((body.error && body.error.message) || ("imrelay answered " + r.status));
    }
    pushSay(d.name + " is no longer notified.");
  } catch (e) {
    pushSay("Could not remove " + d.name + ": " + (e && e.message ? e.message : e), true);
  }
  await pushRefresh();
}

document.addEventListener("DOMContentLoaded", () => {
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(() => null);
  }
  $("push-subscribe").addEventListener("click", pushSubscribe);
  pushRefresh();
  // After a login (or "Forget token") the list is the new token's.
  let token = state.token;
  setInterval(() => {
    if (state.token !== token) {
      token = state.token;
      pushRefresh();
    }
  }, 1000);
});
