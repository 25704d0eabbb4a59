'use strict'
// Client receipt at catalogue speed (issue 33): a LiveLookupClient (public mode, loopback HTTP)
// drains an N-output snapshot from the project's server into a real sled store with the
// reconciler configured (evidence assembled and journaled at receipt), optionally verifying in
// the background. Measures receipt time, time until all outputs are current, and where the JS
// thread spent the receipt: native commits (commitBatchAsync, its time until durable), the verifier's store calls
// on the JS thread (pendingVerifications, verificationEvidence), their commits on the pool
// (acceptVerificationsAsync, its time until durable), and the rest (HTTP, JSON,
// the client loop, the in-process provider). Outputs are 1-input transactions spending an
// OP_TRUE output of a proven funding transaction (no signing, so a 100,000-output catalogue
// builds in seconds; the native verifier still runs the scripts and checks the Merkle path).
// The callback reads none of the event's lists (they are read on demand: docs/client.md).
// `bench/receipt.js` runs one configuration from the command line.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { LiveLookupClient, CheckpointStore } = require('../../js')
const { CHAIN } = require('../../__test__/helpers/live')
const { serveNotes, opTrueSpends } = require('../lib/notes-node')
const { LocalChainTracker } = require('../../demo/chain')
const { progress } = require('../lib/common')
const { monitorEventLoopDelay } = require('node:perf_hooks')

// The verifier's synchronous store calls (JS thread) and its commits (on the pool).
const VERIFIER_CALLS = ['pendingVerifications', 'verificationEvidence', 'requeueLimited']
const VERIFIER_ALL = [...VERIFIER_CALLS, 'acceptVerificationsAsync']

// Wraps a store method to add its time (ms) to `spent[name]` and count calls; for an async
// one (commitBatchAsync, acceptVerificationsAsync) the time until it settles.
function timed (store, name, spent) {
  const inner = store[name].bind(store)
  spent[name] = { ms: 0, calls: 0 }
  const add = t => { spent[name].ms += performance.now() - t; spent[name].calls++ }
  store[name] = (...args) => {
    const t = performance.now()
    let r
    try { r = inner(...args) } catch (e) { add(t); throw e }
    if (r && typeof r.then === 'function') return r.finally(() => add(t))
    add(t)
    return r
  }
}

/**
 * One receipt of `snapshot` outputs; `engine` null for no verifier, else 'native' or 'sdk'.
 * Throws unless every output ends current (with a verifier).
 */
async function measureReceipt ({ snapshot, engine = null, concurrency = 4 }) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-bench-receipt-'))
  try {
    const tracker = new LocalChainTracker()
    let t = performance.now()
    const txs = opTrueSpends(tracker, snapshot)
    const buildS = (performance.now() - t) / 1000
    t = performance.now()
    const node = await serveNotes(tmp, txs)
    const loadS = (performance.now() - t) / 1000

    const store = CheckpointStore.open(path.join(tmp, 'client'))
    store.defineContext('tip', { tipHeight: String(tracker.height + 1000000), medianTimePast: '4000000000' })
    store.configureReconciler({ journalId: 'bench', nonFinal: true, initialContext: 'tip' })
    const spent = {}
    for (const m of ['commitBatchAsync', ...VERIFIER_ALL, 'state', 'revisionSnapshot']) timed(store, m, spent)
    let received = 0
    const commit = store.commitBatchAsync
    store.commitBatchAsync = async (...args) => { const r = await commit(...args); received += r.applied; return r }
    // How long the JS thread went without turning (an application's timers and I/O wait
    // that long): the event loop's delay over the receipt.
    const loopDelay = monitorEventLoopDelay({ resolution: 5 })
    const client = new LiveLookupClient({
      baseURL: node.origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 },
      ...(engine ? { chainTracker: tracker, verification: { concurrency, engine } } : {})
    })
    const ac = new AbortController()
    let batches = 0
    const t0 = performance.now()
    loopDelay.enable()
    let receiptMs = 0
    await client.follow('ls_notes', { author: 'alice' }, {
      // As measured in the results: rows on receipt, the next page read while one commits.
      membership: 'claims',
      readAhead: true,
      signal: ac.signal,
      onRevision () {
        batches++
        if (received >= snapshot) { receiptMs = performance.now() - t0; loopDelay.disable(); ac.abort() }
      }
    })
    const atReceipt = Object.fromEntries(Object.entries(spent).map(([k, v]) => [k, { ...v }]))
    if (client.verifier) await client.verifier.idle()
    const doneMs = performance.now() - t0
    if (client.verificationError) throw client.verificationError
    const pending = engine ? store.pendingVerifications(null, { limit: 1 }).length : null
    const current = store.reconciledView().current.length
    if (engine && (pending !== 0 || current !== snapshot)) throw new Error(`not all current: pending ${pending}, current ${current}`)
    store.close()
    await node.close()
    const ms = names => names.reduce((s, k) => s + atReceipt[k].ms, 0)
    const c = atReceipt.commitBatchAsync
    return {
      snapshot,
      engine,
      buildS,
      loadS,
      batches,
      receiptMs,
      obsPerSec: snapshot / receiptMs * 1000,
      doneMs: engine ? doneMs : null,
      doneOverReceipt: engine ? doneMs / receiptMs : null,
      loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
      loopDelayMaxMs: loopDelay.max / 1e6,
      commitMs: c.ms,
      commitCalls: c.calls,
      verifierStoreMs: ms(VERIFIER_CALLS),
      stateMs: atReceipt.state.ms,
      revisionSnapshotMs: atReceipt.revisionSnapshot.ms,
      // The loop awaits each commit before its next read: the rest is everything else.
      restMs: receiptMs - c.ms,
      atReceipt,
      afterReceipt: Object.fromEntries(VERIFIER_ALL.map(k => [k, { ms: spent[k].ms - atReceipt[k].ms, calls: spent[k].calls - atReceipt[k].calls }]))
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

/** cfg.runs: [{snapshot, engine}], each measured once, in order. */
async function run (cfg) {
  const out = { cpus: os.cpus().length, runs: [] }
  for (const r of cfg.runs) {
    const m = await measureReceipt(r)
    progress(`receipt ${r.snapshot} outputs, verifier ${r.engine || 'none'}: received in ${(m.receiptMs / 1000).toFixed(2)} s` +
      (m.doneMs !== null ? `, all current ${(m.doneMs / 1000).toFixed(2)} s` : ''))
    out.runs.push(m)
  }
  return out
}

module.exports = { run, measureReceipt }
