'use strict'
// The router behind a real nginx (Debian's package), configured with the file docs/operators.md
// gives operators (docs/nginx/overlay-lookup-live.conf; BRC-193 §8 "Proxies"): signed BRC-104
// answers verify through it, long polls are answered when a commit wakes them, a client that
// goes away cancels its poll, CORS and the spec's headers and bounded errors pass unchanged,
// nothing is compressed. .ci/run installs nginx, so CI never skips this file.

const fs = require('fs')
const { PrivateKey } = require('@bsv/sdk')
const { authClient, publicClient, openReq, readReq, openCaughtUp, summary, PROFILE } = require('./helpers/node')
const { NGINX, OPERATOR_CONF, nginxAvailable, startNodeBehindNginx } = require('./helpers/proxy')
const { runChecks, CHECKS, needing } = require('../js/check')

if (!nginxAvailable()) {
  console.warn(`reverse-proxy.test.js SKIPPED: ${NGINX} is missing (apt-get install nginx; .ci/run installs it)`)
}
const maybe = nginxAvailable() ? describe : describe.skip

const APP = 'https://app.example.com'
const running = []
afterEach(async () => {
  while (running.length > 0) await running.pop().close()
})

async function behindNginx (options) {
  const n = await startNodeBehindNginx({ allowedOrigins: [APP], ...options })
  running.push(n)
  return n
}

/** Waits (a bounded number of turns) until the node holds `n` waiting polls; asserts it does. */
async function waitersAre (node, n) {
  for (let i = 0; i < 500 && node.live.stats().waiters !== n; i++) await new Promise(resolve => setTimeout(resolve, 20))
  expect(node.live.stats().waiters).toBe(n)
}

/** The headers BRC-193 §8 and the router put on every answer, as a comparable object. */
function specHeaders (headers) {
  const out = {}
  for (const [k, v] of headers) {
    if (/^(x-bsv-|access-control-|cache-control$|vary$|content-type$|x-content-type-options$|content-encoding$)/.test(k)) out[k] = v
  }
  return out
}

maybe('behind nginx with the operators\' configuration', () => {
  test('the configuration allows long polls of 25 s plus overhead', () => {
    const conf = fs.readFileSync(OPERATOR_CONF, 'utf8')
    for (const directive of ['proxy_read_timeout', 'proxy_send_timeout']) {
      const m = new RegExp(`^\\s*${directive}\\s+(\\d+)s;`, 'm').exec(conf)
      expect(m).not.toBeNull()
      expect(Number(m[1])).toBeGreaterThan(30)
    }
    expect(conf).toMatch(/^\s*proxy_buffering off;/m)
  })

  test('BRC-103: signed answers verify through the proxy, and a waiting poll is answered by the commit that wakes it', async () => {
    const { node, url } = await behindNginx({ authentication: 'brc103' })
    const alice = await authClient(node, PrivateKey.fromRandom())
    expect(node.base).toBe(url)
    const end = await openCaughtUp(alice)
    expect(end.scope.provider).toBe(node.identity)
    // A long poll through nginx, woken by a real submit.
    const created = await node.factory.createNotes(['through nginx'])
    const poll = alice.post('read', readReq(end, { waitMs: 15000 }))
    await waitersAre(node, 1) // the poll waits in the node, behind the proxy
    await node.submit(created)
    // The answer holds the group: the commit woke the poll (a poll at its bound is empty).
    const woken = await poll
    expect(woken.status).toBe(200)
    expect(summary(woken.body)).toEqual([[`output ${created.txid}.0`]])
    expect(woken.headers.get('x-bsv-auth-identity-key')).toBe(node.identity)
    // Signed errors pass too: a stale capability is context-changed.
    const stale = await (await authClient(node, PrivateKey.fromRandom(), 'ab'.repeat(32))).post('open', openReq())
    expect(stale.status).toBe(409)
    expect(stale.body.error.code).toBe('context-changed')
  })

  test('the conformance checker passes every check through nginx (BRC-103, CORS, mutations)', async () => {
    const { node, url } = await behindNginx({ authentication: 'brc103' })
    await node.submit(await node.factory.createNotes(['one', 'two', 'three']))
    let mutations = 0
    const report = await runChecks({
      baseURL: url,
      service: 'ls_notes',
      auth: 'brc103',
      allowInsecureHttp: true,
      origin: APP,
      emptyQuery: { author: 'nobody' },
      waitMs: 400,
      mutate: async () => {
        mutations++
        await node.submit(await node.factory.createNotes([`through nginx ${mutations}`]))
      }
    })
    // The session-expiry checks need --long (this node's sessions last minutes).
    expect(report.results.filter(r => r.status !== 'ok').map(r => r.check)).toEqual(needing('long'))
    expect(report.passed).toBe(CHECKS.length - needing('long').length)
  })

  test('public mode: answers, headers and bounded errors are the same through the proxy; nothing is compressed', async () => {
    const { node } = await behindNginx({ authentication: 'none' })
    await node.submit(await node.factory.createNotes(['one', 'two']))
    const viaProxy = await publicClient(node)
    const direct = await publicClient({ ...node, base: node.direct }, viaProxy.capability)
    const end = await openCaughtUp(viaProxy)
    expect(end.scope.provider).toBe(node.origin)
    const gzip = { headers: { 'accept-encoding': 'gzip, br' } }
    const a = await viaProxy.post('read', readReq(end), gzip)
    const b = await direct.post('read', readReq(end), gzip)
    expect(a.status).toBe(200)
    expect(a.raw).toBe(b.raw)
    expect(specHeaders(a.headers)).toEqual(specHeaders(b.headers))
    expect(a.headers.get('content-encoding')).toBeNull()
    // A body over the router's 1 MiB limit gets the router's limited envelope, not nginx's page.
    const big = await viaProxy.post('open', JSON.stringify({ ...openReq(), query: { pad: 'x'.repeat(1536 * 1024) } }))
    expect(big.status).toBe(413)
    expect(big.body.error.code).toBe('limited')
    expect(Buffer.byteLength(big.raw)).toBeLessThanOrEqual(4096)
    // An unknown session is the spec's reset-required, with the §8 headers.
    const unknown = await viaProxy.post('read', { ...readReq(end), session: 'ab'.repeat(16) })
    expect(unknown.status).toBe(409)
    expect(unknown.headers.get('vary')).toMatch(/x-bsv-overlay-capability/i)
  })

  test('public mode: a client that goes away through the proxy cancels its poll', async () => {
    const { node } = await behindNginx({ authentication: 'none' })
    const client = await publicClient(node)
    const end = await openCaughtUp(client)
    const ac = new AbortController()
    const poll = client.post('read', readReq(end, { waitMs: 15000 }), { signal: ac.signal }).catch(e => e)
    await waitersAre(node, 1)
    ac.abort()
    expect((await poll).name).toBe('AbortError')
    await waitersAre(node, 0) // nginx closed its upstream connection, the router released the poll
    // Nothing was consumed: the same cursor still reads.
    expect((await client.post('read', readReq(end))).status).toBe(200)
  })

  test('CORS: preflights and answers carry the exact-origin headers through the proxy, for the lookup routes and the handshake', async () => {
    const { node } = await behindNginx({ authentication: 'brc103' })
    for (const route of ['/overlay/v1/lookup/open', '/.well-known/auth']) {
      const ask = (base, origin) => fetch(base + route, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-bsv-auth-version' }
      })
      const [proxied, direct] = [await ask(node.origin, APP), await ask(node.direct, APP)]
      expect(proxied.status).toBe(204)
      expect(proxied.headers.get('access-control-allow-origin')).toBe(APP)
      expect(proxied.headers.get('access-control-allow-credentials')).toBe('true')
      expect(specHeaders(proxied.headers)).toEqual(specHeaders(direct.headers))
      const other = await ask(node.origin, 'https://elsewhere.example')
      expect(other.headers.get('access-control-allow-origin')).toBeNull()
    }
    const manifest = await fetch(node.origin + '/overlay/v1/capabilities', { headers: { origin: APP } })
    expect(manifest.headers.get('access-control-allow-origin')).toBe(APP)
    expect(manifest.headers.get('access-control-expose-headers')).toMatch(/x-bsv-auth-signature/i)
    expect(PROFILE).toMatch(/lookup-live-v1$/)
  })
})
