// Headless-Chromium check of the weft web dashboard.
//
//   node tests/browser/dashboard.mjs URL SCREENSHOT.png [--timeout-s 60] [--viewport 1440x900]
//
// Uses Debian's chromium (/usr/bin/chromium, or $CHROMIUM) through playwright-core, which
// downloads no browser. Opens URL, waits until the page has loaded its first overview and
// history (body[data-ready=1]), shows at least one node and one NSD, and every chart has
// live data (data-points >= 1) drawn on a non-empty canvas; then saves a full-page
// screenshot and exits 0. Any console error, page error, failed request, HTTP error
// response or timeout prints what failed, still saves a screenshot when it can, and
// exits 1.
import { chromium } from 'playwright-core';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CHARTS = ['throughput', 'iops', 'latency'];

function usage(msg) {
  if (msg) console.error(`dashboard: ${msg}`);
  console.error('usage: node tests/browser/dashboard.mjs URL SCREENSHOT.png [--timeout-s 60] [--viewport 1440x900]');
  process.exit(2);
}

const positional = [];
let timeoutS = 60;
let viewport = { width: 1440, height: 900 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--timeout-s') {
    timeoutS = Number(argv[++i]);
    if (!(timeoutS > 0)) usage('--timeout-s needs a positive number of seconds');
  } else if (a.startsWith('--timeout-s=')) {
    timeoutS = Number(a.slice('--timeout-s='.length));
    if (!(timeoutS > 0)) usage('--timeout-s needs a positive number of seconds');
  } else if (a === '--viewport') {
    const m = /^(\d+)x(\d+)$/.exec(argv[++i] || '');
    if (!m) usage('--viewport needs WIDTHxHEIGHT, e.g. 1440x900');
    viewport = { width: Number(m[1]), height: Number(m[2]) };
  } else if (a === '-h' || a === '--help') {
    usage();
  } else if (a.startsWith('--')) {
    usage(`unknown option ${a}`);
  } else {
    positional.push(a);
  }
}
if (positional.length !== 2) usage('needs URL and SCREENSHOT.png');
const [url, screenshotPath] = positional;

// A last resort: never hang past the timeout, even if the browser does not close.
const watchdog = setTimeout(() => {
  console.error(`dashboard: FAIL: still running ${timeoutS + 30} s after start — giving up`);
  process.exit(1);
}, (timeoutS + 30) * 1000);
watchdog.unref();

const problems = [];
const note = (what) => {
  problems.push(what);
  console.error(`dashboard: ${what}`);
};

const userDataDir = await mkdtemp(join(tmpdir(), 'weft-dash-chromium-'));
let context;
let page;
let ok = false;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
    viewport,
    timeout: 30_000,
  });
  page = context.pages()[0] || (await context.newPage());
  page.on('console', (m) => {
    if (m.type() === 'error') {
      const loc = m.location();
      note(`console error: ${m.text()}${loc && loc.url ? ` (${loc.url}:${loc.lineNumber})` : ''}`);
    }
  });
  page.on('pageerror', (e) => note(`page error: ${e.message}`));
  page.on('requestfailed', (r) => note(`request failed: ${r.method()} ${r.url()}: ${r.failure()?.errorText ?? '?'}`));
  page.on('response', (r) => {
    if (r.status() >= 400) note(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
  });

  const deadline = Date.now() + timeoutS * 1000;
  await page.goto(url, { waitUntil: 'load', timeout: timeoutS * 1000 });

  // Poll the page's state until it is complete, a problem shows up, or time runs out.
  let state;
  for (;;) {
    state = await page.evaluate((charts) => {
      const points = {};
      for (const c of charts) {
        const e = document.getElementById(`chart-${c}`);
        points[c] = e ? Number(e.dataset.points || 0) : null;
      }
      return {
        ready: document.body.dataset.ready === '1',
        nodes: document.querySelectorAll('#nodes tbody tr:not(.placeholder)').length,
        nsds: document.querySelectorAll('#nsds tbody tr:not(.placeholder)').length,
        filesystems: document.querySelectorAll('#filesystems tbody tr:not(.placeholder)').length,
        points,
        banner: (() => { const b = document.getElementById('conn-banner'); return b && !b.hidden ? b.textContent.trim() : null; })(),
      };
    }, CHARTS);
    const missing = [];
    if (!state.ready) missing.push('body[data-ready="1"] not set (first overview and history not loaded)');
    if (state.nodes < 1) missing.push('no row in #nodes tbody');
    if (state.nsds < 1) missing.push('no row in #nsds tbody');
    for (const c of CHARTS) {
      if (state.points[c] === null) missing.push(`#chart-${c} is missing`);
      else if (!(state.points[c] >= 1)) missing.push(`#chart-${c} has no live data (data-points=${state.points[c]})`);
    }
    if (problems.length) break;
    if (!missing.length) break;
    if (Date.now() > deadline) {
      note(`timed out after ${timeoutS} s waiting for: ${missing.join('; ')}`);
      if (state.banner) note(`the page shows: ${state.banner}`);
      break;
    }
    await page.waitForTimeout(250);
  }

  if (!problems.length) {
    // Each chart must have drawn something on a canvas of a non-zero size.
    for (const c of CHARTS) {
      const canvas = await page.$(`#chart-${c} canvas`);
      const box = canvas && (await canvas.boundingBox());
      if (!box || !(box.width > 0 && box.height > 0)) {
        note(`#chart-${c} has no rendered canvas of a non-zero size`);
        continue;
      }
      const painted = await canvas.evaluate((cv) => {
        const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
        let n = 0;
        for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
        return n;
      });
      if (painted === 0) note(`#chart-${c} canvas is blank`);
    }
  }

  await page.waitForTimeout(300); // let the last frame paint before the picture
  if (!problems.length) ok = true;
  console.log(`dashboard: ${ok ? 'page ok' : 'page FAIL'}: ${state.nodes} nodes, ${state.nsds} NSDs, ${state.filesystems} file systems; ` +
    `points ${CHARTS.map((c) => `${c}=${state.points[c]}`).join(' ')}`);
} catch (e) {
  note(`${e.name || 'error'}: ${String(e.message || e).split('\n')[0]}`);
} finally {
  if (page) {
    try {
      await page.screenshot({ path: screenshotPath, fullPage: true, timeout: 15_000 });
      console.log(`dashboard: screenshot ${screenshotPath}`);
    } catch (e) {
      note(`could not save a screenshot: ${String(e.message || e).split('\n')[0]}`);
    }
  }
  if (context) await context.close().catch(() => {});
  await rm(userDataDir, { recursive: true, force: true }).catch(() => {});
}
if (!ok || problems.length) {
  console.error(`dashboard: FAIL (${problems.length} problem${problems.length === 1 ? '' : 's'})`);
  process.exit(1);
}
console.log('dashboard: PASS');
process.exit(0);
