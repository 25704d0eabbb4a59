'use strict'
// The demo end to end in a real browser: the demo host started in-process (real Engine on SQLite,
// real sled store, real BRC-103 middleware) and Debian's chromium driven by playwright-core. Two
// browser contexts are two principals (each page keeps its own key in its own localStorage).
// Covered: progressive snapshot, a publish showing on the other page without reload, an offline
// page catching up from its stored cursor, a withdraw (a real spend), a server restart with the
// pages resuming their sessions, a reload resuming from localStorage without a new open, and a
// lost live store (new epoch) answered by reset-required and a new generation on each page;
// then notes addressed to a recipient: two identities see different catalogues from one node.
// A screenshot is kept under __test__/artifacts/ (git-ignored).
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { describeInChromium, launchChromium } = require('./helpers/browser')
const { PrivateKey } = require('@bsv/sdk')
const { startDemo } = require('../demo/server')
const { publishNote } = require('../demo/publish')

const ARTIFACTS = path.join(__dirname, 'artifacts')
const WAIT = { timeout: 20000 }
const SEEDED = ['seed one', 'seed two', 'seed three', 'seed four', 'seed five']

describeInChromium(__filename, 'the demo page in chromium', () => {
  jest.setTimeout(90000)
  let browser, demo, dataDir
  const log = []
  const contexts = []

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-browser-'))
    demo = await startDemo({ port: 0, dataDir, log: (e) => log.push(e) })
    browser = await launchChromium()
  })

  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => {})
    if (browser) await browser.close()
    if (demo) await demo.close()
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true })
  })

  async function openPage () {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } })
    contexts.push(context)
    const page = await context.newPage()
    const problems = []
    page.on('pageerror', (e) => problems.push(e.message))
    // pause=0: no cosmetic delay between snapshot pages; page=2 keeps snapshot pages small.
    await page.goto(`${demo.url}/?page=2&pause=0`)
    // Survives only as long as the page is not reloaded.
    await page.evaluate(() => { window.notReloaded = true })
    return { context, page, problems }
  }

  const state = (page) => page.evaluate(() => window.demoState())
  const noteItem = (page, text) => page.locator('#notes li:not(.stale)', { hasText: text })

  async function publishFrom (page, text, to = '') {
    await page.fill('#note-text', text)
    await page.fill('#note-to', to)
    await page.click('#publish-button')
    await page.waitForFunction(() => /^submitted /.test(document.getElementById('publish-status').textContent), null, WAIT)
  }

  async function liveAndShowing (page, texts) {
    await page.waitForFunction((want) => {
      const s = window.demoState()
      return s.connection === 'live' && s.snapshotComplete && want.every(t => s.notes.includes(t))
    }, texts, WAIT)
  }

  test('two principals see each other\'s changes live; offline catch-up, withdraw, restart, reload, lost store', async () => {
    // Seed the overlay before any page opens, through the same path as `npm run demo:publish`.
    const cliKey = PrivateKey.fromRandom()
    for (const text of SEEDED) await publishNote(demo.url, cliKey, text)

    const a = await openPage()
    const b = await openPage()
    await liveAndShowing(a.page, SEEDED)
    await liveAndShowing(b.page, SEEDED)
    const sa = await state(a.page)
    const sb = await state(b.page)
    expect(sa.identity).not.toBe(sb.identity)
    expect(sa.notes).toHaveLength(SEEDED.length)
    // Progressive fill: five notes at two per page took the open plus at least two snapshot reads.
    const callsOf = (identity, op) => log.filter(e => e.principal === identity && e.op === op && e.status === 200).length
    expect(callsOf(sa.identity, 'open')).toBe(1)
    expect(callsOf(sa.identity, 'read')).toBeGreaterThanOrEqual(2)

    // A publishes; B shows it without reload.
    await publishFrom(a.page, 'hello from A')
    await noteItem(b.page, 'hello from A').waitFor(WAIT)
    await noteItem(a.page, 'hello from A').waitFor(WAIT)
    expect(await a.page.locator('#notes li.mine', { hasText: 'hello from A' }).count()).toBe(1)
    expect(await b.page.locator('#notes li.mine', { hasText: 'hello from A' }).count()).toBe(0)

    // B goes offline; A publishes; B cannot know yet; B comes back and catches up from its cursor.
    await b.context.setOffline(true)
    await b.page.waitForFunction(() => window.demoState().connection === 'offline', null, WAIT)
    await publishFrom(a.page, 'while B was offline')
    await noteItem(a.page, 'while B was offline').waitFor(WAIT)
    expect((await state(b.page)).notes).not.toContain('while B was offline')
    expect((await state(b.page)).stale).toBe(true)
    await b.context.setOffline(false)
    await noteItem(b.page, 'while B was offline').waitFor(WAIT)
    await liveAndShowing(b.page, ['while B was offline'])
    expect((await state(b.page)).stale).toBe(false)

    // A withdraws its own note (a real spend through /submit); B sees it leave.
    await a.page.locator('#notes li', { hasText: 'hello from A' }).locator('button[data-withdraw]').click()
    await noteItem(b.page, 'hello from A').waitFor({ state: 'detached', ...WAIT })
    await noteItem(a.page, 'hello from A').waitFor({ state: 'detached', ...WAIT })

    // Restart the host on the same port and data directory; both pages resume their sessions.
    const port = demo.port
    await demo.close()
    // While the host is down the panel says reconnecting and stale throughout: a retry must not
    // show "live" / "no" for the time its doomed request takes. Every value the panel's
    // connection, stale and detail fields take is recorded over two retries (about +1 s, +3 s).
    await a.page.waitForFunction(() => window.demoState().connection === 'reconnecting', null, WAIT)
    await a.page.evaluate(() => {
      window.panelSeen = []
      for (const id of ['state-connection', 'state-stale', 'state-detail']) {
        new MutationObserver((records) => {
          for (const r of records) for (const n of r.addedNodes) window.panelSeen.push([id, n.textContent])
        }).observe(document.getElementById(id), { childList: true })
      }
    })
    await a.page.waitForTimeout(4500)
    const seen = await a.page.evaluate(() => window.panelSeen)
    const values = (id) => seen.filter(([field]) => field === id).map(([, v]) => v)
    expect(new Set(values('state-connection'))).toEqual(new Set(['reconnecting']))
    expect(values('state-stale').every(v => v.startsWith('yes'))).toBe(true)
    expect(new Set(values('state-detail').filter(v => /retrying in/.test(v))).size).toBeGreaterThanOrEqual(2)
    demo = await startDemo({ port, dataDir, log: (e) => log.push(e) })
    await publishNote(demo.url, cliKey, 'after the restart')
    await liveAndShowing(a.page, ['after the restart'])
    await liveAndShowing(b.page, ['after the restart'])
    for (const page of [a.page, b.page]) {
      const s = await state(page)
      // Same generation: the stored cursor resumed; no reset, no second snapshot.
      expect(s.generation).toBe(1)
      expect(s.notes.sort()).toEqual([...SEEDED, 'while B was offline', 'after the restart'].sort())
      expect(await page.evaluate(() => window.notReloaded)).toBe(true)
    }

    // A reload resumes from localStorage: same notes at once, no new open.
    const opensBefore = callsOf(sb.identity, 'open')
    await b.page.reload()
    await liveAndShowing(b.page, ['after the restart', 'while B was offline'])
    expect((await state(b.page)).generation).toBe(1)
    expect(callsOf(sb.identity, 'open')).toBe(opensBefore)
    await publishFrom(a.page, 'after the reload')
    await noteItem(b.page, 'after the reload').waitFor(WAIT)

    // The live store is lost (the Engine's SQLite is kept): a new store starts a new epoch, filled
    // from Engine storage. Old cursors get reset-required; each page opens generation 2, keeps the
    // old notes visible as stale meanwhile, and ends with the same collection plus the new note.
    await demo.close()
    fs.rmSync(path.join(dataDir, 'live'), { recursive: true, force: true })
    demo = await startDemo({ port, dataDir, log: (e) => log.push(e) })
    expect(demo.createdStore).toBe(true)
    await publishNote(demo.url, cliKey, 'after a lost live store')
    const expected = [...SEEDED, 'while B was offline', 'after the restart', 'after the reload', 'after a lost live store']
    for (const page of [a.page, b.page]) {
      await page.waitForFunction(() => window.demoState().generation === 2, null, WAIT)
      await liveAndShowing(page, ['after a lost live store'])
      const s = await state(page)
      expect(s.stale).toBe(false)
      expect(s.notes.sort()).toEqual([...expected].sort())
      expect(await page.locator('#notes li.stale').count()).toBe(0)
    }

    fs.mkdirSync(ARTIFACTS, { recursive: true })
    await b.page.screenshot({ path: path.join(ARTIFACTS, 'demo-page-b.png'), fullPage: true })
    await a.page.screenshot({ path: path.join(ARTIFACTS, 'demo-page-a.png'), fullPage: true })
    expect(a.problems).toEqual([])
    expect(b.problems).toEqual([])
  })

  test('notes addressed to a recipient: author and recipient see them, another identity does not', async () => {
    const cliKey = PrivateKey.fromRandom()
    const cliIdentity = cliKey.toPublicKey().toString()
    const x = await openPage()
    const y = await openPage()
    await liveAndShowing(x.page, [])
    await liveAndShowing(y.page, [])
    const ix = (await state(x.page)).identity
    const iy = (await state(y.page)).identity
    // From the command line to X only; from X's form to Y; from Y's form to the CLI key.
    await publishNote(demo.url, cliKey, 'for X only', { to: ix })
    await publishFrom(x.page, 'from X to Y', iy)
    await publishFrom(y.page, 'from Y to the CLI', cliIdentity)
    await publishNote(demo.url, cliKey, 'for everyone, late')
    await liveAndShowing(x.page, ['for X only', 'from X to Y', 'for everyone, late'])
    await liveAndShowing(y.page, ['from X to Y', 'from Y to the CLI', 'for everyone, late'])
    const sx = await state(x.page)
    const sy = await state(y.page)
    expect(sx.notes).not.toContain('from Y to the CLI')
    expect(sy.notes).not.toContain('for X only')
    // One node, two catalogues: the public notes are common, the addressed ones are not.
    const common = sx.notes.filter(t => sy.notes.includes(t))
    expect(common).toEqual(expect.arrayContaining(['from X to Y', 'for everyone, late']))
    expect(sx.notes.length - common.length).toBe(1)
    expect(sy.notes.length - common.length).toBe(1)
    expect(await x.page.locator('#notes li.addressed', { hasText: 'from X to Y' }).count()).toBe(1)
    await x.page.screenshot({ path: path.join(ARTIFACTS, 'demo-page-addressed.png'), fullPage: true })
    expect(x.problems).toEqual([])
    expect(y.problems).toEqual([])
  })
})
