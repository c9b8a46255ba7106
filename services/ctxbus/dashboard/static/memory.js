"use strict";
// The memory view: items from /api/memory, outcomes from /api/memory/sessions, forget through
// POST /api/memory/forget with the gateway's secret (kept in this tab's sessionStorage only).

const $ = (id) => document.getElementById(id);

function cell(text, testid) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (testid) td.dataset.testid = testid;
  return td;
}

function query() {
  const params = new URLSearchParams();
  if ($("project").value.trim()) params.set("project", $("project").value.trim());
  if ($("kind").value) params.set("kind", $("kind").value);
  if ($("stale").checked) params.set("stale", "1");
  if ($("pinned").checked) params.set("pinned", "1");
  return params.toString();
}

async function getJson(path) {
  const response = await fetch(path, { headers: { accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

async function forget(item) {
  const secret = $("secret").value.trim();
  if (!secret) {
    $("status").textContent = "Enter the gateway's secret to forget an item.";
    return;
  }
  sessionStorage.setItem("ctxbus-secret", secret);
  const response = await fetch("/api/memory/forget", {
    method: "POST",
    headers: { "content-type": "application/json", "x-ctxbus-token": secret },
    body: JSON.stringify({ project: item.project, ids: [item.id] }),
  });
  const body = await response.json();
  $("status").textContent = response.ok
    ? `Forgetting ${item.id} (${item.project}): sent to the store's owner.`
    : `Not forgotten: ${body.error}`;
  if (response.ok) setTimeout(load, 500);
}

function itemRow(item) {
  const tr = document.createElement("tr");
  tr.dataset.testid = "memory-item";
  tr.dataset.id = item.id;
  const o = item.outcomes;
  const stale = item.stale_reason ? ` (stale: ${item.stale_reason})` : " (stale)";
  const mark = item.pinned ? " (pinned)" : item.stale ? stale : "";
  tr.append(
    cell(item.id + mark, "memory-id"),
    cell(item.project),
    cell(item.kind),
    cell(item.source),
    cell(item.conviction.toFixed(2)),
    cell(item.uses),
    cell(`${o.successful} / ${o.partial} / ${o.failed}`),
    cell(item.injections),
    cell(item.last_injected || "never"),
    cell(item.title),
  );
  const action = document.createElement("td");
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = "Forget";
  button.dataset.testid = "memory-forget";
  button.addEventListener("click", () => forget(item));
  action.append(button);
  tr.append(action);
  return tr;
}

function sessionRow(session) {
  const tr = document.createElement("tr");
  const moved = session.changed
    .map((c) => `${c.id}: ${c.before.toFixed(2)} → ${c.after.toFixed(2)}`)
    .join(", ");
  tr.append(
    cell(session.at),
    cell(session.project),
    cell(session.task_id ? `task ${session.task_id}` : session.session_id),
    cell(session.outcome),
    cell(moved || "nothing injected"),
  );
  return tr;
}

async function load() {
  try {
    const items = await getJson(`/api/memory?${query()}`);
    $("items").replaceChildren(...items.items.map(itemRow));
    $("count").textContent = `${items.items.length}`;
    const params = new URLSearchParams();
    if ($("project").value.trim()) params.set("project", $("project").value.trim());
    const sessions = await getJson(`/api/memory/sessions?${params.toString()}`);
    $("sessions").replaceChildren(...sessions.sessions.map(sessionRow));
  } catch (err) {
    $("status").textContent = `Cannot read the memory: ${err.message}`;
  }
}

$("secret").value = sessionStorage.getItem("ctxbus-secret") || "";
for (const id of ["kind", "stale", "pinned"]) $(id).addEventListener("change", load);
$("project").addEventListener("change", load);
$("reload").addEventListener("click", load);
load();
