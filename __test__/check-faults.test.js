'use strict'
// The conformance checker's fault matrix: for every fault in __test__/helpers/check-faults.js
// (a real node made faulty in one way, or a proxy in front of it doing one wrong thing), the
// checker fails exactly the checks that fault names, and passes every other check. The same
// node with no fault passes every check. Every check fails under at least one fault. Public
// and BRC-103 modes each run on one node, the faults installed one after another; the faults
// of session expiry run with --long against a node whose sessions last a few seconds.

const { runChecks, CHECKS, needing } = require('../js/check')
const { FAULTS, PUBLIC_ONLY, startFaultyNode, SERVICE, EMPTY_QUERY } = require('./helpers/check-faults')

const ORIGIN = 'https://app.example'
/** Short polls keep each run near a second; the long-poll rules are the same at any bound. */
const WAIT_MS = 200
/** Sessions of the expiry node: long enough for one run's other checks. */
const SHORT_SESSION = { sessionSeconds: 4, replaySeconds: 4 }

const failed = (report) => report.results.filter(r => r.status === 'fail').map(r => r.check).sort()
const skipped = (report) => report.results.filter(r => r.status === 'skip').map(r => r.check).sort()
const modesOf = (f) => f.modes || ['none', 'brc103']
const checksOf = (f, auth) => [...(Array.isArray(f.checks) ? f.checks : f.checks[auth])].sort()

function run (n, auth, f, extra = {}) {
  return runChecks({
    baseURL: n.origin,
    service: SERVICE,
    auth,
    allowInsecureHttp: true,
    origin: ORIGIN,
    waitMs: WAIT_MS,
    mutate: () => n.mutate(),
    emptyQuery: EMPTY_QUERY,
    ...extra,
    ...(f && f.run ? f.run(n) : {})
  })
}

/** The checks a run skips on a correct node: those for BRC-103 in public mode, and `more`. */
function expectedSkips (auth, more = []) {
  const s = new Set(more)
  if (auth === 'none') for (const c of needing('brc103')) s.add(c)
  return [...s].sort()
}

/** Runs the checker under fault `name` and judges the failing set and the FAIL lines. */
async function judge (n, auth, name, extra) {
  const f = FAULTS[name]
  n.use(name)
  let report
  try {
    report = await run(n, auth, f, extra)
  } finally {
    n.use(null)
  }
  const lines = report.results.filter(r => r.status === 'fail').map(r => r.line)
  expect(failed(report)).toEqual(checksOf(f, auth))
  for (const line of lines) expect(line).toMatch(/^FAIL [a-z0-9.-]+: .+; .+ \(BRC-19[0-9] §[0-9].*\)$/)
  expect(report.ok).toBe(false)
}

test('every check is failed by some fault, in each mode it applies to; every fault names known checks', () => {
  for (const auth of ['none', 'brc103']) {
    const covered = new Set(Object.values(FAULTS).filter(f => modesOf(f).includes(auth)).flatMap(f => checksOf(f, auth)))
    const applicable = CHECKS.filter(c => auth === 'brc103' || !needing('brc103').includes(c))
    expect({ auth, uncovered: applicable.filter(c => !covered.has(c)) }).toEqual({ auth, uncovered: auth === 'none' ? [] : PUBLIC_ONLY })
    expect([...covered].filter(c => !CHECKS.includes(c))).toEqual([])
  }
})

describe.each(['none', 'brc103'])('auth %s', (auth) => {
  let n = null
  beforeAll(async () => { n = await startFaultyNode(auth, { origins: [ORIGIN] }) })
  afterAll(async () => { if (n) await n.close() })

  test('no fault: every check passes (those for --long skip)', async () => {
    n.use(null)
    const report = await run(n, auth)
    expect(failed(report)).toEqual([])
    expect(skipped(report)).toEqual(expectedSkips(auth, needing('long')))
  })

  const faults = Object.keys(FAULTS).filter(name => modesOf(FAULTS[name]).includes(auth) && !FAULTS[name].long)
  test.each(faults)('%s', (name) => judge(n, auth, name))
})

describe.each(['none', 'brc103'])('session expiry, auth %s (--long)', (auth) => {
  let n = null
  beforeAll(async () => { n = await startFaultyNode(auth, { origins: [ORIGIN], live: SHORT_SESSION }) })
  afterAll(async () => { if (n) await n.close() })
  const long = { long: true, longBudgetMs: 30000 }

  test('no fault: every check passes, the long ones too', async () => {
    const report = await run(n, auth, null, long)
    expect(failed(report)).toEqual([])
    expect(skipped(report)).toEqual(expectedSkips(auth))
  })

  const faults = Object.keys(FAULTS).filter(name => modesOf(FAULTS[name]).includes(auth) && FAULTS[name].long)
  test.each(faults)('%s', (name) => judge(n, auth, name, long))
})
