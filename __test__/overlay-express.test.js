'use strict'
// Hosting on Overlay Express (docs/operators.md "Overlay Express").
//
// 2.2: this package's router mounted on server.app before start(), on a composition that
// installs what OverlayExpress.start() installs, in its order (helpers/overlay-express-host.js),
// with a real Engine; the conformance checker then runs against it, publishing through the
// host's own /submit.
//
// 2.8: the companion of createOutputLookupRouter / configureOutputLookup, driven exactly as
// that router calls a companion (asRouter below): the parsed request, the verified caller
// {principal, capabilityDigest} and an AbortSignal in; {body, headers} or a thrown Error with
// own code/retryable/limit out.

const { PrivateKey, Transaction } = require('@bsv/sdk')
const h = require('./helpers/live')
const { OverlayExpressHost } = require('./helpers/overlay-express-host')
const { createTestEngine, NoteFactory } = require('./helpers/engine')
const { startNode, openReq, readReq, NOTES_TOPIC } = require('./helpers/node')
const { NotesLookupService } = require('../demo/notes/NotesLookupService')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')
const { mountOnOverlayExpress, createOutputLookupCompanion } = require('../js/provider/overlay-express')
const { runChecks, CHECKS, needing } = require('../js/check')
const { PROFILE } = require('../js/provider/router')
const native = require('../js/common/native')
const wire = require('../js/common/wire')

const closers = []
afterEach(async () => {
  while (closers.length > 0) await closers.pop()()
})

/** A 2.2-style host: listening, its Engine configured, start() not yet called. */
async function overlayExpressHost () {
  const host = await new OverlayExpressHost().listen()
  const serverKey = PrivateKey.fromRandom()
  const live = await h.openLive(h.tempDir('oe-live-'), { provider: serverKey.toPublicKey().toString(), maxWaitMs: 20000 })
  const t = await createTestEngine({
    lookupServices: async (knex) => {
      const inner = new NotesLookupService(knex)
      await inner.init()
      return { ls_notes: live.wrap('ls_notes', inner, createNotesCompanion()) }
    }
  })
  host.engine = t.engine // what configureEngine() leaves behind
  closers.push(async () => { await host.close(); await t.close(); await live.close() })
  const factory = new NoteFactory(t.chainTracker)
  /** Publishes through the host's own POST /submit (its octet-stream body parser). */
  const publish = async (texts) => {
    const built = await factory.createNotes(texts)
    const res = await fetch(host.origin + '/submit', {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', 'x-topics': JSON.stringify([NOTES_TOPIC]) },
      body: Buffer.from(built.beef)
    })
    if (res.status !== 200) throw new Error(`/submit answered ${res.status}: ${await res.text()}`)
    return built
  }
  const routerOptions = { baseURL: host.origin, authentication: 'brc103', privateKey: serverKey.toHex(), allowLocalHttp: true }
  return { host, live, publish, routerOptions }
}

describe('Overlay Express 2.2: the router on server.app before start()', () => {
  test('every conformance check passes through the host composition, and the host routes keep working', async () => {
    const { host, live, publish, routerOptions } = await overlayExpressHost()
    await mountOnOverlayExpress(host, live, routerOptions)
    await host.start()
    const before = await publish(['first', 'second'])
    let published = 0
    const report = await runChecks({
      baseURL: host.origin,
      service: 'ls_notes',
      auth: 'brc103',
      allowInsecureHttp: true,
      emptyQuery: { author: 'nobody' },
      waitMs: 400,
      mutate: async () => { await publish([`published ${++published}`]) }
    })
    expect(report.results.filter(r => r.status !== 'ok').map(r => r.line)).toEqual([
      expect.stringMatching(/^skip cors\.preflight: /), // no browser origin configured on this host
      ...needing('long').map(c => expect.stringMatching(new RegExp(`^skip ${c.replace('.', '\\.')}: runs long`)))
    ])
    expect(report.passed).toBe(CHECKS.length - 1 - needing('long').length)
    // The host's JSON body parser still serves its own routes after ours.
    const lookup = await fetch(host.origin + '/lookup', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ service: 'ls_notes', query: {} }) })
    expect(lookup.status).toBe(200)
    const outputs = (await lookup.json()).outputs
    expect(published).toBe(2)
    expect(outputs).toHaveLength(2 + published)
    expect(outputs.map(o => Transaction.fromBEEF(o.beef).id('hex'))).toContain(before.txid)
    expect((await fetch(host.origin + '/listTopicManagers')).status).toBe(200)
    const missing = await fetch(host.origin + '/no-such-route')
    expect(missing.status).toBe(404)
    expect((await missing.json()).code).toBe('ERR_ROUTE_NOT_FOUND')
    // The host's allow-everything CORS never reaches the lookup routes: they answered first.
    const manifest = await fetch(host.origin + '/overlay/v1/capabilities', { headers: { origin: 'https://elsewhere.example' } })
    expect(manifest.status).toBe(200)
    expect(manifest.headers.get('access-control-allow-origin')).toBeNull()
    expect(manifest.headers.get('cache-control')).toBe('private, no-store')
  })

  test('mounting after start() is refused, and a router behind the body parsers says so instead of hanging', async () => {
    const { host, live, routerOptions } = await overlayExpressHost()
    await host.start()
    await expect(mountOnOverlayExpress(host, live, routerOptions)).rejects.toThrow(/before OverlayExpress.start\(\)/)
    // Mounted by hand behind the host's parsers (ahead of its 404, as an operator might try).
    host.app.use(live.router(routerOptions))
    const stack = host.app.router.stack
    const ours = stack.pop()
    stack.splice(stack.length - 1, 0, ours)
    const res = await fetch(host.origin + '/overlay/v1/lookup/open', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
      body: JSON.stringify(openReq())
    })
    expect(res.status).toBe(422)
    expect((await res.json()).error).toMatchObject({ code: 'unsupported', message: 'the lookup routes must be mounted before any body parser' })
  })
})

// --- Overlay Express 2.8 --------------------------------------------------------------------

/** Error codes createOutputLookupRouter turns into envelopes (any other is `unavailable`). */
const ROUTER_CODES = ['invalid', 'unauthorized', 'not-found', 'conflict', 'equivocation', 'reset-required', 'context-changed', 'expired', 'limited', 'unsupported', 'unavailable']

/** The request as the router hands it over: parsed JSON whose objects have no prototype. */
function parseAsRouter (text) {
  return JSON.parse(text, (k, v) => (v && typeof v === 'object' && !Array.isArray(v)) ? Object.assign(Object.create(null), v) : v)
}

/**
 * One call the way createOutputLookupRouter makes it: companion[op](input, who, signal); a
 * success must be a string body within 4 MiB whose headers echo exactly the caller's
 * capability digest and the profile (else the router answers 503); a throw becomes the
 * envelope of its own `code` (when the router knows it), `retryable` and, for limited, `limit`.
 */
async function asRouter (companion, op, payload, who, signal) {
  const input = parseAsRouter(typeof payload === 'string' ? payload : JSON.stringify(payload))
  let response
  try {
    response = await companion[op](input, who, signal)
  } catch (error) {
    let code = 'unavailable'
    let retryable = true
    let limit
    if (error instanceof Error) {
      const own = Object.getOwnPropertyDescriptors(error)
      if (own.code && ROUTER_CODES.includes(own.code.value)) {
        code = own.code.value
        retryable = own.retryable ? own.retryable.value === true : false
        if (code === 'limited') limit = own.limit && own.limit.value
      }
    }
    return { status: wire.statusOf(code), error: { code, retryable, ...(limit ? { limit } : {}) }, thrown: error }
  }
  if (signal && signal.aborted) return { aborted: true }
  const contract = typeof response.body === 'string' && Buffer.byteLength(response.body) <= 4 * 1024 * 1024 &&
    response.headers['x-bsv-overlay-capability'] === who.capabilityDigest && response.headers['x-bsv-overlay-profile'] === PROFILE
  if (!contract) return { status: 503, error: { code: 'unavailable', retryable: false }, violated: response }
  return { status: 200, text: response.body, body: JSON.parse(response.body), headers: response.headers }
}

/** A node whose access scope names the principal, and the companion slot for its service. */
async function slotNode (options = {}) {
  const n = await startNode({
    authentication: 'brc103',
    live: { authorize: ({ principal }) => ({ partition: principal ? 'member:' + principal.slice(0, 16) : 'public' }) },
    ...options
  })
  closers.push(() => n.close())
  const slot = createOutputLookupCompanion(n.live, {
    service: 'ls_notes', privateKey: n.serverKey.toHex(), baseURL: n.origin + '/tenant/api', authentication: 'brc103', allowLocalHttp: true
  })
  const capabilityDigest = wire.digest('capabilities', slot.manifest().body)
  const caller = (key) => ({ principal: key.toPublicKey().toString(), capabilityDigest })
  return { n, slot, caller }
}

describe('Overlay Express 2.8: the output-lookup companion', () => {
  test('the slot gives the router what it checks: one service, one profile, identity, base, chain, clock', async () => {
    const { n, slot } = await slotNode()
    const signed = slot.manifest()
    expect(native.verifySignedManifest(signed)).toBe(slot.identity)
    expect(slot.identity).toBe(n.identity)
    expect(signed.body).toMatchObject({ identity: slot.identity, baseURL: n.origin + '/tenant/api', chain: slot.chain })
    expect(signed.body.services).toHaveLength(1)
    expect(signed.body.services[0].name).toBe('ls_notes')
    expect(signed.body.services[0].profiles).toEqual([expect.objectContaining({ id: PROFILE, authentication: 'brc103', payment: 'none' })])
    expect(BigInt(slot.now()) < BigInt(signed.body.expiresAt)).toBe(true)
    expect(Object.keys(slot.companion).sort()).toEqual(['close', 'open', 'read'])
    expect(slot).toMatchObject({ service: 'ls_notes', authentication: 'brc103', allowLocalHTTP: true, baseURL: signed.body.baseURL })
    // The router's own manifest (all services) and this one are kept apart.
    expect(n.router.manifest.digest()).not.toBe(wire.digest('capabilities', signed.body))
  })

  test('open, snapshot, live and close answer {body, headers} with the caller\'s selection', async () => {
    const { n, slot, caller } = await slotNode()
    const alice = caller(PrivateKey.fromRandom())
    const notes = await n.factory.createNotes(['a', 'b'])
    await n.submit(notes)
    const open = openReq({}, { maxObservations: 1 })
    const first = await asRouter(slot.companion, 'open', open, alice)
    expect(first.status).toBe(200)
    expect(first.headers).toEqual({ 'x-bsv-overlay-capability': alice.capabilityDigest, 'x-bsv-overlay-profile': PROFILE })
    expect(first.body).toMatchObject({ phase: 'snapshot', snapshotComplete: false })
    // scope.access is derived from the caller's partition (never the credential itself).
    expect(first.body.scope.access).toBe(n.live.accessOf('member:' + alice.principal.slice(0, 16)))
    const second = await asRouter(slot.companion, 'read', readReq(first.body, { maxObservations: 1 }), alice)
    expect(second.body.snapshotComplete).toBe(true)
    const live = await asRouter(slot.companion, 'read', readReq(second.body), alice)
    expect(live.body).toMatchObject({ phase: 'live', groups: [] })
    const later = await n.factory.createNotes(['c'])
    await n.submit(later)
    const change = await asRouter(slot.companion, 'read', readReq(live.body), alice)
    expect(change.body.groups[0].observations[0].payload.evidence.txid).toBe(later.txid)
    // The saved first batch, byte for byte, after reads advanced.
    expect((await asRouter(slot.companion, 'open', open, alice)).text).toBe(first.text)
    expect((await asRouter(slot.companion, 'close', { version: 1, session: first.body.session }, alice)).body).toEqual({ version: 1, closed: true })
    const closed = await asRouter(slot.companion, 'read', readReq(change.body), alice)
    expect(closed.error).toEqual({ code: 'expired', retryable: false })
  })

  test("the verified principal scopes sessions and open retries; no principal is unauthorized", async () => {
    const { n, slot, caller } = await slotNode()
    const alice = caller(PrivateKey.fromRandom())
    const bob = caller(PrivateKey.fromRandom())
    const open = openReq()
    const a = await asRouter(slot.companion, 'open', open, alice)
    expect(a.status).toBe(200)
    const stolen = await asRouter(slot.companion, 'read', readReq(a.body), bob)
    expect(stolen).toMatchObject({ status: 409, error: { code: 'reset-required' } })
    // The idempotency key includes the principal: bob's open with alice's requestId is his own.
    const b = await asRouter(slot.companion, 'open', open, bob)
    expect(b.status).toBe(200)
    expect(b.body.session).not.toBe(a.body.session)
    expect(b.body.scope.access).toBe(n.live.accessOf('member:' + bob.principal.slice(0, 16)))
    const nobody = await asRouter(slot.companion, 'open', openReq(), { principal: null, capabilityDigest: alice.capabilityDigest })
    expect(nobody).toMatchObject({ status: 401, error: { code: 'unauthorized' } })
  })

  test('the capability digest must name a manifest this provider issued', async () => {
    const { slot, caller } = await slotNode()
    const alice = caller(PrivateKey.fromRandom())
    const stale = await asRouter(slot.companion, 'open', openReq(), { ...alice, capabilityDigest: 'ab'.repeat(32) })
    expect(stale).toMatchObject({ status: 409, error: { code: 'context-changed', retryable: false } })
    expect((await asRouter(slot.companion, 'open', openReq(), alice)).status).toBe(200)
  })

  test('errors are Errors whose own code, retryable and limit the router maps', async () => {
    const { slot, caller } = await slotNode()
    const alice = caller(PrivateKey.fromRandom())
    const tiny = await asRouter(slot.companion, 'open', openReq({}, { maxBytes: 1 }), alice)
    expect(tiny.thrown).toBeInstanceOf(Error)
    expect(tiny).toMatchObject({ status: 413, error: { code: 'limited', retryable: false, limit: { kind: 'envelope' } } })
    expect(tiny.error.limit.minimumBytes).toBeGreaterThan(1)
    const strict = await asRouter(slot.companion, 'open', { ...openReq(), unexpected: 1 }, alice)
    expect(strict).toMatchObject({ status: 400, error: { code: 'invalid' } })
    const unknown = await asRouter(slot.companion, 'open', { ...openReq(), service: 'ls_other' }, alice)
    expect(unknown).toMatchObject({ status: 404, error: { code: 'not-found' } })
    const conflict = { ...openReq() }
    expect((await asRouter(slot.companion, 'open', conflict, alice)).status).toBe(200)
    const changed = await asRouter(slot.companion, 'open', { ...conflict, query: { author: '02' + '11'.repeat(32) } }, alice)
    expect(changed).toMatchObject({ status: 409, error: { code: 'conflict' } })
  })

  test('the abort signal cancels a waiting poll: the native waiter answers cancelled, nothing is consumed', async () => {
    const { n, slot, caller } = await slotNode()
    const alice = caller(PrivateKey.fromRandom())
    const first = await asRouter(slot.companion, 'open', openReq(), alice)
    const caught = await asRouter(slot.companion, 'read', readReq(first.body), alice)
    // What the native provider answers each read (the real LiveLookup, observed).
    const answered = []
    const read = n.live.read.bind(n.live)
    n.live.read = (...args) => read(...args).then((r) => { answered.push(JSON.parse(Buffer.from(r.body).toString('utf8'))); return r })
    const ac = new AbortController()
    const poll = asRouter(slot.companion, 'read', readReq(caught.body, { waitMs: 20000 }), alice, ac.signal)
    while (n.live.stats().waiters === 0) await new Promise(resolve => setImmediate(resolve))
    ac.abort()
    expect(await poll).toMatchObject({ status: 503, thrown: expect.objectContaining({ name: 'AbortError' }) })
    expect(answered).toEqual([expect.objectContaining({ error: expect.objectContaining({ code: 'cancelled' }) })])
    expect(n.live.stats().waiters).toBe(0)
    // The cursor still reads: the cancelled poll consumed nothing.
    const later = await n.factory.createNotes(['after the cancelled poll'])
    await n.submit(later)
    const next = await asRouter(slot.companion, 'read', readReq(caught.body), alice)
    expect(next.body.groups[0].observations[0].payload.evidence.txid).toBe(later.txid)
  })

  test('the abort signal cancels an open: nothing is stored, and the same requestId opens afresh', async () => {
    // The companion's select waits on a gate, so the caller can go away during the open.
    let release
    const gate = new Promise(resolve => { release = resolve })
    const notes = createNotesCompanion()
    const gated = { ...notes, select: async (q) => { await gate; return notes.select(q) } }
    const { n, slot, caller } = await slotNode({ companion: gated })
    const alice = caller(PrivateKey.fromRandom())
    const sessions = n.live.stats().sessions
    const ac = new AbortController()
    const open = openReq()
    const abandoned = asRouter(slot.companion, 'open', open, alice, ac.signal)
    ac.abort()
    release()
    expect(await abandoned).toMatchObject({ thrown: expect.objectContaining({ name: 'AbortError' }) })
    expect(n.live.stats().sessions).toBe(sessions)
    const again = await asRouter(slot.companion, 'open', open, alice)
    expect(again.status).toBe(200)
    expect(n.live.stats().sessions).toBe(sessions + 1)
  })
})
