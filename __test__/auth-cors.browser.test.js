'use strict'
// A page served from one origin authenticates (BRC-103 handshake, then a
// signed lookup) against a router on another origin, in real Chromium driven
// by playwright-core. The page uses the @bsv/sdk browser bundle's AuthFetch
// with a ProtoWallet; the router uses its default native wallet and lists
// the page's exact origin in allowedOrigins.
const fs = require('node:fs')
const path = require('node:path')
const express = require('express')
const { startServer } = require('./helpers/net')
const { startNode, PROFILE } = require('./helpers/node')

const CHROMIUM = '/usr/bin/chromium'
const haveChromium = fs.existsSync(CHROMIUM)
if (!haveChromium) console.warn(`auth-cors.browser.test.js SKIPPED: ${CHROMIUM} is missing`)
const maybe = haveChromium ? describe : describe.skip

/** dist/umd/bundle.js of @bsv/sdk (no exported subpath: walk up from the entry point). */
function sdkBundle () {
  let dir = path.dirname(require.resolve('@bsv/sdk'))
  while (!fs.existsSync(path.join(dir, 'dist', 'umd', 'bundle.js'))) {
    const up = path.dirname(dir)
    if (up === dir) throw new Error('no @bsv/sdk browser bundle')
    dir = up
  }
  return path.join(dir, 'dist', 'umd', 'bundle.js')
}

const PAGE = `<!doctype html><meta charset="utf-8"><script src="/bsv.js"></script>
<script>
  window.authenticatedOpen = async (base, capability, profile, body) => {
    const af = new bsv.AuthFetch(new bsv.ProtoWallet(bsv.PrivateKey.fromRandom()))
    const res = await af.fetch(base + '/overlay/v1/lookup/open', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-bsv-overlay-capability': capability, 'x-bsv-overlay-profile': profile },
      body: JSON.stringify(body)
    })
    return { status: res.status, body: await res.json(), identity: res.headers.get('x-bsv-auth-identity-key') }
  }
</script>`

maybe('a browser page on another origin', () => {
  jest.setTimeout(90000)
  let browser, node, page, pageSrv
  const seen = []

  beforeAll(async () => {
    const pageApp = express()
    pageApp.get('/', (req, res) => res.type('html').send(PAGE))
    pageApp.get('/bsv.js', (req, res) => res.sendFile(sdkBundle()))
    pageSrv = await startServer(pageApp)
    // The page's origin differs from the node's by port.
    const pageOrigin = `http://localhost:${pageSrv.port}`
    node = await startNode({
      maxWaitMs: 25000,
      allowedOrigins: [pageOrigin],
      before: (app) => app.use((req, res, next) => {
        seen.push(`${req.method} ${req.path}`)
        next()
      })
    })
    const { chromium } = require('playwright-core')
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync']
    })
    page = await (await browser.newContext()).newPage()
    await page.goto(pageOrigin + '/')
  })

  afterAll(async () => {
    if (browser) await browser.close()
    if (node) await node.close()
    if (pageSrv) await pageSrv.close()
  })

  test('the handshake and a signed open succeed across origins', async () => {
    const body = { version: 1, requestId: 'ab'.repeat(16), service: 'ls_notes', query: {}, limits: { maxBytes: 65536, maxObservations: 100, waitMs: 0 } }
    const out = await page.evaluate(([base, capability, profile, b]) => window.authenticatedOpen(base, capability, profile, b),
      [node.origin, node.capability, PROFILE, body])
    expect(out.status).toBe(200)
    expect(out.identity).toBe(node.identity)
    expect(out.body.scope.provider).toBe(node.identity)
    // The browser preflighted the handshake and the lookup route, then sent both.
    expect(seen).toEqual(expect.arrayContaining(['OPTIONS /.well-known/auth', 'POST /.well-known/auth', 'OPTIONS /overlay/v1/lookup/open', 'POST /overlay/v1/lookup/open']))
  })
})
