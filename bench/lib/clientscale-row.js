'use strict'
// One row of the client-scale section (bench/sections/clientscale.js) in a fresh process of its
// own, so its peak RSS (VmHWM) is the row's alone: `node clientscale-row.js <config JSON>` with
// {row, origin, outputs, dataDir, catalogue}. Each row receives the provider's whole snapshot of
// `outputs` outputs over loopback HTTP and throws unless it holds exactly that many, so a partial
// drain is never measured. The result goes back over IPC (to stdout without a channel).
//   raw        fetch + JSON.parse of every page, following cursors; nothing stored
//   sqlite     the same loop into better-sqlite3 (WAL, synchronous=FULL), one transaction per page
//   client     LiveLookupClient + CheckpointStore, default options, no reconciler
//   verifying  the same with the reconciler, a chainTracker and the native verifier
//   verify     the raw drain with every output's bundle verified natively as the verifier does
//              (the same batches, the chain tracker's answers), nothing stored: what verifying
//              100,000 outputs costs on this machine before any store

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { LiveLookupClient, CheckpointStore } = require('../../js/client/client')
const { PROFILE, PROFILE_LIMITS, digest } = require('../../js/common/wire')
const { CHAIN } = require('../../__test__/helpers/live')
const { dirBytes, peakRssBytes, writtenBytes } = require('./common')
const { trackerOf } = require('./p2pkh-catalogue')
const { monitorEventLoopDelay } = require('node:perf_hooks')

// How long the JS thread (the application's thread) was kept from its event loop while the row
// received (and, for the verifying row, verified): a row stops it where its measured work ends,
// before its own checks read the store back.
const loop = monitorEventLoopDelay({ resolution: 10 })
const measured = () => loop.disable()

const SERVICE = 'ls_notes'
const QUERY = { author: 'alice' }
// The client's default page: the profile's maxima (1,024 observations, 4 MiB); no long poll.
const LIMITS = { maxBytes: PROFILE_LIMITS.maxResponseBytes, maxObservations: PROFILE_LIMITS.maxObservations, waitMs: 0 }

function expectOutputs (what, got, outputs) {
  if (got !== outputs) throw new Error(`${what}: received ${got} outputs, expected ${outputs}`)
}

/**
 * The selection headers of every POST (BRC-194 §1): the capability digest is that of the
 * manifest's body, fetched as a client does before its first request.
 */
async function selectionHeaders (origin) {
  const res = await fetch(origin + '/overlay/v1/capabilities', { headers: { 'cache-control': 'no-store' } })
  if (res.status !== 200) throw new Error(`capabilities answered ${res.status}`)
  const signed = JSON.parse(await res.text())
  return {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    'x-bsv-overlay-profile': PROFILE,
    'x-bsv-overlay-capability': digest('capabilities', signed.body)
  }
}

async function post (origin, headers, op, body) {
  const res = await fetch(`${origin}/overlay/v1/lookup/${op}`, { method: 'POST', headers, body: JSON.stringify(body) })
  const bytes = Buffer.from(await res.arrayBuffer())
  if (res.status !== 200) throw new Error(`${op} answered ${res.status}: ${bytes.toString('utf8', 0, 300)}`)
  return bytes
}

/**
 * Open and reads until the snapshot is complete, every page parsed; `onPage(batch)` runs (and is
 * awaited) before the page's cursor is used. Resolves {outputs, observations, pages, wireBytes,
 * session, headers}.
 */
async function drain (origin, onPage) {
  const headers = await selectionHeaders(origin)
  const open = { version: 1, requestId: crypto.randomBytes(16).toString('hex'), service: SERVICE, query: QUERY, limits: LIMITS }
  let bytes = await post(origin, headers, 'open', open)
  let outputs = 0
  let observations = 0
  let pages = 0
  let wireBytes = 0
  for (;;) {
    const batch = JSON.parse(bytes.toString('utf8'))
    pages++
    wireBytes += bytes.length
    for (const g of batch.groups) {
      observations += g.observations.length
      for (const o of g.observations) if (o.kind === 'output') outputs++
    }
    await onPage(batch)
    if (batch.snapshotComplete) return { outputs, observations, pages, wireBytes, session: batch.session, headers }
    bytes = await post(origin, headers, 'read', { version: 1, session: batch.session, cursor: batch.cursor, limits: LIMITS })
  }
}

/** Closes the row's session on the provider (outside the timing), so sessions do not pile up. */
function closeSession (origin, d) {
  return post(origin, d.headers, 'close', { version: 1, session: d.session })
}

async function rawRow ({ origin, outputs }) {
  const t0 = performance.now()
  const d = await drain(origin, () => {})
  const receiptMs = performance.now() - t0
  measured()
  await closeSession(origin, d)
  expectOutputs('raw', d.outputs, outputs)
  return { receiptMs, pages: d.pages, wireBytesPerObservation: d.wireBytes / d.observations, diskBytes: null }
}

/**
 * The raw drain, with each page's bundles verified on the libuv pool in the verifier's own
 * batches (`verifyBeefBatch`, `settle` with a cached tracker) while the next page is read; at
 * most two pages' verifications are in flight, as a bound. Receipt is the drain; all current is
 * when every bundle is verified. Throws unless every output verified.
 */
async function verifyRow ({ origin, outputs, catalogue }) {
  const native = require('../../js/common/native')
  const { settle, cachedTracker, nativeOptions, VERIFIER_DEFAULTS: D } = require('../../js/client/verifier')
  const tracker = cachedTracker(trackerOf(catalogue))
  const opts = nativeOptions(D)
  let verified = 0
  const verifyPage = async (jobs) => {
    const batches = []
    for (let i = 0; i < jobs.length; i += D.batch) batches.push(jobs.slice(i, i + D.batch))
    // The verifier's `concurrency` workers: batches on the pool, that many at a time.
    let next = 0
    const worker = async () => {
      while (next < batches.length) {
        const b = batches[next++]
        const out = await native.verifyBeefBatch(b, opts)
        for (const v of out) {
          const r = await settle(v, tracker)
          if (r.status !== 'verified') throw new Error(`verify: ${r.status}: ${r.reason}`)
          verified++
        }
      }
    }
    await Promise.all(Array.from({ length: D.concurrency }, worker))
  }
  const inFlight = []
  const t0 = performance.now()
  const d = await drain(origin, async (batch) => {
    const jobs = []
    for (const g of batch.groups) {
      for (const o of g.observations) {
        const ev = o.kind === 'output' ? o.payload.evidence : null
        if (ev) jobs.push({ beef: Buffer.from(ev.beef, 'base64'), txid: ev.txid })
      }
    }
    inFlight.push(verifyPage(jobs))
    if (inFlight.length > 2) await inFlight.shift()
  })
  const receiptMs = performance.now() - t0
  await Promise.all(inFlight)
  const allCurrentMs = performance.now() - t0
  measured()
  await closeSession(origin, d)
  expectOutputs('verify (outputs)', d.outputs, outputs)
  expectOutputs('verify (verified)', verified, outputs)
  return { receiptMs, allCurrentMs, pages: d.pages, wireBytesPerObservation: d.wireBytes / d.observations, diskBytes: null }
}

// A plain SQLite client: one row per observation (its fields, the evidence as a BLOB), the
// session, cursor and scope in one checkpoint row, each page in one transaction.
const SCHEMA = `
CREATE TABLE observations (
  id TEXT PRIMARY KEY, group_id TEXT NOT NULL, sequence TEXT NOT NULL, kind TEXT NOT NULL,
  txid TEXT, output_index INTEGER, context TEXT, beef BLOB
);
CREATE TABLE checkpoint (
  id INTEGER PRIMARY KEY CHECK (id = 1), session TEXT NOT NULL, cursor TEXT NOT NULL, scope TEXT NOT NULL,
  through TEXT NOT NULL, snapshot_complete INTEGER NOT NULL
);`

async function sqliteRow ({ origin, outputs, dataDir }) {
  const Database = require('better-sqlite3')
  const t0 = performance.now()
  const db = new Database(path.join(dataDir, 'client.sqlite'))
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.exec(SCHEMA)
  const insert = db.prepare('INSERT INTO observations VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
  const checkpoint = db.prepare('INSERT OR REPLACE INTO checkpoint VALUES (1, ?, ?, ?, ?, ?)')
  const commit = db.transaction((batch) => {
    for (const g of batch.groups) {
      for (const o of g.observations) {
        const p = o.payload
        const ev = o.kind === 'output' ? p.evidence : null
        insert.run(o.id, g.id, g.sequence, o.kind, ev ? ev.txid : null, ev ? ev.outputIndex : null,
          p.context ? JSON.stringify(p.context) : null, ev ? Buffer.from(ev.beef, 'base64') : null)
      }
    }
    checkpoint.run(batch.session, batch.cursor, JSON.stringify(batch.scope), batch.through, batch.snapshotComplete ? 1 : 0)
  })
  const d = await drain(origin, commit)
  const receiptMs = performance.now() - t0
  measured()
  await closeSession(origin, d)
  const stored = db.prepare("SELECT COUNT(*) AS n FROM observations WHERE kind = 'output'").get().n
  db.close()
  expectOutputs('sqlite', stored, outputs)
  return { receiptMs, pages: d.pages, wireBytesPerObservation: d.wireBytes / d.observations, diskBytes: dirBytes(dataDir) }
}

/**
 * Follows the query until its snapshot is committed (`snapshot-complete`); resolves the
 * receipt time, the source key and how often receipt paused for verification. A provider that
 * stops answering fails the row rather than leaving the follow retrying.
 */
async function receive (client, membership) {
  const ac = new AbortController()
  let receiptMs = null
  let key = null
  let paused = 0 // reads put off for one poll interval each: the pending budget was full
  const t0 = performance.now()
  await client.follow(SERVICE, QUERY, {
    signal: ac.signal,
    ...(membership ? { membership } : {}),
    // `OLL_BENCH_BUDGET`: the follow's `pendingBudget` instead of its default (to measure what
    // receipt's pauses for verification cost; bench/client-layout-results.md, "CPU budget").
    ...(process.env.OLL_BENCH_BUDGET ? { pendingBudget: Number(process.env.OLL_BENCH_BUDGET) } : {}),
    onState ({ connection, progress, sourceKey, error }) {
      if (connection === 'retrying') throw new Error(`provider unreachable: ${error && error.message}`)
      if (connection === 'paused') paused++
      if (connection === 'connected' && progress === 'snapshot-complete') {
        receiptMs = performance.now() - t0
        key = sourceKey
        ac.abort()
      }
    }
  })
  if (receiptMs === null) throw new Error('the follow ended before its snapshot was complete')
  return { receiptMs, key, t0, paused }
}

// `OLL_BENCH_CACHE_MB`: open the client's store with this page cache instead of the default
// (to measure what the bound changes; bench/RESULTS.md section 16 says which runs set it).
const storeOptions = process.env.OLL_BENCH_CACHE_MB ? { cacheBytes: Number(process.env.OLL_BENCH_CACHE_MB) * 1048576 } : undefined

/** Outputs a reopened store lists as present members of `key` (read after the measurements). */
function presentMembers (storeDir, key) {
  const store = CheckpointStore.open(storeDir)
  try {
    return store.members(key).filter(m => m.present).length
  } finally {
    store.close()
  }
}

async function clientRow ({ origin, outputs, dataDir }) {
  const storeDir = path.join(dataDir, 'client')
  const store = CheckpointStore.open(storeDir, storeOptions)
  const client = new LiveLookupClient({ baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 } })
  // No chainTracker, so nothing verifies: the rule must be chosen (docs/client.md).
  const { receiptMs, key } = await receive(client, 'claims')
  measured()
  await client.close(key)
  const received = store.state(key).received
  store.close()
  const diskBytes = dirBytes(dataDir)
  const peak = peakRssBytes()
  // One output per snapshot group: groups received and members present both count outputs.
  expectOutputs('client (groups received)', received, outputs)
  expectOutputs('client (members present)', presentMembers(storeDir, key), outputs)
  return { receiptMs, diskBytes, peakRssBytes: peak }
}

async function verifyingRow ({ origin, outputs, dataDir, catalogue }) {
  const storeDir = path.join(dataDir, 'client')
  const tracker = trackerOf(catalogue)
  const store = CheckpointStore.open(storeDir, storeOptions)
  // The reconciler's chain context: a tip far above the catalogue's blocks.
  store.defineContext('tip', { tipHeight: String(tracker.height + 1000000), medianTimePast: '4000000000' })
  store.configureReconciler({ journalId: 'bench', nonFinal: true, initialContext: 'tip' })
  // `OLL_BENCH_ACCEPT_EVERY` / `OLL_BENCH_ACCEPT_MS`: the verifier's `acceptEvery` / `acceptMs`
  // instead of their defaults (how results are grouped into commits; docs/client.md).
  const client = new LiveLookupClient({
    baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 }, chainTracker: tracker, verification: { engine: 'native', ...(process.env.OLL_BENCH_ACCEPT_EVERY ? { acceptEvery: Number(process.env.OLL_BENCH_ACCEPT_EVERY) } : {}), ...(process.env.OLL_BENCH_ACCEPT_MS ? { acceptMs: Number(process.env.OLL_BENCH_ACCEPT_MS) } : {}) }
  })
  const { receiptMs, key, t0, paused } = await receive(client, null) // default membership: 'verified'
  // Verification runs on after receipt; all outputs are current once it is idle with nothing pending.
  await client.verifier.idle()
  const allCurrentMs = performance.now() - t0
  measured()
  if (client.verificationError) throw client.verificationError
  await client.close(key)
  const pending = store.pendingVerifications(null, { limit: 1 }).length
  const received = store.state(key).received
  store.close()
  const diskBytes = dirBytes(dataDir)
  const peak = peakRssBytes()
  if (pending !== 0) throw new Error(`verifying: ${pending} verification job(s) still pending`)
  expectOutputs('verifying (groups received)', received, outputs)
  const reopened = CheckpointStore.open(storeDir)
  let current
  try {
    current = reopened.reconciledView().current.length
    // `OLL_BENCH_SPACE=1`: where the verifying row's disk went, per key space, on stderr;
    // `OLL_BENCH_KEEP=<dir>`: a copy of the row's store is left there, to inspect.
    if (process.env.OLL_BENCH_SPACE) process.stderr.write(JSON.stringify(reopened.spaceUsage(), null, 1) + '\n')
    if (process.env.OLL_BENCH_KEEP) fs.cpSync(storeDir, process.env.OLL_BENCH_KEEP, { recursive: true })
  } finally {
    reopened.close()
  }
  expectOutputs('verifying (current)', current, outputs)
  expectOutputs('verifying (members present)', presentMembers(storeDir, key), outputs)
  return { receiptMs, allCurrentMs, diskBytes, peakRssBytes: peak, paused }
}

const ROWS = { raw: rawRow, verify: verifyRow, sqlite: sqliteRow, client: clientRow, verifying: verifyingRow }

/** Runs one row; the figures every row reports, peak RSS read once the row's work is done. */
async function runRow (cfg) {
  const fn = ROWS[cfg.row]
  if (!fn) throw new Error(`unknown row ${cfg.row} (rows: ${Object.keys(ROWS).join(', ')})`)
  fs.mkdirSync(cfg.dataDir, { recursive: true })
  loop.enable()
  const r = await fn(cfg)
  measured()
  return {
    row: cfg.row,
    outputs: cfg.outputs,
    receiptMs: r.receiptMs,
    obsPerSec: cfg.outputs / r.receiptMs * 1000,
    allCurrentMs: r.allCurrentMs ?? null,
    diskBytes: r.diskBytes,
    diskBytesPerOutput: r.diskBytes === null ? null : r.diskBytes / cfg.outputs,
    peakRssBytes: r.peakRssBytes ?? peakRssBytes(),
    writtenBytes: writtenBytes(),
    pages: r.pages ?? null,
    paused: r.paused ?? null,
    // The longest delay of the event loop (ms) and its 99th percentile.
    loopDelayMaxMs: loop.max / 1e6,
    loopDelayP99Ms: loop.percentile(99) / 1e6,
    wireBytesPerObservation: r.wireBytesPerObservation ?? null
  }
}

async function main () {
  const result = await runRow(JSON.parse(process.argv[2]))
  if (process.send) await new Promise(resolve => process.send({ ok: true, result }, resolve))
  else process.stdout.write(JSON.stringify(result, null, 2) + '\n')
}

if (require.main === module) {
  main().then(() => process.exit(0), (err) => {
    const message = err && err.stack ? err.stack : String(err)
    if (process.send) process.send({ ok: false, error: message }, () => process.exit(1))
    else { process.stderr.write(message + '\n'); process.exit(1) }
  })
}

module.exports = { ROWS: Object.keys(ROWS), runRow }
