#!/usr/bin/env node
'use strict'
// Client evidence verification (js/client/verifier.js), two figures:
//  1. evidence verified per second: 1-input P2PKH transactions, each spending a P2PKH output
//     proven by a Merkle path of a LocalChainTracker block, received into a real sled store
//     with their BEEF and verified by EvidenceVerifier (store reads, SDK decode, merkle check,
//     script evaluation, acceptVerificationsAsync commits) — plus checkEvidence alone (no store);
//  2. verification lag behind receipt while a LiveLookupClient (public mode, loopback HTTP)
//     drains an N-output snapshot from the project's server, verifying in the background.
//
//   node bench/verify.js [--jobs 1000] [--snapshot 10000] [--concurrency 4] [--engine native|sdk]

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { LiveLookupClient, CheckpointStore, EvidenceVerifier } = require('../js')
const { checkEvidence, VERIFIER_DEFAULTS } = require('../js/client/verifier')
const { CHAIN } = require('../__test__/helpers/live')
const { serveNotes } = require('./lib/notes-node')
const { LocalChainTracker, NoteFactory } = require('../__test__/helpers/engine')

function arg (name, dflt) {
  const i = process.argv.indexOf('--' + name)
  return i < 0 ? dflt : Number(process.argv[i + 1])
}
const JOBS = arg('jobs', 1000)
const SNAPSHOT = arg('snapshot', 10000)
const CONCURRENCY = arg('concurrency', 4)
const ENGINE = (() => { const i = process.argv.indexOf('--engine'); return i < 0 ? 'native' : process.argv[i + 1] })()

function openStore (dir, tracker) {
  const store = CheckpointStore.open(dir)
  store.defineContext('tip', { tipHeight: String(tracker.height + 1000000), medianTimePast: '4000000000' })
  store.configureReconciler({ journalId: 'bench', nonFinal: true, initialContext: 'tip' })
  return store
}

// 1-input P2PKH spends of proven P2PKH outputs (NoteFactory.build with no notes).
async function p2pkh (factory, n) {
  const out = []
  for (let i = 0; i < n; i++) out.push(await factory.build({}))
  return out
}

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))] }

async function rate (tmp) {
  const tracker = new LocalChainTracker()
  const txs = await p2pkh(new NoteFactory(tracker), JOBS)
  const store = openStore(path.join(tmp, 'rate'), tracker)
  for (let i = 0; i < txs.length; i += 100) {
    store.receiveTransactions('bench', txs.slice(i, i + 100).map(t => ({ raw: Buffer.from(t.tx.toBinary()), evidence: Buffer.from(t.beef) })))
  }
  const jobs = store.pendingVerifications()
  // checkEvidence alone: decode, bounds, merkle path, scripts (no store writes).
  const limits = { ...VERIFIER_DEFAULTS, engine: ENGINE }
  let t0 = process.hrtime.bigint()
  for (const j of jobs) {
    const r = await checkEvidence(j, store.verificationEvidence(j.txid, j.variantId), tracker, limits)
    if (r.status !== 'verified') throw new Error(`unexpected ${r.status}: ${r.reason}`)
  }
  const checkS = Number(process.hrtime.bigint() - t0) / 1e9
  const v = new EvidenceVerifier({ store, chainTracker: tracker, concurrency: CONCURRENCY, engine: ENGINE })
  t0 = process.hrtime.bigint()
  await v.run()
  const runS = Number(process.hrtime.bigint() - t0) / 1e9
  if (v.stats.verified !== jobs.length || store.pendingVerifications().length !== 0) throw new Error('not all verified')
  const current = store.reconciledView().current.length
  store.close()
  return { jobs: jobs.length, checkPerS: jobs.length / checkS, verifierPerS: jobs.length / runS, current }
}

async function lag (tmp) {
  const tracker = new LocalChainTracker()
  const factory = new NoteFactory(tracker)
  const txs = await p2pkh(factory, SNAPSHOT)
  const node = await serveNotes(tmp, txs)
  const origin = node.origin

  const store = openStore(path.join(tmp, 'lag'), tracker)
  const received = new Map()
  const verifiedAt = new Map()
  const accept = store.acceptVerificationsAsync.bind(store)
  store.acceptVerificationsAsync = async results => {
    const r = await accept(results)
    const now = performance.now()
    for (const x of results) verifiedAt.set(x.txid, now)
    return r
  }
  // Receipt time = when the commit of the batch carrying the output returned (the jobs
  // exist from that commit on).
  const commit = store.commitBatchAsync.bind(store)
  store.commitBatchAsync = async (key, gen, cursor, bytes, options) => {
    const r = await commit(key, gen, cursor, bytes, options)
    const now = performance.now()
    for (const g of JSON.parse(bytes.toString('utf8')).groups) {
      for (const o of g.observations) if (o.kind === 'output' && !received.has(o.payload.evidence.txid)) received.set(o.payload.evidence.txid, now)
    }
    return r
  }
  const client = new LiveLookupClient({ baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 }, chainTracker: tracker, verification: { concurrency: CONCURRENCY, engine: ENGINE } })
  const ac = new AbortController()
  const t0 = performance.now()
  let lastReceipt = 0
  let resets = 0
  while (!ac.signal.aborted) {
    try {
      await client.follow('ls_notes', { author: 'alice' }, {
        membership: 'claims', // receipt measured apart from acceptance, as in the results
        signal: ac.signal,
        onRevision (e) {
          if (received.size >= SNAPSHOT) { lastReceipt = performance.now(); ac.abort() }
        }
      })
    } catch (e) {
      // A transport failure ends follow() in this version: resume from the checkpoint.
      if (++resets > 3) throw e
    }
  }
  await client.verifier.idle()
  const done = performance.now()
  const lags = [...received].map(([t, at]) => verifiedAt.get(t) - at)
  const missing = lags.filter(x => !(x >= 0)).length
  if (missing) throw new Error(`${missing} outputs not verified; stats ${JSON.stringify(client.verifier.stats)}; pending ${store.pendingVerifications().length}; error ${client.verificationError}`)
  const current = store.reconciledView().current.length
  store.close()
  await node.close()
  return {
    outputs: SNAPSHOT,
    receiptS: (lastReceipt - t0) / 1000,
    allVerifiedS: (done - t0) / 1000,
    lagMs: { median: pct(lags, 0.5), p95: pct(lags, 0.95), max: Math.max(...lags) },
    current,
    resets
  }
}

async function main () {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-bench-verify-'))
  try {
    const r = await rate(tmp)
    console.log(`evidence verified: ${r.jobs} 1-input P2PKH jobs; checkEvidence alone ${r.checkPerS.toFixed(0)}/s; EvidenceVerifier (concurrency ${CONCURRENCY}, with store commits) ${r.verifierPerS.toFixed(0)}/s; current afterwards ${r.current}`)
    const l = await lag(tmp)
    console.log(`snapshot of ${l.outputs} outputs: received in ${l.receiptS.toFixed(1)} s, all verified ${l.allVerifiedS.toFixed(1)} s after the start; lag behind receipt median ${l.lagMs.median.toFixed(0)} ms, p95 ${l.lagMs.p95.toFixed(0)} ms, max ${l.lagMs.max.toFixed(0)} ms; current ${l.current}; follow restarts after transport errors ${l.resets}`)
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

main().catch(e => { console.error(e); process.exit(1) })
