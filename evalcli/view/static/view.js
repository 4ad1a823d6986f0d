// evalcli view: the page's script, hand-written, JavaScript's standard library only (docs/view.md).
// Every text from the database is set with textContent, never as HTML.

const main = document.getElementById("main");
const crumbs = document.getElementById("crumbs");
const live = document.getElementById("live");
let timer = null;          // the poll of a run in progress
let keys = null;           // the keyboard handler of the page shown
const listState = { run: null, params: null, rows: [], total: 0 };  // the run list last shown, for next/previous

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path, options = {}) {
  const response = await fetch(path, { headers: { "Content-Type": "application/json" }, credentials: "same-origin", ...options });
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error + (body.hint ? ` (${body.hint})` : ""));
  return body;
}

function ready(name) {
  document.body.dataset.view = name;
  document.body.dataset.ready = "1";
}

function fmt(value, digits = 3) {
  return value === null || value === undefined ? "-" : Number(value).toFixed(digits).replace(/\.?0+$/, "") || "0";
}

function money(value) { return value ? "$" + Number(value).toFixed(4) : "-"; }

function statusBadge(status) { return el("span", { class: `badge ${status}` }, status); }

function setCrumbs(...links) {
  crumbs.replaceChildren(...links.map(([text, href]) => href ? el("a", { href }, text) : el("span", {}, text)));
}

function query(params) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") search.set(k, v);
  return search.toString();
}

function hashParams() {
  const [path, search] = location.hash.slice(1).split("?");
  return { path: path || "/", params: Object.fromEntries(new URLSearchParams(search || "")) };
}

function pager(page, size, total, go) {
  const pages = Math.max(1, Math.ceil(total / size));
  return el("div", { class: "pager" },
    el("button", { id: "prev-page", disabled: page <= 1, onclick: () => go(page - 1) }, "‹ previous"),
    el("span", { id: "page-info" }, `page ${page} of ${pages} (${total})`),
    el("button", { id: "next-page", disabled: page >= pages, onclick: () => go(page + 1) }, "next ›"));
}

// -- runs ---------------------------------------------------------------------------------------------------

async function showRuns(params) {
  setCrumbs(["runs", null]);
  const page = Number(params.page || 1);
  const data = await api("/api/runs?" + query({ ...params, page }));
  const go = (changes) => { location.hash = "#/?" + query({ ...params, ...changes }); };
  const select = (name, options) => el("label", {}, name,
    el("select", { name, id: `filter-${name}` }, el("option", { value: "" }, "any"),
      options.map((o) => el("option", { value: o, selected: params[name] === o }, o))));
  const form = el("form", { class: "filters", id: "run-filters", onsubmit: (event) => {
    event.preventDefault();
    go({ ...Object.fromEntries(new FormData(form)), page: 1 });
  } },
    select("dataset", data.choices.datasets), select("target", data.choices.targets), select("verdict", data.choices.verdicts),
    el("label", {}, "since", el("input", { type: "date", name: "since", value: params.since || "" })),
    el("label", {}, "until", el("input", { type: "date", name: "until", value: params.until || "" })),
    el("button", { type: "submit" }, "filter"));
  const chosen = new Set();
  const compare = el("button", { id: "compare", disabled: true, onclick: () => {
    const [a, b] = [...chosen].sort();  // run ids sort by when they began: the older run is A
    location.hash = `#/compare/${a}/${b}`;
  } }, "compare the two ticked runs");
  const rows = data.runs.map((run) => el("tr", { class: "run", "data-id": run.id },
    el("td", {}, el("input", { type: "checkbox", "aria-label": "choose for comparison", onchange: (event) => {
      if (event.target.checked) chosen.add(run.id); else chosen.delete(run.id);
      compare.disabled = chosen.size !== 2;
    } })),
    el("td", {}, el("a", { href: `#/run/${run.id}` }, run.id)),
    el("td", {}, run.started_at ? run.started_at.replace("T", " ").slice(0, 19) : ""),
    el("td", {}, run.dataset), el("td", {}, run.target),
    el("td", {}, statusBadge(run.shown || run.verdict || run.status)),
    el("td", {}, `${run.completed_items}` + (run.status === "running" ? " so far" : "")),
    el("td", {}, run.errors), el("td", {}, money(run.cost)),
    el("td", {}, Object.entries(JSON.parse(run.scores || "{}")).map(([k, v]) => `${k} ${fmt(v)}`).join(", "))));
  main.replaceChildren(el("h2", {}, "Runs"), form,
    el("table", { id: "runs" }, el("thead", {}, el("tr", {}, ["", "run", "started", "dataset", "target", "verdict",
      "conversations", "errors", "cost", "scores"].map((h) => el("th", {}, h)))), el("tbody", {}, rows)),
    el("div", { class: "pager" }, pager(page, 50, data.total, (p) => go({ page: p })), compare));
  ready("runs");
}

// -- a run --------------------------------------------------------------------------------------------------

function runHeader(run) {
  const p = run.progress;
  const scores = Object.entries(run.scores || {}).map(([k, v]) => `${k} ${fmt(v)}`).join(", ") || "-";
  const stability = run.summary.stability ? Object.entries(run.summary.stability).map(([k, v]) => `${v} ${k}`).join(", ") : "-";
  return el("div", { class: "summary", id: "run-summary" },
    ...[["dataset", run.dataset], ["target", run.target],
      ["verdict", p.status === "running" ? `running: ${p.stored} stored` : (run.shown || run.verdict || run.status)],
      ["conversations", `${p.stored} (${p.passed} passed, ${p.errors} errored)`], ["scores", scores],
      ["stability", stability], ["cost", money(run.row.cost)], ["started", (run.row.started_at || "").slice(0, 19)]]
      .map(([k, v]) => el("div", { "data-key": k }, el("b", {}, k), v)));
}

async function showRun(runId, params) {
  const run = await api(`/api/runs/${runId}`);
  setCrumbs(["runs", "#/"], [run.run_id, null]);
  const page = Number(params.page || 1);
  const sort = params.sort || "failures";
  const desc = params.desc === "1";
  const list = await api(`/api/runs/${runId}/conversations?` + query({ ...params, page }));
  Object.assign(listState, { run: run.run_id, params: { ...params }, rows: list.rows, total: list.total, page });
  const go = (changes) => { location.hash = `#/run/${runId}?` + query({ ...params, ...changes }); };
  const ids = [...run.gate_ids, ...run.scorer_ids.filter((id) => !run.gate_ids.includes(id))];
  const head = (label, key) => el("th", {
    class: `sortable${sort === key ? " sorted" : ""}${sort === key && desc ? " desc" : ""}`, "data-sort": key,
    onclick: () => go({ sort: key, desc: sort === key && !desc ? "1" : "", page: 1 }),
  }, label);
  const rows = list.rows.map((row) => el("tr", { class: `conv ${row.status}`, "data-index": row.index },
    el("td", {}, row.index), el("td", {}, el("a", { href: `#/run/${run.run_id}/c/${row.index}`, class: "open" }, row.id)),
    el("td", {}, statusBadge(row.status), row.failing.length ? el("div", { class: "muted" }, row.failing.join(", ")) : null,
      row.why ? el("div", { class: "muted" }, row.why) : null),
    ids.map((id) => {
      const s = row.scores[id];
      return el("td", { class: s && (s.missed || s.error) ? "missed" : "" }, s ? (s.not_scorable ? "n/s" : s.text) : "-");
    }),
    el("td", {}, row.stability ? `${row.stability} (${row.plays_passed}/${row.repeats})` : "-"),
    el("td", {}, money(row.cost)), el("td", {}, `${Math.round(row.duration_ms)} ms`),
    el("td", { class: "label" }, labelText(row.labels[""])),
    el("td", { class: "muted" }, row.input)));
  const filters = el("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    go({ status: form.status.value, q: form.q.value, page: 1 });
  } },
    el("label", {}, "status", el("select", { name: "status", id: "filter-status" }, ["", "error", "failed", "passed"].map(
      (s) => el("option", { value: s, selected: (params.status || "") === s }, s || "any")))),
    el("label", {}, "search", el("input", { name: "q", id: "filter-q", value: params.q || "" })),
    el("button", { type: "submit" }, "filter"));
  const form = filters;
  main.replaceChildren(el("h2", {}, `Run ${run.run_id}`), runHeader(run), filters,
    el("table", { id: "conversations" }, el("thead", {}, el("tr", {}, head("#", "index"), head("conversation", "id"),
      head("status", "failures"), ids.map((id) => head(id, `score:${id}`)), head("stability", "stability"),
      head("cost", "cost"), head("time", "duration"), el("th", {}, "review"), el("th", {}, "first message"))),
    el("tbody", {}, rows)), pager(page, 50, list.total, (p) => go({ page: p })));
  if (run.progress.status === "running") follow(run.run_id, run.progress, () => showRun(runId, params));
  ready("run");
}

function labelText(label) {
  if (!label) return "";
  const value = label.score === 1 ? "pass" : label.score === 0 ? "fail" : fmt(label.score, 2);
  return value + (label.note ? ` (${label.note})` : "");
}

function follow(runId, progress, refresh) {
  // a run in progress: poll its progress; when a conversation is stored or the run ends, show the page again
  live.hidden = false;
  let last = `${progress.stored}/${progress.status}`;
  timer = setInterval(async () => {
    const now = await api(`/api/runs/${runId}/progress`).catch(() => null);
    if (!now) return;
    const key = `${now.stored}/${now.status}`;
    if (key !== last) {
      last = key;
      clearInterval(timer);
      timer = null;
      await refresh();
    }
  }, 700);
}

// -- a conversation -----------------------------------------------------------------------------------------

function transcriptView(t, differs = null) {
  const turns = t.turns.map((turn) => el("section", { class: `turn${differs === turn.index ? " differs" : ""}`, "data-turn": turn.index },
    el("h4", {}, `Turn ${turn.index}` + (differs === turn.index ? " — first difference" : "")),
    el("div", { class: "msg user" }, el("span", { class: "who" }, turn.simulated ? "User (simulated)" : "User"), turn.input),
    turn.messages.map((m) => m.k === "text"
      ? el("div", { class: "msg assistant" }, el("span", { class: "who" }, m.who || "Assistant"), m.text)
      : m.k === "call"
        ? el("div", { class: "call" }, `→ ${m.name}(${m.args})`)
        : el("div", { class: `result${m.error ? " failed-tool" : ""}` },
          `← ${m.name}${m.source ? ` [${m.source}]` : ""}${m.error ? " (error)" : ""}${m.retry ? ` ${m.retry}` : ""}: ${m.text}`)),
    turn.structured ? el("pre", { class: "muted" }, turn.structured) : null,
    turn.guardrail ? el("div", { class: "guardrail" }, turn.guardrail) : null,
    outcomesTable(turn.outcomes)));
  return el("div", { class: "transcript" }, turns,
    t.outcomes.length ? el("h4", {}, "Conversation") : null, outcomesTable(t.outcomes),
    t.error ? el("div", { class: "problem" }, `error: ${t.error}`) : null,
    t.traceback ? el("pre", { class: "muted" }, t.traceback) : null);
}

function outcomesTable(outcomes) {
  if (!outcomes.length) return null;
  return el("table", { class: "outcomes" }, outcomes.map((o) => el("tr", {},
    el("td", {}, o.role), el("td", {}, o.id), el("td", { class: o.passed === false ? "missed" : o.passed ? "pass" : "" }, o.score),
    el("td", {}, o.threshold ? `threshold ${o.threshold}` : ""),
    el("td", {}, o.passed === null ? "" : o.passed ? "pass" : "fail"), el("td", { class: "reason" }, o.reason))));
}

async function neighbour(runId, index, step) {
  // the next or previous conversation in the order of the list last shown (its next page fetched when needed)
  if (listState.run !== runId) {
    const first = await api(`/api/runs/${runId}/conversations?page=1`);
    Object.assign(listState, { run: runId, params: {}, rows: first.rows, total: first.total, page: 1 });
  }
  const at = listState.rows.findIndex((row) => row.index === index);
  if (at + step >= 0 && at + step < listState.rows.length && at >= 0) return listState.rows[at + step].index;
  const page = (listState.page || 1) + step;
  if (page < 1 || (page - 1) * 50 >= listState.total) return null;
  const more = await api(`/api/runs/${runId}/conversations?` + query({ ...listState.params, page }));
  if (!more.rows.length) return null;
  Object.assign(listState, { rows: more.rows, page });
  return step > 0 ? more.rows[0].index : more.rows[more.rows.length - 1].index;
}

async function showConversation(runId, index) {
  const data = await api(`/api/runs/${runId}/conversations/${index}`);
  const t = data.transcript;
  setCrumbs(["runs", "#/"], [data.run_id, `#/run/${data.run_id}?` + query(listState.run === data.run_id ? listState.params : {})],
    [t.id, null]);
  const targets = ["", ...data.scorer_ids];
  let target = sessionStorage.getItem("evalcli-target") || "";
  if (!targets.includes(target)) target = "";
  const note = el("input", { type: "text", id: "note", placeholder: "note (n to write, Enter to keep)" });
  const targetShown = el("b", { id: "label-target" });
  const current = el("span", { id: "current-label" });
  const flash = el("span", { class: "flash", id: "flash" });
  const showTarget = () => {
    targetShown.textContent = target || "the conversation";
    current.textContent = labelText(data.labels[target]) || "not labelled";
  };
  showTarget();
  const save = async (value) => {
    try {
      const row = await api(`/api/runs/${data.run_id}/conversations/${index}/labels`, {
        method: "POST", body: JSON.stringify({ scorer: target, value, note: note.value }) });
      data.labels[target] = { score: row.score, note: row.note, reviewer: row.reviewer, at: row.created_at };
      showTarget();
      flash.textContent = `saved: ${labelText(data.labels[target])} by ${row.reviewer}`;
      note.value = "";
      return true;
    } catch (error) {
      flash.textContent = String(error.message || error);
      flash.className = "problem";
      return false;
    }
  };
  const move = async (step) => {
    const next = await neighbour(data.run_id, index, step);
    if (next === null) { flash.textContent = step > 0 ? "that was the last conversation" : "this is the first"; return; }
    location.hash = `#/run/${data.run_id}/c/${next}`;
  };
  const review = el("div", { class: "review", id: "review" },
    "Label ", targetShown, ": ", current, " ",
    el("button", { id: "pass", onclick: async () => { if (await save("pass")) await move(1); } }, "pass (p)"),
    el("button", { id: "fail", onclick: async () => { if (await save("fail")) await move(1); } }, "fail (f)"), " ",
    note, flash);
  const plays = data.plays.length ? [el("h3", {}, `Plays (${data.plays.length})`),
    ...data.plays.map((play, n) => el("details", { class: "play", "data-play": n + 1 },
      el("summary", {}, `play ${n + 1}: `, statusBadge(play.status)), transcriptView(play)))] : [];
  main.replaceChildren(el("h2", {}, `${t.id} `, statusBadge(t.status)),
    el("p", { class: "muted" }, `${t.form} conversation, index ${t.index}` + (t.stop ? `, stopped: ${t.stop}` : "")),
    review, transcriptView(t), ...plays);
  keys = async (event) => {
    if (event.target === note) {
      if (event.key === "Enter" || event.key === "Escape") { note.blur(); event.preventDefault(); }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const key = event.key;
    if (key === "j") await move(1);
    else if (key === "k") await move(-1);
    else if (key === "p") { if (await save("pass")) await move(1); }
    else if (key === "f") { if (await save("fail")) await move(1); }
    else if (/^[0-9]$/.test(key)) { if (await save(Number(key) / 10)) await move(1); }
    else if (key === "n") { event.preventDefault(); note.focus(); }
    else if (key === "s") {
      target = targets[(targets.indexOf(target) + 1) % targets.length];
      sessionStorage.setItem("evalcli-target", target);
      showTarget();
    } else if (key === "u") location.hash = `#/run/${data.run_id}?` + query(listState.params || {});
  };
  ready("conversation");
}

// -- two runs -----------------------------------------------------------------------------------------------

async function showCompare(a, b) {
  const data = await api(`/api/compare/${a}/${b}`);
  setCrumbs(["runs", "#/"], [`A ${data.a.run_id} · B ${data.b.run_id}`, null]);
  const side = (name, run) => el("div", { "data-side": name }, el("b", {}, `${name}: `),
    el("a", { href: `#/run/${run.run_id}` }, run.run_id), ` ${run.dataset} · ${run.target} · `, statusBadge(run.verdict || run.status));
  const stats = data.text ? [el("p", { id: "pass-fail" }, data.text.pass_fail),
    data.text.unchanged ? el("p", {}, "No gate or scorer changed on any paired conversation.") :
      el("table", { id: "figures" }, el("thead", {}, el("tr", {}, ["", "n", "A", "B", "B - A", "interval", "Wilcoxon p"].map((h) => el("th", {}, h)))),
        el("tbody", {}, data.text.figures.map((row) => el("tr", {}, row.map((cell) => el("td", {}, cell)))))),
    data.text.status ? el("p", { class: "error" }, data.text.status) : null,
    ...data.text.detectable.map((line) => el("p", { class: "muted" }, line)),
    data.stats.only_a || data.stats.only_b ? el("p", { class: "muted" }, `left out: ${data.stats.only_a} only in A, ${data.stats.only_b} only in B`) : null]
    : [el("p", {}, "The runs share no conversation.")];
  const rows = data.pairs.map((pair) => el("tr", { class: "pair", "data-identity": pair.identity },
    el("td", {}, pair.a && pair.b ? el("a", { href: `#/compare/${data.a.run_id}/${data.b.run_id}/c/${encodeURIComponent(pair.identity)}` }, pair.name) : pair.name),
    el("td", {}, pair.a ? statusBadge(pair.a.status) : "—"), el("td", {}, pair.b ? statusBadge(pair.b.status) : "—"),
    el("td", { class: "first-difference" }, pair.first_difference === null ? (pair.a && pair.b ? "same" : "") : `turn ${pair.first_difference}`)));
  main.replaceChildren(el("h2", {}, "Two runs"), side("A", data.a), side("B", data.b), el("h3", {}, "Paired statistics (B - A)"), ...stats.filter((node) => node),
    el("table", { id: "pairs" }, el("thead", {}, el("tr", {}, ["conversation", "A", "B", "transcripts differ from"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows)));
  ready("compare");
}

async function showComparedConversation(a, b, identity) {
  const data = await api(`/api/compare/${a}/${b}/conversation?` + query({ identity }));
  setCrumbs(["runs", "#/"], ["two runs", `#/compare/${a}/${b}`], [identity, null]);
  const column = (name, t) => el("div", { "data-side": name }, el("h3", {}, `${name}: `, t ? statusBadge(t.status) : "not in this run"),
    t ? transcriptView(t, data.first_difference) : null);
  main.replaceChildren(el("h2", {}, identity),
    el("p", { id: "difference" }, data.first_difference === null ? "The transcripts are the same." : `The transcripts first differ at turn ${data.first_difference}.`),
    el("div", { class: "sides" }, column("A", data.a), column("B", data.b)));
  ready("compared-conversation");
}

// -- routing ------------------------------------------------------------------------------------------------

async function route() {
  if (timer) { clearInterval(timer); timer = null; }
  live.hidden = true;
  keys = null;
  document.body.dataset.ready = "0";
  const { path, params } = hashParams();
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "run" && parts[2] === "c") await showConversation(parts[1], Number(parts[3]));
    else if (parts[0] === "run") await showRun(parts[1], params);
    else if (parts[0] === "compare" && parts[3] === "c") await showComparedConversation(parts[1], parts[2], parts.slice(4).join("/"));
    else if (parts[0] === "compare") await showCompare(parts[1], parts[2]);
    else await showRuns(params);
  } catch (error) {
    main.replaceChildren(el("p", { class: "problem", id: "problem" }, String(error.message || error)));
    ready("problem");
  }
}

document.addEventListener("keydown", (event) => { if (keys) keys(event); });
window.addEventListener("hashchange", route);
route();
