#!/usr/bin/env node
// peer.js -- lockbench's work done with a Node.js Redis lock library, for
// loadtest/bench.sh --peers: C clients sell one stock under one lock until
// it is gone, and the run is measured and audited as lockbench's is.
//
//   node peer.js --lib redlock5|redlock4|semaphore --clients C
//                [--procs P] [--redis H:P] [--redlock H:P,H:P,H:P]
//                [--stock N] [--ttl-ms MS] [--retry-ms MS] [--max-s S]
//
// The work of one sale, as lockbench's (tools/lockbench.c) with the audit
// probe and the history off: acquire the lock RedisDistributedLock; GET
// inventory001; if above 0, SET it to stock-1 and RPUSH "unit|order|0" to
// inventory001:sold (one round trip, pipelined); release. A client that
// reads 0 stops.
//
// The libraries: redlock5 is node-redlock 5 (npm redlock@5.0.0-beta.2) on
// the one Redis; redlock4 is node-redlock 4 (redlock@4.2.0) on the three
// masters of --redlock (the stock stays on --redis, as lockbench's redlock
// does); semaphore is redis-semaphore's Mutex on the one Redis. Each uses
// ioredis. A busy lock is retried every --retry-ms (10; redis-semaphore's
// own default, and redlock's 200 ms default cut to it) plus up to as much
// random jitter (redlock), without bound on the count.
//
// Node runs JavaScript on one thread, so one process cannot use a second
// core: peer.js forks --procs worker processes (default: the number of
// cores), gives each its share of the C clients (async loops on one ioredis
// connection per server, which pipelines them), starts them together, and
// adds up their counts. Sales/s is units sold over the time from the start
// to the last unit's sale, on the monotonic clock every process shares.
//
// Prints one key=value line: peer clients procs sold elapsed_s sales_per_s
// sold_twice oversold remaining complete errors. Exit status: 0 when the
// audit passed, 1 when a unit was sold twice or oversold, 2 on bad usage
// or set-up failure, 3 when the stock was not sold out within --max-s.
'use strict';
const { fork } = require('child_process');
const os = require('os');
const Redis = require('ioredis');

const STOCK = 'inventory001';
const LEDGER = 'inventory001:sold';
const LOCK = 'RedisDistributedLock';

function parse(argv) {
  const o = { lib: '', clients: 16, procs: os.cpus().length, redis: '127.0.0.1:6379',
              redlock: '127.0.0.1:6381,127.0.0.1:6382,127.0.0.1:6383', stock: 2000,
              ttlMs: 10000, retryMs: 10, maxS: 300 };
  const names = { '--lib': 'lib', '--clients': 'clients', '--procs': 'procs', '--redis': 'redis',
                  '--redlock': 'redlock', '--stock': 'stock', '--ttl-ms': 'ttlMs',
                  '--retry-ms': 'retryMs', '--max-s': 'maxS' };
  for (let i = 0; i < argv.length; i += 2) {
    const k = names[argv[i]];
    if (!k || i + 1 >= argv.length) usage(`unknown or incomplete option '${argv[i]}'`);
    o[k] = typeof o[k] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
    if (typeof o[k] === 'number' && !(Number.isInteger(o[k]) && o[k] >= 0)) usage(`${argv[i]} needs a whole number`);
  }
  if (!['redlock5', 'redlock4', 'semaphore'].includes(o.lib)) usage('--lib must be redlock5, redlock4 or semaphore');
  if (o.clients < 1 || o.procs < 1 || o.stock < 1) usage('--clients, --procs and --stock must be above 0');
  if (o.procs > o.clients) o.procs = o.clients;
  return o;
}

function usage(why) {
  process.stderr.write(`peer.js: ${why}\nusage: node peer.js --lib redlock5|redlock4|semaphore --clients C ` +
                       `[--procs P] [--redis H:P] [--redlock H:P,...] [--stock N] [--ttl-ms MS] ` +
                       `[--retry-ms MS] [--max-s S]\n`);
  process.exit(2);
}

function connect(hp) {
  const [host, port] = hp.split(':');
  return new Redis({ host, port: Number(port), lazyConnect: false, maxRetriesPerRequest: 1,
                     enableOfflineQueue: true });
}

// ---- a worker: its clients' loops ----------------------------------------

function makeLock(o, main) {
  if (o.lib === 'redlock5') {
    const Redlock = require('redlock5').default;
    const rl = new Redlock([main], { retryCount: -1, retryDelay: o.retryMs, retryJitter: o.retryMs,
                                     automaticExtensionThreshold: 500 });
    rl.on('error', () => {});   // a busy attempt is reported here too: not an error
    return { acquire: () => rl.acquire([LOCK], o.ttlMs), release: (l) => l.release() };
  }
  if (o.lib === 'redlock4') {
    const Redlock = require('redlock4');
    const masters = o.redlock.split(',').map(connect);
    const rl = new Redlock(masters, { retryCount: -1, retryDelay: o.retryMs, retryJitter: o.retryMs });
    rl.on('clientError', () => {});
    return { acquire: () => rl.lock(LOCK, o.ttlMs), release: (l) => l.unlock(), masters };
  }
  const { Mutex } = require('redis-semaphore');
  return {
    acquire: async () => {
      const m = new Mutex(main, LOCK, { lockTimeout: o.ttlMs, acquireTimeout: o.maxS * 1000,
                                        retryInterval: o.retryMs, refreshInterval: 0 });
      await m.acquire();
      return m;
    },
    release: (m) => m.release(),
  };
}

async function worker() {
  const o = JSON.parse(process.env.PEER_OPTIONS);
  const share = Number(process.env.PEER_SHARE);
  const main = connect(o.redis);
  const lock = makeLock(o, main);
  await main.ping();
  if (lock.masters) await Promise.all(lock.masters.map((m) => m.ping()));
  let sold = 0, errors = 0, lastSold = 0n, firstError = '';
  let seq = 0;
  const deadline = () => process.hrtime.bigint() > BigInt(o.deadlineNs);
  async function client() {
    for (;;) {
      if (deadline()) return;
      let l;
      try {
        l = await lock.acquire();
      } catch (e) {
        errors++;
        if (!firstError) firstError = String(e && e.message);
        continue;
      }
      let stock;
      try {
        stock = Number(await main.get(STOCK));
        if (stock > 0) {
          await main.pipeline().set(STOCK, stock - 1).rpush(LEDGER, `${stock}|${process.pid}-${++seq}|0`).exec();
          sold++;
          lastSold = process.hrtime.bigint();
        }
      } catch (e) {
        errors++;
        if (!firstError) firstError = String(e && e.message);
      }
      try {
        await lock.release(l);
      } catch (e) {
        errors++;
        if (!firstError) firstError = String(e && e.message);
      }
      if (stock <= 0) return;
    }
  }
  process.send({ ready: true });
  const go = await new Promise((resolve) => process.once('message', resolve));   // the start
  o.deadlineNs = go.deadlineNs;
  await Promise.all(Array.from({ length: share }, client));
  process.send({ sold, errors, lastSold: String(lastSold), firstError });
  main.disconnect();
  if (lock.masters) lock.masters.forEach((m) => m.disconnect());
}

// ---- the parent: reset, start, collect, audit ------------------------------

async function parent() {
  const o = parse(process.argv.slice(2));
  const main = connect(o.redis);
  await main.multi().set(STOCK, o.stock).del(LEDGER).del(LOCK).exec();
  if (o.lib === 'redlock4') {
    for (const hp of o.redlock.split(',')) {
      const m = connect(hp);
      await m.del(LOCK);
      m.disconnect();
    }
  }
  o.deadlineNs = String(process.hrtime.bigint() + BigInt(o.maxS) * 1000000000n + 30000000000n);
  const kids = [];
  for (let i = 0; i < o.procs; i++) {
    const share = Math.floor(o.clients / o.procs) + (i < o.clients % o.procs ? 1 : 0);
    const env = { ...process.env, PEER_OPTIONS: JSON.stringify(o), PEER_SHARE: String(share) };
    kids.push(fork(__filename, ['--worker'], { env }));
  }
  await Promise.all(kids.map((k) => new Promise((resolve, reject) => {
    k.once('message', resolve);
    k.once('exit', (code) => reject(new Error(`a worker exited (${code}) before it was ready`)));
  })));
  const t0 = process.hrtime.bigint();
  o.deadlineNs = String(t0 + BigInt(o.maxS) * 1000000000n);
  const results = kids.map((k) => new Promise((resolve) => k.once('message', resolve)));
  kids.forEach((k) => k.send({ go: true, deadlineNs: o.deadlineNs }));
  const rs = await Promise.all(results);
  let sold = 0, errors = 0, last = t0, firstError = '';
  for (const r of rs) {
    sold += r.sold;
    errors += r.errors;
    if (BigInt(r.lastSold) > last) last = BigInt(r.lastSold);
    if (!firstError && r.firstError) firstError = r.firstError;
  }
  const ledger = await main.lrange(LEDGER, 0, -1);
  const remaining = Number(await main.get(STOCK));
  main.disconnect();
  const units = new Map();
  let twice = 0;
  for (const e of ledger) {
    const u = e.split('|')[0];
    if (units.has(u)) twice++;
    units.set(u, true);
  }
  const oversold = remaining < 0 || ledger.length > o.stock - remaining || twice > 0;
  const elapsed = Number(last - t0) / 1e9;
  const complete = remaining === 0;
  process.stdout.write(`peer=${o.lib} clients=${o.clients} procs=${o.procs} stock=${o.stock} sold=${sold} ` +
                       `elapsed_s=${elapsed.toFixed(3)} sales_per_s=${elapsed > 0 ? (sold / elapsed).toFixed(1) : 0} ` +
                       `sold_twice=${twice} oversold=${oversold ? 1 : 0} remaining=${remaining} ` +
                       `complete=${complete ? 1 : 0} errors=${errors}\n`);
  if (firstError) process.stderr.write(`peer.js: ${errors} errors; first: ${firstError}\n`);
  process.exit(oversold ? 1 : complete ? 0 : 3);
}

if (process.argv[2] === '--worker') {
  worker().catch((e) => {
    process.stderr.write(`peer.js worker: ${e && e.stack}\n`);
    process.exit(2);
  });
} else {
  parent().catch((e) => {
    process.stderr.write(`peer.js: ${e && e.message}\n`);
    process.exit(2);
  });
}
