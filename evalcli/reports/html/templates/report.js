/* evalcli report: filters the conversation list and lays out transcripts from the embedded JSON.
   Untrusted text (messages, tool calls, reasons, errors) only ever goes through textContent. */
(function () {
  "use strict";
  var list = document.getElementById("conversation-list");
  var runId = document.body.getAttribute("data-run");
  var transcripts = null;
  var rows = [];
  var controls = {
    status: document.getElementById("f-status"), gate: document.getElementById("f-gate"),
    tag: document.getElementById("f-tag"), change: document.getElementById("f-change"),
    text: document.getElementById("f-text")
  };

  function data() {
    if (transcripts === null) {
      transcripts = JSON.parse(document.getElementById("evalcli-transcripts").textContent);
    }
    return transcripts;
  }

  function words(value) {
    return value ? value.split(" ") : [];
  }

  function terms(text) {
    var found = [], pattern = /"([^"]+)"|(\S+)/g, match;
    while ((match = pattern.exec(text)) !== null) {
      found.push(match[1] !== undefined ? match[1].replace(/\s+/g, " ").trim() : match[2]);
    }
    return found.filter(function (term) { return term.length > 0; });
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function shellQuote(text) {
    return /^[A-Za-z0-9_.\/:@%+=,-]+$/.test(text) ? text : "'" + text.replace(/'/g, "'\"'\"'") + "'";
  }

  function strings(value, out) {
    if (typeof value === "string") { out.push(value); }
    else if (Array.isArray(value)) { value.forEach(function (v) { strings(v, out); }); }
    else if (value && typeof value === "object") { Object.keys(value).forEach(function (k) { strings(value[k], out); }); }
    return out;
  }

  function searchable(entry) {
    if (entry.text === null) {
      entry.text = (entry.row.textContent + "\n" + strings(data()[entry.n], []).join("\n")).toLowerCase();
    }
    return entry.text;
  }

  function matches(entry, wanted) {
    var status = entry.status;
    if (wanted.status === "not-passed" ? status === "passed" : wanted.status && status !== wanted.status) { return false; }
    if (wanted.gate && entry.gates.indexOf(wanted.gate) < 0) { return false; }
    if (wanted.tag && entry.tags.indexOf(wanted.tag) < 0) { return false; }
    if (wanted.change && entry.change !== wanted.change) { return false; }
    if (wanted.terms.length) {
      var text = searchable(entry);
      for (var i = 0; i < wanted.terms.length; i++) {
        if (text.indexOf(wanted.terms[i]) < 0) { return false; }
      }
    }
    return true;
  }

  function apply() {
    var wanted = {
      status: controls.status.value, gate: controls.gate.value, tag: controls.tag.value,
      change: controls.change ? controls.change.value : "",
      terms: terms(controls.text.value.toLowerCase())
    };
    var shown = 0;
    rows.forEach(function (entry) {
      var visible = matches(entry, wanted);
      entry.row.hidden = !visible;
      if (entry.detail) { entry.detail.hidden = !visible || !entry.open; }
      if (visible) { shown += 1; }
    });
    document.getElementById("f-count").textContent = "showing " + shown + " of " + rows.length + " conversations";
  }

  function outcomes(list, title) {
    var table = el("table", "outcomes");
    var caption = table.createCaption();
    caption.textContent = title;
    list.forEach(function (o) {
      var tr = table.insertRow();
      tr.appendChild(el("td", "dim", o.role));
      tr.appendChild(el("td", null, o.id));
      tr.appendChild(el("td", "num", o.score + (o.threshold ? " (" + o.threshold + ")" : "")));
      tr.appendChild(el("td", o.passed === true ? "pass" : o.passed === false ? "fail" : "dim",
        o.passed === true ? "pass" : o.passed === false ? "FAIL" : "-"));
      tr.appendChild(el("td", "reason", o.reason));
    });
    return table;
  }

  function message(m) {
    var box, who;
    if (m.k === "text") {
      box = el("div", m.interrupt ? "msg text interrupt" : "msg text");
      box.appendChild(el("span", "who", (m.who || "Assistant") + ": "));
      box.appendChild(document.createTextNode(m.text));
      return box;
    }
    box = el("div", m.k === "call" ? "msg call" : "msg result" + (m.error ? " error" : ""));
    who = m.k === "call" ? "tool call " : m.error ? "tool result ERROR " : "tool result ";
    box.appendChild(el("span", "who", who + m.name));
    box.appendChild(el("span", "dim", "  (id " + m.id + ")" + (m.source ? "  source: " + m.source : "")));
    if (m.retry) box.appendChild(el("div", "retry", m.retry));
    box.appendChild(el("pre", null, m.k === "call" ? m.args : m.text));
    return box;
  }

  function turn(t, box) {
    box.appendChild(el("h4", null, "turn " + t.index));
    var user = el("div", "msg user");
    user.appendChild(el("span", "who", "User" + (t.simulated || t.resumed ? "" : ": ")));
    if (t.simulated) { user.appendChild(el("span", "sim", "simulated")); }
    if (t.resumed) { user.appendChild(el("span", "sim", "resumes the interrupt")); }
    if (t.simulated || t.resumed) { user.appendChild(document.createTextNode(": ")); }
    user.appendChild(document.createTextNode(t.input));
    box.appendChild(user);
    t.messages.forEach(function (m) { box.appendChild(message(m)); });
    if (t.structured !== null && t.structured !== undefined) {
      var structured = el("div", "msg structured");
      structured.appendChild(el("span", "who", "structured output"));
      structured.appendChild(el("pre", null, t.structured));
      box.appendChild(structured);
    }
    if (t.retries) {
      box.appendChild(el("div", "msg retries", "output retries: " + t.retries + " (the output was rejected and asked for again)"));
    }
    if (t.guardrail) {
      box.appendChild(el("div", "msg retries guardrail", t.guardrail));
    }
    if (t.outcomes.length) { box.appendChild(outcomes(t.outcomes, "gates and scorers of turn " + t.index)); }
  }

  function transcript(item) {
    var box = el("div", "transcript");
    var head = "item " + item.index + ", " + item.form + ", " + item.turns.length + " turn" +
      (item.turns.length === 1 ? "" : "s") + " · thread " + (item.thread || "-") + " · resource " +
      (item.resource || "-") + (item.stop ? " · stopped: " + item.stop : "");
    box.appendChild(el("div", "head", head));
    if (item.metadata) { box.appendChild(el("pre", "dim metadata", "metadata " + item.metadata)); }
    box.appendChild(el("code", "dim", "evalcli show " + runId + " " + shellQuote(item.id)));
    item.turns.forEach(function (t) { turn(t, box); });
    if (item.outcomes.length) {
      box.appendChild(el("h4", null, "whole conversation"));
      box.appendChild(outcomes(item.outcomes, "gates and scorers"));
    }
    if (item.error !== null) {
      box.appendChild(el("h4", "fail", "error"));
      var error = el("div", "error-box");
      error.appendChild(el("p", "fail", item.error));
      if (item.traceback) { error.appendChild(el("pre", "traceback", item.traceback)); }
      box.appendChild(error);
    }
    return box;
  }

  function toggle(entry, open) {
    entry.open = open === undefined ? !entry.open : open;
    if (entry.open && !entry.detail) {
      var tr = el("tr", "detail");
      var td = el("td");
      td.colSpan = entry.row.cells.length;
      td.appendChild(transcript(data()[entry.n]));
      tr.appendChild(td);
      entry.row.parentNode.insertBefore(tr, entry.row.nextSibling);
      entry.detail = tr;
    }
    if (entry.detail) { entry.detail.hidden = !entry.open || entry.row.hidden; }
    entry.button.setAttribute("aria-expanded", entry.open ? "true" : "false");
  }

  function clearFilters() {
    [controls.status, controls.gate, controls.tag, controls.change, controls.text].forEach(function (control) {
      if (control) { control.value = ""; }
    });
    apply();
  }

  function openFromHash() {
    var match = /^#c-(\d+)$/.exec(window.location.hash);
    var entry = match ? rows[Number(match[1])] : undefined;
    if (entry) {
      if (entry.row.hidden) { clearFilters(); }
      toggle(entry, true);
      entry.row.scrollIntoView();
    }
  }

  function init() {
    Array.prototype.forEach.call(list.tBodies[0].rows, function (row) {
      if (!row.classList.contains("conv")) { return; }
      rows[Number(row.getAttribute("data-n"))] = {
        row: row, n: Number(row.getAttribute("data-n")), status: row.getAttribute("data-status"),
        tags: words(row.getAttribute("data-tags")), gates: words(row.getAttribute("data-gates")),
        change: row.getAttribute("data-change") || "", button: row.querySelector("button.open"),
        text: null, open: false, detail: null
      };
    });
    list.tBodies[0].addEventListener("click", function (event) {
      var button = event.target.closest ? event.target.closest("button.open") : null;
      if (button) { toggle(rows[Number(button.closest("tr").getAttribute("data-n"))]); }
    });
    var timer = null;
    controls.text.addEventListener("input", function () {
      window.clearTimeout(timer);
      timer = window.setTimeout(apply, 120);
    });
    [controls.status, controls.gate, controls.tag, controls.change].forEach(function (control) {
      if (control) { control.addEventListener("change", apply); }
    });
    document.getElementById("f-clear").addEventListener("click", clearFilters);
    window.addEventListener("hashchange", openFromHash);
    document.getElementById("filters").hidden = false;
    apply();
    openFromHash();
    document.body.setAttribute("data-ready", "1");
    if (window.performance && performance.mark) { performance.mark("evalcli-ready"); }
  }

  init();
}());
