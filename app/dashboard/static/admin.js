// Intake admin dashboard: reads and acts through the JSON admin API with the bearer token the
// admin typed, kept in sessionStorage only (this tab, until it closes). Everything shown is set
// with textContent: nothing from the API is ever parsed as HTML.
"use strict";

const TOKEN_KEY = "intake.adminToken";
const PAGE_SIZE = 50;
const ERROR_CHARS = 280; // on the card; the history has every error in full
const $ = (selector, root = document) => root.querySelector(selector);

let nextCursor = null;

class Unauthorized extends Error {}

// --- the API ---------------------------------------------------------------------------------

async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json", Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY) || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  if (response.status === 401) throw new Unauthorized("the admin token was refused");
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(describe(data.detail) || `${response.status} ${response.statusText}`);
  return data;
}

function describe(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) return detail.map((d) => d.msg).join("; ");
  return "";
}

// --- signing in and out ----------------------------------------------------------------------

function showSignedIn(signedIn) {
  $("#sign-in").hidden = signedIn;
  $("#dashboard").hidden = !signedIn;
  $("#session-actions").hidden = !signedIn;
}

async function signIn(event) {
  event.preventDefault();
  const field = $("#token");
  sessionStorage.setItem(TOKEN_KEY, field.value.trim());
  field.value = "";
  if (await refresh()) say("Signed in.");
}

function signOut(reason) {
  sessionStorage.removeItem(TOKEN_KEY);
  showSignedIn(false);
  say(reason || "Signed out.", Boolean(reason));
  $("#token").focus();
}

function say(text, isError = false) {
  const box = $("#message");
  box.textContent = text;
  box.classList.toggle("error", isError);
  box.hidden = !text;
}

// --- loading ---------------------------------------------------------------------------------

async function refresh() {
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    showSignedIn(false);
    return false;
  }
  try {
    const [status, stats, dead] = await Promise.all([
      api("/api/queue/status"),
      api("/api/dlq/stats"),
      api(deadListPath(null)),
    ]);
    showSignedIn(true);
    renderQueue(status);
    renderStats(stats);
    renderDead(dead, false);
    return true;
  } catch (error) {
    if (error instanceof Unauthorized) signOut("That token was refused. Check ADMIN_TOKEN and try again.");
    else say(`Could not load the dashboard: ${error.message}`, true);
    return false;
  }
}

function deadListPath(cursor) {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
  const type = $("#dlq-type").value;
  if (type) params.set("type", type);
  if (cursor) params.set("cursor", cursor);
  return `/api/dlq?${params}`;
}

async function loadMore() {
  try {
    renderDead(await api(deadListPath(nextCursor)), true);
  } catch (error) {
    handle(error);
  }
}

function handle(error) {
  if (error instanceof Unauthorized) signOut("That token was refused. Check ADMIN_TOKEN and try again.");
  else say(error.message, true);
}

// --- rendering -------------------------------------------------------------------------------

function renderQueue(status) {
  const columns = [...document.querySelectorAll("#queue-table thead th[data-status]")];
  const byType = new Map();
  for (const group of status.groups) {
    if (!byType.has(group.operation_type)) byType.set(group.operation_type, {});
    byType.get(group.operation_type)[group.status] = group.count;
  }
  const body = $("#queue-table tbody");
  body.replaceChildren();
  for (const [type, counts] of [...byType.entries()].sort()) {
    const row = body.insertRow();
    row.dataset.type = type;
    const name = document.createElement("th");
    name.scope = "row";
    name.textContent = type;
    row.append(name);
    for (const column of columns) {
      const s = column.dataset.status;
      const cell = row.insertCell();
      cell.dataset.status = s;
      cell.className = column.className;
      cell.textContent = String(counts[s] || 0);
      cell.classList.toggle("zero", !counts[s]);
    }
  }
  if (!byType.size) {
    const cell = body.insertRow().insertCell();
    cell.colSpan = columns.length + 1;
    cell.textContent = "The queue is empty.";
  }
  const age = status.oldest_claimable_age_seconds;
  const window = status.finished_within_seconds ? ` Finished columns cover the last ${Math.round(status.finished_within_seconds / 3600)} h.` : "";
  $("#queue-summary").textContent = (age == null ? "Nothing is waiting to run." : `Oldest due operation has waited ${duration(age)}.`) + window;
  renderDestinations(status.destinations);
}

function renderDestinations(destinations) {
  const list = $("#destinations");
  list.replaceChildren();
  for (const d of destinations.filter((d) => d.consecutive_failures > 0 || d.resting)) {
    const item = document.createElement("li");
    item.classList.toggle("resting", d.resting);
    const state = d.resting ? `resting until ${when(d.open_until)}` : `${d.consecutive_failures} failure(s) in a row`;
    item.textContent = `${d.destination}: ${state}${d.last_error ? ` — ${d.last_error}` : ""}`;
    list.append(item);
  }
}

function renderStats(stats) {
  $("#dlq-stats").textContent =
    `${stats.dead} dead · ${stats.retrying} retrying · ${stats.resolved} resolved · ${stats.discarded} discarded`;
}

function renderDead(page, append) {
  const list = $("#dead-list");
  if (!append) list.replaceChildren();
  for (const operation of page.items) list.append(deadItem(operation));
  nextCursor = page.next_cursor;
  $("#load-more").hidden = !nextCursor;
  $("#dlq-empty").hidden = list.children.length > 0;
}

function deadItem(operation) {
  const item = $("#dead-item").content.firstElementChild.cloneNode(true);
  item.dataset.id = operation.id;
  item.dataset.type = operation.operation_type;
  $(".type", item).textContent = operation.operation_type;
  $(".integration", item).textContent = operation.integration_id || "";
  $(".op-id", item).textContent = operation.id;
  $(".last-error", item).textContent = shorten(operation.last_error || "(no error recorded)", ERROR_CHARS);
  $(".facts", item).textContent =
    `dead ${when(operation.dead_at)} after ${operation.attempts} of ${operation.max_attempts} attempts` +
    (operation.manual_retries ? ` · retried by hand ${operation.manual_retries}×` : "") +
    (operation.destination ? ` · ${operation.destination}` : "");
  $(".history summary", item).textContent = `History (${operation.history.length} attempt${operation.history.length === 1 ? "" : "s"})`;
  const attempts = $(".attempts", item);
  for (const attempt of operation.history) attempts.append(attemptItem(attempt));
  $(".retry", item).addEventListener("click", () => act(item, "retry"));
  $(".discard", item).addEventListener("click", () => act(item, "discard"));
  return item;
}

function attemptItem(attempt) {
  const entry = document.createElement("li");
  const parts = [
    attempt.run > 1 ? `run ${attempt.run}, attempt ${attempt.attempt}` : `attempt ${attempt.attempt}`,
    when(attempt.at),
    attempt.outcome,
    attempt.http_status ? `HTTP ${attempt.http_status}` : null,
    attempt.duration_ms != null ? `${attempt.duration_ms} ms` : null,
  ].filter(Boolean);
  entry.textContent = `${parts.join(" · ")}${attempt.error ? ` — ${attempt.error}` : ""}`;
  if (attempt.excerpt) {
    const excerpt = document.createElement("code");
    excerpt.className = "excerpt";
    excerpt.textContent = attempt.excerpt;
    entry.append(excerpt);
  }
  return entry;
}

// --- acting ----------------------------------------------------------------------------------

async function act(item, verb) {
  const id = item.dataset.id;
  if (verb === "discard" && !window.confirm(`Discard ${item.dataset.type} operation ${id}? It will never run.`)) return;
  for (const button of item.querySelectorAll("button")) button.disabled = true;
  try {
    await api(`/api/dlq/${encodeURIComponent(id)}/${verb}`, { method: "POST" });
    item.remove();
    say(verb === "retry" ? `Retried ${id}: it runs again shortly.` : `Discarded ${id}.`);
    await refresh();
  } catch (error) {
    for (const button of item.querySelectorAll("button")) button.disabled = false;
    handle(error);
  }
}

async function bulkRetry() {
  const type = $("#dlq-type").value;
  const what = type ? `every dead ${type} operation` : "every dead operation";
  if (!window.confirm(`Retry ${what}?`)) return;
  const button = $("#bulk-retry");
  button.disabled = true;
  try {
    const result = await api("/api/dlq/retry", { method: "POST", body: type ? { type } : {} });
    say(`Retried ${result.retried} dead operation${result.retried === 1 ? "" : "s"}.`);
    await refresh();
  } catch (error) {
    handle(error);
  } finally {
    button.disabled = false;
  }
}

function labelBulkRetry() {
  const type = $("#dlq-type").value;
  $("#bulk-retry").textContent = type ? `Retry all dead ${type}` : "Retry all dead";
}

// --- formatting ------------------------------------------------------------------------------

function when(value) {
  if (!value) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

function shorten(text, chars) {
  return text.length <= chars ? text : `${text.slice(0, chars - 1)}…`;
}

function duration(seconds) {
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

// --- wiring ----------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("#sign-in-form").addEventListener("submit", signIn);
  $("#sign-out").addEventListener("click", () => signOut());
  $("#refresh").addEventListener("click", async () => { if (await refresh()) say("Up to date."); });
  $("#load-more").addEventListener("click", loadMore);
  $("#bulk-retry").addEventListener("click", bulkRetry);
  $("#dlq-type").addEventListener("change", () => { labelBulkRetry(); refresh(); });
  labelBulkRetry();
  refresh();
});
