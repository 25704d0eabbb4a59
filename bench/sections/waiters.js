'use strict'
// Commit-to-delivery latency with N waiting sessions, and the memory a session and a parked long
// poll cost. For each N: open N sessions (one principal each) on a small collection, drain their
// snapshots, park one long poll per session, commit one group, and time every poll's resolution.
// Each round re-parks every session on its new cursor; round 0 is a warm-up and is not reported.
// Memory is an RSS-delta estimate (after a full GC): whatever the process grew by, native and JS,
// divided by N; the JS heap part is shown separately. A "waiting session" is an open session with a
// parked poll, measured from before the sessions were opened to when all N polls are parked.
// Latency and memory are measured in separate rounds, memory last: a forced full GC makes V8
// discard optimized code of the delivery path, and a wake timed right after one paid for its
// recompilation: V8's worker threads used 4-6 ms of CPU during such a wake at N = 1,000, and
// 0.5-4 ms (concurrent marking, mostly) without the forced GC, on 2 cores.

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { LiveLookup } = require('../../js')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { plainService } = require('../../__test__/helpers/live')
const { deliverySummary, publishedAt, now, summary, percentile, memory, until, progress, rssBytes, sleep } = require('../lib/common')
const rows = require('../lib/rows')
const { accessOptions, accessCompanion } = require('../lib/access')
const client = require('../lib/client')

const CHAIN = { network: 'test', genesisHash: '00'.repeat(32) }
const PROVIDER = '02' + '11'.repeat(32)
const WAIT = { maxBytes: 65536, maxObservations: 100, waitMs: 25000 }
const SEED_ROWS = 10
const SETTLE_MS = 250
// Rounds that measure memory (each forces full GCs), after the latency rounds.
const MEMORY_ROUNDS = 3

function principal (i) {
  return { principal: '02' + crypto.createHash('sha256').update('bench principal ' + i).digest('hex'), authenticated: true }
}

async function openSessions (live, n) {
  // Opens in batches of 32, below the default cap on concurrent store work (maxConcurrentWork).
  const sessions = new Array(n)
  const chunk = 32
  for (let start = 0; start < n; start += chunk) {
    await Promise.all(Array.from({ length: Math.min(chunk, n - start) }, async (_, k) => {
      const i = start + k
      const caller = principal(i)
      let b = client.parse(await live.open(client.openBody({}, { ...WAIT, waitMs: 0 }), caller), 'open')
      while (!b.snapshotComplete) b = client.parse(await live.read(client.readBody(b.session, b.cursor, { ...WAIT, waitMs: 0 }), caller), 'read')
      sessions[i] = { caller, session: b.session, cursor: b.cursor }
    }))
  }
  return sessions
}

/** Growth per item from reading a to reading b; "native" is RSS growth less JS heap growth. */
function delta (a, b, n) {
  return {
    rss: (b.rss - a.rss) / n,
    heapUsed: (b.heapUsed - a.heapUsed) / n,
    external: (b.external - a.external) / n,
    nativeEstimate: ((b.rss - a.rss) - (b.heapUsed - a.heapUsed)) / n
  }
}

/**
 * Parks one poll per session, `chunk` polls at a time (each poll's first scan is store work, which
 * the provider bounds with maxConcurrentWork); resolves once all are registered as waiters.
 */
async function park (live, sessions, chunk = 32) {
  const polls = []
  for (let start = 0; start < sessions.length; start += chunk) {
    for (const s of sessions.slice(start, start + chunk)) {
      polls.push(live.read(client.readBody(s.session, s.cursor, WAIT), s.caller).then((res) => ({ at: now(), res })))
    }
    const want = Math.min(sessions.length, start + chunk)
    await until(() => live.stats().waiters >= want, 60000, `${want} waiters`)
  }
  return polls
}

/** Brings the cursor of a session whose poll was refused up to date (a plain read, no wait). */
async function catchUp (live, s) {
  for (;;) {
    const res = await live.read(client.readBody(s.session, s.cursor, { ...WAIT, waitMs: 0 }), s.caller)
    if (res.status !== 200) { await new Promise(resolve => setTimeout(resolve, 20)); continue }
    const b = client.parse(res, 'catch-up read')
    s.cursor = b.cursor
    if (b.groups.length === 0) return
  }
}

async function measureN (cfg, templates, n) {
  const dir = fs.mkdtempSync(path.join(cfg.dir, 'waiters-'))
  const live = await LiveLookup.open({
    dataDir: path.join(dir, 'live'),
    create: true,
    chain: CHAIN,
    provider: PROVIDER,
    sessionSeconds: 3600,
    replaySeconds: 600,
    compactionIntervalMs: 0,
    maxWaiters: n + 16,
    maxWaitersPerPrincipal: 4,
    maxSessionsPerPrincipal: 4,
    // bench/access.js: principals in access partitions (lib/access.js); none by default.
    ...accessOptions(cfg.access)
  })
  live.wrap(rows.SERVICE, plainService(), cfg.access ? accessCompanion(cfg.access) : createNotesCompanion())
  let next = 0
  await rows.loadLive(live, templates, 0, SEED_ROWS, SEED_ROWS)
  next = SEED_ROWS
  const memBefore = memory()
  const t0 = now()
  const sessions = await openSessions(live, n)
  const openMs = now() - t0
  const memSessions = memory()
  const p50 = []; const p99 = []; const max = []; const p50Ack = []; const p99Ack = []; const p50Pub = []; const p99Pub = []; const commitMs = []; const cpuMs = []
  const perWaiter = []; const perWaiting = []; const rssParked = []; const refused = []
  let refusal = null
  /** One round: park a poll per session, commit one group, collect every answer. */
  const round = async (measureMemory) => {
    const memIdle = measureMemory ? memory() : null
    const polls = await park(live, sessions)
    const memParked = measureMemory ? memory() : null
    // Let V8's concurrent work (sweeping after a forced GC, compiling the parking code)
    // finish, so that it does not compete with the delivery being timed (2 cores).
    await sleep(SETTLE_MS)
    const cpu0 = process.cpuUsage()
    const tCommit = now()
    await live.commit([rows.admitChange(rows.row(templates, next++))])
    const tAck = now()
    const done = await Promise.all(polls)
    const tPub = publishedAt(live)
    const cpu = process.cpuUsage(cpu0)
    const fromCommit = []; const fromAck = []; const fromPub = []; const refusedNow = []
    done.forEach((d, i) => {
      if (d.res.status !== 200) { refusedNow.push(sessions[i]); return }
      const b = client.parse(d.res, 'poll')
      if (b.groups.length !== 1 || b.groups[0].observations.length !== 1) throw new Error('a poll did not receive exactly the committed group')
      sessions[i].cursor = b.cursor
      fromCommit.push(d.at - tCommit)
      fromAck.push(d.at - tAck)
      fromPub.push(d.at - tPub)
    })
    if (refusedNow.length > 0) {
      const first = done.find(d => d.res.status !== 200).res
      refusal = `${first.status} ${Buffer.from(first.body).toString('utf8').slice(0, 200)}`
      for (const s of refusedNow) await catchUp(live, s)
    }
    return { memIdle, memParked, fromCommit, fromAck, fromPub, refused: refusedNow.length, ackMs: tAck - tCommit, cpuMs: (cpu.user + cpu.system) / 1000 }
  }
  try {
    for (let r = 0; r <= cfg.runs; r++) {
      const o = await round(false)
      if (r === 0) continue // warm-up
      refused.push(o.refused)
      p50.push(percentile(o.fromCommit, 50)); p99.push(percentile(o.fromCommit, 99)); max.push(percentile(o.fromCommit, 100))
      p50Ack.push(percentile(o.fromAck, 50)); p99Ack.push(percentile(o.fromAck, 99))
      p50Pub.push(percentile(o.fromPub, 50)); p99Pub.push(percentile(o.fromPub, 99))
      commitMs.push(o.ackMs)
      cpuMs.push(o.cpuMs)
      progress(`waiters ${n}: run ${r}/${cfg.runs} p50 ${percentile(o.fromCommit, 50).toFixed(2)} ms p99 ${percentile(o.fromCommit, 99).toFixed(2)} ms, refused ${o.refused}`)
    }
    for (let r = 0; r < Math.min(cfg.runs, MEMORY_ROUNDS); r++) {
      const o = await round(true)
      perWaiter.push(delta(o.memIdle, o.memParked, n))
      perWaiting.push(delta(memBefore, o.memParked, n))
      rssParked.push(o.memParked.rss)
    }
  } finally {
    await live.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  const perSession = delta(memBefore, memSessions, n)
  return {
    waiters: n,
    openSessionsMs: openMs,
    ...deliverySummary({ p50, p99, max, p50Ack, p99Ack, p50Pub, p99Pub, commitMs }),
    // CPU time of the whole process (every thread) from the commit call to the last answer.
    processCpuPerWakeMs: summary(cpuMs, 'ms'),
    waitingSessionRssBytes: summary(perWaiting.map(d => d.rss), 'bytes'),
    waitingSessionNativeEstimateBytes: summary(perWaiting.map(d => d.nativeEstimate), 'bytes'),
    waitingSessionHeapUsedBytes: summary(perWaiting.map(d => d.heapUsed), 'bytes'),
    parkedPollRssBytes: summary(perWaiter.map(d => d.rss), 'bytes'),
    parkedPollNativeEstimateBytes: summary(perWaiter.map(d => d.nativeEstimate), 'bytes'),
    parkedPollHeapUsedBytes: summary(perWaiter.map(d => d.heapUsed), 'bytes'),
    sessionRssBytes: perSession.rss,
    sessionNativeEstimateBytes: perSession.nativeEstimate,
    sessionHeapUsedBytes: perSession.heapUsed,
    processRssParkedBytes: summary(rssParked, 'bytes'),
    // Polls that woke but were answered with an error instead of the group (latencies above
    // cover delivered polls only), and the first such answer.
    refusedPolls: summary(refused, 'polls'),
    refusal
  }
}

async function run (cfg) {
  const templates = await rows.standaloneTemplates()
  const results = []
  for (const n of cfg.sizes) results.push(await measureN(cfg, templates, n))
  return { sizes: results, rssAtEndBytes: rssBytes() }
}

module.exports = { run }
