'use strict'
// NativeAuthFetch (js/auth/authfetch.js) over real HTTP on loopback: against the project's
// router (BRC-103) with a real Engine and LiveLookupClient; against a plain Express server
// running @bsv/auth-express-middleware itself (the wire matches the middleware's, and
// answers match those AuthFetch gets); tampered answers, a foreign identity and oversized
// answers are rejected; a restarted server (its sessions gone) is survived by a new
// handshake; ProtoWallet works as the client wallet through its async methods.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const express = require('express')
const { createAuthMiddleware } = require('@bsv/auth-express-middleware')
const { AuthFetch, ProtoWallet, PrivateKey } = require('@bsv/sdk')
const { NativeAuthFetch, NativeWallet, LiveLookupClient, CheckpointStore } = require('../js')
const { startProxy, startServer } = require('./helpers/net')
const { startNode, openReq, readReq, PROFILE } = require('./helpers/node')
const { CHAIN } = require('./helpers/live')
const { LocalChainTracker, NoteFactory } = require('./helpers/engine')

jest.setTimeout(60000)

const nativeWallet = () => NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex())
const identityOf = async (wallet) => (await wallet.getPublicKey({ identityKey: true })).publicKey

/** Resolves once `pred()` holds (checked every 10 ms), failing after 10 s. */
async function until (pred) {
  for (let i = 0; i < 1000 && !pred(); i++) await new Promise(resolve => setTimeout(resolve, 10))
  expect(pred()).toBe(true)
}

/**
 * Express with the auth middleware on `serverKey`'s ProtoWallet, a JSON echo route and
 * test routes. `before(app)` mounts middleware ahead of the auth middleware (to alter an
 * answer after it was signed). Counts handshakes.
 */
async function startEcho ({ serverKey = PrivateKey.fromRandom(), port = 0, before } = {}) {
  const app = express()
  app.set('etag', false)
  const counts = { handshakes: 0, requests: 0, handshakeBodies: [], slowClosed: 0 }
  app.use((req, _res, next) => {
    if (req.path === '/.well-known/auth') counts.handshakes++
    else counts.requests++
    next()
  })
  if (before) before(app)
  app.use(express.json({ verify: (req, _res, buf) => { if (req.path === '/.well-known/auth') counts.handshakeBodies.push(buf.toString('utf8')) } }))
  app.use(express.text())
  app.use(createAuthMiddleware({ wallet: new ProtoWallet(serverKey) }))
  app.all('/echo', (req, res) => {
    const seen = {}
    for (const [k, v] of Object.entries(req.headers)) if (k.startsWith('x-bsv-') && !k.startsWith('x-bsv-auth')) seen[k] = v
    res.set('x-bsv-echo-count', String(Object.keys(seen).length))
    res.set('x-bsv-echo-method', req.method)
    res.json({ method: req.method, path: req.path, query: req.query, body: req.body ?? null, headers: seen, caller: req.auth.identityKey })
  })
  app.get('/big/:n', (req, res) => { res.send(Buffer.alloc(Number(req.params.n), 0x61)) })
  app.get('/bigheader/:n', (req, res) => { res.set('x-bsv-filler', 'b'.repeat(Number(req.params.n))); res.json({ ok: true }) })
  app.get('/secret', (_req, res) => { res.set('x-bsv-label', 'genuine'); res.json({ secret: 'genuine-value' }) })
  app.get('/payment', (_req, res) => { res.status(402).set('x-bsv-payment-version', '1.0').json({ status: 'error', code: 'ERR_PAYMENT_REQUIRED' }) })
  app.get('/slow', (_req, res) => { const t = setTimeout(() => res.json({ late: true }), 20000); res.on('close', () => { clearTimeout(t); counts.slowClosed++ }) })
  const srv = await startServer(app, port)
  return { ...srv, origin: `http://127.0.0.1:${srv.port}`, counts, serverKey, identity: serverKey.toPublicKey().toString() }
}

test('request payloads are byte for byte those of AuthFetch.serializeRequest', async () => {
  const { serializeRequest } = require('../js/auth/authfetch')
  const af = new AuthFetch(new ProtoWallet(PrivateKey.fromRandom()))
  const cases = [
    ['GET', {}, undefined, 'http://h.test/'],
    ['GET', { 'x-bsv-b': '2', 'X-Bsv-A': '1', authorization: 'Bearer x' }, undefined, 'http://h.test/p/a%20th?q=1&r=%C3%A9'],
    ['POST', { 'content-type': 'application/json; charset=utf-8' }, undefined, 'http://h.test/x'],
    ['POST', { 'content-type': 'text/plain' }, undefined, 'http://h.test/x'],
    ['DELETE', {}, undefined, 'http://h.test/x?'],
    ['PUT', { 'content-type': 'application/json', 'x-bsv-overlay-profile': 'p', 'x-bsv-overlay-capability': 'c' }, JSON.stringify({ a: 'ünï 🎉', b: [1, 2] }), 'http://h.test/overlay/v1/lookup/read'],
    ['POST', { 'content-type': 'application/json' }, { object: true, n: 1 }, 'http://h.test/o#fragment'],
    ['POST', { 'content-type': 'text/plain' }, 'x'.repeat(70000), 'http://h.test/big'],
    ['PATCH', { 'content-type': 'application/json' }, '', 'http://h.test/empty']
  ]
  for (const [method, headers, body, url] of cases) {
    const id = require('node:crypto').randomBytes(32)
    const theirs = Buffer.from((await af.serializeRequest(method, headers, body, new URL(url), Array.from(id))).toArray())
    expect(serializeRequest(id, method, headers, body, url).toString('hex')).toBe(theirs.toString('hex'))
  }
})

test('AuthResponse reads as a Response over the same bytes does, a null body for an empty one', async () => {
  const { AuthResponse } = require('../js/auth/authfetch')
  const init = () => ({ status: 200, statusText: '200', headers: new Map([['x-bsv-a', '1'], ['x-bsv-auth-identity-key', '02ab']]) })
  // A leading BOM (dropped when decoded), bytes that are not UTF-8, nothing.
  for (const body of [Buffer.from('\ufeff{"a":"é"}', 'utf8'), Buffer.concat([Buffer.from('text '), Buffer.of(0xff, 0xc3)]), Buffer.alloc(0)]) {
    const ours = new AuthResponse(body, init())
    const theirs = new Response(body.length > 0 ? body : null, init())
    expect(ours).toBeInstanceOf(Response)
    for (const k of ['status', 'statusText', 'ok', 'type', 'url', 'redirected', 'bodyUsed']) expect([k, ours[k]]).toEqual([k, theirs[k]])
    expect([...ours.headers]).toEqual([...theirs.headers])
    expect(ours.body === null).toBe(theirs.body === null)
    expect(await ours.clone().text()).toBe(await theirs.clone().text())
    expect(Buffer.from(await ours.clone().arrayBuffer())).toEqual(Buffer.from(await theirs.clone().arrayBuffer()))
    expect(Buffer.from(await ours.clone().bytes())).toEqual(Buffer.from(await theirs.clone().bytes()))
    expect((await ours.clone().blob()).size).toBe((await theirs.clone().blob()).size)
    await ours.text()
    await theirs.text()
    expect(ours.bodyUsed).toBe(theirs.bodyUsed)
    // A second read: rejected for a body, '' again for a null one.
    const again = (r) => r.text().then((t) => ['read', t], (e) => ['rejected', e.name])
    expect(await again(ours)).toEqual(await again(theirs))
  }
})

describe('against @bsv/auth-express-middleware (ProtoWallet server)', () => {
  let server
  beforeAll(async () => { server = await startEcho() })
  afterAll(async () => { await server.close() })

  const requests = (origin) => [
    [`${origin}/echo?q=hello&n=1&u=%C3%A9t%C3%A9`, { method: 'POST', headers: { 'Content-Type': 'application/json; charset=utf-8', 'x-bsv-topic': 'tm_notes', 'X-BSV-Second': 'two' }, body: JSON.stringify({ text: 'héllo wörld ✓ 🎉 日本語', n: [1, 2, 3] }) }],
    [`${origin}/echo`, { method: 'GET' }],
    [`${origin}/echo?only=search`, { method: 'GET', headers: { 'x-bsv-a': '1', 'x-bsv-b': '2', 'x-bsv-c': '3' } }],
    [`${origin}/echo`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'plain text, ünïcödé' }],
    [`${origin}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' } }], // no body: '{}' as AuthFetch sends
    [`${origin}/echo`, { method: 'DELETE' }],
    [`${origin}/echo?x=%20y`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer token-1' }, body: { asObject: true, emoji: '🙂' } }]
  ]

  test.each([['NativeWallet (native core)', nativeWallet], ['ProtoWallet (async methods)', () => new ProtoWallet(PrivateKey.fromRandom())]])(
    'requests from %s verify at the middleware, and the answers are the ones AuthFetch gets', async (_name, makeWallet) => {
      const wallet = makeWallet()
      const client = new NativeAuthFetch(wallet)
      const reference = new AuthFetch(makeWallet())
      const me = await identityOf(wallet)
      try {
        for (const [url, config] of requests(server.origin)) {
          const res = await client.fetch(url, config)
          const ref = await reference.fetch(url, { ...config })
          expect(res.status).toBe(200)
          expect(res.status).toBe(ref.status)
          const body = await res.json()
          const refBody = await ref.json()
          expect(body.caller).toBe(me)
          expect({ ...body, caller: null }).toEqual({ ...refBody, caller: null })
          // The same header set as AuthFetch exposes: the signed x-bsv-* ones and the identity.
          expect([...res.headers]).toEqual([...ref.headers])
          expect(res.headers.get('x-bsv-auth-identity-key')).toBe(server.identity)
          expect(res.headers.get('x-bsv-echo-method')).toBe(body.method)
        }
        const first = await (await client.fetch(...requests(server.origin)[0])).json()
        expect(first.query).toEqual({ q: 'hello', n: '1', u: 'été' })
        expect(first.body.text).toBe('héllo wörld ✓ 🎉 日本語')
        expect(first.headers).toEqual({ 'x-bsv-topic': 'tm_notes', 'x-bsv-second': 'two' })
        const text = await (await client.fetch(...requests(server.origin)[3])).json()
        expect(text.body).toBe('plain text, ünïcödé')
        expect(client.peers[server.origin].identityKey).toBe(server.identity)
      } finally {
        client.close()
      }
    })

  test('concurrent first requests share one handshake; later ones reuse the session', async () => {
    const client = new NativeAuthFetch(nativeWallet())
    const before = server.counts.handshakes
    try {
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => client.fetch(`${server.origin}/echo?i=${i}`)))
      for (const [i, res] of answers.entries()) expect((await res.json()).query.i).toBe(String(i))
      await (await client.fetch(`${server.origin}/echo`)).json()
      expect(server.counts.handshakes - before).toBe(1)
    } finally {
      client.close()
    }
  })

  test('the handshake request is the one AuthFetch sends, but for the identity and the nonce', async () => {
    const wallets = [nativeWallet(), nativeWallet()]
    const ours = new NativeAuthFetch(wallets[0])
    const theirs = new AuthFetch(wallets[1])
    const from = server.counts.handshakeBodies.length
    try {
      await (await ours.fetch(`${server.origin}/echo`)).json()
      await (await theirs.fetch(`${server.origin}/echo`)).json()
      const [a, b] = server.counts.handshakeBodies.slice(from)
      const shape = async (text, wallet) => {
        const m = JSON.parse(text)
        expect(m.identityKey).toBe(await identityOf(wallet))
        expect(Buffer.from(m.initialNonce, 'base64')).toHaveLength(48)
        return text.replace(m.identityKey, 'IDENTITY').replace(m.initialNonce, 'NONCE')
      }
      expect(await shape(a, wallets[0])).toBe(await shape(b, wallets[1]))
    } finally {
      ours.close()
    }
  })

  test('headers outside the signed set, auth headers and a body without Content-Type are refused before sending', async () => {
    const client = new NativeAuthFetch(nativeWallet())
    const before = server.counts.handshakes + server.counts.requests
    try {
      await expect(client.fetch(`${server.origin}/echo`, { headers: { accept: 'application/json' } })).rejects.toThrow(/Unsupported header/)
      await expect(client.fetch(`${server.origin}/echo`, { headers: { 'x-bsv-auth-nonce': 'x' } })).rejects.toThrow(/No BSV auth headers/)
      await expect(client.fetch(`${server.origin}/echo`, { method: 'POST', body: 'x' })).rejects.toThrow(/Content-Type header is required/)
      expect(server.counts.handshakes + server.counts.requests).toBe(before)
    } finally {
      client.close()
    }
  })

  test('cache-control goes unsigned beside the signed headers; the middleware still verifies the request', async () => {
    const seen = []
    const srv = await startEcho({ before: app => app.use((req, _res, next) => { if (req.path === '/echo') seen.push(req.headers['cache-control']); next() }) })
    const client = new NativeAuthFetch(nativeWallet())
    try {
      const res = await client.fetch(`${srv.origin}/echo`, { method: 'POST', headers: { 'content-type': 'application/json', 'Cache-Control': 'no-store', 'x-bsv-topic': 't' }, body: '{}' })
      expect(res.status).toBe(200)
      const body = await res.json()
      expect(body.caller).toBe(await client._signer.identityKey())
      expect(body.headers).toEqual({ 'x-bsv-topic': 't' })
      expect(seen).toEqual(['no-store'])
      await expect(client.fetch(`${srv.origin}/echo`, { headers: { 'cache-control': 'no-store', 'Cache-Control': 'no-cache' } })).rejects.toThrow(/given twice/)
    } finally {
      client.close()
      await srv.close()
    }
  })

  test('a 402 is returned as it is (never paid); an aborted request rejects', async () => {
    const client = new NativeAuthFetch(nativeWallet())
    try {
      const res = await client.fetch(`${server.origin}/payment`)
      expect(res.status).toBe(402)
      expect(res.headers.get('x-bsv-payment-version')).toBe('1.0')
      const ac = new AbortController()
      const closed = server.counts.slowClosed
      const slow = client.fetch(`${server.origin}/slow`, { signal: ac.signal })
      const reason = new Error('no longer wanted')
      setTimeout(() => ac.abort(reason), 200)
      await expect(slow).rejects.toMatchObject({ name: 'AbortError', cause: reason })
      // The request's socket is released: the server sees the request closed.
      await until(() => server.counts.slowClosed > closed)
      // The session survives an aborted request.
      expect((await client.fetch(`${server.origin}/echo`)).status).toBe(200)
      // A signal aborted before the request: nothing is sent.
      const sent = server.counts.requests
      await expect(client.fetch(`${server.origin}/echo`, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' })
      expect(server.counts.requests).toBe(sent)
    } finally {
      client.close()
    }
  })

  test('oversized answers are rejected: a body over maxBodyBytes, a header block over maxHeaderBytes', async () => {
    const client = new NativeAuthFetch(nativeWallet(), { maxBodyBytes: 64 * 1024, maxHeaderBytes: 8 * 1024 })
    try {
      const ok = await client.fetch(`${server.origin}/big/${64 * 1024}`)
      expect((await ok.arrayBuffer()).byteLength).toBe(64 * 1024)
      await expect(client.fetch(`${server.origin}/big/${64 * 1024 + 1}`)).rejects.toMatchObject({ code: 'ERR_RESPONSE_TOO_LARGE' })
      await expect(client.fetch(`${server.origin}/big/${4 * 1024 * 1024}`)).rejects.toMatchObject({ code: 'ERR_RESPONSE_TOO_LARGE' })
      await expect(client.fetch(`${server.origin}/bigheader/${12 * 1024}`)).rejects.toThrow(/Network error.*[Hh]eader/)
      expect((await client.fetch(`${server.origin}/bigheader/100`)).status).toBe(200)
    } finally {
      client.close()
    }
  })

  test('a body without a declared length is cut off at maxBodyBytes, not buffered to its end', async () => {
    // The proxy turns the signed answer's Content-Length into padding: the body then
    // runs to the end of the connection, which the server keeps open.
    const proxy = await startProxy(server.port, {
      response: (t) => t.includes('x-bsv-auth-request-id') ? t.replace(/content-length: \d+\r\n/i, (m) => 'x-pad: ' + 'p'.repeat(m.length - 9) + '\r\n') : t
    })
    const client = new NativeAuthFetch(nativeWallet(), { maxBodyBytes: 64 * 1024 })
    try {
      await expect(client.fetch(`http://127.0.0.1:${proxy.port}/big/${2 * 1024 * 1024}`)).rejects.toMatchObject({ code: 'ERR_RESPONSE_TOO_LARGE' })
      expect(proxy.seen.edits).toBe(1)
    } finally {
      client.close()
      await proxy.close()
    }
  })

  test('the Response holds the verified body as bytes and behaves as AuthFetch\'s: read once, cloned, streamed', async () => {
    const client = new NativeAuthFetch(nativeWallet())
    const reference = new AuthFetch(nativeWallet())
    const url = `${server.origin}/echo?q=%C3%A9`
    const config = { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'body ✓' }
    try {
      const ours = await client.fetch(url, config)
      const theirs = await reference.fetch(url, { ...config })
      expect(ours).toBeInstanceOf(Response)
      for (const k of ['status', 'statusText', 'ok', 'type', 'url', 'redirected', 'bodyUsed']) expect([k, ours[k]]).toEqual([k, theirs[k]])
      const copy = ours.clone()
      const text = await ours.text()
      const withoutCaller = (t) => ({ ...JSON.parse(t), caller: null })
      expect(withoutCaller(text)).toEqual(withoutCaller(await theirs.text()))
      expect(ours.bodyUsed).toBe(true)
      await expect(ours.text()).rejects.toThrow(TypeError)
      await expect(ours.arrayBuffer()).rejects.toThrow(TypeError)
      expect(() => ours.clone()).toThrow(TypeError)
      expect(JSON.parse(text).body).toBe('body ✓')
      // The clone reads the same bytes in every form.
      expect(Buffer.from(await copy.clone().arrayBuffer()).toString('utf8')).toBe(text)
      expect(Buffer.from(await copy.clone().bytes()).toString('utf8')).toBe(text)
      expect(await (await copy.clone().blob()).text()).toBe(text)
      expect(await copy.clone().json()).toEqual(JSON.parse(text))
      // The body stream, made when asked for: read through it, the body is used.
      const reader = copy.body.getReader()
      expect(copy.bodyUsed).toBe(false)
      const chunks = []
      for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value)
      expect(Buffer.concat(chunks).toString('utf8')).toBe(text)
      expect(copy.bodyUsed).toBe(true)
      await expect(copy.text()).rejects.toMatchObject({ name: 'TypeError' }) // undici's, of another realm under Jest
      // A stream handed on reads as the body.
      expect(await new Response((await client.fetch(url, config)).body).text()).toBe(text)
    } finally {
      client.close()
    }
  })

  test('LiveLookupClient reads a NativeAuthFetch without a Response; its deadline and signal release the socket; an overridden fetch is called', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-authfetch-llc-'))
    const store = CheckpointStore.open(path.join(tmp, 'client'))
    const authFetch = new NativeAuthFetch(nativeWallet())
    let calls = 0
    class Counting extends NativeAuthFetch {
      fetch (url, config) { calls++; return super.fetch(url, config) }
    }
    const counting = new Counting(nativeWallet())
    const clientOf = (af) => new LiveLookupClient({ baseURL: server.origin, chain: CHAIN, allowInsecureHttp: true, authFetch: af, store, requestTimeoutMs: 300 })
    try {
      const client = clientOf(authFetch)
      const res = await client._send('GET', `${server.origin}/echo?n=7`, { 'x-bsv-topic': 't', 'Cache-Control': 'no-store' }, undefined, undefined)
      expect(res).not.toBeInstanceOf(Response)
      expect(res.status).toBe(200)
      expect(res.headers.get('x-bsv-auth-identity-key')).toBe(server.identity)
      const echoed = JSON.parse(Buffer.from(res.body).toString('utf8'))
      expect(echoed.query.n).toBe('7')
      expect(echoed.headers).toEqual({ 'x-bsv-topic': 't' }) // Cache-Control is not sent under BRC-104
      // The deadline: an 'unavailable' error, and the request is closed at the server.
      let closed = server.counts.slowClosed
      await expect(client._send('GET', `${server.origin}/slow`, {}, undefined, undefined)).rejects.toMatchObject({ code: 'unavailable', message: 'no response within 300 ms' })
      await until(() => server.counts.slowClosed > closed)
      // The caller's signal: 'cancelled', and the request is closed at the server.
      closed = server.counts.slowClosed
      const ac = new AbortController()
      setTimeout(() => ac.abort(), 100)
      await expect(client._send('GET', `${server.origin}/slow`, {}, undefined, ac.signal, 5000)).rejects.toMatchObject({ code: 'cancelled' })
      await until(() => server.counts.slowClosed > closed)
      // A signal aborted already: 'cancelled', and nothing is sent.
      const sent = server.counts.requests
      await expect(client._send('GET', `${server.origin}/echo`, {}, undefined, AbortSignal.abort())).rejects.toMatchObject({ code: 'cancelled' })
      expect(server.counts.requests).toBe(sent)
      // A subclass's own fetch is what the client calls; it answers a Response.
      const viaFetch = await clientOf(counting)._send('GET', `${server.origin}/echo`, {}, undefined, undefined)
      expect(viaFetch).toBeInstanceOf(Response)
      expect(calls).toBe(1)
    } finally {
      authFetch.close()
      counting.close()
      store.close()
      fs.rmSync(tmp, { recursive: true, force: true })
    }
  })

  test('a server that does not authenticate is an error, not a plain answer', async () => {
    const app = express()
    app.all('*splat', (_req, res) => res.json({ plain: true }))
    const plain = await startServer(app)
    const client = new NativeAuthFetch(nativeWallet())
    try {
      // Its answer to the handshake is no initialResponse.
      await expect(client.fetch(`http://127.0.0.1:${plain.port}/anything`)).rejects.toThrow(/auth version undefined/)
      expect(client.peers[`http://127.0.0.1:${plain.port}`]).toBeUndefined()
    } finally {
      client.close()
      await plain.close()
    }
  })
})

describe('tampered answers', () => {
  // Alters what the auth middleware sends after it signed: the middleware keeps the
  // original res.send / res.set and calls them with the signed body and headers.
  const alterAfterSigning = (app) => app.use((req, res, next) => {
    if (req.path === '/secret') {
      const send = res.send
      res.send = function (body) {
        if (Buffer.isBuffer(body) && req.headers['x-bsv-tamper'] === 'body') body = Buffer.from(body.toString('utf8').replace('genuine-value', 'altered-value'))
        return send.call(this, body)
      }
      const set = res.set
      res.set = function (k, v) {
        if (req.headers['x-bsv-tamper'] === 'header' && k === 'x-bsv-label') v = 'altered'
        return set.call(this, k, v)
      }
    }
    next()
  })
  let server
  beforeAll(async () => { server = await startEcho({ before: alterAfterSigning }) })
  afterAll(async () => { await server.close() })

  test('an untouched answer verifies; a body or a signed header altered after signing is rejected', async () => {
    const client = new NativeAuthFetch(nativeWallet())
    try {
      const res = await client.fetch(`${server.origin}/secret`, { headers: { 'x-bsv-tamper': 'none' } })
      expect(await res.json()).toEqual({ secret: 'genuine-value' })
      expect(res.headers.get('x-bsv-label')).toBe('genuine')
      await expect(client.fetch(`${server.origin}/secret`, { headers: { 'x-bsv-tamper': 'body' } })).rejects.toThrow(/Invalid signature/)
      await expect(client.fetch(`${server.origin}/secret`, { headers: { 'x-bsv-tamper': 'header' } })).rejects.toThrow(/Invalid signature/)
    } finally {
      client.close()
    }
  })

  test('bytes edited in flight, another identity claimed, or a replayed request id are rejected', async () => {
    const other = PrivateKey.fromRandom().toPublicKey().toString()
    let mode = 'none'
    let replay = null
    const proxy = await startProxy(server.port, {
      response: (t) => {
        if (!t.includes('x-bsv-auth-request-id')) return t // the handshake answer
        if (mode === 'body') return t.replace('genuine-value', 'genuine-VALUE')
        if (mode === 'identity') return t.replace(server.identity, other)
        if (mode === 'signature') return t.replace(/(x-bsv-auth-signature: [0-9a-f]{20})([0-9a-f])/, (_m, a, c) => a + (c === '0' ? '1' : '0'))
        if (mode === 'record') replay = /x-bsv-auth-request-id: (\S+)/.exec(t)[1]
        if (mode === 'replay') return t.replace(/x-bsv-auth-request-id: \S+/, `x-bsv-auth-request-id: ${replay}`)
        return t
      }
    })
    const origin = `http://127.0.0.1:${proxy.port}`
    const client = new NativeAuthFetch(nativeWallet())
    try {
      const get = () => client.fetch(`${origin}/secret`, { headers: { 'x-bsv-tamper': 'none' } })
      mode = 'record'
      expect(await (await get()).json()).toEqual({ secret: 'genuine-value' })
      mode = 'body'
      await expect(get()).rejects.toThrow(/Invalid signature/)
      mode = 'identity'
      await expect(get()).rejects.toThrow(/not the session's/)
      mode = 'signature'
      await expect(get()).rejects.toThrow(/Invalid signature/)
      mode = 'replay'
      await expect(get()).rejects.toThrow(/another request id/)
      mode = 'none'
      expect(await (await get()).json()).toEqual({ secret: 'genuine-value' })
      expect(proxy.seen.edits).toBeGreaterThanOrEqual(4)
    } finally {
      client.close()
      await proxy.close()
    }
  })

  test('a handshake answered by a key that did not sign it is rejected', async () => {
    // The initial response's identityKey replaced with another key: its signature no longer verifies.
    const other = PrivateKey.fromRandom().toPublicKey().toString()
    const proxy = await startProxy(server.port, {
      response: (t) => t.includes('"initialResponse"') ? t.split(server.identity).join(other) : t
    })
    const client = new NativeAuthFetch(nativeWallet())
    try {
      await expect(client.fetch(`http://127.0.0.1:${proxy.port}/secret`)).rejects.toThrow(/Unable to verify initial response signature/)
      expect(client.peers[`http://127.0.0.1:${proxy.port}`]).toBeUndefined()
    } finally {
      client.close()
      await proxy.close()
    }
  })
})

test('a restarted server (its sessions gone) is survived by one new handshake', async () => {
  const serverKey = PrivateKey.fromRandom()
  let server = await startEcho({ serverKey })
  const port = server.port
  const client = new NativeAuthFetch(nativeWallet())
  try {
    expect((await client.fetch(`${server.origin}/echo?n=1`)).status).toBe(200)
    const session = client.peers[server.origin]
    await server.close()
    server = await startEcho({ serverKey, port })
    const res = await client.fetch(`${server.origin}/echo?n=2`)
    expect((await res.json()).query.n).toBe('2')
    // The old session's request (answered 401 unauthenticated), one handshake, the retry.
    expect(server.counts.requests).toBe(2)
    expect(server.counts.handshakes).toBe(1)
    expect(client.peers[server.origin]).not.toBe(session)
    expect(client.peers[server.origin].identityKey).toBe(server.identity)
  } finally {
    client.close()
    await server.close()
  }
})

describe('against the project router (BRC-103)', () => {
  let node
  beforeAll(async () => { node = await startNode() })
  afterAll(async () => { await node.close() })

  const headers = () => ({ 'content-type': 'application/json', 'x-bsv-overlay-capability': node.capability, 'x-bsv-overlay-profile': PROFILE })

  test.each([['NativeWallet', nativeWallet], ['ProtoWallet', () => new ProtoWallet(PrivateKey.fromRandom())]])(
    'open and read to the end with %s; the answers are signed by the router identity', async (_name, makeWallet) => {
      const client = new NativeAuthFetch(makeWallet())
      const post = async (op, body) => {
        const res = await client.fetch(`${node.origin}/overlay/v1/lookup/${op}`, { method: 'POST', headers: headers(), body: JSON.stringify(body) })
        return { status: res.status, headers: res.headers, body: await res.json() }
      }
      try {
        const created = await node.factory.createNotes(['native client note'])
        await node.submit(created)
        let b = await post('open', openReq())
        expect(b.status).toBe(200)
        expect(b.headers.get('x-bsv-auth-identity-key')).toBe(node.identity)
        expect(b.headers.get('x-bsv-overlay-capability')).toBe(node.capability)
        const seen = [JSON.stringify(b.body)]
        while (!b.body.snapshotComplete) { b = await post('read', readReq(b.body)); seen.push(JSON.stringify(b.body)) }
        expect(b.body.scope.provider).toBe(node.identity)
        expect(seen.join()).toContain(created.txid)
        const caughtUp = await post('read', readReq(b.body))
        expect(caughtUp.status).toBe(200)
        expect(caughtUp.body.groups).toEqual([])
        expect(client.peers[node.origin].identityKey).toBe(node.identity)
      } finally {
        client.close()
      }
    })

  test('an unauthenticated-looking refusal (409 unknown session) still comes back signed', async () => {
    const client = new NativeAuthFetch(nativeWallet())
    try {
      const res = await client.fetch(`${node.origin}/overlay/v1/lookup/read`, { method: 'POST', headers: headers(), body: JSON.stringify(readReq({ session: 'ab'.repeat(16), cursor: 'x' })) })
      expect(res.status).toBe(409)
      expect(res.headers.get('x-bsv-auth-identity-key')).toBe(node.identity)
    } finally {
      client.close()
    }
  })
})

test('LiveLookupClient follows over BRC-103 with NativeAuthFetch; a provider restart is survived', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-authfetch-'))
  const serverKey = PrivateKey.fromRandom()
  const engineDir = fs.mkdtempSync(path.join(tmp, 'engine-'))
  const dir = path.join(tmp, 'live')
  const chainTracker = new LocalChainTracker()
  let node = await startNode({ serverKey, dir, engineDir, chainTracker })
  const port = new URL(node.origin).port | 0
  const store = CheckpointStore.open(path.join(tmp, 'client'))
  const authFetch = new NativeAuthFetch(nativeWallet())
  try {
    const first = await node.factory.createNotes(['followed with NativeAuthFetch'])
    await node.submit(first)
    const client = new LiveLookupClient({
      baseURL: node.origin,
      chain: CHAIN,
      allowInsecureHttp: true,
      authFetch,
      store,
      limits: { waitMs: 1000 },
      retry: { initialMs: 50, maxMs: 200 }
    })
    let key = null
    let waiter = null
    const listed = () => key ? store.members(key).filter(m => m.present).map(m => m.outpoint.txid) : []
    const until = (what, pred) => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out waiting until ' + what)), 30000)
      waiter = () => { if (pred()) { clearTimeout(timer); waiter = null; resolve() } }
      waiter()
    })
    const handle = client.follow('ls_notes', {}, {
      membership: 'claims',
      onRevision (e) { key = e.sourceKey; if (waiter) waiter() },
      onState () { if (waiter) waiter() }
    })
    await until('the first note is listed', () => listed().includes(first.txid))
    expect(key.provider).toBe(node.identity)
    expect(authFetch.peers[node.origin].identityKey).toBe(node.identity)

    // The provider restarts (same identity, store and Engine): its BRC-103 sessions are gone.
    await node.close()
    node = await startNode({ serverKey, dir, engineDir, chainTracker, port, live: { create: false } })
    const second = await new NoteFactory(chainTracker).createNotes(['after the provider restarted'])
    await node.submit(second)
    await until('the note made after the restart is listed', () => listed().includes(second.txid))
    expect(listed().sort()).toEqual([first.txid, second.txid].sort())
    await handle.close()
    const result = await handle.done
    expect(result.sourceKey.provider).toBe(node.identity)
  } finally {
    authFetch.close()
    store.close()
    await node.close()
    fs.rmSync(tmp, { recursive: true, force: true })
  }
})
