// The placement console: reads the admin REST API and its SSE watch with the caller's token,
// renders topology, namespaces, placement violations and the change history, and previews a
// change with the placement engine before applying it through the same REST API.

const API = "/admin/v2";
const TOKEN_KEY = "pulsar-console-token";
const ROW = 56; // px, the height of a row of the virtual lists (console.css .vlist .row)
const TILE_PAGE = 300; // tiles rendered per rack before "Show more"
const $ = (id) => document.getElementById(id);

const state = {
  overview: null,
  bookieById: new Map(),
  selected: null, // the selected namespace's name
  pending: null, // the change previewed, waiting for Apply
  history: [],
  revision: 0,
  refreshTimer: null,
  settleTimer: null,
  readingTimer: null, // asks again while the ledgers are being read
  tilesShown: new Map(), // rack key -> tiles rendered
};

// -- DOM ----------------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "style") node.style.cssText = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
  "#8c564b", "#e377c2", "#bcbd22", "#393b79", "#637939", "#843c39"];
const groupIndex = new Map(); // group -> its place among the sorted groups of the overview

function groupColour(group) {
  if (!group) return "#9aa0a6";
  const i = groupIndex.has(group) ? groupIndex.get(group) : groupIndex.size;
  return i < PALETTE.length ? PALETTE[i] : `hsl(${(i * 137.5) % 360} 60% 42%)`;
}

function bytes(n) {
  if (n === null || n === undefined) return "unknown";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return `${n.toFixed(n < 10 && i ? 1 : 0)} ${units[i]}`;
}

// A list that renders only the rows in view: `rows` are rendered by `render(row)` into
// absolutely positioned elements of height ROW.
class VirtualList {
  constructor(container, render) {
    this.container = container;
    this.render = render;
    this.rows = [];
    this.spacer = el("div", { style: "height:0" });
    container.append(this.spacer);
    container.addEventListener("scroll", () => this.draw());
    container.tabIndex = 0;
  }
  set(rows) {
    this.rows = rows;
    this.spacer.style.height = `${rows.length * ROW}px`;
    this.draw();
  }
  draw() {
    const top = this.container.scrollTop;
    const height = this.container.clientHeight || 352;
    const first = Math.max(0, Math.floor(top / ROW) - 5);
    const last = Math.min(this.rows.length, Math.ceil((top + height) / ROW) + 5);
    for (const node of [...this.container.querySelectorAll(":scope > .row")]) node.remove();
    const frag = document.createDocumentFragment();
    for (let i = first; i < last; i++) {
      const node = this.render(this.rows[i]);
      node.classList.add("row");
      node.setAttribute("role", "listitem");
      node.style.top = `${i * ROW}px`;
      frag.append(node);
    }
    this.container.append(frag);
  }
}

// -- HTTP ---------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.status = status;
    this.reason = reason;
  }
}

function headers(extra = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

const STATUS_WORDS = {
  400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found",
  405: "Not allowed", 409: "Conflict", 412: "Precondition failed", 500: "Server error",
  503: "Unavailable",
};

function describe(error) {
  if (!(error instanceof ApiError)) return String(error.message || error);
  const words = STATUS_WORDS[error.status] || "Error";
  return `${error.status} ${words}: ${error.reason}`;
}

async function call(method, path, body) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(API + path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!response.ok) {
    const reason = data && typeof data === "object" && "reason" in data ? data.reason : text;
    throw new ApiError(response.status, reason || response.statusText);
  }
  return data;
}

// -- auth ---------------------------------------------------------------------------------------

function showLogin(error) {
  $("main").hidden = true;
  $("login").hidden = false;
  $("sign-out").hidden = true;
  const message = $("auth-error");
  message.hidden = !error;
  message.textContent = error ? describe(error) : "";
  $("token").focus();
}

function signedIn() {
  $("login").hidden = true;
  $("auth-error").hidden = true;
  $("main").hidden = false;
  $("sign-out").hidden = !sessionStorage.getItem(TOKEN_KEY);
}

// -- overview -----------------------------------------------------------------------------------

// the overview's entity tag (given to tenant admins): sent back, an unchanged view answers 304
let overviewTag = null;

async function fetchOverview() {
  const init = { method: "GET", headers: headers(), cache: "no-store" };
  if (overviewTag && state.overview) init.headers["If-None-Match"] = overviewTag;
  const response = await fetch(API + "/console/overview", init);
  if (response.status === 304) return null;
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!response.ok) {
    const reason = data && typeof data === "object" && "reason" in data ? data.reason : text;
    throw new ApiError(response.status, reason || response.statusText);
  }
  overviewTag = response.headers.get("ETag");
  return data;
}

async function refresh() {
  let overview;
  try {
    overview = await fetchOverview();
    if (overview === null) { // not modified: the page shows it already
      document.body.dataset.unchanged = String(Number(document.body.dataset.unchanged || 0) + 1);
      return true;
    }
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
      stopLive();
      showLogin(sessionStorage.getItem(TOKEN_KEY) ? error : null);
      return false;
    }
    setLive(false, `refresh failed: ${describe(error)}`);
    // 503: the service is still reading the ledgers (or etcd is away): ask again shortly
    if (error instanceof ApiError && error.status === 503) return "retry";
    return false;
  }
  state.overview = overview;
  state.bookieById = new Map((overview.bookies || []).map((b) => [b.id, b]));
  state.revision = Math.max(state.revision, overview.revision);
  signedIn();
  render();
  // while the service reads the ledgers, ask again each second until they are all there
  clearTimeout(state.readingTimer);
  if (!ledgersReady()) state.readingTimer = setTimeout(scheduleRefresh, 1000);
  return true;
}

function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(async () => {
    state.refreshTimer = null;
    if (await refresh() === "retry") scheduleRefresh();
    if (state.selected) loadLedgers(state.selected);
  }, 100);
}

function render() {
  const o = state.overview;
  $("cluster").textContent = `cluster ${o.cluster} · ${o.mode}`;
  renderTopology();
  renderNamespaces();
  renderViolations();
  renderChoices();
  document.body.dataset.revision = String(o.revision);
}

function groupsOf(bookies) {
  return [...new Set(bookies.map((b) => b.group).filter(Boolean))].sort();
}

function renderLegend(bookies) {
  const legend = $("legend");
  groupIndex.clear();
  groupsOf(bookies).forEach((g, i) => groupIndex.set(g, i));
  legend.replaceChildren(
    ...groupsOf(bookies).map((g) => el("li", {},
      el("span", { class: "swatch", style: `background:${groupColour(g)}` }), g)),
    el("li", {}, el("span", { class: "swatch", style: `background:${groupColour(null)}` }),
      "no group"));
}

function matches(bookie, query) {
  if (!query) return true;
  const text = `${bookie.id} ${bookie.hostname} ${bookie.group || "no group"} ${bookie.rack} ` +
    `${bookie.state}`;
  return text.toLowerCase().includes(query);
}

function stateClass(s) {
  return { "writable": "writable", "read-only": "read-only", "not running": "not-running",
    "registered but unplaced": "unplaced" }[s] || "";
}

// "3 ledgers", or words saying the ledgers are still being read
function ledgerCount(n) {
  return n === null ? "ledgers being read" : `${n} ledger${n === 1 ? "" : "s"}`;
}

// "12,000 of 100,000": how far the service's read of every ledger is
function readProgress(status) {
  const total = status.total === null ? "an unknown number" : status.total.toLocaleString("en");
  return `${status.read.toLocaleString("en")} of ${total}`;
}

function ledgersReady() {
  return !state.overview.ledgerStatus || state.overview.ledgerStatus.state === "ready";
}

function tile(bookie, usable) {
  const disk = bookie.diskUsed === null ? "disk use unknown"
    : `disk ${bytes(bookie.diskUsed)}` +
      (bookie.diskCapacity ? ` of ${bytes(bookie.diskCapacity)}` : "");
  const label = `${bookie.id}, ${bookie.group ? `group ${bookie.group}` : "no group"}, ` +
    `${bookie.state}, ${ledgerCount(bookie.ledgers)}`;
  return el("li", {
    class: `tile ${stateClass(bookie.state)}${usable && usable.has(bookie.id) ? " usable" : ""}`,
    style: `border-left-color:${groupColour(bookie.group)}`,
    tabindex: 0, "aria-label": label, "data-bookie": bookie.id,
    onclick: () => chooseBookie(bookie),
    onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); chooseBookie(bookie); } },
  },
  el("div", { class: "id" }, bookie.id),
  el("div", {}, bookie.hostname),
  el("div", {}, el("span", { class: "swatch", style: `background:${groupColour(bookie.group)}` }),
    bookie.group ? `group ${bookie.group}` : "no group"),
  el("div", { class: "state" }, bookie.state),
  el("div", {}, `${disk} · ${ledgerCount(bookie.ledgers)}`));
}

function renderTopology() {
  const o = state.overview;
  const areas = $("areas");
  $("topology-hidden").hidden = o.bookies !== null;
  if (o.bookies === null) { areas.replaceChildren(); $("legend").replaceChildren(); return; }
  renderLegend(o.bookies);
  const query = $("bookie-search").value.trim().toLowerCase();
  const shown = o.bookies.filter((b) => matches(b, query));
  $("bookie-count").textContent = `${shown.length} of ${o.bookies.length} bookies`;
  const selected = o.namespaces.find((n) => n.name === state.selected);
  const usable = selected ? new Set(selected.usableBookies) : null;
  // cluster > region > rack
  const regions = new Map();
  for (const b of shown) {
    const region = b.region || "";
    if (!regions.has(region)) regions.set(region, new Map());
    const racks = regions.get(region);
    if (!racks.has(b.rack)) racks.set(b.rack, []);
    racks.get(b.rack).push(b);
  }
  const cluster = el("div", { class: `area cluster${usable ? " dim" : ""}`, role: "group",
    "aria-label": `cluster ${o.cluster}` }, el("h3", {}, `Cluster ${o.cluster}`));
  for (const region of [...regions.keys()].sort()) {
    const racks = regions.get(region);
    const level = o.mode === "zone-aware" ? "Zone" : "Region";
    const holder = region
      ? el("div", { class: "area region", role: "group", "aria-label": `${level} ${region}` },
        el("h4", {}, `${level} ${region}`))
      : cluster;
    for (const rack of [...racks.keys()].sort()) {
      holder.append(rackArea(region, rack, racks.get(rack), usable));
    }
    if (holder !== cluster) cluster.append(holder);
  }
  areas.replaceChildren(cluster);
}

const tileObserver = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (entry.isIntersecting && entry.target.fill) {
      tileObserver.unobserve(entry.target);
      entry.target.fill();
    }
  }
}, { rootMargin: "400px" });

function rackArea(region, rack, bookies, usable) {
  const key = `${region}|${rack}`;
  const list = el("ul", { class: "tiles", "aria-label": `bookies in rack ${rack}` });
  const area = el("div", { class: "area rack", role: "group", "aria-label": `rack ${rack}` },
    el("h4", {}, `Rack ${rack} · ${bookies.length} bookie${bookies.length === 1 ? "" : "s"}`),
    list);
  const rows = Math.ceil(Math.min(bookies.length, TILE_PAGE) / 5);
  list.style.minHeight = `${rows * 6}rem`;
  list.fill = () => {
    const limit = state.tilesShown.get(key) || TILE_PAGE;
    list.replaceChildren(...bookies.slice(0, limit).map((b) => tile(b, usable)));
    list.style.minHeight = "";
    if (bookies.length > limit) {
      area.append(el("button", { type: "button", class: "more", onclick: (e) => {
        state.tilesShown.set(key, limit + TILE_PAGE * 4);
        e.target.remove();
        list.fill();
      } }, `Show more (${bookies.length - limit} not shown)`));
    }
  };
  tileObserver.observe(list);
  return area;
}

function chooseBookie(bookie) {
  $("move-bookie").value = bookie.id;
  $("move-group").value = bookie.group || "";
  $("move-rack").value = bookie.rack;
  $("history-bookie").value = bookie.id;
  $("move-group").focus();
  renderHistory();
}

function renderNamespaces() {
  const o = state.overview;
  const query = $("namespace-search").value.trim().toLowerCase();
  const rows = o.namespaces.filter((n) => !query || n.name.toLowerCase().includes(query))
    .map((n) => el("tr", { class: n.name === state.selected ? "selected" : "",
      "data-namespace": n.name },
    el("td", {}, el("button", { type: "button", class: "link",
      "aria-pressed": n.name === state.selected ? "true" : "false",
      onclick: () => selectNamespace(n.name) }, n.name)),
    el("td", {}, n.primary.join(", ") || "none"),
    el("td", {}, n.secondary.join(", ") || "none"),
    el("td", {}, n.strict ? el("span", { class: "strict" }, "strict") : "not strict"),
    el("td", {}, `${n.ensembleSize}/${n.writeQuorum}/${n.ackQuorum}`),
    el("td", {}, n.antiAffinityGroup || "none"),
    el("td", {}, String(n.usableBookies.length),
      n.usableBookies.length < n.ensembleSize ? el("span", { class: "kinds" }, " (fewer than E)") : ""),
    el("td", {}, n.topics === null ? "being read" : String(n.topics)),
    el("td", {}, n.ledgers === null ? "being read" : String(n.ledgers))));
  $("namespace-rows").replaceChildren(...rows);
  if (state.selected && !o.namespaces.some((n) => n.name === state.selected)) {
    state.selected = null;
    $("namespace-detail").hidden = true;
  }
}

let ledgerList = null;

function selectNamespace(name) {
  state.selected = state.selected === name ? null : name;
  renderNamespaces();
  renderTopology();
  $("namespace-detail").hidden = !state.selected;
  if (state.selected) {
    const ns = state.overview.namespaces.find((n) => n.name === name);
    $("groups-namespace").value = name;
    $("groups-primary").value = ns.ownGroups ? ns.primary.join(",") : "";
    $("groups-secondary").value = ns.ownGroups ? ns.secondary.join(",") : "";
    $("groups-strict").checked = ns.ownGroups && ns.strict;
    $("history-namespace").value = name;
    renderHistory();
    loadLedgers(name);
  }
}

function bookieChip(id) {
  const bookie = state.bookieById.get(id);
  const group = bookie ? bookie.group : null;
  const words = bookie ? (bookie.state === "writable" ? "" : ` (${bookie.state})`) : "";
  return el("span", { class: "chip", style: `border-left-color:${groupColour(group)}`,
    title: group ? `group ${group}` : "no group" }, id + words);
}

async function loadLedgers(name) {
  const [tenant, namespace] = name.split("/");
  $("namespace-detail-title").textContent = `Topics and ledgers of ${name}`;
  if (!ledgerList) {
    ledgerList = new VirtualList($("namespace-ledgers"), (row) => row.words
      ? el("div", { class: "topic reading" }, row.topic)
      : row.topic
      ? el("div", { class: "topic" }, `Topic ${row.topic} · ${row.count} ledger${row.count === 1 ? "" : "s"}`)
      : el("div", {}, `Ledger ${row.ledger.ledgerId} (${row.ledger.state}, ` +
          `E/Qw/Qa ${row.ledger.ensembleSize}/${row.ledger.writeQuorum}/${row.ledger.ackQuorum}) ` +
          `entries from ${row.ensemble.firstEntry}: `, ...row.ensemble.bookies.map(bookieChip)));
  }
  try {
    const data = await call("GET", `/console/namespaces/${encodeURIComponent(tenant)}/${encodeURIComponent(namespace)}/ledgers`);
    if (data.ledgerStatus && data.ledgerStatus.state !== "ready") {
      if (state.selected === name) {
        ledgerList.set([{ topic: `The ledgers are still being read (${readProgress(data.ledgerStatus)}); ` +
          "they are listed here when the read is done", count: 0, words: true }]);
      }
      return;
    }
    const rows = [];
    for (const topic of data.topics) {
      rows.push({ topic: topic.name, count: topic.ledgers.length });
      for (const ledger of topic.ledgers) {
        for (const ensemble of ledger.ensembles) rows.push({ ledger, ensemble });
      }
    }
    if (!rows.length) rows.push({ topic: "(none)", count: 0 });
    if (state.selected === name) ledgerList.set(rows);
  } catch (error) {
    ledgerList.set([{ topic: describe(error), count: 0 }]);
  }
}

let violationList = null;

function renderViolations() {
  const o = state.overview;
  if (!violationList) {
    violationList = new VirtualList($("violation-list"), (v) => el("div", {
      "data-ledger": v.ledgerId, title: v.reasons.join("; ") },
      el("div", {}, el("strong", {}, `Ledger ${v.ledgerId}`),
        ` · ${v.namespace || "no namespace"} · ${v.topic || "no topic"} · entries from ${v.firstEntry} · `,
        el("span", { class: "kinds" }, v.kinds.join(", "))),
      el("div", {}, v.reasons.join("; "))));
  }
  const short = o.shortNamespaces.map((s) =>
    `${s.namespace} has ${s.usableBookies} usable bookie${s.usableBookies === 1 ? "" : "s"} ` +
    `for an ensemble of ${s.ensembleSize}`);
  const summary = $("violation-summary");
  summary.classList.toggle("reading", o.violations === null);
  if (o.violations === null) {
    violationList.set([]);
    summary.textContent = (o.ledgerStatus.state === "judging"
      ? `Every ledger is read (${readProgress(o.ledgerStatus)}) and being judged against its ` +
        "namespace's current policy; the violations are listed when that is done."
      : `The ledgers are still being read (${readProgress(o.ledgerStatus)}); ` +
        "the violations are listed when the read is done.") + (short.length ? ` ${short.join("; ")}.` : "");
  } else {
    violationList.set(o.violations);
    summary.textContent = (o.violations.length
      ? `${o.violations.length} ledger${o.violations.length === 1 ? "" : "s"} break their namespace's current policy.`
      : "No ledger breaks its namespace's current policy.") + (short.length ? ` ${short.join("; ")}.` : "");
  }
  $("audit-link").hidden = !o.auditReport;
  if (o.auditReport) $("audit-report").href = o.auditReport;
}

function renderChoices() {
  const o = state.overview;
  const bookies = o.bookies || [];
  $("bookie-ids").replaceChildren(...bookies.slice(0, 2000).map((b) => el("option", { value: b.id })));
  $("group-names").replaceChildren(...groupsOf(bookies).map((g) => el("option", { value: g })));
  const select = $("groups-namespace");
  const current = select.value;
  select.replaceChildren(...o.namespaces.map((n) => el("option", { value: n.name }, n.name)));
  if (current) select.value = current;
  $("move-form").hidden = o.bookies === null;
}

// -- change with a preview ------------------------------------------------------------------------

function splitGroups(text) {
  return text.split(",").map((g) => g.trim()).filter(Boolean);
}

async function preview(change) {
  $("change-error").hidden = true;
  $("change-result").textContent = "";
  try {
    const result = await call("POST", "/console/preview", change);
    state.pending = change;
    $("preview-summary").textContent =
      `Ledgers breaking their policy: ${result.violationsBefore} now, ${result.violationsAfter} after. ` +
      `${result.newViolations.length} would newly break it, ${result.resolvedViolations.length} would stop.`;
    const items = [
      ...result.newViolations.map((v) => el("li", { class: "new-violation" },
        `Ledger ${v.ledgerId} (${v.namespace || "no namespace"}) would violate: ${v.reasons.join("; ")}`)),
      ...result.shortNamespaces.map((s) => el("li", { class: "short" },
        `Namespace ${s.namespace} would be left with ${s.usableBookies} usable bookie${s.usableBookies === 1 ? "" : "s"}, fewer than its ensemble size ${s.ensembleSize}`)),
    ];
    if (!items.length) {
      items.push(el("li", {}, "No ledger would newly break its policy, and every namespace " +
        "keeps at least as many usable bookies as its ensemble size."));
    }
    $("preview-details").replaceChildren(...items);
    $("preview").hidden = false;
    $("apply").focus();
  } catch (error) {
    showChangeError(error);
  }
}

function showChangeError(error) {
  $("change-error").textContent = describe(error);
  $("change-error").hidden = false;
}

async function apply() {
  const change = state.pending;
  if (!change) return;
  try {
    if (change.bookie) {
      const b = change.bookie;
      const existing = (state.overview.bookies || []).find((x) => x.id === b.id);
      const info = { rack: b.rack };
      if (existing && existing.hostname && existing.hostname !== b.id.split(":")[0]) info.hostname = existing.hostname;
      await call("POST", `/bookies/racks-info/${encodeURIComponent(b.id)}?group=${encodeURIComponent(b.group)}`, info);
    } else {
      const n = change.namespace;
      const path = `/namespaces/${n.name}/persistence/bookieAffinity`;
      if (!n.primary.length && !n.secondary.length) {
        await call("DELETE", path);
      } else {
        await call("POST", path, {
          bookkeeperAffinityGroupPrimary: n.primary.join(","),
          bookkeeperAffinityGroupSecondary: n.secondary.join(",") || undefined,
          bookkeeperAffinityGroupStrict: n.strict,
        });
      }
    }
    state.pending = null;
    $("preview").hidden = true;
    $("change-result").textContent = "Applied.";
    scheduleRefresh();
    loadHistory();
  } catch (error) {
    showChangeError(error);
  }
}

// -- change history -----------------------------------------------------------------------------

let historyList = null;

async function loadHistory() {
  const records = [];
  let since = 0;
  try {
    for (let page = 0; page < 20; page++) {
      const batch = await call("GET", `/changes?since=${since}&limit=1000`);
      records.push(...batch);
      if (batch.length < 1000) break;
      since = batch[batch.length - 1].revision;
    }
    $("history-error").hidden = true;
  } catch (error) {
    $("history-error").textContent = describe(error);
    $("history-error").hidden = false;
  }
  state.history = records.reverse();
  renderHistory();
}

function entryOf(rackMap, bookie) {
  if (!rackMap || typeof rackMap !== "object") return null;
  for (const [group, members] of Object.entries(rackMap)) {
    if (members && typeof members === "object" && bookie in members) {
      return JSON.stringify([group, members[bookie]]);
    }
  }
  return null;
}

function touchesBookie(record, bookie) {
  if (record.path.includes(bookie)) return true;
  return record.changes.some((c) => c.key.endsWith(`/${bookie}`) ||
    (c.key === "/bookies" && entryOf(c.before, bookie) !== entryOf(c.after, bookie)));
}

function touchesNamespace(record, namespace) {
  return record.path.includes(`/${namespace}/`) || record.path.endsWith(`/${namespace}`) ||
    record.changes.some((c) => c.key.endsWith(`/${namespace}`));
}

function renderHistory() {
  if (!historyList) {
    historyList = new VirtualList($("history-list"), (r) => el("div", { "data-revision": r.revision },
      el("div", {}, el("strong", {}, new Date(r.time).toISOString().replace("T", " ").slice(0, 19)),
        ` · ${r.role || "anonymous"}${r.clientAddress ? ` from ${r.clientAddress}` : ""} · ${r.method} ${r.path}`),
      el("div", { class: "muted" }, `revision ${r.revision}: ${r.changes.map((c) =>
        `${c.after === null ? "deleted" : c.before === null ? "created" : "changed"} ${c.key}`).join(", ")}`)));
  }
  const bookie = $("history-bookie").value.trim();
  const namespace = $("history-namespace").value.trim();
  historyList.set(state.history.filter((r) =>
    (!bookie || touchesBookie(r, bookie)) && (!namespace || touchesNamespace(r, namespace))));
}

// -- live ---------------------------------------------------------------------------------------

const streams = new Map(); // prefix -> AbortController
let polling = null;

function setLive(on, words) {
  const live = $("live");
  live.className = `live ${on ? "on" : "off"}`;
  live.textContent = words;
}

function stopLive() {
  for (const controller of streams.values()) controller.abort();
  streams.clear();
  clearInterval(polling);
  polling = null;
}

function startLive() {
  stopLive();
  if (!state.overview.superUser) {
    // the watch is for super-users; a tenant admin's view is asked for every second, by a
    // conditional GET that costs a revision read when nothing changed
    polling = setInterval(scheduleRefresh, 1000);
    setLive(true, "live (polling)");
    return;
  }
  for (const prefix of ["bookies", "policies", "ledgers"]) watch(prefix, state.overview.revision + 1);
}

async function watch(prefix, since) {
  const controller = new AbortController();
  streams.set(prefix, controller);
  let next = since;
  while (!controller.signal.aborted) {
    try {
      const response = await fetch(`${API}/watch?prefix=${prefix}&since=${next}`,
        { headers: headers(), signal: controller.signal });
      if (response.status === 401 || response.status === 403) { await refresh(); return; }
      if (!response.ok) throw new Error(`watch ${prefix}: ${response.status}`);
      setLive(true, "live");
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const event = parseFrame(frame);
          if (!event) continue;
          if (event.type === "resync") {
            await refresh();
            next = state.overview.revision + 1;
          } else if (event.type === "interrupted") {
            const data = JSON.parse(event.data || "{}");
            if (data.since) next = data.since;
          } else if (event.id) {
            next = Number(event.id) + 1;
            scheduleRefresh();
            // and once more when changes stop: the service's own watches may trail this one
            clearTimeout(state.settleTimer);
            state.settleTimer = setTimeout(scheduleRefresh, 700);
          }
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    if (controller.signal.aborted) return;
    setLive(false, "reconnecting");
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

function parseFrame(frame) {
  const event = { type: "message", id: null, data: "" };
  let any = false;
  for (const line of frame.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event.type = value;
    else if (field === "id") event.id = value;
    else if (field === "data") event.data += value;
    any = true;
  }
  return any ? event : null;
}

// -- start --------------------------------------------------------------------------------------

async function start() {
  let outcome = await refresh();
  for (let tries = 0; outcome === "retry" && tries < 120; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    outcome = await refresh();
  }
  if (outcome === true) {
    startLive();
    loadHistory();
  }
}

function wire() {
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    start();
  });
  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    stopLive();
    state.overview = null;
    overviewTag = null;
    showLogin(null);
  });
  $("bookie-search").addEventListener("input", () => renderTopology());
  $("namespace-search").addEventListener("input", () => renderNamespaces());
  $("history-bookie").addEventListener("input", () => renderHistory());
  $("history-namespace").addEventListener("input", () => renderHistory());
  $("history-refresh").addEventListener("click", () => loadHistory());
  $("move-form").addEventListener("submit", (e) => {
    e.preventDefault();
    preview({ bookie: { id: $("move-bookie").value.trim(), group: $("move-group").value.trim(),
      rack: $("move-rack").value.trim() } });
  });
  $("groups-form").addEventListener("submit", (e) => {
    e.preventDefault();
    preview({ namespace: { name: $("groups-namespace").value,
      primary: splitGroups($("groups-primary").value),
      secondary: splitGroups($("groups-secondary").value),
      strict: $("groups-strict").checked } });
  });
  $("apply").addEventListener("click", apply);
  $("cancel").addEventListener("click", () => {
    state.pending = null;
    $("preview").hidden = true;
  });
}

wire();
start();
