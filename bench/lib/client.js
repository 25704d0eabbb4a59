'use strict'
// A minimal lookup-live client for the benchmarks: request bodies, a snapshot drain in process
// (LiveLookup.open/read) and the same drain over HTTP (the router over loopback). Both parse every
// page, as a client must to find the cursor and the observations.

const crypto = require('node:crypto')
const { SERVICE } = require('./rows')
const { now } = require('./common')

/** Page limits of every benchmark read: the profile maxima (BRC-193 §2). */
const PAGE = { maxBytes: 4 * 1024 * 1024, maxObservations: 1024, waitMs: 0 }
const PUBLIC = { principal: '', authenticated: false }

function openBody (query = {}, limits = PAGE, requestId = crypto.randomBytes(16).toString('hex')) {
  return Buffer.from(JSON.stringify({ version: 1, requestId, service: SERVICE, query, limits }))
}

function readBody (session, cursor, limits = PAGE) {
  return Buffer.from(JSON.stringify({ version: 1, session, cursor, limits }))
}

function closeBody (session) {
  return Buffer.from(JSON.stringify({ version: 1, session }))
}

function parse (res, what) {
  const text = Buffer.from(res.body).toString('utf8')
  if (res.status !== 200) throw new Error(`${what} answered ${res.status}: ${text.slice(0, 300)}`)
  return JSON.parse(text)
}

/**
 * Back-to-back caught-up reads on every session for `ms`: `read(s)` resolves a session's next
 * batch, which must hold no group. Resolves {reads, cpuMicros} with this process's CPU time
 * (user + system) meanwhile. The reply to a benchmark process's {cmd: 'reads'}.
 */
async function caughtUpReads (sessions, ms, read) {
  let reads = 0
  const cpu0 = process.cpuUsage()
  const end = performance.now() + ms
  await Promise.all(sessions.map(async (s) => {
    while (performance.now() < end) {
      const b = await read(s)
      if (b.groups.length !== 0) throw new Error('a caught-up read returned groups')
      s.cursor = b.cursor
      reads++
    }
  }))
  const cpu = process.cpuUsage(cpu0)
  return { reads, cpuMicros: cpu.user + cpu.system }
}

function countObservations (batch) {
  let n = 0
  for (const g of batch.groups) n += g.observations.length
  return n
}

/** Outpoints ("txid.index") of the output observations of a batch, in order. */
function outpointsOf (batch) {
  const out = []
  for (const g of batch.groups) {
    for (const o of g.observations) {
      if (o.kind === 'output') out.push(`${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`)
    }
  }
  return out
}

/** Opens a session in process; resolves the parsed first batch and the latency in ms. */
/** `ms`: until the parsed batch is in hand; `bodyMs`: until the body bytes are (the open alone). */
async function openInProcess (live, query = {}, caller = PUBLIC, limits = PAGE) {
  const t0 = now()
  const res = await live.open(openBody(query, limits), caller)
  const bodyMs = now() - t0
  const batch = parse(res, 'open')
  return { batch, ms: now() - t0, bodyMs }
}

/** Opens and reads until the snapshot is complete; the session is closed afterwards. */
async function drainInProcess (live, query = {}, caller = PUBLIC) {
  const t0 = now()
  let b = parse(await live.open(openBody(query), caller), 'open')
  let observations = countObservations(b)
  let pages = 1
  while (!b.snapshotComplete) {
    b = parse(await live.read(readBody(b.session, b.cursor), caller), 'read')
    observations += countObservations(b)
    pages++
  }
  const ms = now() - t0
  await live.closeSession(closeBody(b.session), caller)
  return { ms, observations, pages }
}

/** POST to a lookup route of `server` (from lib/http.js startServer). */
async function post (server, op, body) {
  let res
  try {
    res = await fetch(`${server.base}/overlay/v1/lookup/${op}`, { method: 'POST', headers: server.headers, body })
  } catch (e) {
    // undici's "fetch failed" hides the reason (reset, refused, ...) in e.cause.
    throw new Error(`HTTP ${op} failed: ${e.message}${e.cause ? ' (' + (e.cause.code || '') + ' ' + e.cause.message + ')' : ''}`)
  }
  const buf = Buffer.from(await res.arrayBuffer())
  return { status: res.status, body: buf, headers: res.headers }
}

/** The same drain as drainInProcess, over HTTP (unauthenticated public mode). */
async function drainHttp (server, query = {}) {
  const t0 = now()
  let b = parse(await post(server, 'open', openBody(query)), 'HTTP open')
  let observations = countObservations(b)
  let pages = 1
  while (!b.snapshotComplete) {
    b = parse(await post(server, 'read', readBody(b.session, b.cursor)), 'HTTP read')
    observations += countObservations(b)
    pages++
  }
  const ms = now() - t0
  await post(server, 'close', closeBody(b.session))
  return { ms, observations, pages }
}

/**
 * Opens a session over HTTP with page `limits`; resolves the parsed first batch and the latency in
 * ms (request sent to body parsed). The session is closed afterwards, outside the timing.
 */
async function openHttp (server, query = {}, limits = PAGE) {
  const t0 = now()
  const res = await post(server, 'open', openBody(query, limits))
  const batch = parse(res, 'HTTP open')
  const ms = now() - t0
  await post(server, 'close', closeBody(batch.session))
  return { batch, ms, bytes: res.body.length }
}

/**
 * A BRC-24 lookup over HTTP: POST {base}/lookup with {service, query}, the body parsed as a client
 * must (JSON.parse of the whole answer). Resolves the answer, its size in bytes and the latency.
 */
async function lookupHttp (server, query = {}) {
  const t0 = now()
  const res = await fetch(`${server.base}/lookup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ service: SERVICE, query })
  })
  const buf = Buffer.from(await res.arrayBuffer())
  if (res.status !== 200) throw new Error(`HTTP /lookup answered ${res.status}: ${buf.toString('utf8', 0, 300)}`)
  const answer = JSON.parse(buf.toString('utf8'))
  return { answer, bytes: buf.length, ms: now() - t0 }
}

module.exports = { caughtUpReads, PAGE, PUBLIC, openBody, readBody, closeBody, parse, countObservations, outpointsOf, openInProcess, drainInProcess, drainHttp, post, openHttp, lookupHttp }
