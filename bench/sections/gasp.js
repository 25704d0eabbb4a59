'use strict'
// Propagation lag between GASP-synchronized nodes (docs/scaling.md): two real nodes on loopback
// (__test__/helpers/node.js: Express, a real @bsv/overlay Engine on SQLite, the native store,
// public mode), one synthetic chain. Node B pulls from node A with scheduleGASPSync every
// `intervalMs`. Per run: a long poll (HTTP read, waitMs 20 s) is registered on B (checked with
// B's waiter count), then after a random pause within one interval (so submits land at every
// phase of B's schedule) a fresh signed note is submitted on A; the lag is from the call to
// A's `engine.submit` until B has answered the waiting poll with the group carrying that note.
// Transactions are built before timing.

const fs = require('node:fs')
const { quietGASPInfo } = require('../../demo/server')
const { LocalChainTracker } = require('../../__test__/helpers/engine')
const { startNode, publicClient, openReq, readReq, drain } = require('../../__test__/helpers/node')
const { scheduleGASPSync } = require('../../js/provider/gasp')
const { summary, progress, now, sleep, until } = require('../lib/common')

const WAIT_MS = 20000

function outpoints (batch) {
  return batch.groups.flatMap(g => g.observations.filter(o => o.kind === 'output').map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`))
}

async function run (cfg) {
  quietGASPInfo() // @bsv/overlay's GASP logs four INFO lines per sync
  const chainTracker = new LocalChainTracker()
  const opts = { authentication: 'none', chainTracker, gasp: true, live: { compactionIntervalMs: 0, maxWaitMs: WAIT_MS } }
  const a = await startNode(opts)
  const b = await startNode(opts)
  const out = { runs: cfg.runs, waitMs: WAIT_MS, intervals: [] }
  try {
    const client = await publicClient(b)
    const first = await client.post('open', openReq())
    const batches = await drain(client, first.body)
    let end = batches[batches.length - 1]
    for (const intervalMs of cfg.intervals) {
      const sync = scheduleGASPSync(b.t.engine, { peers: [a.origin], intervalMs })
      const lags = []
      const submitMs = []
      try {
        const txs = []
        for (let i = 0; i < cfg.runs; i++) txs.push(await a.factory.createNotes([`gasp bench ${intervalMs} ${i} ${Math.random()}`]))
        for (const tx of txs) {
          const want = `${tx.txid}.0`
          const waiting = b.live.stats().waiters
          const poll = client.post('read', readReq(end, { waitMs: WAIT_MS, maxObservations: 64, maxBytes: 262144 }))
          await until(() => b.live.stats().waiters > waiting, 10000, 'the poll waiting on B')
          await sleep(Math.random() * intervalMs)
          const t0 = now()
          await a.submit(tx)
          const t1 = now()
          // The answer may be an empty batch (the wait ended) or carry the note; poll again until it does.
          let r = await poll
          for (;;) {
            if (r.status !== 200) throw new Error(`read on B: ${r.status} ${JSON.stringify(r.body)}`)
            end = r.body
            if (outpoints(r.body).includes(want)) break
            r = await client.post('read', readReq(end, { waitMs: WAIT_MS, maxObservations: 64, maxBytes: 262144 }))
          }
          const lag = now() - t0
          lags.push(lag)
          submitMs.push(t1 - t0)
          progress(`gasp interval ${intervalMs} ms: lag ${lag.toFixed(0)} ms (submit on A ${(t1 - t0).toFixed(1)} ms)`)
        }
      } finally {
        await sync.stop()
      }
      out.intervals.push({ intervalMs, lagMs: summary(lags, 'ms'), lagOverInterval: summary(lags.map(l => l / intervalMs), 'ratio'), submitOnAMs: summary(submitMs, 'ms') })
    }
  } finally {
    await b.close()
    await a.close()
    for (const n of [a, b]) fs.rmSync(n.dir, { recursive: true, force: true })
  }
  return out
}

module.exports = { run }
