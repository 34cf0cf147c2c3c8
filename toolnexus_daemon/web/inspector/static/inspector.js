// The inspector's one script: follows a runtime's events live (server-sent events) and shows the
// model's text as it streams. Everything it inserts is set as text (textContent), never as HTML.
"use strict";

(function () {
  const table = document.getElementById("timeline");
  if (!table || !table.dataset.stream) {
    return;
  }
  const rows = document.getElementById("events");
  const live = document.getElementById("live-text");
  const state = document.getElementById("stream-state");
  const seen = new Set();
  rows.querySelectorAll("tr.ev").forEach(function (tr) { seen.add(tr.dataset.seq); });
  const texts = new Map();  // handle -> the <pre> its streamed text goes into
  const MAX_TEXT = 20000;

  function cell(tr, text) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function addEvent(ev) {
    const seq = String(ev.seq);
    if (seen.has(seq)) {
      return;
    }
    seen.add(seq);
    const tr = document.createElement("tr");
    tr.className = "ev";
    tr.dataset.seq = seq;
    tr.dataset.type = ev.type;
    cell(tr, seq);
    cell(tr, ev.at);
    cell(tr, ev.handle);
    cell(tr, ev.type);
    cell(tr, ev.what).className = "what";
    rows.appendChild(tr);
    if (ev.type === "result" && texts.has(ev.handle)) {
      texts.get(ev.handle).classList.add("settled");
      texts.delete(ev.handle);  // the handle's next turn writes into a box of its own
    }
  }

  function addText(ev) {
    let pre = texts.get(ev.handle);
    if (!pre) {
      const box = document.createElement("div");
      box.className = "live";
      const label = document.createElement("div");
      label.className = "muted";
      label.textContent = ev.handle + " is writing:";
      pre = document.createElement("pre");
      pre.className = "text";
      pre.dataset.handle = ev.handle;
      box.appendChild(label);
      box.appendChild(pre);
      live.appendChild(box);
      texts.set(ev.handle, pre);
    }
    // the newest MAX_TEXT characters of a turn: a long reply does not grow the page without end
    pre.textContent = (pre.textContent + ev.text).slice(-MAX_TEXT);
  }

  const source = new EventSource(table.dataset.stream);
  source.addEventListener("ev", function (msg) { addEvent(JSON.parse(msg.data)); });
  source.addEventListener("text", function (msg) { addText(JSON.parse(msg.data)); });
  source.addEventListener("open", function () { state.textContent = "following live"; });
  source.addEventListener("end", function () {
    state.textContent = "the runtime stopped; reload to see it again";
    source.close();
  });
  source.addEventListener("failed", function (msg) {
    state.textContent = "the live timeline stopped: " + JSON.parse(msg.data).error;
    source.close();
  });
  source.addEventListener("error", function () {
    if (source.readyState === EventSource.CLOSED) {
      state.textContent = "the live timeline stopped; reload the page";
    } else {
      state.textContent = "reconnecting…";
    }
  });
})();
