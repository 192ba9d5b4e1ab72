/* byoc report: draws the graph a byoc report holds (laid out by dagre), its summary and plan.
   Everything from the model reaches the page as text (textContent, attribute values), never as
   markup. Node keys: "n<id>" an ONNX node, "r<box>" a folded region, "b<box>" a box. */
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("byoc-data").textContent);
  const META = DATA.meta, NODES = DATA.graph.nodes, EDGES = DATA.graph.edges;
  const BOXES = DATA.graph.boxes, SUMMARY = DATA.summary, PLAN = DATA.plan;
  const COLORS = META.colors;
  const SVGNS = "http://www.w3.org/2000/svg";
  const folded = new Set(META.folded);
  const KERNELS = SUMMARY.kernels || [];
  const hot = new Set((SUMMARY.hot_spots || []).filter(h => h.kind === "node").flatMap(h => h.targets || [h.target]));
  const svgEl = document.getElementById("graph"), scene = document.getElementById("scene");
  const statusEl = document.getElementById("status"), tip = document.getElementById("tip");
  const panel = document.getElementById("panel"), tabs = document.getElementById("tabs");
  const view = { x: 20, y: 20, k: 1 };
  let pos = {}, graphSize = { w: 0, h: 0 }, selected = null, tab = "summary";

  // ---- small DOM helpers: text only ----
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    for (const c of kids) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    return e;
  }
  function sv(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }
  function share(t) { return SUMMARY.total_s ? " (" + pct(t / SUMMARY.total_s) + " of the run)" : ""; }
  function ms(t) { return t === null || t === undefined ? "" : (t * 1e3).toFixed(t < 1e-3 ? 4 : 3) + " ms"; }
  function pct(s) { return s === null || s === undefined ? "" : (s * 100).toFixed(1) + "%"; }
  function bytes(n) {
    if (n === null || n === undefined) return "?";
    if (n < 1024) return n + " B";
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KB";
    return (n / 1024 / 1024).toFixed(1) + " MB";
  }
  function clip(s, n) { return s.length <= n ? s : s.slice(0, n - 1) + "\u2026"; }
  function color(where) { return COLORS[where] || "#bbb"; }
  function swatch(where) { const s = el("span", { class: "swatch" }); s.style.background = color(where); return s; }
  function dark(hex) {  // is white text readable on this colour?
    const v = parseInt(hex.slice(1), 16), r = v >> 16, g = (v >> 8) & 255, b = v & 255;
    return 0.299 * r + 0.587 * g + 0.114 * b < 150;
  }

  // ---- folding: which key stands for each node, which boxes are drawn ----
  function outerFolded() {
    const outer = new Array(BOXES.length);
    for (const b of BOXES) {
      const up = b.parent === null ? -1 : outer[b.parent];
      outer[b.id] = up !== -1 ? up : (folded.has(b.id) ? b.id : -1);
    }
    return outer;
  }
  function keyOf(n, outer) {
    if (n.box === null) return "n" + n.id;
    const f = outer[n.box];
    if (f === -1) return "n" + n.id;
    const B = BOXES[f];
    return B.kind === "control" ? "n" + B.node : "r" + f;
  }
  function boxOfKey(key, outer) {  // the drawn box a drawn key sits in
    if (key[0] === "r") return BOXES[+key.slice(1)].parent;
    const n = NODES[+key.slice(1)];
    if (n.box === null) return null;
    return outer[n.box] === -1 ? n.box : BOXES[n.box].parent;
  }

  // ---- labels and sizes ----
  function labelOf(key) {
    if (key[0] === "r") {
      const B = BOXES[+key.slice(1)];
      return ["\u25B8 " + B.where + " \u00B7 " + B.size + " nodes", B.name];
    }
    const n = NODES[+key.slice(1)];
    if (n.kind === "input" || n.kind === "output") return [n.kind, n.name];
    if (n.kind === "end") return ["end " + n.name, ""];
    if (n.box !== null && BOXES[n.box].kind === "control" && BOXES[n.box].node === n.id && folded.has(n.box))
      return ["\u25B8 " + n.op + " (+" + BOXES[n.box].size + ")", n.name];
    return [n.op, n.name];
  }
  function sizeOf(lines) {
    const a = clip(lines[0], 34), b = clip(lines[1], 34);
    return { w: Math.max(64, Math.max(a.length * 7.4, b.length * 6.3) + 18), h: b ? 36 : 24 };
  }

  // ---- layout ----
  // Each open box is laid out on its own, its children (nodes and the boxes inside it, already
  // laid out) as nodes; then the box is one node of the graph around it. An edge that crosses a
  // box's border goes through the box's ports: "in" on its top edge, "out" on its bottom. Boxes
  // stay convex (regions are; bodies are entered only through their node), so every graph is
  // acyclic, and no single layout is larger or deeper than one level of the model.
  //
  // dagre's time grows faster than the graph (about 1 ms a node at 100 nodes, 10 at 450), so a
  // big level is cut into pieces at its separators (a rank holding one node; up to LANES long
  // edges may pass it, in lanes beside it), each piece laid out by dagre on its own, then
  // stacked with the separator they share in one place. A piece of the same shape as one laid
  // out before (node sizes, edges: repeated blocks, a box unchanged by folding another) takes
  // that layout again: dagre is deterministic.
  const LABEL = 16;  // room for a box's label above its contents
  const PIECE = 12;  // nodes: a level cut into pieces of at least this many
  const LANES = 3, LANE = 8;  // long edges beside a separator at most, and px between them
  const SPACING = { rankdir: "TB", nodesep: 16, ranksep: 26, edgesep: 6, marginx: 0, marginy: 0 };
  const shapes = new Map();  // a piece's shape -> dagre's layout of it
  function depthOf(c) { let d = 0; for (let b = c; b !== null; b = BOXES[b].parent) d++; return d; }

  // dagre on nodes [[w, h]] and edges [[from, to]] by index: centres and edge points.
  function dagreLayout(sizes, edges) {
    const shape = sizes.map(s => s.w.toFixed(2) + "x" + s.h).join(",") + "|" + edges.map(e => e[0] + ">" + e[1]).join(",");
    let laid = shapes.get(shape);
    if (laid) return laid;
    const g = new dagre.graphlib.Graph();
    g.setGraph(Object.assign({}, SPACING));
    g.setDefaultEdgeLabel(() => ({}));
    sizes.forEach((s, i) => g.setNode(String(i), { width: s.w, height: s.h }));
    for (const [a, b] of edges) g.setEdge(String(a), String(b), {});
    dagre.layout(g);
    laid = { at: sizes.map((_, i) => { const v = g.node(String(i)); return [v.x, v.y]; }),
             points: edges.map(([a, b]) => g.edge(String(a), String(b)).points.map(p => [p.x, p.y])) };
    shapes.set(shape, laid);
    return laid;
  }

  // The pieces of a level of n nodes (edges by index; anchors: where its ranks start, its "in"
  // port if it has one): {nodes: [lists of node indices], cuts: [the separator piece i shares
  // with piece i + 1], lanes: [the nodes whose edges pass beside that separator, at most
  // LANES], rank}; one piece if it has no separator.
  function piecesOf(n, edges, anchors) {
    const whole = { nodes: [[...Array(n).keys()]], cuts: [], lanes: [], rank: null };
    if (n < 2 * PIECE) return whole;
    const succ = Array.from({ length: n }, () => []), pred = Array.from({ length: n }, () => []);
    for (const [a, b] of edges) { succ[a].push(b); pred[b].push(a); }
    const order = [], missing = pred.map(p => p.length);
    for (let v = 0; v < n; v++) if (!missing[v]) order.push(v);
    for (let k = 0; k < order.length; k++) for (const s of succ[order[k]]) if (!--missing[s]) order.push(s);
    if (order.length < n) return whole;  // not acyclic: never cut
    // Ranks: longest path from the anchors; what they do not reach (a constant's chain) just
    // above its first consumer, as dagre would put it.
    const start = new Set(anchors.length ? anchors : order.filter(v => !pred[v].length));
    const reached = new Array(n).fill(false), rank = new Array(n).fill(0);
    for (const v of order) {
      reached[v] = start.has(v) || pred[v].some(p => reached[p]);
      if (reached[v]) for (const p of pred[v]) if (reached[p]) rank[v] = Math.max(rank[v], rank[p] + 1);
    }
    for (let k = n - 1; k >= 0; k--) {
      const v = order[k];
      if (!reached[v] && succ[v].length) rank[v] = Math.min(...succ[v].map(s => rank[s])) - 1;
    }
    const low = rank.reduce((a, b) => Math.min(a, b)), top = rank.reduce((a, b) => Math.max(a, b)) - low;
    const byRank = Array.from({ length: top + 1 }, () => []);
    for (let v = 0; v < n; v++) { rank[v] -= low; byRank[rank[v]].push(v); }
    // the nodes whose edges pass over each rank, as a sweep: an edge a -> b passes over the
    // ranks between theirs
    const enter = Array.from({ length: top + 1 }, () => []), leave = Array.from({ length: top + 1 }, () => []);
    for (const [a, b] of edges) if (rank[b] - rank[a] > 1) { enter[rank[a] + 1].push(a); leave[rank[b]].push(a); }
    const pieces = [], cuts = [], lanes = [], passing = new Map();
    let piece = [], left = n;
    for (let r = 0; r <= top; r++) {
      for (const a of enter[r]) passing.set(a, (passing.get(a) || 0) + 1);
      for (const a of leave[r]) { const k = passing.get(a) - 1; if (k) passing.set(a, k); else passing.delete(a); }
      for (const v of byRank[r]) piece.push(v);
      left -= byRank[r].length;
      if (byRank[r].length === 1 && passing.size <= LANES && piece.length >= PIECE && left >= PIECE) {
        pieces.push(piece);
        cuts.push(byRank[r][0]);
        lanes.push([...passing.keys()].sort((a, b) => a - b));
        piece = [byRank[r][0]];
      }
    }
    pieces.push(piece);
    // nodes in the order they were given: a repeated block gives the same shape
    return { nodes: pieces.map(p => p.sort((a, b) => a - b)), cuts: cuts, lanes: lanes, rank: rank };
  }

  // One level laid out: {w, h, at: Map key -> {x, y, w, h}, edges: [{v, w, points, hidden,
  // arrow}], pieces}. A separator and the long edges passing beside it (its lanes, LANE apart
  // on its left) are one node of both pieces it joins, where the pieces meet.
  function layoutLevel(u, size, top) {
    // its ports are nodes too ("in" above all, "out" below), their edges long ones where they
    // pass separators
    const keys = [...u.nodes.keys()], PORT = { w: 2, h: 2 };
    const sizes = keys.map(k => k[0] === "b" ? size[+k.slice(1)] : sizeOf(u.nodes.get(k)));
    const ports = new Set();
    for (const [from, to] of u.edges.values()) { if (from === "in") ports.add(from); if (to === "out") ports.add(to); }
    for (const port of ["in", "out"]) if (ports.has(port)) { keys.push(port); sizes.push(PORT); }
    const index = new Map(keys.map((k, i) => [k, i])), edges = [];
    for (const [from, to] of u.edges.values()) edges.push([index.get(from), index.get(to)]);
    const inPort = index.has("in") ? index.get("in") : -1, outPort = index.has("out") ? index.get("out") : -1;
    const anchors = inPort >= 0 ? [inPort] : keys.map((k, i) => k[0] === "n" && NODES[+k.slice(1)].kind === "input" ? i : -1).filter(i => i >= 0);
    const { nodes: pieces, cuts, lanes, rank } = piecesOf(keys.length, edges, anchors);
    const cutOf = new Map(cuts.map((v, c) => [v, c]));
    const cutRank = cuts.map(v => rank[v]);
    const below = x => {  // how many separators rank above x: the piece a node of rank x is in
      let lo = 0, hi = cutRank.length;
      while (lo < hi) { const m = (lo + hi) >> 1; if (cutRank[m] < x) lo = m + 1; else hi = m; }
      return lo;
    };
    // Where each edge is drawn: [piece, from, to, arrow], an end {node} or {cut, lane} (lane -1:
    // the separator itself); an edge past a separator goes by its source's lane there.
    const drawn = pieces.map(() => []);
    const end = (v, c) => cutOf.get(v) === c ? { cut: c, lane: -1 } : { node: v };
    const lane = (a, c) => ({ cut: c, lane: lanes[c].indexOf(a) });
    const reach = new Map();  // a source -> the last piece its lane reaches
    for (const [a, b] of edges) {
      const pa = !cuts.length ? 0 : cutOf.has(a) ? cutOf.get(a) + 1 : below(rank[a]);
      const pb = !cuts.length ? 0 : below(rank[b]);
      if (pa >= pb) { drawn[pb].push([end(a, pb - 1), end(b, pb), true]); continue; }
      drawn[pb].push([lane(a, pb - 1), end(b, pb), true]);
      if (!reach.has(a)) drawn[pa].push([end(a, pa - 1), lane(a, pa), false]);
      reach.set(a, Math.max(reach.get(a) || 0, pb));
    }
    for (const [a, pb] of reach) {
      for (let i = (cutOf.has(a) ? cutOf.get(a) + 1 : below(rank[a])) + 1; i < pb; i++)
        drawn[i].push([lane(a, i - 1), lane(a, i), false]);
    }
    const at = new Map(), out = [], joints = [];  // joints: each separator's node, placed
    let dx = 0, dy = 0;
    pieces.forEach((p, i) => {
      const lastPiece = i === pieces.length - 1;
      const local = new Map(p.map((v, j) => [v, j]));
      const sz = p.map(v => {
        const c = cutOf.get(v);
        return c === i - 1 || c === i ? { w: sizes[v].w + lanes[c].length * LANE, h: sizes[v].h } : sizes[v];
      });
      const id = e => local.get(e.node !== undefined ? e.node : cuts[e.cut]);
      const list = [], seen = new Map();
      const draws = drawn[i].map(([f, t, arrow]) => {
        const a = id(f), b = id(t), k = a + ">" + b;
        if (!seen.has(k)) { seen.set(k, list.length); list.push([a, b]); }
        return [seen.get(k), f, t, arrow];
      });
      // Hidden edges keep the ports on the box's top and bottom edge, and a piece's separators
      // at its top and bottom, so stacked pieces never overlap.
      const localIn = local.has(inPort) ? local.get(inPort) : -1, localOut = local.has(outPort) ? local.get(outPort) : -1;
      const head = i > 0 ? local.get(cuts[i - 1]) : localIn, tail = lastPiece ? localOut : local.get(cuts[i]);
      const hasIn = new Array(sz.length).fill(false), hasOut = new Array(sz.length).fill(false);
      for (const [a, b] of list) { hasOut[a] = true; hasIn[b] = true; }
      for (let j = 0; j < sz.length; j++) {
        if (head >= 0 && j !== head && j !== localOut && !hasIn[j]) list.push([head, j]);
        if (tail >= 0 && j !== tail && j !== localIn && !hasOut[j]) list.push([j, tail]);
      }
      const laid = dagreLayout(sz, list);
      if (i > 0) {  // the separator it shares with the piece above, where that piece put it
        dx = joints[i - 1].x - laid.at[head][0]; dy = joints[i - 1].y - laid.at[head][1];
      }
      const centre = j => ({ x: laid.at[j][0] + dx, y: laid.at[j][1] + dy, w: sz[j].w, h: sz[j].h });
      if (!lastPiece) joints.push(centre(tail));
      p.forEach((v, j) => {
        if (at.has(keys[v])) return;
        const c = centre(j), cut = cutOf.get(v);
        if (cut === i) c.x += (c.w - sizes[v].w) / 2;  // lanes on its left
        at.set(keys[v], { x: c.x, y: c.y, w: sizes[v].w, h: sizes[v].h });
      });
      // each edge drawn along dagre's route, its ends at a separator moved to the separator or
      // its lane
      const point = (e, start) => {
        if (e.cut === undefined) return null;
        const j = joints[e.cut], x = e.lane < 0 ? j.x + (j.w - sizes[cuts[e.cut]].w) / 2 : j.x - j.w / 2 + LANE * (e.lane + 0.5);
        return { x: x, y: start ? j.y + j.h / 2 : j.y - j.h / 2 };
      };
      for (const [k, f, t, arrow] of draws) {
        const pts = laid.points[k].map(([x, y]) => ({ x: x + dx, y: y + dy }));
        const key = e => e.lane === undefined || e.lane < 0 ? keys[e.node !== undefined ? e.node : cuts[e.cut]] : "~";
        const a = key(f), b = key(t);
        const p0 = a[0] === "b" ? null : point(f, true), p1 = b[0] === "b" ? null : point(t, false);
        if (p0) pts[0] = p0;
        if (p1) pts[pts.length - 1] = p1;
        out.push({ v: a, w: b, hidden: false, arrow: arrow && b !== "out", points: pts });
      }
    });
    joints.forEach((j, c) => {  // the lanes through each separator's row
      for (let k = 0; k < lanes[c].length; k++) {
        const x = j.x - j.w / 2 + LANE * (k + 0.5);
        out.push({ v: "~", w: "~", hidden: false, arrow: false, points: [{ x: x, y: j.y - j.h / 2 }, { x: x, y: j.y + j.h / 2 }] });
      }
    });
    // dagre's margins around it all
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const v of at.values()) { x0 = Math.min(x0, v.x - v.w / 2); x1 = Math.max(x1, v.x + v.w / 2); y0 = Math.min(y0, v.y - v.h / 2); y1 = Math.max(y1, v.y + v.h / 2); }
    for (const e of out) for (const p of e.points) { x0 = Math.min(x0, p.x); x1 = Math.max(x1, p.x); y0 = Math.min(y0, p.y); y1 = Math.max(y1, p.y); }
    const mx = top ? 16 : 10, my = top ? 16 : 8, sx = mx - x0, sy = my - y0;
    for (const v of at.values()) { v.x += sx; v.y += sy; }
    for (const e of out) for (const p of e.points) { p.x += sx; p.y += sy; }
    return { w: x1 - x0 + 2 * mx, h: y1 - y0 + 2 * my, at: at, edges: out, pieces: pieces.length };
  }

  function layout() {
    const outer = outerFolded();
    const keys = new Array(NODES.length), home = {}, units = new Map();
    const unitsOf = c => {
      const k = c === null ? "top" : c;
      if (!units.has(k)) units.set(k, { nodes: new Map(), edges: new Map() });
      return units.get(k);
    };
    for (const n of NODES) {
      const key = keys[n.id] = keyOf(n, outer);
      if (key in home) continue;
      const c = home[key] = boxOfKey(key, outer);
      unitsOf(c).nodes.set(key, labelOf(key));
      for (let b = c; b !== null; b = BOXES[b].parent) {  // every open box around it is drawn
        const parent = unitsOf(BOXES[b].parent);
        if (parent.nodes.has("b" + b)) break;
        parent.nodes.set("b" + b, null);
      }
    }
    const chain = key => { const out = []; for (let b = home[key]; b !== null; b = BOXES[b].parent) out.push(b); out.push(null); return out; };
    const unitIn = (key, c) => {  // what stands for key among the units of container c
      let b = home[key];
      if (b === c) return key;
      while (BOXES[b].parent !== c) b = BOXES[b].parent;
      return "b" + b;
    };
    const link = (c, from, to) => { if (from !== to) unitsOf(c).edges.set(from + ">" + to, [from, to]); };
    for (const [s, d] of EDGES) {
      const a = keys[s], b = keys[d];
      if (a === b) continue;
      const ca = chain(a), cb = chain(b), inB = new Set(cb);
      const common = ca.find(c => inB.has(c));
      link(common, unitIn(a, common), unitIn(b, common));
      for (const x of ca) { if (x === common) break; link(x, unitIn(a, x), "out"); }
      for (const x of cb) { if (x === common) break; link(x, "in", unitIn(b, x)); }
    }
    const size = {}, levels = new Map();
    let pieces = 0;
    const order = [...units.keys()].sort((x, y) => (y === "top" ? 0 : depthOf(y)) - (x === "top" ? 0 : depthOf(x)));
    for (const k of order) {
      const laid = layoutLevel(units.get(k), size, k === "top");
      levels.set(k, laid);
      pieces += laid.pieces;
      if (k !== "top") size[k] = { w: laid.w, h: laid.h + LABEL };
    }
    // Place every level in page coordinates, outermost first.
    const whole = levels.get("top");
    const L = { pos: {}, edges: [], w: whole.w, h: whole.h, levels: levels.size, pieces: pieces };
    const origin = new Map([["top", { x: 0, y: 0 }]]);
    const stack = ["top"];
    while (stack.length) {
      const k = stack.pop(), o = origin.get(k), names = units.get(k).nodes;
      for (const [key, v] of levels.get(k).at) {
        if (key === "in" || key === "out") continue;
        const x = v.x + o.x, y = v.y + o.y;
        L.pos[key] = { x: x, y: y, w: v.w, h: v.h, lines: names.get(key) };
        if (key[0] === "b") {
          const id = +key.slice(1);
          origin.set(id, { x: x - v.w / 2, y: y - v.h / 2 + LABEL });
          stack.push(id);
        }
      }
    }
    const port = (box, which) => {  // a port of a box, on its border
      const q = levels.get(box).at.get(which), o = origin.get(box), p = L.pos["b" + box];
      return { x: q ? q.x + o.x : p.x, y: which === "in" ? p.y - p.h / 2 : p.y + p.h / 2 };
    };
    for (const [k, laid] of levels) {
      const o = origin.get(k);
      for (const e of laid.edges) {
        if (e.hidden) continue;
        const pts = e.points.map(p => ({ x: p.x + o.x, y: p.y + o.y }));
        if (e.v === "in") pts[0] = port(k, "in");
        else if (e.v[0] === "b") pts[0] = port(+e.v.slice(1), "out");
        if (e.w === "out") pts[pts.length - 1] = port(k, "out");
        else if (e.w[0] === "b") pts[pts.length - 1] = port(+e.w.slice(1), "in");
        L.edges.push({ points: pts, arrow: e.arrow !== undefined ? e.arrow : e.w !== "out" });
      }
    }
    return L;
  }

  function draw(L) {
    const gb = document.getElementById("boxes"), ge = document.getElementById("edges"), gn = document.getElementById("nodes");
    const fb = document.createDocumentFragment(), fe = document.createDocumentFragment(), fn = document.createDocumentFragment();
    pos = L.pos;
    const boxes = BOXES.filter(B => pos["b" + B.id]).sort((a, b) => depthOf(a.id) - depthOf(b.id));
    for (const B of boxes) {
      const v = pos["b" + B.id], x = v.x - v.w / 2, y = v.y - v.h / 2;
      const grp = sv("g", { class: "box " + B.kind, "data-key": "b" + B.id, "data-box": B.id });
      const r = sv("rect", { class: "frame", x: x, y: y, width: v.w, height: v.h, rx: 6 });
      if (B.kind === "region") { r.setAttribute("fill", color(B.where)); r.setAttribute("stroke", color(B.where)); }
      grp.append(r);
      const label = sv("g", { class: "label", "data-key": "b" + B.id });
      const t = sv("text", { x: x + 6, y: y + 12 });
      let text = B.kind === "body" ? B.name : "\u25BE " + (B.kind === "control" ? NODES[B.node].op + " " : "") + B.name;
      if (B.kind === "region") text += " \u00B7 " + B.where + (B.time_s !== undefined ? " \u00B7 " + ms(B.time_s) : "");
      t.textContent = clip(text, Math.max(12, Math.floor(v.w / 6.3)));
      label.append(t);
      grp.append(label);
      fb.append(grp);
    }
    for (const e of L.edges) {
      const p = e.points;
      let d = "M" + p[0].x + "," + p[0].y;
      for (let i = 1; i < p.length - 1; i++) {
        const mx = (p[i].x + p[i + 1].x) / 2, my = (p[i].y + p[i + 1].y) / 2;
        d += "Q" + p[i].x + "," + p[i].y + " " + (i === p.length - 2 ? p[i + 1].x + "," + p[i + 1].y : mx + "," + my);
      }
      if (p.length === 2) d += "L" + p[1].x + "," + p[1].y;
      const path = sv("path", { class: "edge", d: d });
      if (e.arrow) path.setAttribute("marker-end", "url(#arrow)");
      fe.append(path);
    }
    for (const key in pos) {
      if (key[0] === "b") continue;
      const v = pos[key];
      const isRegion = key[0] === "r";
      const n = isRegion ? null : NODES[+key.slice(1)];
      const where = isRegion ? BOXES[+key.slice(1)].where : n.where;
      let cls = "node";
      if (n && (n.kind === "input" || n.kind === "output")) cls += " io";
      if (n && n.kind === "end") cls += " end";
      if (n && hot.has(n.id)) cls += " hot";
      if (key === selected) cls += " selected";
      const grp = sv("g", { class: cls, "data-key": key, transform: "translate(" + (v.x - v.w / 2) + "," + (v.y - v.h / 2) + ")" });
      const fill = color(where);
      const r = sv("rect", { width: v.w, height: v.h, rx: isRegion ? 8 : 4 });
      if (!n || n.kind === "op") r.setAttribute("fill", fill);
      grp.append(r);
      const light = (!n || n.kind === "op") && dark(fill);
      const t1 = sv("text", { class: "op", x: 8, y: v.lines[1] ? 15 : 16 });
      t1.textContent = clip(v.lines[0], 34);
      if (light) t1.setAttribute("fill", "#fff");
      grp.append(t1);
      if (v.lines[1]) {
        const t2 = sv("text", { x: 8, y: 29 });
        t2.textContent = clip(v.lines[1], 34);
        if (light) t2.setAttribute("fill", "#fff");
        grp.append(t2);
      }
      fn.append(grp);
    }
    gb.replaceChildren(fb); ge.replaceChildren(fe); gn.replaceChildren(fn);
    graphSize = { w: L.w, h: L.h };
  }

  function relayout(after) {
    const count = NODES.length;
    setStatus("Laying out " + count.toLocaleString() + " nodes\u2026");
    document.body.dataset.state = "layout";
    setTimeout(() => {
      const t0 = performance.now();
      let L = null, warning = "";
      try {
        L = layout();
      } catch (err) {
        if (!(err instanceof RangeError)) throw err;
        const before = new Set(folded);
        BOXES.forEach(b => { if (b.kind === "region" || b.kind === "control") folded.add(b.id); });
        try { L = folded.size > before.size ? layout() : null; } catch (err2) { L = null; }
        if (!L) {
          folded.clear(); before.forEach(b => folded.add(b));
          setStatus("This graph is too deep for the layout library in this browser: the summary on the right still holds every number.", true);
          document.body.dataset.state = "error";
          return;
        }
        warning = "Too deep to draw whole in this browser: regions and control-flow nodes are folded; click a box's label or a folded node to open it.";
      }
      const t1 = performance.now();
      draw(L);
      // how long it took, for whoever measures the page (tests, people with devtools open)
      document.body.dataset.layoutMs = Math.round(t1 - t0);
      document.body.dataset.levels = L.levels;  // laid out one by one, cut into L.pieces
      document.body.dataset.pieces = L.pieces;
      document.body.dataset.drawMs = Math.round(performance.now() - t1);
      setStatus(warning, !!warning);
      document.body.dataset.state = "ready";
      if (after) after();
    }, 15);
  }

  function setStatus(text, warn) {
    statusEl.textContent = text;
    statusEl.classList.toggle("warn", !!warn);
  }

  // ---- pan and zoom ----
  function apply() { scene.setAttribute("transform", "translate(" + view.x + "," + view.y + ") scale(" + view.k + ")"); }
  function fit(whole) {
    const W = svgEl.clientWidth || 800, H = svgEl.clientHeight || 600;
    const kw = (W - 40) / Math.max(graphSize.w, 1), kh = (H - 40) / Math.max(graphSize.h, 1);
    // "fit" shows it all; at open, the top of the graph at a size the labels can be read
    view.k = whole ? Math.min(1.2, kw, kh) : Math.min(1, Math.max(0.55, kw));
    view.x = (W - graphSize.w * view.k) / 2;
    view.y = 20;
    if (whole) view.y = (H - graphSize.h * view.k) / 2;
    else if (graphSize.w * view.k > W) {  // too wide: start where the data enters
      const first = NODES.find(n => n.kind === "input" && pos["n" + n.id]);
      if (first) view.x = W / 2 - pos["n" + first.id].x * view.k;
    }
    apply();
  }
  function centerOn(key) {
    const p = pos[key];
    if (!p) return;
    const W = svgEl.clientWidth, H = svgEl.clientHeight;
    view.k = Math.max(view.k, 0.9);
    view.x = W / 2 - p.x * view.k; view.y = H / 2 - p.y * view.k;
    apply();
  }
  let drag = null;
  svgEl.addEventListener("pointerdown", e => {
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false };
  });
  window.addEventListener("pointermove", e => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!drag.moved) { drag.moved = true; svgEl.classList.add("panning"); hideTip(); }
    view.x = drag.vx + dx; view.y = drag.vy + dy;
    if (!drag.frame) drag.frame = requestAnimationFrame(() => { if (drag) drag.frame = 0; apply(); });
  });
  window.addEventListener("pointerup", e => {
    if (!drag) return;
    const moved = drag.moved;
    drag = null; svgEl.classList.remove("panning"); apply();
    if (!moved) click(e);
  });
  svgEl.addEventListener("wheel", e => {
    e.preventDefault();
    const r = svgEl.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top;
    const k = Math.min(4, Math.max(0.02, view.k * Math.exp(-e.deltaY * 0.0015)));
    view.x = mx - (mx - view.x) * k / view.k; view.y = my - (my - view.y) * k / view.k; view.k = k;
    apply();
  }, { passive: false });

  // ---- what a node, a region or a box says ----
  function valueTable(title, values) {
    if (!values || !values.length) return null;
    const t = el("table", {}, el("tr", {}, el("th", {}, title), el("th", {}, "type")));
    for (const [name, type, constant] of values)
      t.append(el("tr", {}, el("td", { class: "mono" }, name || "\u2014", constant ? el("span", { class: "muted" }, " (constant)") : null),
        el("td", { class: "mono" }, type)));
    return t;
  }
  function planRows(k) {  // what byoc tune measured for a segment: every option, and the choice
    const seg = PLAN && k !== undefined && k !== null ? PLAN.segments[k] : null;
    if (!seg) return null;
    const out = el("div", {}, el("h4", {}, "measured by byoc tune (segment " + seg.id + ", " + seg.nodes + " nodes)"));
    const t = el("table", {}, el("tr", {}, el("th", {}, "option"), el("th", { class: "num" }, "time"), el("th", {}, "")));
    const order = Object.entries(seg.times).sort((a, b) => (a[1] === null) - (b[1] === null) || a[1] - b[1]);
    for (const [option, seconds] of order) {
      const note = option === seg.chosen ? "chosen" : (option === seg.runner_up ? "runner-up" : (seg.errors[option] || ""));
      const row = el("tr", {}, el("td", {}, swatch(option), option), el("td", { class: "num" }, seconds === null ? "\u2014" : ms(seconds)), el("td", { class: "muted" }, note));
      if (option === seg.chosen) row.classList.add("chosen");
      t.append(row);
    }
    out.append(t);
    if (seg.why) out.append(el("p", {}, seg.why));
    return out;
  }
  function describeBox(B) {
    const f = document.createDocumentFragment();
    if (B.kind === "region") {
      f.append(el("h4", {}, "region ", el("span", { class: "mono" }, B.name)));
      f.append(el("p", {}, swatch(B.where), "runs on ", el("b", {}, B.where), " \u00B7 " + B.size + " ONNX nodes"));
      const info = (SUMMARY.regions || []).find(r => r.name === B.name);
      if (info) f.append(el("p", {}, "crosses its boundary: " + bytes(info.bytes_in) + " in, " + bytes(info.bytes_out) + " out per run"));
      if (B.time_s !== undefined) f.append(el("p", {}, "time: " + ms(B.time_s) + share(B.time_s) + (B.calls ? " over " + B.calls + " calls" : "")));
      const own = KERNELS.filter(k => k.region === B.name).sort((a, b) => b.time_s - a.time_s);
      if (own.length) {
        const t = el("table", {}, el("tr", {}, el("th", {}, "its kernels"), el("th", { class: "num" }, "nodes"), el("th", { class: "num" }, "time")));
        for (const k of own.slice(0, 12)) t.append(el("tr", {}, el("td", { class: "mono" }, clip(k.kernel, 36)), el("td", { class: "num" }, k.held), el("td", { class: "num" }, ms(k.time_s))));
        f.append(t);
        if (own.length > 12) f.append(el("p", { class: "muted" }, (own.length - 12) + " more kernels"));
      }
      const p = planRows(B.segment); if (p) f.append(p);
    } else {
      const n = NODES[B.node];
      f.append(el("h4", {}, B.kind === "control" ? n.op + " " : "body ", el("span", { class: "mono" }, B.name)));
      f.append(el("p", {}, B.size + " ONNX nodes inside"));
    }
    f.append(el("p", { class: "muted" }, folded.has(B.id) ? "folded: click to open" : (B.kind === "body" ? "" : "click its label to fold")));
    return f;
  }
  function describeNode(n) {
    const f = document.createDocumentFragment();
    f.append(el("h4", {}, n.kind === "op" ? n.op + " " : n.kind + " ", el("span", { class: "mono" }, n.name)));
    if (n.kind === "op") {
      const box = n.box === null ? null : BOXES[n.box];
      let region = null;
      for (let b = n.box; b !== null; b = BOXES[b].parent) if (BOXES[b].kind === "region") { region = BOXES[b]; break; }
      if (n.where === "host") {
        f.append(el("p", {}, swatch("host"), "runs on the ", el("b", {}, "host")));
        f.append(el("div", { class: "reason" }, "why: " + (n.reason || "no backend took it")));
      } else {
        f.append(el("p", {}, swatch(n.where), "runs on ", el("b", {}, n.where), region ? " in region " : "", region ? el("span", { class: "mono" }, region.name) : null));
      }
      if (n.time_s !== undefined) {
        let text = "time: " + ms(n.time_s) + share(n.time_s) + (n.calls ? " over " + n.calls + " calls" : "");
        if (n.with_bodies_s !== undefined) text += "; its own, " + ms(n.with_bodies_s) + " with its bodies";
        f.append(el("p", {}, text));
      }
      for (const k of (n.kernels || []).map(i => KERNELS[i])) {
        f.append(el("p", {}, "time: " + ms(k.time_s) + share(k.time_s) + ", its fused kernel's (" + clip(k.kernel, 40) + ")"));
        if (k.held > 1) f.append(el("p", { class: "muted" }, "shared by the kernel's " + k.held + " ONNX nodes: not this node's own"));
      }
      if (n.time_s === undefined && !n.kernels && region && region.time_s !== undefined) f.append(el("p", { class: "muted" }, "its region takes " + ms(region.time_s) + " in all"));
      if (box && box.kind === "control" && box.node === n.id) f.append(el("p", { class: "muted" }, box.size + " ONNX nodes in its bodies"));
      const measured = planRows(n.segment); if (measured) f.append(measured);
    }
    const ins = valueTable("inputs", n.inputs), outs = valueTable("outputs", n.outputs);
    if (ins) f.append(ins);
    if (outs) f.append(outs);
    if (n.attrs && n.attrs.length) {
      const t = el("table", {}, el("tr", {}, el("th", {}, "attribute"), el("th", {}, "value")));
      for (const [k, v] of n.attrs) t.append(el("tr", {}, el("td", { class: "mono" }, k), el("td", { class: "mono" }, v)));
      f.append(t);
    }
    return f;
  }
  function describe(key) {
    if (key[0] === "n") return describeNode(NODES[+key.slice(1)]);
    return describeBox(BOXES[+key.slice(1)]);
  }

  // ---- hover and click ----
  function hideTip() { tip.hidden = true; }
  svgEl.addEventListener("pointerover", e => {
    if (drag && drag.moved) return;
    const t = e.target.closest("[data-key]");
    if (!t || t.classList.contains("box")) return hideTip();
    tip.replaceChildren(describe(t.getAttribute("data-key")));
    tip.hidden = false;
    placeTip(e);
  });
  svgEl.addEventListener("pointermove", e => { if (!tip.hidden) placeTip(e); });
  svgEl.addEventListener("pointerleave", hideTip);
  function placeTip(e) {
    const W = window.innerWidth, H = window.innerHeight, r = tip.getBoundingClientRect();
    let x = e.clientX + 16, y = e.clientY + 16;
    if (x + r.width > W - 8) x = Math.max(8, e.clientX - r.width - 16);
    if (y + r.height > H - 8) y = Math.max(8, H - r.height - 8);
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }
  function click(e) {
    const t = e.target.closest ? e.target.closest("[data-key]") : null;
    if (!t) return;
    const key = t.getAttribute("data-key");
    if (key[0] === "b") {  // a box's label folds it
      const B = BOXES[+key.slice(1)];
      if (B.kind === "body" || !t.classList.contains("label")) return;
      toggle(B.id, B.kind === "control" ? "n" + B.node : "r" + B.id);
      return;
    }
    if (key[0] === "r") { toggle(+key.slice(1), null); return; }
    const n = NODES[+key.slice(1)];
    if (n.box !== null && BOXES[n.box].kind === "control" && BOXES[n.box].node === n.id && folded.has(n.box)) {
      toggle(n.box, key); return;
    }
    select(key);
  }
  function toggle(boxId, focusKey) {
    const opening = folded.has(boxId);
    if (opening) folded.delete(boxId); else folded.add(boxId);
    hideTip();
    relayout(() => {
      const k = opening ? "b" + boxId : focusKey;
      if (k && pos[k]) centerOn(k);
    });
  }
  function select(key) {
    selected = key;
    document.querySelectorAll(".node.selected").forEach(x => x.classList.remove("selected"));
    const g = document.querySelector('.node[data-key="' + key + '"]');
    if (g) g.classList.add("selected");
    tab = "selected";
    showPanel();
  }
  function reveal(nodeId) {  // open every folded box around a node, then focus it
    let changed = false;
    for (let b = NODES[nodeId].box; b !== null; b = BOXES[b].parent) {
      if (folded.has(b) && !(BOXES[b].kind === "control" && BOXES[b].node === nodeId)) { folded.delete(b); changed = true; }
    }
    const go = () => { centerOn("n" + nodeId); select("n" + nodeId); };
    if (changed) relayout(go); else go();
  }
  function revealBox(boxId) {
    let changed = false;
    for (let b = BOXES[boxId].parent; b !== null; b = BOXES[b].parent) if (folded.has(b)) { folded.delete(b); changed = true; }
    const key = folded.has(boxId) ? (BOXES[boxId].kind === "region" ? "r" + boxId : "n" + BOXES[boxId].node) : "b" + boxId;
    const go = () => { centerOn(key); selected = key; tab = "selected"; showPanel(); };
    if (changed) relayout(go); else go();
  }

  // ---- side panel ----
  function summaryPanel() {
    const f = document.createDocumentFragment();
    const S = SUMMARY;
    f.append(el("p", {}, S.total_s !== null ? "total " + ms(S.total_s) + " per run (median of " + S.repeat + " runs)" : "no times: run byoc report with --profile to time every node"));
    const t = el("table", {}, el("tr", {}, el("th", {}, "where"), el("th", { class: "num" }, "nodes"), el("th", { class: "num" }, "time"), el("th", { class: "num" }, "share")));
    for (const w of S.where) t.append(el("tr", {}, el("td", {}, swatch(w.where), w.where), el("td", { class: "num" }, w.nodes), el("td", { class: "num" }, ms(w.time_s)), el("td", { class: "num" }, pct(w.share))));
    f.append(el("h3", {}, "nodes and time per backend"), t);
    if (S.hot_spots.length) {
      const h = el("table", {}, el("tr", {}, el("th", {}, "node or region"), el("th", {}, "where"), el("th", { class: "num" }, "time"), el("th", { class: "num" }, "share")));
      for (const s of S.hot_spots) {
        const label = s.kernel ? s.kernel + ": " + clip(s.name, 40) + (s.nodes > 1 ? " (+" + (s.nodes - 1) + ")" : "")
          : (s.op === "(outside its kernels)" ? clip(s.name, 40) + " (outside its kernels)" : clip(s.name, 48));
        const name = el("td", { class: "mono" + (s.target !== null ? " link" : "") }, clip(label, 64));
        if (s.target !== null) name.addEventListener("click", () => s.kind === "node" ? reveal(s.target) : revealBox(s.target));
        h.append(el("tr", {}, name, el("td", {}, s.where), el("td", { class: "num" }, ms(s.time_s)), el("td", { class: "num" }, pct(s.share))));
      }
      f.append(el("h3", {}, "the ten hot spots"), h);
      if (KERNELS.length) f.append(el("p", { class: "muted" }, "a native or ccompiler region counts as its fused kernels (each once, with the ONNX nodes it holds) and its call's time outside them"));
    }
    if (S.regions.length) {
      const r = el("table", {}, el("tr", {}, el("th", {}, "region"), el("th", { class: "num" }, "nodes"), el("th", { class: "num" }, "in"), el("th", { class: "num" }, "out"), el("th", { class: "num" }, "time")));
      for (const x of S.regions) {
        const name = el("td", { class: "mono link" }, swatch(x.backend), clip(x.name, 40));
        if (x.box !== null) name.addEventListener("click", () => revealBox(x.box));
        r.append(el("tr", {}, name, el("td", { class: "num" }, x.nodes), el("td", { class: "num" }, bytes(x.bytes_in)), el("td", { class: "num" }, bytes(x.bytes_out)), el("td", { class: "num" }, ms(x.time_s))));
      }
      f.append(el("h3", {}, "bytes across each region's boundary, per run"), r);
      f.append(el("p", { class: "muted" }, "from the types; a symbolic dim without a value counts as 1"));
    }
    if (S.copies.length) {
      const c = el("table", {}, el("tr", {}, el("th", {}, "copies between devices"), el("th", { class: "num" }, "copies"), el("th", { class: "num" }, "bytes")));
      for (const x of S.copies) c.append(el("tr", {}, el("td", {}, x.from + " \u2192 " + x.to), el("td", { class: "num" }, x.copies), el("td", { class: "num" }, bytes(x.bytes))));
      f.append(el("h3", {}, "measured copies per run"), c);
    }
    const why = {};
    for (const n of NODES) if (n.kind === "op" && n.where === "host") (why[n.reason || "no backend took it"] = why[n.reason || "no backend took it"] || []).push(n.id);
    const reasons = Object.entries(why).sort((a, b) => b[1].length - a[1].length);
    if (reasons.length) {
      const w = el("table", {}, el("tr", {}, el("th", { class: "num" }, "nodes"), el("th", {}, "why they stayed on the host")));
      for (const [text, ids] of reasons.slice(0, 30)) {
        const cell = el("td", { class: "link" }, text);
        cell.addEventListener("click", () => reveal(ids[0]));
        w.append(el("tr", {}, el("td", { class: "num" }, ids.length), cell));
      }
      f.append(el("h3", {}, "host nodes, by reason"), w);
    }
    f.append(el("p", { class: "muted" }, "layout by dagre " + META.dagre + " (MIT)"));
    return f;
  }
  function planPanel() {
    const f = document.createDocumentFragment();
    if (!PLAN) return f;
    for (const line of PLAN.summary) f.append(el("p", {}, line));
    const t = el("table", {}, el("tr", {}, el("th", {}, "segment"), el("th", {}, "chosen"), el("th", {}, "measured")));
    PLAN.segments.forEach((seg, k) => {
      const first = NODES.find(n => n.kind === "op" && n.segment === k);
      const name = el("td", { class: "mono" }, seg.id + " ", el("span", { class: "muted" }, clip(String(seg.first), 28) + " \u2026 (" + seg.nodes + ")"));
      if (first) { name.classList.add("link"); name.addEventListener("click", () => reveal(first.id)); }
      const times = Object.entries(seg.times).map(([o, s]) => o + " " + (s === null ? "\u2014" : ms(s))).join(", ");
      t.append(el("tr", {}, name, el("td", {}, swatch(seg.chosen || "host"), seg.chosen || "\u2014"), el("td", {}, times, seg.why ? el("div", { class: "muted" }, seg.why) : null)));
    });
    f.append(el("h3", {}, "what byoc tune measured, piece by piece"), t);
    return f;
  }
  function showPanel() {
    const names = [["summary", "Summary"], ["selected", "Selected"]];
    if (PLAN) names.push(["plan", "Plan"]);
    tabs.replaceChildren(...names.map(([k, label]) => {
      const b = el("button", { type: "button", class: k === tab ? "on" : "" }, label);
      b.addEventListener("click", () => { tab = k; showPanel(); });
      return b;
    }));
    if (tab === "summary") panel.replaceChildren(summaryPanel());
    else if (tab === "plan") panel.replaceChildren(planPanel());
    else panel.replaceChildren(selected ? describe(selected) : el("p", { class: "muted" }, "click a node to see it here"));
  }

  // ---- header ----
  document.getElementById("title").textContent = "byoc report: " + META.model + (META.backends.length ? "  \u00B7  " + META.backends.join(", ") : "");
  const legend = document.getElementById("legend");
  const places = new Set(NODES.filter(n => n.kind === "op").map(n => n.where));
  for (const w of Object.keys(COLORS)) if (places.has(w)) legend.append(el("span", {}, swatch(w), w));
  const list = document.getElementById("names");
  if (NODES.length <= 20000) for (const n of NODES) if (n.kind === "op") list.append(el("option", { value: n.name }));
  document.getElementById("find").addEventListener("change", e => {
    const q = e.target.value;
    if (!q) return;
    const hit = NODES.find(n => n.kind === "op" && n.name === q) || NODES.find(n => n.kind === "op" && n.name.includes(q));
    if (hit) reveal(hit.id); else setStatus("no node named like that", true);
  });
  document.getElementById("fold-all").addEventListener("click", () => {
    BOXES.forEach(b => { if (b.kind !== "body") folded.add(b.id); });
    relayout(() => fit(false));
  });
  document.getElementById("unfold-all").addEventListener("click", () => { folded.clear(); relayout(() => fit(false)); });
  document.getElementById("fit").addEventListener("click", () => fit(true));
  showPanel();
  relayout(() => fit(false));
})();
