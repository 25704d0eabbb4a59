'use strict'
// The shipped example host (examples/host/server.js) and follower (examples/follower/follow.js)
// run as an operator runs them: separate Node processes over loopback, a real @bsv/overlay Engine
// on SQLite, the real live store. Also the configuration checks and the startup line of
// LiveLookup and its router, and the health and metrics routes scraped over HTTP.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const express = require('express')
const { PrivateKey } = require('@bsv/sdk')
const { LiveLookup, PROFILE, digest } = require('../js')
const { publish } = require('../examples/host/publish')

const ROOT = path.resolve(__dirname, '..')
const GENESIS = '00'.repeat(32)
const tmpDirs = []
const children = []

function tmp () {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'example-host-'))
  tmpDirs.push(d)
  return d
}

/** Starts a Node script; resolves with the child and the first stdout line matching `pattern`. */
function start (script, args, env, pattern) {
  const child = spawn(process.execPath, [path.join(ROOT, script), ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  child.stderr.on('data', (d) => { out += d })
  const exited = new Promise(resolve => child.once('exit', (code) => resolve(code)))
  const matched = new Promise((resolve, reject) => {
    child.stdout.on('data', () => { const m = pattern && pattern.exec(out); if (m) resolve(m) })
    exited.then((code) => reject(new Error(`${script} exited ${code} before printing ${pattern}:\n${out}`)))
  })
  return { child, exited, matched, output: () => out }
}

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM')
  await Promise.all(children.map(c => c.exitCode !== null || c.signalCode !== null ? null : new Promise(resolve => c.once('exit', resolve))))
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true })
})

/** Checks every sample line of a Prometheus text exposition; returns {name{labels}: value}. */
function parseMetrics (text) {
  const samples = {}
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$/.exec(line)
    if (!m) throw new Error('not a Prometheus sample line: ' + line)
    samples[m[1] + (m[2] || '')] = Number(m[3])
  }
  return samples
}

for (const auth of ['none', 'brc103']) {
  test(`example host (AUTH=${auth}): health, publish, a live follower, metrics`, async () => {
    const dataDir = tmp()
    const host = start('examples/host/server.js', [], { PORT: '0', DATA_DIR: dataDir, AUTH: auth }, /listening on (http:\/\/\S+)/)
    const url = (await host.matched)[1]
    // The startup line through the log hook: identity, mode, base URL, store, services.
    const startLine = JSON.parse(host.output().split('\n').find(l => l.includes('"op":"start"')))
    expect(startLine).toMatchObject({ mode: auth === 'none' ? 'public' : 'brc103', baseURL: url, store: path.join(dataDir, 'live'), services: ['ls_messages'], engineAttached: true })

    const health = await fetch(url + '/health')
    expect(health.status).toBe(200)
    expect(await health.json()).toMatchObject({ status: 'ok', services: ['ls_messages'], storeOpen: true, engineAttached: true })

    const follower = start('examples/follower/follow.js', [url], { AUTH: auth, FOLLOW_DB: path.join(dataDir, 'follower.db'), UNTIL: 'hello live' }, /connection: connected/)
    await follower.matched // its snapshot is drained and it polls: the message below arrives live
    const { txid } = await publish(url, 'hello live')
    expect(await follower.exited).toBe(0)
    expect(follower.output()).toContain(`message ${txid}.0 (live): hello live`)

    const metrics = await fetch(url + '/metrics')
    expect(metrics.status).toBe(200)
    expect(metrics.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
    const samples = parseMetrics(await metrics.text())
    expect(samples.overlay_live_up).toBe(1)
    expect(samples.overlay_live_engine_attached).toBe(1)
    expect(samples.overlay_live_rows).toBe(1)
    expect(samples.overlay_live_publication_lag_seconds_count).toBeGreaterThanOrEqual(1)
    expect(samples.overlay_live_commit_seconds_count).toBeGreaterThanOrEqual(1)
    expect(samples['overlay_live_requests_total{op="open",outcome="ok",status="200",code=""}']).toBeGreaterThanOrEqual(1)
    expect(samples['overlay_live_requests_total{op="read",outcome="ok",status="200",code=""}']).toBeGreaterThanOrEqual(1)
    host.child.kill('SIGTERM')
    expect(await host.exited).toBe(0)
  })
}

describe('configuration checks', () => {
  const open = (o) => LiveLookup.open({ dataDir: tmp(), create: true, chain: { network: 'test', genesisHash: GENESIS }, provider: 'https://overlay.example', compactionIntervalMs: 0, anchorPath: null, ...o })
  const companion = { rules: { id: 'urn:test:rules:1', parameters: {} }, index: () => ({ attributes: {} }), select: () => ({ where: { all: true }, order: 'admission' }) }
  const service = { outputAdmittedByTopic: async () => {}, lookup: async () => [] }

  test('a genesisHash that is not 64 lowercase hex is refused, naming the main chain\'s', async () => {
    await expect(open({ chain: { network: 'main', genesisHash: 'xyz' } })).rejects.toThrow(/genesisHash must be 64 lowercase hex characters.*000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f.*"xyz"/)
    await expect(open({ chain: { network: '', genesisHash: GENESIS } })).rejects.toThrow(/chain.network must be a non-empty string/)
  })

  test('a public-mode store reopened as a BRC-103 provider is refused; a new origin is logged', async () => {
    const dataDir = tmp()
    const live = await open({ dataDir, provider: 'http://127.0.0.1:1234' })
    await live.close()
    const key = PrivateKey.fromRandom()
    await expect(open({ dataDir, create: false, provider: key.toPublicKey().toString() }))
      .rejects.toThrow(/this store was created for a public-mode provider \(origin http:\/\/127\.0\.0\.1:1234\), not a BRC-103 provider \(identity key 0[23][0-9a-f]{64}\): open it in the mode it was created for, or use a new dataDir/)
    const entries = []
    const again = await open({ dataDir, create: false, provider: 'http://127.0.0.1:5678', log: (e) => entries.push(e) })
    await again.close()
    expect(entries).toContainEqual({ op: 'config', action: 'warning', reason: 'the provider changed from http://127.0.0.1:1234 to http://127.0.0.1:5678 since this store was last opened: scopes now name the new one' })
  })

  test('the router logs its startup line and warns when nothing is wrapped or no Engine is attached', async () => {
    const entries = []
    const live = await open({ provider: 'http://127.0.0.1:1', log: (e) => entries.push(e) })
    try {
      const key = PrivateKey.fromRandom()
      // A @bsv/sdk PrivateKey is accepted as well as hex.
      live.router({ baseURL: 'http://127.0.0.1:1', authentication: 'none', privateKey: key, allowLocalHttp: true })
      expect(entries[0]).toMatchObject({ op: 'start', provider: 'http://127.0.0.1:1', identity: key.toPublicKey().toString(), mode: 'public', services: [], engineAttached: false })
      expect(entries[1]).toMatchObject({ op: 'config', action: 'warning' })
      expect(entries[1].reason).toMatch(/serves no lookup service yet: wrap one with live.wrap/)
      live.wrap('ls_x', service, companion)
      entries.length = 0
      live.router({ baseURL: 'http://127.0.0.1:1', authentication: 'none', privateKey: key.toHex(), allowLocalHttp: true })
      expect(entries[1].reason).toMatch(/ls_x are wrapped but no Engine is attached: call await live.attach\(engine\)/)
      expect(() => live.router({ baseURL: 'http://127.0.0.1:1', authentication: 'none', allowLocalHttp: true }))
        .toThrow(/router needs privateKey: the provider identity key .* in public mode too/)
    } finally {
      await live.close()
    }
  })

  test('health is 503 with the problems while no Engine is attached', async () => {
    const app = express()
    const server = await new Promise(resolve => { const s = app.listen(0, '127.0.0.1', () => resolve(s)) })
    const origin = `http://127.0.0.1:${server.address().port}`
    const live = await open({ provider: origin })
    try {
      live.wrap('ls_x', service, companion)
      app.use(live.router({ baseURL: origin, authentication: 'none', privateKey: PrivateKey.fromRandom(), allowLocalHttp: true, health: '/health', metrics: '/metrics' }))
      const res = await fetch(origin + '/health')
      expect(res.status).toBe(503)
      const body = await res.json()
      expect(body).toMatchObject({ status: 'unavailable', services: ['ls_x'], storeOpen: true, engineAttached: false })
      expect(body.problems).toEqual(['no Engine is attached (await live.attach(engine))'])
      // A read the store refuses is counted by its error code.
      const manifest = await (await fetch(origin + '/overlay/v1/capabilities')).json()
      const read = await fetch(origin + '/overlay/v1/lookup/read', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'cache-control': 'no-store', 'x-bsv-overlay-capability': digest('capabilities', manifest.body), 'x-bsv-overlay-profile': PROFILE },
        body: '{}'
      })
      const refused = await read.json()
      const samples = parseMetrics(await (await fetch(origin + '/metrics')).text())
      expect(samples[`overlay_live_requests_total{op="read",outcome="error",status="${read.status}",code="${refused.error.code}"}`]).toBe(1)
      expect(samples.overlay_live_engine_attached).toBe(0)
      expect(samples.overlay_live_services).toBe(1)
    } finally {
      await new Promise(resolve => server.close(resolve))
      await live.close()
    }
  })
})
