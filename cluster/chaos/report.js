/* The chaos run report (cluster/chaos/report.py): inline in report.html, no network.
 *
 * Reads the run's trace (docs/trace-schema.md) from the page and draws, with the shared
 * diagram code of pages/sequence.js (KemuSequence, written inline before this script):
 * - a message-sequence diagram: one lane per broker (the controller's tenure as a band),
 *   the metadata store and the chaos driver, then one lane per topic; messages between
 *   nodes as arrows from their `send` to their `deliver` (or `drop`), store calls as
 *   arrows to the store lane, faults as shaded spans on the lanes they hit, elections,
 *   session expiries, crashes and the driver's steps as marks; zoom (wheel, buttons),
 *   pan (drag), filters by topic, message type and node, the fields of what is under
 *   the pointer in a tooltip;
 * - time series with the faults shaded: partitions by state, the controller's event
 *   queue, messages per second by type, produce throughput and high watermarks.
 * When it is done, <body> carries data-ready, data-lanes and data-overflow (the elements
 * that overflow horizontally, or "none"), which the browser tests read.
 */
"use strict";
(function () {
  const {
    PALETTE, STATE_COLOURS, PARTITION_STATE_COLOURS, MARK_LEGEND,
    nodeOf, typeColour, isStoreRead, niceStep, ticks, fmt, fmtSeconds, fmtTime, esc, r1, rows,
  } = KemuSequence;

  // ---------------------------------------------------------------- reading

  const facts = JSON.parse(document.getElementById("run-facts").textContent);
  const lines = document.getElementById("run-trace").textContent.split("\n").filter((l) => l);
  const events = lines.length > 1 ? JSON.parse("[" + lines.slice(1).join(",") + "]") : [];

  // ---------------------------------------------------------------- the page

  const model = KemuSequence.buildModel(events, facts.brokers);
  const laneName = model.laneName;
  const state = {
    axis: "order", // or "time"
    view: null, // [lo, hi] in the axis' units
    topic: "",
    hiddenLanes: new Set(),
    // the store's reads (most of them the driver's polling) are off at first
    hiddenTypes: new Set(model.types.map(([t]) => t).filter(isStoreRead)),
    focus: null, // the index of the event a problem's link went to
  };

  const main = document.createElement("main");
  document.body.appendChild(main);
  main.innerHTML = header() + controls() +
    '<div class="panel"><h2>Message sequence</h2><div class="hint" id="diagram-hint"></div>' +
    '<div id="diagram-box"><svg id="diagram" role="img" aria-label="message sequence diagram"></svg></div>' +
    `<div class="legend" id="mark-legend">${MARK_LEGEND.map(([glyph, what]) => `<span><b>${glyph}</b> ${esc(what)}</span>`).join("")}` +
    '<span><i style="background:var(--band)"></i>controller</span><span><i style="background:var(--fault);opacity:0.5"></i>fault</span>' +
    '<span>\u2013 \u2013 \u2715 dropped message</span>' +
    Object.entries(PARTITION_STATE_COLOURS).map(([name, colour]) => `<span><i style="background:${colour}"></i>partition entered ${name}</span>`).join("") +
    "</div></div>" +
    '<div class="panel"><h2>Time series</h2><div class="hint">Trace time in seconds; the faults of the run shaded red' +
    ' (instantaneous ones dashed). They follow the diagram\u2019s zoom.</div><div class="charts" id="charts"></div></div>';
  const tip = document.createElement("div");
  tip.id = "tip";
  document.body.appendChild(tip);

  function header() {
    const status = esc(facts.status);
    const problems = [
      ...facts.failures.map((v) => ["failure", v]),
      ...facts.violations.map((v) => ["violation", v]),
      ...facts.notices.map((v) => ["notice", v]),
    ].map(([k, v]) => `<li class="${k}">${k} ${esc(v.rule)}: ${esc(v.message)}` +
      (v.seq != null ? ` (<a href="#diagram" data-goto="${v.seq}">event ${v.seq}</a>, t=${Number(v.ts).toFixed(3)}s)` : "") + "</li>");
    const SHOWN = 8;
    const listed = problems.length <= SHOWN + 2 ? problems.join("")
      : problems.slice(0, SHOWN).join("") + `<li><details><summary>${problems.length - SHOWN} more</summary>` +
        `<ul>${problems.slice(SHOWN).join("")}</ul></details></li>`;
    return `<h1>${esc(facts.scenario)} <span class="status-${status}">${status}</span></h1>` +
      `<p class="facts">seed ${facts.seed} \u00b7 ${esc(facts.mode)} \u00b7 store ${esc(facts.store)}` +
      `${facts.processes ? " \u00b7 one process per broker" : ""} \u00b7 ${facts.brokers} broker(s) \u00b7 ` +
      `${facts.events} events \u00b7 ${Number(facts.simulated_seconds).toFixed(3)} s of trace time</p>` +
      (facts.description ? `<p class="description">${esc(facts.description)}</p>` : "") +
      (facts.error ? `<p class="status-error">error: ${esc(facts.error)}</p>` : "") +
      (problems.length ? `<ul class="problems">${listed}</ul>` : "");
  }

  function controls() {
    const topicOptions = ['<option value="">every topic</option>',
      ...model.topicNames.map((t) => `<option value="${esc(t)}">${esc(t)}</option>`)].join("");
    const laneBoxes = model.laneIds.map((id) =>
      `<label><input type="checkbox" data-lane="${esc(id)}" checked> ${esc(laneName(id))}</label>`).join("");
    const typeBoxes = model.types.map(([t, c]) =>
      `<label><input type="checkbox" data-type="${esc(t)}"${state.hiddenTypes.has(t) ? "" : " checked"}> <i style="color:${typeColour(t)}">\u25a0</i> ${esc(t)} (${c})</label>`).join("");
    return '<div class="panel controls" id="controls">' +
      '<label>axis <select id="axis"><option value="order">event order</option><option value="time">trace time</option></select></label>' +
      `<label>topic <select id="topic">${topicOptions}</select></label>` +
      '<span><button id="zoom-in" type="button">+</button> <button id="zoom-out" type="button">\u2212</button> ' +
      '<button id="zoom-reset" type="button">whole run</button></span>' +
      `<details><summary>nodes (${model.laneIds.length})</summary><div class="checklist" id="lanes">${laneBoxes}</div></details>` +
      `<details><summary>message types (${model.types.length})</summary><div><button type="button" id="types-all">all</button> ` +
      '<button type="button" id="types-none">none</button> <button type="button" id="types-no-reads">no store reads</button></div>' +
      `<div class="checklist" id="types">${typeBoxes}</div></details>` +
      '<span class="hint">wheel: zoom \u00b7 drag: pan \u00b7 double-click: whole run \u00b7 hover: details</span></div>';
  }


  // ---------------------------------------------------------------- the diagram

  const svg = document.getElementById("diagram");
  const diagram = KemuSequence.Diagram({
    events, model, svg, state, tip, steps: facts.steps, drawAll,
    box: document.getElementById("diagram-box"), hint: document.getElementById("diagram-hint"),
  });
  const { redraw, zoomAt, clampView, fullDomain, indexAt } = diagram;
  function drawAll() {
    diagram.draw();
    drawCharts();
    measureOverflow();
  }
  // a problem's event link: the diagram around that event, marked
  main.addEventListener("click", (ev) => {
    const link = ev.target.closest ? ev.target.closest("[data-goto]") : null;
    if (!link || !events.length) return;
    ev.preventDefault();
    diagram.goTo(Math.max(0, Math.min(events.length - 1, Number(link.dataset.goto) - events[0].seq)));
    document.getElementById("diagram-box").scrollIntoView({ block: "center" });
  });
  document.getElementById("zoom-in").onclick = () => zoomAt(0.5, 0.5);
  document.getElementById("zoom-out").onclick = () => zoomAt(2, 0.5);
  document.getElementById("zoom-reset").onclick = () => { state.view = fullDomain(); redraw(); };
  document.getElementById("axis").onchange = (ev) => {
    // keep the same stretch of the run in view
    const [lo, hi] = state.view;
    state.axis = ev.target.value;
    if (!events.length) state.view = fullDomain();
    else if (state.axis === "time") state.view = clampView(events[Math.round(lo)].ts, events[Math.round(hi)].ts);
    else state.view = clampView(indexAt(lo), indexAt(hi));
    redraw();
  };
  document.getElementById("topic").onchange = (ev) => {
    state.topic = ev.target.value;
    series = buildSeries(state.topic);
    chartFrames();
    redraw();
  };
  document.getElementById("lanes").onchange = (ev) => {
    const id = ev.target.dataset.lane;
    if (ev.target.checked) state.hiddenLanes.delete(id); else state.hiddenLanes.add(id);
    redraw();
  };
  const typeBoxes = () => [...document.querySelectorAll("#types input")];
  document.getElementById("types").onchange = (ev) => {
    const t = ev.target.dataset.type;
    if (ev.target.checked) state.hiddenTypes.delete(t); else state.hiddenTypes.add(t);
    redraw();
  };
  function setTypes(shown) {
    state.hiddenTypes = new Set();
    for (const box of typeBoxes()) {
      box.checked = shown(box.dataset.type);
      if (!box.checked) state.hiddenTypes.add(box.dataset.type);
    }
    redraw();
  }
  document.getElementById("types-all").onclick = () => setTypes(() => true);
  document.getElementById("types-none").onclick = () => setTypes(() => false);
  document.getElementById("types-no-reads").onclick = () =>
    setTypes((t) => !isStoreRead(t));
  window.addEventListener("resize", redraw);

  // ---------------------------------------------------------------- time series

  const charts = document.getElementById("charts");
  const CHART_H = 170;
  const M = { left: 54, right: 14, top: 10, bottom: 34 };
  const TOP_TYPES = 6;
  const MAX_WATERMARKS = 10;
  const faultTimes = model.faults.map((f) => ({ a: events[f.a].ts, b: events[f.b].ts, fault: f }));
  const instantFaults = [];
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    if (e.kind === "fault" && e.node === "chaos" && e.type === "fault_injected" && e.fields.instant) instantFaults.push(i);
  }
  let series = buildSeries("");

  // A step series: points [t, value] in time order, each value holding until the next.
  function stepPoints() {
    const points = [];
    return {
      points,
      put(t, value) {
        const last = points[points.length - 1];
        if (last && last[0] === t) last[1] = value;
        else if (!last || last[1] !== value) points.push([t, value]);
      },
    };
  }

  // the charts; with a topic, those of its partitions only (the queue and the messages
  // are the whole cluster's)
  function buildSeries(only) {
    const out = [];
    const wanted = (topic) => !only || String(topic) === only;
    // partitions by state, as the controller's requests and transitions tell it
    const categories = ["online", "under-replicated", "offline", "deleting"];
    const where = new Map(); // "topic-partition" -> category
    const counts = { online: 0, "under-replicated": 0, offline: 0, deleting: 0 };
    const stacks = categories.map(() => stepPoints());
    const set = (tp, category) => {
      const before = where.get(tp);
      if (before === category) return false;
      if (before) counts[before]--;
      if (category) { counts[category]++; where.set(tp, category); } else where.delete(tp);
      return true;
    };
    const judged = (leader, isr, replicas) =>
      leader === -2 ? "deleting" : leader < 0 ? "offline" : isr.length < replicas.length ? "under-replicated" : "online";
    for (const e of events) {
      const f = e.fields;
      let changed = false;
      if (e.type === "control_request" && e.node === "chaos" && f.states) {
        for (const [topic, partition, leader, , isr, replicas] of f.states) {
          if (!wanted(topic)) continue;
          changed = set(topic + "-" + partition, judged(leader, isr, replicas)) || changed;
        }
      } else if (!wanted(f.topic)) {
        continue;
      } else if (e.type === "isr_altered") {
        changed = set(f.topic + "-" + f.partition, judged(f.leader, f.to_isr, f.replicas));
      } else if (e.kind === "transition" && e.type === "partition") {
        const tp = f.topic + "-" + f.partition;
        if (f.to_state === "NonExistentPartition") changed = set(tp, null);
        else if (f.to_state === "OfflinePartition") changed = set(tp, "offline");
      } else if (e.type === "topic_deletion_completed") {
        for (const tp of [...where.keys()]) {
          if (tp.slice(0, tp.lastIndexOf("-")) === f.topic) changed = set(tp, null) || changed;
        }
      }
      if (changed) categories.forEach((c, k) => stacks[k].put(e.ts, counts[c]));
    }
    out.push({
      id: "partitions", title: "Partitions by state", unit: "partitions", stacked: true, integer: true,
      note: "from the controllers\u2019 LeaderAndIsr and UpdateMetadata requests, AlterIsr and partition transitions",
      lines: categories.map((c, k) => ({ name: c, colour: STATE_COLOURS[c], points: stacks[k].points })),
    });

    // each controller's event queue: the events still queued as each one starts
    // (every point kept: a burst at one instant shows as a spike to its deepest)
    const queues = new Map(); // node -> points
    for (const e of events) {
      if (e.actor === "controller" && e.type === "controller_event_start") {
        if (!queues.has(e.node)) queues.set(e.node, [[0, 0]]);
        queues.get(e.node).push([e.ts, e.fields.queue_size || 0]);
      } else if (queues.has(e.node) && /^(node_crashed|node_stopped|controller_resigned)$/.test(e.type)) {
        queues.get(e.node).push([e.ts, 0]); // what was queued is dropped
      }
    }
    out.push({
      id: "queue", title: "Controller event queue", unit: "events queued", integer: true,
      note: "per broker: the events waiting as each one starts (Kafka\u2019s EventQueueSize)",
      lines: model.laneIds.filter((id) => queues.has(id)).map((node) => ({
        name: node, colour: PALETTE[model.lane.get(node) % PALETTE.length], points: queues.get(node),
      })),
    });

    // messages between nodes per second, by type (binned when drawn)
    const sends = [];
    const totals = new Map();
    for (const e of events) {
      if (e.kind !== "send" || nodeOf(e.fields.src) === nodeOf(e.fields.dst)) continue;
      sends.push([e.ts, e.type]);
      totals.set(e.type, (totals.get(e.type) || 0) + 1);
    }
    const top = [...totals.entries()].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1)).slice(0, TOP_TYPES).map(([t]) => t);
    const names = [...top, ...(totals.size > top.length ? ["other"] : [])];
    out.push({
      id: "messages", title: "Messages between nodes", unit: "messages/s", binned: true,
      note: `sent per second; the ${top.length} commonest types, the rest as \u201cother\u201d`,
      // a request and its answer share a colour; the answer's line is dashed
      lines: names.map((name) => ({ name, colour: name === "other" ? "#777" : typeColour(name), dashed: /Response(Data)?$/.test(name) })),
      samples: sends.map(([t, type]) => [t, top.includes(type) ? top.indexOf(type) : top.length, 1]),
    });

    // the data plane, where there is one
    const produced = [];
    for (const e of events) {
      if (e.type !== "produce_result" || e.node !== "chaos" || !wanted(e.fields.topic)) continue;
      produced.push([e.ts, e.fields.error === "NONE" ? 0 : 1, (e.fields.records || []).length]);
    }
    if (produced.length) {
      out.push({
        id: "produce", title: "Produce throughput", unit: "records/s", binned: true,
        note: "records per second in the workload\u2019s Produce answers",
        lines: [{ name: "acknowledged", colour: "#2ca02c" }, { name: "refused or unanswered", colour: "#d62728" }],
        samples: produced,
      });
    }
    const marks = new Map();
    for (const e of events) {
      if (e.type !== "high_watermark_moved" || !wanted(e.fields.topic)) continue;
      const tp = e.fields.topic + "-" + e.fields.partition;
      if (!marks.has(tp)) marks.set(tp, stepPoints());
      marks.get(tp).put(e.ts, e.fields.to);
    }
    if (marks.size) {
      const shown = [...marks.entries()].sort((x, y) => y[1].points.length - x[1].points.length || (x[0] < y[0] ? -1 : 1)).slice(0, MAX_WATERMARKS);
      shown.sort((x, y) => (x[0] < y[0] ? -1 : 1));
      out.push({
        id: "watermarks", title: "High watermarks", unit: "offset", integer: true,
        note: marks.size > shown.length ? `the ${shown.length} partitions whose high watermark moved most, of ${marks.size}` : "per partition, as its leaders moved it",
        lines: shown.map(([tp, steps], k) => ({ name: tp, colour: PALETTE[k % PALETTE.length], points: steps.points })),
      });
    }
    return out;
  }

  function chartFrames() {
    const of = state.topic ? `, topic ${state.topic}` : "";
    charts.innerHTML = series.map((c) =>
      `<div class="chart" data-chart="${c.id}"><h3>${esc(c.title)}${c.id === "queue" || c.id === "messages" ? "" : esc(of)} (${esc(c.unit)})</h3>` +
      `<div class="hint">${esc(c.note)}</div><svg class="series" id="chart-${c.id}"></svg>` +
      `<div class="legend">${c.lines.map((l) => `<span><i style="background:${swatch(l)}"></i>${esc(l.name)}</span>`).join("")}</div></div>`).join("");
  }
  chartFrames();
  function swatch(line) {
    return line.dashed ? `repeating-linear-gradient(90deg, ${line.colour} 0 4px, transparent 4px 6px)` : line.colour;
  }

  function timeView() {
    let [lo, hi] = state.view;
    if (state.axis === "order" && events.length) {
      lo = events[Math.max(0, Math.round(lo))].ts;
      hi = events[Math.min(events.length - 1, Math.round(hi))].ts;
    }
    if (hi - lo < 1e-6) { lo = Math.max(0, lo - 0.0005); hi = lo + 0.001; }
    return [lo, hi];
  }

  // the value of a step series at t (0 before its first point)
  function valueAt(points, t) {
    let lo = 0, hi = points.length - 1, found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (points[mid][0] <= t) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return found < 0 ? 0 : points[found][1];
  }

  // binned rates over [t0, t1]: for each line, [t, value] steps of one bin each
  function binned(chart, t0, t1, plotW) {
    const width = niceStep(t1 - t0, Math.max(10, Math.min(120, Math.floor(plotW / 6))));
    const first = Math.floor(t0 / width) * width;
    const bins = Math.max(1, Math.ceil((t1 - first) / width) + 1);
    const sums = chart.lines.map(() => new Float64Array(bins));
    for (const [t, line, amount] of chart.samples) {
      if (t < first || t > t1) continue;
      const b = Math.floor((t - first) / width);
      if (b >= 0 && b < bins) sums[line][b] += amount;
    }
    return {
      width,
      lines: chart.lines.map((l, k) => ({ ...l, points: [...sums[k]].map((v, b) => [first + b * width, v / width]) })),
    };
  }

  function drawCharts() {
    const [t0, t1] = timeView();
    for (const chart of series) {
      const el = document.getElementById("chart-" + chart.id);
      const width = Math.max(M.left + M.right + 60, Math.floor(el.parentElement.clientWidth));
      const plotW = width - M.left - M.right, plotH = CHART_H - M.top - M.bottom;
      const X = (t) => M.left + ((t - t0) / (t1 - t0)) * plotW;
      let lines = chart.lines, binWidth = 0;
      if (chart.binned) ({ lines, width: binWidth } = binned(chart, t0, t1, plotW));
      // the stacked chart draws cumulative sums
      if (chart.stacked) {
        const times = [...new Set(lines.flatMap((l) => l.points.map((p) => p[0])))].sort((a, b) => a - b);
        let below = times.map(() => 0);
        lines = lines.map((l) => {
          const top = times.map((t, k) => below[k] + valueAt(l.points, t));
          const stacked = { ...l, points: times.map((t, k) => [t, top[k]]), base: times.map((t, k) => [t, below[k]]) };
          below = top;
          return stacked;
        });
      }
      let ymax = 0;
      for (const l of lines) {
        const before = valueAt(l.points, t0);
        ymax = Math.max(ymax, before);
        for (const [t, v] of l.points) if (t >= t0 && t <= t1) ymax = Math.max(ymax, v);
      }
      const yt = ticks(0, ymax > 0 ? ymax : 1, 4, chart.integer);
      const ytop = yt.values[yt.values.length - 1] < ymax ? yt.values[yt.values.length - 1] + yt.step : Math.max(yt.values[yt.values.length - 1], yt.step);
      if (!yt.values.includes(ytop)) yt.values.push(ytop);
      const Y = (v) => M.top + plotH - (v / ytop) * plotH;
      const out = [`<defs><clipPath id="clip-${chart.id}"><rect x="${M.left}" y="${M.top - 1}" width="${plotW}" height="${plotH + 2}"/></clipPath></defs>`];
      out.push('<g class="axis">');
      for (const v of yt.values) {
        if (v > ytop) continue;
        const y = r1(Y(v));
        out.push(`<line class="grid" x1="${M.left}" x2="${M.left + plotW}" y1="${y}" y2="${y}"/>`);
        out.push(`<text class="label" x="${M.left - 5}" y="${y + 4}" text-anchor="end">${fmt(v, yt.step)}</text>`);
      }
      const xt = ticks(t0, t1, Math.max(2, Math.floor(plotW / 80)));
      for (const v of xt.values) {
        const x = r1(X(v));
        out.push(`<line x1="${x}" x2="${x}" y1="${M.top + plotH}" y2="${M.top + plotH + 4}"/>`);
        const anchor = x < M.left + 20 ? "start" : x > M.left + plotW - 20 ? "end" : "middle";
        out.push(`<text class="label" x="${x}" y="${M.top + plotH + 15}" text-anchor="${anchor}">${fmt(v, xt.step)}</text>`);
      }
      out.push(`<line x1="${M.left}" x2="${M.left + plotW}" y1="${M.top + plotH}" y2="${M.top + plotH}"/>`);
      out.push(`<line x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${M.top + plotH}"/>`);
      out.push(`<text class="label axis-label" x="${M.left + plotW}" y="${CHART_H - 4}" text-anchor="end">time (s)` +
        (binWidth ? `, bins of ${fmtSeconds(binWidth)}` : "") + "</text></g>");
      out.push(`<g clip-path="url(#clip-${chart.id})">`);
      for (const f of faultTimes) {
        if (f.b < t0 || f.a > t1) continue;
        const x1 = Math.max(M.left - 1, X(f.a)), x2 = Math.min(M.left + plotW + 1, X(f.b));
        out.push(`<rect class="fault-series" data-fault="${esc(f.fault.fault)}" x="${r1(x1)}" y="${M.top}" width="${r1(Math.max(2, x2 - x1))}" height="${plotH}"/>`);
      }
      for (const i of instantFaults) {
        const t = events[i].ts;
        if (t < t0 || t > t1) continue;
        const x = r1(X(t));
        out.push(`<line class="fault-instant" data-fault="${esc(events[i].fields.fault)}" x1="${x}" x2="${x}" y1="${M.top}" y2="${M.top + plotH}"/>`);
      }
      let points = 0;
      for (const l of [...lines].reverse()) {
        const path = stepPath(l.points, t0, t1, X, Y);
        points += l.points.length;
        if (chart.stacked) {
          const base = stepPath(l.base, t0, t1, X, Y, true);
          out.push(`<path d="${path} ${base} Z" fill="${l.colour}" fill-opacity="0.75" stroke="none"/>`);
        } else {
          out.push(`<path d="${path}" fill="none" stroke="${l.colour}" stroke-width="1.5"${l.dashed ? ' stroke-dasharray="5 3"' : ""}/>`);
        }
      }
      out.push(`</g><line class="cursor" x1="-10" x2="-10" y1="${M.top}" y2="${M.top + plotH}"/>`);
      el.setAttribute("width", width);
      el.setAttribute("height", CHART_H);
      el.setAttribute("viewBox", `0 0 ${width} ${CHART_H}`);
      el.innerHTML = out.join("");
      el.dataset.empty = points ? "0" : "1";
      el.__chart = { chart, lines, t0, t1, plotW, binWidth };
    }
  }

  // "M x,y H x V y ..." of a step series over [t0, t1]; reversed for an area's lower edge
  function stepPath(points, t0, t1, X, Y, reversed) {
    const xy = [[X(t0), Y(valueAt(points, t0))]];
    for (const [t, v] of points) {
      if (t <= t0) continue;
      if (t > t1) break;
      xy.push([X(t), xy[xy.length - 1][1]], [X(t), Y(v)]);
    }
    xy.push([X(t1), xy[xy.length - 1][1]]);
    if (reversed) xy.reverse();
    return (reversed ? "L" : "M") + xy.map(([x, y]) => r1(x) + "," + r1(y)).join(" L");
  }

  charts.addEventListener("pointermove", (ev) => {
    const el = ev.target.closest ? ev.target.closest("svg.series") : null;
    if (!el || !el.__chart) { tip.style.display = "none"; return; }
    const { chart, lines, t0, t1, plotW, binWidth } = el.__chart;
    const box = el.getBoundingClientRect();
    const x = ev.clientX - box.left;
    const cursor = el.querySelector(".cursor");
    if (x < M.left || x > M.left + plotW) { tip.style.display = "none"; cursor.setAttribute("x1", -10); cursor.setAttribute("x2", -10); return; }
    cursor.setAttribute("x1", x);
    cursor.setAttribute("x2", x);
    const t = t0 + ((x - M.left) / plotW) * (t1 - t0);
    const values = {};
    for (const l of lines) {
      const v = chart.stacked ? valueAt(l.points, t) - valueAt(l.base, t) : valueAt(l.points, t);
      values[l.name] = Number.isInteger(v) ? v : v.toFixed(1);
    }
    const at = binWidth ? `${fmtTime(Math.floor(t / binWidth) * binWidth)} s, a bin of ${fmtSeconds(binWidth)}` : `${fmtTime(t)} s`;
    tip.innerHTML = `<b>${esc(chart.title)} at ${at}</b><table>${rows(values)}</table>`;
    tip.style.display = "block";
    const w = tip.offsetWidth;
    tip.style.left = (ev.clientX + 14 + w > window.innerWidth ? Math.max(0, ev.clientX - 14 - w) : ev.clientX + 14) + "px";
    tip.style.top = ev.clientY + 14 + "px";
  });
  charts.addEventListener("pointerleave", () => { tip.style.display = "none"; });

  // ---------------------------------------------------------------- overflow

  function measureOverflow() {
    const over = [];
    const root = document.documentElement;
    if (root.scrollWidth > root.clientWidth + 1) over.push("page");
    for (const el of document.querySelectorAll(".panel, h1, .facts, .description, .legend")) {
      if (el.scrollWidth > el.clientWidth + 1) over.push(el.id || el.className);
    }
    for (const el of document.querySelectorAll("svg")) {
      const width = Number(el.getAttribute("width"));
      for (const label of el.querySelectorAll("text.label")) {
        const box = label.getBBox();
        if (box.x < -0.5 || box.x + box.width > width + 0.5) {
          over.push((el.id || "svg") + ":" + label.textContent);
          break;
        }
      }
    }
    document.body.dataset.overflow = over.length ? over.join(" ") : "none";
  }

  state.view = fullDomain();
  document.body.dataset.lanes = model.laneIds.join(" ");
  drawAll();
  document.body.dataset.ready = "1";
})();
