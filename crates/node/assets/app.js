// Weft dashboard: polls /api/history every second and /api/overview every ~3 s and
// renders the header, KPI tiles, tables, health findings and three uPlot charts.
// Plain browser JavaScript, no build step; everything comes from /assets.
'use strict';
(() => {
  const HISTORY_PERIOD_MS = 1000;
  const OVERVIEW_PERIOD_MS = 3000;
  const FETCH_TIMEOUT_MS = 2500;
  const WINDOW_S = 600; // the charts show the last 10 minutes

  // ---------- formatting ----------
  const BIN_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

  function fmtBytes(n) {
    if (!isNum(n)) return '—';
    let i = 0;
    let v = Math.abs(n);
    while (v >= 1024 && i < BIN_UNITS.length - 1) { v /= 1024; i++; }
    const digits = i === 0 ? 0 : v >= 100 ? 0 : v >= 10 ? 1 : 2;
    return `${(Math.sign(n) * v).toFixed(digits)} ${BIN_UNITS[i]}`;
  }
  // Block sizes are powers of two: "4 MiB", "64 KiB".
  function fmtSize(n) {
    if (!isNum(n)) return '—';
    let i = 0;
    let v = n;
    while (v >= 1024 && v % 1024 === 0 && i < BIN_UNITS.length - 1) { v /= 1024; i++; }
    return `${v} ${BIN_UNITS[i]}`;
  }
  function fmtNum(n) {
    if (!isNum(n)) return '—';
    const a = Math.abs(n);
    if (a < 10) return n.toFixed(a === 0 || Number.isInteger(n) ? 0 : 1);
    if (a < 1000) return n.toFixed(0);
    for (const [d, s] of [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) {
      if (a >= d) { const v = n / d; return `${v.toFixed(Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2)}${s}`; }
    }
    return String(n);
  }
  function fmtMs(ms) {
    if (!isNum(ms)) return '—';
    if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
    if (ms >= 100) return `${ms.toFixed(0)} ms`;
    if (ms >= 10) return `${ms.toFixed(1)} ms`;
    return `${ms.toFixed(2)} ms`;
  }
  function fmtDuration(s) {
    if (!isNum(s) || s < 0) return '—';
    s = Math.floor(s);
    const d = Math.floor(s / 86400);
    const h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    const sec = s % 60;
    const p2 = (x) => String(x).padStart(2, '0');
    if (d > 0) return `${d}d ${p2(h)}h ${p2(m)}m`;
    if (h > 0) return `${h}h ${p2(m)}m ${p2(sec)}s`;
    if (m > 0) return `${m}m ${p2(sec)}s`;
    return `${sec}s`;
  }
  const fmtClock = (ms, withSeconds = true) => new Date(ms).toLocaleTimeString([], {
    hour: '2-digit', minute: '2-digit', second: withSeconds ? '2-digit' : undefined, hour12: false,
  });

  // ---------- DOM helpers ----------
  const $ = (id) => document.getElementById(id);
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = v;
        else if (k === 'style') e.style.cssText = v;
        else e.setAttribute(k, v);
      }
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  function setText(id, text, title) {
    const e = $(id);
    if (e.textContent !== text) e.textContent = text;
    if (title !== undefined) e.title = title;
  }
  function badge(text, cls) { return el('span', { class: `badge ${cls}`, text }); }

  const STATE_CLASS = {
    healthy: 'ok', degraded: 'warn', failed: 'bad',
    up: 'ok', down: 'bad', unknown: 'unknown', recovering: 'warn', stopped: 'unknown',
    ready: 'subtle', suspended: 'warn',
  };
  const stateClass = (s) => STATE_CLASS[s] || 'unknown';

  // ---------- connection state ----------
  const failing = { overview: null, history: null };
  let lastAnswer = 0;
  function noteResult(which, err) {
    failing[which] = err ? String(err.message || err) : null;
    if (!err) lastAnswer = Date.now();
    renderBanner();
  }
  function renderBanner() {
    const err = failing.history || failing.overview;
    const banner = $('conn-banner');
    document.body.classList.toggle('stale', !!err);
    if (!err) { banner.hidden = true; return; }
    const http = /HTTP \d+/.exec(err);
    const since = lastAnswer ? ` · last answer ${fmtDuration((Date.now() - lastAnswer) / 1000)} ago` : '';
    setText('conn-text', http
      ? `Server error (${http[0]}) — retrying…${since}`
      : `Connection to ${location.host} lost — retrying…${since}`);
    banner.hidden = false;
  }

  async function getJSON(path) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), FETCH_TIMEOUT_MS);
    try {
      const r = await fetch(path, { cache: 'no-store', signal: ctl.signal });
      if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
      return await r.json();
    } catch (e) {
      if (e.name === 'AbortError') throw new Error(`${path}: no answer in ${FETCH_TIMEOUT_MS} ms`);
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  // ---------- charts ----------
  const AXIS_STROKE = '#8b97a7';
  const GRID_STROKE = 'rgba(255,255,255,0.07)';
  const CHARTS = {
    throughput: {
      kind: 'bytes',
      series: [
        { key: 'read_bytes_per_s', label: 'Read', color: '#4fa3ff', fill: 'rgba(79,163,255,0.12)' },
        { key: 'write_bytes_per_s', label: 'Write', color: '#f59e4c', fill: 'rgba(245,158,76,0.10)' },
        { key: 'nsd_read_bytes_per_s', label: 'NSD read', color: '#9fd0ff', dash: [5, 4] },
        { key: 'nsd_write_bytes_per_s', label: 'NSD write', color: '#ffcf9e', dash: [5, 4] },
      ],
    },
    iops: {
      kind: 'ops',
      series: [
        { key: 'read_ops_per_s', label: 'Read', color: '#4fa3ff', fill: 'rgba(79,163,255,0.10)' },
        { key: 'write_ops_per_s', label: 'Write', color: '#f59e4c', fill: 'rgba(245,158,76,0.08)' },
        { key: 'meta_ops_per_s', label: 'Metadata', color: '#b48cff' },
      ],
    },
    latency: {
      kind: 'ms',
      series: [
        { key: 'latency_ms', label: 'File system', color: '#2dd4bf', fill: 'rgba(45,212,191,0.10)' },
        { key: 'nsd_latency_ms', label: 'NSD', color: '#f472b6', dash: [5, 4] },
      ],
    },
  };

  // A round upper bound for the y axis, so that ticks land on round numbers.
  function niceMax(max) {
    if (!(max > 0)) return 1;
    const exp = Math.pow(10, Math.floor(Math.log10(max)));
    for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * exp >= max * 1.05) return m * exp;
    return 10 * exp;
  }
  const axisNum = (v) => (Math.abs(v) >= 1000 ? fmtNum(v) : String(+v.toFixed(3)));

  // The unit a throughput chart is drawn in, picked from the largest value shown.
  function byteUnit(max) {
    let i = 0;
    let v = max;
    while (v >= 1024 && i < BIN_UNITS.length - 1) { v /= 1024; i++; }
    return { div: Math.pow(1024, i), label: `${BIN_UNITS[i]}/s` };
  }

  const charts = {};
  let xMax = Date.now() / 1000;
  let lastSamples = [];

  function makeChart(name) {
    const def = CHARTS[name];
    const box = $(`chart-${name}`);
    const legend = $(`legend-${name}`);
    def.values = def.series.map((s) => {
      const val = el('span', { class: 'val', text: '—' });
      legend.append(el('span', { class: 'item' },
        el('span', { class: `swatch${s.dash ? ' dash' : ''}`, style: `border-top-color:${s.color}` }),
        el('span', { text: s.label }), val));
      return val;
    });
    def.empty = el('div', { class: 'empty', text: 'waiting for data…' });
    def.empty.style.zIndex = '1';
    box.append(def.empty);
    def.unit = { div: 1, label: def.kind === 'bytes' ? 'B/s' : def.kind === 'ops' ? 'ops/s' : 'ms' };
    const axis = {
      stroke: AXIS_STROKE,
      font: '11px system-ui, sans-serif',
      grid: { stroke: GRID_STROKE, width: 1 },
      ticks: { stroke: GRID_STROKE, width: 1, size: 4 },
    };
    const opts = {
      width: Math.max(box.clientWidth, 100),
      height: Math.max(box.clientHeight, 100),
      padding: [10, 18, 0, 0],
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { size: 7, width: 2 } },
      scales: {
        x: { time: true, range: () => [xMax - WINDOW_S, xMax] },
        y: { range: (u, min, max) => [0, niceMax(max)] },
      },
      axes: [
        {
          ...axis,
          space: 70,
          size: 34,
          incrs: [15, 30, 60, 120, 300, 600],
          values: (u, splits) => {
            const whole = splits.every((v) => v % 60 === 0);
            return splits.map((v) => fmtClock(v * 1000, !whole));
          },
        },
        { ...axis, size: 48, values: (u, splits) => splits.map(axisNum) },
      ],
      series: [{}].concat(def.series.map((s) => ({
        label: s.label,
        stroke: s.color,
        width: 1.6,
        dash: s.dash,
        fill: s.fill,
        points: { show: false },
      }))),
      hooks: { setCursor: [(u) => renderLegend(name, u.cursor.idx)] },
    };
    const data = [[]].concat(def.series.map(() => []));
    const u = new uPlot(opts, data, box);
    charts[name] = u;
    let pending = false;
    new ResizeObserver(() => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        const w = Math.floor(box.clientWidth);
        const h = Math.floor(box.clientHeight);
        if (w > 0 && h > 0 && (w !== u.width || h !== u.height)) u.setSize({ width: w, height: h });
      });
    }).observe(box);
  }

  function fmtSeriesValue(def, v) {
    if (!isNum(v)) return '—';
    if (def.kind === 'bytes') return `${fmtBytes(v)}/s`;
    if (def.kind === 'ops') return `${fmtNum(v)}/s`;
    return fmtMs(v);
  }

  // Legend values: the sample under the cursor, else the newest one.
  function renderLegend(name, idx) {
    const def = CHARTS[name];
    const i = idx !== null && idx !== undefined && idx >= 0 ? idx : lastSamples.length - 1;
    const s = lastSamples[i];
    def.series.forEach((ser, k) => {
      const text = s ? fmtSeriesValue(def, s[ser.key]) : '—';
      if (def.values[k].textContent !== text) def.values[k].textContent = text;
    });
  }

  function renderHistory(h) {
    const samples = Array.isArray(h && h.samples) ? h.samples.filter((s) => s && isNum(s.t)) : [];
    lastSamples = samples;
    xMax = samples.length ? samples[samples.length - 1].t / 1000 : Date.now() / 1000;
    const xs = samples.map((s) => s.t / 1000);
    for (const [name, def] of Object.entries(CHARTS)) {
      let max = 0;
      let points = 0;
      const cols = def.series.map(() => []);
      for (const s of samples) {
        let any = false;
        def.series.forEach((ser, k) => {
          const v = isNum(s[ser.key]) ? s[ser.key] : null;
          cols[k].push(v);
          if (v !== null && v !== 0) any = true;
          if (v !== null && v > max) max = v;
        });
        if (any) points++;
      }
      if (def.kind === 'bytes') {
        def.unit = byteUnit(max);
        if (def.unit.div !== 1) for (const c of cols) for (let i = 0; i < c.length; i++) if (c[i] !== null) c[i] /= def.unit.div;
      }
      setText(`unit-${name}`, def.unit.label);
      const box = $(`chart-${name}`);
      box.dataset.points = String(points);
      def.empty.hidden = points > 0;
      def.empty.textContent = samples.length ? 'no activity in the last 10 minutes' : 'waiting for data…';
      charts[name].setData([xs].concat(cols));
      renderLegend(name, charts[name].cursor.idx);
    }
    renderKpis(samples[samples.length - 1]);
    if (samples.length) setText('updated', fmtClock(samples[samples.length - 1].t));
  }

  function renderKpis(s) {
    const kpi = (id, main, small) => {
      const e = $(id);
      const text = main + (small ? ` ${small}` : '');
      if (e.textContent === text) return;
      e.replaceChildren(main, small ? el('small', { text: small }) : '');
    };
    const split = (str) => { const i = str.lastIndexOf(' '); return i < 0 ? [str, ''] : [str.slice(0, i), str.slice(i + 1)]; };
    if (!s) { for (const id of ['kpi-read', 'kpi-write', 'kpi-ops', 'kpi-latency']) kpi(id, '—'); return; }
    const [r, ru] = split(fmtBytes(s.read_bytes_per_s));
    kpi('kpi-read', r, isNum(s.read_bytes_per_s) ? `${ru}/s` : '');
    const [w, wu] = split(fmtBytes(s.write_bytes_per_s));
    kpi('kpi-write', w, isNum(s.write_bytes_per_s) ? `${wu}/s` : '');
    kpi('kpi-ops', fmtNum(s.ops_per_s), isNum(s.ops_per_s) ? 'ops/s' : '');
    const [l, lu] = split(fmtMs(s.latency_ms));
    kpi('kpi-latency', l, lu);
  }

  // ---------- overview ----------
  function capacityCell(cap, free) {
    const td = el('td', { class: 'cap-col' });
    if (!isNum(cap) || !isNum(free) || cap <= 0) {
      td.append(el('div', { class: 'bar unknown' }),
        el('div', { class: 'bar-text' }, el('span', { text: 'unknown — no answer' }), el('span', { text: '' })));
      return td;
    }
    const used = Math.max(0, cap - free);
    const pct = (100 * used) / cap;
    const cls = pct >= 90 ? 'bad' : pct >= 75 ? 'warn' : '';
    td.append(
      el('div', { class: `bar ${cls}`, title: `${pct.toFixed(1)}% used` }, el('span', { style: `width:${Math.min(100, pct).toFixed(2)}%` })),
      el('div', { class: 'bar-text' },
        el('span', null, el('b', { text: fmtBytes(used) }), ` used of ${fmtBytes(cap)}`),
        el('span', null, `${fmtBytes(free)} free · `, el('b', { text: `${pct.toFixed(pct < 10 ? 1 : 0)}%` }))),
    );
    return td;
  }

  function fillTable(id, rows, cols, emptyText) {
    const tbody = document.querySelector(`#${id} tbody`);
    if (!rows.length) {
      tbody.replaceChildren(el('tr', { class: 'placeholder' }, el('td', { colspan: String(cols), text: emptyText })));
      return;
    }
    tbody.replaceChildren(...rows);
  }

  let uptimeBase = null; // [uptime_s, Date.now() when it was read]
  function renderUptime() {
    if (!uptimeBase) return;
    setText('node-uptime', fmtDuration(uptimeBase[0] + (Date.now() - uptimeBase[1]) / 1000));
  }

  const SEVERITY = { failed: 2, degraded: 1, healthy: 0 };
  function renderOverview(o) {
    const cluster = o.cluster || {};
    const node = o.node || {};
    setText('cluster-name', cluster.name || '—');
    setText('cluster-id', cluster.id ? `id ${cluster.id}` : '—', cluster.id || '');
    document.title = `Weft · ${cluster.name || 'cluster'} · ${node.name || ''}`;
    setText('node-name', node.name || '—');
    setText('node-addr', node.addr || '');
    setText('node-version', node.version || '—');
    uptimeBase = isNum(node.uptime_s) ? [node.uptime_s, Date.now()] : null;
    if (!uptimeBase) setText('node-uptime', '—');
    renderUptime();

    const fss = Array.isArray(o.filesystems) ? o.filesystems : [];
    fillTable('filesystems', fss.map((f) => el('tr', { 'data-name': f.name },
      el('td', { class: 'name', text: f.name }),
      el('td', { class: 'r', text: fmtSize(f.block_size) }),
      el('td', { class: 'r', text: isNum(f.max_replicas) ? `${f.replicas} of max ${f.max_replicas}` : String(f.replicas ?? '—') }),
      el('td', { class: 'r', text: String(f.nsds ?? '—') }),
      capacityCell(f.capacity_bytes, f.free_bytes))), 5, 'no file systems');
    setText('count-filesystems', `${fss.length}`);

    const nodes = Array.isArray(o.nodes) ? o.nodes : [];
    fillTable('nodes', nodes.map((n) => el('tr', { 'data-name': n.name, 'data-state': n.state },
      el('td', { class: 'name', text: n.name }),
      el('td', { class: 'mono muted', text: n.addr || '—' }),
      el('td', { class: 'roles' }, ...(Array.isArray(n.roles) ? n.roles : []).map((r) => el('span', { class: 'chip', text: r }))),
      el('td', null, badge(n.state || 'unknown', stateClass(n.state))))), 4, 'no nodes');
    const nodesUp = nodes.filter((n) => n.state === 'up').length;
    setText('count-nodes', `${nodesUp} of ${nodes.length} up`);

    const nsds = Array.isArray(o.nsds) ? o.nsds : [];
    fillTable('nsds', nsds.map((d) => el('tr', { 'data-name': d.name, 'data-status': d.status },
      el('td', { class: 'name', text: d.name }),
      el('td', { text: d.node || '—' }),
      el('td', { text: d.fs || '—' }),
      el('td', { text: d.pool || '—', title: d.usage || '' }),
      el('td', { class: 'r', text: String(d.failure_group ?? '—') }),
      el('td', null, badge(d.status || 'unknown', stateClass(d.status)), ' ',
        badge(d.availability || 'unknown', stateClass(d.availability))),
      capacityCell(d.capacity_bytes, d.free_bytes))), 7, 'no NSDs');
    const nsdsUp = nsds.filter((d) => d.status === 'up').length;
    setText('count-nsds', `${nsdsUp} of ${nsds.length} up`);

    // KPI tiles from the overview
    let cap = 0; let free = 0;
    for (const f of fss) if (isNum(f.capacity_bytes) && isNum(f.free_bytes)) { cap += f.capacity_bytes; free += f.free_bytes; }
    const capEl = $('kpi-capacity');
    if (cap > 0) {
      const pct = (100 * (cap - free)) / cap;
      capEl.replaceChildren(`${pct.toFixed(pct < 10 ? 1 : 0)}%`, el('small', { text: `of ${fmtBytes(cap)}` }));
      capEl.className = `kpi-value ${pct >= 90 ? 'bad' : pct >= 75 ? 'warn' : ''}`;
    } else capEl.textContent = '—';
    const freeEl = $('kpi-free');
    if (cap > 0) {
      const [fv, fu] = fmtBytes(free).split(' ');
      freeEl.replaceChildren(fv, el('small', { text: fu }));
    } else freeEl.textContent = '—';
    const ratio = (id, up, all) => {
      const e = $(id);
      e.replaceChildren(String(up), el('small', { text: `/ ${all}` }));
      e.className = `kpi-value ${all === 0 ? '' : up === all ? 'ok' : up === 0 ? 'bad' : 'warn'}`;
    };
    ratio('kpi-nodes', nodesUp, nodes.length);
    ratio('kpi-nsds', nsdsUp, nsds.length);

    // Health: the findings that are not healthy, worst first.
    const findings = (Array.isArray(o.health) ? o.health : []).filter((f) => f && f.state !== 'healthy');
    findings.sort((a, b) => (SEVERITY[b.state] ?? 1) - (SEVERITY[a.state] ?? 1));
    const list = $('health');
    if (!findings.length) {
      list.replaceChildren(el('li', { class: 'all-ok', text: 'All healthy' }));
    } else {
      list.replaceChildren(...findings.map((f) => el('li', { 'data-state': f.state },
        el('div', { class: 'what' }, badge(f.state || 'unknown', stateClass(f.state)),
          el('span', { text: f.name || '' }), el('span', { class: 'kind', text: f.kind || '' })),
        f.reason ? el('div', { class: 'reason', text: f.reason }) : null,
        f.action ? el('div', { class: 'action', text: f.action }) : null)));
    }
    setText('count-health', findings.length ? `${findings.length} finding${findings.length > 1 ? 's' : ''}` : '');
    const worst = findings.reduce((w, f) => Math.max(w, SEVERITY[f.state] ?? 1), 0);
    const hb = $('health-badge');
    const [label, cls] = worst >= 2 ? ['failed', 'bad'] : worst === 1 ? ['degraded', 'warn'] : ['healthy', 'ok'];
    hb.textContent = label;
    hb.className = `badge big ${cls}`;
  }

  // ---------- polling ----------
  const loaded = { overview: false, history: false };
  function markLoaded(which) {
    loaded[which] = true;
    if (loaded.overview && loaded.history) document.body.dataset.ready = '1';
  }

  function poll(which, path, period, render) {
    const run = async () => {
      const t0 = performance.now();
      try {
        const data = await getJSON(path);
        render(data);
        noteResult(which, null);
        markLoaded(which);
      } catch (e) {
        noteResult(which, e);
      }
      setTimeout(run, Math.max(50, period - (performance.now() - t0)));
    };
    run();
  }

  function start() {
    for (const name of Object.keys(CHARTS)) makeChart(name);
    poll('history', '/api/history', HISTORY_PERIOD_MS, renderHistory);
    poll('overview', '/api/overview', OVERVIEW_PERIOD_MS, renderOverview);
    setInterval(() => { renderUptime(); if (!$('conn-banner').hidden) renderBanner(); }, 1000);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
