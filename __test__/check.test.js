'use strict'
// The conformance checker (js/check, bin/overlay-lookup-live.js) against this project's own
// node (a real Engine, sled store and router on loopback), public and BRC-103: every check
// passes. Then against the same node behind a proxy with one deliberate fault: the command
// line prints the FAIL line and exits 1. Every check against every fault: check-faults.test.js.

const path = require('node:path')
const { execFile } = require('node:child_process')
const { runChecks, CHECKS, needing } = require('../js/check')
const { startNode } = require('./helpers/node')
const { startFaultyNode } = require('./helpers/check-faults')

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
    '--wait-ms', String(WAIT_MS), '--mutate', mutate, '--empty-query', '{"author":"nobody"}', '--json'])
  const report = JSON.parse(out.stdout)
  expect(named(report, 'fail')).toEqual([])
  // Public sessions are bearer capabilities: the BRC-103 checks do not apply; --long is not given.
  expect(named(report, 'skip').sort()).toEqual([...needing('brc103'), ...needing('long')].sort())
  expect(report.results.map(r => r.check).sort()).toEqual([...CHECKS].sort())
  // Every result names the section of the rule it enforces; the counts add up.
  const { RULES } = require('../js/check')
  for (const r of report.results) expect(r.section).toBe(RULES[r.check][0])
  expect(report.passed + report.failed + report.skipped).toBe(CHECKS.length)
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
    emptyQuery: { author: 'nobody' },
    mutate: async () => {
      mutations++
      await n.submit(await n.factory.createNotes([`mutation ${mutations}`]))
    }
  })
  expect(named(report, 'fail')).toEqual([])
  expect(named(report, 'skip')).toEqual(needing('long'))
  expect(report.passed).toBe(CHECKS.length - needing('long').length)
  expect(mutations).toBe(2)
  // Two identities talked to the node: the checker's and the second principal's.
  expect(n.router.auth.sessions.size).toBe(2)
})

test('text output: one line per check, skips say what they need, the last line counts, exit 0', async () => {
  const n = await node({ authentication: 'brc103' })
  const out = await cli(['check', n.origin + '/', '--service', 'ls_notes', '--auth', 'brc103', '--allow-insecure-http', '--wait-ms', String(WAIT_MS)])
  const lines = out.stdout.trim().split('\n')
  expect(lines).toHaveLength(CHECKS.length + 1)
  const skips = lines.filter(l => l.startsWith('skip '))
  expect(skips).toContainEqual(expect.stringMatching(/^skip cors\.preflight: .*pass --origin/))
  for (const c of needing('mutate')) expect(skips).toContainEqual(expect.stringMatching(new RegExp(`^skip ${c.replace('.', '\\.')}: needs --mutate`)))
  for (const c of needing('long')) expect(skips).toContain(`skip ${c}: runs long: needs --long (waits for a session to expire)`)
  expect(skips).toContain('skip snapshot.empty: needs --empty-query <a query that selects nothing>')
  expect(skips).toHaveLength(1 + needing('mutate').length + needing('empty-query').length + needing('long').length)
  expect(lines.filter(l => !/^(ok|skip) /.test(l))).toEqual([`${CHECKS.length - skips.length} passed, 0 failed, ${skips.length} skipped`])
  expect(out.code).toBe(0)
})

test('a provider with a fault: the command line prints the FAIL line and exits 1', async () => {
  const n = await startFaultyNode('none')
  closers.push(() => n.close())
  n.use('a forged cursor is read as the last one')
  const out = await cli(['check', n.origin, '--service', 'ls_notes', '--allow-insecure-http', '--wait-ms', String(WAIT_MS)])
  const lines = out.stdout.trim().split('\n')
  expect(lines.filter(l => l.startsWith('FAIL '))).toEqual([expect.stringMatching(/^FAIL cursor\.forged: a read whose cursor had one character changed was accepted \(200\); .* \(BRC-193 §2, §8\)$/)])
  expect(lines[lines.length - 1]).toMatch(/^\d+ passed, 1 failed, \d+ skipped$/)
  expect(out.code).toBe(1)
})

test('--only keeps the named checks (names or their start) in the lines, the counts and the exit code', async () => {
  const n = await startFaultyNode('none')
  closers.push(() => n.close())
  n.use('a forged cursor is read as the last one')
  const base = ['check', n.origin, '--service', 'ls_notes', '--allow-insecure-http', '--wait-ms', String(WAIT_MS)]
  const other = await cli([...base, '--only', 'long-poll,limits.clamp'])
  const lines = other.stdout.trim().split('\n')
  const shown = lines.slice(0, -1).map(l => l.split(/[ :]/)[1])
  expect(shown.length).toBeGreaterThan(1)
  for (const c of shown) expect(c === 'limits.clamp' || c.startsWith('long-poll')).toBe(true)
  expect(lines[lines.length - 1]).toBe(`${lines.filter(l => l.startsWith('ok ')).length} passed, 0 failed, ${lines.filter(l => l.startsWith('skip ')).length} skipped`)
  expect(other.code).toBe(0)
  const faulty = await cli([...base, '--only', 'cursor.forged'])
  expect(faulty.stdout.trim().split('\n')).toEqual([expect.stringMatching(/^FAIL cursor\.forged: /), '0 passed, 1 failed, 0 skipped'])
  expect(faulty.code).toBe(1)
  const unknown = await cli([...base, '--only', 'no-such-check'])
  expect(unknown.code).toBe(2)
  expect(unknown.stderr).toMatch(/--only no-such-check names no check/)
})

test('a base URL that is not the advertised one fails manifest.base-url', async () => {
  const n = await node({ authentication: 'none' })
  const other = n.origin.replace('127.0.0.1', 'localhost')
  const report = await runChecks({ baseURL: other, service: 'ls_notes', allowInsecureHttp: true, waitMs: WAIT_MS })
  expect(named(report, 'fail')).toEqual(['manifest.base-url', 'scope.provider'])
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

test('--help names what each optional check needs, and that --mutate runs under /bin/sh', async () => {
  const out = await cli(['check', '--help'])
  expect(out.code).toBe(0)
  expect(out.stdout).toMatch(/--mutate '<command>' +a command .* run with \/bin\/sh -c/)
  expect(out.stdout).toMatch(/N passed, M failed, K skipped/)
  const flat = out.stdout.replace(/\s+/g, ' ')
  for (const [what, heading] of [['mutate', '--mutate:'], ['empty-query', '--empty-query:'], ['second-principal', 'a second principal'], ['long', '--long (runs long']]) {
    expect(flat).toContain(heading)
    for (const c of needing(what)) expect(flat).toContain(c)
  }
})

test('a failing --mutate command is reported with its error message, not its stack frames', async () => {
  const n = await node({ authentication: 'none' })
  const script = "function deep () { throw new Error('the mutation endpoint refused: 403') } deep()"
  const report = await runChecks({ baseURL: n.origin, service: 'ls_notes', allowInsecureHttp: true, waitMs: WAIT_MS, mutate: `"${process.execPath}" -e "${script}"` })
  const line = report.results.find(r => r.check === 'mutation.delivered').line
  expect(line).toMatch(/^FAIL mutation\.delivered: the --mutate command \(run with \/bin\/sh -c\) failed \(exit 1\): Error: the mutation endpoint refused: 403; /)
  expect(line).not.toMatch(/ at /)
})

test('docs/operators.md lists every check with the section its rule names', () => {
  const { RULES } = require('../js/check')
  const docs = require('node:fs').readFileSync(path.join(__dirname, '..', 'docs', 'operators.md'), 'utf8')
  const rows = new Map([...docs.matchAll(/^\| `([a-z0-9.-]+)` \| (BRC-[^|]+?) \| ([^|]*)\|$/gm)].map(m => [m[1], [m[2], m[3].trim()]]))
  expect([...rows.keys()]).toEqual(Object.keys(RULES))
  for (const [check, [section, , needs]] of Object.entries(RULES)) expect(rows.get(check)).toEqual([section, (needs || []).join(', ')])
})
