// imrelay's service worker: what makes the inbox an installable app, and what shows its Web
// Push notifications and answers their Approve and Deny actions.
//
// A push carries JSON (the `push` channel's render.rs): a prompt (title, body, the card's path,
// and for an approval its actions, each a single-use URL on this server; `quiet` when it
// replaces its own to show the votes so far), a session's digest (its Approve all and Deny
// all, or a confirmation's Yes and Cancel, each a single-use link; a tap opens the inbox;
// `quiet` when it replaces its own),
// or an outcome with the same tag, which replaces the prompt's (or the digest's)
// notification. Chromium shows at most two actions (`Notification.maxActions`). An action posts its URL: the server
// answers as the device's person, once; a refusal (already answered, used, expired) is shown
// as a notification saying so. A tap elsewhere on a notification opens its card.
"use strict";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

const ICON = "/icon-192.png";

// Shows the notification a push's JSON describes.
async function show(data) {
  if (!data || data.v !== 1 || typeof data.title !== "string") {
    // A push must show something (browsers require it): say where to look.
    data = { v: 1, type: "prompt", title: "imrelay", body: "Something is waiting: open the inbox.", tag: "imrelay", url: "/" };
  }
  const options = {
    body: data.body || "",
    tag: data.tag || "imrelay",
    icon: ICON,
    badge: ICON,
    data: { id: data.id || null, url: data.url || "/", actions: {}, digest: data.type === "digest" },
  };
  if (data.type === "prompt" || data.type === "digest") {
    options.requireInteraction = true;
    // A prompt or digest that replaces its own (the votes so far, a digest grown or
    // confirming a press) does so without a second alert.
    options.renotify = !data.quiet;
    if (data.quiet) options.silent = true;
    const actions = Array.isArray(data.actions) ? data.actions.slice(0, 2) : [];
    options.actions = actions.map((a) => ({ action: String(a.action), title: String(a.title) }));
    for (const a of actions) options.data.actions[String(a.action)] = String(a.url);
  } else {
    // The outcome replaces the prompt quietly.
    options.silent = true;
  }
  await self.registration.showNotification(data.title, options);
}

self.addEventListener("push", (event) => {
  let data = null;
  try {
    data = event.data ? event.data.json() : null;
  } catch (_) {
    data = null;
  }
  event.waitUntil(show(data));
});

// Opens (or focuses) the inbox at `url`, a path on this server.
async function openCard(url) {
  const target = new URL(url || "/", self.location.origin).href;
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const w of windows) {
    if (new URL(w.url).origin === self.location.origin) {
      if ("navigate" in w) await w.navigate(target).catch(() => null);
      return w.focus();
    }
  }
  return self.clients.openWindow(target);
}

// Answers `notification`'s `action` (allow or deny) with its single-use URL, and replaces the
// notification with what became of it. Without such an action (a tap): opens the card.
// A digest stays until the push of what it now is replaces it: a press that is refused (or
// that cannot reach imrelay) leaves it shown, with a note of why beside it.
async function answer(notification, action) {
  const d = notification.data || {};
  const url = d.actions && d.actions[action];
  if (!url || !d.digest) notification.close();
  if (!url) return openCard(d.url);
  let ok = false;
  let message;
  try {
    const r = await fetch(url, { method: "POST", credentials: "omit", cache: "no-store" });
    const body = await r.json().catch(() => ({}));
    ok = r.ok;
    message = ok ? (body.message || "Done") : ((body.error && body.error.message) || ("imrelay answered " + r.status));
  } catch (_) {
    message = "imrelay could not be reached: open the inbox to answer.";
  }
  // A digest's action is answered by a push of the digest as it now is (the confirmation,
  // or what is left), under its tag: that push, not this note, takes its place.
  if (d.digest && ok) return;
  await self.registration.showNotification(ok ? message : "Not answered", {
    body: ok ? notification.title : message,
    tag: d.digest ? notification.tag + "-note" : notification.tag,
    icon: ICON,
    badge: ICON,
    silent: true,
    data: { id: d.id, url: d.url, actions: {}, answered: ok, message },
  });
}

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(answer(event.notification, event.action));
});
