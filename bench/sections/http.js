'use strict'
// The HTTP transport under load, on the real router (js/provider/router.js) over loopback:
// (a) long-poll delivery: N sessions opened over HTTP, one parked `POST .../lookup/read` per
//     session (waitMs 25 s), one commit, and the time until every poll's answer is received and
//     parsed by the client; every answer is checked to hold exactly the committed group;
// (b) immediate reads per second: reads that answer without waiting (snapshot pages of a small
//     page; caught-up live reads with waitMs 0) from 1 and 16 concurrent clients, in public mode;
// (c) the caught-up live reads again with BRC-103 authentication (NativeAuthFetch clients, the router's
//     own BRC-104 provider, js/auth/brc104.js).
// Client and server share this process (one event loop): each figure includes the client's own
// work (sending, receiving, JSON.parse), serialized with the server's on the same thread.

const fs = require('node:fs')
const path = require('node:path')
const { PrivateKey } = require('@bsv/sdk')
const { NativeAuthFetch, NativeWallet } = require('../../js')
const { LiveLookup } = require('../../js')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { plainService } = require('../../__test__/helpers/live')
const { ORIGIN, startServer, agent, postRaw } = require('../lib/http')
const { deliverySummary, publishedAt, now, summary, percentile, until, progress, rssBytes, peakRssBytes } = require('../lib/common')
const rows = require('../lib/rows')
const client = require('../lib/client')

const CHAIN = { network: 'test', genesisHash: '00'.repeat(32) }
/** Limits of a parked poll (and of the reads that bring sessions up to date). */
const WAIT = { maxBytes: 65536, maxObservations: 100, waitMs: 25000 }
const NOWAIT = { ...WAIT, waitMs: 0 }
/** The small page of the snapshot-read figure. */
const SMALL_PAGE = { maxBytes: 65536, maxObservations: 10, waitMs: 0 }
const SEED_ROWS = 10
/** Server keep-alive: longer than any gap between a run's requests (Node's default is 5 s). */
const KEEP_ALIVE_MS = 120000

async function openStore (dir, provider, caps = {}) {
  const live = await LiveLookup.open({
    dataDir: dir,
    create: true,
    chain: CHAIN,
    provider,
    sessionSeconds: 3600,
    replaySeconds: 600,
    compactionIntervalMs: 0,
    ...caps
  })
  live.wrap(rows.SERVICE, plainService(), createNotesCompanion())
  return live
}

/** Open file descriptors of this process, and its soft limit (Max open files). */
function fdUsage () {
  let open = null; let limit = null
  try { open = fs.readdirSync('/proc/self/fd').length } catch {}
  try {
    const m = /Max open files\s+(\d+|unlimited)/.exec(fs.readFileSync('/proc/self/limits', 'utf8'))
    if (m) limit = m[1] === 'unlimited' ? Infinity : Number(m[1])
  } catch {}
  return { open, limit }
}

function must (res, what) {
  if (res.status !== 200) throw new Error(`${what} answered ${res.status}: ${String(res.body).slice(0, 300)}`)
  return res.body
}

/**
 * Opens a session over HTTP and reads until its snapshot is complete (pages of `limits`, waitMs 0);
 * resolves {session, cursor}.
 */
async function openDrained (ag, server, limits = NOWAIT) {
  let b = must(await postRaw(ag, server, 'open', client.openBody({}, limits)), 'HTTP open')
  while (!b.snapshotComplete) b = must(await postRaw(ag, server, 'read', client.readBody(b.session, b.cursor, limits)), 'HTTP read')
  return { session: b.session, cursor: b.cursor }
}

/** Runs fn(i) for i in [0, n), at most `width` at a time. */
async function inChunks (n, width, fn) {
  const out = new Array(n)
  for (let start = 0; start < n; start += width) {
    await Promise.all(Array.from({ length: Math.min(width, n - start) }, async (_, k) => { out[start + k] = await fn(start + k) }))
  }
  return out
}

/**
 * Parks one long poll per session, 32 at a time: a poll's first scan is store work, bounded by
 * maxConcurrentWork (64 by default), so the next chunk is sent once the previous one is
 * registered as waiters (live.stats().waiters, read in this same process).
 */
async function park (live, ag, server, sessions) {
  const polls = []
  const chunk = 32
  const base = live.stats().waiters
  for (let start = 0; start < sessions.length; start += chunk) {
    for (const s of sessions.slice(start, start + chunk)) polls.push(postRaw(ag, server, 'read', client.readBody(s.session, s.cursor, WAIT)))
    const want = base + Math.min(sessions.length, start + chunk)
    await until(() => live.stats().waiters >= want, 60000, `${want} HTTP waiters`)
  }
  return polls
}

/** Brings a session whose poll was refused up to date with plain reads (retrying refusals). */
async function catchUp (ag, server, s) {
  for (;;) {
    const res = await postRaw(ag, server, 'read', client.readBody(s.session, s.cursor, NOWAIT))
    if (res.status !== 200) { await new Promise(resolve => setTimeout(resolve, 20)); continue }
    s.cursor = res.body.cursor
    if (res.body.groups.length === 0) return
  }
}

/** (a) Long-poll delivery to `n` HTTP pollers; run 0 is a warm-up. */
async function measurePolls (cfg, templates, n) {
  const dir = fs.mkdtempSync(path.join(cfg.dir, 'http-polls-'))
  // Public mode: every caller has the same (empty) principal, so the per-principal caps are the
  // whole store's caps here; sessions are told apart by their request ids.
  const caps = { maxSessionsPerPrincipal: n + 64, maxWaiters: n + 64, maxWaitersPerPrincipal: n + 64 }
  const live = await openStore(path.join(dir, 'live'), ORIGIN, caps)
  await rows.loadLive(live, templates, 0, SEED_ROWS, SEED_ROWS)
  let next = SEED_ROWS
  const server = await startServer(live, { keepAliveTimeoutMs: KEEP_ALIVE_MS })
  const ag = agent(n + 64)
  const fdBefore = fdUsage()
  const p50 = []; const p99 = []; const max = []; const p50Ack = []; const p99Ack = []; const p50Pub = []; const p99Pub = []; const commitMs = []; const refused = []
  let refusal = null; let fdParked = null; let sessions = null; let openMs = null
  try {
    const t0 = now()
    sessions = await inChunks(n, 32, () => openDrained(ag, server))
    openMs = now() - t0
    for (let r = 0; r <= cfg.runs; r++) {
      const polls = await park(live, ag, server, sessions)
      fdParked = fdUsage()
      const committed = rows.row(templates, next++)
      const tCommit = now()
      await live.commit([rows.admitChange(committed)])
      const tAck = now()
      const done = await Promise.all(polls)
      const tPub = publishedAt(live)
      const fromCommit = []; const fromAck = []; const fromPub = []; const refusedNow = []
      done.forEach((d, i) => {
        if (d.status !== 200) { refusedNow.push(sessions[i]); if (!refusal) refusal = `${d.status} ${String(d.body).slice(0, 200)}`; return }
        const b = d.body
        const obs = b.groups.length === 1 ? b.groups[0].observations : []
        if (obs.length !== 1 || obs[0].kind !== 'output' || obs[0].payload.evidence.txid !== committed.txid) {
          throw new Error('an HTTP poll did not receive exactly the committed group')
        }
        sessions[i].cursor = b.cursor
        fromCommit.push(d.at - tCommit)
        fromAck.push(d.at - tAck)
        fromPub.push(d.at - tPub)
      })
      for (const s of refusedNow) await catchUp(ag, server, s)
      if (r === 0) continue // warm-up
      refused.push(refusedNow.length)
      p50.push(percentile(fromCommit, 50)); p99.push(percentile(fromCommit, 99)); max.push(percentile(fromCommit, 100))
      p50Ack.push(percentile(fromAck, 50)); p99Ack.push(percentile(fromAck, 99))
      p50Pub.push(percentile(fromPub, 50)); p99Pub.push(percentile(fromPub, 99))
      commitMs.push(tAck - tCommit)
      progress(`http polls ${n}: run ${r}/${cfg.runs} p50 ${percentile(fromCommit, 50).toFixed(1)} ms p99 ${percentile(fromCommit, 99).toFixed(1)} ms, refused ${refusedNow.length}`)
    }
  } finally {
    ag.destroy()
    await server.close()
    await live.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  return {
    pollers: n,
    seedRows: SEED_ROWS,
    openSessionsMs: openMs,
    caps,
    agent: { keepAlive: true, maxSockets: n + 64 },
    serverKeepAliveTimeoutMs: KEEP_ALIVE_MS,
    fdBefore,
    fdParked,
    ...deliverySummary({ p50, p99, max, p50Ack, p99Ack, p50Pub, p99Pub, commitMs }),
    refusedPolls: summary(refused, 'polls'),
    refusal
  }
}

/**
 * `clients` concurrent loops, each issuing `step(state)` back to back until `ms` elapsed;
 * resolves reads per second over the window (a read in flight at the end is counted when it ends).
 */
async function readLoop (states, ms, step) {
  let reads = 0
  const t0 = now()
  const end = t0 + ms
  await Promise.all(states.map(async (st) => {
    while (now() < end) {
      const k = await step(st) // not `reads += await ...`: that reads `reads` before awaiting
      reads += k
    }
  }))
  return reads / ((now() - t0) / 1000)
}

/** A public-mode client state whose session reads snapshot pages of SMALL_PAGE. */
async function snapshotState (ag, server) {
  const b = must(await postRaw(ag, server, 'open', client.openBody({}, SMALL_PAGE)), 'HTTP open')
  return { session: b.session, cursor: b.cursor, reopens: 0 }
}

/** One snapshot page; a session whose snapshot ended is replaced by a new one (not counted as a read). */
function snapshotStep (ag, server) {
  return async (st) => {
    const b = must(await postRaw(ag, server, 'read', client.readBody(st.session, st.cursor, SMALL_PAGE)), 'HTTP snapshot read')
    if (!b.snapshotComplete && client.countObservations(b) === 0) throw new Error('a snapshot read returned no observations')
    if (b.snapshotComplete) {
      await postRaw(ag, server, 'close', client.closeBody(st.session))
      Object.assign(st, await snapshotState(ag, server), { reopens: st.reopens + 1 })
    } else {
      st.cursor = b.cursor
    }
    return 1
  }
}

/** One caught-up live read with waitMs 0 (an empty batch, answered at once). */
function liveStep (read) {
  return async (st) => {
    const b = await read(st, client.readBody(st.session, st.cursor, NOWAIT))
    if (b.groups.length !== 0) throw new Error('a caught-up live read returned groups')
    st.cursor = b.cursor
    return 1
  }
}

async function closeAll (ag, server, states) {
  for (const st of states) await postRaw(ag, server, 'close', client.closeBody(st.session))
}

/** Runs a read figure for each client count: a warm-up window, then cfg.runs measured windows. */
async function readFigure (name, counts, runs, ms, makeState, step, closeState) {
  const out = []
  for (const c of counts) {
    const states = []
    for (let i = 0; i < c; i++) states.push(await makeState(i))
    const perSec = []
    await readLoop(states, Math.min(ms, 300), step) // warm-up
    for (let r = 0; r < runs; r++) {
      perSec.push(await readLoop(states, ms, step))
      progress(`http ${name}, ${c} client(s): run ${r + 1}/${runs} ${perSec[perSec.length - 1].toFixed(0)} reads/s`)
    }
    await closeState(states)
    out.push({ clients: c, readsPerSec: summary(perSec, 'reads/s'), reopens: states.reduce((a, s) => a + (s.reopens || 0), 0) })
  }
  return out
}

/** (b) Immediate reads per second in public mode. */
async function measurePublicReads (cfg, templates) {
  const dir = fs.mkdtempSync(path.join(cfg.dir, 'http-reads-'))
  const maxClients = Math.max(...cfg.clients)
  const live = await openStore(path.join(dir, 'live'), ORIGIN, { maxSessionsPerPrincipal: 4 * maxClients + 64 })
  await rows.loadLive(live, templates, 0, cfg.snapshotRows)
  const server = await startServer(live, { keepAliveTimeoutMs: KEEP_ALIVE_MS })
  const ag = agent(maxClients + 16)
  try {
    const snapshot = await readFigure('snapshot pages', cfg.clients, cfg.readRuns, cfg.windowMs,
      () => snapshotState(ag, server), snapshotStep(ag, server), (states) => closeAll(ag, server, states))
    const read = async (st, body) => must(await postRaw(ag, server, 'read', body), 'HTTP live read')
    const caughtUp = await readFigure('live reads, waitMs 0', cfg.clients, cfg.readRuns, cfg.windowMs,
      () => openDrained(ag, server, client.PAGE), liveStep(read), (states) => closeAll(ag, server, states))
    return { rows: cfg.snapshotRows, snapshotPage: SMALL_PAGE, liveLimits: NOWAIT, snapshot, caughtUp }
  } finally {
    ag.destroy()
    await server.close()
    await live.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** A NativeAuthFetch client of its own identity, reading one session of a BRC-103 server. */
function authReader (server) {
  const af = new NativeAuthFetch(NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex()))
  const post = async (op, body) => {
    const res = await af.fetch(`${server.base}/overlay/v1/lookup/${op}`, { method: 'POST', headers: server.headers, body: body.toString('utf8') })
    const text = await res.text()
    if (res.status !== 200) throw new Error(`BRC-103 ${op} answered ${res.status}: ${text.slice(0, 300)}`)
    return JSON.parse(text)
  }
  return { af, post }
}

/** (c) Caught-up live reads per second with BRC-103 authentication. */
async function measureAuthReads (cfg, templates) {
  const dir = fs.mkdtempSync(path.join(cfg.dir, 'http-auth-'))
  const key = PrivateKey.fromRandom()
  const live = await openStore(path.join(dir, 'live'), key.toPublicKey().toString())
  await rows.loadLive(live, templates, 0, SEED_ROWS, SEED_ROWS)
  const server = await startServer(live, { authentication: 'brc103', privateKey: key.toHex(), keepAliveTimeoutMs: KEEP_ALIVE_MS })
  try {
    const makeState = async () => {
      const c = authReader(server)
      let b = await c.post('open', client.openBody({}, NOWAIT)) // the BRC-103 handshake happens here
      while (!b.snapshotComplete) b = await c.post('read', client.readBody(b.session, b.cursor, NOWAIT))
      return { c, session: b.session, cursor: b.cursor }
    }
    const caughtUp = await readFigure('BRC-103 live reads, waitMs 0', cfg.authClients, cfg.authRuns, cfg.windowMs,
      makeState, liveStep((st, body) => st.c.post('read', body)),
      async (states) => {
        for (const st of states) {
          await st.c.post('close', client.closeBody(st.session))
          st.c.af.close()
        }
      })
    return { rows: SEED_ROWS, liveLimits: NOWAIT, caughtUp }
  } finally {
    await server.close()
    await live.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

async function run (cfg) {
  const templates = await rows.standaloneTemplates()
  const polls = []
  for (const n of cfg.pollers) polls.push(await measurePolls(cfg, templates, n))
  const reads = await measurePublicReads(cfg, templates)
  const authReads = cfg.authRuns > 0 ? await measureAuthReads(cfg, templates) : null
  return { polls, reads, authReads, windowMs: cfg.windowMs, rssAtEndBytes: rssBytes(), peakRssBytes: peakRssBytes() }
}

module.exports = { run }
