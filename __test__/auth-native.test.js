'use strict'
// The authenticated path with the native wallet, over real HTTP: AuthFetch
// with ProtoWallet against the router's default native wallet and the
// reverse, tampering in both directions, forged auth headers, the handshake
// route's CORS and headers, and delivery of many signed answers after one
// commit while other requests keep being served.

const { ProtoWallet, PrivateKey, Utils } = require('@bsv/sdk')
const { NativeWallet } = require('../js')
const { startProxy, observeVerdicts, flush } = require('./helpers/net')
const { startNode, lookupClient, openReq, readReq, openCaughtUp } = require('./helpers/node')

const ALLOWED = 'http://page.example.test'
const VARY = 'Authorization, x-bsv-auth-identity-key, x-bsv-overlay-capability, x-bsv-overlay-profile'

function expectSection8 (headers, origin) {
  expect(headers.get('cache-control')).toBe('private, no-store')
  expect(headers.get('x-content-type-options')).toBe('nosniff')
  expect(headers.get('x-powered-by')).toBeNull()
  if (origin) {
    expect(headers.get('access-control-allow-origin')).toBe(origin)
    expect(headers.get('vary')).toBe(VARY + ', Origin')
    const exposed = headers.get('access-control-expose-headers').split(', ')
    for (const h of ['x-bsv-auth-identity-key', 'x-bsv-auth-signature', 'x-bsv-auth-nonce', 'x-bsv-auth-your-nonce', 'x-bsv-overlay-capability']) {
      expect(exposed).toContain(h)
    }
  } else {
    expect(headers.get('vary')).toBe(VARY)
    expect(headers.get('access-control-allow-origin')).toBeNull()
  }
}

describe('router on the native wallet (default), clients on ProtoWallet', () => {
  let node
  beforeAll(async () => { node = await startNode({ maxWaitMs: 25000, allowedOrigins: [ALLOWED] }) })
  afterAll(async () => { await node.close() })

  test('the router signs with a NativeWallet made from privateKey', async () => {
    expect(node.router.wallet).toBeInstanceOf(NativeWallet)
    expect((await node.router.wallet.getPublicKey({ identityKey: true })).publicKey).toBe(node.identity)
  })

  test('AuthFetch with ProtoWallet: open, read, a submit wakes a poll; answers verify', async () => {
    const client = lookupClient(node.origin, node.capability, new ProtoWallet(PrivateKey.fromRandom()))
    const b = await openCaughtUp(client)
    expect(b.scope.provider).toBe(node.identity)
    const poll = client.post('read', readReq(b, { waitMs: 20000 }))
    await new Promise((resolve) => setTimeout(resolve, 200))
    const created = await node.factory.createNotes(['native wallet note'])
    await node.submit(created)
    const woken = await poll
    expect(woken.status).toBe(200)
    expect(woken.headers.get('x-bsv-auth-identity-key')).toBe(node.identity)
    expect(JSON.stringify(woken.body)).toContain(created.txid)
  })

  test('a tampered request body is refused with the 401 envelope; a tampered answer is rejected by the client', async () => {
    const proxy = await startProxy(node.srv.port, {
      request: (t) => t.replace('"tamper-me-please"', '"tampered-me-now!"'),
      response: (t) => t.includes('"closed":true') ? t.replace('"closed":true', '"closed":tru3') : t
    })
    const origin = `http://127.0.0.1:${proxy.port}`
    try {
      const client = lookupClient(origin, node.capability, new ProtoWallet(PrivateKey.fromRandom()))
      const first = await client.post('read', { ...readReq({ session: 'ab'.repeat(16), cursor: 'x' }) })
      expect(first.status).toBe(409)
      await expect(client.post('open', { ...openReq(), query: { tag: 'tamper-me-please' } })).rejects.toThrow(/401/)
      const refused = proxy.seen.responses.filter((t) => t.startsWith('HTTP/1.1 401'))
      expect(refused.length).toBeGreaterThan(0)
      expect(refused[0]).toContain('"code":"unauthorized"')
      expect(refused[0]).not.toContain('x-bsv-auth-signature')
      // The answer: body edited in flight, the client's Peer refuses it.
      const observer = observeVerdicts(client.af, origin)
      client.post('close', { version: 1, session: 'ab'.repeat(16) }).catch(() => {})
      const verdict = await observer.next(1)
      await flush()
      expect(verdict.accepted).toBe(false)
    } finally {
      await proxy.close()
    }
  })

  test('forged auth headers (real identity, random nonce and signature) answer 401 with the envelope, never 500, and leave no session behind', async () => {
    const key = PrivateKey.fromRandom()
    const client = lookupClient(node.origin, node.capability, new ProtoWallet(key))
    await openCaughtUp(client) // a real session exists for this identity
    const sessions = () => node.router.auth.sessions.size
    const before = sessions()
    const random = (n) => Utils.toBase64(Array.from(require('crypto').randomBytes(n)))
    const forged = async (yourNonce) => {
      const res = await fetch(`${node.origin}/overlay/v1/lookup/read`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          origin: ALLOWED,
          'x-bsv-auth-version': '0.1',
          'x-bsv-auth-identity-key': key.toPublicKey().toString(),
          'x-bsv-auth-nonce': random(32),
          'x-bsv-auth-your-nonce': yourNonce,
          'x-bsv-auth-signature': require('crypto').randomBytes(71).toString('hex'),
          'x-bsv-auth-request-id': random(32)
        },
        body: '{}'
      })
      return { res, text: await res.text() }
    }
    const yourNonces = [random(48), random(32), 'not base64 at all!', '', Utils.toBase64(Array(48).fill(0))]
    for (const n of yourNonces) {
      const { res, text } = await forged(n)
      expect({ n, status: res.status }).toEqual({ n, status: 401 })
      expect(JSON.parse(text)).toEqual({ version: 1, error: { code: 'unauthorized', message: 'BRC-103 authentication failed', retryable: false } })
      expectSection8(res.headers, ALLOWED)
    }
    await flush()
    expect(sessions()).toBe(before)
  })

  test('the handshake route: preflight from an allowed origin, refused for another, and the POST carries CORS and §8 headers', async () => {
    const pre = await fetch(`${node.origin}/.well-known/auth`, {
      method: 'OPTIONS',
      headers: { origin: ALLOWED, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-bsv-auth-version' }
    })
    expect(pre.status).toBe(204)
    expect(pre.headers.get('access-control-allow-origin')).toBe(ALLOWED)
    expect(pre.headers.get('access-control-allow-methods')).toContain('POST')
    expect(pre.headers.get('access-control-allow-headers').split(', ')).toEqual(expect.arrayContaining(['content-type', 'x-bsv-auth-version', 'x-bsv-auth-identity-key']))
    expectSection8(pre.headers, ALLOWED)
    const other = await fetch(`${node.origin}/.well-known/auth`, { method: 'OPTIONS', headers: { origin: 'http://evil.example.test', 'access-control-request-method': 'POST' } })
    expect(other.status).toBe(401)
    expect(other.headers.get('access-control-allow-origin')).toBeNull()
    expect((await other.json()).error.code).toBe('unauthorized')

    // A real handshake POST, as AuthFetch sends it, from the allowed origin.
    const client = new PrivateKey(7)
    const nonce = Utils.toBase64(Array.from(require('crypto').randomBytes(32)))
    const hs = await fetch(`${node.origin}/.well-known/auth`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: ALLOWED },
      body: JSON.stringify({ version: '0.1', messageType: 'initialRequest', identityKey: client.toPublicKey().toString(), initialNonce: nonce, requestedCertificates: { certifiers: [], types: {} } })
    })
    expect(hs.status).toBe(200)
    expectSection8(hs.headers, ALLOWED)
    const answer = await hs.json()
    expect(answer.messageType).toBe('initialResponse')
    expect(answer.yourNonce).toBe(nonce)
    // A malformed handshake is the 401 envelope too (it was a 500 from the middleware).
    const bad = await fetch(`${node.origin}/.well-known/auth`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ version: '0.1', messageType: 'initialRequest' })
    })
    expect(bad.status).toBe(401)
    expect((await bad.json()).error.code).toBe('unauthorized')
    expectSection8(bad.headers)
  })
})

describe('client on the native wallet, server on ProtoWallet', () => {
  let node
  beforeAll(async () => {
    const serverKey = PrivateKey.fromRandom()
    node = await startNode({ maxWaitMs: 25000, serverKey, wallet: new ProtoWallet(serverKey) })
  })
  afterAll(async () => { await node.close() })

  test('AuthFetch with NativeWallet opens, reads and is woken; a tampered answer is rejected', async () => {
    expect(node.router.wallet).toBeInstanceOf(ProtoWallet)
    const client = lookupClient(node.origin, node.capability, NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex()))
    const b = await openCaughtUp(client)
    expect(b.scope.provider).toBe(node.identity)
    const poll = client.post('read', readReq(b, { waitMs: 20000 }))
    await new Promise((resolve) => setTimeout(resolve, 200))
    const created = await node.factory.createNotes(['from a native client'])
    await node.submit(created)
    expect(JSON.stringify((await poll).body)).toContain(created.txid)

    const proxy = await startProxy(node.srv.port, {
      response: (t) => t.includes('"closed":true') ? t.replace('"closed":true', '"closed":tru3') : t,
      request: (t) => t.replace('"tamper-me-please"', '"tampered-me-now!"')
    })
    try {
      const origin = `http://127.0.0.1:${proxy.port}`
      const other = lookupClient(origin, node.capability, NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex()))
      expect((await other.post('read', readReq({ session: 'cd'.repeat(16), cursor: 'x' }))).status).toBe(409)
      await expect(other.post('open', { ...openReq(), query: { tag: 'tamper-me-please' } })).rejects.toThrow(/401/)
      const observer = observeVerdicts(other.af, origin)
      other.post('close', { version: 1, session: 'cd'.repeat(16) }).catch(() => {})
      const verdict = await observer.next(1)
      await flush()
      expect(verdict.accepted).toBe(false)
      expect(verdict.error).toMatch(/Signature is not valid|Invalid signature/)
    } finally {
      await proxy.close()
    }
  })
})

describe('one commit waking many authenticated polls', () => {
  const POLLS = 240
  let node
  const counts = { sentReads: 0, armed: false, pingAt: null, pinged: null }
  beforeAll(async () => {
    node = await startNode({
      maxWaitMs: 25000,
      before: (app) => {
        // Counts signed read answers at the moment they are written (the
        // router ends the response once the answer is signed), and starts an
        // unrelated request as the first woken answer goes out.
        app.use((req, res, next) => {
          if (req.path === '/overlay/v1/lookup/read') {
            const end = res.end
            res.end = function (body) {
              if (counts.armed && res.getHeader('x-bsv-auth-signature')) {
                counts.sentReads++
                if (counts.sentReads === 1) counts.pinged = fetch(`http://127.0.0.1:${node.srv.port}/ping`).then((r) => r.text())
              }
              return end.call(this, body)
            }
          }
          next()
        })
        app.get('/ping', (req, res) => { counts.pingAt = counts.sentReads; res.end('pong') })
      }
    })
  })
  afterAll(async () => { await node.close() })

  test(`an unrelated request is answered while ${POLLS} signed answers are delivered`, async () => {
    const clients = Array.from({ length: 8 }, () => lookupClient(node.origin, node.capability, NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex())))
    const sessions = []
    for (let i = 0; i < POLLS; i++) sessions.push(await openCaughtUp(clients[i % clients.length]))
    const polls = sessions.map((b, i) => clients[i % clients.length].post('read', readReq(b, { waitMs: 25000 })))
    // Every poll is parked before the commit.
    for (let i = 0; i < 200 && node.live.stats().waiters < POLLS; i++) await new Promise((resolve) => setTimeout(resolve, 25))
    expect(node.live.stats().waiters).toBe(POLLS)
    counts.armed = true
    const created = await node.factory.createNotes(['wake them all'])
    await node.submit(created)
    const answers = await Promise.all(polls)
    expect(answers.every((a) => a.status === 200 && JSON.stringify(a.body).includes(created.txid))).toBe(true)
    expect(await counts.pinged).toBe('pong')
    expect(counts.sentReads).toBe(POLLS)
    // The ping was read and answered between batches of signed answers, not after all of them.
    expect(counts.pingAt).toBeGreaterThan(0)
    expect(counts.pingAt).toBeLessThan(POLLS)
  })
})
