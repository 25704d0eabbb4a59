'use strict'
// The conformance checker (js/check, bin/overlay-lookup-live.js) against this project's own
// node (a real Engine, sled store and router on loopback), public and BRC-103: every check
// passes. Then against the same node behind a proxy with one deliberate fault: exactly the
// check for that rule fails, with a line naming what was seen, and the exit code is 1.

const path = require('node:path')
const { execFile } = require('node:child_process')
const { runChecks, CHECKS } = require('../js/check')
const { startNode } = require('./helpers/node')
const { startFaultyProxy } = require('./helpers/faulty-proxy')

const BIN = path.join(__dirname, '..', 'bin', 'overlay-lookup-live.js')
const ORIGIN = 'https://app.example'
/** Short polls keep each run near a second; the long-poll rules are the same at any bound. */
const WAIT_MS = 400

const closers = []
afterEach(async () => {
  while (closers.length > 0) await closers.pop()()
})

async function node (options) {
  const n = await startNode(options)
  closers.push(() => n.close())
  await n.submit(await n.factory.createNotes(['one', 'two', 'three']))
  return n
}

/** Runs the command line; resolves {code, stdout, stderr}. */
function cli (args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 60000 }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr })
    })
  })
}

const named = (report, status) => report.results.filter(r => r.status === status).map(r => r.check)

test('public mode: the command line with --mutate and --json passes every check', async () => {
  let n = null
  // The --mutate command publishes a note through this route, as an operator's script would.
  const before = (app) => app.post('/test/mutate', async (req, res) => {
    await n.submit(await n.factory.createNotes([`mutation ${Date.now()}`]))
    res.end('ok')
  })
  n = await node({ authentication: 'none', allowedOrigins: [ORIGIN], before })
  const mutate = `"${process.execPath}" -e "fetch('${n.origin}/test/mutate', { method: 'POST' }).then(r => { if (!r.ok) process.exit(1) })"`
  const out = await cli(['check', n.origin, '--service', 'ls_notes', '--allow-insecure-http', '--origin', ORIGIN,
    '--wait-ms', String(WAIT_MS), '--mutate', mutate, '--json'])
  const report = JSON.parse(out.stdout)
  expect(named(report, 'fail')).toEqual([])
  // Public sessions are bearer capabilities: the two identity checks do not apply.
  expect(named(report, 'skip')).toEqual(['auth.required', 'session.principal-scoped'])
  expect(report.results.map(r => r.check).sort()).toEqual([...CHECKS].sort())
  expect(out.code).toBe(0)
})

test('BRC-103: a fresh random identity passes every check (function API, mutation by a function)', async () => {
  const n = await node({ authentication: 'brc103', allowedOrigins: [ORIGIN] })
  let mutations = 0
  const report = await runChecks({
    baseURL: n.origin,
    service: 'ls_notes',
    auth: 'brc103',
    allowInsecureHttp: true,
    origin: ORIGIN,
    waitMs: WAIT_MS,
    mutate: async () => {
      mutations++
      await n.submit(await n.factory.createNotes([`mutation ${mutations}`]))
    }
  })
  expect(report.results.filter(r => r.status !== 'ok')).toEqual([])
  expect(report.passed).toBe(CHECKS.length)
  expect(mutations).toBe(2)
  // Two identities talked to the node: the checker's and the one of session.principal-scoped.
  expect(n.router.auth.sessions.size).toBe(2)
})

test('text output: one line per check, skips say what they need, the last line counts, exit 0', async () => {
  const n = await node({ authentication: 'brc103' })
  const out = await cli(['check', n.origin + '/', '--service', 'ls_notes', '--auth', 'brc103', '--allow-insecure-http', '--wait-ms', String(WAIT_MS)])
  const lines = out.stdout.trim().split('\n')
  expect(lines).toHaveLength(CHECKS.length + 1)
  expect(lines.filter(l => l.startsWith('skip '))).toEqual([
    expect.stringMatching(/^skip cors\.preflight: .*pass --origin/),
    'skip mutation.delivered: needs --mutate <a command that commits a change the query selects>',
    'skip replay.live: needs --mutate',
    'skip long-poll.wake: needs --mutate'
  ])
  expect(lines.filter(l => !/^(ok|skip) /.test(l))).toEqual([`${CHECKS.length - 4} passed, 0 failed`])
  expect(out.code).toBe(0)
})

describe('a provider with one fault fails exactly the check for that rule', () => {
  const cases = [
    ['cache-control-on-errors', 'headers.cache-control', /^FAIL headers\.cache-control: .+ answered 4\d\d\) carried Cache-Control "no-cache" \(and \d+ more answers\); .*private, no-store.* \(BRC-193 §8\)$/],
    ['compression', 'headers.content-encoding', /^FAIL headers\.content-encoding: .+ came with Content-Encoding gzip.*; .*identity Content-Encoding.* \(BRC-193 §8\)$/],
    ['credentialed-wildcard-cors', 'cors.credentials', /^FAIL cors\.credentials: .+ paired Access-Control-Allow-Credentials: true with Access-Control-Allow-Origin \*.* \(BRC-193 §8\)$/],
    ['replay-drift', 'replay.byte-identical', /^FAIL replay\.byte-identical: reading a snapshot page twice: the repeat differs at groups\[0\]\.id; .* \(BRC-193 §4\)$/],
    ['forged-cursor-accepted', 'cursor.forged', /^FAIL cursor\.forged: a read whose cursor had one character changed was accepted \(200\); .* \(BRC-193 §2, §8\)$/],
    ['through-above-highwater', 'batch.watermarks', /^FAIL batch\.watermarks: .+ has through \d+ above highWater \d+; .* \(BRC-193 §3, §8\)$/]
  ]
  test.each(cases)('%s', async (fault, check, line) => {
    const proxy = await startFaultyProxy(fault)
    closers.push(() => proxy.close())
    const n = await node({ authentication: 'none', baseURL: proxy.origin })
    proxy.target = n.origin
    const report = await runChecks({ baseURL: proxy.origin, service: 'ls_notes', allowInsecureHttp: true, waitMs: WAIT_MS })
    expect(named(report, 'fail')).toEqual([check])
    expect(report.results.find(r => r.check === check).line).toMatch(line)
    expect(report.ok).toBe(false)
  })

  test('the command line prints the FAIL line and exits 1', async () => {
    const proxy = await startFaultyProxy('forged-cursor-accepted')
    closers.push(() => proxy.close())
    const n = await node({ authentication: 'none', baseURL: proxy.origin })
    proxy.target = n.origin
    const out = await cli(['check', proxy.origin, '--service', 'ls_notes', '--allow-insecure-http', '--wait-ms', String(WAIT_MS)])
    const lines = out.stdout.trim().split('\n')
    expect(lines.filter(l => l.startsWith('FAIL '))).toEqual([expect.stringMatching(/^FAIL cursor\.forged: /)])
    expect(lines[lines.length - 1]).toMatch(/^\d+ passed, 1 failed$/)
    expect(out.code).toBe(1)
  })
})

test('a base URL that is not the advertised one fails manifest.base-url', async () => {
  const n = await node({ authentication: 'none' })
  const other = n.origin.replace('127.0.0.1', 'localhost')
  const report = await runChecks({ baseURL: other, service: 'ls_notes', allowInsecureHttp: true, waitMs: WAIT_MS })
  expect(named(report, 'fail')).toEqual(['manifest.base-url', 'batch.scope'])
  expect(report.results.find(r => r.check === 'manifest.base-url').line)
    .toBe(`FAIL manifest.base-url: baseURL is "${n.origin}" but the checked base is ${other}; the manifest baseURL is the canonical form of the base URL clients use (BRC-194 §1, §6)`)
})

test('an unreachable provider fails manifest.fetch and skips the rest', async () => {
  const n = await node({ authentication: 'none' })
  const origin = n.origin
  await closers.pop()()
  const report = await runChecks({ baseURL: origin, service: 'ls_notes', allowInsecureHttp: true })
  expect(named(report, 'fail')).toEqual(['manifest.fetch'])
  expect(report.passed).toBe(0)
  expect(report.results).toHaveLength(CHECKS.length)
})

test('usage errors exit 2 without checking anything', async () => {
  const plain = await cli(['check', 'http://127.0.0.1:9/', '--service', 'ls_notes'])
  expect(plain.code).toBe(2)
  expect(plain.stderr).toMatch(/plain http: production needs https \(--allow-insecure-http/)
  const noService = await cli(['check', 'https://overlay.example'])
  expect(noService.code).toBe(2)
  expect(noService.stderr).toMatch(/--service/)
  const badQuery = await cli(['check', 'https://overlay.example', '--service', 'x', '--query', '{'])
  expect(badQuery.code).toBe(2)
})
