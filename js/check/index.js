'use strict'
// The conformance checker: black-box checks of a BRC-193 (lookup-live-v1) provider over HTTP,
// for any implementation, not only this package's. `runChecks` is the function API (tests,
// the reverse-proxy test, scripts); bin/overlay-lookup-live.js is the command line. What each
// check requires is in js/check/rules.js; how it is judged is in js/check/run.js.

const { PrivateKey } = require('@bsv/sdk')
const { NativeWallet } = require('../auth/wallet')
const { Run } = require('./run')
const { RULES, needing } = require('./rules')

const DEFAULT_WAIT_MS = 2000
const DEFAULT_TIMEOUT_MS = 30000
/** Longest the --long checks wait for a session to expire. */
const DEFAULT_LONG_BUDGET_MS = 120000

/**
 * The canonical form of a base URL as BRC-194 §6 spells it for the common cases (lowercase
 * host, no default port, no terminal slash); https only, unless `allowInsecureHttp`.
 */
function canonicalBase (input, allowInsecureHttp) {
  let u
  try {
    u = new URL(input)
  } catch (_) {
    throw new TypeError(`not a URL: ${input}`)
  }
  if (u.protocol === 'http:' && !allowInsecureHttp) throw new TypeError('the base URL is plain http: production needs https (--allow-insecure-http for a local development transport)')
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new TypeError(`unsupported scheme ${u.protocol}`)
  if (u.username || u.password || u.search || u.hash) throw new TypeError('the base URL may not carry user information, a query or a fragment')
  return u.origin + u.pathname.replace(/\/+$/, '')
}

/** A wallet of a fresh random identity, its key held in the Rust core. */
function freshWallet () {
  return NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex())
}

/** Checks and normalizes the options of runChecks; throws a TypeError naming what is wrong. */
function normalize (options) {
  if (!options || typeof options !== 'object') throw new TypeError('runChecks needs options')
  const { baseURL, service, query = {}, auth = 'none', allowInsecureHttp = false, mutate, origin, waitMs = DEFAULT_WAIT_MS, timeoutMs = DEFAULT_TIMEOUT_MS, long = false, longBudgetMs = DEFAULT_LONG_BUDGET_MS, emptyQuery, onResult, only } = options
  if (typeof service !== 'string' || service.length === 0) throw new TypeError('a service name is needed (--service)')
  if (auth !== 'none' && auth !== 'brc103') throw new TypeError("auth must be 'none' or 'brc103'")
  if (mutate !== undefined && mutate !== null && typeof mutate !== 'string' && typeof mutate !== 'function') throw new TypeError('mutate must be a shell command or a function')
  if (typeof mutate === 'string' && mutate.trim() === '') throw new TypeError('the --mutate command is empty')
  if (origin !== undefined && origin !== null) {
    let o
    try { o = new URL(origin) } catch (_) { o = null }
    if (!o || o.origin !== origin) throw new TypeError(`--origin must be an exact origin such as https://app.example.com (got ${origin})`)
  }
  if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > 25000) throw new TypeError('waitMs must be an integer from 0 to 25000')
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new TypeError('timeoutMs must be a positive integer')
  if (typeof long !== 'boolean') throw new TypeError('long must be a boolean')
  if (!Number.isInteger(longBudgetMs) || longBudgetMs < 1) throw new TypeError('longBudgetMs must be a positive integer')
  for (const [name, q] of [['query', query], ['emptyQuery', emptyQuery]]) {
    if (name === 'emptyQuery' && q === undefined) continue
    let text
    try {
      text = JSON.stringify(q)
    } catch (_) {
      text = undefined
    }
    if (text === undefined) throw new TypeError(`the ${name} must be a JSON value`)
  }
  const selected = selection(only)
  return {
    selected,
    base: canonicalBase(baseURL, allowInsecureHttp),
    service,
    query,
    auth,
    wallet: auth === 'brc103' ? (options.wallet || freshWallet()) : null,
    otherWallet: auth === 'brc103' ? freshWallet() : null,
    mutate: mutate || null,
    origin: origin || null,
    waitMs,
    timeoutMs,
    long,
    longBudgetMs,
    emptyQuery,
    onResult: typeof onResult === 'function' ? (r) => { if (selected(r.check)) onResult(r) } : null
  }
}

/**
 * Runs every check against the provider at `options.baseURL` (see js/check/index.d.ts).
 * Resolves the report; rejects only for unusable options (a TypeError).
 */
/**
 * Which checks a report keeps: every one, or those `only` names (a check's name, or the start
 * of names, e.g. `long-poll`). Every check still runs (they share sessions and requests); the
 * others are left out of the report, its counts and its verdict.
 */
function selection (only) {
  if (only === undefined || only === null) return () => true
  if (!Array.isArray(only) || only.length === 0 || !only.every(x => typeof x === 'string' && x.length > 0)) {
    throw new TypeError('only must be a non-empty list of check names or name prefixes')
  }
  const names = Object.keys(RULES)
  for (const x of only) {
    if (!names.some(n => n.startsWith(x))) throw new TypeError(`--only ${x} names no check (the checks are listed in docs/operators.md)`)
  }
  return (name) => only.some(x => name.startsWith(x))
}

async function runChecks (options) {
  const o = normalize(options)
  const started = new Date()
  const results = (await new Run(o).run()).filter(r => o.selected(r.check))
  const count = (status) => results.filter(r => r.status === status).length
  return {
    baseURL: o.base,
    service: o.service,
    query: o.query,
    auth: o.auth,
    startedAt: started.toISOString(),
    durationMs: Date.now() - started.getTime(),
    passed: count('ok'),
    failed: count('fail'),
    skipped: count('skip'),
    ok: count('fail') === 0,
    results
  }
}

/** The report as text: one line per check, then `N passed, M failed, K skipped`. */
function formatReport (report) {
  return [...report.results.map(r => r.line), summaryLine(report)].join('\n') + '\n'
}

function summaryLine (report) {
  return `${report.passed} passed, ${report.failed} failed, ${report.skipped} skipped`
}

module.exports = { runChecks, formatReport, summaryLine, canonicalBase, CHECKS: Object.keys(RULES), RULES, needing }
