// The ThinkFlow web page: pick an agent, chat with it, watch its steps live, open past runs.
// Plain DOM code, no dependencies. Text from agents and tools is always set with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("thinkflow-token") || "";
let agents = [];
let currentRun = null;

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const response = await fetch(path, opts);
  if (response.status === 401) {
    $("token-box").hidden = false;
    throw new Error("this server needs a token: enter it above");
  }
  return response;
}

async function errorText(response) {
  try {
    const body = await response.json();
    const e = body.error || {};
    return (e.message || response.statusText) + (e.hint ? " (" + e.hint + ")" : "");
  } catch (_) {
    return response.status + " " + response.statusText;
  }
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function newSession() {
  const bytes = new Uint8Array(4);
  crypto.getRandomValues(bytes);
  $("session").value = "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  $("chat").replaceChildren();
}

function addMessage(role, text, meta) {
  const node = el("div", "msg " + role, text);
  if (meta) node.appendChild(el("span", "meta", meta));
  $("chat").appendChild(node);
  $("chat").scrollTop = $("chat").scrollHeight;
  return node;
}

function addStep(cls, kind, text) {
  const li = el("li", cls);
  li.appendChild(el("span", "kind", kind));
  li.appendChild(document.createTextNode(text));
  $("steps").appendChild(li);
  li.scrollIntoView({block: "nearest"});
  return li;
}

function short(value, n) {
  const s = typeof value === "string" ? value : JSON.stringify(value);
  return s.length > n ? s.slice(0, n) + " …" : s;
}

// One run event (live or from a trace) -> a step line.
function showEvent(e) {
  switch (e.type) {
    case "run_started":
      $("steps-run").textContent = e.run_id + " · " + e.agent + (e.model ? " · " + e.model : "");
      break;
    case "model_replied":
      if (e.thought) addStep("thought", "step " + e.step + " · thought", e.thought);
      break;
    case "tool_called":
      addStep("tool-call", "→ " + e.name, short(e.arguments, 600));
      break;
    case "tool_returned":
      addStep("observation" + (e.status === "ok" ? "" : " failed"), "← " + e.name + " " + e.status,
              short(e.observation, 1200));
      break;
    case "final_answer":
      addStep("answer", "answer", e.text);
      break;
    case "warning":
      addStep("warning", "warning", e.message);
      break;
    case "plan_created":
      addStep("thought", "plan", (e.steps || []).map((s, i) => (i + 1) + ". " + s.instruction).join("\n"));
      break;
    case "run_finished":
      addStep(e.status === "completed" ? "answer" : "warning", e.status,
              e.steps + " step(s) · " + e.tool_calls + " tool call(s)" + (e.error ? " · " + e.error : ""));
      break;
  }
}

// Read an SSE body: calls onMessage(eventName, data) for each message.
async function readSSE(response, onMessage) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onMessage(name, JSON.parse(data.join("\n")));
    }
  }
}

async function send(event) {
  event.preventDefault();
  const task = $("message").value.trim();
  const agent = $("agent").value;
  if (!task || !agent) return;
  $("message").value = "";
  addMessage("user", task);
  $("steps").replaceChildren();
  $("send").disabled = true;
  $("cancel").disabled = false;
  $("status").textContent = "running…";
  const body = {task: task, stream: true};
  if ($("session").value.trim()) body.session = $("session").value.trim();
  try {
    const response = await api("/api/agents/" + encodeURIComponent(agent) + "/runs", {
      method: "POST", headers: {"Content-Type": "application/json", "Accept": "text/event-stream"},
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(await errorText(response));
    currentRun = response.headers.get("x-run-id");
    await readSSE(response, (name, data) => {
      if (name === "result") {
        addMessage(data.status === "completed" ? "agent" : "agent error", data.answer || "(no answer)",
                   data.status + " · " + data.steps + " step(s) · run " + data.run_id);
        $("status").textContent = data.status;
      } else {
        showEvent(data);
      }
    });
  } catch (error) {
    addMessage("error", String(error.message || error));
    $("status").textContent = "";
  } finally {
    currentRun = null;
    $("send").disabled = false;
    $("cancel").disabled = true;
    loadRuns();
  }
}

async function cancel() {
  if (!currentRun) return;
  $("status").textContent = "cancelling…";
  await api("/api/runs/" + encodeURIComponent(currentRun) + "/cancel", {method: "POST"});
}

async function openRun(runId) {
  $("steps").replaceChildren();
  $("steps-run").textContent = runId;
  const response = await api("/api/runs/" + encodeURIComponent(runId) + "/trace");
  if (!response.ok) {
    addStep("warning", "error", await errorText(response));
    return;
  }
  const trace = await response.json();
  for (const e of trace.events) showEvent(e);
}

async function loadRuns() {
  try {
    const response = await api("/api/runs");
    if (!response.ok) return;
    const data = await response.json();
    const list = $("runs");
    list.replaceChildren();
    for (const run of data.runs) {
      const li = el("li", "run");
      li.dataset.runId = run.run_id;
      li.appendChild(el("div", "", short(run.task || "", 80)));
      li.appendChild(el("div", "st", run.agent + " · " + run.status + " · " + run.run_id));
      li.addEventListener("click", () => openRun(run.run_id));
      list.appendChild(li);
    }
  } catch (_) { /* shown by api() */ }
}

async function loadAgents() {
  try {
    const response = await api("/api/agents");
    if (!response.ok) throw new Error(await errorText(response));
    agents = (await response.json()).agents;
    const select = $("agent");
    select.replaceChildren();
    for (const a of agents) select.appendChild(el("option", "", a.name));
    showAgent();
    loadRuns();
  } catch (error) {
    addMessage("error", String(error.message || error));
  }
}

function showAgent() {
  const a = agents.find((x) => x.name === $("agent").value);
  $("agent-info").textContent = a ? (a.description || "") + " · " + a.model + " · tools: " +
    (a.tools.map((t) => t.name).join(", ") || "none") : "";
}

$("form").addEventListener("submit", send);
$("message").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
});
$("cancel").addEventListener("click", cancel);
$("new-chat").addEventListener("click", newSession);
$("refresh").addEventListener("click", loadRuns);
$("agent").addEventListener("change", () => { showAgent(); newSession(); });
$("save-token").addEventListener("click", () => {
  token = $("token").value.trim();
  sessionStorage.setItem("thinkflow-token", token);
  $("token-box").hidden = true;
  loadAgents();
});
newSession();
loadAgents();
