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
const { ruleOf, RULES } = require('./rules')
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
/** How long before the session expiry the expiry poll starts. */
const EXPIRY_POLL_LEAD_MS = 4000
/** How far past the session expiry the expiry poll asks to wait. */
const EXPIRY_OVERSHOOT_MS = 3000
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

/** Limits of the probes: one observation, no wait, twice the minimum byte allowance. */
const SMALL = { maxBytes: 131072, maxObservations: 1, waitMs: 0 }
/** The allowance every provider must support (BRC-193 §2): 64 KiB, one observation, no wait. */
const MINIMUM = { maxBytes: 65536, maxObservations: 1, waitMs: 0 }
/** How long past its bound a poll may answer (network and scheduling), for a bound of `ms`. */
const slackOf = (ms) => Math.max(1000, Math.ceil(ms / 4))
/** Clock difference tolerated between the checker and the provider, in seconds. */
const CLOCK_SKEW = 5n
/** Fewest characters of a session id that can carry 128 random bits (base64url: 22). */
const MIN_SESSION_CHARS = 16
const NEEDS_MUTATE = 'needs --mutate <a command that commits a change the query selects>'
/** scope members of the open judged one by one: [check, member]. */
const SCOPE_FIELDS = [['scope.service', 'service'], ['scope.provider', 'provider'], ['scope.rules', 'rulesDigest'], ['scope.query', 'queryDigest'], ['scope.chain', 'chain']]

/** `txid.vout` of an output observation (BRC-192 evidence), or null. */
function outpointOf (o) {
  const e = o && o.kind === 'output' && o.payload && o.payload.evidence
  return e && typeof e.txid === 'string' ? `${e.txid}.${e.outputIndex}` : null
}

/**
 * The malformed requests, one check each: [check, op, what, make(validOpen, read, session), codes].
 * Every one must be refused with one of `codes` (BRC-193 §2, §6).
 */
function strictCases () {
  const lim = (b, l) => ({ ...b, limits: { ...b.limits, ...l } })
  const session1025 = 'a'.repeat(1025)
  return [
    ['open.not-json', 'open', 'a body that is not JSON', () => '{"version":1,', ['invalid']],
    ['open.unknown-member', 'open', 'an unknown member', (o) => ({ ...o, unexpected: true }), ['invalid']],
    ['open.version', 'open', 'version 2', (o) => ({ ...o, version: 2 }), ['invalid', 'unsupported']],
    ['open.no-service', 'open', 'no service', (o) => { const { service: _s, ...rest } = o; return rest }, ['invalid']],
    ['open.request-id-short', 'open', 'a 15-character requestId', (o) => ({ ...o, requestId: crypto.randomBytes(8).toString('hex').slice(0, 15) }), ['invalid']],
    ['open.request-id-long', 'open', 'a 129-character requestId', (o) => ({ ...o, requestId: crypto.randomBytes(65).toString('hex').slice(0, 129) }), ['invalid']],
    ['open.request-id-alphabet', 'open', 'a requestId with a dot', (o) => ({ ...o, requestId: crypto.randomBytes(12).toString('hex') + '.' + crypto.randomBytes(4).toString('hex') }), ['invalid']],
    ['open.zero-max-bytes', 'open', 'limits.maxBytes 0', (o) => lim(o, { maxBytes: 0 }), ['invalid']],
    ['open.zero-max-observations', 'open', 'limits.maxObservations 0', (o) => lim(o, { maxObservations: 0 }), ['invalid']],
    ['open.limit-overflow', 'open', 'limits.maxObservations 2^32', (o) => lim(o, { maxObservations: U32_MAX + 1 }), ['invalid']],
    ['open.no-limits', 'open', 'no limits', (o) => { const { limits: _l, ...rest } = o; return rest }, ['invalid']],
    ['open.critical-unknown', 'open', 'an unknown critical extension', (o) => ({ ...o, extensions: { 'urn:example:check-unknown': true }, critical: ['urn:example:check-unknown'] }), ['unsupported']],
    ['open.rules-digest-mismatch', 'open', 'a requiredRulesDigest the service does not have', (o) => ({ ...o, requiredRulesDigest: 'ee'.repeat(32) }), ['conflict']],
    ['read.not-json', 'read', 'a body that is not JSON', () => '[1,', ['invalid']],
    ['read.no-cursor', 'read', 'no cursor', (o, r) => { const { cursor: _c, ...rest } = r; return rest }, ['invalid']],
    ['read.unknown-member', 'read', 'an unknown member', (o, r) => ({ ...r, unexpected: true }), ['invalid']],
    ['read.zero-max-bytes', 'read', 'limits.maxBytes 0', (o, r) => lim(r, { maxBytes: 0 }), ['invalid']],
    ['read.zero-max-observations', 'read', 'limits.maxObservations 0', (o, r) => lim(r, { maxObservations: 0 }), ['invalid']],
    ['read.long-cursor', 'read', 'a 1025-byte cursor', (o, r) => ({ ...r, cursor: 'a'.repeat(1025) }), ['invalid']],
    ['read.long-session', 'read', 'a 1025-byte session', (o, r) => ({ ...r, session: session1025 }), ['invalid']],
    ['close.not-json', 'close', 'a body that is not JSON', () => '{', ['invalid']],
    ['close.no-session', 'close', 'no session', () => ({ version: 1 }), ['invalid']],
    ['close.unknown-member', 'close', 'an unknown member', (o, r, s) => ({ version: 1, session: s, unexpected: true }), ['invalid']],
    ['close.long-session', 'close', 'a 1025-byte session', () => ({ version: 1, session: session1025 }), ['invalid']]
  ]
}

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
      resolve(`the --mutate command (run with /bin/sh -c) failed (${err.killed ? 'timed out' : 'exit ' + err.code})${messageOf(stderr)}`)
    })
  })
}

/**
 * What a failed command said: its error message, not the stack frames after it (a Node
 * script that throws prints the frames last). ': <message>', or '' when it said nothing.
 */
function messageOf (stderr) {
  const lines = String(stderr || '').split('\n').map(l => l.trim()).filter(l => l && !/^at\s/.test(l) && !/^Node\.js v/.test(l) && l !== '^')
  const message = lines.find(l => /^([A-Za-z]*Error|error|fatal)\b/i.test(l)) || lines.find(l => /\b(error|failed|denied|refused|not found)\b/i.test(l)) || lines[lines.length - 1]
  return message ? ': ' + (message.length > 300 ? message.slice(0, 300) + '…' : message) : ''
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
    const rule = ruleOf(result.check)
    const r = { check: result.check, status: result.status, section: rule.section }
    if (result.status === 'ok') r.line = `ok ${r.check}`
    if (result.status === 'skip') {
      r.reason = result.reason
      r.line = `skip ${r.check}: ${r.reason}`
    }
    if (result.status === 'fail') {
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
      this.batches.push({ answer, batch: answer.json, limits: limits !== undefined ? limits : (payload && payload.limits) || null })
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

    await this.check('request.method', async () => {
      const get = await this.t.raw('GET of open', { method: 'GET', suffix: '/overlay/v1/lookup/open', op: 'open', headers: this.plainSelection() })
      if (get.status < 400 || get.status >= 500) fail(`GET …/lookup/open answered ${describe(get)}`)
    })
    await this.check('request.content-type', async () => {
      const text = await this.lookup('open as text/plain', 'open', valid(), { headers: { 'content-type': 'text/plain' } })
      this.expectError(text, 'an open sent as text/plain', ['invalid'])
    })
    await this.check('request.content-encoding', async () => {
      const gz = await this.t.raw('gzip-encoded open', {
        suffix: '/overlay/v1/lookup/open',
        op: 'open',
        headers: this.plainSelection({ 'content-encoding': 'gzip' }),
        body: require('node:zlib').gzipSync(JSON.stringify(valid()))
      })
      // Under BRC-103 this plain request may be refused for its missing authentication first.
      this.expectError(gz, 'an open with Content-Encoding gzip', this.o.auth === 'brc103' ? ['unsupported', 'unauthorized', 'invalid'] : ['unsupported'])
    })

    // One check per malformed request (BRC-193 §2): each must be refused with its code.
    const session = crypto.randomBytes(16).toString('hex')
    const r = { version: 1, session, cursor: crypto.randomBytes(32).toString('base64url'), limits: SMALL }
    for (const [check, op, what, make, codes] of strictCases()) {
      await this.check(check, async () => {
        const body = make(valid(), r, session)
        // The limits a batch answering it would be judged by (limits.respected): none for
        // limits that are themselves malformed.
        const l = body && typeof body === 'object' ? body.limits : SMALL
        const judgedBy = l && ['maxBytes', 'maxObservations'].every(k => isU32(l[k]) && l[k] > 0) ? l : null
        const a = await this.lookup(`${op} with ${what}`, op, body, { limits: judgedBy })
        this.expectError(a, `${op === 'open' ? 'an' : 'a'} ${op} with ${what}`, codes)
        if (a.status === 200 && a.json && a.json.session) await this.closeQuietly(a.json.session)
      })
    }

    await this.check('open.unknown-service', async () => {
      const service = 'overlay-lookup-live-check-' + crypto.randomBytes(6).toString('hex')
      const a = await this.lookup('open of an unknown service', 'open', { ...valid(), service })
      this.expectError(a, `an open of service ${service}`, ['not-found', 'invalid', 'unsupported'])
    })

    // Well-formed opens at the edges of the rules are accepted.
    const accepted = [
      ['open.request-id-bounds', 'requestIds of 16 and of 128 letters, digits, _ and -', () => [
        { ...valid(), requestId: 'A_-' + crypto.randomBytes(8).toString('hex').slice(0, 13) },
        { ...valid(), requestId: ('a-_Z' + crypto.randomBytes(64).toString('hex')).slice(0, 128) }
      ]],
      ['open.rules-digest-match', 'requiredRulesDigest equal to the advertised rulesDigest', () => [
        { ...valid(), requiredRulesDigest: this.offer.rulesDigest }
      ]]
    ]
    for (const [check, what, bodies] of accepted) {
      await this.check(check, async () => {
        for (const body of bodies()) {
          const a = await this.lookup(`open with ${what}`, 'open', body, { limits: SMALL })
          const b = this.expectBatch(a, `an open with ${what}`)
          await this.closeQuietly(b.session)
        }
      })
    }
  }

  /** Closes a session the checker opened for one probe; the answer is judged with the others. */
  async closeQuietly (session, transport = this.t) {
    await this.lookup('close of a probe session', 'close', { version: 1, session }, { transport }).catch(() => {})
  }

  /** limited, clamped limits, the minimum allowance, and the request body and header caps. */
  async limitChecks () {
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
      await this.closeQuietly(b.session)
      const want = this.effective(huge)
      const d = firstDifference(want, b.limits)
      if (d !== null) fail(`the batch echoes limits ${JSON.stringify(b.limits)}, expected ${JSON.stringify(want)}`)
    })

    await this.check('limits.minimum-allowance', async () => {
      if (this.offer.maxResponseBytes < MINIMUM.maxBytes || this.offer.maxObservations < 1) fail(`the manifest advertises maxResponseBytes ${this.offer.maxResponseBytes} and maxObservations ${this.offer.maxObservations}`)
      const a = await this.lookup('open with the minimum allowance', 'open', this.openBody(MINIMUM))
      const b = this.expectBatch(a, `an open with limits ${JSON.stringify(MINIMUM)}`)
      await this.closeQuietly(b.session)
      const d = firstDifference(MINIMUM, b.limits)
      if (d !== null) fail(`an open with limits ${JSON.stringify(MINIMUM)} echoes ${JSON.stringify(b.limits)}`)
    })

    await this.check('request.body-cap', async () => {
      const cap = this.offer.maxRequestBytes
      const body = JSON.stringify(this.openBody(SMALL))
      if (body.length > cap) return skip(`the advertised maxRequestBytes (${cap}) is smaller than a plain open`)
      const atCap = body + ' '.repeat(cap - body.length)
      const ok = await this.lookup(`open of exactly ${cap} bytes`, 'open', atCap, { limits: SMALL })
      const b = this.expectBatch(ok, `an open padded to the advertised maxRequestBytes (${cap} bytes)`)
      await this.closeQuietly(b.session)
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
    await this.expiryOpen()
    if (!(await this.openChecks(s))) return
    await this.identityChecks(s)
    await this.liveChecks(s)
    await this.closeChecks(s)
    await this.emptyChecks()
    await this.expiryChecks()
  }

  /**
   * An empty collection (BRC-193 §3), with --empty-query: its open still leads to a completed
   * snapshot batch (snapshotComplete, phase snapshot, no groups), and the batch after it is live.
   */
  async emptyChecks () {
    await this.check('snapshot.empty', async () => {
      if (this.o.emptyQuery === undefined) return skip('needs --empty-query <a query that selects nothing>')
      const body = { ...this.openBody(SMALL), query: this.o.emptyQuery }
      let b = this.expectBatch(await this.lookup('open of the empty query', 'open', body), 'the open of the --empty-query')
      const session = b.session
      try {
        for (let i = 0; ; i++) {
          if (b.groups.length > 0) return skip(`the --empty-query selects something (group ${b.groups[0].id})`)
          if (b.phase !== 'snapshot') fail(`batch ${i} of the empty query has phase ${b.phase} before a completed snapshot batch`)
          if (b.snapshotComplete) break
          if (i >= MAX_PAGES) fail(`the empty query's snapshot did not complete within ${MAX_PAGES} batches`)
          b = this.expectBatch(await this.lookup('empty query page', 'read', this.readBody(b, SMALL), { limits: SMALL }), 'a read of the empty query')
        }
        const after = this.expectBatch(await this.lookup('empty query past its boundary', 'read', this.readBody(b, SMALL), { limits: SMALL }), 'the read past the empty snapshot')
        if (after.phase !== 'live') fail(`the batch after the empty completed snapshot batch has phase ${after.phase}`)
      } finally {
        await this.closeQuietly(session)
      }
    })
  }

  /** The open: echoed limits, scope, a replayed first page, open retry and conflicts. */
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
    if (!s.first) {
      this.skipAll(SESSION_CHECKS, 'needs a successful open (see limits.echo)')
      return false
    }
    // A second session of the same query, opened before any mutation: its live groups are
    // compared with the main session's (live.stable).
    const second = await this.lookup('second open', 'open', this.openBody(this.bigPage())).catch(() => null)
    if (second && second.status === 200 && batchProblem(second.json) === null) s.second = second.json

    const scope = s.first.scope || {}
    const provider = this.o.auth === 'brc103' ? this.identity : new URL(this.o.base).origin
    const expected = {
      service: this.o.service,
      provider,
      rulesDigest: this.offer.rulesDigest,
      queryDigest: wire.digest('lookup-query', { service: this.o.service, query: this.o.query }),
      chain: this.chainOf
    }
    for (const [check, key] of SCOPE_FIELDS) {
      await this.check(check, () => {
        if (firstDifference(scope[key], expected[key]) !== null) fail(`scope.${key} of the open is ${JSON.stringify(scope[key])}, expected ${JSON.stringify(expected[key])}`)
      })
    }

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

    // The same page with 16 bytes too few (the echoed maxBytes may be a few digits shorter):
    // its group does not fit (BRC-193 §3, §8).
    await this.check('limited.group', async () => {
      const p = s.page1
      if (!p || p.batch.groups.length === 0) return skip('needs a page with a group after the open')
      const maxBytes = p.answer.body.length - 16
      const a = await this.lookup('first page with 16 bytes too few', 'read', { ...p.body, limits: { ...p.body.limits, maxBytes } })
      this.expectError(a, `the first page read with maxBytes ${maxBytes} (its size less 16)`, ['limited'])
      const e = errorOf(a)
      if (!e.limit || e.limit.kind !== 'group') fail(`a group over the byte budget answered limit ${JSON.stringify(e.limit || null)}, not kind group`)
      if (e.limit.minimumBytes !== undefined && e.limit.minimumBytes <= maxBytes) fail(`limit.minimumBytes ${e.limit.minimumBytes} is not above the ${maxBytes} bytes that were too few`)
    })

    await this.check('open.retry', async () => {
      const again = await this.lookup('open again (same requestId)', 'open', s.openBody)
      this.expectBatch(again, 'the repeated open')
      if (!again.body.equals(s.firstAnswer.body)) {
        const d = firstDifference(s.firstAnswer.json, again.json)
        if (d !== null) fail(`the repeated open (after reads advanced) differs from the first batch at ${d}`)
      }
    })

    // Reusing the requestId with one open parameter changed (BRC-193 §2, §8).
    const changes = [
      ['open.conflict-limits', 'other limits', (b) => ({ ...b, limits: { ...b.limits, maxObservations: b.limits.maxObservations + 1 } })],
      ['open.conflict-query', 'another query', (b) => ({ ...b, query: { ...(b.query && typeof b.query === 'object' && !Array.isArray(b.query) ? b.query : {}), overlayLookupLiveCheck: 1 } })],
      ['open.conflict-rules', 'a requiredRulesDigest added', (b) => ({ ...b, requiredRulesDigest: this.offer.rulesDigest })]
    ]
    for (const [check, what, change] of changes) {
      await this.check(check, async () => {
        const a = await this.lookup(`open reusing the requestId with ${what}`, 'open', change(s.openBody))
        this.expectError(a, `an open reusing a requestId with ${what}`, ['conflict'])
      })
    }
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

    const other = () => {
      if (!this.other) {
        this.other = new CheckTransport({ baseURL: this.o.base, auth: 'brc103', wallet: this.o.otherWallet, timeoutMs: this.o.timeoutMs })
        this.transports.push(this.other)
      }
      return this.other
    }

    await this.check('session.foreign-read', async () => {
      if (this.o.auth !== 'brc103') return skip('public mode: a session is its own bearer capability')
      const a = await this.lookup('read by another identity', 'read', this.readBody(s.first, s.pageLimits), { transport: other() })
      // The session is unknown to that identity (reset-required); refusing it is fine too.
      this.expectError(a, "another identity's read of the session", ['reset-required', 'unauthorized'])
    })

    await this.check('close.foreign', async () => {
      if (this.o.auth !== 'brc103') return skip('public mode: a session is its own bearer capability')
      const own = this.expectBatch(await this.lookup('open of a session another identity closes', 'open', this.validOpen()), 'an open')
      const c = await this.lookup('close by another identity', 'close', { version: 1, session: own.session }, { transport: other() })
      if (c.status !== 200 || firstDifference(c.json, { version: 1, closed: true }) !== null) fail(`another identity's close answered ${describe(c)} ${snippet(c.body)}`)
      const still = await this.lookup('read after another identity closed', 'read', this.readBody(own, SMALL))
      this.expectBatch(still, "the owner's read after another identity closed the session")
      await this.closeQuietly(own.session)
    })

    await this.check('auth.read-unauthenticated', async () => {
      if (this.o.auth !== 'brc103') return skip('public mode (--auth none)')
      if (!s.page1) return skip('needs the first page (see replay.byte-identical)')
      const a = await this.t.raw('unauthenticated read of the session', { suffix: '/overlay/v1/lookup/read', op: 'read', headers: this.plainSelection(), body: JSON.stringify(s.page1.body) })
      this.expectError(a, 'a read of an existing session without BRC-104 authentication', ['unauthorized'])
    })
  }

  /** The snapshot boundary, a mutation delivered live and replayed, and the long polls. */
  async liveChecks (s) {
    // A change committed after the open and before the boundary (BRC-193 §7).
    let mutated = null
    if (this.o.mutate) mutated = { failure: await runMutation(this.o.mutate) }

    // Finish the snapshot, then cross the boundary.
    const boundary = await this.drain(s)
    for (const check of ['snapshot.through-w', 'snapshot.complete-phase', 'snapshot.live-after']) {
      await this.check(check, () => {
        if (boundary.findings[check]) fail(boundary.findings[check])
        if (boundary.skip) return skip(boundary.skip)
        if (check === 'snapshot.through-w' && this.chain.filter(b => b.phase === 'snapshot').length < 2) return skip('the snapshot fit in the open batch: no later snapshot batch to judge')
      })
    }

    await this.check('mutation.delivered', async () => {
      if (!this.o.mutate) return skip(NEEDS_MUTATE)
      if (mutated.failure) fail(mutated.failure)
      if (!boundary.live) return skip('the snapshot boundary was not reached')
      const W = u64(s.first.through)
      const found = await this.untilGroups(boundary.live, boundary.liveRequest, s.pageLimits, 'a live read after the mutation')
      if (!found) fail(`no live group arrived within ${DELIVERY_BUDGET_MS / 1000} s after the --mutate command succeeded; did it commit a change the query selects?`)
      const cur = found.batch
      if (cur.phase !== 'live') fail(`the batch with the change has phase ${cur.phase}`)
      const low = cur.groups.find(g => u64(g.sequence) <= W)
      if (low) fail(`the change arrived as group ${low.id} with sequence ${low.sequence}, not above W=${W}`)
      s.delivered = found.request
      s.live = cur
    })
    if (!s.live && boundary.live) s.live = this.chain[this.chain.length - 1]

    await this.check('mutation.once', () => {
      if (!this.o.mutate) return skip(NEEDS_MUTATE)
      if (!s.delivered) return skip('needs a delivered mutation (see mutation.delivered)')
      const seen = new Map()
      for (const b of this.chain) {
        for (const g of b.groups) {
          for (const o of g.observations) {
            const key = outpointOf(o)
            if (key) seen.set(key, [...(seen.get(key) || []), `${b.phase} group ${g.id}`])
          }
        }
      }
      if (!s.live.groups.some(g => g.observations.some(o => outpointOf(o)))) return skip('the delivered change has no output observation to look for in the snapshot')
      for (const g of s.live.groups) {
        for (const o of g.observations) {
          const where = seen.get(outpointOf(o)) || []
          if (where.length > 1) fail(`the mutated output ${outpointOf(o)} arrived ${where.length} times: ${where.join(', ')}`)
        }
      }
    })

    await this.check('replay.live', async () => {
      if (!this.o.mutate) return skip(NEEDS_MUTATE)
      if (!s.delivered) return skip('needs a delivered mutation (see mutation.delivered)')
      const again = await this.lookup('live batch again', 'read', s.delivered.body, { limits: s.delivered.body.limits })
      const d = replayDifference(s.delivered.answer, again)
      if (d) fail(`reading the live batch with the change twice: ${d}`)
    })

    // The second session was opened with the largest page before the mutation: its open was
    // its last snapshot page, and the change was committed after it, before its boundary read.
    await this.check('mutation.last-page', async () => {
      if (!this.o.mutate) return skip(NEEDS_MUTATE)
      if (!s.delivered) return skip('needs a delivered mutation (see mutation.delivered)')
      if (!s.second) fail('the second open of the same query was not answered with a batch')
      if (!s.second.snapshotComplete) return skip("the snapshot does not fit one page of the provider's largest limits: no last page came before the mutation")
      const mine = s.live.groups[0]
      let cur = s.second
      const limits = this.bigPage()
      const deadline = Date.now() + DELIVERY_BUDGET_MS
      try {
        for (;;) {
          if (Date.now() >= deadline) fail(`the session did not reach live group sequence ${mine.sequence} within ${DELIVERY_BUDGET_MS / 1000} s`)
          const a = await this.lookup('second session read', 'read', this.readBody(cur, limits), { limits, waitMs: limits.waitMs })
          cur = this.expectBatch(a, "the second session's read")
          const same = cur.groups.find(g => g.sequence === mine.sequence)
          if (same) {
            s.secondGroup = { group: same, limits }
            return
          }
          if (cur.phase === 'live' && u64(cur.through) >= u64(mine.sequence)) fail(`a session whose last snapshot page came before the change passed sequence ${mine.sequence} (through ${cur.through}) without it`)
        }
      } finally {
        await this.closeQuietly(cur.session)
      }
    })

    await this.check('live.stable', async () => {
      if (!this.o.mutate) return skip(NEEDS_MUTATE)
      if (!s.secondGroup) return skip('needs the change in a second session (see mutation.last-page)')
      const mine = s.live.groups[0]
      const { group: same, limits } = s.secondGroup
      if (same.id !== mine.id) fail(`live group sequence ${mine.sequence} has id ${mine.id} in one session and ${same.id} in another`)
      const d = firstDifference(same.observations, mine.observations)
      if (d !== null) fail(`live group ${mine.id} differs between two sessions (limits ${JSON.stringify(s.pageLimits)} and ${JSON.stringify(limits)}) at observations${d}`)
    })

    await this.check('long-poll.bound', async () => {
      if (!s.live) return skip('needs a caught-up live cursor (see snapshot.live-after)')
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
        s.quietPoll = { ms, waitMs }
        return
      }
      return skip('the provider committed changes during three polls in a row: no quiet poll to judge')
    })

    // A poll answers at its bound, not later (BRC-193 §8: min(arrival + waitMs, expiry)).
    await this.check('long-poll.deadline', async () => {
      if (!s.quietPoll) return skip('needs a quiet long poll (see long-poll.bound)')
      const { ms, waitMs } = s.quietPoll
      if (ms > waitMs + slackOf(waitMs)) fail(`a caught-up poll with waitMs ${waitMs} answered after ${ms} ms, past its bound (allowing ${slackOf(waitMs)} ms)`)
    })

    await this.check('read.immediate', async () => {
      if (!s.live) return skip('needs a caught-up live cursor (see snapshot.live-after)')
      const started = Date.now()
      const { answer } = await this.advance('caught-up read with waitMs 0', s.live, s.pageLimits, 0)
      const ms = Date.now() - started
      const b = this.expectBatch(answer, 'a caught-up read with waitMs 0')
      s.live = this.follow(b)
      if (b.groups.length === 0 && ms > slackOf(0)) fail(`a caught-up read with waitMs 0 answered after ${ms} ms`)
    })

    await this.check('long-poll.wake', async () => {
      if (!this.o.mutate) return skip(NEEDS_MUTATE)
      if (!s.live) return skip('needs a caught-up live cursor')
      const waitMs = Math.min(this.offer.maxWaitMs, Math.max(3000, 4 * this.o.waitMs))
      const started = Date.now()
      const poll = this.advance('long poll woken by a mutation', s.live, s.pageLimits, waitMs)
      // Time for the poll to reach the provider and wait before the change is committed.
      await sleep(Math.max(100, Math.min(300, this.o.waitMs / 2)))
      const failure = await runMutation(this.o.mutate)
      const mutatedAt = Date.now() - started
      const { answer } = await poll
      const ms = Date.now() - started
      if (failure) fail(failure)
      const b = this.expectBatch(answer, 'the poll during the mutation')
      s.live = this.follow(b)
      if (mutatedAt >= waitMs - slackOf(waitMs)) return skip(`the --mutate command took ${mutatedAt} ms, too close to the poll's ${waitMs} ms bound`)
      if (b.groups.length === 0) fail(`the poll returned an empty batch after ${ms} ms (bound ${waitMs} ms) although the --mutate command had committed at ${mutatedAt} ms`)
      if (ms >= waitMs) fail(`the poll returned the change only at its bound (${ms} ms, bound ${waitMs} ms) although it was committed at ${mutatedAt} ms`)
    })
  }

  /** Reads from `batch` until a batch with groups arrives (up to DELIVERY_BUDGET_MS); null if none. */
  async untilGroups (batch, request, limits, what) {
    let cur = batch
    let req = request
    const deadline = Date.now() + DELIVERY_BUDGET_MS
    while (cur.groups.length === 0) {
      if (Date.now() >= deadline) return null
      const { answer, body } = await this.advance('live read after the mutation', cur, limits, Math.min(this.offer.maxWaitMs, 10000))
      cur = this.follow(this.expectBatch(answer, what))
      req = { answer, body }
    }
    return { batch: cur, request: req }
  }

  /** Close, repeated close, a read and a re-open after close, and the close of an unknown session. */
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
    await this.check('open.after-close', async () => {
      const a = await this.lookup('open again after close (same requestId)', 'open', s.openBody)
      this.expectError(a, 'repeating the open of a closed session', ['expired'])
    })
    await this.check('close.unknown', async () => {
      const a = await this.lookup('close of an unknown session', 'close', { version: 1, session: forge(s.first.session) })
      if (a.status !== 200 || !a.json || firstDifference(a.json, { version: 1, closed: true }) !== null) fail(`closing an unknown session answered ${describe(a)} ${snippet(a.body)}`)
    })
  }

  /**
   * Session expiry (BRC-193 §8), with --long only: the session expiryOpen opened before the
   * other checks is waited out when its expiresAt is within the long budget. A poll spanning the expiry ends by it; a read, a
   * re-open and a close after it answer reset-required (or expired), expired and closed:true.
   */
  async expiryChecks () {
    const names = EXPIRY_CHECKS
    const e = this.expiry
    if (!this.o.long) return this.skipAll(names, 'runs long: needs --long (waits for a session to expire)')
    if (e.skip) return this.skipAll(names, e.skip)
    let cur = e.first
    const expiresMs = Number(u64(cur.expiresAt)) * 1000
    // Read the snapshot and the live feed until caught up (an empty live batch), then poll
    // across the expiry: a poll with a group waiting would answer at once and prove nothing.
    for (let i = 0; i < MAX_PAGES && !(cur.phase === 'live' && cur.groups.length === 0); i++) {
      const r = await this.lookup('expiry session page', 'read', this.readBody(cur, this.bigPage()), { limits: this.bigPage() })
      if (r.status !== 200 || batchProblem(r.json) !== null) break
      cur = r.json
    }
    await this.check('long-poll.expiry-cap', async () => {
      // The poll starts a few seconds before the expiry, so that its bound is well past it.
      const early = expiresMs - Date.now() - EXPIRY_POLL_LEAD_MS
      if (early > 0) await sleep(early)
      const remaining = expiresMs - Date.now()
      if (remaining <= 0) return skip('the session expired while the other checks ran')
      if (cur.phase !== 'live' || cur.groups.length > 0) return skip('the session did not catch up with its live feed')
      const waitMs = Math.min(this.offer.maxWaitMs, MAX.waitMs, remaining + EXPIRY_OVERSHOOT_MS)
      if (waitMs < remaining + slackOf(remaining)) return skip(`the session expires in ${remaining} ms, not within one ${waitMs} ms poll`)
      const started = Date.now()
      const limits = { ...SMALL, waitMs }
      const r = await this.lookup(`poll across the expiry (waitMs ${waitMs})`, 'read', this.readBody(cur, limits), { limits, waitMs })
      const ms = Date.now() - started
      if (ms > remaining + slackOf(remaining)) fail(`a poll with waitMs ${waitMs} on a session expiring in ${remaining} ms answered after ${ms} ms (${describe(r)})`)
      if (r.status === 200 && batchProblem(r.json) === null && Date.now() > expiresMs + slackOf(0)) fail('a poll that ended after the session expiry answered a successful batch')
    })
    const wait = expiresMs - Date.now() + 1100
    if (wait > 0) await sleep(wait)
    await this.check('read.at-expiry', async () => {
      const r = await this.lookup('read after expiry', 'read', this.readBody(cur, SMALL), { limits: SMALL })
      this.expectError(r, 'a read after the session expired', ['reset-required', 'expired'])
    })
    await this.check('open.after-expiry', async () => {
      const r = await this.lookup('open again after expiry (same requestId)', 'open', e.body)
      this.expectError(r, 'repeating the open of an expired session', ['expired'])
    })
    await this.check('close.expired', async () => {
      const r = await this.lookup('close of an expired session', 'close', { version: 1, session: cur.session })
      if (r.status !== 200 || !r.json || firstDifference(r.json, { version: 1, closed: true }) !== null) fail(`closing an expired session answered ${describe(r)} ${snippet(r.body)}`)
    })
  }

  /**
   * With --long: opens the session left to expire, first, so that the other checks run while
   * it ages. Sets this.expiry to {first, body} or {skip}.
   */
  async expiryOpen () {
    if (!this.o.long) return
    const body = this.openBody(SMALL)
    const a = await this.lookup('open of a session left to expire', 'open', body)
    if (a.status !== 200 || batchProblem(a.json) !== null) return (this.expiry = { skip: `the open of the expiry session answered ${describe(a)}` })
    const left = Number(u64(a.json.expiresAt)) * 1000 - Date.now()
    if (left > this.o.longBudgetMs) return (this.expiry = { skip: `the session expires in ${Math.round(left / 1000)} s, beyond the --long budget of ${this.o.longBudgetMs / 1000} s` })
    this.expiry = { first: a.json, body }
  }

  /**
   * Reads the main session to its snapshot boundary and one batch past it. Resolves
   * {findings, live, liveRequest}: findings by check name, and the first live batch (the
   * read that returned it) unless the boundary could not be reached ({skip}).
   */
  async drain (s) {
    const W = s.first.through
    const findings = {}
    const note = (check, text) => { if (!findings[check]) findings[check] = text }
    let req = null
    let prior = null
    // Judges batch i (b) after `prior`; true when b is the first live batch.
    const judge = (b, i) => {
      if (b.phase === 'snapshot' && b.through !== W) note('snapshot.through-w', `snapshot batch ${i} has through ${b.through}, the open's W is ${W}`)
      if (b.snapshotComplete && b.phase !== 'snapshot' && !(prior && prior.snapshotComplete)) note('snapshot.complete-phase', `batch ${i}, the first with snapshotComplete true, has phase ${b.phase}`)
      if (b.phase === 'live' && !(prior && prior.snapshotComplete) && !b.snapshotComplete) note('snapshot.complete-phase', `batch ${i} has phase live before any batch set snapshotComplete`)
      if (prior && prior.snapshotComplete && prior.phase === 'snapshot' && b.phase !== 'live') note('snapshot.live-after', `the batch after the last snapshot batch has phase ${b.phase}`)
      return b.phase === 'live' || (prior && prior.snapshotComplete)
    }
    const known = [...this.chain]
    for (let i = 0; i < known.length; i++) {
      const b = known[i]
      if (judge(b, i)) return { findings, live: b, liveRequest: i === 1 && s.page1 ? { answer: s.page1.answer, body: s.page1.body } : null }
      prior = b
    }
    for (let i = known.length; i < known.length + MAX_PAGES; i++) {
      const { answer, body } = await this.advance(prior.snapshotComplete ? 'read past the snapshot boundary' : 'snapshot page', prior, prior.snapshotComplete ? s.pageLimits : this.bigPage())
      if (answer.status !== 200) {
        const e = errorOf(answer)
        if (e && e.code === 'limited') return { findings, skip: `a snapshot group does not fit the provider's own limits (${describe(answer)})` }
        return { findings, skip: `reading snapshot batch ${i} answered ${describe(answer)}` }
      }
      const problemShape = batchProblem(answer.json)
      if (problemShape) return { findings, skip: `batch ${i} is not a Batch: ${problemShape}` }
      const b = this.follow(answer.json)
      req = { answer, body }
      if (judge(b, i)) return { findings, live: b, liveRequest: req }
      prior = b
    }
    return { findings, skip: `the snapshot did not complete within ${MAX_PAGES} pages; pass a narrower --query` }
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
      if (!judged.some(a => a.status >= 400)) return skip('no error answer arrived to judge')
      report(judged.filter(a => a.method !== 'OPTIONS' && !a.corsRefusal && (a.status < 200 || a.status >= 300) && envelopeProblem(a) !== null),
        a => `${a.name}: ${envelopeProblem(a)}`)
    })
    await this.check('redirects.none', () => {
      report(answers.filter(a => a.status >= 300 && a.status < 400), a => `${a.name} redirected to ${JSON.stringify(a.header('location') || null)}`)
    })
    await this.check('limits.respected', () => {
      if (!this.batches.some(x => x.limits)) return skip('no batch arrived to judge')
      for (const { answer, batch, limits } of this.batches) {
        if (!limits) continue
        const eff = this.effective(limits)
        if (answer.body.length > eff.maxBytes) fail(`${answer.name} is ${answer.body.length} bytes under maxBytes ${eff.maxBytes}`)
        const n = batch.groups.reduce((sum, g) => sum + g.observations.length, 0)
        if (n > eff.maxObservations) fail(`${answer.name} carries ${n} observations under maxObservations ${eff.maxObservations}`)
      }
    })
    await this.check('limited.permanent', () => {
      const groupLimited = judged.filter(a => a.status === 413 && errorOf(a) && errorOf(a).limit && errorOf(a).limit.kind === 'group')
      if (groupLimited.length === 0) return skip('no limited answer of kind group arrived (see limited.group)')
      const big = this.bigPage()
      report(groupLimited.filter(a => {
        const l = errorOf(a).limit
        return (l.minimumBytes !== undefined && l.minimumBytes > big.maxBytes) || (l.minimumObservations !== undefined && l.minimumObservations > big.maxObservations)
      }), a => `${a.name} is limited of kind group with ${JSON.stringify(errorOf(a).limit)}, beyond the provider's own limits (${big.maxBytes} bytes, ${big.maxObservations} observations)`)
    })
    await this.check('batch.through-highwater', () => {
      if (this.batches.length === 0) return skip('no batch arrived to judge')
      for (const { answer, batch } of this.batches) {
        if (u64(batch.through) > u64(batch.highWater)) fail(`${answer.name} has through ${batch.through} above highWater ${batch.highWater}`)
      }
    })

    // The main session's chain of batches, in cursor order (BRC-193 §3, §8).
    const W = this.chain.length > 0 ? u64(this.chain[0].through) : null
    const live = []
    let incoming = null
    for (let i = 0; i < this.chain.length; i++) {
      const b = this.chain[i]
      if (b.phase === 'live') live.push({ b, i, incoming })
      incoming = u64(b.through)
    }
    await this.check('snapshot.sequence-w', () => {
      if (!this.chain.some(b => b.phase === 'snapshot' && b.groups.length > 0)) return skip('the snapshot has no groups (an empty collection): no sequence to judge')
      for (const b of this.chain) {
        const off = b.phase === 'snapshot' && b.groups.find(g => u64(g.sequence) !== W)
        if (off) fail(`snapshot group ${off.id} has sequence ${off.sequence}, W is ${W}`)
      }
    })
    await this.check('live.through-monotonic', () => {
      if (live.length < 2) return skip('fewer than two live batches arrived')
      for (const { b, i, incoming } of live) if (incoming !== null && u64(b.through) < incoming) fail(`through went back from ${incoming} to ${b.through} in live batch ${i}`)
    })
    const liveGroups = live.some(({ b }) => b.groups.length > 0)
    await this.check('live.sequence-order', () => {
      if (!liveGroups) return skip(NEEDS_MUTATE + ' (a live group to judge)')
      for (const { b, incoming } of live) {
        let last = incoming
        for (const g of b.groups) {
          const seq = u64(g.sequence)
          if (last !== null && seq <= last) fail(`live group ${g.id} has sequence ${seq}, not above ${last}`)
          last = seq
        }
      }
    })
    await this.check('live.sequence-in-range', () => {
      if (!liveGroups) return skip(NEEDS_MUTATE + ' (a live group to judge)')
      for (const { b } of live) {
        const g = b.groups.find(g => u64(g.sequence) > u64(b.through))
        if (g) fail(`live group ${g.id} has sequence ${g.sequence} above the batch's through ${b.through}`)
      }
    })

    const bySession = new Map()
    for (const { batch } of this.batches) bySession.set(batch.session, [...(bySession.get(batch.session) || []), batch])
    await this.check('scope.constant', () => {
      for (const [session, batches] of bySession) {
        const b = batches.find(x => firstDifference(x.scope, batches[0].scope) !== null)
        if (b) fail(`the scope of session ${session.slice(0, 16)}… changed between batches at scope.${firstDifference(batches[0].scope, b.scope)}`)
      }
    })
    const observed = this.batches.some(({ batch }) => batch.groups.some(g => g.observations.length > 0))
    await this.check('scope.observations', () => {
      if (!observed) return skip('no observation arrived to judge')
      for (const { answer, batch } of this.batches) {
        for (const g of batch.groups) {
          const o = g.observations.find(o => !o || firstDifference(o.scope, batch.scope) !== null)
          if (o) fail(`observation ${o && o.id} of group ${g.id} in ${answer.name} has a scope unlike the batch's (at ${firstDifference(batch.scope, o && o.scope)})`)
        }
      }
    })
    await this.check('observations.unique', () => {
      if (!observed) return skip('no observation arrived to judge')
      const where = new Map()
      for (const { batch } of this.batches) {
        for (const g of batch.groups) {
          for (const o of g.observations) {
            const key = `${batch.scope && batch.scope.epoch} ${o && o.id}`
            const prior = where.get(key)
            if (prior && prior !== g.id) fail(`observation ${o.id} appears in groups ${prior} and ${g.id}`)
            where.set(key, g.id)
          }
        }
      }
    })
    await this.check('groups.namespaces', () => {
      if (!this.chain.some(b => b.phase === 'live' && b.groups.length > 0)) return skip(NEEDS_MUTATE + ' (a live group to compare)')
      const snapshotIds = new Set()
      for (const b of this.chain) {
        if (b.phase !== 'snapshot') continue
        for (const g of b.groups) {
          snapshotIds.add(g.id)
          for (const o of g.observations) snapshotIds.add(o.id)
        }
      }
      for (const { b } of live) {
        for (const g of b.groups) {
          if (snapshotIds.has(g.id)) fail(`live group id ${g.id} is also a snapshot id of the session`)
          const o = g.observations.find(o => snapshotIds.has(o.id))
          if (o) fail(`live observation id ${o.id} is also a snapshot id of the session`)
        }
      }
    })
    await this.check('session.id-bounded', () => {
      for (const session of bySession.keys()) if (Buffer.byteLength(session) > 1024) fail(`a session id is ${Buffer.byteLength(session)} bytes`)
    })
    await this.check('session.unguessable', () => {
      const sessions = [...bySession.keys()]
      const short = sessions.find(x => Buffer.byteLength(x) < MIN_SESSION_CHARS)
      if (short) fail(`session id ${JSON.stringify(short)} has fewer than ${MIN_SESSION_CHARS} characters: it cannot carry 128 random bits`)
      const opens = new Set(this.batches.filter(x => x.answer.op === 'open').map(x => x.batch.session))
      if (opens.size < 2) return skip('fewer than two sessions were opened')
    })
    await this.check('deadlines.fixed', () => {
      if (![...bySession.values()].some(b => b.length > 1)) return skip('no session answered twice')
      for (const [session, batches] of bySession) {
        const b = batches.find(x => x.expiresAt !== batches[0].expiresAt || x.replayUntil !== batches[0].replayUntil)
        if (b) fail(`session ${session.slice(0, 16)}… moved its deadlines from expiresAt ${batches[0].expiresAt}, replayUntil ${batches[0].replayUntil} to ${b.expiresAt}, ${b.replayUntil}`)
      }
    })
    await this.check('deadlines.replay', () => {
      const replay = u64(this.offer.replaySeconds)
      for (const { answer, batch } of this.batches) {
        if (u64(batch.replayUntil) !== u64(batch.expiresAt) + replay) fail(`${answer.name} has replayUntil ${batch.replayUntil}, not expiresAt ${batch.expiresAt} + replaySeconds ${replay}`)
      }
    })
    await this.check('deadlines.session-bound', () => {
      const seconds = u64(this.offer.sessionSeconds)
      for (const { answer, batch } of this.batches) {
        if (answer.op !== 'open') continue
        const at = BigInt(Math.floor(answer.at / 1000))
        const exp = u64(batch.expiresAt)
        if (exp > at + seconds + CLOCK_SKEW || exp + CLOCK_SKEW < at + seconds) fail(`${answer.name} has expiresAt ${exp}, answered at ${at} with sessionSeconds ${seconds} (expected ${at + seconds} ± ${CLOCK_SKEW} s)`)
      }
    })
  }
}

/** Checks after the manifest, skipped together when the manifest is unusable. */
const LATER_CHECKS = Object.keys(RULES).filter(c => !c.startsWith('manifest.'))
/** Checks of the session expiry, run with --long only. */
const EXPIRY_CHECKS = ['long-poll.expiry-cap', 'read.at-expiry', 'open.after-expiry', 'close.expired']
/** Checks that need the main session's open. */
const SESSION_CHECKS = [
  ...SCOPE_FIELDS.map(f => f[0]), 'replay.byte-identical', 'limited.group', 'open.retry', 'open.conflict-limits', 'open.conflict-query', 'open.conflict-rules',
  'cursor.forged', 'session.unknown', 'session.foreign-read', 'close.foreign', 'auth.read-unauthenticated',
  'snapshot.through-w', 'snapshot.complete-phase', 'snapshot.live-after', 'mutation.delivered', 'mutation.once', 'replay.live', 'mutation.last-page', 'live.stable',
  'long-poll.bound', 'long-poll.deadline', 'read.immediate', 'long-poll.wake', 'close.idempotent', 'read.after-close', 'open.after-close', 'close.unknown',
  'snapshot.empty', ...EXPIRY_CHECKS
]

module.exports = { Run, PROFILE, PROBE_ORIGIN, LATER_CHECKS, SESSION_CHECKS, EXPIRY_CHECKS, strictCases, messageOf, slackOf }
