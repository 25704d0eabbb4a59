#!/usr/bin/env node
'use strict'
// Client receipt at catalogue speed (issue 33): a LiveLookupClient (public mode, loopback HTTP)
// drains an N-output snapshot from the project's server into a real sled store with the
// reconciler configured (evidence assembled and journaled at receipt), optionally verifying in
// the background. Reports receipt time, time until all outputs are current, and where the JS
// thread spent the receipt: native commits (commitBatch), the verifier's store calls
// (pendingVerifications, verificationEvidence, acceptVerifications), and the rest (HTTP, JSON,
// the client loop). Outputs are 1-input transactions spending an OP_TRUE output of a proven
// funding transaction (no signing, so a 100,000-output catalogue builds in about a minute;
// the native verifier still runs the scripts and checks the Merkle path).
//
//   node bench/receipt.js [--snapshot 100000] [--verify 1] [--concurrency 4] [--engine native|sdk]

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { LiveLookupClient, CheckpointStore } = require('../js')
const { CHAIN } = require('../__test__/helpers/live')
const { serveNotes, opTrueSpends } = require('./lib/notes-node')
const { LocalChainTracker } = require('../demo/chain')

function arg (name, dflt) {
  const i = process.argv.indexOf('--' + name)
  return i < 0 ? dflt : process.argv[i + 1]
}
const SNAPSHOT = Number(arg('snapshot', 10000))
const VERIFY = arg('verify', '1') !== '0'
const CONCURRENCY = Number(arg('concurrency', 4))
const ENGINE = arg('engine', 'native')

// Wraps a store method to add its time (ms) to `spent[name]` and count calls.
function timed (store, name, spent) {
  const inner = store[name].bind(store)
  spent[name] = { ms: 0, calls: 0 }
  store[name] = (...args) => {
    const t = performance.now()
    try { return inner(...args) } finally { spent[name].ms += performance.now() - t; spent[name].calls++ }
  }
}

async function main () {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-bench-receipt-'))
  try {
    const tracker = new LocalChainTracker()
    let t = performance.now()
    const txs = opTrueSpends(tracker, SNAPSHOT)
    const buildS = (performance.now() - t) / 1000
    t = performance.now()
    const node = await serveNotes(tmp, txs)
    const origin = node.origin
    const loadS = (performance.now() - t) / 1000

    const store = CheckpointStore.open(path.join(tmp, 'client'))
    store.defineContext('tip', { tipHeight: String(tracker.height + 1000000), medianTimePast: '4000000000' })
    store.configureReconciler({ journalId: 'bench', nonFinal: true, initialContext: 'tip' })
    const spent = {}
    for (const m of ['commitBatch', 'pendingVerifications', 'verificationEvidence', 'acceptVerifications', 'requeueLimited', 'state', 'revisionSnapshot']) timed(store, m, spent)
    let received = 0
    const commit = store.commitBatch
    store.commitBatch = (...args) => { const r = commit(...args); received += r.applied; return r }
    const client = new LiveLookupClient({
      baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 },
      ...(VERIFY ? { chainTracker: tracker, verification: { concurrency: CONCURRENCY, engine: ENGINE } } : {})
    })
    const ac = new AbortController()
    let batches = 0
    const t0 = performance.now()
    let receiptMs = 0
    await client.follow('ls_notes', { author: 'alice' }, {
      signal: ac.signal,
      onRevision () {
        batches++
        if (received >= SNAPSHOT) { receiptMs = performance.now() - t0; ac.abort() }
      }
    })
    const atReceipt = Object.fromEntries(Object.entries(spent).map(([k, v]) => [k, { ...v }]))
    if (client.verifier) await client.verifier.idle()
    const doneMs = performance.now() - t0
    if (client.verificationError) throw client.verificationError
    const pending = VERIFY ? store.pendingVerifications().length : null
    const view = store.reconciledView()
    const current = view.current.length
    if (VERIFY && (pending !== 0 || current !== SNAPSHOT)) throw new Error(`not all current: pending ${pending}, current ${current}`)
    store.close()
    await node.close()
    const f = x => x.toFixed(0)
    const c = atReceipt.commitBatch
    const verifierMs = ['pendingVerifications', 'verificationEvidence', 'acceptVerifications', 'requeueLimited'].reduce((s, k) => s + atReceipt[k].ms, 0)
    console.log(`built ${SNAPSHOT} outputs in ${buildS.toFixed(1)} s, provider loaded in ${loadS.toFixed(1)} s`)
    console.log(`snapshot of ${SNAPSHOT} outputs in ${batches} batches: received in ${(receiptMs / 1000).toFixed(2)} s (${f(SNAPSHOT / receiptMs * 1000)} obs/s)` +
      (VERIFY ? `, all current ${(doneMs / 1000).toFixed(2)} s after the start (${(doneMs / receiptMs).toFixed(2)}x receipt); current ${current}` : ' (no verifier)'))
    console.log(`until receipt: commitBatch ${f(c.ms)} ms in ${c.calls} calls (${(c.ms / c.calls).toFixed(1)} ms per batch); verifier store calls ${f(verifierMs)} ms ` +
      `(pendingVerifications ${f(atReceipt.pendingVerifications.ms)} ms / ${atReceipt.pendingVerifications.calls}, acceptVerifications ${f(atReceipt.acceptVerifications.ms)} ms / ${atReceipt.acceptVerifications.calls}, ` +
      `verificationEvidence ${f(atReceipt.verificationEvidence.ms)} ms); state ${f(atReceipt.state.ms)} ms; revisionSnapshot ${f(atReceipt.revisionSnapshot.ms)} ms; rest (HTTP, JSON, client loop, verifier JS) ${f(receiptMs - c.ms - verifierMs - atReceipt.state.ms - atReceipt.revisionSnapshot.ms)} ms`)
    if (VERIFY) console.log(`after receipt: pendingVerifications ${f(spent.pendingVerifications.ms - atReceipt.pendingVerifications.ms)} ms, acceptVerifications ${f(spent.acceptVerifications.ms - atReceipt.acceptVerifications.ms)} ms`)
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

main().catch(e => { console.error(e); process.exit(1) })
