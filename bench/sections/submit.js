'use strict'
// The live layer's cost to Engine.submit: two real @bsv/overlay Engines (SQLite, real signed note
// transactions from NoteFactory) in this one process, one with the notes lookup service plain and
// one with it wrapped (live.wrap) and the Engine attached (live.attach). Rounds interleave the two
// (the order alternates per round) with 1 and 8 concurrent submitters; each round submits `batch`
// fresh transactions to each Engine and the ratio wrapped/plain pairs the two throughputs of one
// round. Transactions are built before timing. On the wrapped node the publication lag of each
// submit is measured too: from the moment its `engine.submit` resolved until its group was
// published (the live sink's commit resolved, which it does after the flush and publish).

const fs = require('node:fs')
const path = require('node:path')
const { LiveLookup } = require('../../js')
const { createTestEngine, NoteFactory } = require('../../__test__/helpers/engine')
const { NotesLookupService } = require('../../demo/notes/NotesLookupService')
const { NotesTopicManager } = require('../../demo/notes/NotesTopicManager')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { NOTES_TOPIC } = require('../../demo/notes/notesProtocol')
const { summary, progress } = require('../lib/common')

/**
 * An Engine with the notes lookup service, plain or wrapped and attached. `tap` (bench/submit-spans.js)
 * may instrument the wrapped node's parts: tap.service(inner, companion) before wrapping, and
 * tap.attached(live) after attaching.
 */
async function engineOf (dir, wrapped, tap = {}) {
  let live = null
  if (wrapped) {
    live = await LiveLookup.open({
      dataDir: path.join(dir, 'live'),
      create: true,
      chain: { network: 'test', genesisHash: '00'.repeat(32) },
      provider: '02' + '11'.repeat(32),
      compactionIntervalMs: 0
    })
  }
  const t = await createTestEngine({
    dir: fs.mkdtempSync(path.join(dir, 'engine-')),
    managers: { [NOTES_TOPIC]: new NotesTopicManager() },
    lookupServices: async (knex) => {
      const inner = new NotesLookupService(knex)
      await inner.init()
      if (!wrapped) return { ls_notes: inner }
      const companion = createNotesCompanion()
      if (tap.service) tap.service(inner, companion)
      return { ls_notes: live.wrap('ls_notes', inner, companion) }
    }
  })
  if (live) {
    await live.attach(t.engine)
    if (tap.attached) tap.attached(live)
  }
  return { t, live, factory: new NoteFactory(t.chainTracker) }
}

/**
 * Submits `txs` with `width` concurrent submitters; resolves submits per second and the process
 * CPU time (all threads: JS, SQLite, the store's) per submit, in ms. On the wrapped node the
 * round ends once every group is published too (a submit resolves before its group's flush),
 * so both figures count the whole durable work of the round. CPU time is much less sensitive to
 * other work on a shared machine than throughput is.
 */
async function submitAll (e, txs, width) {
  let next = 0
  const resolved = new Map()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < txs.length) {
      const tx = txs[next++]
      await e.t.engine.submit({ beef: tx.beef, topics: [NOTES_TOPIC] })
      resolved.set(tx.txid, performance.now())
    }
  }))
  if (e.live) await e.live.published()
  const perSec = txs.length / ((performance.now() - t0) / 1000)
  const cpu = process.cpuUsage(cpu0)
  const lags = e.published ? txs.map(tx => e.published.get(tx.txid) - resolved.get(tx.txid)).filter(Number.isFinite) : []
  return { perSec, cpuMs: (cpu.user + cpu.system) / 1000 / txs.length, lags }
}

/** Records when each submit's group is published: its sink commit resolved (txid -> time). */
function tapPublication (live) {
  const published = new Map()
  const commit = live.sink.commit
  live.sink.commit = async (changes, ticket) => {
    const r = await commit(changes, ticket)
    const now = performance.now()
    for (const c of changes) if (c.op === 'admit') published.set(c.txid, now)
    return r
  }
  return published
}

/** The p-th percentile (0..100) of `values`, nearest rank. */
function percentile (values, p) {
  if (values.length === 0) return null
  const s = [...values].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
}

async function run (cfg) {
  const dir = fs.mkdtempSync(path.join(cfg.dir, 'submit-'))
  const plain = await engineOf(dir, false)
  const wrapped = await engineOf(dir, true)
  wrapped.published = tapPublication(wrapped.live)
  const out = { batch: cfg.batch, rounds: cfg.rounds, widths: [] }
  try {
    for (const width of cfg.widths) {
      const build = async (e) => {
        const txs = []
        for (let i = 0; i < cfg.batch; i++) txs.push(await e.factory.createNotes([`submit bench ${width} ${i} ${Math.random()}`]))
        return txs
      }
      // Warm-up round (not counted).
      await submitAll(plain, await build(plain), width)
      await submitAll(wrapped, await build(wrapped), width)
      const p = []; const w = []; const ratio = []; const pc = []; const wc = []; const cpuRatio = []; const lag50 = []; const lag99 = []
      for (let r = 0; r < cfg.rounds; r++) {
        const [a, b] = [await build(plain), await build(wrapped)]
        let pr, wr
        if (r % 2 === 0) { pr = await submitAll(plain, a, width); wr = await submitAll(wrapped, b, width) } else { wr = await submitAll(wrapped, b, width); pr = await submitAll(plain, a, width) }
        p.push(pr.perSec); w.push(wr.perSec); ratio.push(wr.perSec / pr.perSec)
        pc.push(pr.cpuMs); wc.push(wr.cpuMs); cpuRatio.push(pr.cpuMs / wr.cpuMs)
        lag50.push(percentile(wr.lags, 50)); lag99.push(percentile(wr.lags, 99))
        progress(`submit ${width} submitter(s): round ${r + 1}/${cfg.rounds} plain ${pr.perSec.toFixed(1)}/s wrapped ${wr.perSec.toFixed(1)}/s ratio ${(wr.perSec / pr.perSec).toFixed(3)}; CPU ms/submit plain ${pr.cpuMs.toFixed(2)} wrapped ${wr.cpuMs.toFixed(2)}`)
      }
      out.widths.push({
        submitters: width,
        plainPerSec: summary(p, 'submits/s'),
        wrappedPerSec: summary(w, 'submits/s'),
        wrappedOverPlain: summary(ratio, 'ratio'),
        plainCpuMsPerSubmit: summary(pc, 'ms'),
        wrappedCpuMsPerSubmit: summary(wc, 'ms'),
        // plain CPU per submit over wrapped: the throughput ratio a CPU-bound, otherwise idle machine would show.
        plainOverWrappedCpu: summary(cpuRatio, 'ratio'),
        // Per round, the p50 and p99 of (group published - submit resolved) over its submits.
        publicationLagP50Ms: summary(lag50, 'ms'),
        publicationLagP99Ms: summary(lag99, 'ms')
      })
    }
  } finally {
    await plain.t.close()
    await wrapped.t.close()
    await wrapped.live.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  return out
}

module.exports = { run, engineOf }
