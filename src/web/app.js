/* app.js -- the lock lab's page: plain JavaScript, no library, no build step.
 *
 * It reads GET /strategies (the ladder), GET /lab (are runs on, and where
 * they go), GET /lab/scenarios, and follows GET /inventory/history and
 * GET /inventory/audit: every 250 ms while a run is going or holds keep
 * arriving, every second otherwise. Runs start with POST /lab/runs and are
 * followed with GET /lab/runs/{id}. Everything it draws is also written as
 * text or in a table. It talks only to the origin that served it.
 *
 * On an instance with admin.token set (GET /lab says "token_required"),
 * POST /lab/runs needs "Authorization: Bearer <token>": the page asks for
 * the token in a password field before the first run, and again whenever
 * a run is answered 401; it keeps it in sessionStorage (this tab only, gone
 * when the tab closes) and sends it with POST /lab/runs alone. */
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const SVGNS = 'http://www.w3.org/2000/svg';
  const FAST_MS = 250, SLOW_MS = 1000, PAGE = 5000, KEEP = 20000;
  const TOKEN_KEY = 'inventoryd.admin-token';

  /* Why a step has no scenario in the lab. */
  const NO_SCENARIO = {
    'setnx-spin': 'its flaw needs a holder to die inside the lock (crash=1 ends the instance); README has the curl recipe.',
    watchdog: 'its flaw needs a Redis failover before replication; tests/check_redlock.c replays it.',
    redisson: 'its flaw needs a Redis failover before replication; tests/check_redlock.c replays it.',
    redlock: 'its flaw needs clock drift or a pause longer than the lock\u2019s validity.',
    batched: 'no known flaw: it keeps every guarantee of redisson.',
    atomic: 'no lock and no flaw for this workload: the reference ceiling.',
    'zookeeper-fenced': 'it fixes zookeeper\u2019s flaw: run session-lost with zookeeper, then the same scenario with zookeeper-fenced.',
  };

  const S = {
    strategies: [], def: '', lab: null, scenarios: [], ttl: 0, runs: [],
    run: null, active: false, awaitReset: false,
    events: [], overlaps: new Map(), since: '0', audit: null, lastNew: 0,
    paused: false, follow: true, win: null, dirty: true,
    demo: null, matrix: null, source: 'runs', timer: 0, pending: null,
    campaign: null, counterexample: null,
  };

  /* ---- small helpers ------------------------------------------------------ */

  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  function s(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) e.setAttribute(k, v);
    for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  const num = (v, d = 0) => (v === null || v === undefined || v === '' || isNaN(+v)) ? '\u2013'
    : (+v).toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: 0 });
  function dur(us) {
    const ms = us / 1000;
    if (Math.abs(ms) < 1) return ms.toFixed(2) + ' ms';
    if (Math.abs(ms) < 1000) return Math.round(ms) + ' ms';
    return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  }

  /* The admin token kept for this tab, or '' (sessionStorage may be refused). */
  function storedToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }
  function storeToken(t) {
    try {
      if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) { /* not kept: asked again next time */ }
  }

  /* auth: send the admin token, when one is kept, as the Bearer header. */
  async function api(method, path, body, auth) {
    const opt = { method, cache: 'no-store', headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      opt.body = JSON.stringify(body);
      opt.headers['Content-Type'] = 'application/json';
    }
    if (auth && storedToken()) opt.headers.Authorization = 'Bearer ' + storedToken();
    const r = await fetch(path, opt);
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch (e) { json = null; }
    return { status: r.status, json, text };
  }

  function notice(text, bad) {
    const n = $('notice');
    n.hidden = !text;
    n.textContent = text || '';
    n.className = 'notice' + (bad ? ' bad' : '');
  }

  /* ---- start-up ------------------------------------------------------------ */

  async function boot() {
    setupTabs();
    setupControls();
    setupForm();
    try {
      const st = await api('GET', '/strategies');
      S.strategies = st.json.strategies;
      S.def = st.json.default;
      const lab = await api('GET', '/lab');
      S.lab = lab.json || { enabled: false };
      if (S.lab.enabled) {
        const sc = await api('GET', '/lab/scenarios');
        S.scenarios = sc.json.scenarios;
        S.ttl = sc.json.ttl_ms;
        const runs = await api('GET', '/lab/runs');
        S.runs = runs.json.runs;
        if (runs.json.running) {
          S.run = S.runs.find((r) => r.id === runs.json.running) || null;
          S.active = !!S.run;
        }
        await loadResults();
      }
    } catch (e) {
      $('conn').textContent = 'Cannot reach the service: ' + e.message;
      $('conn').className = 'conn off';
      return;
    }
    renderConn();
    renderCards();
    fillForm();
    renderRun();
    renderCompare();
    const hash = location.hash.replace('#', '');
    const fresh = !S.runs.some((r) => !r.scenario);
    if (fresh && S.demo) S.source = 'demo';
    selectTab(hash === 'campaigns' ? 'campaigns'
      : hash === 'compare' || (hash !== 'lab' && fresh && S.demo) ? 'compare' : 'lab', false);
    tick();
  }

  async function loadResults() {
    const res = S.lab.results || {};
    if (res['demo.csv']) {
      const r = await api('GET', '/lab/results/demo.csv');
      if (r.status === 200) S.demo = parseCsv(r.text);
    }
    if (res['matrix.csv']) {
      const r = await api('GET', '/lab/results/matrix.csv');
      if (r.status === 200) S.matrix = parseCsv(r.text);
    }
    if (res['campaign.csv']) {
      const r = await api('GET', '/lab/results/campaign.csv');
      if (r.status === 200) S.campaign = parseCsv(r.text);
    }
    if (res['campaign-counterexample.json']) {
      const r = await api('GET', '/lab/results/campaign-counterexample.json');
      if (r.status === 200 && r.json) S.counterexample = r.json;
    }
  }

  function renderConn() {
    const c = $('conn');
    if (!S.lab.enabled) {
      c.className = 'conn off';
      c.textContent = 'Runs are off on this instance (lab.enabled=false): the ladder and the timeline ' +
        'still follow what any client sells. Start the instance with --set lab.enabled=true ' +
        '(scripts/demo.sh does) to run loads and scenarios from this page.';
      return;
    }
    c.className = 'conn';
    const inst = S.lab.instances.length ? S.lab.instances.join(' and ') : S.lab.target;
    const self = S.lab.target === location.host ? ' (where this page came from)' : '';
    c.textContent = `Page served by ${location.host}. A run's sales go to ${S.lab.target}${self}; ` +
      `a scenario's sales A and B go to ${inst}. Lock TTL ${num(S.lab.ttl_ms)} ms, ` +
      `lock wait ${num(S.lab.wait_ms)} ms (a scenario's sales carry waits of their own, sized from its timeline).` +
      (S.lab.token_required ? ' Runs need the instance\u2019s admin token (admin.token).' : '');
  }

  /* ---- the ladder ------------------------------------------------------------ */

  function scenarioFor(name) {
    return S.scenarios.find((sc) => sc.shows.includes(name)) || null;
  }

  /* The step that fixes the flaw a scenario shows with strategy name (each
   * shown strategy may have its own: session-lost), or null. */
  function fixOf(sc, name) {
    if (!sc) return null;
    return (sc.fix_of && sc.fix_of[name]) || (sc.fixed_by.includes(',') ? null : sc.fixed_by);
  }

  /* Who fixes what a scenario shows, in words. */
  function fixWords(sc) {
    const fixes = [...new Set(sc.shows.map((n) => fixOf(sc, n)))];
    if (fixes.length <= 1) return `${fixes[0] || sc.fixed_by} fixes it`;
    return sc.shows.map((n) => `${fixOf(sc, n)} fixes ${n}`).join(', ');
  }

  function renderCards() {
    const ol = $('cards');
    ol.textContent = '';
    S.strategies.forEach((st, i) => {
      const sc = scenarioFor(st.name);
      const acts = h('div', { class: 'acts' });
      const off = st.available === false;
      if (S.lab.enabled && !off) {
        if (sc) {
          acts.append(h('button', {
            type: 'button', class: 'primary show-flaw', 'data-scenario': sc.name,
            'aria-label': `Show the flaw of ${st.name}: run the ${sc.name} scenario`,
            onclick: () => startRun({ strategy: st.name, scenario: sc.name, stock: stockValue() }),
          }, 'Show the flaw'));
        }
        acts.append(h('button', {
          type: 'button', 'aria-label': `Run a load with ${st.name}`,
          onclick: () => startRun(loadRequest(st.name)),
        }, 'Run a load'));
      }
      const none = sc || !S.lab.enabled ? null : h('p', { class: 'none' },
        'No scenario in the lab: ' + (NO_SCENARIO[st.name] || 'none written yet.'));
      ol.append(h('li', { class: 'card', id: 'card-' + st.name, 'data-strategy': st.name },
        h('h3', {}, h('span', { class: 'n' }, `${i + 1}.`), h('code', { text: st.name }),
          h('span', { class: 'fam', title: 'lock family' }, st.family)),
        h('p', { text: st.description }),
        h('p', { class: 'flaw' }, h('b', {}, 'Flaw: '), st.flaw),
        sc ? h('p', { class: 'hint' }, `Scenario: ${sc.title}; fixed by ${fixOf(sc, st.name)}.`) : null,
        off ? h('p', { class: 'none unavailable' }, `Not available here: ${st.unavailable}.`) : none, acts));
    });
  }

  /* ---- the run form ---------------------------------------------------------- */

  function setupForm() {
    $('run-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const scen = $('f-scenario').value;
      const strategy = $('f-strategy').value;
      startRun(scen ? { strategy, scenario: scen, stock: stockValue() } : loadRequest(strategy));
    });
    $('f-scenario').addEventListener('change', showScenarioInfo);
    $('f-strategy').addEventListener('change', showScenarioInfo);
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('f-token').value.trim();
      if (!t) return;
      storeToken(t);
      const req = S.pending;
      hideTokenForm();
      if (req) startRun(req);
    });
    $('f-token-cancel').addEventListener('click', () => {
      hideTokenForm();
      notice('The run was not started: it needs the admin token.');
    });
  }

  /* Asks for the admin token (why: the sentence shown above the field); the
   * run req starts once it is given. */
  function askToken(req, why) {
    S.pending = req;
    $('token-why').textContent = why;
    $('token-form').hidden = false;
    $('f-token').value = '';
    $('f-token').focus();
  }
  function hideTokenForm() {
    S.pending = null;
    $('token-form').hidden = true;
    $('f-token').value = '';
  }

  const stockValue = () => +$('f-stock').value;
  function loadRequest(strategy) {
    return { strategy, clients: +$('f-clients').value, requests: +$('f-requests').value, stock: stockValue() };
  }

  function fillForm() {
    const fs = $('f-strategy');
    fs.textContent = '';
    for (const st of S.strategies) {
      fs.append(h('option', { value: st.name, selected: st.name === S.def, disabled: st.available === false },
        st.available === false ? `${st.name} (${st.unavailable})` : st.name));
    }
    const sc = $('f-scenario');
    for (const x of S.scenarios) sc.append(h('option', { value: x.name }, `${x.name}: ${x.title}`));
    const b = S.lab.bounds;
    $('bounds').textContent = S.lab.enabled
      ? `Each run first resets the stock (POST /inventory/reset), then sends its sales. Bounds: ` +
        `at most ${num(b.clients)} clients, ${num(b.requests)} requests and ${b.seconds} s; one run at a time.`
      : 'Runs are off on this instance.';
    for (const e of $('run-form').elements) e.disabled = !S.lab.enabled;
    showScenarioInfo();
  }

  function describeStep(st) {
    const parts = [];
    if (st.hold_ms) parts.push(`works ${num(st.hold_ms)} ms inside (hold_ms)`);
    if (st.release_delay_ms) parts.push(`stalls ${num(st.release_delay_ms)} ms before its release (release_delay_ms)`);
    if (st.nested) parts.push(`re-acquires the lock ${st.nested} times inside (nested)`);
    if (st.end_session) parts.push('has its lock\u2019s store session ended from outside once inside (end_session)');
    if (st.wait_ms !== undefined) parts.push(`waits up to ${num(st.wait_ms)} ms for the lock (wait_ms)`);
    return `${st.label}: at ${num(st.at_ms)} ms on instance ${st.instance}` + (parts.length ? ', ' + parts.join(', ') : '');
  }

  function showScenarioInfo() {
    const box = $('scenario-info');
    const name = $('f-scenario').value;
    const sc = S.scenarios.find((x) => x.name === name);
    $('f-clients').disabled = $('f-requests').disabled = !!sc || !S.lab.enabled;
    box.hidden = !sc;
    box.textContent = '';
    if (!sc) return;
    box.append(h('p', {}, h('b', {}, `${sc.name}: ${sc.title}. `), sc.what, ` (TTL = ${num(S.ttl)} ms here.)`),
      h('ul', {}, sc.steps.map((st) => h('li', { text: describeStep(st) }))),
      h('p', {}, h('b', {}, 'Look for: '), sc.look_for),
      h('p', {}, h('b', {}, 'The verdict: '), `the window is “${sc.window}”. ` +
        `Flaw shown: ${sc.flaw}. Fixed: ${sc.fix}. Inconclusive: the window was not reached, or a sale gave up.`),
      h('p', { class: 'hint' }, `Shows the flaw of ${sc.shows.join(', ')}; ${fixWords(sc)}. ` +
        (sc.ends_session ? 'It runs only with a strategy whose lock lives on a session of its store. ' : '') +
        `Takes at most ${dur(sc.length_ms * 1000)}.`),
      sc.refused ? h('p', { class: 'notice bad', id: 'scenario-refused' }, 'Not at these settings: ' + sc.refused + '.') : '');
  }

  async function startRun(req) {
    if (S.active) {
      notice(`Run ${S.run.id} is still going: one run at a time.`);
      return;
    }
    notice('');
    $('f-strategy').value = req.strategy;
    $('f-scenario').value = req.scenario || '';
    showScenarioInfo();
    if (S.lab.token_required && !storedToken()) {
      askToken(req, 'Runs on this instance need its admin token (admin.token, sent as ' +
        '\u201cAuthorization: Bearer\u201d). It is kept in this tab only.');
      return;
    }
    let r;
    try { r = await api('POST', '/lab/runs', req, true); } catch (e) { notice('The run could not be sent: ' + e.message, true); return; }
    if (r.status === 401) {
      const had = !!storedToken();
      storeToken('');
      askToken(req, (had ? 'The token was refused (401): ' : 'This run needs the admin token (401): ') +
        (r.json ? r.json.error : r.text));
      return;
    }
    if (r.status === 202) {
      S.run = r.json;
      S.active = true;
      S.awaitReset = true;
      S.events = [];
      S.overlaps = new Map();
      S.since = '0';
      S.audit = null;
      S.follow = true;
      S.dirty = true;
      renderRun();
      renderAudit();
      highlightCard(req.strategy);
      clearTimeout(S.timer);
      S.timer = setTimeout(tick, FAST_MS);
      $('timeline-h').scrollIntoView({ block: 'nearest' });
    } else if (r.status === 409) {
      notice('Another run is going (409): ' + (r.json ? r.json.error : r.text), true);
    } else if (r.status === 404) {
      notice('Runs are off on the instance that answered (404): start it with --set lab.enabled=true.', true);
    } else {
      notice(`The run was refused (${r.status}): ` + (r.json ? r.json.error : r.text), true);
    }
  }

  function highlightCard(name) {
    for (const c of document.querySelectorAll('.card')) c.classList.toggle('current', c.dataset.strategy === name);
  }

  /* ---- the run's progress and result ----------------------------------------- */

  function renderRun() {
    const st = $('run-status'), out = $('run-result'), vbox = $('run-verdict-box');
    const r = S.run;
    $('f-start').disabled = S.active || !S.lab.enabled;
    for (const b of document.querySelectorAll('.card button')) b.disabled = S.active;
    if (!r) {
      st.textContent = S.lab.enabled ? 'No run yet. Pick a strategy and press Start run, or Show the flaw on a step.' : '';
      st.dataset.state = 'none';
      return;
    }
    st.dataset.state = r.state;
    st.dataset.run = r.id;
    const what = `Run ${r.id}: ${r.strategy}` + (r.scenario ? `, scenario ${r.scenario}` : `, ${num(r.clients)} clients, ${num(r.requests)} requests`);
    st.textContent = '';
    if (r.state === 'running') {
      const phase = { reset: `resetting the stock to ${num(r.stock)} at ${r.target}\u2026`,
        sales: `sales answered ${num(r.done)} of ${num(r.requests)}, ${r.elapsed_s.toFixed(1)} s\u2026`,
        audit: 'reading the audit\u2026' }[r.phase] || r.phase;
      st.append(`${what}: ${phase}`);
      const bar = h('span', { class: 'bar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': r.requests, 'aria-valuenow': r.done, 'aria-label': 'sales answered' });
      bar.append(h('i'));
      st.append(bar);
      progressWidth(bar.firstChild, r.requests ? r.done / r.requests : 0);
    } else if (r.state === 'done') {
      st.append(`${what}: finished, ${num(r.done)} answers in ${r.elapsed_s.toFixed(2)} s.`);
    } else {
      st.append(`${what}: ${r.state}. ${r.error}`);
    }
    out.textContent = '';
    vbox.textContent = '';
    if (r.faults_refused) {
      notice('The instances refused the fault parameters (403 faults_disabled): a scenario needs ' +
        'faults.enabled=true on every instance its sales go to. Restart them with ' +
        '--set faults.enabled=true (scripts/demo.sh does), then run it again.', true);
    }
    vbox.append(verdict(r));
    out.append(numbersTable(r));
    if (r.steps.length) out.append(stepsTable(r));
    if (r.scenario && r.state === 'done' && !r.faults_refused) {
      const sc = S.scenarios.find((x) => x.name === r.scenario);
      const acts = h('div', { class: 'acts' });
      const fix = fixOf(sc, r.strategy);
      if (fix && fix !== r.strategy)
        acts.append(h('button', { type: 'button', class: 'primary', onclick: () => startRun({ strategy: fix, scenario: sc.name, stock: r.stock }) },
          `Same scenario with ${fix} (the fix)`));
      acts.append(h('button', { type: 'button', onclick: () => startRun({ strategy: r.strategy, scenario: r.scenario, stock: r.stock }) }, 'Run it again'));
      vbox.append(acts);
    }
  }

  /* The progress bar's width, set through the CSSOM: the page's
   * Content-Security-Policy allows that, unlike a style="..." attribute. */
  function progressWidth(i, f) { i.style.width = Math.round(Math.min(1, f) * 100) + '%'; }

  /* A scenario's verdict, judged by the service from the answers, the
   * history and the audit: flaw shown, fixed or inconclusive, with its
   * evidence; never a plain OK. */
  const RESULTS = {
    flaw_shown: ['\u2717 Flaw shown', 'The flaw happened'],
    fixed: ['\u2713 Fixed', 'The window was reached and the lock held'],
    inconclusive: ['? Inconclusive', 'This run shows neither the flaw nor the fix'],
  };
  function scenarioVerdict(r) {
    const box = h('div', { class: 'verdict', id: 'run-verdict', 'data-result': r.verdict ? r.verdict.result : 'none' });
    if (r.faults_refused) {
      box.classList.add('inconclusive');
      box.append(h('p', {}, h('b', {}, '\u26a0 Not run as written: '),
        `the instances refused the scenario's fault parameters (403), so this run says nothing about ${r.strategy}.`));
      return box;
    }
    if (!r.verdict) {
      box.append(h('p', {}, r.state === 'running'
        ? 'The verdict comes at the end of the run, judged from each sale\u2019s answer, the recorded holds and the audit.'
        : 'No verdict: ' + (r.error || 'the run did not finish.')));
      return box;
    }
    const v = r.verdict, [word] = RESULTS[v.result] || [v.result];
    box.classList.add(v.result);
    box.append(h('p', { class: 'verdict-word' }, h('b', {}, `${word}: `), v.evidence + '.'),
      h('p', { class: 'hint' }, `The window: ${v.window} \u2014 ` +
        (v.window_reached ? 'reached.' : 'not reached, so this run cannot show the flaw or its fix.') +
        (v.other_holds ? ` ${num(v.other_holds)} other hold(s) of the lock were recorded during the run.` : '')));
    const a = r.audit;
    if (a) box.append(h('p', { class: 'hint' }, `The audit at the end: ${num(a.sold_twice)} unit(s) sold twice, ` +
      `${num(a.violations)} time(s) two holders inside at once; the clients were told ${num(r.sold)} sold, the ledger has ${num(a.sold)}.`));
    return box;
  }

  function verdict(r) {
    if (r.scenario) return scenarioVerdict(r);
    const a = r.audit;
    const p = h('p', { class: 'verdict-line', id: 'run-verdict' });
    if (!a) { p.textContent = r.state === 'running' ? 'The audit comes at the end of the run.' : 'No audit: ' + (r.error || 'the run did not get that far.'); return p; }
    const match = a.sold === r.sold;
    const said = `Clients were told ${num(r.sold)} sold; the ledger has ${num(a.sold)} entries` +
      (match ? ' (they match).' : ' (they differ: some answers were lost or wrong).');
    if (a.oversold) {
      p.append(h('span', { class: 'bad' }, '\u2717 OVERSOLD: '),
        `${num(a.sold_twice)} unit(s) sold twice, ${num(a.oversold_units)} oversold; ${num(a.violations)} time(s) two holders were inside at once. ${said}`);
    } else if (a.stock_lost > 0) {
      p.append(h('span', { class: 'bad' }, `\u2717 STOCK LOST: `),
        `${num(a.stock_lost)} unit(s) left the stock with no sale in the ledger: a write overwrote a newer stock (a reset during a sale?). ${said}`);
    } else if (a.violations > 0) {
      p.append(h('span', { class: 'bad' }, `\u26a0 ${num(a.violations)} violation(s): `),
        `two holders were inside the critical section at once, though no unit was sold twice this time. ${said}`);
    } else {
      p.append(h('span', { class: 'ok' }, '\u2713 OK: '), `every unit sold once, and never two holders inside at once. ${said}`);
    }
    return p;
  }

  function numbersTable(r) {
    const a = r.audit || {};
    const rows = [
      ['run-done', 'Answered', r.done], ['run-sold', 'Sold', r.sold],
      ['run-sold-out', 'Sold out', r.sold_out], ['run-lock-timeout', 'Lock timeout', r.lock_timeout],
      ['run-backend', 'Backend unavailable', r.backend_unavailable], ['run-other', 'Other', r.other],
      ['run-errors', 'No answer', r.errors], ['run-elapsed', 'Elapsed s', r.elapsed_s, 2],
      ['run-rate', 'Sales/s', r.sales_per_s, 1], ['run-p50', 'p50 ms', r.p50_ms, 1],
      ['run-p99', 'p99 ms', r.p99_ms, 1],
      ['run-audit-stock', 'Final stock', a.stock], ['run-audit-sold', 'Ledger entries', a.sold],
      ['run-audit-twice', 'Sold twice', a.sold_twice], ['run-audit-over', 'Oversold units', a.oversold_units],
      ['run-audit-viol', 'Violations', a.violations],
    ];
    const what = `Run ${r.id}: ${r.strategy}` + (r.scenario ? `, scenario ${r.scenario}` : '') +
      `, stock reset to ${num(r.stock)}, sales sent to ${r.scenario ? 'instances A and B' : r.target}`;
    const box = h('div', { class: 'numbers-box' });
    const half = (list, cap) => {
      const t = h('table', { class: 'numbers' }, h('caption', { class: 'hint' }, cap));
      t.append(h('thead', {}, h('tr', {}, list.map(([, label]) => h('th', { scope: 'col' }, label)))),
        h('tbody', {}, h('tr', {}, list.map(([id, , v, d]) => h('td', { id }, num(v, d))))));
      return t;
    };
    box.append(half(rows.slice(0, 11), what + ': what the clients were answered'),
      half(rows.slice(11), 'What the audit found at the end (GET /inventory/audit)'));
    if (r.first_error) box.append(h('p', { class: 'hint' }, 'First error: ' + r.first_error));
    if (r.first_other) box.append(h('p', { class: 'hint' }, 'First other answer: ' + r.first_other));
    return box;
  }

  function stepsTable(r) {
    const t = h('table', { id: 'run-steps' }, h('caption', { class: 'hint' }, 'The scenario\u2019s sales and what each was answered'));
    t.append(h('thead', {}, h('tr', {}, ['Sale', 'Instance', 'Sent at', 'Faults', 'Answer', 'Took', 'Unit', 'Lock wait', 'Notes']
      .map((x) => h('th', { class: 'l', scope: 'col' }, x)))));
    const body = h('tbody');
    for (const st of r.steps) {
      const a = typeof st.answer === 'object' && st.answer ? st.answer : {};
      const lock = a.lock || {};
      const notes = [];
      if (lock.depth !== undefined) notes.push(`recursion depth ${lock.depth}`);
      if (lock.late) notes.push('wrote after its lease (late)');
      if (lock.token !== undefined) notes.push(`token ${lock.token}`);
      if (a.error) notes.push(a.error);
      if (typeof st.answer === 'string' && st.answer) notes.push(st.answer);
      body.append(h('tr', { class: st.word === 'sold' || st.word === 'sold_out' ? '' : 'row-bad' },
        h('td', { class: 'l' }, st.label), h('td', { class: 'l' }, `${st.instance} (${st.addr})`),
        h('td', {}, st.sent_us ? `${num(st.at_ms)} ms` : 'not sent'), h('td', { class: 'l' }, (st.query || '\u2013').replace(/&/g, ' ')),
        h('td', { class: 'l' }, st.status ? `${st.status} ${st.word}` : (st.sent_us ? 'no answer' : '\u2013')),
        h('td', {}, st.sent_us && st.status ? `${num(st.took_ms)} ms` : '\u2013'),
        h('td', {}, a.unit !== undefined ? String(a.unit) : '\u2013'),
        h('td', {}, lock.wait_ms !== undefined ? `${num(lock.wait_ms)} ms` : '\u2013'),
        h('td', { class: 'answer' }, notes.join('; '))));
    }
    t.append(body);
    return t;
  }

  /* ---- following the service ---------------------------------------------------- */

  async function tick() {
    try {
      if (S.active && S.run) {
        const r = await api('GET', '/lab/runs/' + S.run.id);
        if (r.status === 200) {
          S.run = r.json;
          if (r.json.phase !== 'reset') S.awaitReset = false;
          if (r.json.state !== 'running') await finished();
          renderRun();
          S.dirty = true;
        }
      }
      if (!S.paused) {
        if (!S.awaitReset) await fetchHistory();
        const a = await api('GET', '/inventory/audit');
        if (a.status === 200) S.audit = a.json;
        renderAudit();
        if (S.dirty) renderTimeline();
      }
      if ($('conn').dataset.lost) { delete $('conn').dataset.lost; renderConn(); }
    } catch (e) {
      $('conn').dataset.lost = '1';
      $('conn').className = 'conn off';
      $('conn').textContent = 'Lost the service (' + e.message + '); retrying\u2026';
    }
    const fast = S.active || Date.now() - S.lastNew < 3000;
    clearTimeout(S.timer);
    S.timer = setTimeout(tick, fast ? FAST_MS : SLOW_MS);
  }

  async function finished() {
    S.active = false;
    await fetchHistory();
    const runs = await api('GET', '/lab/runs');
    if (runs.status === 200) S.runs = runs.json.runs;
    const lab = await api('GET', '/lab');
    if (lab.status === 200 && lab.json.enabled) { S.lab = lab.json; await loadResults(); }
    renderCompare();
  }

  /* The service judges which holds overlap (src/hold.c, as the checker and
   * the scenario judge do): each page of the history names its pairs, with
   * the holds recorded before it that may still have been inside. The page
   * keeps them by id and draws them; it never judges an overlap itself. */
  async function fetchHistory() {
    for (let i = 0; i < 4; i++) {
      const r = await api('GET', `/inventory/history?limit=${PAGE}&since=${encodeURIComponent(S.since)}`);
      if (r.status !== 200 || !r.json) return;
      const ev = r.json.events;
      for (const p of r.json.overlaps || []) S.overlaps.set(p.a + ' ' + p.b, p);
      if (ev.length) {
        for (const e of ev) S.events.push(e);
        S.since = r.json.next;
        S.lastNew = Date.now();
        S.dirty = true;
      }
      if (ev.length < PAGE) break;
    }
    if (S.events.length > KEEP) {
      S.events.splice(0, S.events.length - KEEP);
      const kept = new Set(S.events.map((e) => e.id));
      for (const [k, p] of S.overlaps) if (!kept.has(p.a) || !kept.has(p.b)) S.overlaps.delete(k);
    }
  }

  function renderAudit() {
    const a = S.audit;
    const set = (id, v) => { $(id).textContent = a ? num(v) : '\u2013'; };
    set('audit-stock', a && a.stock); set('audit-initial', a && a.initial); set('audit-sold', a && a.sold);
    set('audit-sold-twice', a && a.sold_twice); set('audit-oversold-units', a && a.oversold_units);
    set('audit-violations', a && a.violations);
    const v = $('audit-verdict');
    v.textContent = '';
    if (a) {
      if (a.oversold) v.append(h('span', { class: 'bad' }, '\u2717 OVERSOLD'));
      else if (a.violations > 0) v.append(h('span', { class: 'bad' }, '\u26a0 violations'));
      else v.append(h('span', { class: 'ok', title: 'no unit sold twice, no two holders seen inside at once' }, '\u2713 clean'));
    } else v.textContent = '\u2013';
    const w = $('audit-warning');
    w.hidden = !(a && a.warnings && a.warnings.length);
    w.textContent = a && a.warnings ? a.warnings.join(' ') : '';
  }

  /* ---- the timeline ------------------------------------------------------------ */

  /* Every hold, numbered in the order they were granted, with the
   * scenario's sale it was (matched by order id), drawn until the service
   * said it was inside (inside_until_us: the run's, which reads the sale's
   * answer too, for a scenario's sale), and the pairs of holds the service
   * found inside at once: the history's, and the scenario run's (those its
   * verdict read). */
  function analyse(events) {
    const byOrder = new Map(), steps = S.run && S.run.steps ? S.run.steps : [];
    for (const st of steps) if (st.answer && st.answer.order) byOrder.set(st.answer.order, st.label);
    const holds = events.map((e) => ({ e, g: e.granted_us, r: Math.max(e.inside_until_us, e.granted_us), over: [],
      sale: byOrder.get(e.order) || '' }));
    holds.sort((a, b) => a.g - b.g);
    holds.forEach((x, i) => { x.n = i + 1; });
    /* A refused sale's answer names no order: its hold is the first one
     * unnamed on its instance after it was sent. */
    for (const st of steps) {
      if (!st.sent_us || [...byOrder.values()].includes(st.label)) continue;
      const port = Number(st.addr.split(':').pop());
      const x = holds.find((y) => !y.sale && y.e.port === port && y.g >= st.sent_us - 5000);
      if (x) { x.sale = st.label; byOrder.set('#' + st.label, st.label); }
    }
    const byLabel = new Map();
    for (const st of steps) {
      const x = st.hold && holds.find((y) => y.sale === st.label);
      if (!x) continue;
      byLabel.set(st.label, x);
      x.r = Math.max(st.hold.inside_until_us, x.g);
    }
    const byId = new Map(holds.map((x) => [x.e.id, x]));
    const pairs = [], seen = new Set();
    const pair = (o, x, lead) => {
      if (!o || !x || seen.has(o.n + ' ' + x.n)) return;
      seen.add(o.n + ' ' + x.n);
      o.over.push(x.n);
      x.over.push(o.n);
      pairs.push([o, x, lead]);
    };
    for (const p of S.overlaps.values()) pair(byId.get(p.a), byId.get(p.b), p.lead_us);
    for (const p of S.run && S.run.overlaps ? S.run.overlaps : []) pair(byLabel.get(p.a), byLabel.get(p.b), p.lead_us);
    pairs.sort((p, q) => p[1].g - q[1].g);
    return { holds, pairs };
  }

  function lanesOf(events) {
    const lanes = new Map();
    for (const e of events) if (!lanes.has(e.instance)) lanes.set(e.instance, { id: e.instance, port: e.port, i: lanes.size });
    return lanes;
  }

  function domain(holds) {
    let t0 = Infinity, t1 = -Infinity;
    for (const x of holds) { t0 = Math.min(t0, x.g); t1 = Math.max(t1, x.r); }
    const r = S.run;
    if (r && r.steps) for (const st of r.steps) if (st.sent_us) { t0 = Math.min(t0, st.sent_us); t1 = Math.max(t1, st.sent_us); }
    if (!isFinite(t0)) return null;
    const span = Math.max(t1 - t0, 50000);
    return { from: t0 - span * 0.02, to: t0 + span * 1.04, t0 };
  }

  function ticks(from, to, t0) {
    const span = to - from, steps = [1, 2, 5];
    let step = 1000;
    for (let k = 0; step * 10 < span; k++) step = steps[(k + 1) % 3] * Math.pow(10, 3 + Math.floor((k + 1) / 3));
    const out = [];
    for (let t = t0 + Math.ceil((from - t0) / step) * step; t <= to; t += step) out.push(t);
    return out;
  }

  function renderTimeline() {
    S.dirty = false;
    const svg = $('timeline');
    const W = Math.max(svg.clientWidth || 800, 400);
    const { holds, pairs } = analyse(S.events);
    const lanes = lanesOf(S.events);
    const full = domain(holds);
    if (S.follow || !S.win || !full) S.win = full;
    const top = 28, left = 132, right = 16, rowH = 30, barY = 14, barH = 20, SUB_MAX = 4;
    /* Holds of one instance that overlap go in rows of their own in its
     * lane (at most SUB_MAX; more share the last), so none hides another. */
    for (const l of lanes.values()) l.ends = [];
    for (const x of holds) {
      const l = lanes.get(x.e.instance);
      let k = l.ends.findIndex((end) => end <= x.g);
      if (k < 0) k = l.ends.length < SUB_MAX ? l.ends.length : SUB_MAX - 1;
      l.ends[k] = Math.max(l.ends[k] || 0, x.r);
      x.sub = k;
    }
    let laneY = top;
    for (const l of lanes.values()) {
      l.y = laneY;
      l.h = 12 + Math.max(l.ends.length, 1) * rowH;
      laneY += l.h;
    }
    const lanesEnd = lanes.size ? laneY : top + 48;
    const chartTop = lanesEnd + 34, chartH = 64;
    const H = chartTop + chartH + 10;
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('height', H);
    svg.textContent = '';
    svg.append(s('defs', {},
      s('pattern', { id: 'hatch', patternUnits: 'userSpaceOnUse', width: 7, height: 7, patternTransform: 'rotate(45)' },
        s('rect', { width: 7, height: 7, fill: '#c62828' }), s('line', { x1: 1.5, y1: 0, x2: 1.5, y2: 7, stroke: '#fff', 'stroke-width': 2.2 }))));
    summary(holds, pairs, lanes);
    renderHoldsTable(holds, lanes);
    if (!full) {
      svg.setAttribute('viewBox', `0 0 ${W} 70`);
      svg.setAttribute('height', 70);
      svg.append(s('text', { x: W / 2, y: 40, 'text-anchor': 'middle', class: 'muted' },
        'No lock hold recorded yet: start a run, or sell through any instance. Every hold appears here.'));
      $('t-state').textContent = '';
      return;
    }
    const { from, to } = S.win;
    const X = (t) => left + (t - from) / (to - from) * (W - left - right);
    const clampX = (x) => Math.min(Math.max(x, left), W - right);
    for (const t of ticks(from, to, full.t0)) {
      const x = X(t);
      svg.append(s('line', { class: 'grid', x1: x, y1: top - 6, x2: x, y2: chartTop + chartH }),
        s('text', { x, y: top - 10, 'text-anchor': 'middle', class: 'muted' }, t === full.t0 ? '0' : '+' + dur(t - full.t0)));
    }
    for (const l of lanes.values()) {
      const y = l.y;
      svg.append(s('rect', { class: 'lane-bg', x: left, y: y + 2, width: W - left - right, height: l.h - 4 }),
        s('text', { x: 6, y: y + l.h / 2 - 2 }, `instance :${l.port}`),
        s('text', { x: 6, y: y + l.h / 2 + 11, class: 'muted' }, l.id));
    }
    const stepsG = s('g');
    const rows = [[], []];   /* labels under the lanes, in two rows, never on top of each other */
    const place = (x, text) => {
      const w = text.length * 7;
      x = Math.min(x, W - 4 - w);
      for (let i = 0; i < rows.length; i++) {
        if (rows[i].every(([a, b]) => x + w < a || x > b + 6)) {
          rows[i].push([x, x + w]);
          stepsG.append(s('text', { x, y: lanesEnd + 12 + i * 11, class: 'muted' }, text));
          return;
        }
      }
    };
    if (S.run && S.run.steps) {
      for (const st of S.run.steps) {
        if (!st.sent_us || st.sent_us < from || st.sent_us > to) continue;
        const x = X(st.sent_us);
        stepsG.append(s('line', { class: 'step-line', x1: x, y1: top - 2, x2: x, y2: lanesEnd }));
        place(x + 3, `${st.label} sent`);
      }
      for (const st of S.run.steps) {
        const back = st.sent_us + st.took_ms * 1000;
        if (!st.sent_us || !st.status || back < from || back > to) continue;
        const bx = X(back);
        stepsG.append(s('path', { class: 'answered-mark', d: `M${bx} ${lanesEnd - 1} l-4 7 h8 Z` },
          s('title', {}, `${st.label} answered ${st.status} ${st.word} after ${num(st.took_ms)} ms`)));
        place(bx + 3, /release_delay_ms/.test(st.query) ? `${st.label} released, answered` : `${st.label} answered`);
      }
    }
    const bars = s('g');
    for (const x of holds) {
      if (x.r < from || x.g > to) continue;
      const l = lanes.get(x.e.instance);
      const y = l.y + x.sub * rowH + barY;
      const x0 = clampX(X(x.g)), x1 = clampX(X(x.r));
      const w = Math.max(x1 - x0, x.over.length ? 5 : 2);
      const out = x.e.outcome;
      const cls = 'hold ' + (out === 'sold' ? 'sold' : out === 'sold_out' ? 'sold_out' : 'refused') + (x.over.length ? ' overlap' : '');
      const title = (x.sale ? `Sale ${x.sale}: ` : '') + `Hold #${x.n} on instance :${x.e.port} (${x.e.instance}), ${x.e.strategy}: ${out}` +
        (x.e.unit ? `, unit ${x.e.unit}` : '') + `, read stock ${x.e.stock_read}; granted at +${dur(x.g - full.t0)}, ` +
        `held ${dur(x.r - x.g)}` + (x.e.late ? '; wrote after its lease ran out (late)' : '') +
        (x.over.length ? `; overlaps hold${x.over.length > 1 ? 's' : ''} #${x.over.slice(0, 8).join(', #')}` : '');
      bars.append(s('rect', { class: cls, x: x0, y, width: w, height: barH, 'data-n': x.n }, s('title', {}, title)));
      if (holds.length <= 60) {
        const label = (x.sale ? `sale ${x.sale} ` : '') + `#${x.n}` + (x.e.unit ? ` unit ${x.e.unit}` : '') +
          (x.e.outcome === 'sold' || x.e.outcome === 'sold_out' ? '' : ` \u2014 write refused: ${x.e.outcome}`);
        const far = x0 + label.length * 5.6 > W - right;
        bars.append(s('text', { x: far ? x1 : x0, y: y - 4, class: 'bar-label', 'text-anchor': far ? 'end' : 'start' }, label));
      }
      if (x.e.late) {
        if (x.e.lease_us && x.e.lease_us > from && x.e.lease_us < to) {
          const lx = X(x.e.lease_us);
          bars.append(s('line', { class: 'lease-tick', x1: lx, y1: y - 2, x2: lx, y2: y + barH + 2 }, s('title', {}, `Lease of hold #${x.n} ran out here`)));
        }
        bars.append(s('path', { class: 'late-mark', d: `M${x1 - 6} ${y - 11} L${x1 + 6} ${y - 11} L${x1} ${y - 1} Z` },
          s('title', {}, `Hold #${x.n} wrote after its lease ran out (late)`)));
      }
    }
    svg.append(bars, stepsG);
    stockChart(svg, holds, X, from, to, left, W - right, chartTop, chartH);
    $('t-state').textContent = (S.paused ? 'Paused. ' : '') + (S.follow ? 'Showing everything.' : `Showing ${dur(to - from)} of ${dur(full.to - full.from)}.`);
  }

  /* Below the lanes: the stock each holder read (solid) and the ledger's
   * entries so far (dashed), each on its own scale, with its range written. */
  function stockChart(svg, holds, X, from, to, x0, x1, y0, hgt) {
    const wrote = (x) => x.e.written_us || x.e.released_us;
    const sold = holds.filter((x) => x.e.outcome === 'sold').sort((a, b) => wrote(a) - wrote(b));
    const reads = holds.slice().sort((a, b) => a.g - b.g);
    const range = (vals) => { const lo = Math.min(...vals), hi = Math.max(...vals); return hi > lo ? [lo, hi] : [lo - 1, hi + 1]; };
    const [slo, shi] = range(reads.map((x) => x.e.stock_read));
    const [llo, lhi] = range([0, sold.length]);
    const few = reads.length <= 30;
    const Ys = (v) => y0 + hgt - 4 - (v - slo) / (shi - slo) * (hgt - 8);
    const Yl = (v) => y0 + hgt - 4 - (v - llo) / (lhi - llo) * (hgt - 8);
    svg.append(s('line', { class: 'axis', x1: x0, y1: y0 + hgt, x2: x1, y2: y0 + hgt }),
      s('text', { x: 6, y: y0 + 12 }, few ? 'stock read (dots)' : 'stock read (solid)'),
      s('text', { x: 6, y: y0 + 25, class: 'muted' }, reads.length ? `${num(Math.min(...reads.map((x) => x.e.stock_read)))} to ${num(Math.max(...reads.map((x) => x.e.stock_read)))}` : ''),
      s('text', { x: 6, y: y0 + 44 }, 'ledger (dashed)'), s('text', { x: 6, y: y0 + 57, class: 'muted' }, `0 to ${num(sold.length)} entries`));
    const inView = (x) => x.r >= from && x.g <= to;
    let d = '';
    for (const x of reads) {
      if (!inView(x)) continue;
      const px = X(Math.max(x.g, from)), py = Ys(x.e.stock_read);
      d += `${d ? 'L' : 'M'}${px.toFixed(1)} ${py.toFixed(1)} `;
      if (few) svg.append(s('circle', { cx: px, cy: py, r: 2.5, class: 'stock-dot' }),
        s('text', { x: px + 4, y: py - 3, class: 'muted' }, String(x.e.stock_read)));
    }
    if (d && !few) svg.append(s('path', { class: 'stock-line', d }, s('title', {}, 'The stock each holder read when it was granted the lock')));
    d = '';
    let n = 0, lastY = Yl(0);
    d = `M${x0} ${lastY.toFixed(1)} `;
    for (const x of sold) {
      n++;
      if (wrote(x) < from || wrote(x) > to) continue;
      const px = X(wrote(x)).toFixed(1);
      d += `L${px} ${lastY.toFixed(1)} L${px} ${Yl(n).toFixed(1)} `;
      lastY = Yl(n);
    }
    d += `L${x1} ${lastY.toFixed(1)}`;
    if (sold.length) svg.append(s('path', { class: 'ledger-line', d }, s('title', {}, 'Units sold so far (ledger entries written)')));
  }

  function summary(holds, pairs, lanes) {
    const late = holds.filter((x) => x.e.late).length;
    const refused = holds.filter((x) => !['sold', 'sold_out'].includes(x.e.outcome)).length;
    const p = $('timeline-summary');
    p.textContent = '';
    if (!holds.length) { p.textContent = 'No hold recorded yet.'; p.dataset.overlaps = '0'; return; }
    const t0 = Math.min(...holds.map((x) => x.g)), t1 = Math.max(...holds.map((x) => x.r));
    p.dataset.overlaps = String(pairs.length);
    p.append(`${num(holds.length)} hold(s) by ${lanes.size} instance(s) over ${dur(t1 - t0)}. `);
    if (pairs.length) {
      const name = (x) => (x.sale ? `sale ${x.sale} ` : '') + `#${x.n} (:${x.e.port})`;
      const list = pairs.slice(0, 5).map(([a, b, lead]) => `${name(a)} with ${name(b)} (${dur(lead)})`).join(', ');
      p.append(h('span', { class: 'bad' }, `\u2717 ${num(pairs.length)} overlapping pair(s): `), list + (pairs.length > 5 ? ', \u2026' : '') + '. ');
    } else {
      p.append(h('span', { class: 'ok' }, '\u2713 No two holds overlap. '));
    }
    p.append(`${num(late)} late write(s), ${num(refused)} refused or lost write(s).`);
  }

  function renderHoldsTable(holds, lanes) {
    const box = $('holds-table');
    if (!$('holds-details').open) { box.textContent = ''; return; }
    const t0 = holds.length ? Math.min(...holds.map((x) => x.g)) : 0;
    const shown = holds.slice(-300);
    const t = h('table', { id: 'holds' }, h('caption', { class: 'hint' },
      holds.length > shown.length ? `The last ${shown.length} of ${num(holds.length)} holds` : `${num(holds.length)} hold(s)`));
    t.append(h('thead', {}, h('tr', {}, ['#', 'Sale', 'Instance', 'Strategy', 'Outcome', 'Unit', 'Stock read', 'Granted', 'Held', 'Late write', 'Overlaps']
      .map((x) => h('th', { scope: 'col' }, x)))));
    const body = h('tbody');
    for (const x of shown) {
      body.append(h('tr', { class: x.over.length ? 'row-bad' : '' },
        h('td', {}, String(x.n)), h('td', { class: 'l' }, x.sale || '\u2013'), h('td', { class: 'l' }, `:${x.e.port} ${x.e.instance}`), h('td', { class: 'l' }, x.e.strategy),
        h('td', { class: 'l' }, x.e.outcome), h('td', {}, x.e.unit ? String(x.e.unit) : '\u2013'), h('td', {}, String(x.e.stock_read)),
        h('td', {}, '+' + dur(x.g - t0)), h('td', {}, dur(x.r - x.g)), h('td', { class: 'l' }, x.e.late ? 'yes' : 'no'),
        h('td', { class: 'l' }, x.over.length ? '#' + x.over.slice(0, 10).join(', #') + (x.over.length > 10 ? ', \u2026' : '') : '\u2013')));
    }
    t.append(body);
    box.textContent = '';
    box.append(h('div', { class: 'holds-wrap' }, t));
  }

  function setupControls() {
    const zoom = (f) => {
      if (!S.win) return;
      const c = (S.win.from + S.win.to) / 2, half = (S.win.to - S.win.from) * f / 2;
      S.follow = false;
      S.win = { from: c - half, to: c + half, t0: S.win.t0 };
      renderTimeline();
    };
    const pan = (f) => {
      if (!S.win) return;
      const d = (S.win.to - S.win.from) * f;
      S.follow = false;
      S.win = { from: S.win.from + d, to: S.win.to + d, t0: S.win.t0 };
      renderTimeline();
    };
    const fit = () => { S.follow = true; renderTimeline(); };
    const pause = () => {
      S.paused = !S.paused;
      $('t-pause').setAttribute('aria-pressed', String(S.paused));
      $('t-pause').textContent = S.paused ? 'Resume' : 'Pause';
      renderTimeline();
    };
    $('t-pause').addEventListener('click', pause);
    $('t-zoom-in').addEventListener('click', () => zoom(0.5));
    $('t-zoom-out').addEventListener('click', () => zoom(2));
    $('t-left').addEventListener('click', () => pan(-0.25));
    $('t-right').addEventListener('click', () => pan(0.25));
    $('t-fit').addEventListener('click', fit);
    $('t-clear').addEventListener('click', () => { S.events = []; S.overlaps = new Map(); S.dirty = true; renderTimeline(); });
    $('timeline').addEventListener('keydown', (ev) => {
      const k = { ArrowLeft: () => pan(-0.25), ArrowRight: () => pan(0.25), '+': () => zoom(0.5), '=': () => zoom(0.5),
        '-': () => zoom(2), 0: fit, Home: fit, ' ': pause }[ev.key];
      if (k) { ev.preventDefault(); k(); }
    });
    $('timeline').setAttribute('aria-describedby', 'timeline-keys');
    $('timeline').after(h('p', { id: 'timeline-keys', class: 'hint' },
      'Keys on the timeline: \u2190 \u2192 scroll, + \u2212 zoom, 0 fit all, space pause. Hover a bar for its details; the same details are in the table below.'));
    $('holds-details').addEventListener('toggle', () => { S.dirty = true; renderTimeline(); });
    window.addEventListener('resize', () => { S.dirty = true; renderTimeline(); });
  }

  /* ---- tabs -------------------------------------------------------------------- */

  function selectTab(name, focus) {
    for (const [t, v] of [['lab', 'view-lab'], ['compare', 'view-compare'], ['campaigns', 'view-campaigns']]) {
      const tab = $('tab-' + t), on = t === name;
      tab.setAttribute('aria-selected', String(on));
      tab.tabIndex = on ? 0 : -1;
      $(v).hidden = !on;
      if (on && focus) tab.focus();
    }
    if (history.replaceState) history.replaceState(null, '', '#' + name);
    if (name === 'lab') { S.dirty = true; renderTimeline(); } else if (name === 'campaigns') renderCampaigns(); else renderCompare();
  }

  function setupTabs() {
    $('tab-lab').addEventListener('click', () => selectTab('lab', false));
    $('tab-compare').addEventListener('click', () => selectTab('compare', false));
    $('tab-campaigns').addEventListener('click', () => selectTab('campaigns', false));
    /* Arrow keys move between the tabs from the focused one, Home and End
     * to the first and last, as the ARIA tabs pattern has it. */
    document.querySelector('.tabs').addEventListener('keydown', (ev) => {
      const names = ['lab', 'compare', 'campaigns'];
      const i = Math.max(names.indexOf(document.activeElement.id.replace('tab-', '')), 0);
      const to = { ArrowRight: (i + 1) % names.length, ArrowLeft: (i + names.length - 1) % names.length,
        Home: 0, End: names.length - 1 }[ev.key];
      if (to === undefined) return;
      selectTab(names[to], true);
      ev.preventDefault();
    });
    for (const r of document.querySelectorAll('input[name=source]'))
      r.addEventListener('change', () => { S.source = r.value; renderCompare(); });
  }

  /* ---- compare ------------------------------------------------------------------- */

  function parseCsv(text) {
    const lines = text.trim().split(/\r?\n/).filter((l) => l.length);
    const split = (l) => l.split(',').map((c) => c.trim().replace(/^"(.*)"$/, '$1'));
    if (!lines.length) return { header: [], rows: [] };
    const header = split(lines[0]);
    return { header, rows: lines.slice(1).map(split) };
  }

  function compareRows() {
    if (S.source === 'demo') {
      if (!S.demo) return [];
      const ix = (k) => S.demo.header.indexOf(k);
      return S.demo.rows.map((c) => ({
        strategy: c[ix('strategy')], sold: +c[ix('sold')], stock: +c[ix('stock')], oversold_units: +c[ix('oversold_units')],
        sold_twice: +c[ix('sold_twice')], violations: +c[ix('violations')], rate: +c[ix('sales_per_s')], p99: +c[ix('p99_ms')],
        oversold: (c[ix('verdict')] || '').toUpperCase() === 'OVERSOLD', from: `demo.csv: ${num(c[ix('requests')])} requests`,
      }));
    }
    const rows = [];
    for (const st of S.strategies) {
      const r = S.runs.find((x) => x.strategy === st.name && !x.scenario && x.state === 'done' && x.audit);
      if (!r) continue;
      rows.push({ strategy: st.name, sold: r.sold, stock: r.audit.stock, oversold_units: r.audit.oversold_units,
        sold_twice: r.audit.sold_twice, violations: r.audit.violations, rate: r.sales_per_s, p99: r.p99_ms,
        oversold: r.audit.oversold, from: `run ${r.id}: ${num(r.requests)} requests, ${num(r.clients)} clients, stock ${num(r.stock)}` });
    }
    return rows;
  }

  function renderCompare() {
    for (const r of document.querySelectorAll('input[name=source]')) r.checked = r.value === S.source;
    const rows = compareRows();
    const note = $('compare-note');
    if (S.source === 'demo')
      note.textContent = S.demo ? 'From results/demo.csv beside the instance, written by scripts/demo.sh: the same load through nginx for every strategy. ' +
        'Sales/s counts units sold over the whole run, sold-out answers included, as the demo does.'
        : 'No results/demo.csv beside this instance yet: scripts/demo.sh writes it' + (S.lab && S.lab.enabled ? '.' : ' (and runs are off here).');
    else
      note.textContent = rows.length ? 'The last load run of each strategy started from this page (scenarios are not compared). ' +
        'Sales/s counts units sold over the whole run, sold-out answers included.'
        : 'No load run from this page yet: press Run a load on a few steps of the ladder, then come back.';
    const box = $('compare-table');
    box.textContent = '';
    if (rows.length) {
      const t = h('table', { id: 'compare' }, h('caption', { class: 'hint' }, 'One row per strategy'));
      t.append(h('thead', {}, h('tr', {}, ['Strategy', 'Sold (clients saw)', 'Final stock', 'Oversold units', 'Sold twice', 'Violations',
        'Sales/s', 'p99 ms', 'Verdict', 'From'].map((x, i) => h('th', { scope: 'col', class: i === 0 || i > 7 ? 'l' : null }, x)))));
      const body = h('tbody');
      for (const r of rows) {
        body.append(h('tr', { class: r.oversold ? 'row-bad' : '', 'data-strategy': r.strategy },
          h('td', { class: 'l' }, h('code', {}, r.strategy)), h('td', {}, num(r.sold)), h('td', {}, num(r.stock)),
          h('td', {}, num(r.oversold_units)), h('td', {}, num(r.sold_twice)), h('td', {}, num(r.violations)),
          h('td', {}, num(r.rate, 0)), h('td', {}, num(r.p99, 1)),
          h('td', { class: 'l' }, h('span', { class: r.oversold ? 'bad' : 'ok' }, r.oversold ? '\u2717 OVERSOLD' : '\u2713 OK')),
          h('td', { class: 'l hint' }, r.from)));
      }
      t.append(body);
      box.append(t);
    }
    barChart($('chart-speed'), rows, (r) => r.rate, 'bar-speed');
    barChart($('chart-oversold'), rows, (r) => r.oversold_units, 'bar-over');
    renderMatrix();
  }

  function barChart(svg, rows, val, cls) {
    const W = Math.max(svg.clientWidth || 420, 300), rowH = 18, left = 96, right = 64;
    const H = Math.max(rows.length * rowH + 8, 30);
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('height', H);
    svg.textContent = '';
    svg.append(s('defs', {}, s('pattern', { id: 'hatch2', patternUnits: 'userSpaceOnUse', width: 7, height: 7, patternTransform: 'rotate(45)' },
      s('rect', { width: 7, height: 7, fill: '#c62828' }), s('line', { x1: 1.5, y1: 0, x2: 1.5, y2: 7, stroke: '#fff', 'stroke-width': 2.2 }))));
    if (!rows.length) { svg.append(s('text', { x: 6, y: 18, class: 'muted' }, 'nothing to draw yet')); return; }
    const max = Math.max(...rows.map(val), 1);
    rows.forEach((r, i) => {
      const y = 4 + i * rowH, v = val(r) || 0, w = v / max * (W - left - right);
      svg.append(s('text', { x: left - 6, y: y + 12, 'text-anchor': 'end' }, r.strategy));
      if (v > 0) svg.append(s('rect', { class: cls, x: left, y: y + 2, width: Math.max(w, 2), height: rowH - 5 }));
      svg.append(s('text', { x: left + Math.max(w, 0) + 5, y: y + 12 }, num(v)));
    });
  }

  /* Empties the view's box; when its results file is missing, says which
   * script writes it there (what, in brackets, it runs) and returns null. */
  function resultsBox(id, csv, file, script, what) {
    const box = $(id);
    box.textContent = '';
    if (csv) return box;
    box.append(h('p', { class: 'hint' }, `No results/${file} beside this instance: ${script} (${what}) writes it there; ` +
      'this view shows it when the file exists.'));
    return null;
  }

  function renderMatrix() {
    const box = resultsBox('matrix', S.matrix, 'matrix.csv', 'scripts/matrix.sh', 'every strategy under every fault');
    if (!box) return;
    const hd = S.matrix.header, ix = (k) => hd.indexOf(k);
    if (ix('strategy') < 0 || ix('nemesis') < 0 || ix('verdict') < 0) { box.append(csvTable(S.matrix)); return; }
    /* scripts/matrix.sh's long form (one row per strategy and fault), as a
     * table of strategies by faults. */
    const nemeses = [], cells = new Map(), order = [];
    for (const c of S.matrix.rows) {
      const st = c[ix('strategy')], n = c[ix('nemesis')];
      if (!nemeses.includes(n)) nemeses.push(n);
      if (!order.includes(st)) order.push(st);
      cells.set(st + '|' + n, c);
    }
    const words = { safe: ['\u2713 safe', 'ok'], unsafe: ['\u2717 unsafe', 'bad'], unavailable: ['\u2298 unavailable', 'na'],
      error: ['\u2717 error', 'bad'] };
    box.append(h('p', { class: 'hint' }, 'From results/matrix.csv, written by scripts/matrix.sh: each strategy under each fault. ' +
      'A cell: the verdict, then oversold units / units sold twice / overlapping holds / share of the requests served after ' +
      'the fault struck; a verdict the expected file does not allow is outlined, with what was expected.'));
    const t = h('table', { class: 'matrix', id: 'matrix-table' }, h('caption', { class: 'hint' }, 'Strategies by fault'));
    t.append(h('thead', {}, h('tr', {}, h('th', { scope: 'col', class: 'l' }, 'strategy'), nemeses.map((n) => h('th', { scope: 'col', class: 'l' }, n)))));
    const body = h('tbody');
    for (const st of order) {
      body.append(h('tr', {}, h('th', { scope: 'row', class: 'l' }, h('code', {}, st)), nemeses.map((n) => {
        const c = cells.get(st + '|' + n);
        if (!c) return h('td', { class: 'l' }, '');
        const v = c[ix('verdict')], [word, cls] = words[v] || [v, ''];
        const td = h('td', { class: 'l cell ' + cls + (c[ix('agrees')] === 'no' ? ' disagrees' : '') }, h('span', { class: 'word' }, word));
        const nums = ['oversold_units', 'sold_twice', 'overlapping_holds', 'served_share'].map((k) => ix(k) >= 0 ? c[ix(k)] : '');
        if (nums.some((x) => x !== '')) td.append(h('br'), h('span', { class: 'hint' }, nums.join(' / ')));
        if (c[ix('agrees')] === 'no') td.append(h('br'), h('b', {}, `expected ${c[ix('expected')]}`));
        return td;
      })));
    }
    t.append(body);
    box.append(h('div', { class: 'compare-wrap' }, t));
  }

  /* Any other CSV, as it is. */
  function csvTable(csv) {
    const t = h('table', { class: 'matrix', id: 'matrix-table' }, h('caption', { class: 'hint' }, 'results/matrix.csv'));
    t.append(h('thead', {}, h('tr', {}, csv.header.map((x) => h('th', { scope: 'col', class: 'l' }, x)))));
    t.append(h('tbody', {}, csv.rows.map((row) => h('tr', {}, row.map((c) => h('td', { class: 'l' }, c))))));
    return t;
  }

  /* ---- campaigns ------------------------------------------------------------------ */

  /* results/campaign.csv (scripts/campaign.sh): one row per strategy and mix,
   * the violation rate with its Wilson 95% interval, drawn as a bar with
   * whiskers beside the numbers; and, when a campaign was shrunk, its
   * counterexample (results/campaign-counterexample.json) on a timeline of
   * the holds, as the lab draws them. */
  function renderCampaigns() {
    const box = resultsBox('campaign', S.campaign, 'campaign.csv', 'scripts/campaign.sh',
      'seeded random faults, many runs per strategy and mix');
    if (box) {
      const hd = S.campaign.header, ix = (k) => hd.indexOf(k);
      const need = ['strategy', 'mix', 'seeds', 'violating_seeds', 'rate', 'ci_low', 'ci_high', 'covered_seeds'];
      if (need.some((k) => ix(k) < 0)) box.append(csvTable(S.campaign));
      else box.append(campaignTable(S.campaign, ix));
    }
    renderCounterexample();
  }

  /* The covered seeds a clean cell needs before it counts as safe:
   * scripts/campaign.sh's --min-covered default (docs/campaign.md, Coverage).
   * campaign.csv does not carry the threshold a run used, so a cell of a
   * --quick run (which asks for 1) is judged by this standard too. */
  const CAMPAIGN_MIN_COVERED = 10;

  function campaignTable(csv, ix) {
    const pct = (x) => (100 * +x).toFixed(0) + '%';
    /* one SVG per row: 0-100% scale, the rate as a bar, the interval as whiskers */
    const bar = (rate, lo, hi) => {
      const W = 160, H = 16, X = (v) => 2 + v * (W - 4);
      return s('svg', { class: 'ci', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img',
        'aria-label': `rate ${pct(rate)}, 95% interval ${pct(lo)} to ${pct(hi)}` },
        s('rect', { class: 'ci-track', x: 2, y: 5, width: W - 4, height: 6 }),
        +rate > 0 ? s('rect', { class: 'ci-bar', x: 2, y: 3, width: Math.max(X(+rate) - 2, 1.5), height: 10 }) : null,
        s('line', { class: 'ci-whisker', x1: X(+lo), y1: 8, x2: X(+hi), y2: 8 }),
        s('line', { class: 'ci-whisker', x1: X(+lo), y1: 3, x2: X(+lo), y2: 13 }),
        s('line', { class: 'ci-whisker', x1: X(+hi), y1: 3, x2: X(+hi), y2: 13 }));
    };
    const wrap = h('div', { class: 'compare-wrap' });
    wrap.append(h('p', { class: 'hint' }, 'From results/campaign.csv, written by scripts/campaign.sh: for each strategy ' +
      'and fault mix, the seeds whose run inventory-check found unsafe (a unit sold twice, overlapping holds, a write past ' +
      'its lease, a stale-token write, a lost sale), out of all seeds, with the Wilson 95% interval. Covered: seeds whose ' +
      'faults reached the mix\u2019s dangerous state. A cell without violations but with fewer than ' + CAMPAIGN_MIN_COVERED +
      ' covered seeds (the campaign\u2019s --min-covered) proves nothing: it is grey and marked inconclusive, not green.'));
    const t = h('table', { class: 'matrix campaign', id: 'campaign-table' }, h('caption', { class: 'hint' }, 'Violating seeds by strategy and mix'));
    t.append(h('thead', {}, h('tr', {}, ['strategy', 'mix', 'violating seeds', 'rate (95% interval)', '', 'covered seeds',
      'first violating seed', 'units sold twice'].map((x) => h('th', { scope: 'col', class: 'l' }, x)))));
    const body = h('tbody');
    for (const c of csv.rows) {
      const bad = +c[ix('violating_seeds')] > 0, covered = +c[ix('covered_seeds')];
      const thin = !bad && !(covered >= CAMPAIGN_MIN_COVERED);
      const verdict = h('td', { class: 'l cell ' + (bad ? 'bad' : thin ? 'na inconclusive' : 'ok') },
        h('span', { class: 'word' }, `${c[ix('violating_seeds')]} of ${c[ix('seeds')]}`));
      if (thin) verdict.append(h('br'), h('span', { class: 'hint' }, `inconclusive: ${covered} covered, ${CAMPAIGN_MIN_COVERED} wanted`));
      body.append(h('tr', {},
        h('th', { scope: 'row', class: 'l' }, h('code', {}, c[ix('strategy')])),
        h('td', { class: 'l' }, c[ix('mix')]),
        verdict,
        h('td', { class: 'l' }, `${pct(c[ix('rate')])} (${pct(c[ix('ci_low')])}\u2013${pct(c[ix('ci_high')])})`),
        h('td', { class: 'l' }, bar(c[ix('rate')], c[ix('ci_low')], c[ix('ci_high')])),
        h('td', { class: 'l' }, c[ix('covered_seeds')]),
        h('td', { class: 'l' }, ix('first_violating_seed') >= 0 ? c[ix('first_violating_seed')] || '\u2013' : ''),
        h('td', { class: 'l' }, ix('sold_twice_total') >= 0 ? c[ix('sold_twice_total')] : '')));
    }
    t.append(body);
    wrap.append(t);
    return wrap;
  }

  /* The shrunk counterexample: one lane per instance, each hold a bar from
   * its grant to its end as inventory-check gave it (inside_until_us: its
   * release, cut at its lease, and on to its write when that applied
   * later), the lease deadline a dashed tick, the write's apply time a
   * diamond; the holds of the pairs inventory-check found inside at once
   * (overlaps) are hatched red. */
  function renderCounterexample() {
    const box = $('counterexample'), svg = $('counterexample-svg');
    box.textContent = '';
    svg.textContent = '';
    const ce = S.counterexample;
    const evs = ce && Array.isArray(ce.events) ? ce.events : [];
    if (!ce) {
      svg.hidden = true;
      box.append(h('p', { class: 'hint' }, 'No shrunk counterexample: scripts/campaign.sh --shrink DIR writes ' +
        'results/campaign-counterexample.json from a violating seed.'));
      return;
    }
    box.append(h('p', {}, h('b', {}, `${ce.strategy || '?'} under ${ce.mix || '?'}, seed ${ce.seed ?? '?'}: `), ce.detail || ce.kind || ''),
      h('p', { class: 'hint' }, 'Smallest fault schedule that still violated: ' + (ce.faults || 'none')));
    if (!evs.length) { svg.hidden = true; return; }
    svg.hidden = false;
    const end = (e) => Math.max(e.inside_until_us, e.granted_us);
    const overlapping = new Set();
    for (const p of Array.isArray(ce.overlaps) ? ce.overlaps : []) { overlapping.add(p.a); overlapping.add(p.b); }
    const t0 = Math.min(...evs.map((e) => e.granted_us));
    const t1 = Math.max(...evs.map((e) => Math.max(end(e), e.written_us || 0, e.lease_us || 0)));
    const lanes = [...new Set(evs.map((e) => e.instance))];
    const W = 900, left = 110, right = 20, top = 24, rowH = 22;
    const rows = evs.map((e, i) => ({ e, i, lane: lanes.indexOf(e.instance) }));
    const H = top + lanes.length * (rowH * Math.max(...lanes.map((l) => evs.filter((e) => e.instance === l).length)) + 10) + 30;
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('height', H);
    const X = (t) => left + (t - t0) / Math.max(t1 - t0, 1) * (W - left - right);
    svg.append(s('defs', {}, s('pattern', { id: 'hatch3', patternUnits: 'userSpaceOnUse', width: 7, height: 7, patternTransform: 'rotate(45)' },
      s('rect', { width: 7, height: 7, fill: '#c62828' }), s('line', { x1: 1.5, y1: 0, x2: 1.5, y2: 7, stroke: '#fff', 'stroke-width': 2.2 }))));
    const perLane = Math.max(...lanes.map((l) => evs.filter((e) => e.instance === l).length));
    lanes.forEach((l, k) => {
      const y = top + k * (rowH * perLane + 10);
      svg.append(s('rect', { class: 'lane-bg', x: left, y, width: W - left - right, height: rowH * perLane }),
        s('text', { x: 6, y: y + 14 }, `instance ${l}`));
    });
    const seen = new Map();
    for (const { e, lane } of rows) {
      const k = seen.get(lane) || 0;
      seen.set(lane, k + 1);
      const y = top + lane * (rowH * perLane + 10) + k * rowH + 3;
      const cls = 'hold' + (overlapping.has(e.id) ? ' overlap' : '') + (e.outcome !== 'sold' ? ' refused' : '');
      const bar = s('rect', { class: cls, x: X(e.granted_us), y, width: Math.max(X(end(e)) - X(e.granted_us), 2), height: rowH - 8 },
      s('title', {}, `${e.order}: ${e.outcome} unit ${e.unit}${e.token ? ' token ' + e.token : ''}, held ${dur(end(e) - e.granted_us)}` +
        (e.owned === 0 ? ', written when the lock was no longer its own' : '')));
      svg.append(bar, s('text', { class: 'bar-label', x: X(e.granted_us) + 3, y: y + rowH - 11 }, `${e.outcome} ${e.unit || ''}`));
      if (e.lease_us > 0 && e.lease_us <= t1)
        svg.append(s('line', { class: 'lease-tick', x1: X(e.lease_us), y1: y - 2, x2: X(e.lease_us), y2: y + rowH - 6 }));
      if (e.written_us)
        svg.append(s('path', { class: 'late-mark', d: `M${X(e.written_us)} ${y + (rowH - 8) / 2 - 5} l5 5 l-5 5 l-5 -5 Z` }));
    }
    svg.append(s('text', { x: left, y: H - 8, class: 'muted' }, '0'),
      s('text', { x: W - right, y: H - 8, class: 'muted', 'text-anchor': 'end' }, '+' + dur(t1 - t0)));
    const t = h('table', { class: 'matrix', id: 'counterexample-table' }, h('caption', { class: 'hint' }, 'The holds of the counterexample'));
    t.append(h('thead', {}, h('tr', {}, ['instance', 'order', 'outcome', 'unit', 'token', 'granted', 'sent', 'lease deadline', 'applied', 'lock still its own']
      .map((x) => h('th', { scope: 'col', class: 'l' }, x)))));
    t.append(h('tbody', {}, evs.map((e) => h('tr', {}, [e.instance, e.order, e.outcome, e.unit, e.token || '\u2013',
      '+' + dur(e.granted_us - t0), '+' + dur(e.released_us - t0), e.lease_us ? '+' + dur(e.lease_us - t0) : '\u2013',
      e.written_us ? '+' + dur(e.written_us - t0) : '\u2013', e.owned === 1 ? 'yes' : e.owned === 0 ? 'no' : '?']
      .map((c) => h('td', { class: 'l' }, String(c)))))));
    box.append(h('div', { class: 'compare-wrap' }, t));
  }

  document.addEventListener('DOMContentLoaded', boot);
})();
