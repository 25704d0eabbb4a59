// Regression test of the @bsv/auth-express-middleware 2.0.5 + AuthFetch
// (@bsv/sdk 2.1.0) behaviours the live router relies on, over real loopback
// Express 5. Findings and their consequences: docs/auth-middleware-notes.md.
//
// A small TCP proxy sits between client and server so tests can see the raw
// HTTP bytes and tamper with them in flight.
const express = require('express')
const { AuthFetch } = require('@bsv/sdk')
const { createAuthMiddleware } = require('@bsv/auth-express-middleware')

const CAPABILITY = 'ab'.repeat(32)
const PROFILE = 'https://bsv.brc.dev/overlays/0193#lookup-live-v1'
const JSON_HEADERS = { 'content-type': 'application/json' }

const { startProxy, startServer, newWallet, observeVerdicts, track, flush } = require('./helpers/net')

// The setup the live router needs: JSON only for the handshake route, the
// exact raw bytes for everything else, one middleware instance for both.
function authApp (serverWallet, routes) {
  const app = express()
  app.set('etag', false)
  app.use('/.well-known/auth', express.json())
  app.use(express.raw({ type: () => true, limit: 1024 * 1024, inflate: false }))
  app.use(createAuthMiddleware({ wallet: serverWallet, allowUnauthenticated: false }))
  routes(app)
  return app
}

// ---------- the server used by most tests ----------

const server = newWallet()
const seenByHandler = []
const closedEarly = []
let onWaitRequest = null
const gate = { size: 0, parked: [] }

function routes (app) {
  app.post('/echo', (req, res) => {
    seenByHandler.push({ identity: req.auth.identityKey, body: req.body })
    // res.set after the middleware wrapped the response: x-bsv-* headers are
    // signed and delivered; other headers set this way are dropped.
    res.set('x-bsv-overlay-capability', CAPABILITY)
    res.set('x-bsv-overlay-profile', PROFILE)
    res.set('Cache-Control', 'private, no-store')
    // res.setHeader bypasses the wrapper: sent, but not signed.
    res.setHeader('x-content-type-options', 'nosniff')
    res.setHeader('Content-Type', 'application/json')
    res.status(201).send(Buffer.from(JSON.stringify({
      identity: req.auth.identityKey,
      isBuffer: Buffer.isBuffer(req.body),
      bodyHex: Buffer.isBuffer(req.body) ? req.body.toString('hex') : null,
      marker: 'marker-AAAA'
    })))
  })
  app.post('/binary', (req, res) => res.send(Buffer.from(Array.from({ length: 256 }, (_, i) => i))))
  app.post('/text', (req, res) => res.type('text/plain').send('h\u00e9llo'))
  app.post('/empty', (req, res) => res.status(204).end())
  app.post('/error', (req, res) => res.status(409).json({ version: 1, error: { code: 'reset-required', message: 'm', retryable: false } }))
  app.post('/unsigned-bsv-header', (req, res) => {
    res.setHeader('x-bsv-overlay-profile', PROFILE) // on the wire but not in the signed payload
    res.json({ ok: true })
  })
  app.post('/gate', (req, res) => {
    // Held open until `gate.size` requests are parked, like concurrent long polls.
    gate.parked.push(() => res.json({ identity: req.auth.identityKey, n: JSON.parse(req.body.toString('utf8')).n }))
    if (gate.parked.length === gate.size) gate.parked.splice(0).forEach((answer) => answer())
  })
  app.post('/wait', (req, res) => {
    res.on('close', () => {
      closedEarly.push({ writableEnded: res.writableEnded })
      // A late answer after the client left must not crash the server.
      res.json({ late: true })
    })
    if (onWaitRequest) onWaitRequest()
  })
}

let srv
beforeAll(async () => { srv = await startServer(authApp(server.wallet, routes)) })
afterAll(async () => { await srv.close() })
beforeEach(() => { seenByHandler.length = 0; closedEarly.length = 0 })

// ---------- tests ----------

test('two client identities: req.auth.identityKey is each caller, the raw body arrives byte for byte', async () => {
  const alice = newWallet()
  const bob = newWallet()
  const a = new AuthFetch(alice.wallet)
  const b = new AuthFetch(bob.wallet)
  const base = `http://127.0.0.1:${srv.port}`
  const bodyA = '{ "b":1,  "a":"\u00e9" }' // whitespace and key order must survive
  const bodyB = '{"who":"bob"}'
  const [ra, rb] = await Promise.all([
    a.fetch(`${base}/echo`, { method: 'POST', headers: JSON_HEADERS, body: bodyA }),
    b.fetch(`${base}/echo`, { method: 'POST', headers: JSON_HEADERS, body: bodyB })
  ])
  const ja = await ra.json()
  const jb = await rb.json()
  expect(ja.identity).toBe(alice.identity)
  expect(jb.identity).toBe(bob.identity)
  expect(ja.isBuffer).toBe(true)
  expect(Buffer.from(ja.bodyHex, 'hex').toString('utf8')).toBe(bodyA)
  expect(Buffer.from(jb.bodyHex, 'hex').toString('utf8')).toBe(bodyB)
  expect(seenByHandler.map((s) => s.identity).sort()).toEqual([alice.identity, bob.identity].sort())
  // A second request reuses the session (no new handshake) and still authenticates.
  const again = await a.fetch(`${base}/echo`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
  expect((await again.json()).identity).toBe(alice.identity)
})

test('the response is signed: status, x-bsv-* headers and body reach AuthFetch; other headers do not', async () => {
  const proxy = await startProxy(srv.port)
  try {
    const client = new AuthFetch(newWallet().wallet)
    const res = await client.fetch(`http://127.0.0.1:${proxy.port}/echo`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
    expect(res.status).toBe(201)
    expect(res.headers.get('x-bsv-auth-identity-key')).toBe(server.identity)
    expect(res.headers.get('x-bsv-overlay-capability')).toBe(CAPABILITY)
    expect(res.headers.get('x-bsv-overlay-profile')).toBe(PROFILE)
    // AuthFetch's Response carries only the signed headers.
    expect(res.headers.get('content-type')).toBeNull()
    expect((await res.json()).marker).toBe('marker-AAAA')

    const wire = proxy.seen.responses.join('')
    const head = wire.slice(wire.lastIndexOf('HTTP/1.1 201')).split('\r\n\r\n')[0].toLowerCase()
    expect(head).toContain('x-bsv-auth-signature:')
    expect(head).toContain('x-bsv-overlay-capability: ' + CAPABILITY)
    expect(head).toContain('x-content-type-options: nosniff') // setHeader: kept, unsigned
    expect(head).toContain('content-type: application/json') // setHeader before send: kept
    expect(head).not.toContain('cache-control') // res.set after wrapping: dropped
    expect(head).not.toContain('etag')
  } finally {
    await proxy.close()
  }
})

test('binary, text and error bodies pass through the signed response', async () => {
  const client = new AuthFetch(newWallet().wallet)
  const base = `http://127.0.0.1:${srv.port}`
  const bin = await client.fetch(`${base}/binary`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
  expect(Buffer.from(await bin.arrayBuffer())).toEqual(Buffer.from(Array.from({ length: 256 }, (_, i) => i)))
  const text = await client.fetch(`${base}/text`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
  expect(await text.text()).toBe('h\u00e9llo')
  const err = await client.fetch(`${base}/error`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
  expect(err.status).toBe(409) // AuthFetch resolves non-2xx (only 402 triggers its payment flow)
  expect((await err.json()).error.code).toBe('reset-required')
})

describe('tampering in flight', () => {
  async function tamperedFetch (edit, path = '/echo') {
    const proxy = await startProxy(srv.port, edit)
    const origin = `http://127.0.0.1:${proxy.port}`
    const client = new AuthFetch(newWallet().wallet)
    try {
      // First request establishes the peer/session; the edit does not match it.
      const first = await client.fetch(`${origin}/text`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
      expect(first.status).toBe(200)
      const observer = observeVerdicts(client, origin)
      const before = proxy.seen.edits
      const pending = client.fetch(`${origin}${path}`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
      const state = track(pending)
      const verdict = await observer.next(1)
      await flush()
      return { verdict, settled: state.settled, edits: proxy.seen.edits - before }
    } finally {
      await proxy.close()
    }
  }

  test('an untouched response through the proxy is accepted (control)', async () => {
    const r = await tamperedFetch({ response: (t) => t.replace('no-such-marker', 'x') })
    expect(r.edits).toBe(0)
    expect(r.verdict.accepted).toBe(true)
    expect(r.settled).toBe(true)
  })

  test('a flipped body byte is rejected and the fetch never resolves', async () => {
    const r = await tamperedFetch({ response: (t) => t.replace('marker-AAAA', 'marker-BBBB') })
    expect(r.edits).toBe(1)
    expect(r.verdict).toEqual({ accepted: false, error: expect.stringMatching(/signature is not valid|invalid signature/i) })
    expect(r.settled).toBe(false)
  })

  test('a changed signed header is rejected', async () => {
    const r = await tamperedFetch({ response: (t) => t.replace(`x-bsv-overlay-capability: ${CAPABILITY}`, `x-bsv-overlay-capability: ${'cd'.repeat(32)}`) })
    expect(r.edits).toBe(1)
    expect(r.verdict.accepted).toBe(false)
    expect(r.settled).toBe(false)
  })

  test('a changed status code is rejected', async () => {
    const r = await tamperedFetch({ response: (t) => t.replace('HTTP/1.1 201 Created', 'HTTP/1.1 200 Created') })
    expect(r.edits).toBe(1)
    expect(r.verdict.accepted).toBe(false)
  })

  test('an unsigned header can be changed without detection', async () => {
    const r = await tamperedFetch({ response: (t) => t.replace('x-content-type-options: nosniff', 'x-content-type-options: sniff!') })
    expect(r.edits).toBe(1)
    expect(r.verdict.accepted).toBe(true)
  })

  test('an x-bsv-* header sent outside the wrapper breaks verification', async () => {
    const r = await tamperedFetch({}, '/unsigned-bsv-header')
    expect(r.verdict.accepted).toBe(false)
    expect(r.settled).toBe(false)
  })

  test('an empty response body never verifies (server signs "no body", client "0 bytes")', async () => {
    const r = await tamperedFetch({}, '/empty')
    expect(r.verdict).toEqual({ accepted: false, error: expect.stringMatching(/signature is not valid|invalid signature/i) })
    expect(r.settled).toBe(false)
  })
})

test('a tampered request body is refused before the handler; AuthFetch may re-send the POST once', async () => {
  const proxy = await startProxy(srv.port, { request: (t) => t.replace('"tamper-me"', '"tampered!"') })
  const url = `http://127.0.0.1:${proxy.port}/echo`
  const sends = () => proxy.seen.requests.filter((t) => t.startsWith('POST /echo')).length
  try {
    const client = new AuthFetch(newWallet().wallet)
    // First contact: the middleware's unsigned 401 is reported as is.
    await expect(client.fetch(url, { method: 'POST', headers: JSON_HEADERS, body: '{"x":"tamper-me"}' }))
      .rejects.toThrow(/401 Unauthorized .* without valid BSV authentication/)
    expect(sends()).toBe(1)
    // After one good exchange AuthFetch reads a 401 as a stale session:
    // it drops the peer, handshakes again and re-sends the same POST.
    await client.fetch(url, { method: 'POST', headers: JSON_HEADERS, body: '{"x":"fine"}' })
    expect(sends()).toBe(2)
    await expect(client.fetch(url, { method: 'POST', headers: JSON_HEADERS, body: '{"x":"tamper-me"}' }))
      .rejects.toThrow(/401 Unauthorized .* without valid BSV authentication/)
    expect(sends()).toBe(4) // the tampered POST went out twice
    expect(proxy.seen.requests.filter((t) => t.startsWith('POST /.well-known/auth'))).toHaveLength(2)
    expect(seenByHandler).toHaveLength(1)
    const refused = proxy.seen.responses.filter((t) => t.startsWith('HTTP/1.1 401'))
    expect(refused).toHaveLength(3)
    expect(refused[0]).toContain('ERR_AUTH_FAILED')
    expect(refused[0].toLowerCase()).not.toContain('x-bsv-auth-signature')
  } finally {
    await proxy.close()
  }
})

test('unauthenticated requests and CORS preflights get the middleware\'s own unsigned 401', async () => {
  const base = `http://127.0.0.1:${srv.port}`
  const plain = await fetch(`${base}/echo`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
  expect(plain.status).toBe(401)
  expect(plain.headers.get('x-bsv-auth-signature')).toBeNull()
  expect(await plain.json()).toEqual({ status: 'error', code: 'UNAUTHORIZED', message: 'Mutual-authentication failed!' })
  const preflight = await fetch(`${base}/echo`, { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } })
  expect(preflight.status).toBe(401)
  expect(seenByHandler).toHaveLength(0)
})

test('a client disconnect reaches the handler as res "close"; a late response does not break the server', async () => {
  let requestArrived
  const arrived = new Promise((resolve) => { requestArrived = resolve })
  onWaitRequest = requestArrived
  const proxy = await startProxy(srv.port, { cutAfterRequest: (t) => t.startsWith('POST /wait') })
  try {
    const client = new AuthFetch(newWallet().wallet)
    const result = client.fetch(`http://127.0.0.1:${proxy.port}/wait`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
    await expect(result).rejects.toThrow(/Network error/)
    await arrived
    while (closedEarly.length === 0) await flush()
    expect(closedEarly).toEqual([{ writableEnded: false }])
    // The same server keeps serving authenticated requests.
    const after = await new AuthFetch(newWallet().wallet).fetch(`http://127.0.0.1:${srv.port}/text`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
    expect(await after.text()).toBe('h\u00e9llo')
  } finally {
    onWaitRequest = null
    await proxy.close()
  }
})

test('concurrent held requests from one identity are not serialized by the middleware', async () => {
  const me = newWallet()
  const client = new AuthFetch(me.wallet)
  const base = `http://127.0.0.1:${srv.port}`
  await client.fetch(`${base}/text`, { method: 'POST', headers: JSON_HEADERS, body: '{}' }) // session first
  gate.size = 8
  const results = await Promise.all(Array.from({ length: 8 }, (_, n) =>
    client.fetch(`${base}/gate`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ n }) }).then((r) => r.json())))
  // All 8 were parked at once before any was answered, and each answer went to its own request.
  expect(results.map((r) => r.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
  expect(new Set(results.map((r) => r.identity))).toEqual(new Set([me.identity]))
})

test('a body over the raw parser limit is refused with an unsigned 413 before authentication', async () => {
  const client = new AuthFetch(newWallet().wallet)
  const big = JSON.stringify({ pad: 'x'.repeat(1024 * 1024) })
  await expect(client.fetch(`http://127.0.0.1:${srv.port}/echo`, { method: 'POST', headers: JSON_HEADERS, body: big }))
    .rejects.toThrow(/413 .* without valid BSV authentication/)
  expect(seenByHandler).toHaveLength(0)
})

test('allowUnauthenticated: plain requests pass as "unknown" with an unsigned response; AuthFetch is still authenticated', async () => {
  const app = express()
  app.use('/.well-known/auth', express.json())
  app.use(express.raw({ type: () => true }))
  app.use(createAuthMiddleware({ wallet: newWallet().wallet, allowUnauthenticated: true }))
  app.post('/who', (req, res) => res.json({ identity: req.auth.identityKey }))
  const s = await startServer(app)
  try {
    const plain = await fetch(`http://127.0.0.1:${s.port}/who`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
    expect(await plain.json()).toEqual({ identity: 'unknown' })
    expect(plain.headers.get('x-bsv-auth-signature')).toBeNull()
    const me = newWallet()
    const authed = await new AuthFetch(me.wallet).fetch(`http://127.0.0.1:${s.port}/who`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
    expect(await authed.json()).toEqual({ identity: me.identity })
  } finally {
    await s.close()
  }
})

describe('setup constraints', () => {
  test('without a body parser (Express 5 leaves req.body undefined) the handshake fails', async () => {
    const app = express()
    app.use(createAuthMiddleware({ wallet: newWallet().wallet }))
    app.post('/echo', (req, res) => res.json({}))
    const s = await startServer(app)
    try {
      const client = new AuthFetch(newWallet().wallet)
      // The middleware reads req.body.initialNonce of undefined and passes the TypeError to next().
      await expect(client.fetch(`http://127.0.0.1:${s.port}/echo`, { method: 'POST', headers: JSON_HEADERS, body: '{}' }))
        .rejects.toThrow(/HTTP 500 .*\/\.well-known\/auth/)
    } finally {
      await s.close()
    }
  })

  test('express.json() instead of raw bytes: a body whose bytes differ from JSON.stringify(parsed) fails auth', async () => {
    const app = express()
    app.use(express.json())
    app.use(createAuthMiddleware({ wallet: newWallet().wallet }))
    let handled = 0
    app.post('/echo', (req, res) => { handled++; res.json({}) })
    const s = await startServer(app)
    try {
      const client = new AuthFetch(newWallet().wallet)
      const ok = await client.fetch(`http://127.0.0.1:${s.port}/echo`, { method: 'POST', headers: JSON_HEADERS, body: '{"a":1}' })
      expect(ok.status).toBe(200)
      await expect(client.fetch(`http://127.0.0.1:${s.port}/echo`, { method: 'POST', headers: JSON_HEADERS, body: '{ "a": 1 }' }))
        .rejects.toThrow(/401 .*ERR_AUTH_FAILED/)
      expect(handled).toBe(1)
    } finally {
      await s.close()
    }
  })

  test('mounted under a base path: one instance must also see /.well-known/auth at the origin root', async () => {
    const wallet = newWallet()
    const auth = createAuthMiddleware({ wallet: wallet.wallet })
    const app = express()
    app.use('/.well-known/auth', express.json())
    app.use((req, res, next) => (req.path === '/.well-known/auth' ? auth(req, res, next) : next()))
    const api = express.Router()
    api.use(express.raw({ type: () => true }), auth)
    api.post('/overlay/v1/lookup/open', (req, res) => res.json({ identity: req.auth.identityKey, path: req.originalUrl }))
    app.use('/api', api)
    const s = await startServer(app)
    try {
      const me = newWallet()
      const client = new AuthFetch(me.wallet)
      const res = await client.fetch(`http://127.0.0.1:${s.port}/api/overlay/v1/lookup/open`, { method: 'POST', headers: JSON_HEADERS, body: '{}' })
      expect(await res.json()).toEqual({ identity: me.identity, path: '/api/overlay/v1/lookup/open' })
      expect(res.headers.get('x-bsv-auth-identity-key')).toBe(wallet.identity)
    } finally {
      await s.close()
    }
  })

  test('AuthFetch refuses request headers other than content-type, authorization and x-bsv-*', async () => {
    const client = new AuthFetch(newWallet().wallet)
    await expect(client.fetch(`http://127.0.0.1:${srv.port}/echo`, { method: 'POST', headers: { ...JSON_HEADERS, 'cache-control': 'no-store' }, body: '{}' }))
      .rejects.toThrow(/Unsupported header/)
    // Selection headers are allowed and are part of the signed request.
    const ok = await client.fetch(`http://127.0.0.1:${srv.port}/echo`, { method: 'POST', headers: { ...JSON_HEADERS, 'x-bsv-overlay-capability': CAPABILITY, 'x-bsv-overlay-profile': PROFILE }, body: '{}' })
    expect(ok.status).toBe(201)
  })
})
