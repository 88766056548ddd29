// g2's viewer script: live chat over the API's SSE stream, sending
// messages, and times in the browser's timezone. Text from a group is only
// ever set as textContent, never as markup.
"use strict";

function localTimes(root) {
  for (const t of root.querySelectorAll("time[datetime]")) {
    const d = new Date(t.getAttribute("datetime"));
    if (!isNaN(d)) {
      t.textContent = d.toLocaleString();
      t.title = t.getAttribute("datetime");
    }
  }
}

function csrf() {
  const m = document.querySelector('meta[name="g2-csrf"]');
  return m ? m.content : "";
}

function messageItem(m) {
  const li = document.createElement("li");
  li.className = (m.from_bot ? "message bot" : "message") + (m.passed_over ? " passed" : "");
  li.dataset.seq = m.seq;
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = m.sender_name || m.sender;
  const t = document.createElement("time");
  t.setAttribute("datetime", m.timestamp);
  t.textContent = m.timestamp;
  const text = document.createElement("div");
  text.className = "text";
  text.textContent = m.text;
  li.append(who, " ", t);
  if (m.passed_over) {
    const note = document.createElement("span");
    note.className = "note";
    note.textContent = "not shown to the agent";
    li.append(" ", note);
  }
  li.append(text);
  for (const a of m.attachments || []) li.append(fileItem(a, listFolder()));
  localTimes(li);
  return li;
}

// The folder of the chat a message item goes into.
function listFolder() {
  const list = document.getElementById("messages");
  return list ? list.dataset.folder : "";
}

// One file of a message: the same shape the page is built with.
function fileItem(a, folder) {
  const div = document.createElement("div");
  div.className = "file";
  const rest = a.path && a.path.startsWith("media/") ? a.path.slice("media/".length) : null;
  if (!rest) {
    div.className = "file missing";
    div.textContent = a.name + ": " + (a.note || "not kept");
    return div;
  }
  const src = "/groups/" + encodeURIComponent(folder) + "/media/" + rest.split("/").map(encodeURIComponent).join("/");
  let el;
  if (a.kind === "image") {
    el = document.createElement("img");
    el.alt = a.name;
    el.loading = "lazy";
  } else if (a.kind === "voice" || a.kind === "audio" || a.kind === "video") {
    el = document.createElement(a.kind === "video" ? "video" : "audio");
    el.controls = true;
    el.preload = "none";
    el.title = a.name;
  } else {
    el = document.createElement("a");
    el.download = "";
    el.textContent = a.name;
    el.href = src;
    div.append(el);
    return div;
  }
  el.src = src;
  div.append(el);
  return div;
}

function chat(list) {
  const folder = list.dataset.folder;
  const live = document.getElementById("live");
  const seen = new Set(Array.from(list.querySelectorAll("[data-seq]"), (li) => li.dataset.seq));
  const src = new EventSource(
    "/api/groups/" + encodeURIComponent(folder) + "/stream?after=" + encodeURIComponent(list.dataset.after),
  );
  src.onopen = () => { live.textContent = "live"; };
  src.onerror = () => { live.textContent = "reconnecting…"; };
  src.addEventListener("message", (e) => {
    const m = JSON.parse(e.data);
    if (seen.has(String(m.seq))) return;
    seen.add(String(m.seq));
    const empty = document.getElementById("no-messages");
    if (empty) empty.remove();
    list.append(messageItem(m));
    list.lastElementChild.scrollIntoView({ block: "nearest" });
  });

  // The agent's state while it works, from the queue.
  const agent = document.getElementById("agent-status");
  const poll = async () => {
    try {
      const r = await fetch("/api/queue");
      if (!r.ok) return;
      const q = await r.json();
      const mine = (q.running || []).find((x) => x.group === folder);
      const waiting = (q.waiting || []).indexOf(folder);
      agent.textContent = mine && mine.outstanding > 0 ? "· the agent is working…"
        : waiting >= 0 ? "· waiting for a free container" : "";
    } catch (_) { /* the next poll tries again */ }
  };
  poll();
  setInterval(poll, 2000);

  const form = document.getElementById("send");
  const error = document.getElementById("send-error");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const data = new FormData(form);
    const sender = String(data.get("sender") || "").trim();
    const body = { sender: sender, sender_name: sender, text: String(data.get("text") || "") };
    try {
      const r = await fetch("/api/groups/" + encodeURIComponent(folder) + "/messages", {
        method: "POST",
        headers: { "content-type": "application/json", "x-g2-csrf": csrf() },
        body: JSON.stringify(body),
      });
      if (!r.ok) {
        const j = await r.json().catch(() => null);
        error.textContent = (j && j.error && j.error.message) || ("the host answered " + r.status);
        return;
      }
      form.elements.text.value = "";
    } catch (err) {
      error.textContent = "the host could not be reached: " + err;
    }
  });
}

// A form with data-api is sent to that API route as JSON (fields marked
// data-number as numbers), after data-confirm is confirmed; the page is
// then reloaded to show the new state. Errors are shown in its alert.
function apiForm(form) {
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const error = form.querySelector('[role="alert"]');
    if (error) error.textContent = "";
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) return;
    const body = {};
    for (const el of form.elements) {
      if (!el.name) continue;
      body[el.name] = "number" in el.dataset ? Number(el.value) : el.value;
    }
    const method = form.dataset.method || "POST";
    const init = { method: method, headers: { "x-g2-csrf": csrf() } };
    if (method !== "DELETE") {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    try {
      const r = await fetch(form.dataset.api, init);
      if (!r.ok) {
        const j = await r.json().catch(() => null);
        if (error) error.textContent = (j && j.error && j.error.message) || ("the host answered " + r.status);
        return;
      }
      window.location.reload();
    } catch (err) {
      if (error) error.textContent = "the host could not be reached: " + err;
    }
  });
}

// The sign-in form (data-login) is sent by the script, so a refusal (a
// wrong token, too many of them: the API's error shape) is shown in its
// alert; a sign-in is followed by the groups page. Without the script the
// browser posts the form itself.
function loginForm(form) {
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const error = form.querySelector('[role="alert"]');
    error.textContent = "";
    try {
      const r = await fetch(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)) });
      if (r.ok) {
        window.location.assign("/");
        return;
      }
      const j = await r.json().catch(() => null);
      error.textContent = (j && j.error && j.error.message) || ("the host answered " + r.status);
    } catch (err) {
      error.textContent = "the host could not be reached: " + err;
    }
  });
}

// The memory page's live feed: what the group's memory stores, as it is
// stored, filtered by kind.
function memoryFeed(list) {
  const live = document.getElementById("feed-live");
  const kind = document.getElementById("feed-kind");
  const session = document.getElementById("feed-session");
  const show = (li) => {
    li.hidden = (kind.value !== "" && li.dataset.kind !== kind.value)
      || (session.value.trim() !== "" && !(li.dataset.session || "").startsWith(session.value.trim()));
  };
  const all = () => { for (const li of list.querySelectorAll("li[data-kind]")) show(li); };
  kind.addEventListener("change", all);
  session.addEventListener("input", all);
  const src = new EventSource("/api/groups/" + encodeURIComponent(list.dataset.folder) + "/memory/stream");
  src.onopen = () => { live.textContent = "live"; };
  src.onerror = () => { live.textContent = "reconnecting…"; };
  src.addEventListener("memory", (e) => {
    const m = JSON.parse(e.data);
    const empty = document.getElementById("feed-empty");
    if (empty) empty.remove();
    const li = document.createElement("li");
    li.dataset.kind = m.kind;
    li.dataset.session = m.session_id || "";
    const tag = document.createElement("span");
    tag.className = "tag";
    tag.textContent = m.kind;
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = " " + m.text + " ";
    const t = document.createElement("time");
    t.setAttribute("datetime", m.at);
    t.textContent = m.at;
    li.append(tag, text, t);
    if (m.session_id) {
      const s = document.createElement("span");
      s.className = "muted";
      s.textContent = " · session " + m.session_id;
      li.append(s);
    }
    localTimes(li);
    show(li);
    list.prepend(li);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  const list = document.getElementById("messages");
  if (list) chat(list);
  const feed = document.getElementById("feed");
  if (feed) memoryFeed(feed);
  for (const form of document.querySelectorAll("form[data-api]")) apiForm(form);
  for (const form of document.querySelectorAll("form[data-login]")) loginForm(form);
});
