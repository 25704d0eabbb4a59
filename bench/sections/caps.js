'use strict'
// Behaviour past each cap: every case drives a small real store (and, for transport limits, the
// real router over loopback) past one cap, records the status and error code it got, and then
// checks that the same process still serves a normal request. Nothing here is a timing.

const fs = require('node:fs')
const path = require('node:path')
const http = require('node:http')
const { LiveLookup } = require('../../js')
const { ORIGIN, startServer } = require('../lib/http')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { plainService } = require('../../__test__/helpers/live')
const { until, sleep, progress } = require('../lib/common')
const rows = require('../lib/rows')
const client = require('../lib/client')

const BASE = { chain: { network: 'test', genesisHash: '00'.repeat(32) }, provider: ORIGIN, sessionSeconds: 600, replaySeconds: 600, compactionIntervalMs: 0 }
const ALICE = { principal: '02' + 'aa'.repeat(32), authenticated: true }
const BOB = { principal: '03' + 'bb'.repeat(32), authenticated: true }
const CAROL = { principal: '02' + 'cc'.repeat(32), authenticated: true }
const WAIT = { maxBytes: 65536, maxObservations: 100, waitMs: 20000 }

function errorOf (res) {
  try {
    return JSON.parse(Buffer.from(res.body).toString('utf8')).error || null
  } catch {
    return null
  }
}

/** What a refused request looked like, in one row of the table. */
function outcome (res) {
  const e = errorOf(res)
  return {
    status: res.status,
    code: e ? e.code : null,
    retryAfterMs: e && e.retryAfterMs !== undefined ? e.retryAfterMs : null,
    limit: e && e.limit ? e.limit : null,
    bytes: Buffer.from(res.body).length
  }
}

async function freshStore (cfg, options, seed = 3) {
  const dir = fs.mkdtempSync(path.join(cfg.dir, 'caps-'))
  const live = await LiveLookup.open({ ...BASE, ...options, dataDir: path.join(dir, 'live'), create: true })
  live.wrap(rows.SERVICE, plainService(), createNotesCompanion())
  if (seed > 0) await rows.loadLive(live, cfg.templates, 0, seed, seed)
  return {
    live,
    async done () {
      await live.close()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** Opens a session for `caller` and drains its snapshot; resolves {session, cursor}. */
async function liveSession (live, caller) {
  let b = client.parse(await live.open(client.openBody({}, { ...WAIT, waitMs: 0 }), caller), 'open')
  while (!b.snapshotComplete) b = client.parse(await live.read(client.readBody(b.session, b.cursor, { ...WAIT, waitMs: 0 }), caller), 'read')
  return { session: b.session, cursor: b.cursor, caller }
}

/** A normal open on the same store still works afterwards. */
async function stillServes (live, caller = CAROL) {
  const res = await live.open(client.openBody({}, { ...WAIT, waitMs: 0 }), caller)
  return res.status === 200
}

const cases = []
function kase (cap, setting, action, fn) {
  cases.push({ cap, setting, action, fn })
}

kase('maxWaiters', 'maxWaiters: 2', 'a 3rd waiting read (3 principals)', async (cfg) => {
  const s = await freshStore(cfg, { maxWaiters: 2 })
  try {
    const [a, b, c] = [await liveSession(s.live, ALICE), await liveSession(s.live, BOB), await liveSession(s.live, CAROL)]
    const polls = [a, b].map(x => s.live.read(client.readBody(x.session, x.cursor, WAIT), x.caller))
    await until(() => s.live.stats().waiters === 2, 10000, 'two waiters')
    const refused = await s.live.read(client.readBody(c.session, c.cursor, WAIT), CAROL)
    await s.live.commit([rows.admitChange(rows.row(cfg.templates, 100))])
    const woke = await Promise.all(polls)
    return { ...outcome(refused), alive: woke.every(r => r.status === 200) && await stillServes(s.live, { principal: '02' + 'dd'.repeat(32), authenticated: true }) }
  } finally { await s.done() }
})

kase('maxWaitersPerPrincipal', 'maxWaitersPerPrincipal: 1', 'a 2nd waiting read of one principal', async (cfg) => {
  const s = await freshStore(cfg, { maxWaitersPerPrincipal: 1 })
  try {
    const a = await liveSession(s.live, ALICE)
    const a2 = await liveSession(s.live, ALICE)
    const poll = s.live.read(client.readBody(a.session, a.cursor, WAIT), ALICE)
    await until(() => s.live.stats().waiters === 1, 10000, 'one waiter')
    const refused = await s.live.read(client.readBody(a2.session, a2.cursor, WAIT), ALICE)
    await s.live.commit([rows.admitChange(rows.row(cfg.templates, 100))])
    return { ...outcome(refused), alive: (await poll).status === 200 && await stillServes(s.live) }
  } finally { await s.done() }
})

kase('maxSessionsPerPrincipal', 'maxSessionsPerPrincipal: 2', 'a 3rd open of one principal', async (cfg) => {
  const s = await freshStore(cfg, { maxSessionsPerPrincipal: 2 })
  try {
    await liveSession(s.live, ALICE)
    await liveSession(s.live, ALICE)
    const refused = await s.live.open(client.openBody({}, { ...WAIT, waitMs: 0 }), ALICE)
    return { ...outcome(refused), alive: await stillServes(s.live, BOB) }
  } finally { await s.done() }
})

kase('maxConcurrentWork', 'maxConcurrentWork: 1', '32 opens of 32 principals at once', async (cfg) => {
  const s = await freshStore(cfg, { maxConcurrentWork: 1 }, 50)
  try {
    const callers = Array.from({ length: 32 }, (_, i) => ({ principal: '02' + String(i).padStart(64, '0'), authenticated: true }))
    const all = await Promise.all(callers.map(c => s.live.open(client.openBody({}, { ...WAIT, waitMs: 0 }), c)))
    const refused = all.filter(r => r.status !== 200)
    const shown = refused.length > 0 ? outcome(refused[0]) : outcome(all[0])
    return { ...shown, alive: await stillServes(s.live), note: `${refused.length} of 32 refused` + (refused.length === 0 ? ' (the opens did not overlap)' : '') }
  } finally { await s.done() }
})

/** A commit the store refuses: the rejection's code and status, as js/provider/live.js maps them. */
async function refusedCommit (live, changes) {
  try {
    await live.commit(changes)
    return { status: null, code: 'accepted (no error)', retryAfterMs: null, limit: null, message: null }
  } catch (e) {
    return { status: e.status ?? null, code: e.code ?? null, retryAfterMs: null, limit: null, message: e.message }
  }
}

kase('maxRows', 'maxRows: 5 (3 present)', 'commit a group admitting 3 more rows', async (cfg) => {
  const s = await freshStore(cfg, { maxRows: 5 })
  try {
    const r = await refusedCommit(s.live, [3, 4, 5].map(n => rows.admitChange(rows.row(cfg.templates, n))))
    const rowsAfter = s.live.stats().rows
    // A group that shrinks the store still commits past the cap.
    const shrink = await s.live.commit([rows.spendChange(rows.row(cfg.templates, 0))])
    return { ...r, alive: rowsAfter === 3 && shrink !== null && await stillServes(s.live), note: `rows after refusal ${rowsAfter}; a spend still commits` }
  } finally { await s.done() }
})

kase('maxRetainedBytes', 'maxRetainedBytes: 20000', 'keep committing 10-row groups until refused', async (cfg) => {
  const s = await freshStore(cfg, { maxRetainedBytes: 20000 }, 0)
  try {
    let n = 0
    let r = null
    for (let g = 0; g < 100 && r === null; g++) {
      const res = await refusedCommit(s.live, Array.from({ length: 10 }, () => rows.admitChange(rows.row(cfg.templates, n++))))
      if (res.status !== null || res.code !== 'accepted (no error)') r = res
    }
    return { ...(r || { status: null, code: 'never refused' }), alive: await stillServes(s.live), note: `refused after ${s.live.stats().rows} rows` }
  } finally { await s.done() }
})

kase('response: group larger than maxObservations', 'read maxObservations: 5', 'a committed group of 20 outputs', async (cfg) => {
  const s = await freshStore(cfg, {})
  try {
    const a = await liveSession(s.live, ALICE)
    await s.live.commit(Array.from({ length: 20 }, (_, i) => rows.admitChange(rows.row(cfg.templates, 200 + i))))
    const refused = await s.live.read(client.readBody(a.session, a.cursor, { maxBytes: 65536, maxObservations: 5, waitMs: 0 }), ALICE)
    const ok = await s.live.read(client.readBody(a.session, a.cursor, { maxBytes: 65536, maxObservations: 20, waitMs: 0 }), ALICE)
    return { ...outcome(refused), alive: ok.status === 200 }
  } finally { await s.done() }
})

kase('response: group larger than maxBytes', 'read maxBytes: 4096', 'a committed group of 20 outputs (~20 KB)', async (cfg) => {
  const s = await freshStore(cfg, {})
  try {
    const a = await liveSession(s.live, ALICE)
    await s.live.commit(Array.from({ length: 20 }, (_, i) => rows.admitChange(rows.row(cfg.templates, 200 + i))))
    const refused = await s.live.read(client.readBody(a.session, a.cursor, { maxBytes: 4096, maxObservations: 100, waitMs: 0 }), ALICE)
    const need = outcome(refused).limit && outcome(refused).limit.minimumBytes
    const ok = await s.live.read(client.readBody(a.session, a.cursor, { maxBytes: need || 65536, maxObservations: 100, waitMs: 0 }), ALICE)
    return { ...outcome(refused), alive: ok.status === 200 }
  } finally { await s.done() }
})

kase('request limits above the profile maxima', 'maxObservations: 100000, maxBytes: 64 MiB, waitMs: 10 min', 'open (clamped, not refused: BRC-193 §2)', async (cfg) => {
  const s = await freshStore(cfg, {})
  try {
    const res = await s.live.open(client.openBody({}, { maxBytes: 64 * 1024 * 1024, maxObservations: 100000, waitMs: 600000 }), ALICE)
    const b = res.status === 200 ? JSON.parse(Buffer.from(res.body).toString('utf8')) : null
    return { ...outcome(res), limit: b && b.limits ? b.limits : null, alive: await stillServes(s.live) }
  } finally { await s.done() }
})

kase('request body > 1 MiB (in process)', '1 MiB', 'live.open with a 1.2 MiB body', async (cfg) => {
  const s = await freshStore(cfg, {})
  try {
    const big = Buffer.from(JSON.stringify({ version: 1, requestId: 'a'.repeat(32), service: rows.SERVICE, query: { pad: 'x'.repeat(1200 * 1024) }, limits: WAIT }))
    const res = await s.live.open(big, ALICE)
    return { ...outcome(res), alive: await stillServes(s.live) }
  } finally { await s.done() }
})

kase('JSON nesting > 32 levels', '32 levels (BRC-192 §9)', 'open whose query nests 40 arrays', async (cfg) => {
  const s = await freshStore(cfg, {})
  try {
    const body = Buffer.from(`{"version":1,"requestId":"${'b'.repeat(32)}","service":"${rows.SERVICE}","query":{"deep":${'['.repeat(40)}${']'.repeat(40)}},"limits":{"maxBytes":65536,"maxObservations":10,"waitMs":0}}`)
    const res = await s.live.open(body, ALICE)
    return { ...outcome(res), alive: await stillServes(s.live) }
  } finally { await s.done() }
})

/** Raw HTTP request (fetch cannot send oversized or duplicate headers). */
function rawPost (port, pathname, headers, body) {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: pathname, method: 'POST', headers }, (res) => {
      const chunks = []
      res.on('data', c => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }))
      res.on('error', (e) => resolve({ status: null, body: Buffer.from(String(e)) }))
    })
    req.on('error', (e) => resolve({ status: 'connection error: ' + e.code, body: Buffer.alloc(0) }))
    req.end(body)
  })
}

async function withServer (cfg, fn) {
  const s = await freshStore(cfg, {})
  const server = await startServer(s.live)
  try {
    return await fn(server, s)
  } finally {
    await server.close()
    await s.done()
  }
}

async function httpStillServes (server) {
  const res = await client.post(server, 'open', client.openBody({}, { ...WAIT, waitMs: 0 }))
  return res.status === 200
}

kase('HTTP request body > 1 MiB', '1 MiB (BRC-193 §8)', 'POST /lookup/open with a 1.2 MiB body', async (cfg) => withServer(cfg, async (server) => {
  const big = Buffer.alloc(1200 * 1024, 0x20)
  const res = await rawPost(server.port, '/overlay/v1/lookup/open', { ...server.headers, 'content-length': big.length }, big)
  return { ...outcome(res), alive: await httpStillServes(server) }
}))

kase('HTTP request body > 1 MiB, chunked', '1 MiB', 'POST /lookup/open streaming 1.2 MiB without Content-Length', async (cfg) => withServer(cfg, async (server) => {
  const big = Buffer.alloc(1200 * 1024, 0x20)
  const res = await rawPost(server.port, '/overlay/v1/lookup/open', { ...server.headers, 'transfer-encoding': 'chunked' }, big)
  return { ...outcome(res), alive: await httpStillServes(server) }
}))

kase('HTTP request headers > 16 KiB', '16 KiB (BRC-193 §8)', 'POST /lookup/open with a 20 KiB header', async (cfg) => withServer(cfg, async (server) => {
  const res = await rawPost(server.port, '/overlay/v1/lookup/open', { ...server.headers, 'x-padding': 'p'.repeat(20 * 1024) }, client.openBody())
  return { ...outcome(res), alive: await httpStillServes(server) }
}))

async function run (cfg) {
  cfg.templates = await rows.standaloneTemplates(1)
  const table = []
  for (const c of cases) {
    let r
    try {
      r = await c.fn(cfg)
    } catch (e) {
      r = { status: null, code: 'harness error: ' + (e && e.message), alive: false }
    }
    table.push({ cap: c.cap, setting: c.setting, action: c.action, ...r })
    progress(`caps: ${c.cap}: ${r.status} ${r.code} alive=${r.alive}`)
    await sleep(5)
  }
  return { cases: table, processAlive: true }
}

module.exports = { run }
