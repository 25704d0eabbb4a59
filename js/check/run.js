'use strict'
// The checks of one conformance run against a BRC-193 provider (js/check/index.js starts it).
// Black box: everything is judged from what the provider answers over HTTP. A check passes,
// fails with what was seen, or is skipped with the reason; checks that depend on an earlier
// step are skipped, not failed, when that step could not run.

const crypto = require('node:crypto')
const { execFile } = require('node:child_process')
const native = require('../common/native')
const wire = require('../common/wire')
const { CheckTransport } = require('./transport')
const { ruleOf } = require('./rules')
const { U32_MAX, u64, isU32, snippet, errorOf, describe, batchProblem, firstDifference, replayDifference, forge, tokens, envelopeProblem } = require('./judge')

const { PROFILE, PROFILE_LIMITS } = wire
/** Profile maxima (BRC-193 §2). */
const MAX = { maxBytes: PROFILE_LIMITS.maxResponseBytes, maxObservations: PROFILE_LIMITS.maxObservations, waitMs: PROFILE_LIMITS.maxWaitMs }
const MANIFEST_MAX = 256 * 1024
const LIMITED_MAX = PROFILE_LIMITS.maxErrorBodyBytes
const LIMIT_KINDS = new Set(['envelope', 'group', 'permanent-group'])
/** An origin no provider can have configured: granting it credentials grants everyone. */
const PROBE_ORIGIN = 'https://overlay-lookup-live-check.invalid'
const VARY_NAMES = ['authorization', 'x-bsv-auth-identity-key', 'x-bsv-overlay-capability', 'x-bsv-overlay-profile']
const SELECTION_HEADERS = ['x-bsv-overlay-capability', 'x-bsv-overlay-profile']
/** The BRC-104 headers a browser must be allowed to send and to read. */
const AUTH_HEADERS = ['x-bsv-auth-version', 'x-bsv-auth-identity-key', 'x-bsv-auth-nonce', 'x-bsv-auth-your-nonce', 'x-bsv-auth-signature', 'x-bsv-auth-request-id']
/** Time allowed for one --mutate command. */
const MUTATE_TIMEOUT_MS = 60000
/** Longest wait the checker spends for a mutation's group to arrive. */
const DELIVERY_BUDGET_MS = 30000
/** Pages the checker reads to finish a snapshot before it gives up on the boundary checks. */
const MAX_PAGES = 1000

/** A check's failure: `seen` says what the provider did. */
class Finding extends Error {
  constructor (seen) {
    super(seen)
    this.seen = seen
  }
}

function fail (seen) {
  throw new Finding(seen)
}

const skip = (reason) => ({ skip: reason })

/** Limits of the probes: a page allowance every provider must offer, one observation, no wait. */
const SMALL = { maxBytes: 65536, maxObservations: 1, waitMs: 0 }

function requestId () {
  return crypto.randomBytes(16).toString('hex') // 128 random bits (BRC-193 §2)
}

/** Runs a --mutate step: a shell command, or (function API) an async function. Resolves null or the failure. */
async function runMutation (mutate) {
  if (typeof mutate === 'function') {
    try {
      await mutate()
      return null
    } catch (e) {
      return `the mutate function threw: ${e && e.message}`
    }
  }
  return new Promise((resolve) => {
    execFile('/bin/sh', ['-c', mutate], { timeout: MUTATE_TIMEOUT_MS, maxBuffer: 1024 * 1024 }, (err, _stdout, stderr) => {
      if (!err) return resolve(null)
      const tail = String(stderr || '').trim().split('\n').slice(-2).join(' | ')
      resolve(`the --mutate command failed (${err.killed ? 'timed out' : 'exit ' + err.code})${tail ? ': ' + tail : ''}`)
    })
  })
}

const sleep = (ms) => new Promise(resolve => setTimeout(resolve, ms))

class Run {
  /**
   * @param {object} o normalized options (js/check/index.js): base, service, query, auth,
   *   wallet(s), mutate, origin, waitMs, timeoutMs, onResult
   */
  constructor (o) {
    this.o = o
    this.results = []
    this.t = new CheckTransport({ baseURL: o.base, auth: o.auth, wallet: o.wallet, timeoutMs: o.timeoutMs })
    this.transports = [this.t]
    this.batches = [] // every well-formed 200 batch: {answer, batch, limits}
    this.chain = [] // the main session's batches in cursor order
    this.capability = null
    this.offer = null
  }

  record (result) {
    const r = { check: result.check, status: result.status }
    if (result.status === 'ok') r.line = `ok ${r.check}`
    if (result.status === 'skip') {
      r.reason = result.reason
      r.line = `skip ${r.check}: ${r.reason}`
    }
    if (result.status === 'fail') {
      const rule = ruleOf(r.check)
      r.seen = result.seen
      r.rule = `${rule.requires} (${rule.section})`
      r.line = `FAIL ${r.check}: ${r.seen}; ${r.rule}`
    }
    this.results.push(r)
    if (this.o.onResult) this.o.onResult(r)
  }

  /** Runs one check: `fn` returns nothing (ok) or skip(reason), or throws a Finding. */
  async check (name, fn) {
    ruleOf(name) // every check has a stated rule
    try {
      const out = await fn()
      if (out && out.skip) this.record({ check: name, status: 'skip', reason: out.skip })
      else this.record({ check: name, status: 'ok' })
    } catch (e) {
      const seen = e instanceof Finding ? e.seen : `the check could not finish: ${e && e.message}`
      this.record({ check: name, status: 'fail', seen })
    }
  }

  skipAll (names, reason) {
    for (const check of names) this.record({ check, status: 'skip', reason })
  }

  // --- requests -------------------------------------------------------------------------

  /** The headers of a lookup request in the checked mode. */
  selection () {
    const h = { 'content-type': 'application/json', 'x-bsv-overlay-capability': this.capability, 'x-bsv-overlay-profile': PROFILE }
    if (this.o.auth === 'none') {
      h['cache-control'] = 'no-store'
      // What browsers send: a compressing proxy shows itself on the answers.
      h['accept-encoding'] = 'gzip, deflate, br'
    }
    return h
  }

  /** Headers of a plain (unauthenticated) lookup request, whatever the mode. */
  plainSelection (extra = {}) {
    return { 'content-type': 'application/json', 'cache-control': 'no-store', 'accept-encoding': 'gzip, deflate, br', 'x-bsv-overlay-capability': this.capability, 'x-bsv-overlay-profile': PROFILE, ...extra }
  }

  /**
   * A lookup request in the checked mode. Resolves the Answer, also one that failed BRC-104
   * verification (its `signed` is then false). `limits` names the limits a string body asks for.
   */
  async lookup (label, op, payload, { headers = {}, waitMs = 0, transport = this.t, limits } = {}) {
    const body = typeof payload === 'string' ? payload : JSON.stringify(payload)
    let answer
    try {
      answer = await transport.send(label, { suffix: `/overlay/v1/lookup/${op}`, op, headers: { ...this.selection(), ...headers }, body, waitMs })
    } catch (e) {
      if (!e.answer) throw e
      answer = e.answer
    }
    if (answer.status === 200 && (op === 'open' || op === 'read') && batchProblem(answer.json) === null) {
      this.batches.push({ answer, batch: answer.json, limits: limits || (payload && payload.limits) || null })
    }
    return answer
  }

  /** The batch of a 200 answer; a Finding naming `what` otherwise. */
  expectBatch (answer, what) {
    if (answer.status !== 200) fail(`${what} answered ${describe(answer)}`)
    if (this.o.auth === 'brc103' && answer.signed === false) fail(`${what} answered 200 without a verifiable BRC-104 signature`)
    const problem = batchProblem(answer.json)
    if (problem) fail(`${what} answered 200 but not with a Batch: ${problem}`)
    return answer.json
  }

  /** A Finding unless `answer` is an error with one of `codes`. */
  expectError (answer, what, codes) {
    if (answer.status >= 200 && answer.status < 300) fail(`${what} was accepted (${describe(answer)})`)
    const e = errorOf(answer)
    if (e ? !codes.includes(e.code) : !codes.some(c => wire.statusOf(c) === answer.status)) {
      fail(`${what} answered ${describe(answer)}, expected ${codes.join(' or ')}`)
    }
  }

  openBody (limits, extra = {}) {
    return { version: 1, requestId: requestId(), service: this.o.service, query: this.o.query, limits, ...extra }
  }

  readBody (batch, limits) {
    return { version: 1, session: batch.session, cursor: batch.cursor, limits }
  }

  /** Effective limits the provider must echo for `requested` (BRC-193 §2). */
  effective (requested) {
    const o = this.offer
    return {
      maxBytes: Math.min(requested.maxBytes, o.maxResponseBytes, MAX.maxBytes),
      maxObservations: Math.min(requested.maxObservations, o.maxObservations, MAX.maxObservations),
      waitMs: Math.min(requested.waitMs, o.maxWaitMs, MAX.waitMs)
    }
  }

  /** The largest page the provider serves. */
  bigPage (waitMs = 0) {
    return { maxBytes: Math.min(this.offer.maxResponseBytes, MAX.maxBytes), maxObservations: Math.min(this.offer.maxObservations, MAX.maxObservations), waitMs }
  }

  /**
   * Sends `make(limits)` and, when the provider answers `limited` for a group that a larger
   * (still allowed) limit holds, sends again with the minimums it named, as a client would.
   */
  async grown (make, limits, send) {
    let lim = { ...limits }
    for (let i = 0; ; i++) {
      const answer = await send(make(lim), lim)
      const e = errorOf(answer)
      const need = e && e.code === 'limited' && e.limit && e.limit.kind === 'group' ? e.limit : null
      if (!need || i >= 2) return { answer, limits: lim }
      const big = this.bigPage(lim.waitMs)
      const next = {
        maxBytes: Math.min(Math.max(lim.maxBytes, need.minimumBytes || 0), big.maxBytes),
        maxObservations: Math.min(Math.max(lim.maxObservations, need.minimumObservations || 0), big.maxObservations),
        waitMs: lim.waitMs
      }
      if (next.maxBytes === lim.maxBytes && next.maxObservations === lim.maxObservations) return { answer, limits: lim }
      lim = next
    }
  }

  /** Reads the next batch after `batch` on the main session's chain. */
  async advance (label, batch, limits, waitMs = 0) {
    const lim = { ...limits, waitMs }
    const { answer, limits: used } = await this.grown((l) => this.readBody(batch, l), lim,
      (body, l) => this.lookup(label, 'read', body, { waitMs: l.waitMs, limits: l }))
    return { answer, body: this.readBody(batch, used), limits: used }
  }

  follow (batch) {
    this.chain.push(batch)
    return batch
  }

  // --- the run --------------------------------------------------------------------------

  async run () {
    try {
      if (!(await this.manifestChecks())) {
        this.skipAll(LATER_CHECKS, 'not run: the manifest is unusable (see the manifest checks)')
        return this.results
      }
      await this.requestChecks()
      await this.limitChecks()
      await this.corsChecks()
      await this.session()
      await this.aggregates()
    } finally {
      for (const t of this.transports) t.close()
    }
    return this.results
  }

  /** manifest.*: fetches and judges the BRC-194 manifest; true when lookups can go on. */
  async manifestChecks () {
    let signed = null
    await this.check('manifest.fetch', async () => {
      let answer
      try {
        answer = await this.t.send('manifest', { method: 'GET', suffix: '/overlay/v1/capabilities', op: 'capabilities' })
      } catch (e) {
        if (e.answer) fail(`GET …/capabilities answered ${describe(e.answer)} without a verifiable BRC-104 signature`)
        fail(`GET …/capabilities failed: ${e.message}`)
      }
      if (answer.status !== 200) fail(`GET …/capabilities answered ${describe(answer)}`)
      if (answer.body.length > MANIFEST_MAX) fail(`the manifest is ${answer.body.length} bytes`)
      const j = answer.json
      if (!j || typeof j.body !== 'object' || j.body === null || typeof j.signature !== 'string') fail(`the answer is not a {body, signature} object: ${snippet(answer.body)}`)
      signed = j
    })
    if (!signed) {
      this.skipAll(['manifest.signature', 'manifest.base-url', 'manifest.profile'], 'needs the manifest')
      return false
    }
    const body = signed.body
    let identity = null
    await this.check('manifest.signature', () => {
      let signer
      try {
        signer = native.verifySignedManifest(signed)
      } catch (e) {
        fail(`the signature does not verify: ${e.message}`)
      }
      if (signer !== body.identity) fail(`the manifest is signed by ${signer} but names identity ${body.identity}`)
      if (this.o.auth === 'brc103') {
        const peer = this.t.authFetch.peers[new URL(this.o.base).origin]
        const key = peer && peer.identityKey
        if (key !== signer) fail(`the BRC-104 peer is ${key}, the manifest is signed by ${signer}`)
      }
      identity = signer
    })
    await this.check('manifest.base-url', () => {
      if (body.baseURL !== this.o.base) fail(`baseURL is ${JSON.stringify(body.baseURL)} but the checked base is ${this.o.base}`)
    })
    if (identity === null) {
      this.skipAll(['manifest.profile'], 'needs a verified manifest')
      return false
    }
    await this.check('manifest.profile', () => {
      let accepted
      const chain = body.chain && typeof body.chain === 'object' ? body.chain : {}
      try {
        accepted = native.acceptManifest(signed, {
          identity,
          baseURL: typeof body.baseURL === 'string' ? body.baseURL : '',
          network: String(chain.network),
          genesisHash: String(chain.genesisHash),
          now: Math.floor(Date.now() / 1000),
          maxFutureSkew: 300
        })
      } catch (e) {
        fail(`the manifest is not acceptable: ${e.message}`)
      }
      const offer = accepted.live.find(o => o.service === this.o.service)
      if (!offer) {
        const names = accepted.live.map(o => o.service)
        fail(`service ${JSON.stringify(this.o.service)} offers no lookup-live-v1 profile (lookup-live services: ${names.length ? names.join(', ') : 'none'})`)
      }
      if (offer.authentication !== this.o.auth) fail(`the service advertises authentication ${offer.authentication}, checked with --auth ${this.o.auth}`)
      this.offer = offer
      this.chainOf = chain
      this.identity = identity
      this.capability = accepted.digest
    })
    return this.offer !== null
  }

  /** An open of the checked service with SMALL limits. */
  validOpen () {
    return this.openBody(SMALL)
  }

  /** Authentication, selection headers, framing and strictness of open, read and close. */
  async requestChecks () {
    const small = SMALL
    const valid = () => this.validOpen()

    await this.check('auth.required', async () => {
      if (this.o.auth !== 'brc103') return skip('public mode (--auth none)')
      const a = await this.t.raw('unauthenticated open', { suffix: '/overlay/v1/lookup/open', op: 'open', headers: this.plainSelection(), body: JSON.stringify(valid()) })
      this.expectError(a, 'an open without BRC-104 authentication', ['unauthorized'])
    })

    await this.check('selection.stale-capability', async () => {
      const a = await this.lookup('open naming another capability', 'open', valid(), { headers: { 'x-bsv-overlay-capability': 'ff'.repeat(32) } })
      this.expectError(a, 'an open naming capability ff…ff', ['context-changed'])
    })
    await this.check('selection.unknown-profile', async () => {
      const a = await this.lookup('open selecting another profile', 'open', valid(), { headers: { 'x-bsv-overlay-profile': 'urn:example:not-a-profile' } })
      this.expectError(a, 'an open selecting profile urn:example:not-a-profile', ['unsupported'])
    })

    await this.check('request.framing', async () => {
      const get = await this.t.raw('GET of open', { method: 'GET', suffix: '/overlay/v1/lookup/open', op: 'open', headers: this.plainSelection() })
      if (get.status < 400 || get.status >= 500) fail(`GET …/lookup/open answered ${describe(get)}`)
      const text = await this.lookup('open as text/plain', 'open', valid(), { headers: { 'content-type': 'text/plain' } })
      this.expectError(text, 'an open sent as text/plain', ['invalid'])
      const gz = await this.t.raw('gzip-encoded open', {
        suffix: '/overlay/v1/lookup/open',
        op: 'open',
        headers: this.plainSelection({ 'content-encoding': 'gzip' }),
        body: require('node:zlib').gzipSync(JSON.stringify(valid()))
      })
      // Under BRC-103 this plain request may be refused for its missing authentication first.
      this.expectError(gz, 'an open with Content-Encoding gzip', this.o.auth === 'brc103' ? ['unsupported', 'unauthorized', 'invalid'] : ['unsupported'])
    })

    await this.check('open.strict', async () => {
      const b = valid()
      const { limits: _omit, ...noLimits } = b
      const cases = [
        ['a body that is not JSON', '{"version":1,', ['invalid']],
        ['an unknown member', { ...b, unexpected: true }, ['invalid']],
        ['version 2', { ...b, version: 2 }, ['invalid', 'unsupported']],
        ['a 15-character requestId', { ...b, requestId: 'a'.repeat(15) }, ['invalid']],
        ['limits.maxBytes 0', { ...b, limits: { ...small, maxBytes: 0 } }, ['invalid']],
        ['limits.maxObservations 2^32', { ...b, limits: { ...small, maxObservations: U32_MAX + 1 } }, ['invalid']],
        ['no limits', noLimits, ['invalid']]
      ]
      for (const [what, body, codes] of cases) {
        const a = await this.lookup(`open with ${what}`, 'open', body, { limits: small })
        this.expectError(a, `an open with ${what}`, codes)
      }
    })

    await this.check('open.unknown-service', async () => {
      const service = 'overlay-lookup-live-check-' + crypto.randomBytes(6).toString('hex')
      const a = await this.lookup('open of an unknown service', 'open', { ...valid(), service })
      this.expectError(a, `an open of service ${service}`, ['not-found', 'invalid', 'unsupported'])
    })

    await this.check('read.strict', async () => {
      const session = crypto.randomBytes(16).toString('hex')
      const cursor = crypto.randomBytes(32).toString('base64url')
      const r = { version: 1, session, cursor, limits: small }
      const { cursor: _c, ...noCursor } = r
      const cases = [
        ['a body that is not JSON', '[1,'],
        ['no cursor', noCursor],
        ['an unknown member', { ...r, unexpected: true }],
        ['limits.maxBytes 0', { ...r, limits: { ...small, maxBytes: 0 } }],
        ['a 1025-byte cursor', { ...r, cursor: 'a'.repeat(1025) }]
      ]
      for (const [what, body] of cases) {
        const a = await this.lookup(`read with ${what}`, 'read', body, { limits: small })
        this.expectError(a, `a read with ${what}`, ['invalid'])
      }
    })

    await this.check('close.strict', async () => {
      const cases = [
        ['a body that is not JSON', '{'],
        ['no session', { version: 1 }],
        ['an unknown member', { version: 1, session: crypto.randomBytes(16).toString('hex'), unexpected: true }]
      ]
      for (const [what, body] of cases) {
        const a = await this.lookup(`close with ${what}`, 'close', body)
        this.expectError(a, `a close with ${what}`, ['invalid'])
      }
    })

  }

  /** limited, clamped limits, and the request body and header caps. */
  async limitChecks () {
    const small = SMALL
    await this.check('limited.bounded', async () => {
      const a = await this.lookup('open with maxBytes 1', 'open', this.openBody({ maxBytes: 1, maxObservations: 1, waitMs: 0 }))
      this.expectError(a, 'an open with maxBytes 1', ['limited'])
      if (a.status !== 413) fail(`limited came with status ${a.status}`)
      if (a.body.length > LIMITED_MAX) fail(`the limited answer is ${a.body.length} bytes`)
      const e = errorOf(a)
      const limit = e && e.limit
      if (!limit || !LIMIT_KINDS.has(limit.kind)) fail(`error.limit is ${JSON.stringify(limit)}`)
      if (limit.minimumBytes !== undefined && (!isU32(limit.minimumBytes) || limit.minimumBytes > MAX.maxBytes)) fail(`limit.minimumBytes is ${limit.minimumBytes}`)
      if (limit.minimumObservations !== undefined && (!isU32(limit.minimumObservations) || limit.minimumObservations > MAX.maxObservations)) fail(`limit.minimumObservations is ${limit.minimumObservations}`)
      const j = a.json
      if (j && (j.cursor !== undefined || j.session !== undefined)) fail('the limited answer carries a session or cursor')
    })

    await this.check('limits.clamp', async () => {
      const huge = { maxBytes: U32_MAX, maxObservations: U32_MAX, waitMs: U32_MAX }
      const body = this.openBody(huge)
      const a = await this.lookup('open with U32-max limits', 'open', body)
      const b = this.expectBatch(a, 'an open with every limit at 4294967295')
      await this.lookup('close of the clamp session', 'close', { version: 1, session: b.session })
      const want = this.effective(huge)
      const d = firstDifference(want, b.limits)
      if (d !== null) fail(`the batch echoes limits ${JSON.stringify(b.limits)}, expected ${JSON.stringify(want)}`)
    })

    await this.check('request.body-cap', async () => {
      const cap = this.offer.maxRequestBytes
      const body = JSON.stringify(this.openBody(small))
      if (body.length > cap) return skip(`the advertised maxRequestBytes (${cap}) is smaller than a plain open`)
      const atCap = body + ' '.repeat(cap - body.length)
      const ok = await this.lookup(`open of exactly ${cap} bytes`, 'open', atCap, { limits: small })
      const b = this.expectBatch(ok, `an open padded to the advertised maxRequestBytes (${cap} bytes)`)
      await this.lookup('close of the body-cap session', 'close', { version: 1, session: b.session })
      const over = await this.t.raw(`open of ${cap + 1} bytes`, { suffix: '/overlay/v1/lookup/open', op: 'open', headers: this.plainSelection(), body: atCap + ' ' })
      this.expectError(over, `an open of ${cap + 1} bytes`, this.o.auth === 'brc103' ? ['limited', 'unauthorized'] : ['limited'])
    })

    await this.check('request.header-cap', async () => {
      let a
      try {
        a = await this.t.raw('open with 17 KiB of header fields', { suffix: '/overlay/v1/lookup/open', op: 'open', headers: this.plainSelection({ 'x-padding': 'a'.repeat(17 * 1024) }), body: JSON.stringify(this.validOpen()) })
      } catch (e) {
        // Closing the connection without an answer refuses the request too.
        if (/ECONNRESET|EPIPE|socket hang up/.test(String(e && (e.code || e.message)))) return
        throw e
      }
      // Node's HTTP parser (431) or a proxy may refuse before any application code runs, so
      // this answer is judged only for being a refusal (it is left out of the header checks).
      a.excluded = true
      if (a.status < 400 || a.status >= 500) fail(`a request with 17 KiB of header fields answered ${describe(a)}`)
    })

  }

  /** The CORS preflight, and an answer to a client that offers compression. */
  async corsChecks () {
    await this.check('cors.preflight', async () => {
      const wanted = ['content-type', ...SELECTION_HEADERS, ...(this.o.auth === 'brc103' ? AUTH_HEADERS : ['cache-control'])]
      const preflight = (origin) => this.t.raw(`preflight from ${origin}`, {
        method: 'OPTIONS',
        suffix: '/overlay/v1/lookup/open',
        op: 'open',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': wanted.join(', ') }
      })
      const other = await preflight(PROBE_ORIGIN)
      if (other.status >= 500) fail(`a preflight from an unlisted origin answered ${describe(other)}`)
      // A plain request carrying that origin, for cors.credentials (a malformed body: no
      // session). A provider may refuse a foreign origin outright (a bare 403, say), so this
      // answer is judged for its CORS and cache headers only, not as an error envelope.
      const foreign = await this.t.raw('open from an unlisted origin', { suffix: '/overlay/v1/lookup/open', op: 'open', headers: this.plainSelection({ origin: PROBE_ORIGIN }), body: '{}' })
      foreign.corsRefusal = true
      const origin = this.o.origin
      if (!origin) return skip('the unlisted-origin preflight was answered; pass --origin <an allowed browser origin> to check one that is allowed')
      const p = await preflight(origin)
      if (p.status < 200 || p.status >= 300) fail(`a preflight from ${origin} answered ${describe(p)}`)
      const allowOrigin = p.header('access-control-allow-origin')
      if (allowOrigin !== origin && allowOrigin !== '*') fail(`a preflight from ${origin} got Access-Control-Allow-Origin ${JSON.stringify(allowOrigin)}`)
      const methods = tokens(p.header('access-control-allow-methods'))
      if (!methods.includes('post') && !methods.includes('*')) fail(`a preflight from ${origin} got Access-Control-Allow-Methods ${JSON.stringify(p.header('access-control-allow-methods'))}`)
      const allowed = tokens(p.header('access-control-allow-headers'))
      const missing = wanted.filter(h => !allowed.includes(h) && !allowed.includes('*'))
      if (missing.length > 0) fail(`a preflight from ${origin} does not allow ${missing.join(', ')}`)
      const actual = await this.t.raw(`open from ${origin}`, { suffix: '/overlay/v1/lookup/open', op: 'open', headers: this.plainSelection({ origin }), body: '{}' })
      const exposed = tokens(actual.header('access-control-expose-headers'))
      const needed = [...SELECTION_HEADERS, ...(this.o.auth === 'brc103' ? AUTH_HEADERS : [])]
      const hidden = needed.filter(h => !exposed.includes(h) && !exposed.includes('*'))
      if (actual.header('access-control-allow-origin') !== origin && actual.header('access-control-allow-origin') !== '*') {
        fail(`an answer to ${origin} has Access-Control-Allow-Origin ${JSON.stringify(actual.header('access-control-allow-origin'))}`)
      }
      if (hidden.length > 0) fail(`an answer to ${origin} does not expose ${hidden.join(', ')}`)
    })

    // For headers.content-encoding: answers to a client that offers compression.
    await this.t.raw('manifest offered gzip', { method: 'GET', suffix: '/overlay/v1/capabilities', op: 'capabilities', headers: { 'accept-encoding': 'gzip, deflate, br' } })
      .catch(() => {})
  }

  /**
   * The main session: open, pages, replay, retry, forgery, boundary, live, long polls, close.
   * `s` carries what one step leaves for the next.
   */
  async session () {
    const s = {}
    if (!(await this.openChecks(s))) return
    await this.identityChecks(s)
    await this.liveChecks(s)
    await this.closeChecks(s)
  }

  /** The open: echoed limits, scope, a replayed first page, open retry and conflict. */
  async openChecks (s) {
    const page = { maxBytes: Math.min(262144, this.offer.maxResponseBytes), maxObservations: 1, waitMs: 0 }
    await this.check('limits.echo', async () => {
      const { answer, limits } = await this.grown((l) => this.openBody(l), page, async (body, l) => {
        s.openBody = body
        return this.lookup('open', 'open', body, { limits: l })
      })
      const b = this.expectBatch(answer, 'the open')
      s.first = this.follow(b)
      s.firstAnswer = answer
      s.pageLimits = limits
      const want = this.effective(limits)
      const d = firstDifference(want, b.limits)
      if (d !== null) fail(`an open asking ${JSON.stringify(limits)} echoes ${JSON.stringify(b.limits)}, expected ${JSON.stringify(want)}`)
    })
    const dependent = ['batch.scope', 'replay.byte-identical', 'open.retry', 'open.conflict', 'cursor.forged', 'session.unknown', 'session.principal-scoped',
      'snapshot.boundary', 'mutation.delivered', 'replay.live', 'long-poll.bound', 'long-poll.wake', 'close.idempotent', 'read.after-close', 'close.unknown']
    if (!s.first) {
      this.skipAll(dependent, 'needs a successful open (see limits.echo)')
      return false
    }

    await this.check('batch.scope', () => {
      const sc = s.first.scope
      const provider = this.o.auth === 'brc103' ? this.identity : new URL(this.o.base).origin
      const expect = {
        service: this.o.service,
        provider,
        rulesDigest: this.offer.rulesDigest,
        queryDigest: wire.digest('lookup-query', { service: this.o.service, query: this.o.query })
      }
      for (const [k, v] of Object.entries(expect)) if (sc[k] !== v) fail(`scope.${k} is ${JSON.stringify(sc[k])}, expected ${JSON.stringify(v)}`)
      if (firstDifference(sc.chain, this.chainOf) !== null) fail(`scope.chain is ${JSON.stringify(sc.chain)}, the manifest names ${JSON.stringify(this.chainOf)}`)
      for (const { batch } of this.batches) if (batch.session === s.first.session && firstDifference(batch.scope, sc) !== null) fail('the scope changed between batches of one session')
    })

    // The first page after the open, read twice.
    await this.check('replay.byte-identical', async () => {
      const { answer, body } = await this.advance('first page', s.first, s.pageLimits)
      const b = this.expectBatch(answer, 'the read of the open cursor')
      s.page1 = { answer, body, batch: this.follow(b) }
      if (b.phase === 'live' && b.groups.length === 0) return skip('the snapshot fit in the open batch and the live feed is empty: no replay-stable page (--mutate gives a live group to replay)')
      const again = await this.lookup('first page again', 'read', body, { limits: body.limits })
      const d = replayDifference(answer, again)
      if (d) fail(`reading ${b.phase === 'snapshot' ? 'a snapshot page' : 'a nonempty live batch'} twice: ${d}`)
    })

    await this.check('open.retry', async () => {
      const again = await this.lookup('open again (same requestId)', 'open', s.openBody)
      this.expectBatch(again, 'the repeated open')
      if (!again.body.equals(s.firstAnswer.body)) {
        const d = firstDifference(s.firstAnswer.json, again.json)
        if (d !== null) fail(`the repeated open (after reads advanced) differs from the first batch at ${d}`)
      }
    })

    await this.check('open.conflict', async () => {
      const changed = { ...s.openBody, limits: { ...s.openBody.limits, maxObservations: s.openBody.limits.maxObservations + 1 } }
      const a = await this.lookup('open reusing the requestId with other limits', 'open', changed)
      this.expectError(a, 'an open reusing a requestId with changed limits', ['conflict'])
    })

    return true
  }

  /** Forged cursors, unknown sessions and sessions of another principal. */
  async identityChecks (s) {
    await this.check('cursor.forged', async () => {
      const forged = forge(s.first.cursor)
      const a = await this.lookup('read with a forged cursor', 'read', { ...this.readBody(s.first, s.pageLimits), cursor: forged })
      this.expectError(a, 'a read whose cursor had one character changed', ['reset-required'])
    })

    await this.check('session.unknown', async () => {
      const a = await this.lookup('read of an unknown session', 'read', { ...this.readBody(s.first, s.pageLimits), session: forge(s.first.session) })
      this.expectError(a, 'a read naming an unknown session', ['reset-required'])
    })

    await this.check('session.principal-scoped', async () => {
      if (this.o.auth !== 'brc103') return skip('public mode: a session is its own bearer capability')
      const other = new CheckTransport({ baseURL: this.o.base, auth: 'brc103', wallet: this.o.otherWallet, timeoutMs: this.o.timeoutMs })
      this.transports.push(other)
      const a = await this.lookup('read by another identity', 'read', this.readBody(s.first, s.pageLimits), { transport: other })
      // The session is unknown to that identity (reset-required); refusing it is fine too.
      this.expectError(a, "another identity's read of the session", ['reset-required', 'unauthorized'])
      const c = await this.lookup('close by another identity', 'close', { version: 1, session: s.first.session }, { transport: other })
      if (c.status !== 200 || firstDifference(c.json, { version: 1, closed: true }) !== null) fail(`another identity's close answered ${describe(c)} ${snippet(c.body)}`)
      const still = await this.lookup('read after the other identity closed', 'read', this.readBody(s.first, s.pageLimits))
      this.expectBatch(still, "the owner's read after another identity closed the session")
    })

  }

  /** The snapshot boundary, a mutation delivered live and replayed, and the long polls. */
  async liveChecks (s) {
    // A change committed after the open and before the boundary (BRC-193 §7).
    let mutated = null
    if (this.o.mutate) mutated = { before: s.first.highWater, failure: await runMutation(this.o.mutate) }

    // Finish the snapshot, then cross the boundary.
    const boundary = await this.drain(s)
    await this.check('snapshot.boundary', () => {
      if (boundary.skip) return skip(boundary.skip)
      if (boundary.finding) fail(boundary.finding)
    })

    await this.check('mutation.delivered', async () => {
      if (!this.o.mutate) return skip('needs --mutate <a command that commits a change the query selects>')
      if (mutated.failure) fail(mutated.failure)
      if (!boundary.live) return skip('the snapshot boundary was not reached')
      const W = u64(s.first.through)
      let cur = boundary.live
      let req = boundary.liveRequest
      const deadline = Date.now() + DELIVERY_BUDGET_MS
      while (cur.groups.length === 0) {
        if (Date.now() >= deadline) fail(`no live group arrived within ${DELIVERY_BUDGET_MS / 1000} s after the --mutate command succeeded (through ${cur.through}); did it commit a change the query selects?`)
        const { answer, body } = await this.advance('live read after the mutation', cur, s.pageLimits, Math.min(this.offer.maxWaitMs, 10000))
        cur = this.follow(this.expectBatch(answer, 'a live read after the mutation'))
        req = { answer, body }
      }
      if (cur.phase !== 'live') fail(`the batch with the change has phase ${cur.phase}`)
      const low = cur.groups.find(g => u64(g.sequence) <= W)
      if (low) fail(`the change arrived as group ${low.id} with sequence ${low.sequence}, not above W=${W}`)
      s.delivered = req
      s.live = cur
    })
    if (!s.live && boundary.live) s.live = this.chain[this.chain.length - 1]

    await this.check('replay.live', async () => {
      if (!this.o.mutate) return skip('needs --mutate')
      if (!s.delivered) return skip('needs a delivered mutation (see mutation.delivered)')
      const again = await this.lookup('live batch again', 'read', s.delivered.body, { limits: s.delivered.body.limits })
      const d = replayDifference(s.delivered.answer, again)
      if (d) fail(`reading the live batch with the change twice: ${d}`)
    })

    await this.check('long-poll.bound', async () => {
      if (!s.live) return skip('needs a caught-up live cursor (see snapshot.boundary)')
      const waitMs = Math.min(this.o.waitMs, this.offer.maxWaitMs)
      for (let attempt = 0; attempt < 3; attempt++) {
        const cur = s.live
        const started = Date.now()
        const { answer } = await this.advance(`long poll (waitMs ${waitMs})`, cur, s.pageLimits, waitMs)
        const ms = Date.now() - started
        const b = this.expectBatch(answer, `a long poll with waitMs ${waitMs}`)
        s.live = this.follow(b)
        if (b.session !== cur.session) fail(`the poll answered session ${b.session}`)
        if (b.phase !== 'live') fail(`the poll answered phase ${b.phase}`)
        if (b.groups.length > 0) continue // the provider committed meanwhile: poll again
        if (ms < waitMs - Math.max(50, waitMs * 0.05)) {
          if (u64(b.through) > u64(cur.through)) continue // it examined newer records
          fail(`a caught-up poll with waitMs ${waitMs} returned an empty batch after ${ms} ms with through unchanged (${b.through})`)
        }
        return
      }
      return skip('the provider committed changes during three polls in a row: no quiet poll to judge')
    })

    await this.check('long-poll.wake', async () => {
      if (!this.o.mutate) return skip('needs --mutate')
      if (!s.live) return skip('needs a caught-up live cursor')
      const waitMs = Math.min(this.offer.maxWaitMs, 20000)
      if (waitMs < 1000) return skip(`the provider's maxWaitMs (${this.offer.maxWaitMs}) leaves no time to commit during a poll`)
      const started = Date.now()
      const poll = this.advance('long poll woken by a mutation', s.live, s.pageLimits, waitMs)
      await sleep(300)
      const failure = await runMutation(this.o.mutate)
      const mutatedAt = Date.now() - started
      const { answer } = await poll
      const ms = Date.now() - started
      if (failure) fail(failure)
      const b = this.expectBatch(answer, 'the poll during the mutation')
      s.live = this.follow(b)
      if (b.groups.length === 0) {
        if (mutatedAt >= ms) return skip(`the --mutate command took ${mutatedAt} ms, longer than the poll's ${waitMs} ms bound`)
        fail(`the poll returned an empty batch after ${ms} ms (bound ${waitMs} ms) although the --mutate command had committed at ${mutatedAt} ms`)
      }
    })

  }

  /** Close, repeated close, a read after close and the close of an unknown session. */
  async closeChecks (s) {
    await this.check('close.idempotent', async () => {
      for (const label of ['close', 'close again']) {
        const a = await this.lookup(label, 'close', { version: 1, session: s.first.session })
        if (a.status !== 200 || !a.json || firstDifference(a.json, { version: 1, closed: true }) !== null) fail(`${label} answered ${describe(a)} ${snippet(a.body)}`)
      }
    })
    await this.check('read.after-close', async () => {
      const last = this.chain[this.chain.length - 1]
      const a = await this.lookup('read after close', 'read', this.readBody(last, s.pageLimits))
      this.expectError(a, 'a read of the closed session', ['expired', 'reset-required'])
    })
    await this.check('close.unknown', async () => {
      const a = await this.lookup('close of an unknown session', 'close', { version: 1, session: forge(s.first.session) })
      if (a.status !== 200 || !a.json || firstDifference(a.json, { version: 1, closed: true }) !== null) fail(`closing an unknown session answered ${describe(a)} ${snippet(a.body)}`)
    })
  }

  /**
   * Reads the main session to its snapshot boundary and one batch past it. Resolves
   * {live, liveRequest} at the first live batch, {finding} when the boundary is broken,
   * {skip} when it could not be reached.
   */
  async drain (s) {
    const W = s.first.through
    const snapshot = [...this.chain]
    let cur = this.chain[this.chain.length - 1]
    let req = s.page1 ? { answer: s.page1.answer, body: s.page1.body } : null
    const problem = (b, i) => {
      if (b.phase === 'snapshot') {
        if (b.through !== W) return `snapshot batch ${i} has through ${b.through}, the open's W is ${W}`
      }
      return null
    }
    for (let i = 0; i < snapshot.length; i++) {
      const b = snapshot[i]
      if (b.phase === 'live') {
        const prior = snapshot[i - 1]
        if (!prior || !prior.snapshotComplete) return { finding: `batch ${i} has phase live before a batch with snapshotComplete: true` }
        return { live: b, liveRequest: req }
      }
      const p = problem(b, i)
      if (p) return { finding: p }
      if (b.snapshotComplete && i + 1 < snapshot.length && snapshot[i + 1].phase !== 'live') return { finding: `the batch after the last snapshot batch has phase ${snapshot[i + 1].phase}` }
    }
    for (let i = snapshot.length; i < snapshot.length + MAX_PAGES; i++) {
      const prior = cur
      const { answer, body } = await this.advance(prior.snapshotComplete ? 'read past the snapshot boundary' : 'snapshot page', prior, prior.snapshotComplete ? s.pageLimits : this.bigPage())
      if (answer.status !== 200) {
        const e = errorOf(answer)
        if (e && e.code === 'limited') return { skip: `a snapshot group does not fit the provider's own limits (${describe(answer)})` }
        return { finding: `reading snapshot batch ${i} answered ${describe(answer)}` }
      }
      const problemShape = batchProblem(answer.json)
      if (problemShape) return { finding: `batch ${i} is not a Batch: ${problemShape}` }
      const b = this.follow(answer.json)
      if (prior.snapshotComplete) {
        if (b.phase !== 'live') return { finding: `the batch after the last snapshot batch has phase ${b.phase}` }
        return { live: b, liveRequest: { answer, body } }
      }
      if (b.phase !== 'snapshot') return { finding: `batch ${i} has phase ${b.phase} before any batch set snapshotComplete` }
      const p = problem(b, i)
      if (p) return { finding: p }
      cur = b
    }
    return { skip: `the snapshot did not complete within ${MAX_PAGES} pages; pass a narrower --query` }
  }

  /** Judgements over every answer and batch the run saw. */
  async aggregates () {
    const answers = this.transports.flatMap(t => t.answers)
    const lookupAnswers = answers.filter(a => a.op === 'open' || a.op === 'read' || a.op === 'close')
    const judged = lookupAnswers.filter(a => !a.excluded)
    const manifests = answers.filter(a => a.op === 'capabilities')
    const report = (bad, describeOne) => {
      if (bad.length === 0) return
      fail(`${describeOne(bad[0])}${bad.length > 1 ? ` (and ${bad.length - 1} more answers)` : ''}`)
    }

    await this.check('headers.cache-control', () => {
      const subject = this.o.auth === 'brc103' ? [...judged, ...manifests] : judged
      report(subject.filter(a => {
        const d = tokens(a.header('cache-control'))
        return !d.includes('private') || !d.includes('no-store') || d.includes('public')
      }), a => `${a.name} carried Cache-Control ${JSON.stringify(a.header('cache-control') || null)}`)
    })
    await this.check('headers.vary', () => {
      report(judged.filter(a => a.method !== 'OPTIONS').filter(a => {
        const v = tokens(a.header('vary'))
        return !VARY_NAMES.every(n => v.includes(n))
      }), a => `${a.name} carried Vary ${JSON.stringify(a.header('vary') || null)}`)
    })
    await this.check('headers.content-encoding', () => {
      report(answers.filter(a => {
        const e = (a.header('content-encoding') || 'identity').trim().toLowerCase()
        return e !== 'identity'
      }), a => `${a.name} came with Content-Encoding ${a.header('content-encoding')}`)
    })
    await this.check('cors.credentials', () => {
      report(answers.filter(a => {
        const o = a.header('access-control-allow-origin')
        return a.header('access-control-allow-credentials') === 'true' && (o === '*' || o === PROBE_ORIGIN)
      }), a => `${a.name} paired Access-Control-Allow-Credentials: true with Access-Control-Allow-Origin ${a.header('access-control-allow-origin')}`)
    })
    await this.check('errors.envelope', () => {
      report(judged.filter(a => a.method !== 'OPTIONS' && !a.corsRefusal && (a.status < 200 || a.status >= 300) && envelopeProblem(a) !== null),
        a => `${a.name}: ${envelopeProblem(a)}`)
    })
    await this.check('redirects.none', () => {
      report(answers.filter(a => a.status >= 300 && a.status < 400), a => `${a.name} redirected to ${JSON.stringify(a.header('location') || null)}`)
    })
    await this.check('limits.respected', () => {
      for (const { answer, batch, limits } of this.batches) {
        if (!limits) continue
        const eff = this.effective(limits)
        if (answer.body.length > eff.maxBytes) fail(`${answer.name} is ${answer.body.length} bytes under maxBytes ${eff.maxBytes}`)
        const n = batch.groups.reduce((sum, g) => sum + g.observations.length, 0)
        if (n > eff.maxObservations) fail(`${answer.name} carries ${n} observations under maxObservations ${eff.maxObservations}`)
      }
    })
    await this.check('batch.watermarks', () => {
      for (const { answer, batch } of this.batches) {
        if (u64(batch.through) > u64(batch.highWater)) fail(`${answer.name} has through ${batch.through} above highWater ${batch.highWater}`)
      }
      const W = this.chain.length > 0 ? u64(this.chain[0].through) : null
      let incoming = null
      for (let i = 0; i < this.chain.length; i++) {
        const b = this.chain[i]
        const through = u64(b.through)
        if (b.phase === 'snapshot') {
          const off = b.groups.find(g => u64(g.sequence) !== W)
          if (off) fail(`snapshot group ${off.id} has sequence ${off.sequence}, W is ${W}`)
        } else {
          if (incoming !== null && through < incoming) fail(`through went back from ${incoming} to ${through} in live batch ${i}`)
          let last = incoming
          for (const g of b.groups) {
            const seq = u64(g.sequence)
            if (last !== null && seq <= last) fail(`live group ${g.id} has sequence ${seq}, not above ${last}`)
            if (seq > through) fail(`live group ${g.id} has sequence ${seq} above the batch's through ${through}`)
            last = seq
          }
        }
        incoming = through
      }
    })
  }
}

/** Checks after the manifest, skipped together when the manifest is unusable. */
const LATER_CHECKS = [
  'auth.required', 'selection.stale-capability', 'selection.unknown-profile', 'request.framing', 'open.strict', 'open.unknown-service',
  'read.strict', 'close.strict', 'limited.bounded', 'limits.clamp', 'request.body-cap', 'request.header-cap', 'cors.preflight',
  'limits.echo', 'batch.scope', 'replay.byte-identical', 'open.retry', 'open.conflict', 'cursor.forged', 'session.unknown',
  'session.principal-scoped', 'snapshot.boundary', 'mutation.delivered', 'replay.live', 'long-poll.bound', 'long-poll.wake',
  'close.idempotent', 'read.after-close', 'close.unknown', 'headers.cache-control', 'headers.vary', 'headers.content-encoding',
  'cors.credentials', 'errors.envelope', 'redirects.none', 'limits.respected', 'batch.watermarks'
]

module.exports = { Run, PROFILE, PROBE_ORIGIN, LATER_CHECKS }
