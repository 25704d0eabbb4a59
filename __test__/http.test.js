'use strict'
// The HTTP routes on real parts: Express 5 over loopback, the real BRC-103/104
// middleware with AuthFetch clients of two distinct identities, a real
// @bsv/overlay Engine with real transactions, and the native sled store.

const { AuthFetch, PrivateKey, ProtoWallet, SignedMessage, Utils } = require('@bsv/sdk')
const h = require('./helpers/live')
const { startProxy, observeVerdicts, flush } = require('./helpers/net')
const { startNode, authClient, publicClient, openReq, readReq, drain, openCaughtUp, PROFILE } = require('./helpers/node')
const wire = require('../js/common/wire')

const ALLOWED_ORIGIN = 'http://app.example.test'

async function manifestOf (node) {
  const res = await fetch(`${node.origin}/overlay/v1/capabilities`)
  expect(res.status).toBe(200)
  return res.json()
}

function preimage (type, body) {
  return Buffer.concat([Buffer.from('BRC-OUTPUT/1/' + type), Buffer.from([0]), Buffer.from(wire.canonicalize(body))])
}

function outputs (batch) {
  return batch.groups.flatMap(g => g.observations.filter(o => o.kind === 'output').map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`))
}

describe('BRC-103 authenticated routes', () => {
  let node, capability
  const logged = []
  beforeAll(async () => {
    node = await startNode({ allowedOrigins: [ALLOWED_ORIGIN], log: (entry) => logged.push(entry) })
    capability = wire.digest('capabilities', (await manifestOf(node)).body)
  })
  afterAll(async () => { await node.close() })

  test('the manifest is signed by the provider identity, verifies with the SDK and lists the service', async () => {
    const signed = await manifestOf(node)
    expect(signed.body.identity).toBe(node.identity)
    expect(SignedMessage.verify([...preimage('capabilities', signed.body)], Utils.toArray(signed.signature, 'base64'))).toBe(true)
    const svc = signed.body.services.find(s => s.name === 'ls_notes')
    expect(svc.rulesDigest).toBe(wire.digest('service-rules', svc.rules))
    expect(svc.profiles[0]).toMatchObject({ id: PROFILE, authentication: 'brc103', payment: 'none', maxRequestBytes: 1048576 })
    expect(svc.profiles[0].parameters).toMatchObject({ sessionSeconds: '600', replaySeconds: '600', maxWaitMs: 20000 })
  })

  test('open, drain, a real submit wakes the waiting poll; a second client learns it without reopening', async () => {
    const alice = await authClient(node, PrivateKey.fromRandom(), capability)
    const bob = await authClient(node, PrivateKey.fromRandom(), capability)
    const a0 = await alice.post('open', openReq())
    expect(a0.status).toBe(200)
    expect(a0.headers.get('x-bsv-overlay-capability')).toBe(capability)
    expect(a0.headers.get('x-bsv-overlay-profile')).toBe(PROFILE)
    expect(a0.body.scope.provider).toBe(node.identity)
    const aEnd = (await drain(alice, a0.body)).pop()
    const bEnd = await openCaughtUp(bob)
    const aPoll = alice.post('read', readReq(aEnd, { waitMs: 15000 }))
    const bPoll = bob.post('read', readReq(bEnd, { waitMs: 15000 }))
    await new Promise(resolve => setTimeout(resolve, 200))
    const created = await node.factory.createNotes(['hello over HTTP'])
    await node.submit(created)
    const [a1, b1] = await Promise.all([aPoll, bPoll])
    expect(a1.status).toBe(200)
    expect(outputs(a1.body)).toEqual([`${created.txid}.0`])
    expect(outputs(b1.body)).toEqual([`${created.txid}.0`])
    expect(a1.body.session).not.toBe(b1.body.session)
    // The log hook never sees cursors or bodies.
    expect(JSON.stringify(logged)).not.toContain(a1.body.cursor)
    expect(logged.every(e => Object.keys(e).every(k => ['op', 'status', 'principal', 'bytes', 'error'].includes(k)))).toBe(true)
  })

  test('principal B can neither read nor close principal A\'s session and learns nothing about it', async () => {
    const alice = await authClient(node, PrivateKey.fromRandom(), capability)
    const bob = await authClient(node, PrivateKey.fromRandom(), capability)
    const a = await openCaughtUp(alice)
    const stolen = await bob.post('read', readReq(a))
    const unknown = await bob.post('read', { ...readReq(a), session: 'cd'.repeat(16) })
    expect(stolen.status).toBe(409)
    expect(stolen.body).toEqual(unknown.body)
    const closed = await bob.post('close', { version: 1, session: a.session })
    expect(closed.body).toEqual({ version: 1, closed: true })
    expect((await alice.post('read', readReq(a))).status).toBe(200)
  })

  test('revocation during a waiting poll ends it with unauthorized', async () => {
    const alice = await authClient(node, PrivateKey.fromRandom(), capability)
    const a = await openCaughtUp(alice)
    const poll = alice.post('read', readReq(a, { waitMs: 15000 }))
    await new Promise(resolve => setTimeout(resolve, 300))
    expect(await node.live.revoke(alice.identity)).toBeGreaterThanOrEqual(1)
    const res = await poll
    expect(res.status).toBe(401)
    expect(res.body.error.code).toBe('unauthorized')
  })

  test('a stale capability is context-changed and an unknown profile unsupported, in signed answers', async () => {
    const alice = await authClient(node, PrivateKey.fromRandom(), 'ef'.repeat(32))
    const stale = await alice.post('open', openReq())
    expect(stale.status).toBe(409)
    expect(stale.body.error.code).toBe('context-changed')
    const other = await authClient(node, PrivateKey.fromRandom(), capability)
    const unknown = await other.post('open', openReq(), { 'x-bsv-overlay-profile': 'https://bsv.brc.dev/overlays/0193#lookup-live-v9' })
    expect(unknown.status).toBe(422)
    expect(unknown.body.error.code).toBe('unsupported')
  })

  test('a tampered signed response is rejected by the client', async () => {
    const proxy = await startProxy(node.srv.port, {
      response: (text) => text.includes('"closed":true') ? text.replace('"closed":true', '"closed":tru3') : text
    })
    const origin = `http://127.0.0.1:${proxy.port}`
    try {
      const af = new AuthFetch(new ProtoWallet(PrivateKey.fromRandom()))
      const headers = { 'content-type': 'application/json', 'x-bsv-overlay-capability': capability, 'x-bsv-overlay-profile': PROFILE }
      const first = await af.fetch(`${origin}/overlay/v1/lookup/read`, { method: 'POST', headers, body: JSON.stringify(readReq({ session: 'ab'.repeat(16), cursor: 'x' })) })
      expect(first.status).toBe(409)
      const observer = observeVerdicts(af, origin)
      let settled = false
      af.fetch(`${origin}/overlay/v1/lookup/close`, { method: 'POST', headers, body: JSON.stringify({ version: 1, session: 'ab'.repeat(16) }) })
        .then(() => { settled = true }, () => { settled = true })
      const verdict = await observer.next(1)
      await flush()
      expect(proxy.seen.edits).toBeGreaterThan(0)
      expect(verdict.accepted).toBe(false)
      expect(settled).toBe(false)
    } finally {
      await proxy.close()
    }
  })
})

/** A raw HTTP/1.1 request, so tests can send what fetch refuses to (duplicate headers). */
function rawRequest (port, lines, body = '') {
  return new Promise((resolve, reject) => {
    const net = require('net')
    const sock = net.connect(port, '127.0.0.1', () => {
      sock.write(lines.join('\r\n') + '\r\n\r\n' + body)
    })
    let data = ''
    const timer = setTimeout(() => { sock.destroy(); resolve(data) }, 3000)
    sock.on('data', (c) => { data += c.toString('latin1') })
    sock.on('end', () => { clearTimeout(timer); resolve(data) })
    sock.on('error', (e) => { clearTimeout(timer); reject(e) })
  })
}

describe('explicit unauthenticated public mode', () => {
  let node, capability, client
  beforeAll(async () => {
    node = await startNode({ authentication: 'none', allowedOrigins: [ALLOWED_ORIGIN] })
    capability = wire.digest('capabilities', (await manifestOf(node)).body)
    client = await publicClient(node, capability)
  })
  afterAll(async () => { await node.close() })

  const headers = () => ({
    'content-type': 'application/json',
    'cache-control': 'no-store',
    'x-bsv-overlay-capability': capability,
    'x-bsv-overlay-profile': PROFILE
  })

  const post = (op, body, init) => client.post(op, body, init)

  test('the provider is the exact origin, and every answer carries the cache and vary headers', async () => {
    const ok = await post('open', openReq())
    expect(ok.status).toBe(200)
    expect(ok.body.scope.provider).toBe(node.origin)
    for (const res of [ok, await post('open', 'nope')]) {
      expect(res.headers.get('cache-control')).toBe('private, no-store')
      expect(res.headers.get('vary')).toBe('Authorization, x-bsv-auth-identity-key, x-bsv-overlay-capability, x-bsv-overlay-profile')
      expect(res.headers.get('x-bsv-overlay-capability')).toBe(capability)
      // No ETag: a no-store answer is never revalidated, so none is computed.
      expect(res.headers.get('etag')).toBeNull()
      expect(Number(res.headers.get('content-length'))).toBe(Buffer.byteLength(res.raw))
    }
  })

  test('every request-policy rejection has the spec error and a bounded body', async () => {
    const cases = [
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'GET' }), 400, 'invalid'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'PUT', headers: headers(), body: '{}' }), 400, 'invalid'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: { ...headers(), 'content-type': 'text/plain' }, body: '{}' }), 400, 'invalid'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: { ...headers(), 'content-type': 'application/json; charset=utf-8' }, body: '{}' }), 400, 'invalid'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: { ...headers(), 'cache-control': 'max-age=0' }, body: '{}' }), 400, 'invalid'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: { ...headers(), 'content-encoding': 'gzip' }, body: '{}' }), 422, 'unsupported'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: headers(), body: 'x'.repeat(1024 * 1024 + 1) }), 413, 'limited'],
      [await fetch(`${node.origin}/overlay/v1/lookup/nope`, { method: 'POST', headers: headers(), body: '{}' }), 404, 'not-found'],
      [await fetch(`${node.origin}/overlay/v1/elsewhere`, { method: 'POST', headers: headers(), body: '{}' }), 404, 'not-found'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: headers(), body: '{"version":1,"version":1}' }), 400, 'invalid'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: headers(), body: JSON.stringify({ ...openReq(), version: 2 }) }), 422, 'unsupported'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: headers(), body: JSON.stringify(openReq()).replace('"ls_notes"', '"ls_missing"') }), 404, 'not-found'],
      [await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: { ...headers(), 'x-bsv-overlay-profile': 'urn:other' }, body: JSON.stringify(openReq()) }), 422, 'unsupported']
    ]
    for (const [res, status, code] of cases) {
      const text = await res.text()
      expect([res.url, res.status]).toEqual([res.url, status])
      expect(JSON.parse(text).error.code).toBe(code)
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(4096)
      expect(res.headers.get('cache-control')).toBe('private, no-store')
    }
    const dup = await rawRequest(node.srv.port, [
      'POST /overlay/v1/lookup/open HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json',
      'Cache-Control: no-store', 'X-Test: a', 'x-test: b', 'Content-Length: 2', 'Connection: close'
    ], '{}')
    expect(dup.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request')
    expect(dup).toContain('"code":"invalid"')
    const big = await rawRequest(node.srv.port, [
      'POST /overlay/v1/lookup/open HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json',
      'X-Big: ' + 'a'.repeat(17 * 1024), 'Content-Length: 2', 'Connection: close'
    ], '{}')
    expect(big.split('\r\n')[0]).toMatch(/^HTTP\/1\.1 (431|413)/)
  })

  test('an oversize body is read to its end before the 413, so the connection is not reset and stays usable', async () => {
    // A reverse proxy streaming the body turns a reset into its own 502 page (reverse-proxy.test.js).
    const net = require('net')
    const socket = net.connect(node.srv.port, '127.0.0.1')
    await new Promise(resolve => socket.once('connect', resolve))
    let received = ''
    socket.on('data', (d) => { received += d.toString('latin1') })
    const closed = new Promise(resolve => socket.once('close', resolve))
    const request = (body) => [
      'POST /overlay/v1/lookup/open HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json',
      'Cache-Control: no-store', `x-bsv-overlay-profile: ${PROFILE}`, `Content-Length: ${Buffer.byteLength(body)}`, '', ''
    ].join('\r\n') + body
    socket.write(request('x'.repeat(1536 * 1024)))
    for (let i = 0; i < 500 && !/\r\n\r\n\{.*\}$/s.test(received); i++) await new Promise(resolve => setTimeout(resolve, 10))
    expect(received.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large')
    expect(received).toContain('"code":"limited"')
    expect(received.toLowerCase()).not.toContain('connection: close')
    // The same connection answers the next request (here the spec's 400 for a missing capability).
    received = ''
    socket.write(request(JSON.stringify(openReq())))
    for (let i = 0; i < 500 && !/\r\n\r\n\{.*\}$/s.test(received); i++) await new Promise(resolve => setTimeout(resolve, 10))
    expect(received.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request')
    expect(received).toContain('"code":"invalid"')
    socket.end()
    await closed
  })

  test('CORS: an allowed origin gets exact credentialed headers, another origin gets none', async () => {
    const allowed = await post('open', openReq(), { headers: { origin: ALLOWED_ORIGIN } })
    expect(allowed.headers.get('access-control-allow-origin')).toBe(ALLOWED_ORIGIN)
    expect(allowed.headers.get('access-control-allow-credentials')).toBe('true')
    expect(allowed.headers.get('access-control-expose-headers')).toContain('x-bsv-overlay-capability')
    expect(allowed.headers.get('access-control-expose-headers')).toContain('x-bsv-auth-signature')
    const refused = await post('open', openReq(), { headers: { origin: 'http://evil.example.test' } })
    expect(refused.headers.get('access-control-allow-origin')).toBeNull()
    const preflight = await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'OPTIONS', headers: { origin: ALLOWED_ORIGIN, 'access-control-request-method': 'POST' } })
    expect(preflight.status).toBe(204)
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST')
    const badPreflight = await fetch(`${node.origin}/overlay/v1/lookup/open`, { method: 'OPTIONS', headers: { origin: 'http://evil.example.test' } })
    expect(badPreflight.headers.get('access-control-allow-origin')).toBeNull()
  })

  test('a client that disconnects during a poll consumes nothing and resumes with its cursor', async () => {
    const b = await openCaughtUp(client)
    const ac = new AbortController()
    const poll = post('read', readReq(b, { waitMs: 15000 }), { signal: ac.signal }).catch(e => e)
    await new Promise(resolve => setTimeout(resolve, 300))
    expect(node.live.stats().waiters).toBe(1)
    ac.abort()
    await poll
    for (let i = 0; i < 50 && node.live.stats().waiters > 0; i++) await new Promise(resolve => setTimeout(resolve, 20))
    expect(node.live.stats().waiters).toBe(0)
    const created = await node.factory.createNotes(['missed while away'])
    await node.submit(created)
    const resumed = await post('read', readReq(b))
    expect(outputs(resumed.body)).toEqual([`${created.txid}.0`])
  })
})

test('configuration mistakes are refused when the router is built', async () => {
  const live = await h.openLive(h.tempDir())
  try {
    const key = PrivateKey.fromRandom().toHex()
    expect(() => live.router({ baseURL: 'https://x.example', privateKey: key })).toThrow(/authentication/)
    expect(() => live.router({ baseURL: 'https://x.example', authentication: 'brc103', privateKey: key })).toThrow(/provider/)
    expect(() => live.router({ baseURL: 'http://x.example', authentication: 'none', privateKey: key })).toThrow(/https/)
    expect(() => live.router({ baseURL: 'https://x.example', authentication: 'none', privateKey: key, allowedOrigins: ['*'] })).toThrow(/wildcard|origin/)
  } finally {
    await live.close()
  }
})


test('a restart keeps the issued manifest, so capability digests of open sessions stay valid', async () => {
  const dir = h.tempDir()
  const key = PrivateKey.fromRandom()
  const options = { baseURL: 'https://overlay.example.test', authentication: 'brc103', privateKey: key.toHex() }
  let live = await h.openLive(dir, { provider: key.toPublicKey().toString() })
  live.wrap('ls_notes', h.plainService(), h.notesCompanion())
  const before = live.router(options).manifest.digest()
  await live.close()
  live = await h.openLive(dir, { create: false, provider: key.toPublicKey().toString() })
  try {
    live.wrap('ls_notes', h.plainService(), h.notesCompanion())
    expect(live.router(options).manifest.digest()).toBe(before)
    // New rules are a new manifest.
    live.wrap('ls_notes', h.plainService(), h.notesCompanion(2))
    expect(live.router(options).manifest.digest()).not.toBe(before)
    // So is a service registered after the router issued one, and reads may still
    // select the manifest their session was opened under; opens may not.
    const manifest = live.router(options).manifest
    const issued = manifest.digest()
    expect(manifest.check('read', issued, PROFILE)).toBeNull()
    live.wrap('ls_more', h.plainService(), h.notesCompanion())
    expect(manifest.digest()).not.toBe(issued)
    expect(manifest.check('read', issued, PROFILE)).toBeNull()
    expect(manifest.check('open', issued, PROFILE)).not.toBeNull()
    expect(manifest.check('open', manifest.digest(), PROFILE)).toBeNull()
  } finally {
    await live.close()
  }
})
