'use strict'
// Catalogue sizes: open-to-first-batch of a live session against the full BRC-24 answer of
// Engine.lookup on the same rows in the same process, plus the full snapshot drain in process and
// over HTTP. Over HTTP too: the live open's first batch against the same Engine's answer through
// an Overlay-Express-style `POST /lookup` route on the same server. The catalogue grows in place
// (1k, then +9k, +90k and +900k rows), and every figure for a size is measured while both stores
// hold exactly that many rows.

const fs = require('node:fs')
const path = require('node:path')
const express = require('express')
const { LiveLookup } = require('../../js')
const { ORIGIN, startServer } = require('../lib/http')
const { createTestEngine } = require('../../__test__/helpers/engine')
const { NotesLookupService } = require('../../demo/notes/NotesLookupService')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { now, summary, rssBytes, peakRssBytes, dirBytes, progress, gc } = require('../lib/common')
const rows = require('../lib/rows')
const client = require('../lib/client')

const CHAIN = { network: 'test', genesisHash: '00'.repeat(32) }

async function setup (dir) {
  const engineDir = path.join(dir, 'engine')
  fs.mkdirSync(engineDir, { recursive: true })
  const t = await createTestEngine({ dir: engineDir, managers: {} })
  const notes = new NotesLookupService(t.knex)
  await notes.init()
  const live = await LiveLookup.open({
    dataDir: path.join(dir, 'live'),
    create: true,
    chain: CHAIN,
    provider: ORIGIN,
    sessionSeconds: 3600,
    replaySeconds: 60,
    maxSessionsPerPrincipal: 100000,
    // Background compaction (default every 60 s) would land inside timed figures; off here.
    compactionIntervalMs: 0
  })
  // The operator's deployment: the wrapped service answers /lookup and live sessions alike.
  t.engine.lookupServices[rows.SERVICE] = live.wrap(rows.SERVICE, notes, createNotesCompanion())
  const timing = { engineMs: null, respondMs: null }
  // Keep-alive: an in-process Engine.lookup keeps this event loop busy for many seconds, after
  // which Node's 5 s server idle timeout and the client's next request on the pooled connection
  // race (the server's timer runs first and resets the connection: "fetch failed"). The server
  // keeps idle connections longer than any gap in this section.
  const server = await startServer(live, { routes: (app) => lookupRoute(app, t.engine, timing), keepAliveTimeoutMs: 10 * 60 * 1000 })
  return { t, notes, live, server, timing, engineDir, liveDir: path.join(dir, 'live') }
}

/**
 * The BRC-24 lookup route as Overlay Express composes it: a JSON body parser (Overlay Express
 * installs one for the whole app, limit 1 GB), `engine.lookup(req.body)`, and the answer sent with
 * `res.status(200).json(result)`; a failure answers 400 {status: 'error', message}. The only
 * addition: `timing` records how long the lookup and the synchronous `res.json` call (JSON.stringify
 * and the hand-off to the socket) took, for the breakdown in RESULTS.md.
 */
function lookupRoute (app, engine, timing) {
  app.post('/lookup', express.json({ limit: '1gb', type: 'application/json' }), async (req, res) => {
    try {
      const t0 = now()
      const result = await engine.lookup(req.body)
      const t1 = now()
      res.status(200).json(result)
      timing.engineMs = t1 - t0
      timing.respondMs = now() - t1
    } catch (e) {
      res.status(400).json({ status: 'error', message: String(e && e.message) })
    }
  })
}

async function engineLookup (engine, size) {
  const t0 = now()
  const answer = await engine.lookup({ service: rows.SERVICE, query: {} })
  const ms = now() - t0
  if (answer.type !== 'output-list' || answer.outputs.length !== size) {
    throw new Error(`Engine.lookup answered ${answer.outputs.length} outputs for ${size} rows`)
  }
  return ms
}

/**
 * The live first page names the same outpoints, in the same order, as the first rows of the notes
 * service's answer. The service's own query (NotesLookupService.lookup: every note ordered by
 * admittedAt, txid, outputIndex) is issued with a LIMIT so a million rows need not be listed.
 */
async function checkSameAnswer (env, size) {
  const { batch } = await client.openInProcess(env.live)
  await env.live.closeSession(client.closeBody(batch.session), client.PUBLIC)
  const live = client.outpointsOf(batch)
  const first = await env.t.knex(env.notes.table).select('txid', 'outputIndex')
    .orderBy([{ column: 'admittedAt' }, { column: 'txid' }, { column: 'outputIndex' }]).limit(live.length)
  const inner = first.map(o => `${o.txid}.${o.outputIndex}`)
  if (live.length !== Math.min(size, client.PAGE.maxObservations) || live.join() !== inner.join()) {
    const at = live.findIndex((x, i) => x !== inner[i])
    throw new Error(`the live first page and the lookup service disagree on the rows (${live.length} vs ${inner.length}, first difference at ${at})`)
  }
}

/**
 * Runs of each measurement at a size: cfg.plan[size] = {first, engine, drain, http, lookupHttp,
 * engineInRoute}; missing entries default to cfg.runs. Slow points get fewer runs and RESULTS.md
 * says so. The HTTP first batches run with the in-process first batch (`first`) when cfg.http is
 * set. engineInRoute: the Engine.lookup figure of a round is the `engine.lookup` call timed inside
 * that round's HTTP /lookup route (the same call on the same Engine, in this process) instead of a
 * second full answer, which at 100k rows saves about 25 s a round.
 */
function planFor (cfg, size) {
  const p = (cfg.plan && cfg.plan[size]) || {}
  const d = cfg.runs
  return {
    first: p.first ?? d,
    engine: p.engine ?? d,
    drain: p.drain ?? d,
    http: cfg.http ? (p.http ?? d) : 0,
    lookupHttp: cfg.lookupHttp ? (p.lookupHttp ?? d) : 0,
    engineInRoute: false
  }
}

/** planFor, with engineInRoute kept only where every Engine.lookup round has an HTTP /lookup. */
function planAt (cfg, size) {
  const plan = planFor(cfg, size)
  const p = (cfg.plan && cfg.plan[size]) || {}
  plan.engineInRoute = !!p.engineInRoute && plan.lookupHttp >= plan.engine
  return plan
}

/** Small first pages measured in process (observations), and how many opens each. */
const SMALL_PAGES = [10, 100]
const SMALL_PAGE_RUNS = 21

function countOutputs (batch) {
  return batch.groups.reduce((n, g) => n + g.observations.length, 0)
}

/** Page limits of the HTTP first batches: the client default (= profile maximum) and a small page. */
const HTTP_PAGES = {
  default: client.PAGE,
  small: { maxBytes: client.PAGE.maxBytes, maxObservations: 100, waitMs: 0 }
}

async function lookupOverHttp (server, size) {
  const l = await client.lookupHttp(server)
  if (l.answer.type !== 'output-list' || l.answer.outputs.length !== size) {
    throw new Error(`HTTP /lookup answered ${l.answer.outputs && l.answer.outputs.length} outputs for ${size} rows`)
  }
  return l
}

async function firstOverHttp (server, size, limits) {
  const f = await client.openHttp(server, {}, limits)
  if (client.countObservations(f.batch) !== Math.min(size, limits.maxObservations)) {
    throw new Error(`HTTP first batch held ${client.countObservations(f.batch)} observations`)
  }
  return f
}

async function measureSize (env, size, cfg) {
  const plan = planAt(cfg, size)
  const first = []; const engine = []; const ratioFirst = []
  const drainIn = []; const drainHttp = []; const ratioDrain = []; const ratioHttp = []; const drainInMs = []; const drainHttpMs = []
  const firstHttp = []; const firstHttpSmall = []; const lookupHttp = []; const ratioLookupHttp = []; const ratioLookupHttpSmall = []
  const lookupHttpEngine = []; const lookupHttpRespond = []
  let lookupBytes = null; let firstHttpBytes = null
  await checkSameAnswer(env, size)
  if (plan.engine > 0 && size <= 10000) await engineLookup(env.t.engine, size) // warms SQLite's page cache
  if (plan.http > 0) await firstOverHttp(env.server, size, HTTP_PAGES.default) // warms the connection and the route
  // First batches of ordinary small pages, in process: many runs, they are cheap.
  const firstSmall = {}; const firstSmallBody = {}
  for (const obs of SMALL_PAGES) {
    const ms = []; const bodyMs = []
    for (let i = 0; i < SMALL_PAGE_RUNS; i++) {
      const o = await client.openInProcess(env.live, {}, client.PUBLIC, { ...client.PAGE, maxObservations: obs })
      if (countOutputs(o.batch) !== Math.min(obs, size)) throw new Error(`a ${obs}-observation first page held ${countOutputs(o.batch)}`)
      await env.live.closeSession(client.closeBody(o.batch.session), client.PUBLIC)
      ms.push(o.ms)
      bodyMs.push(o.bodyMs)
    }
    firstSmall[obs] = summary(ms, 'ms')
    firstSmallBody[obs] = summary(bodyMs, 'ms')
  }
  const rounds = Math.max(plan.first, plan.engine, plan.drain, plan.http, plan.lookupHttp)
  for (let r = 0; r < rounds; r++) {
    // One round measures each figure once, in the same order, so ratios pair values of one round.
    let o = null
    if (r < plan.first) {
      o = await client.openInProcess(env.live)
      await env.live.closeSession(client.closeBody(o.batch.session), client.PUBLIC)
      first.push(o.ms)
    }
    let e = null
    if (r < plan.engine && !plan.engineInRoute) {
      gc()
      e = await engineLookup(env.t.engine, size)
      engine.push(e)
      if (o) ratioFirst.push(e / o.ms)
    }
    // Over HTTP, same round: the live first batch (two page sizes) and the BRC-24 /lookup answer.
    let fh = null; let fsm = null
    if (plan.http > 0 && r < plan.first) {
      fh = await firstOverHttp(env.server, size, HTTP_PAGES.default)
      fsm = await firstOverHttp(env.server, size, HTTP_PAGES.small)
      firstHttp.push(fh.ms)
      firstHttpSmall.push(fsm.ms)
      firstHttpBytes = fh.bytes
    }
    let lh = null
    if (r < plan.lookupHttp) {
      gc()
      env.timing.engineMs = env.timing.respondMs = null
      lh = await lookupOverHttp(env.server, size)
      lookupHttp.push(lh.ms)
      lookupHttpEngine.push(env.timing.engineMs)
      lookupHttpRespond.push(env.timing.respondMs)
      if (plan.engineInRoute && r < plan.engine) {
        e = env.timing.engineMs
        engine.push(e)
        if (o) ratioFirst.push(e / o.ms)
      }
      lookupBytes = lh.bytes
      if (fh) ratioLookupHttp.push(lh.ms / fh.ms)
      if (fsm) ratioLookupHttpSmall.push(lh.ms / fsm.ms)
      lh.answer = null
    }
    let d = null
    if (r < plan.drain) {
      gc()
      d = await client.drainInProcess(env.live)
      if (d.observations !== size) throw new Error(`drain saw ${d.observations} observations of ${size}`)
      drainIn.push(d.observations / (d.ms / 1000))
      drainInMs.push(d.ms)
      if (e !== null) ratioDrain.push(e / d.ms)
    }
    if (r < plan.http) {
      gc()
      const dh = await client.drainHttp(env.server)
      if (dh.observations !== size) throw new Error(`HTTP drain saw ${dh.observations} observations of ${size}`)
      drainHttp.push(dh.observations / (dh.ms / 1000))
      drainHttpMs.push(dh.ms)
      if (d) ratioHttp.push((dh.observations / dh.ms) / (d.observations / d.ms))
    }
    progress(`catalogue ${size}: round ${r + 1}/${rounds} first ${o ? o.ms.toFixed(2) + ' ms' : '-'}, engine ${e === null ? '-' : e.toFixed(0) + ' ms'}, HTTP first ${fh ? fh.ms.toFixed(2) + ' ms' : '-'}, HTTP /lookup ${lh ? lh.ms.toFixed(0) + ' ms' : '-'}, drain ${d ? d.ms.toFixed(0) + ' ms' : '-'}`)
  }
  return {
    size,
    plan,
    firstBatchMs: summary(first, 'ms'),
    firstBatchSmallMs: firstSmall,
    firstBatchSmallBodyMs: firstSmallBody,
    engineLookupMs: summary(engine, 'ms'),
    engineOverFirstBatch: summary(ratioFirst, 'x'),
    drainInProcessObsPerSec: summary(drainIn, 'obs/s'),
    drainInProcessMs: summary(drainInMs, 'ms'),
    engineOverDrain: summary(ratioDrain, 'x'),
    drainHttpObsPerSec: summary(drainHttp, 'obs/s'),
    drainHttpMs: summary(drainHttpMs, 'ms'),
    httpOverInProcess: summary(ratioHttp, 'x'),
    httpPages: HTTP_PAGES,
    firstBatchHttpMs: summary(firstHttp, 'ms'),
    firstBatchHttpSmallMs: summary(firstHttpSmall, 'ms'),
    firstBatchHttpBytes: firstHttpBytes,
    lookupHttpMs: summary(lookupHttp, 'ms'),
    lookupHttpEngineMs: summary(lookupHttpEngine, 'ms'),
    lookupHttpRespondMs: summary(lookupHttpRespond, 'ms'),
    lookupHttpBytes: lookupBytes,
    lookupHttpOverFirstBatchHttp: summary(ratioLookupHttp, 'x'),
    lookupHttpOverFirstBatchHttpSmall: summary(ratioLookupHttpSmall, 'x')
  }
}

async function run (cfg) {
  const env = await setup(cfg.dir)
  const templates = await rows.makeTemplates(env.t.chainTracker)
  const beefBytes = templates[0].beef.length
  const results = []
  let loaded = 0
  try {
    for (const size of cfg.sizes) {
      const t0 = now()
      await rows.loadBoth(env.live, env.t.knex, templates, loaded, size)
      const loadMs = now() - t0
      gc()
      const added = size - loaded
      loaded = size
      progress(`catalogue: ${size} rows (+${added} into both stores in ${loadMs.toFixed(0)} ms)`)
      const stats = env.live.stats()
      if (stats.rows !== size) throw new Error(`live store holds ${stats.rows} rows, expected ${size}`)
      const m = await measureSize(env, size, cfg)
      m.load = { addedRows: added, bothStoresRowsPerSec: added / (loadMs / 1000), liveGroupSize: 1000 }
      m.disk = {
        liveBytesPerRow: env.live.stats().diskBytes / size,
        liveDirBytesPerRow: dirBytes(env.liveDir) / size,
        sqliteBytesPerRow: dirBytes(env.engineDir) / size
      }
      m.rssBytes = rssBytes()
      results.push(m)
    }
  } finally {
    await env.server.close()
    await env.live.close()
    await env.t.knex.destroy()
  }
  return { beefBytes, authors: templates.length, sizes: results, peakRssBytes: peakRssBytes() }
}

module.exports = { run }
