'use strict'
// `DEMO_NODES=2` in a real browser (Debian's chromium driven by playwright-core, as in
// demo.browser.test.js): two demo nodes synchronized by GASP. One page follows node B only (the
// default page served by B); another, served by A with `?sources=both`, follows both nodes with
// one live session each and shows each source's state. A note published on A shows on the page
// that follows B only once B has synced it, delivered by B's live session.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { describeInChromium, launchChromium } = require('./helpers/browser')
const { startCluster } = require('../demo/server')

const ARTIFACTS = path.join(__dirname, 'artifacts')
const WAIT = { timeout: 20000 }

describeInChromium(__filename, 'the demo page with two nodes, in chromium', () => {
  jest.setTimeout(90000)
  let browser, cluster, dataDir
  const log = []
  const contexts = []

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-cluster-browser-'))
    cluster = await startCluster({ nodes: 2, port: 0, dataDir, syncMs: 300, log: (e) => log.push(e) })
    browser = await launchChromium()
  })

  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => {})
    if (browser) await browser.close()
    if (cluster) await cluster.close()
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true })
  })

  async function openPage (url) {
    const context = await browser.newContext({ viewport: { width: 1100, height: 1000 } })
    contexts.push(context)
    const page = await context.newPage()
    const problems = []
    page.on('pageerror', (e) => problems.push(e.message))
    await page.goto(url)
    return { context, page, problems }
  }

  const state = (page) => page.evaluate(() => window.demoState())

  test('a note published on A reaches the page following B only, as B\'s live group; the two-source page shows both', async () => {
    const [a, b] = cluster.nodes
    const onlyB = await openPage(`${b.url}/?pause=0`)
    const both = await openPage(`${a.url}/?pause=0&sources=both`)
    // Both sessions of the two-source page are live, one per node, each with its own provider.
    await both.page.waitForFunction(() => {
      const s = window.demoState()
      return s.sources.length === 2 && s.sources.every(x => x.connection === 'live' && x.snapshotComplete)
    }, null, WAIT)
    await onlyB.page.waitForFunction(() => window.demoState().connection === 'live', null, WAIT)
    const two = await state(both.page)
    expect(two.sources.map(s => s.origin)).toEqual([a.url, b.url])
    expect(two.sources.map(s => s.provider)).toEqual([a.identity, b.identity])
    expect(two.sources[0].epoch).not.toBe(two.sources[1].epoch)
    expect(await both.page.locator('#sources li').count()).toBe(2)
    expect(await onlyB.page.locator('#sources-section').isHidden()).toBe(true)
    const before = await state(onlyB.page)
    expect(before.sources).toHaveLength(1)
    expect(before.notes).toEqual([])

    // Published from the page served by A: it goes to A's /submit, and A only.
    await both.page.fill('#note-text', 'published on A')
    await both.page.click('#publish-button')
    await both.page.waitForFunction(() => /^submitted /.test(document.getElementById('publish-status').textContent), null, WAIT)

    // The page following B only shows it once B has synced it, from B's live session.
    await onlyB.page.locator('#notes li:not(.stale)', { hasText: 'published on A' }).waitFor(WAIT)
    const after = await state(onlyB.page)
    expect(after.sources[0].provider).toBe(b.identity)
    expect(after.phase).toBe('live')
    expect(after.generation).toBe(1)
    expect(BigInt(after.through)).toBeGreaterThan(BigInt(before.through))
    await onlyB.page.locator('#events li', { hasText: '+ "published on A"' }).waitFor(WAIT)
    // B's feed delivered it to that page's principal in a live read (the host's request log).
    expect(log.some(e => e.principal === after.identity && e.op === 'read' && e.status === 200)).toBe(true)

    // The two-source page holds it in both memberships: A's directly, B's after the sync; the
    // union lists it once.
    await both.page.waitForFunction(() => window.demoState().sources.every(x => x.notes.includes('published on A')), null, WAIT)
    const union = await state(both.page)
    expect(union.notes).toEqual(['published on A'])
    expect(await both.page.locator('#notes li', { hasText: 'published on A' }).count()).toBe(1)
    expect(await both.page.locator('#sources li[data-stale="false"]').count()).toBe(2)

    fs.mkdirSync(ARTIFACTS, { recursive: true })
    await both.page.screenshot({ path: path.join(ARTIFACTS, 'demo-two-sources.png'), fullPage: true })
    expect(onlyB.problems).toEqual([])
    expect(both.problems).toEqual([])
  })
})
