'use strict'
// Access-controlled catalogues (docs/operators.md "Access control"):
// (a) the first batch of a caller whose partition may see 1% of a large catalogue (a
//     visibility filter `eq owner` backed by the attribute index), against a caller who may
//     see everything, on the same store in the same rounds (goal: within 2x);
// (b) one commit waking N authenticated long polls of N principals (one session each) spread
//     over P access partitions, the server in its own process (bench/sections/auth.js
//     pollFigure), against the same principals with no partitions (goal: p99 under 1 s);
// (c) memory per waiting session with principals in P partitions against none, by the
//     procedure of bench/sections/waiters.js, each in a process of its own (one process
//     measuring both would lend the second the memory the first freed); goal: unchanged.

const fs = require('node:fs')
const path = require('node:path')
const { fork } = require('node:child_process')
const { LiveLookup } = require('../../js')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { plainService } = require('../../__test__/helpers/live')
const { now, summary, progress } = require('../lib/common')
const rows = require('../lib/rows')
const client = require('../lib/client')
const auth = require('./auth')

const CHAIN = { network: 'test', genesisHash: '00'.repeat(32) }
const PROVIDER = '02' + '11'.repeat(32)
const PAGE = { maxBytes: 4 * 1024 * 1024, maxObservations: 1024, waitMs: 0 }
/** 1% of the rows belong to each owner. */
const OWNERS = 100
const EVERYONE = 'everyone'

/** The notes companion whose partitions each see one owner's rows, and EVERYONE every row. */
function ownerCompanion () {
  return {
    ...createNotesCompanion(),
    rules: { id: 'urn:overlay-lookup-live:bench:owners:1', parameters: {} },
    visibility: ({ partition }) => partition === EVERYONE ? { all: true } : { eq: ['owner', partition] }
  }
}

async function loadOwned (live, templates, count, group = 1000) {
  let inFlight = null
  for (let start = 0; start < count; start += group) {
    const changes = []
    for (let n = start; n < Math.min(count, start + group); n++) {
      const c = rows.admitChange(rows.row(templates, n))
      changes.push({ ...c, attributes: { ...c.attributes, owner: 'owner-' + (n % OWNERS) } })
    }
    if (inFlight) await inFlight
    inFlight = live.commit(changes)
  }
  if (inFlight) await inFlight
}

/** Opens a session as `principal` and parses its first batch; ms until the batch is in hand. */
async function firstBatch (live, principal) {
  const caller = { principal, authenticated: true }
  const examined0 = live.stats().scanExamined
  const t0 = now()
  const b = client.parse(await live.open(client.openBody({}, PAGE), caller), 'open')
  const ms = now() - t0
  return { ms, observations: b.groups.reduce((a, g) => a + g.observations.length, 0), complete: b.snapshotComplete, examined: live.stats().scanExamined - examined0 }
}

async function firstBatchFigure (cfg, templates) {
  const dir = fs.mkdtempSync(path.join(cfg.dir, 'access-'))
  const live = await LiveLookup.open({
    dataDir: path.join(dir, 'live'),
    create: true,
    chain: CHAIN,
    provider: PROVIDER,
    compactionIntervalMs: 0,
    accessPolicy: 'urn:overlay-lookup-live:bench:owners',
    // The principal names its partition here: the benchmark's callers are made up.
    authorize: ({ principal }) => ({ partition: principal })
  })
  try {
    live.wrap(rows.SERVICE, plainService(), ownerCompanion())
    const t0 = now()
    await loadOwned(live, templates, cfg.rows)
    progress(`access: loaded ${cfg.rows} rows in ${((now() - t0) / 1000).toFixed(1)} s`)
    const pub = []; const own = []; const ratio = []; const pubExamined = []; const ownExamined = []
    for (let r = 0; r <= cfg.runs; r++) {
      // Alternating order; each run asks for another owner's 1%.
      const owner = 'owner-' + ((r * 37) % OWNERS)
      let p, o
      if (r % 2 === 0) {
        p = await firstBatch(live, EVERYONE)
        o = await firstBatch(live, owner)
      } else {
        o = await firstBatch(live, owner)
        p = await firstBatch(live, EVERYONE)
      }
      const visible = Math.ceil(cfg.rows / OWNERS)
      if (o.observations !== Math.min(visible, PAGE.maxObservations)) throw new Error(`the 1% partition got ${o.observations} rows, not ${visible}`)
      if (p.observations !== Math.min(cfg.rows, PAGE.maxObservations)) throw new Error(`the public partition got ${p.observations} rows`)
      if (r === 0) continue // warm-up
      pub.push(p.ms); own.push(o.ms); ratio.push(o.ms / p.ms); pubExamined.push(p.examined); ownExamined.push(o.examined)
      progress(`access first batch: run ${r}/${cfg.runs} everything ${p.ms.toFixed(1)} ms, 1% ${o.ms.toFixed(1)} ms (${o.observations} rows, complete ${o.complete})`)
    }
    return {
      rows: cfg.rows,
      visibleRows: Math.ceil(cfg.rows / OWNERS),
      pageObservations: PAGE.maxObservations,
      everythingMs: summary(pub, 'ms'),
      onePercentMs: summary(own, 'ms'),
      onePercentOverEverything: summary(ratio, 'ratio'),
      everythingExamined: summary(pubExamined, 'entries'),
      onePercentExamined: summary(ownExamined, 'entries')
    }
  } finally {
    await live.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

async function pollsFigure (cfg) {
  const out = []
  for (const access of [null, { partitions: cfg.partitions }]) {
    const server = await auth.startServer({ dir: cfg.dir, access }, 'brc103')
    try {
      const fig = await auth.pollFigure(server, cfg.pollers, cfg.pollProcesses, cfg.pollRuns, 1)
      out.push({ partitions: access ? access.partitions : 0, ...fig })
      progress(`access polls: ${access ? access.partitions + ' partitions' : 'no partitions'} p99 ${fig.p99Ms.median.toFixed(1)} ms`)
    } finally {
      await server.stop()
    }
  }
  return out
}

/** bench/sections/waiters.js with `cfg`, in a child process as bench/run.js starts sections. */
function waitersInChild (cfg) {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, '..', 'lib', 'child.js'), ['waiters', JSON.stringify(cfg)], {
      execArgv: ['--expose-gc'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc']
    })
    let message = null
    child.on('message', (m) => { message = m })
    child.on('error', reject)
    child.on('exit', () => message && message.ok ? resolve(message.result) : reject(new Error('waiters child failed: ' + (message ? message.error : 'no result'))))
  })
}

async function memoryFigure (cfg) {
  const out = []
  for (const access of [null, { partitions: cfg.partitions }]) {
    const [r] = (await waitersInChild({ dir: cfg.dir, runs: cfg.memoryRuns, sizes: [cfg.memorySessions], access })).sizes
    out.push({
      partitions: access ? access.partitions : 0,
      sessions: cfg.memorySessions,
      waitingSessionRssBytes: r.waitingSessionRssBytes,
      waitingSessionNativeEstimateBytes: r.waitingSessionNativeEstimateBytes,
      waitingSessionHeapUsedBytes: r.waitingSessionHeapUsedBytes,
      deliveryFromPublicationP99Ms: r.deliveryFromPublicationP99Ms
    })
  }
  return out
}

async function run (cfg) {
  const templates = await rows.standaloneTemplates()
  return {
    firstBatch: await firstBatchFigure(cfg, templates),
    polls: await pollsFigure(cfg),
    memory: await memoryFigure(cfg)
  }
}

module.exports = { run }
