/* The message-sequence (Lamport) diagram of a kemu trace (docs/trace-schema.md), shared
 * by the chaos run report (report.html, cluster/chaos/report.js) and the diff page of
 * `kemu trace diff` (diff.html, spark/report.py); written inline into both, no network.
 *
 * KemuSequence.buildModel(events, brokers) reads the events into lanes (one per broker,
 * the metadata store and the chaos driver, then one per topic), arrows (a message from
 * its `send` to its `deliver` or `drop`, a store call to the store lane), marks
 * (elections, session expiries, crashes, the driver's steps), controller bands, fault
 * spans and partition states. KemuSequence.Diagram({...}) draws a model into an <svg>
 * and makes it zoom (wheel), pan (drag) and show what is under the pointer in a tooltip;
 * `state.focus` (an event's index) is drawn as a line, and what that event drew is
 * given the class "divergent".
 */
"use strict";
// eslint-disable-next-line no-unused-vars
const KemuSequence = (function () {
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
    ["\u2298", "log directory renamed for deletion"], ["\u2205", "log directory removed"],
  ];
  const STATE_COLOURS = {
    online: "#4caf50", "under-replicated": "#f0a30a", offline: "#d9352b", deleting: "#8e8e8e",
  };
  const PARTITION_STATE_COLOURS = {
    NewPartition: "#9ecae1", OnlinePartition: "#4caf50", OfflinePartition: "#d9352b",
    NonExistentPartition: "#8e8e8e",
  };

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
  function storeNode(events) {
    return (events.find((e) => e.kind === "store") || { node: "store" }).node;
  }

  function buildModel(events, brokers) {
    const STORE = storeNode(events);
    const laneIds = [];
    for (let b = 0; b < brokers; b++) laneIds.push("broker-" + b);
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
        case "log_dir":
          // a partition's directory renamed to its -delete name, and removed: when a
          // deleted topic's data left each broker's disk
          if (f.result === "ok" && f.topic !== undefined && (e.type === "remove" || (e.type === "rename" && /-delete$/.test(f.to || "")))) {
            addMark(i, e.node, e.type === "remove" ? "\u2205" : "\u2298", "", f.topic);
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
    const laneName = (id) => (id === "chaos" ? "chaos driver" : id === STORE ? "metadata store" : id);
    return { laneIds, lane, topicNames, arrows, marks, bands, faults, states, types, partner, store: STORE, laneName };
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
  function fmtTime(t) {
    return t >= 100 ? t.toFixed(1) : t >= 10 ? t.toFixed(2) : t.toFixed(3);
  }
  function rows(obj) {
    return Object.entries(obj).map(([k, v]) => {
      let text = typeof v === "string" ? v : JSON.stringify(v);
      if (text === undefined) text = String(v);
      if (text.length > 300) text = text.slice(0, 300) + "\u2026";
      return `<tr><td>${esc(k)}</td><td>${esc(text)}</td></tr>`;
    }).join("");
  }


  // ---------------------------------------------------------------- the diagram

  // A drawing of `model` (of `events`) in `svg`, inside `box` (its width), the span in
  // view written into `hint`, details of what is under the pointer in `tip`. `state`:
  // axis ("order" or "time"), view ([lo, hi] in the axis' units), topic (""), hiddenLanes,
  // hiddenTypes, focus (an event's index, or null). `prefix` keeps the svg's ids apart
  // from another diagram's on the same page; `steps` names the driver's steps;
  // `drawAll` draws what follows the diagram's view (the diagram itself by default).
  function Diagram({ events, model, svg, box, hint, tip, state, prefix = "", steps = [], drawAll = null }) {
    const laneName = model.laneName;
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
    let layout = null;

    function visibleLanes() {
      return model.laneIds.map((id, k) => k).filter((k) => !state.hiddenLanes.has(model.laneIds[k]));
    }
    function visibleTopics() {
      if (state.topic) return [state.topic];
      return model.topicNames.slice(0, MAX_TOPIC_LANES);
    }

    function drawDiagram() {
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
      out.push(`<defs><clipPath id="${prefix}plot-clip"><rect x="${GUTTER}" y="0" width="${plotW}" height="${height}"/></clipPath>` +
        `<marker id="${prefix}head" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" orient="auto-start-reverse">` +
        '<path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker>' +
        `<marker id="${prefix}cross" viewBox="0 0 8 8" refX="4" refY="4" markerWidth="7" markerHeight="7">` +
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
      out.push(`<g clip-path="url(#${prefix}plot-clip)">`);
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
        const focused = s.i === state.focus;
        if (stateSeen.has(key) && !focused) continue;
        stateSeen.add(key);
        const cy = topicY.get(s.topic);
        out.push(`<rect class="state hit${focused ? " divergent" : ""}" data-k="s${s.i}" data-state="${esc(s.to)}" x="${px - 1}" y="${cy - TOPIC_H / 2 + 3}" width="3" height="${TOPIC_H - 6}" fill="${PARTITION_STATE_COLOURS[s.to] || "#777"}"/>`);
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
        const focused = state.focus !== null && (arrow.a === state.focus || arrow.b === state.focus || arrow.tap === state.focus);
        if (!focused && (seen.has(key) || drawn >= MAX_ARROWS)) continue;
        seen.add(key);
        drawn++;
        const y1 = laneY.get(arrow.from), y2 = laneY.get(arrow.to);
        const colour = typeColour(arrow.type);
        const end = arrow.cls === "drop" ? `url(#${prefix}cross)` : `url(#${prefix}head)`;
        out.push(`<line class="arrow ${arrow.cls}${focused ? " divergent" : ""}" data-k="a${n}" data-type="${esc(arrow.type)}" data-src="${esc(model.laneIds[arrow.from])}" data-dst="${esc(model.laneIds[arrow.to])}" x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2 + (y2 > y1 ? -5 : 5)}" stroke="${colour}" marker-end="${end}"/>`);
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
        if (marksOnTopic && /^topic_|unclean|^rename$|^remove$/.test(mark.type)) targets.push(topicY.get(mark.topic));
        for (const cy of targets) {
          const key = mark.glyph + "|" + px + "|" + cy;
          const focused = mark.i === state.focus;
          if (markSeen.has(key) && !focused) continue;
          markSeen.add(key);
          out.push(`<text class="mark ${mark.cls}${focused ? " divergent" : ""}" data-k="m${n}" data-type="${esc(mark.type)}" data-lane="${esc(model.laneIds[mark.lane])}" x="${px}" y="${cy}">${mark.glyph}</text>`);
          markCount++;
        }
      }
      faultRects("fault-strip", 3);
      out.push("</g>");
      out.push(axes(plotBottom, plotW));
      if (state.focus !== null && pos(state.focus) >= lo && pos(state.focus) <= hi) {
        const x = r1(X(pos(state.focus)));
        out.push(`<line class="focus" data-seq="${events[state.focus].seq}" x1="${x}" x2="${x}" y1="${AXIS_H}" y2="${plotBottom}"/>`);
      }
      svg.setAttribute("width", width);
      svg.setAttribute("height", height);
      svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
      svg.innerHTML = out.join("");
      fitLabels(svg, GUTTER - 10);
      svg.dataset.arrowsDrawn = drawn;
      svg.dataset.arrowsInView = total;
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
        // in seq numbers: the first event's seq + index (a whole trace starts at 1)
        const base = events.length ? events[0].seq : 1;
        const { step, values } = ticks(lo + base, hi + base, count);
        for (const seq of values) {
          const v = seq - base;
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
      pendingDraw = setTimeout(() => { pendingDraw = 0; (drawAll || drawDiagram)(); }, 16);
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
    // the diagram around event i, marked
    function goTo(i) {
      state.focus = i;
      if (state.axis === "order") state.view = clampView(i - 150, i + 150);
      else {
        const [flo, fhi] = fullDomain();
        const half = Math.max(1e-3, (fhi - flo) / 100);
        state.view = clampView(events[i].ts - half, events[i].ts + half);
      }
      redraw();
    }
    svg.addEventListener("pointerleave", () => { tip.style.display = "none"; });
    svg.addEventListener("dblclick", () => { state.view = fullDomain(); redraw(); });

    // ---------------------------------------------------------------- the tooltip

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
            (events[model.marks[n].i].type === "step_started" ? rows({ step: steps[events[model.marks[n].i].fields.index] }) : "") + "</table>";
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
    return { draw: drawDiagram, redraw, zoomAt, clampView, fullDomain, indexAt, goTo, pos };
  }

  return {
    PALETTE, STATE_COLOURS, PARTITION_STATE_COLOURS, MARK_LEGEND,
    nodeOf, typeColour, isStoreRead, niceStep, ticks, fmt, fmtSeconds, fmtTime, esc, r1, rows,
    buildModel, Diagram,
  };
})();
