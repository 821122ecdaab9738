/* The chaos run report (cluster/chaos/report.py): inline in report.html, no network.
 *
 * Reads the run's trace (docs/trace-schema.md) from the page and draws:
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
  const SVGNS = "http://www.w3.org/2000/svg";
  const MAX_ARROWS = 6000; // drawn at once; the rest of a dense view is merged per pixel
  const MAX_MARKS = 4000;
  const MAX_TOPIC_LANES = 12;
  const LANE_H = 30;
  const TOPIC_H = 20;
  const GUTTER = 118; // lane names
  const PAD_R = 14;
  const AXIS_H = 30;
  const STORE_READS = new Set(["get", "children", "exists", "watch"]);
  const CONTROL = new Set(["LeaderAndIsr", "UpdateMetadata", "StopReplica"]);
  const PALETTE = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#393b79", "#637939", "#843c39", "#7b4173",
  ];
  const FIXED_COLOURS = {
    LeaderAndIsr: "#1f5fbf", UpdateMetadata: "#17a2b8", StopReplica: "#b0279b",
    Fetch: "#9aa3ad", Produce: "#2ca02c", Metadata: "#c3c9d1", AlterIsr: "#ff7f0e",
    CreateTopics: "#393b79", DeleteTopics: "#843c39", CreatePartitions: "#637939",
  };
  const MARK_LEGEND = [
    ["\u2605", "elected controller"], ["\u2606", "resigned"], ["\u2716", "crashed or halted"],
    ["\u25a0", "stopped"], ["\u25b2", "started"], ["\u2016", "paused"], ["\u25b6", "resumed"],
    ["\u25cc", "session expired"], ["\u21bb", "registered again"], ["\u26a0", "error"],
    ["\u25b8", "step"], ["\u25c6", "admin result"], ["\u25c7", "producer done"], ["\u203c", "failure or violation"],
    ["\u2691", "final phase"], ["\u26a1", "fault injected"], ["\u271a", "healed"],
    ["+", "topic written"], ["\u2212", "topic marked, deletion started or completed"],
  ];
  const STATE_COLOURS = {
    online: "#4caf50", "under-replicated": "#f0a30a", offline: "#d9352b", deleting: "#8e8e8e",
  };
  const PARTITION_STATE_COLOURS = {
    NewPartition: "#9ecae1", OnlinePartition: "#4caf50", OfflinePartition: "#d9352b",
    NonExistentPartition: "#8e8e8e",
  };

  // ---------------------------------------------------------------- reading

  const facts = JSON.parse(document.getElementById("run-facts").textContent);
  const lines = document.getElementById("run-trace").textContent.split("\n").filter((l) => l);
  const events = lines.length > 1 ? JSON.parse("[" + lines.slice(1).join(",") + "]") : [];

  const nodeOf = (endpoint) => String(endpoint).split("/")[0];
  const family = (type) => String(type).replace(/(Request|Response)(Data)?$/, "");
  function hashColour(text) {
    let h = 0;
    for (let k = 0; k < text.length; k++) h = (h * 31 + text.charCodeAt(k)) >>> 0;
    return PALETTE[h % PALETTE.length];
  }
  function typeColour(type) {
    if (type.startsWith("store ")) return isStoreRead(type) ? "#b5bcc6" : "#6c757d";
    const fam = family(type);
    return FIXED_COLOURS[fam] || hashColour(fam);
  }
  function isStoreRead(type) {
    return type.startsWith("store ") && STORE_READS.has(type.slice(6));
  }
  function topicOfPath(path) {
    const m = /^\/(?:brokers\/topics|admin\/delete_topics|config\/topics)\/([^/]+)/.exec(path || "");
    return m ? m[1] : null;
  }

  // ---------------------------------------------------------------- the model

  // the node that records the store's events: "store" (embedded), "zk" (ZooKeeper)
  const STORE = (events.find((e) => e.kind === "store") || { node: "store" }).node;

  function buildModel() {
    const laneIds = [];
    for (let b = 0; b < facts.brokers; b++) laneIds.push("broker-" + b);
    const others = new Set();
    const topics = new Map(); // name -> first index
    const noteTopic = (t, i) => {
      if (t != null && t !== "" && !topics.has(t)) topics.set(String(t), i);
    };
    for (let i = 0; i < events.length; i++) {
      const e = events[i];
      if (e.kind === "send" || e.kind === "deliver") {
        others.add(nodeOf(e.fields.src));
        others.add(nodeOf(e.fields.dst));
      } else others.add(e.node);
      const f = e.fields;
      if (e.kind === "store") {
        if (f.result === "ok" && !STORE_READS.has(e.type)) noteTopic(topicOfPath(f.path), i);
      } else if (f.topic !== undefined) noteTopic(f.topic, i);
    }
    for (const id of laneIds) others.delete(id);
    others.delete(STORE);
    others.delete("chaos");
    const extra = [...others].filter((n) => n && n !== "network").sort((a, b) => {
      const ma = /^broker-(\d+)$/.exec(a), mb = /^broker-(\d+)$/.exec(b);
      if (ma && mb) return Number(ma[1]) - Number(mb[1]);
      return a < b ? -1 : a > b ? 1 : 0;
    });
    laneIds.push(...extra, STORE, "chaos");
    const lane = new Map(laneIds.map((id, k) => [id, k]));
    const topicNames = [...topics.keys()].sort((a, b) => topics.get(a) - topics.get(b));

    // controller request payloads from the chaos tap, by endpoints and correlation id
    const tapped = new Map();
    for (let i = 0; i < events.length; i++) {
      const e = events[i];
      if (e.node !== "chaos" || e.actor !== "network_tap") continue;
      const f = e.fields;
      const key = (e.type === "control_request" ? "q|" : "r|") + f.src + "|" + f.dst + "|" + e.corr;
      if (!tapped.has(key)) tapped.set(key, i);
    }
    const topicsOfTap = (i) => {
      if (i < 0) return null;
      const f = events[i].fields;
      const rows = f.states || f.stops;
      return rows ? [...new Set(rows.map((r) => String(r[0])))] : null;
    };

    const arrows = []; // {a, b, from, to, type, cls, tap, topics}
    const marks = []; // {i, lane, glyph, cls, type, topic}
    const bands = []; // {lane, a, b, epoch}
    const faults = []; // {a, b, lanes, id, fault, detail, instant}
    const states = []; // {i, topic, to}: partition transitions per topic lane
    const pending = new Map();
    const lastSend = new Map();
    const typeCount = new Map();
    const countType = (t) => typeCount.set(t, (typeCount.get(t) || 0) + 1);
    const addMark = (i, laneId, glyph, cls, topic) => {
      if (!lane.has(laneId)) return;
      marks.push({ i, lane: lane.get(laneId), glyph, cls, type: events[i].type, topic: topic == null ? null : String(topic) });
    };
    const openBand = new Map(); // lane -> band
    const closeBand = (laneId, i) => {
      const band = openBand.get(laneId);
      if (band) { band.b = i; openBand.delete(laneId); }
    };
    const openFault = new Map();

    for (let i = 0; i < events.length; i++) {
      const e = events[i];
      const f = e.fields;
      switch (e.kind) {
        case "send": {
          const from = nodeOf(f.src), to = nodeOf(f.dst);
          if (from === to || !lane.has(from) || !lane.has(to)) break;
          const key = e.type + "|" + f.src + "|" + to + "|" + e.corr;
          const queue = pending.get(key);
          if (queue) queue.push(i); else pending.set(key, [i]);
          break;
        }
        case "deliver":
        case "drop": {
          if (f.src === undefined) break;
          const from = nodeOf(f.src), to = f.dst !== undefined ? nodeOf(f.dst) : e.node;
          if (from === to || !lane.has(from) || !lane.has(to)) {
            if (e.kind === "drop" && lane.has(e.node)) addMark(i, e.node, "\u2715", "bad");
            break;
          }
          const key = e.type + "|" + f.src + "|" + to + "|" + e.corr;
          const queue = pending.get(key);
          let a = queue && queue.length ? queue.shift() : -1;
          if (a < 0) a = lastSend.has(key) ? lastSend.get(key) : -1; // a duplicate
          if (a < 0) {
            if (e.kind === "drop") addMark(i, to, "\u2715", "bad");
            break;
          }
          lastSend.set(key, a);
          const sent = events[a].fields;
          const request = family(e.type) === e.type || /Request(Data)?$/.test(e.type);
          const tap = tapped.get((request ? "q|" : "r|") + sent.src + "|" + sent.dst + "|" + e.corr);
          // an answer concerns the topics of its request
          const asked = request ? tap : tapped.get("q|" + sent.dst + "|" + sent.src + "|" + e.corr);
          arrows.push({
            a, b: i, from: lane.get(from), to: lane.get(to), type: e.type,
            cls: e.kind === "drop" ? "drop" : "", tap: tap === undefined ? -1 : tap,
            topics: topicsOfTap(asked === undefined ? -1 : asked),
          });
          countType(e.type);
          break;
        }
        case "store": {
          const owner = e.actor;
          if (e.type === "session_expired") {
            addMark(i, STORE, "\u25cc", "bad");
            addMark(i, owner, "\u25cc", "bad");
            break;
          }
          if (!lane.has(owner) || e.type === "delete_ephemeral") break;
          const type = "store " + e.type;
          arrows.push({
            a: i, b: i, from: lane.get(owner), to: lane.get(STORE), type,
            cls: "store", tap: -1, topics: (() => { const t = topicOfPath(f.path); return t ? [t] : null; })(),
          });
          countType(type);
          break;
        }
        case "transition":
          if (e.type === "partition") states.push({ i, topic: String(f.topic), to: f.to_state });
          break;
        case "fault":
          if (e.node !== "chaos") break;
          if (e.type === "fault_injected") {
            const hit = (f.nodes || []).filter((n) => lane.has(n));
            if (f.instant) {
              for (const n of hit) addMark(i, n, "\u26a1", "fault-mark");
              addMark(i, "chaos", "\u26a1", "fault-mark");
            } else {
              const fault = { a: i, b: events.length - 1, lanes: hit.map((n) => lane.get(n)), id: f.id, fault: f.fault, detail: f.detail };
              faults.push(fault);
              openFault.set(f.id, fault);
              addMark(i, "chaos", "\u26a1", "fault-mark");
            }
          } else if (e.type === "fault_healed") {
            const fault = openFault.get(f.id);
            if (fault) { fault.b = i; fault.healed = i; openFault.delete(f.id); }
            addMark(i, "chaos", "\u271a", "good");
          }
          break;
        case "error":
          if (e.type !== "controller_request_failed") addMark(i, e.node, "\u26a0", "bad");
          break;
        case "event":
          eventMark(e, i);
          break;
        default:
          break;
      }
    }
    for (const band of openBand.values()) band.b = events.length - 1;

    function eventMark(e, i) {
      const f = e.fields;
      switch (e.type) {
        case "controller_elected":
          for (const id of [...openBand.keys()]) closeBand(id, i);
          if (lane.has(e.node)) {
            const band = { lane: lane.get(e.node), a: i, b: i, epoch: f.epoch };
            bands.push(band);
            openBand.set(e.node, band);
          }
          addMark(i, e.node, "\u2605", "good");
          break;
        case "controller_resigned":
        case "controller_moved":
          closeBand(e.node, i);
          addMark(i, e.node, "\u2606", "");
          break;
        case "node_crashed":
        case "broker_halted":
          closeBand(e.node, i);
          addMark(i, e.node, "\u2716", "bad");
          break;
        case "node_stopped":
          closeBand(e.node, i);
          addMark(i, e.node, "\u25a0", "bad");
          break;
        case "node_started":
          addMark(i, e.node, "\u25b2", "good");
          break;
        case "node_paused":
          addMark(i, e.node, "\u2016", "bad");
          break;
        case "node_resumed":
          addMark(i, e.node, "\u25b6", "good");
          break;
        case "broker_reregistered":
          addMark(i, e.node, "\u21bb", "");
          break;
        case "unclean_leader_elected":
          addMark(i, e.node, "!", "bad", f.topic);
          break;
        case "topic_written":
        case "topic_marked_for_deletion":
        case "topic_deletion_completed":
        case "topic_deletion_halted":
        case "topic_deletion_resumed":
          addMark(i, e.node, e.type === "topic_written" ? "+" : "\u2212", "", f.topic);
          break;
        case "topic_deletion_started":
          addMark(i, e.node, "\u2212", "", (f.topics || [])[0]);
          break;
        case "step_started":
          addMark(i, "chaos", "\u25b8", "chaos");
          break;
        case "admin_result":
          addMark(i, "chaos", "\u25c6", f.error === "NONE" ? "chaos" : "bad", f.topic);
          break;
        case "produce_finished":
          addMark(i, "chaos", "\u25c7", "chaos", f.topic);
          break;
        case "scenario_failure":
        case "invariant_violated":
          addMark(i, "chaos", "\u203c", "bad");
          break;
        case "final_phase_started":
          addMark(i, "chaos", "\u2691", "chaos");
          break;
        default:
          break;
      }
    }

    const types = [...typeCount.entries()].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1));
    const rank = new Map([...typeCount.entries()].map(([t, c]) => [t, c]));
    // rare types first, so that a cap on what is drawn cuts the common ones
    arrows.sort((x, y) => rank.get(x.type) - rank.get(y.type) || x.a - y.a);
    // a request and its answer: the answer goes back between the same two actors with the
    // request's correlation id (one-way tells, corr 0, have none)
    const partner = new Map();
    const byEnds = new Map();
    arrows.forEach((arrow, n) => {
      const sent = events[arrow.a];
      if (arrow.cls === "store" || !sent.corr) return;
      byEnds.set(sent.fields.src + ">" + sent.fields.dst + "#" + sent.corr, n);
    });
    byEnds.forEach((n, key) => {
      const [ends, corr] = key.split("#");
      const [src, dst] = ends.split(">");
      const back = byEnds.get(dst + ">" + src + "#" + corr);
      if (back !== undefined) partner.set(n, back);
    });
    return { laneIds, lane, topicNames, arrows, marks, bands, faults, states, types, partner };
  }

  // ---------------------------------------------------------------- numbers and axes

  function niceStep(span, count) {
    if (!(span > 0)) return 1;
    const raw = span / Math.max(1, count);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function ticks(lo, hi, count, integer) {
    const step = integer ? Math.max(1, niceStep(hi - lo, count)) : niceStep(hi - lo, count);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return { step, values: out };
  }
  function fmt(v, step) {
    const a = Math.abs(v);
    if (a >= 1e6 && step >= 1e5) return trim((v / 1e6).toFixed(step >= 1e6 ? 0 : 1)) + "M";
    if (a >= 1e4 && step >= 1e3) return trim((v / 1e3).toFixed(step >= 1e3 ? 0 : 1)) + "k";
    const decimals = step >= 1 ? 0 : Math.min(6, Math.ceil(-Math.log10(step) - 1e-9));
    return v.toFixed(decimals);
  }
  function trim(s) {
    return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
  }
  function fmtSeconds(s) {
    if (s < 1e-3) return (s * 1e6).toFixed(0) + " \u00b5s";
    if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 2 : 1) + " ms";
    return s.toFixed(s < 10 ? 3 : 2) + " s";
  }
  function esc(text) {
    return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }
  function r1(v) {
    return Math.round(v * 10) / 10;
  }

  // ---------------------------------------------------------------- the page

  const model = buildModel();
  const state = {
    axis: "order", // or "time"
    view: null, // [lo, hi] in the axis' units
    topic: "",
    hiddenLanes: new Set(),
    // the store's reads (most of them the driver's polling) are off at first
    hiddenTypes: new Set(model.types.map(([t]) => t).filter(isStoreRead)),
    focus: null, // the index of the event a problem's link went to
  };
  const maxTs = events.length ? events[events.length - 1].ts : 0;
  const fullDomain = () => (state.axis === "order" ? [0, Math.max(1, events.length - 1)] : [0, maxTs > 0 ? maxTs : 1]);
  const pos = (i) => (state.axis === "order" ? i : events[i].ts);
  // the first event at or after time t (events are in time order)
  function indexAt(t) {
    let lo = 0, hi = events.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (events[mid].ts < t) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

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

  function laneName(id) {
    return id === "chaos" ? "chaos driver" : id === STORE ? "metadata store" : id;
  }

  // ---------------------------------------------------------------- the diagram

  const svg = document.getElementById("diagram");
  let layout = null;

  function visibleLanes() {
    return model.laneIds.map((id, k) => k).filter((k) => !state.hiddenLanes.has(model.laneIds[k]));
  }
  function visibleTopics() {
    if (state.topic) return [state.topic];
    return model.topicNames.slice(0, MAX_TOPIC_LANES);
  }

  function drawDiagram() {
    const box = document.getElementById("diagram-box");
    const width = Math.max(GUTTER + PAD_R + 60, Math.floor(box.clientWidth));
    const plotW = width - GUTTER - PAD_R;
    const lanes = visibleLanes();
    const topicLanes = visibleTopics();
    const laneY = new Map();
    let y = AXIS_H + 4;
    lanes.forEach((k) => { laneY.set(k, y + LANE_H / 2); y += LANE_H; });
    const topicY = new Map();
    if (topicLanes.length) y += 6;
    topicLanes.forEach((t) => { topicY.set(t, y + TOPIC_H / 2); y += TOPIC_H; });
    const plotBottom = y;
    const height = plotBottom + AXIS_H + 4;
    const [lo, hi] = state.view;
    const scale = plotW / (hi - lo || 1);
    const X = (v) => GUTTER + (v - lo) * scale;
    const inView = (a, b) => b >= lo && a <= hi;
    layout = { width, plotW, lo, hi, scale };

    const out = [];
    out.push(`<defs><clipPath id="plot-clip"><rect x="${GUTTER}" y="0" width="${plotW}" height="${height}"/></clipPath>` +
      '<marker id="head" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" orient="auto-start-reverse">' +
      '<path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker>' +
      '<marker id="cross" viewBox="0 0 8 8" refX="4" refY="4" markerWidth="7" markerHeight="7">' +
      '<path d="M0,0 L8,8 M8,0 L0,8" stroke="#c0281f" stroke-width="1.6"/></marker></defs>');
    // lanes
    lanes.forEach((k, n) => {
      const id = model.laneIds[k];
      const cy = laneY.get(k);
      out.push(`<g class="lane" data-lane="${esc(id)}"><rect class="lane-bg${n % 2 ? " alt" : ""}" x="${GUTTER}" y="${cy - LANE_H / 2}" width="${plotW}" height="${LANE_H}"/>` +
        `<line class="lane-line" x1="${GUTTER}" x2="${GUTTER + plotW}" y1="${cy}" y2="${cy}"/>` +
        `<text class="label lane-name fit" x="${GUTTER - 6}" y="${cy + 4}" text-anchor="end">${esc(laneName(id))}</text></g>`);
    });
    topicLanes.forEach((t, n) => {
      const cy = topicY.get(t);
      out.push(`<g class="topic-lane" data-topic="${esc(t)}"><rect class="lane-bg${n % 2 ? "" : " alt"}" x="${GUTTER}" y="${cy - TOPIC_H / 2}" width="${plotW}" height="${TOPIC_H}"/>` +
        `<text class="label topic-name fit" x="${GUTTER - 6}" y="${cy + 4}" text-anchor="end"><title>topic ${esc(t)}</title>${esc(t)}</text></g>`);
    });
    out.push('<g clip-path="url(#plot-clip)">');
    // controller bands
    for (let n = 0; n < model.bands.length; n++) {
      const band = model.bands[n];
      if (!laneY.has(band.lane)) continue;
      const a = pos(band.a), b = pos(band.b);
      if (!inView(a, b)) continue;
      const x1 = Math.max(GUTTER - 2, X(a)), x2 = Math.min(GUTTER + plotW + 2, X(b));
      const cy = laneY.get(band.lane);
      out.push(`<rect class="band hit" data-k="b${n}" data-lane="${esc(model.laneIds[band.lane])}" x="${r1(x1)}" y="${cy - LANE_H / 2 + 2}" width="${r1(Math.max(2, x2 - x1))}" height="${LANE_H - 4}"/>`);
      if (x2 - x1 > 110) out.push(`<text class="band-label" x="${r1(x1 + 4)}" y="${cy - LANE_H / 2 + 11}">controller, epoch ${esc(band.epoch)}</text>`);
    }
    // faults: a span on each lane they hit (under the arrows), and a strip along its top
    // (over them, drawn below)
    const faultRects = (cls, height) => {
      for (let n = 0; n < model.faults.length; n++) {
        const fault = model.faults[n];
        const a = pos(fault.a), b = pos(fault.b);
        if (!inView(a, b)) continue;
        const x1 = Math.max(GUTTER - 2, X(a)), x2 = Math.min(GUTTER + plotW + 2, X(b));
        for (const k of fault.lanes) {
          if (!laneY.has(k)) continue;
          out.push(`<rect class="${cls} hit" data-k="f${n}" data-lane="${esc(model.laneIds[k])}" data-fault="${esc(fault.fault)}" x="${r1(x1)}" y="${laneY.get(k) - LANE_H / 2 + 1}" width="${r1(Math.max(2, x2 - x1))}" height="${height}"/>`);
        }
      }
    };
    faultRects("fault", LANE_H - 2);
    // partition states per topic lane
    const wanted = new Set(topicLanes);
    let stateCount = 0;
    const stateSeen = new Set();
    for (const s of model.states) {
      if (!wanted.has(s.topic)) continue;
      const x = pos(s.i);
      if (x < lo || x > hi) continue;
      const px = Math.round(X(x));
      const key = s.topic + "|" + px + "|" + s.to;
      if (stateSeen.has(key)) continue;
      stateSeen.add(key);
      const cy = topicY.get(s.topic);
      out.push(`<rect class="state hit" data-k="s${s.i}" data-state="${esc(s.to)}" x="${px - 1}" y="${cy - TOPIC_H / 2 + 3}" width="3" height="${TOPIC_H - 6}" fill="${PARTITION_STATE_COLOURS[s.to] || "#777"}"/>`);
      stateCount++;
    }
    // arrows
    let drawn = 0, total = 0;
    const seen = new Set();
    for (let n = 0; n < model.arrows.length; n++) {
      const arrow = model.arrows[n];
      if (state.hiddenTypes.has(arrow.type)) continue;
      if (!laneY.has(arrow.from) || !laneY.has(arrow.to)) continue;
      if (state.topic && !(arrow.topics && arrow.topics.includes(state.topic))) continue;
      const a = pos(arrow.a), b = pos(arrow.b);
      if (!inView(Math.min(a, b), Math.max(a, b))) continue;
      total++;
      const x1 = Math.round(X(a) * 2) / 2, x2 = Math.round(X(b) * 2) / 2;
      const key = arrow.type + "|" + arrow.from + "|" + arrow.to + "|" + Math.round(x1 / 2) + "|" + Math.round(x2 / 2);
      if (seen.has(key) || drawn >= MAX_ARROWS) continue;
      seen.add(key);
      drawn++;
      const y1 = laneY.get(arrow.from), y2 = laneY.get(arrow.to);
      const colour = typeColour(arrow.type);
      const end = arrow.cls === "drop" ? "url(#cross)" : "url(#head)";
      out.push(`<line class="arrow ${arrow.cls}" data-k="a${n}" data-type="${esc(arrow.type)}" data-src="${esc(model.laneIds[arrow.from])}" data-dst="${esc(model.laneIds[arrow.to])}" x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2 + (y2 > y1 ? -5 : 5)}" stroke="${colour}" marker-end="${end}"/>`);
    }
    // marks
    let markCount = 0;
    const markSeen = new Set();
    for (let n = 0; n < model.marks.length && markCount < MAX_MARKS; n++) {
      const mark = model.marks[n];
      if (state.topic && mark.topic !== null && mark.topic !== state.topic) continue;
      const x = pos(mark.i);
      if (x < lo || x > hi) continue;
      const px = Math.round(X(x));
      const marksOnTopic = mark.topic !== null && topicY.has(mark.topic) && mark.cls !== "chaos";
      const targets = [];
      if (laneY.has(mark.lane)) targets.push(laneY.get(mark.lane));
      if (marksOnTopic && /^topic_|unclean/.test(mark.type)) targets.push(topicY.get(mark.topic));
      for (const cy of targets) {
        const key = mark.glyph + "|" + px + "|" + cy;
        if (markSeen.has(key)) continue;
        markSeen.add(key);
        out.push(`<text class="mark ${mark.cls}" data-k="m${n}" data-type="${esc(mark.type)}" data-lane="${esc(model.laneIds[mark.lane])}" x="${px}" y="${cy}">${mark.glyph}</text>`);
        markCount++;
      }
    }
    faultRects("fault-strip", 3);
    out.push("</g>");
    out.push(axes(plotBottom, plotW));
    if (state.focus !== null && pos(state.focus) >= lo && pos(state.focus) <= hi) {
      const x = r1(X(pos(state.focus)));
      out.push(`<line class="focus" x1="${x}" x2="${x}" y1="${AXIS_H}" y2="${plotBottom}"/>`);
    }
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.innerHTML = out.join("");
    fitLabels(svg, GUTTER - 10);
    svg.dataset.arrowsDrawn = drawn;
    svg.dataset.arrowsInView = total;
    const hint = document.getElementById("diagram-hint");
    const span = state.axis === "order"
      ? `events ${events.length ? events[Math.round(lo)].seq : 0} to ${events.length ? events[Math.round(hi)].seq : 0}`
      : `${fmtSeconds(lo)} to ${fmtSeconds(hi)}`;
    hint.textContent = `Showing ${span}: ${total} message(s) in view, ${drawn} drawn` +
      (drawn < total ? " (the others overlap them at this zoom: zoom in to see each)" : "") +
      `; ${markCount} mark(s), ${stateCount} partition state change(s).` +
      (!state.topic && model.topicNames.length > MAX_TOPIC_LANES ? ` Topic lanes: the first ${MAX_TOPIC_LANES} of ${model.topicNames.length} (pick one above).` : "");
  }

  // names longer than the gutter are cut, with an ellipsis (the whole name in a <title>)
  function fitLabels(root, room) {
    for (const label of root.querySelectorAll("text.fit")) {
      const title = label.querySelector("title");
      const node = [...label.childNodes].find((c) => c.nodeType === Node.TEXT_NODE);
      if (!node) continue;
      const whole = node.nodeValue;
      let text = whole;
      while (text.length > 1 && label.getComputedTextLength() > room) {
        text = text.slice(0, -1);
        node.nodeValue = text + "\u2026";
      }
      if (title === null && text !== whole) label.insertAdjacentHTML("afterbegin", `<title>${esc(whole)}</title>`);
    }
  }

  function axes(plotBottom, plotW) {
    const { lo, hi, scale } = layout;
    const X = (v) => GUTTER + (v - lo) * scale;
    const count = Math.max(2, Math.floor(plotW / 90));
    const out = ['<g class="axis">'];
    out.push(`<line x1="${GUTTER}" x2="${GUTTER + plotW}" y1="${plotBottom}" y2="${plotBottom}"/>`);
    out.push(`<line x1="${GUTTER}" x2="${GUTTER + plotW}" y1="${AXIS_H}" y2="${AXIS_H}"/>`);
    if (state.axis === "order") {
      const { step, values } = ticks(lo + 1, hi + 1, count); // in seq numbers: index + 1
      for (const seq of values) {
        const v = seq - 1;
        const i = Math.min(events.length - 1, Math.max(0, Math.round(v)));
        const x = r1(X(v));
        const anchor = edgeAnchor(x);
        out.push(`<line class="grid" x1="${x}" x2="${x}" y1="${AXIS_H}" y2="${plotBottom}"/>`);
        out.push(`<line x1="${x}" x2="${x}" y1="${plotBottom}" y2="${plotBottom + 4}"/>`);
        out.push(`<text class="label" x="${x}" y="${plotBottom + 15}" text-anchor="${anchor}">${fmt(seq, Math.max(1, step))}</text>`);
        out.push(`<line x1="${x}" x2="${x}" y1="${AXIS_H - 4}" y2="${AXIS_H}"/>`);
        out.push(`<text class="label" x="${x}" y="${AXIS_H - 7}" text-anchor="${anchor}">${events.length ? fmtTime(events[i].ts) : 0}</text>`);
      }
      out.push(`<text class="label axis-label" x="${GUTTER - 6}" y="${plotBottom + 15}" text-anchor="end">event #</text>`);
      out.push(`<text class="label axis-label" x="${GUTTER - 6}" y="${AXIS_H - 7}" text-anchor="end">time (s)</text>`);
    } else {
      const { step, values } = ticks(lo, hi, count);
      for (const v of values) {
        const x = r1(X(v));
        out.push(`<line class="grid" x1="${x}" x2="${x}" y1="${AXIS_H}" y2="${plotBottom}"/>`);
        out.push(`<line x1="${x}" x2="${x}" y1="${plotBottom}" y2="${plotBottom + 4}"/>`);
        out.push(`<text class="label" x="${x}" y="${plotBottom + 15}" text-anchor="${edgeAnchor(x)}">${fmt(v, step)}</text>`);
      }
      out.push(`<text class="label axis-label" x="${GUTTER - 6}" y="${plotBottom + 15}" text-anchor="end">time (s)</text>`);
    }
    out.push("</g>");
    return out.join("");
  }
  // a tick label at either end of the plot is set inside it
  function edgeAnchor(x) {
    if (x < GUTTER + 24) return "start";
    if (x > layout.width - PAD_R - 24) return "end";
    return "middle";
  }
  function fmtTime(t) {
    return t >= 100 ? t.toFixed(1) : t >= 10 ? t.toFixed(2) : t.toFixed(3);
  }

  // ---------------------------------------------------------------- zoom and pan

  function clampView(lo, hi) {
    const [flo, fhi] = fullDomain();
    const minSpan = state.axis === "order" ? Math.min(fhi - flo, 10) : Math.min(fhi - flo, 1e-4);
    let span = Math.max(minSpan, Math.min(fhi - flo, hi - lo));
    lo = Math.max(flo, Math.min(lo, fhi - span));
    return [lo, lo + span];
  }
  function zoomAt(factor, fraction) {
    const [lo, hi] = state.view;
    const centre = lo + (hi - lo) * fraction;
    state.view = clampView(centre - (centre - lo) * factor, centre + (hi - centre) * factor);
    redraw();
  }
  // one drawing for a burst of wheel or pointer events (a timer, not an animation frame,
  // so that a page in a background tab or a headless browser draws too)
  let pendingDraw = 0;
  function redraw() {
    if (pendingDraw) return;
    pendingDraw = setTimeout(() => { pendingDraw = 0; drawAll(); }, 16);
  }
  function drawAll() {
    drawDiagram();
    drawCharts();
    measureOverflow();
  }
  svg.addEventListener("wheel", (ev) => {
    if (!layout) return;
    ev.preventDefault();
    const x = ev.clientX - svg.getBoundingClientRect().left;
    const fraction = Math.min(1, Math.max(0, (x - GUTTER) / layout.plotW));
    zoomAt(Math.exp(ev.deltaY * 0.0015), fraction);
  }, { passive: false });
  // a press that moves more than a few pixels pans; one that does not leaves the tooltip
  let drag = null;
  svg.addEventListener("pointerdown", (ev) => {
    drag = { x: ev.clientX, view: state.view.slice(), moving: false, pointer: ev.pointerId };
  });
  svg.addEventListener("pointermove", (ev) => {
    if (drag && !drag.moving && Math.abs(ev.clientX - drag.x) > 3) {
      drag.moving = true;
      svg.classList.add("dragging");
      svg.setPointerCapture(drag.pointer);
      tip.style.display = "none";
    }
    if (drag && drag.moving) {
      const dv = ((ev.clientX - drag.x) / layout.plotW) * (drag.view[1] - drag.view[0]);
      state.view = clampView(drag.view[0] - dv, drag.view[1] - dv);
      redraw();
      return;
    }
    showTip(ev);
  });
  const endDrag = () => { drag = null; svg.classList.remove("dragging"); };
  svg.addEventListener("pointerup", endDrag);
  svg.addEventListener("pointercancel", endDrag);
  // a problem's event link: the diagram around that event, marked
  main.addEventListener("click", (ev) => {
    const link = ev.target.closest ? ev.target.closest("[data-goto]") : null;
    if (!link || !events.length) return;
    ev.preventDefault();
    const i = Math.max(0, Math.min(events.length - 1, Number(link.dataset.goto) - events[0].seq));
    state.focus = i;
    if (state.axis === "order") state.view = clampView(i - 150, i + 150);
    else {
      const [flo, fhi] = fullDomain();
      const half = Math.max(1e-3, (fhi - flo) / 100);
      state.view = clampView(events[i].ts - half, events[i].ts + half);
    }
    redraw();
    document.getElementById("diagram-box").scrollIntoView({ block: "center" });
  });
  svg.addEventListener("pointerleave", () => { tip.style.display = "none"; });
  svg.addEventListener("dblclick", () => { state.view = fullDomain(); redraw(); });
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

  // ---------------------------------------------------------------- the tooltip

  function rows(obj) {
    return Object.entries(obj).map(([k, v]) => {
      let text = typeof v === "string" ? v : JSON.stringify(v);
      if (text === undefined) text = String(v);
      if (text.length > 300) text = text.slice(0, 300) + "\u2026";
      return `<tr><td>${esc(k)}</td><td>${esc(text)}</td></tr>`;
    }).join("");
  }
  function eventRows(i) {
    const e = events[i];
    return rows({ seq: e.seq, ts: e.ts + " s", node: e.node, actor: e.actor, kind: e.kind, type: e.type, corr: e.corr, ...e.fields });
  }
  function describe(k) {
    const n = Number(k.slice(1));
    switch (k[0]) {
      case "a": {
        const arrow = model.arrows[n];
        const s = events[arrow.a], d = events[arrow.b];
        if (arrow.cls === "store") return `<b>${esc(arrow.type)}</b><table>${eventRows(arrow.a)}</table>`;
        const info = {
          from: s.fields.src, to: s.fields.dst, corr: s.corr,
          sent: `#${s.seq} at ${s.ts} s`,
          [d.kind === "drop" ? "dropped" : "delivered"]: `#${d.seq} at ${d.ts} s (${fmtSeconds(Math.max(0, d.ts - s.ts))} later)`,
        };
        for (const [key, v] of Object.entries(d.fields)) if (!(key in { src: 1, dst: 1 })) info[key] = v;
        if (arrow.tap >= 0) {
          for (const [key, v] of Object.entries(events[arrow.tap].fields)) {
            if (!(key in { src: 1, dst: 1, corr: 1, request: 1 })) info[key] = v;
          }
        }
        const other = model.partner.get(n);
        if (other !== undefined) {
          const o = model.arrows[other];
          info[o.a > arrow.a ? "answered by" : "answers"] = `${o.type} #${events[o.a].seq} at ${events[o.a].ts} s`;
        }
        return `<b>${esc(arrow.type)}</b><table>${rows(info)}</table>`;
      }
      case "m":
        return `<b>${esc(model.marks[n].type)}</b><table>${eventRows(model.marks[n].i)}` +
          (events[model.marks[n].i].type === "step_started" ? rows({ step: facts.steps[events[model.marks[n].i].fields.index] }) : "") + "</table>";
      case "b": {
        const band = model.bands[n];
        return `<b>controller, epoch ${esc(band.epoch)}</b><table>${rows({
          node: model.laneIds[band.lane], from: `#${events[band.a].seq} at ${events[band.a].ts} s`,
          until: `#${events[band.b].seq} at ${events[band.b].ts} s`,
        })}</table>`;
      }
      case "f": {
        const fault = model.faults[n];
        return `<b>fault ${esc(fault.id)} (${esc(fault.fault)})</b><table>${rows({
          detail: fault.detail, injected: `#${events[fault.a].seq} at ${events[fault.a].ts} s`,
          healed: fault.healed !== undefined ? `#${events[fault.b].seq} at ${events[fault.b].ts} s` : "not healed",
        })}</table>`;
      }
      case "s":
        return `<b>partition state</b><table>${eventRows(n)}</table>`;
      default:
        return "";
    }
  }
  // the arrow under the pointer and its request or answer, drawn thick
  function pair(target) {
    for (const el of svg.querySelectorAll("line.paired")) el.classList.remove("paired");
    if (!target || target.dataset.k[0] !== "a") return;
    target.classList.add("paired");
    const other = model.partner.get(Number(target.dataset.k.slice(1)));
    if (other !== undefined) {
      const el = svg.querySelector(`line[data-k="a${other}"]`);
      if (el) el.classList.add("paired");
    }
  }
  function showTip(ev) {
    const target = ev.target.closest ? ev.target.closest("[data-k]") : null;
    pair(target);
    if (!target) { tip.style.display = "none"; return; }
    tip.innerHTML = describe(target.dataset.k);
    tip.style.display = "block";
    const w = tip.offsetWidth, h = tip.offsetHeight;
    const x = ev.clientX + 14 + w > window.innerWidth ? Math.max(0, ev.clientX - 14 - w) : ev.clientX + 14;
    const y = ev.clientY + 14 + h > window.innerHeight ? Math.max(0, ev.clientY - 14 - h) : ev.clientY + 14;
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }

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
