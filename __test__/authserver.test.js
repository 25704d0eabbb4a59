'use strict'
// The router's own BRC-104 provider (js/auth/authserver.js): its request payload is
// byte for byte what AuthFetch signs, its session table is bounded without
// breaking AuthFetch clients (they handshake again), and a session only ever
// authenticates the identity that made it.

const crypto = require('node:crypto')
const { AuthFetch, PrivateKey, ProtoWallet } = require('@bsv/sdk')
const { NativeWallet } = require('../js')
const { requestPayloadOf } = require('../js/auth/authserver')
const payloadOf = (...args) => Buffer.concat(requestPayloadOf(...args))
const { startNode, lookupClient, openReq, openCaughtUp, readReq, PROFILE } = require('./helpers/node')

/** A random string over `alphabet` of 1..max characters. */
function pick (alphabet, max) {
  const n = 1 + crypto.randomInt(max)
  return Array.from({ length: n }, () => alphabet[crypto.randomInt(alphabet.length)]).join('')
}

describe('request payload', () => {
  test('equals AuthFetch.serializeRequest for random methods, paths, queries, headers and bodies', async () => {
    const af = new AuthFetch(new ProtoWallet(PrivateKey.fromRandom()))
    const pathChars = 'abcXYZ019-._~/%éß✓ '
    for (let i = 0; i < 300; i++) {
      const method = ['GET', 'POST', 'PUT', 'DELETE'][i % 4]
      const query = i % 3 === 0 ? '' : '?' + pick('ab=&1é+', 12)
      const url = new URL(`http://node.test/${pick(pathChars, 24)}${query}`)
      const headers = {}
      if (i % 2 === 0) headers['Content-Type'] = ['application/json', 'application/json; charset=utf-8', 'text/plain;x=1'][i % 3]
      if (i % 5 === 0) headers.Authorization = 'Bearer ' + pick('abc123', 20)
      for (let k = 0; k < i % 4; k++) headers['X-BSV-' + pick('abcdef-_', 8)] = pick('vw xyz é', 16)
      const body = method === 'GET' || i % 7 === 0 ? undefined : i % 2 === 0 ? JSON.stringify({ n: i, s: pick('aé✓"\\', 10) }) : pick('plain text ✓', 30)
      const requestId = crypto.randomBytes(32)
      const expected = Buffer.from((await af.serializeRequest(method, headers, body, url, Array.from(requestId))).toArray())
      // What the server sees: lower-case header names, the request line, the body bytes.
      const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]))
      const sent = body === undefined
        ? (['POST', 'PUT', 'DELETE'].includes(method) && /application\/json/.test(lower['content-type'] || '') ? '{}' : '')
        : body
      const req = { method, originalUrl: url.pathname + url.search, headers: lower }
      expect(payloadOf(requestId, req, Buffer.from(sent, 'utf8')).equals(expected)).toBe(true)
    }
  })
})

describe('sessions', () => {
  let node
  beforeAll(async () => { node = await startNode({ maxWaitMs: 25000, authSessions: { maxSessions: 4, sessionsPerIdentity: 2 } }) })
  afterAll(async () => { await node.close() })

  test('the table never holds more than its bounds, and a client whose session was dropped handshakes again and is served', async () => {
    const clients = Array.from({ length: 6 }, () => lookupClient(node.origin, node.capability, NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex())))
    const batches = []
    for (const c of clients) {
      batches.push(await openCaughtUp(c))
      expect(node.router.auth.sessions.size).toBeLessThanOrEqual(4)
    }
    // The first two clients' sessions were dropped; their next reads succeed all the same.
    for (let i = 0; i < 2; i++) {
      const again = await clients[i].post('read', readReq(batches[i]))
      expect(again.status).toBe(200)
    }
    expect(node.router.auth.sessions.size).toBe(4)
  })

  test('one identity handshaking again and again keeps at most sessionsPerIdentity sessions', async () => {
    const key = PrivateKey.fromRandom()
    const before = node.router.auth.sessions.size
    for (let i = 0; i < 5; i++) {
      // A new AuthFetch per round: each one handshakes.
      const c = lookupClient(node.origin, node.capability, NativeWallet.fromPrivateKey(key.toHex()))
      expect((await c.post('open', openReq())).status).toBe(200)
    }
    const mine = [...node.router.auth.sessions.byNonce.values()].filter((s) => s.peerIdentityKey === key.toPublicKey().toString())
    expect(mine.length).toBe(2)
    expect(node.router.auth.sessions.size).toBeLessThanOrEqual(Math.max(before, 4))
  })
})

describe('a session authenticates only its own identity', () => {
  let node
  beforeAll(async () => { node = await startNode({ maxWaitMs: 25000 }) })
  afterAll(async () => { await node.close() })

  test('a request signed in A\'s session but naming identity B is refused; the same request naming A is served', async () => {
    const keyA = PrivateKey.fromRandom()
    const walletA = NativeWallet.fromPrivateKey(keyA.toHex())
    const client = lookupClient(node.origin, node.capability, walletA)
    await openCaughtUp(client)
    // A's session as AuthFetch holds it: the provider's session nonce.
    const session = client.af.peers[node.origin].peer.sessionManager.getSession(node.identity)
    const send = async (identityKey) => {
      const body = Buffer.from(JSON.stringify(openReq()))
      const requestId = crypto.randomBytes(32)
      const headers = { 'content-type': 'application/json', 'x-bsv-overlay-capability': node.capability, 'x-bsv-overlay-profile': PROFILE }
      const payload = payloadOf(requestId, { method: 'POST', originalUrl: '/overlay/v1/lookup/open', headers }, body)
      const nonce = crypto.randomBytes(32).toString('base64')
      const { signature } = await walletA.createSignature({ data: Array.from(payload), protocolID: [2, 'auth message signature'], keyID: `${nonce} ${session.peerNonce}`, counterparty: node.identity })
      const res = await fetch(`${node.origin}/overlay/v1/lookup/open`, {
        method: 'POST',
        headers: {
          ...headers,
          'x-bsv-auth-version': '0.1',
          'x-bsv-auth-identity-key': identityKey,
          'x-bsv-auth-nonce': nonce,
          'x-bsv-auth-your-nonce': session.peerNonce,
          'x-bsv-auth-signature': Buffer.from(signature).toString('hex'),
          'x-bsv-auth-request-id': requestId.toString('base64')
        },
        body
      })
      return { status: res.status, signed: res.headers.get('x-bsv-auth-signature') !== null, body: await res.json() }
    }
    const own = await send(keyA.toPublicKey().toString())
    expect(own.status).toBe(200)
    expect(own.signed).toBe(true)
    const other = await send(PrivateKey.fromRandom().toPublicKey().toString())
    expect(other.status).toBe(401)
    expect(other.signed).toBe(false)
    expect(other.body.error.code).toBe('unauthorized')
  })
})

describe('malformed handshakes', () => {
  let node
  beforeAll(async () => { node = await startNode() })
  afterAll(async () => { await node.close() })

  const post = async (body, headers = { 'content-type': 'application/json' }) => {
    const res = await fetch(`${node.origin}/.well-known/auth`, { method: 'POST', headers, body })
    const text = await res.text()
    return { status: res.status, text, signed: res.headers.get('x-bsv-auth-signature') !== null }
  }

  test('each gets its error envelope with a bounded body and records no session; a well-formed one still works', async () => {
    const identityKey = PrivateKey.fromRandom().toPublicKey().toString()
    const nonce = crypto.randomBytes(48).toString('base64')
    const good = { version: '0.1', messageType: 'initialRequest', identityKey, initialNonce: nonce, requestedCertificates: { certifiers: [], types: {} } }
    // An x coordinate with no point on the curve (x = 5: x^3 + 7 = 132 is not a square mod p).
    const offCurve = '02' + '00'.repeat(31) + '05'
    const cases = [
      ['not JSON', 'not json at all', 400, 'invalid'],
      ['a JSON string', JSON.stringify('initialRequest'), 401, 'unauthorized'],
      ['another version', JSON.stringify({ ...good, version: '0.2' }), 401, 'unauthorized'],
      ['another message type', JSON.stringify({ ...good, messageType: 'certificateRequest' }), 401, 'unauthorized'],
      ['an identity key that is not hex', JSON.stringify({ ...good, identityKey: 'zz' + identityKey.slice(2) }), 401, 'unauthorized'],
      ['an identity key off the curve', JSON.stringify({ ...good, identityKey: offCurve }), 401, 'unauthorized'],
      ['no nonce', JSON.stringify({ ...good, initialNonce: '' }), 401, 'unauthorized'],
      ['a nonce that is not canonical base64', JSON.stringify({ ...good, initialNonce: nonce.slice(0, -1) + '!' }), 401, 'unauthorized'],
      ['a nonce past the bound', JSON.stringify({ ...good, initialNonce: crypto.randomBytes(300).toString('base64') }), 401, 'unauthorized'],
      ['a body past 64 KiB', JSON.stringify({ ...good, pad: 'x'.repeat(70 * 1024) }), 413, 'limited']
    ]
    const before = node.router.auth.sessions.size
    for (const [what, body, status, code] of cases) {
      const r = await post(body)
      expect({ what, status: r.status }).toEqual({ what, status })
      expect({ what, code: JSON.parse(r.text).error.code }).toEqual({ what, code })
      expect(r.text.length).toBeLessThan(512)
      expect(r.signed).toBe(false)
    }
    expect(node.router.auth.sessions.size).toBe(before)
    const ok = await post(JSON.stringify(good))
    expect(ok.status).toBe(200)
    const answer = JSON.parse(ok.text)
    expect(answer).toMatchObject({ version: '0.1', messageType: 'initialResponse', identityKey: node.identity, yourNonce: nonce })
    expect(Buffer.from(answer.initialNonce, 'base64').length).toBe(48)
    expect(node.router.auth.sessions.size).toBe(before + 1)
  })
})
