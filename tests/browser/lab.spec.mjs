// lab.spec.mjs -- the lock lab's page in a real browser: Debian's chromium,
// driven by playwright-core (no test framework), against the stack that
// tests/browser_lab.sh starts: redis-server, two inventoryd instances and
// nginx, on free ports. Run it through that script (ctest "browser: ...").
//
// Environment (set by the script):
//   LAB_BASE     nginx, in front of both instances: the page under test
//   LAB_OFF      one instance started with lab.enabled=false
//   LAB_SHOTS    where each check saves its screenshot (results/ of the checkout)
//   LAB_CHROMIUM the browser (/usr/bin/chromium)
//   LAB_TOKEN_BASE, LAB_TOKEN  an instance with admin.token=LAB_TOKEN and runs
//                on (optional: without them the token check is skipped)
//
// Each check is named by a sentence, prints "ok" or "not ok" with its time,
// and saves results/lab-<name>.png. The first failure saves a screenshot
// ending in -FAILED.png, prints what the page logged, and exits 1.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const base = process.env.LAB_BASE;
const off = process.env.LAB_OFF;
const shots = process.env.LAB_SHOTS || 'results';
const exe = process.env.LAB_CHROMIUM || '/usr/bin/chromium';
const tokenBase = process.env.LAB_TOKEN_BASE, token = process.env.LAB_TOKEN;
if (!base || !off) {
  console.error('lab.spec: LAB_BASE and LAB_OFF must be set (run tests/browser_lab.sh)');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const origin = new URL(base).origin;

const browser = await chromium.launch({
  executablePath: exe,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
const page = await context.newPage();
const errors = [], outside = [], log = [];
page.on('console', (m) => {
  log.push(`${m.type()}: ${m.text()}`);
  if (m.type() === 'error') errors.push(m.text());
});
page.on('pageerror', (e) => { log.push(`pageerror: ${e.message}`); errors.push(e.message); });
page.on('request', (r) => {
  const u = new URL(r.url());
  if (u.origin !== origin) outside.push(r.url());
});

let current = page;
async function check(name, sentence, fn) {
  const t0 = Date.now();
  try {
    await fn();
    await current.screenshot({ path: `${shots}/lab-${name}.png`, fullPage: false });
    console.log(`ok - ${sentence} (${((Date.now() - t0) / 1000).toFixed(1)} s, results/lab-${name}.png)`);
  } catch (e) {
    console.log(`not ok - ${sentence}: ${e.message}`);
    try { await current.screenshot({ path: `${shots}/lab-${name}-FAILED.png`, fullPage: true }); } catch (_) { /* gone */ }
    console.log('---- what the page logged:\n' + log.slice(-40).join('\n'));
    await browser.close();
    process.exit(1);
  }
}
function assert(cond, what) { if (!cond) throw new Error(what); }
const text = async (sel) => (await page.locator(sel).innerText()).trim();
const int = async (sel) => Number((await text(sel)).replace(/,/g, ''));
const api = (path, init) => page.evaluate(async ([p, i]) => {
  const r = await fetch(p, i);
  return { status: r.status, body: await r.json() };
}, [path, init || {}]);

/* Starts a run with click() and waits until that run (a new id in
 * #run-status) has finished; it must have finished "done". */
async function runFinished(click, timeout) {
  const before = await page.getAttribute('#run-status', 'data-run');
  await click();
  await page.waitForFunction((prev) => {
    const st = document.getElementById('run-status');
    return st.dataset.run && st.dataset.run !== prev && st.dataset.state !== 'running';
  }, before, { timeout });
  const state = await page.getAttribute('#run-status', 'data-state');
  assert(state === 'done', `the run ended ${state}: ${await text('#run-status')}`);
}

/* Waits until the timeline has drawn n holds. */
async function holdsDrawn(n, timeout = 8000) {
  await page.waitForFunction((k) => document.querySelectorAll('#timeline rect.hold').length >= k, n, { timeout });
}

await check('page', 'the page loads with no console error and no request outside the origin', async () => {
  const resp = await page.goto(base + '/');
  assert(resp.status() === 200, `GET / answered ${resp.status()}`);
  const csp = resp.headers()['content-security-policy'];
  assert(csp === "default-src 'self'", `Content-Security-Policy is ${csp}`);
  await page.waitForSelector('#cards .card', { state: 'attached' });
  await page.waitForFunction(() => !document.getElementById('conn').textContent.startsWith('Connecting'));
  await page.waitForTimeout(1500);   // a few polls of history and audit
  assert(errors.length === 0, 'console errors: ' + errors.join(' | '));
  assert(outside.length === 0, 'requests outside the origin: ' + outside.join(' '));
});

await check('compare-demo', 'opened beside a results/demo.csv, the page shows its rows, bars and the safety matrix', async () => {
  // No run yet and a demo.csv beside the instance: the page opens on Compare.
  assert(await page.isVisible('#view-compare'), 'the compare view is not shown first');
  const rows = await page.locator('#compare tbody tr').count();
  assert(rows === 3, `${rows} rows in the compare table, demo.csv has 3`);
  const none = page.locator('#compare tbody tr[data-strategy="none"]');
  assert((await none.innerText()).includes('OVERSOLD'), 'none is not marked OVERSOLD');
  assert(await page.locator('#chart-oversold rect.bar-over').count() === 1, 'not one oversold bar');
  assert(await page.locator('#matrix-table tbody tr').count() === 2, 'the matrix does not have a row per strategy');
  assert(await page.locator('#matrix-table thead th').count() === 3, 'the matrix does not have a column per fault');
  assert((await page.locator('#matrix-table tbody tr').first().innerText()).includes('unsafe'), 'expiring under pause is not unsafe');
});

await check('campaigns', 'the Campaigns view shows results/campaign.csv with its intervals and the shrunk counterexample on a timeline', async () => {
  await page.click('#tab-campaigns');
  assert(await page.isVisible('#view-campaigns'), 'the campaigns view is not shown');
  assert(await page.locator('#campaign-table tbody tr').count() === 3, 'not a row per cell of campaign.csv');
  const first = await page.locator('#campaign-table tbody tr').first().innerText();
  assert(first.includes('11 of 30') && first.includes('37% (22%') && first.includes('54%)'), 'the owner-lua row: ' + first);
  assert(await page.locator('#campaign-table svg.ci line.ci-whisker').count() === 9, 'not one interval per row');
  /* 0 of 30 with 19 covered is a clean cell; 0 of 3 with 1 covered proves
   * nothing: inconclusive, never green. */
  const cell = (i) => page.locator('#campaign-table tbody tr').nth(i).locator('td.cell');
  assert((await cell(1).getAttribute('class')).split(' ').includes('ok'), 'fenced, 0 of 30 with 19 covered, is not ok');
  const thin = await cell(2).getAttribute('class');
  assert(!thin.split(' ').includes('ok') && thin.split(' ').includes('inconclusive'), 'redisson, 0 of 3 with 1 covered, has class ' + thin);
  assert((await cell(2).innerText()).includes('inconclusive'), 'redisson, 0 of 3 with 1 covered, does not say inconclusive: ' + await cell(2).innerText());
  assert(await page.locator('#counterexample-svg rect.hold').count() === 2, 'the counterexample does not draw its two holds');
  assert(await page.locator('#counterexample-svg rect.hold.overlap').count() === 2, 'the two holds valid at once are not drawn overlapping');
  assert((await text('#counterexample')).includes('unit 99917 went to orders'), 'the counterexample does not say what went wrong');
});

await check('ladder', 'the ladder lists exactly the strategies of /strategies', async () => {
  await page.click('#tab-lab');
  const names = await page.locator('#cards .card').evaluateAll((cs) => cs.map((c) => c.dataset.strategy));
  const want = (await api('/strategies')).body.strategies.map((s) => s.name);
  assert(JSON.stringify(names) === JSON.stringify(want), `cards ${names} but /strategies has ${want}`);
  for (const s of ['expiring', 'owner-check', 'none', 'local', 'owner-lua', 'reentrant'])
    assert(await page.locator(`#card-${s} .show-flaw`).count() === 1, `${s} has no Show the flaw button`);
  /* A strategy whose store this instance has not configured says why, and offers no run
   * (tests/browser_lab.sh configures neither ZooKeeper nor MySQL). */
  const off = (await api('/strategies')).body.strategies.filter((x) => x.available === false);
  assert(off.length === 4, `${off.length} strategies unavailable, not the 4 of ZooKeeper and MySQL`);
  for (const st of off) {
    const card = page.locator(`#card-${st.name}`);
    assert((await card.innerText()).includes(`Not available here: ${st.unavailable}`), `${st.name}'s card does not say it is unavailable`);
    assert(await card.locator('button').count() === 0, `${st.name}, unavailable, offers a run`);
    assert(await page.locator(`#f-strategy option[value="${st.name}"]`).evaluate((o) => o.disabled), `${st.name} can be picked in the form`);
  }
});

/* The run's verdict box: its result word (data-result) and its text. */
async function verdictIs(result, word) {
  await page.waitForSelector(`#run-verdict[data-result="${result}"]`, { timeout: 8000 });
  const t = await text('#run-verdict');
  assert(t.startsWith(word), `the verdict reads "${t}", not ${word}`);
  assert(!t.includes('OK'), `the verdict of a scenario says OK: ${t}`);
  const bg = await page.locator('#run-verdict').evaluate((e) => getComputedStyle(e).backgroundColor);
  return bg;
}
const colours = {};

await check('expiring-slow-holder', 'the expiring slow-holder scenario draws a red overlap, the audit shown says violations >= 1, and the verdict says flaw shown', async () => {
  await runFinished(() => page.click('#card-expiring .show-flaw'), 30000);
  colours.flaw = await verdictIs('flaw_shown', '\u2717 Flaw shown: ');
  assert((await text('#run-verdict')).includes('B and C were inside together'), 'the verdict names no overlap of B and C');
  await holdsDrawn(3);
  await page.waitForFunction(() => document.querySelectorAll('#timeline rect.hold.overlap').length >= 1 &&
    Number(document.getElementById('audit-violations').textContent) >= 1, null, { timeout: 8000 });
  assert(await int('#run-audit-viol') >= 1, 'the run\'s own audit shows no violation');
  assert((await text('#timeline-summary')).includes('overlapping pair'), 'the text summary names no overlap');
  /* The red is the service's judgement (src/hold.c), not the page's: the
   * pairs the history's answer names, B with C. */
  const served = await page.evaluate(async () => (await (await fetch('/inventory/history?limit=5000&since=0')).json()).overlaps.length);
  const drawn = Number(await page.locator('#timeline-summary').getAttribute('data-overlaps'));
  assert(served >= 1 && drawn === served, `the page draws ${drawn} overlapping pair(s), the service found ${served}`);
  assert(/sale B #\d+ \(:\d+\) with sale C/.test(await text('#timeline-summary')), 'the summary does not name B with C: ' + await text('#timeline-summary'));
  await page.locator('#timeline-h').scrollIntoViewIfNeeded();
  await page.locator('section[aria-labelledby=timeline-h]').screenshot({ path: `${shots}/lab-timeline-flaw.png` });
  await page.locator('section[aria-labelledby=run-h]').screenshot({ path: `${shots}/lab-verdict-flaw.png` });
  await page.locator('#run-verdict-box').screenshot({ path: `${shots}/lab-verdict.png` });   // docs/lab-verdict.png
});

await check('keyboard', 'the tabs and the timeline work from the keyboard', async () => {
  await page.focus('#tab-lab');
  await page.keyboard.press('ArrowRight');
  assert(await page.isVisible('#view-compare'), 'ArrowRight on the tabs did not open Compare');
  await page.keyboard.press('ArrowLeft');
  assert(await page.isVisible('#view-lab') && await page.evaluate(() => document.activeElement.id) === 'tab-lab',
    'ArrowLeft did not come back to the ladder');
  await page.focus('#timeline');
  await page.keyboard.press('+');
  assert((await text('#t-state')).startsWith('Showing') && !(await text('#t-state')).includes('everything'), 'zoom in did nothing');
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('0');
  assert((await text('#t-state')).includes('everything'), 'fit did nothing');
  await page.keyboard.press('Shift+Tab');   // back to the controls, by keyboard alone
  assert(await page.evaluate(() => document.activeElement.tagName) === 'BUTTON', 'focus did not reach a control');
});

await check('owner-lua-slow-holder', 'the same scenario with owner-lua draws no overlap and the audit shows 0 violations', async () => {
  await page.selectOption('#f-strategy', 'owner-lua');
  await page.selectOption('#f-scenario', 'slow-holder');
  await runFinished(() => page.click('#f-start'), 30000);
  await holdsDrawn(3);
  await page.waitForFunction(() => document.getElementById('timeline-summary').textContent.startsWith('3 hold'), null, { timeout: 8000 });
  assert(await page.locator('#timeline rect.hold.overlap').count() === 0, 'an overlap is drawn');
  assert(await int('#audit-violations') === 0, 'the audit shows violations');
  const answers = await page.locator('#run-steps tbody tr').allInnerTexts();
  assert(answers.length === 3 && answers.every((a) => a.includes('200 sold')), 'not three sales answered 200 sold: ' + answers);
  colours.fixed = await verdictIs('fixed', '\u2713 Fixed: ');
  assert((await text('#run-verdict')).includes('C waited'), 'the verdict does not say C waited for B');
  await page.locator('section[aria-labelledby=run-h]').screenshot({ path: `${shots}/lab-verdict-fixed.png` });
  await page.locator('#timeline-h').scrollIntoViewIfNeeded();
});

await check('inconclusive', 'a scenario whose window the strategy cannot reach (setnx-spin has no lease) says inconclusive, not OK, though nothing was sold twice', async () => {
  await page.selectOption('#f-strategy', 'setnx-spin');
  await page.selectOption('#f-scenario', 'slow-holder');
  await runFinished(() => page.click('#f-start'), 30000);
  colours.inconclusive = await verdictIs('inconclusive', '? Inconclusive: ');
  assert((await text('#run-verdict')).includes('not reached'), 'the verdict does not say the window was not reached');
  assert(await int('#run-audit-twice') === 0 && await int('#run-audit-viol') === 0, 'the audit is not clean');
  const all = Object.values(colours);
  assert(all.length === 3 && new Set(all).size === 3, 'the three verdicts do not have three colours: ' + JSON.stringify(colours));
  await page.locator('section[aria-labelledby=run-h]').screenshot({ path: `${shots}/lab-verdict-inconclusive.png` });
});

await check('load-3000', 'a 3000-request run from the page finishes and its numbers match /inventory/audit', async () => {
  await page.selectOption('#f-strategy', 'redisson');
  await page.selectOption('#f-scenario', '');
  await page.fill('#f-clients', '200');
  await page.fill('#f-requests', '3000');
  await page.fill('#f-stock', '200');
  await runFinished(() => page.click('#f-start'), 90000);
  const audit = (await api('/inventory/audit')).body;
  assert(await int('#run-done') === 3000, `${await text('#run-done')} answers, not 3000`);
  assert(await int('#run-errors') === 0, `${await text('#run-errors')} requests got no answer`);
  const sold = await int('#run-sold');
  assert(sold === audit.sold, `the page says ${sold} sold, the audit's ledger has ${audit.sold}`);
  assert(sold === 200 && audit.stock === 0 && !audit.oversold, `sold ${sold}, stock ${audit.stock}, oversold ${audit.oversold}`);
  assert(await int('#run-audit-sold') === audit.sold && await int('#run-audit-stock') === audit.stock, 'the run\'s audit differs');
  await page.waitForFunction((n) => Number(document.getElementById('audit-sold').textContent.replace(/,/g, '')) === n, audit.sold, { timeout: 5000 });
  await holdsDrawn(1000, 15000);
  await page.locator('#timeline-h').scrollIntoViewIfNeeded();
});

await check('compare-runs', 'the compare view shows the load run side by side', async () => {
  await page.click('#tab-compare');
  await page.check('input[name=source][value=runs]');
  const row = page.locator('#compare tbody tr[data-strategy="redisson"]');
  assert(await row.count() === 1, 'no row for the redisson run');
  assert((await row.innerText()).includes('OK'), 'the redisson row is not OK');
  assert(errors.length === 0, 'console errors during the checks: ' + errors.join(' | '));
  assert(outside.length === 0, 'requests outside the origin during the checks: ' + outside.join(' '));
});

await check('runs-off', 'POST /lab/runs answers 404 when lab.enabled=false, and the page says runs are off', async () => {
  const r = await fetch(off + '/lab/runs', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ strategy: 'atomic', clients: 1, requests: 1 }) });
  assert(r.status === 404, `POST /lab/runs answered ${r.status}`);
  const body = await r.json();
  assert(body.status === 'not_found', `status ${body.status}`);
  current = await context.newPage();
  await current.goto(off + '/#lab');
  await current.waitForSelector('#cards .card', { state: 'attached' });
  await current.waitForFunction(() => document.getElementById('conn').textContent.includes('Runs are off'));
  assert(await current.isDisabled('#f-start'), 'Start run is not disabled');
  assert(await current.locator('.show-flaw').count() === 0, 'Show the flaw buttons are offered');
});

if (tokenBase && token) {
  await check('token', 'with admin.token set, a run from the page asks for the token, then runs; a refused token is asked for again', async () => {
    const tp = await context.newPage();
    current = tp;
    const torigin = new URL(tokenBase).origin, terr = [], tout = [];
    tp.on('console', (m) => { if (m.type() === 'error') terr.push(m.text()); });
    tp.on('pageerror', (e) => terr.push(e.message));
    tp.on('request', (r) => { if (new URL(r.url()).origin !== torigin) tout.push(r.url()); });
    const runsThere = async () => (await (await fetch(tokenBase + '/lab/runs')).json()).runs.length;
    await tp.goto(tokenBase + '/#lab');
    await tp.waitForSelector('#cards .card', { state: 'attached' });
    await tp.waitForFunction(() => document.getElementById('conn').textContent.includes('admin token'));
    await tp.selectOption('#f-strategy', 'owner-lua');
    await tp.selectOption('#f-scenario', '');
    await tp.fill('#f-clients', '5');
    await tp.fill('#f-requests', '50');
    await tp.fill('#f-stock', '20');
    await tp.click('#f-start');
    // Asked before anything is sent: no run, no 401 in the console.
    await tp.waitForSelector('#token-form:not([hidden])', { timeout: 5000 });
    assert(await tp.getAttribute('#f-token', 'type') === 'password', 'the token field is not a password field');
    assert(await tp.locator('label[for=f-token]').count() === 1, 'the token field has no label');
    assert(await tp.evaluate(() => document.activeElement.id) === 'f-token', 'the token field has no focus');
    assert(await runsThere() === 0, 'a run started before the token was given');
    await tp.fill('#f-token', token);
    await tp.click('#f-token-use');
    await tp.waitForFunction(() => {
      const st = document.getElementById('run-status');
      return st.dataset.run && st.dataset.state !== 'running';
    }, null, { timeout: 30000 });
    const state = await tp.getAttribute('#run-status', 'data-state');
    assert(state === 'done', `the run ended ${state}: ${(await tp.locator('#run-status').innerText()).trim()}`);
    const audit = await (await fetch(tokenBase + '/inventory/audit')).json();
    const sold = Number((await tp.locator('#run-sold').innerText()).replace(/,/g, ''));
    assert(sold === 20 && audit.sold === 20 && audit.initial === 20, `sold ${sold}, audit ${JSON.stringify(audit)}`);
    assert(await tp.isHidden('#token-form'), 'the token form is still shown');
    assert(await tp.evaluate(() => sessionStorage.getItem('inventoryd.admin-token')) === token, 'the token is not kept for the tab');
    assert(terr.length === 0, 'console errors: ' + terr.join(' | '));
    // A kept token the instance refuses: the 401 asks for it again, and forgets it.
    await tp.evaluate(() => sessionStorage.setItem('inventoryd.admin-token', 'not-the-token-0123456789'));
    await tp.click('#f-start');
    await tp.waitForSelector('#token-form:not([hidden])', { timeout: 5000 });
    assert((await tp.locator('#token-why').innerText()).includes('401'), 'the page does not say the token was refused');
    assert(await tp.evaluate(() => sessionStorage.getItem('inventoryd.admin-token')) === null, 'the refused token is kept');
    assert(await runsThere() === 1, 'the refused token started a run');
    // The browser itself reports the 401 it was answered; nothing else.
    const other = terr.filter((t) => !/status of 401/.test(t));
    assert(other.length === 0, 'console errors: ' + other.join(' | '));
    assert(tout.length === 0, 'requests outside the origin: ' + tout.join(' '));
  });
}

await browser.close();
console.log('lab.spec: every check passed');
