// wasmsched ui: plain JavaScript, no build step, nothing loaded from
// elsewhere. Every value from the cluster or a policy (names, labels,
// reasons) is inserted as text (textContent, attributes), never as markup.
"use strict";

const PAGE = 100; // table rows per page
const SMALL_CELLS = 1000; // above this many nodes the heat map's cells are smaller
const GROUP_CELLS = 2000; // the most cells a heat map group draws; search finds the rest
const state = { pods: [], podOffset: 0, podTotal: 0, selected: null, result: null, page: 0, sortKey: "score", sortDir: -1, whatif: "" };

function $(id) { return document.getElementById(id); }

// el makes an element: attrs are set as properties or attributes, strings
// among children become text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "title") e.title = String(v);
    else if (k === "onclick") e.addEventListener("click", v);
    else if (k.startsWith("data-")) e.setAttribute(k, String(v));
    else e[k] = v;
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function api(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({ error: r.status + " " + r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function showError(err) {
  const box = $("error");
  box.textContent = err ? String(err.message || err) : "";
  box.hidden = !err;
}

// ---- pods ----

async function loadPods(append) {
  const q = new URLSearchParams({ namespace: $("f-namespace").value, profile: $("f-profile").value, q: $("f-search").value, offset: append ? state.podOffset : 0 });
  try {
    const list = await api("/api/pods?" + q);
    fillSelect($("f-namespace"), list.namespaces);
    fillSelect($("f-profile"), list.profiles);
    state.pods = append ? state.pods.concat(list.pods) : list.pods;
    state.podOffset = list.offset + list.pods.length;
    state.podTotal = list.total;
    renderPods();
  } catch (e) { showError(e); }
}

function fillSelect(sel, values) {
  const keep = sel.value;
  const have = new Set([...sel.options].map(o => o.value));
  for (const v of values) if (!have.has(v)) sel.append(el("option", { value: v }, v));
  sel.value = keep;
}

function renderPods() {
  const ul = $("pods");
  ul.replaceChildren(...state.pods.map(p => {
    const key = p.namespace + "/" + p.name;
    return el("li", {}, el("button", {
      "data-pod": key, class: state.selected === key ? "selected" : "",
      title: p.message || (p.node ? "bound to " + p.node : "pending"),
      onclick: () => selectPod(p.namespace, p.name),
    }, el("span", { class: "state " + (p.pending ? "pending" : "bound") }, p.pending ? "Pending" : "Bound"), key,
      el("span", { class: "where" }, p.pending ? (p.message || "no PodScheduled message yet") : "on " + p.node + " · " + p.profile)));
  }));
  $("pod-count").textContent = state.podTotal + " pods" + (state.pods.length < state.podTotal ? " (" + state.pods.length + " shown)" : "");
  $("more-pods").hidden = state.pods.length >= state.podTotal;
}

// ---- explanation ----

async function selectPod(ns, name) {
  state.selected = ns + "/" + name;
  state.page = 0;
  renderPods();
  await explainSelected();
}

async function explainSelected() {
  if (!state.selected) return;
  const [ns, name] = state.selected.split("/");
  const q = new URLSearchParams({ namespace: ns, name: name, group: $("c-group").value });
  if (state.whatif) q.set("whatif", state.whatif);
  if (state.whatif && state.settings) q.set("settings", state.settings);
  $("main").setAttribute("aria-busy", "true");
  // Only the latest request's answer is shown: an earlier one (another
  // pod, another label to group by, the what-if before) arriving late is
  // dropped.
  const mine = state.seq = (state.seq || 0) + 1;
  try {
    const res = await api("/api/explain?" + q);
    if (mine !== state.seq) return;
    state.result = res;
    showError(null);
    render();
    loadRevisions(res.profile);
  } catch (e) {
    if (mine !== state.seq) return;
    state.result = null;
    $("explanation").hidden = true;
    showError(e);
  } finally {
    if (mine === state.seq) {
      $("main").removeAttribute("aria-busy");
      // Tests (and curious readers) wait on this: the pod and what-if the
      // view now shows, an answer or an error.
      document.body.setAttribute("data-explained", state.selected + (state.whatif ? "|" + state.whatif : ""));
    }
  }
}

function policyNames(res) { return (res.policies || []).map(p => p.name); }

function render() {
  const res = state.result;
  $("empty").hidden = true;
  $("explanation").hidden = false;
  $("pod-title").textContent = res.namespace + "/" + res.name;
  $("note").textContent = "This is " + res.note + ". Evaluated at " + res.evaluatedAt + ".";
  const facts = [
    ["Profile", res.profile + (res.static ? " (static policies, as replica " + res.replica + " reports them)" : "") + ": " +
      (res.policies || []).map(p => p.name + " " + p.revision.module.sha256.slice(0, 12) + " (weight " + p.weight + ", " + p.failurePolicy +
        (p.source ? ", " + p.source : "") + (p.whatIf ? ", what-if " + p.whatIf : "") + ")").join(", ")],
    ["Now", res.node ? "bound to " + res.node : "Pending"],
  ];
  if (!res.node) facts.push(["Scheduler says", res.schedulerMessage || "(no PodScheduled condition yet)"]);
  facts.push(["Policies would choose", res.chosen || "no node (" + summary(res) + ")"]);
  facts.push(["Nodes", res.totalNodes + " evaluated, " + res.feasible + " feasible, in " + (res.took / 1e6).toFixed(1) + " ms"]);
  for (const s of res.skipped || []) facts.push(["Not evaluated", s.name + ": " + s.reason]);
  if (res.shadows && res.shadows.length) facts.push(["Shadows (not counted)", res.shadows.join(", ")]);
  $("facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { id: "fact-" + k.toLowerCase().replace(/\W+/g, "-") }, v)]));
  const counts = new Map();
  for (const f of res.failures || []) counts.set(f, (counts.get(f) || 0) + 1);
  const fails = [...counts].map(([f, n]) => el("div", { class: "error failure" }, "policy failure: " + f + (n > 1 ? " (" + n + " calls)" : "")));
  if (res.error) fails.push(el("div", { class: "error" }, "cycle failed: " + res.error));
  $("failures").replaceChildren(...fails);
  const color = $("c-color");
  const keep = color.value;
  color.replaceChildren(el("option", { value: "" }, "total"), ...policyNames(res).map((n, i) => el("option", { value: String(i) }, n)));
  color.value = [...color.options].some(o => o.value === keep) ? keep : "";
  renderWhatIf();
  renderHeatmap();
  renderTable();
}

function summary(res) {
  const reasons = [];
  for (const n of res.nodes) for (const r of n.reasons || []) if (!reasons.includes(r)) reasons.push(r);
  return reasons.slice(0, 3).join("; ") + (reasons.length > 3 ? "; and " + (reasons.length - 3) + " more" : "");
}

// score of a node under the colour-by choice: total, or one policy's
// normalised score; null when not scored.
function scoreOf(n, col) {
  if (col === "") return n.score ?? null;
  const v = (n.policies || [])[Number(col)];
  return v && v.normalized !== undefined ? v.normalized : null;
}

function failedNode(n) { return (n.policies || []).some(v => v.code === "Error"); }

function cellClass(n, col) {
  if (n.code !== "Success") return failedNode(n) ? "failed" : "infeasible";
  return "";
}

function shade(s) {
  if (s === null) return "hsl(210 20% 88%)";
  return "hsl(210 70% " + (95 - 0.65 * Math.max(0, Math.min(100, s))) + "%)";
}

function nodeTitle(n) {
  const lines = [n.name + ": " + n.code + (n.score !== undefined ? ", total " + n.score : "")];
  for (const r of n.reasons || []) lines.push(r);
  return lines.join("\n");
}

function visibleNodes() {
  const res = state.result;
  const find = $("c-search").value.toLowerCase();
  const groups = res.groups || {};
  let nodes = res.nodes.filter(n => !find || n.name.toLowerCase().includes(find));
  const col = $("c-color").value;
  const by = $("c-sort").value;
  const cmpScore = (a, b) => (scoreOf(b, col) ?? -1) - (scoreOf(a, col) ?? -1) || a.name.localeCompare(b.name);
  const rank = n => n.name === res.chosen ? 0 : n.code === "Success" ? 1 : 2;
  if (state.sortKey !== "score" || by === "name") {
    const k = by === "name" ? "name" : state.sortKey;
    nodes.sort((a, b) => state.sortDir * cmpBy(k, a, b) || a.name.localeCompare(b.name));
  } else {
    nodes.sort((a, b) => rank(a) - rank(b) || cmpScore(a, b));
  }
  if (by === "group") nodes.sort((a, b) => (groups[a.name] || "").localeCompare(groups[b.name] || "") || rank(a) - rank(b) || cmpScore(a, b));
  return nodes;
}

function cmpBy(k, a, b) {
  if (k === "name") return a.name.localeCompare(b.name);
  if (k === "verdict") return a.code.localeCompare(b.code);
  if (k === "total") return ((a.score ?? -1) - (b.score ?? -1));
  if (k.startsWith("p")) {
    const i = Number(k.slice(1));
    return ((a.policies[i] || {}).normalized ?? -1) - ((b.policies[i] || {}).normalized ?? -1);
  }
  return 0;
}

function renderHeatmap() {
  const res = state.result;
  const groups = res.groups || {};
  const col = $("c-color").value;
  const find = $("c-search").value.toLowerCase();
  const byGroup = new Map();
  for (const n of res.nodes) {
    const g = res.groupLabel ? (groups[n.name] || "(no " + res.groupLabel + ")") : "all nodes";
    if (!byGroup.has(g)) byGroup.set(g, []);
    byGroup.get(g).push(n);
  }
  const out = [];
  const small = res.nodes.length > SMALL_CELLS;
  for (const g of [...byGroup.keys()].sort()) {
    const all = byGroup.get(g);
    const matches = n => !find || n.name.toLowerCase().includes(find);
    // The best first; with a search, the nodes found before the rest, so
    // that a group too large to draw whole still shows them.
    const nodes = all.sort((a, b) => (matches(b) - matches(a)) || (scoreOf(b, col) ?? -1) - (scoreOf(a, col) ?? -1) || a.name.localeCompare(b.name));
    const feasible = nodes.filter(n => n.code === "Success").length;
    const best = nodes.reduce((m, n) => Math.max(m, scoreOf(n, col) ?? -1), -1);
    const drawn = nodes.slice(0, GROUP_CELLS);
    out.push(el("details", { class: "group", open: true, "data-group": g },
      el("summary", { class: "ghead" }, g + " · " + nodes.length + " nodes, " + feasible + " feasible" + (best >= 0 ? ", best " + best : "")),
      el("div", { class: "cells" + (small ? " small" : "") }, drawn.map(n => {
        const c = el("div", {
          class: "cell " + cellClass(n, col) + (n.name === res.chosen ? " chosen" : "") + (matches(n) ? "" : " dim"),
          title: nodeTitle(n), "data-node": n.name, onclick: () => showNode(n.name),
        });
        if (n.code === "Success") c.style.background = shade(scoreOf(n, col));
        return c;
      })),
      nodes.length > drawn.length ? el("div", { class: "muted more" }, "… and " + (nodes.length - drawn.length) + " more nodes in this group: find one by name, or page through the table") : null));
  }
  $("heatmap").replaceChildren(...out);
}

function verdictCell(v) {
  v = v || {};
  const scored = v.normalized !== undefined;
  const cls = !v.code ? "v-na" : v.code === "Success" ? "v-ok" : v.code === "Error" ? "v-err" : "v-no";
  const label = !v.code ? "–" : v.code === "Success" ? "ok" : v.code === "Error" ? "failed" : v.code;
  const why = v.failure || (v.reasons || []).join("; ") ||
    (!v.code ? "no Filter verdict: PreFilter skipped Filter, an earlier policy rejected the node, or the policy does not filter" : label);
  const td = el("td", { class: cls + (scored && v.normalized > 55 ? " dark" : ""), title: why },
    label + (scored ? " " + (v.raw ?? "?") + "→" + v.normalized : ""));
  if (scored) td.style.background = shade(v.normalized);
  return td;
}

function renderTable() {
  const res = state.result;
  const names = policyNames(res);
  const weights = (res.policies || []).map(p => p.weight);
  const groups = res.groups || {};
  const head = el("tr", {},
    th("Node", "name"), res.groupLabel ? el("th", { title: res.groupLabel }, res.groupLabel.split("/").pop()) : null, th("Verdict", "verdict"), th("Total", "total"),
    names.map((n, i) => th(n + " ×" + weights[i], "p" + i)), el("th", {}, "Reasons"));
  $("table").tHead.replaceChildren(head);
  const nodes = visibleNodes();
  const pages = Math.max(1, Math.ceil(nodes.length / PAGE));
  state.page = Math.min(state.page, pages - 1);
  const slice = nodes.slice(state.page * PAGE, (state.page + 1) * PAGE);
  const rows = [];
  let lastGroup = null;
  for (const n of slice) {
    if ($("c-sort").value === "group" && res.groupLabel && groups[n.name] !== lastGroup) {
      lastGroup = groups[n.name];
      rows.push(el("tr", { class: "grouprow" }, el("td", { colSpan: 5 + names.length }, res.groupLabel + " = " + (lastGroup || "(none)"))));
    }
    rows.push(el("tr", { class: n.name === res.chosen ? "chosen" : "", "data-node": n.name, onclick: () => showNode(n.name), title: nodeTitle(n) },
      el("td", {}, n.name), res.groupLabel ? el("td", {}, groups[n.name] || "") : null,
      el("td", { class: "verdict " + (n.code === "Success" ? "v-ok" : failedNode(n) ? "v-err" : "v-no") }, n.code),
      el("td", { class: "num total" }, n.score ?? "–"),
      names.map((_, i) => verdictCell((n.policies || [])[i])),
      el("td", { class: "reason" }, (n.reasons || []).join("; "))));
  }
  $("table").tBodies[0].replaceChildren(...rows);
  $("page-info").textContent = "nodes " + (nodes.length ? state.page * PAGE + 1 : 0) + "–" + Math.min(nodes.length, (state.page + 1) * PAGE) + " of " + nodes.length;
  $("prev-page").disabled = state.page === 0;
  $("next-page").disabled = state.page >= pages - 1;
}

function th(label, key) {
  const arrow = state.sortKey === key ? (state.sortDir > 0 ? " ▲" : " ▼") : "";
  return el("th", { "data-sort": key, onclick: () => {
    if (state.sortKey === key) state.sortDir = -state.sortDir; else { state.sortKey = key; state.sortDir = key === "name" || key === "verdict" ? 1 : -1; }
    if ($("c-sort").value === "name" && key !== "name") $("c-sort").value = "score";
    renderTable();
  } }, label + arrow);
}

function showNode(name) {
  const res = state.result;
  const n = res.nodes.find(x => x.name === name);
  if (!n) return;
  const body = [el("h3", {}, n.name), el("p", {}, n.code + (n.score !== undefined ? ", total score " + n.score : "") + (n.name === res.chosen ? " · chosen" : ""))];
  if ((n.reasons || []).length) body.push(el("h4", {}, "Reasons"), el("pre", {}, n.reasons.join("\n")));
  (res.policies || []).forEach((p, i) => {
    const v = (n.policies || [])[i] || {};
    body.push(el("h4", {}, p.name + " (weight " + p.weight + ", " + p.failurePolicy + ")"));
    body.push(el("p", {}, (v.code || "no Filter verdict") + (v.normalized !== undefined ? " · raw " + (v.raw ?? "?") + " → normalised " + v.normalized : "")));
    if (v.failure) body.push(el("pre", { class: "error" }, v.failure));
    if ((v.reasons || []).length) body.push(el("pre", {}, v.reasons.join("\n")));
  });
  $("panel-body").replaceChildren(...body);
  $("panel").hidden = false;
}

// ---- what-if ----

async function loadRevisions(profile) {
  if (state.revProfile === profile) return;
  try {
    const pols = await api("/api/revisions?" + new URLSearchParams({ profile }));
    state.revProfile = profile;
    state.revisions = pols;
    const sel = $("w-policy");
    sel.replaceChildren(...pols.map(p => el("option", { value: p.name }, p.name)));
    fillRevisions();
  } catch (e) { showError(e); }
}

function fillRevisions() {
  const p = (state.revisions || []).find(x => x.name === $("w-policy").value);
  $("w-revision").replaceChildren(...(p ? p.revisions : []).map(r => el("option", { value: r.digest },
    r.digest.slice(0, 12) + (r.digest === p.serving ? " (serving)" : "") + (r.settings ? " " + JSON.stringify(r.settings) : ""))));
}

function renderWhatIf() {
  const w = state.result.whatIf;
  if (!w) { $("whatif").replaceChildren(); return; }
  $("whatif-box").open = true;
  $("whatif").replaceChildren(
    el("p", {}, "This pod: serving revisions → " + w.serving + "; what-if → " + w.whatIf),
    el("p", {}, w.moves.length + " of " + w.pending + " pending pods of the profile would change"),
    el("table", { id: "moves" }, el("tr", {}, el("th", {}, "Pod"), el("th", {}, "Serving"), el("th", {}, "What-if")),
      w.moves.map(m => el("tr", {}, el("td", {}, m.pod), el("td", {}, m.serving), el("td", {}, m.whatIf)))));
}

// ---- wiring ----

document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["f-namespace", "f-profile"]) $(id).addEventListener("change", () => loadPods(false));
  let t;
  $("f-search").addEventListener("input", () => { clearTimeout(t); t = setTimeout(() => loadPods(false), 200); });
  $("more-pods").addEventListener("click", () => loadPods(true));
  $("c-group").addEventListener("change", explainSelected);
  // The sort menu's orders: names A to Z, scores highest first.
  for (const id of ["c-color", "c-sort"]) $(id).addEventListener("change", () => { state.sortKey = "score"; state.sortDir = $("c-sort").value === "name" ? 1 : -1; state.page = 0; renderHeatmap(); renderTable(); });
  $("c-search").addEventListener("input", () => { state.page = 0; renderHeatmap(); renderTable(); });
  $("prev-page").addEventListener("click", () => { state.page--; renderTable(); });
  $("next-page").addEventListener("click", () => { state.page++; renderTable(); });
  $("panel-close").addEventListener("click", () => { $("panel").hidden = true; });
  $("w-policy").addEventListener("change", fillRevisions);
  $("w-run").addEventListener("click", () => { state.whatif = $("w-policy").value + "=" + ($("w-digest").value.trim() || $("w-revision").value); state.settings = $("w-settings").value.trim(); explainSelected(); });
  $("w-clear").addEventListener("click", () => { state.whatif = ""; state.settings = ""; explainSelected(); });
  loadPods(false);
});
