'use strict'
// A durable lookup-live-v1 consumer (BRC-193): opens a session, drains the snapshot,
// follows live changes with long polls, resumes from its stored checkpoint after a
// restart, and starts a new source generation on reset-required. Every batch is
// committed to the native CheckpointStore (redb, src/client) from its exact bytes
// before its cursor is used (BRC-193 §4); membership per source generation follows
// BRC-193 §9 / BRC-192 §10.5.

const crypto = require('node:crypto')
const native = require('../common/native')
const { NativeAuthFetch } = require('../auth/authfetch')

const { PROFILE, PROFILE_LIMITS, canonicalize: canonicalJson, digest } = require('../common/wire')
const PROFILE_MAX_BYTES = PROFILE_LIMITS.maxResponseBytes // BRC-193 §2
const PROFILE_MAX_OBSERVATIONS = PROFILE_LIMITS.maxObservations
const PROFILE_MAX_WAIT_MS = PROFILE_LIMITS.maxWaitMs
// Error bodies: a `limited` body is at most 4096 bytes (BRC-193 §8); other errors are
// small JSON objects too, so a generous but fixed bound keeps reads bounded.
const ERROR_BODY_MAX = 64 * 1024
const MANIFEST_MAX = 256 * 1024 // the manifest bound of BRC-194 (src/manifest/accept.rs)
const OPEN_ATTEMPTS = 3
const U32_MAX = 0xffffffff
// Response headers (names + values) are bounded before anything reads them.
const HEADER_MAX = PROFILE_LIMITS.maxHeaderBytes
const MANIFEST_FUTURE_SKEW = 300
const SELECTION_ECHO = ['x-bsv-overlay-profile', 'x-bsv-overlay-capability']

const { LiveLookupError } = require('./errors')
// Negotiation, the finite refresh adapter and discovery (issue #51): finite.js, discovery.js.
const finite = require('./finite')

// --- native store wrapper --------------------------------------------------

// Native errors arrive with their fields set (js/common/native.js); the client's own type carries them.
function fromNative (e, prefix = '') {
  if (!e || typeof e.code !== 'string' || e.retryable === undefined) return e
  const extra = { retryable: e.retryable, cause: e.cause }
  if (e.retryAfterMs !== undefined) extra.retryAfterMs = e.retryAfterMs
  if (e.limit !== undefined) extra.limit = e.limit
  return new LiveLookupError(e.code, prefix + e.message, extra)
}

function nativeCall (fn) {
  try {
    return fn()
  } catch (e) {
    throw fromNative(e)
  }
}

// Options are closed: a key this version does not know (a misspelling, an option's former
// name) is refused with `invalid` naming it, never ignored with a default meaning.
function knownKeys (what, value, keys) {
  if (value === undefined || value === null) return
  if (typeof value !== 'object') throw new LiveLookupError('invalid', `${what} must be an object`)
  for (const k of Object.keys(value)) {
    if (!keys.includes(k)) throw new LiveLookupError('invalid', `unknown ${what} option \`${k}\` (known: ${keys.join(', ')})`, { option: k })
  }
}

// A source is {provider, service, queryDigest}; access, like epoch and rules, belongs to a
// generation of it (BRC-193 §5). A key naming anything else (an access, from a key built by
// an older version) is refused rather than read as some other source.
const SOURCE_KEY_KEYS = ['provider', 'service', 'queryDigest']
function sourceKeyArg (key) {
  if (key !== null && typeof key === 'object') {
    for (const k of Object.keys(key)) {
      if (!SOURCE_KEY_KEYS.includes(k)) throw new LiveLookupError('invalid', `a source key is {${SOURCE_KEY_KEYS.join(', ')}}: \`${k}\` is not part of it${k === 'access' ? ' (access belongs to a generation of the source)' : ''}`)
    }
  }
  return key
}

const STORE_OPEN_KEYS = ['cacheBytes']
const COMMIT_KEYS = ['maxBytes', 'maxObservations', 'membership', 'openLabel']
const CLIENT_KEYS = ['baseURL', 'chain', 'allowInsecureHttp', 'providerIdentity', 'maxHeaderBytes', 'retry', 'authFetch', 'fetch', 'store', 'limits', 'requestTimeoutMs', 'chainTracker', 'verification']
const LIMIT_KEYS = ['maxBytes', 'maxObservations', 'waitMs']
const RETRY_KEYS = ['initialMs', 'maxMs']
const VERIFICATION_KEYS = ['engine', 'batch', 'concurrency', 'page', 'acceptEvery', 'acceptMs', 'heightPollMs', 'maxBytes', 'maxTransactions', 'maxDepth', 'maxScriptBytes', 'memoryLimit', 'budget']
const FOLLOW_KEYS = ['onRevision', 'onState', 'signal', 'sources', 'pendingBudget', 'waitMs', 'pollIntervalMs', 'membership', 'requiredRulesDigest', 'readAhead', 'finite', 'resolver', 'resolveIntervalMs', 'renew']
const RENEW_KEYS = ['afterGroups', 'afterMs']

/**
 * What onRevision receives: the commit's outcome and bytes, the source's state, and its
 * membership and reconciled state read on first use from the store as of the event's
 * revision (one native read under the commit lock, so they describe the same commit).
 * Reading the lists costs time in the size of the catalogue; a follow whose callback does
 * not read them commits at the speed of its batches (bench/receipt.js). For the callback's
 * whole synchronous part no other commitBatchAsync applies (the follow loop holds them), so
 * the lists are readable there whatever other sources commit; after its first await a
 * later commit makes a list not yet read throw `conflict` (call store.revisionSnapshot()).
 */
class RevisionEvent {
  constructor (store, source, sourceKey, outcome, batch) {
    this.source = source
    this.sourceKey = sourceKey
    /** null for the stored state a follow delivers at its start (`restored`). */
    this.outcome = outcome
    /** The exact response bytes that were committed (null when `restored`). */
    this.batch = batch
    /** The state committed by an earlier run, delivered before any request. */
    this.restored = outcome === null
    this.revision = store.revision()
    this.state = store.state(sourceKey)
    Object.defineProperty(this, '_store', { value: store })
  }

  _snapshot () {
    if (!this._snap) Object.defineProperty(this, '_snap', { value: this._store.revisionSnapshot(this.sourceKey, this.revision) })
    return this._snap
  }

  get members () { return this._snapshot().members }
  get partialMembers () { return this._snapshot().partialMembers }
  get reconciled () { return this._snapshot().reconciled }
}

/** Durable checkpoint store (one directory, src/client/db.rs). See docs/client.md. */
class CheckpointStore {
  constructor (inner) {
    this._inner = inner
    this._commits = 0 // pool writes not yet settled (see whenIdle)
    this._idle = null
  }

  static open (path, options) {
    knownKeys('CheckpointStore.open', options, STORE_OPEN_KEYS)
    return new CheckpointStore(nativeCall(() => native.CheckpointStore.open(path, options ?? null)))
  }
  close () { return nativeCall(() => this._inner.close()) }
  /** Keys and bytes per key space ({space: {keys, bytes}}); scans the whole store. */
  spaceUsage () { return nativeCall(() => this._inner.spaceUsage()) }
  beginGeneration (sourceKey, label) { return nativeCall(() => this._inner.beginGeneration(sourceKeyArg(sourceKey), label ?? null)) }
  sourceForLabel (label) { return nativeCall(() => this._inner.sourceForLabel(label)) }
  setPendingOpen (label, requestId) { return nativeCall(() => this._inner.setPendingOpen(label, requestId)) }
  pendingOpen (label) { return nativeCall(() => this._inner.pendingOpen(label)) ?? null }
  // A finite source's generations are local: no session, no cursor (js/client/finite.js).
  checkpoint (sourceKey) { return finite.localCheckpoint(nativeCall(() => this._inner.checkpoint(sourceKeyArg(sourceKey)))) }
  renewal (sourceKey) { return nativeCall(() => this._inner.renewal(sourceKeyArg(sourceKey))) }
  commitBatch (sourceKey, generation, expectedCursor, batch, options) {
    knownKeys('commitBatch', options, COMMIT_KEYS)
    return nativeCall(() => this._inner.commitBatch(sourceKeyArg(sourceKey), generation, expectedCursor ?? null, batch, options ?? null))
  }
  /**
   * commitBatch off the JS thread (on the libuv pool): resolves with the same outcome once
   * the commit is durable, or rejects with the same error. Store calls made while it runs
   * wait for it, so none sees the commit before it is flushed.
   */
  async commitBatchAsync (sourceKey, generation, expectedCursor, batch, options) {
    knownKeys('commitBatch', options, COMMIT_KEYS)
    return this._onPool(() => this._inner.commitBatchAsync(sourceKeyArg(sourceKey), generation, expectedCursor ?? null, batch, options ?? null))
  }

  /** acceptVerifications off the JS thread, as commitBatchAsync is (the verifier uses it). */
  async acceptVerificationsAsync (results) {
    return this._onPool(() => this._inner.acceptVerificationsAsync(results))
  }

  // A write on the libuv pool (src/node/client.rs WriteTask), counted until it settles so
  // whenIdle covers it.
  async _onPool (start) {
    const pending = nativeCall(start)
    this._commits++
    try {
      return JSON.parse(await pending)
    } catch (e) {
      throw fromNative(e)
    } finally {
      if (--this._commits === 0 && this._idle) {
        this._idle.resolve()
        this._idle = null
      }
    }
  }

  /**
   * Resolves when no write on the pool (commitBatchAsync, acceptVerificationsAsync) is
   * running. A synchronous store call made while one runs blocks the JS thread until it is
   * durable; background work (the verifier) waits here instead.
   */
  whenIdle () {
    if (this._commits === 0) return Promise.resolve()
    if (!this._idle) {
      let resolve
      const promise = new Promise(r => { resolve = r })
      this._idle = { promise, resolve }
    }
    return this._idle.promise
  }

  // While held, commitBatchAsync commits wait before they apply: the revision read
  // meanwhile stays the newest (the follow loop holds it around an onRevision callback's
  // synchronous part, so the event's lists stay readable whatever other sources commit).
  _holdCommits () { nativeCall(() => this._inner.holdCommits()) }
  _releaseCommits () { this._inner.releaseCommits() }

  markVerified (sourceKey, generation, groupId) { return nativeCall(() => this._inner.markVerified(sourceKeyArg(sourceKey), generation, groupId)) }
  // Lists that grow with the catalogue arrive as JSON text (src/node/client.rs json_text).
  members (sourceKey) { return finite.finiteRows(JSON.parse(nativeCall(() => this._inner.members(sourceKeyArg(sourceKey))))) }
  partialMembers (sourceKey) { return finite.finiteRows(JSON.parse(nativeCall(() => this._inner.partialMembers(sourceKeyArg(sourceKey))))) }
  state (sourceKey) { return nativeCall(() => this._inner.state(sourceKeyArg(sourceKey))) }
  revision () { return nativeCall(() => this._inner.revision()) }

  // Spend reconciliation (BRC-192 §10), in the same store. See docs/client.md.
  configureReconciler (config) { return nativeCall(() => this._inner.configureReconciler(config)) }
  addHeaders (headers) { return nativeCall(() => this._inner.addHeaders(headers)) }
  defineView (id, tipHash) { return nativeCall(() => this._inner.defineView(id, tipHash)) }
  defineContext (id, { tipHeight, medianTimePast }) { return nativeCall(() => this._inner.defineContext(id, tipHeight, medianTimePast)) }
  addAnchor (raw, placement) { return nativeCall(() => this._inner.addAnchor(raw, placement ?? null)) }
  receiveTransactions (source, items) { return nativeCall(() => this._inner.receiveTransactions(source, items)) }
  setContext (id) { return nativeCall(() => this._inner.setContext(id)) }
  pendingVerifications (txid, page) {
    // napi reads an absent page field as unset, a null one as an object: pass only what is set.
    const p = page ? { ...(page.after ? { after: page.after } : {}), ...(page.limit !== undefined ? { limit: page.limit } : {}) } : null
    return JSON.parse(nativeCall(() => this._inner.pendingVerifications(txid ?? null, p)))
  }
  verificationEvidence (txid, variantId) { return nativeCall(() => this._inner.verificationEvidence(txid, variantId)) ?? null }
  verdicts (txid) { return nativeCall(() => this._inner.verdicts(txid)) }
  acceptVerifications (results) { return nativeCall(() => this._inner.acceptVerifications(results)) }
  requeueLimited (policy) { return nativeCall(() => this._inner.requeueLimited(policy)) }
  addPlacement (txid, placement) { return nativeCall(() => this._inner.addPlacement(txid, placement)) }
  reconciledView () { return JSON.parse(nativeCall(() => this._inner.reconciledView())) }
  reconciledState (chain) { return finite.finiteReconciled(nativeCall(() => this._inner.reconciledState(chain.network, chain.genesisHash))) }
  /**
   * Membership and reconciled state of one revision, read together. With `atRevision`,
   * a `conflict` error once the store has moved past it.
   */
  revisionSnapshot (sourceKey, atRevision) {
    return finite.finiteSnapshot(JSON.parse(nativeCall(() => this._inner.revisionSnapshot(sourceKeyArg(sourceKey), atRevision ?? null))))
  }
}

// Digests (BRC-192 §1): the package's one RFC 8785 and digest(T, B) (Rust wire module), above.

// When received groups enter source membership (docs/client.md "Membership"): 'verified'
// (once the group's evidence has verified, in receipt order: BRC-193 §9), 'manual' (at
// store.markVerified, in receipt order) or 'claims' (on receipt: what the source lists,
// before its evidence is checked). A follow with a ChainTracker defaults to 'verified';
// without one nothing verifies, so the application names its rule.
const MEMBERSHIP = ['claims', 'verified', 'manual']
// `renew: {afterGroups?, afterMs?}`: at least one, positive safe integers.
function checkRenew (r) {
  if (r === undefined) return
  if (r === null || typeof r !== 'object') throw new LiveLookupError('invalid', 'renew must be an object: {afterGroups?, afterMs?}', { option: 'renew' })
  knownKeys('renew', r, RENEW_KEYS)
  if (r.afterGroups === undefined && r.afterMs === undefined) throw new LiveLookupError('invalid', 'renew needs afterGroups or afterMs', { option: 'renew' })
  for (const k of RENEW_KEYS) {
    if (r[k] !== undefined && (!Number.isSafeInteger(r[k]) || r[k] < 1)) throw new LiveLookupError('invalid', `renew.${k} must be a positive integer`, { option: k })
  }
}

function membershipOf (opts, verifies) {
  if ('verified' in opts) throw new LiveLookupError('invalid', "follow's `verified` option is now `membership` ('claims', 'verified' or 'manual')")
  if (opts.membership === undefined) {
    if (verifies) return 'verified'
    throw new LiveLookupError('invalid', "follow without a chainTracker needs an explicit `membership`: 'claims' (rows before their evidence is checked) or 'manual' (the application calls store.markVerified)")
  }
  const m = opts.membership
  if (!MEMBERSHIP.includes(m)) throw new LiveLookupError('invalid', `membership must be one of ${MEMBERSHIP.join(', ')}`)
  return m
}

// The label a follow stores its source under (CheckpointStore.sourceForLabel); applications
// use LiveLookupClient#sourceKey(service, query) rather than building it.
function sourceLabel (baseURL, service, query) {
  return JSON.stringify([baseURL, service, digest('lookup-query', { service, query })])
}

// --- crash points for tests --------------------------------------------------
// OLL_CLIENT_CRASH=after-receive|after-commit (and OLL_CLIENT_CRASH_AT=n, the n-th
// batch, default 1) SIGKILLs this process at that point, so tests can prove that
// nothing is lost and nothing is applied twice across a crash.
let crashCounter = 0
function crashPoint (name) {
  if (process.env.OLL_CLIENT_CRASH !== name) return
  crashCounter++
  if (crashCounter >= Number(process.env.OLL_CLIENT_CRASH_AT || 1)) process.kill(process.pid, 'SIGKILL')
}

// --- HTTP --------------------------------------------------------------------

// An AuthFetch would pay a 402 automatically; this profile forbids that (BRC-193 §1,
// §6). A view of the caller's AuthFetch whose payment step hands the 402 back.
function withoutFunding (authFetch) {
  const view = Object.create(authFetch)
  view.handlePaymentAndRetry = async (_url, _config, response) => response
  return view
}

async function readCapped (response, max) {
  try {
    return await readCappedInner(response, max)
  } catch (e) {
    throw transportError(e) // a reset in the middle of a body
  }
}

async function readCappedInner (response, max) {
  const body = response.body
  if (Buffer.isBuffer(body)) { // NativeAuthFetch's _fetchBytes: read whole, within its maxBodyBytes
    if (body.length > max) throw new LiveLookupError('limited', `response body exceeds ${max} bytes`)
    return body
  }
  if (body && typeof body.getReader === 'function') {
    const reader = body.getReader()
    const chunks = []
    let total = 0
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      total += value.byteLength
      if (total > max) {
        await reader.cancel().catch(() => {})
        throw new LiveLookupError('limited', `response body exceeds ${max} bytes`)
      }
      chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength))
    }
    return Buffer.concat(chunks, total)
  }
  const buf = Buffer.from(await response.arrayBuffer())
  if (buf.length > max) throw new LiveLookupError('limited', `response body exceeds ${max} bytes`)
  return buf
}

// An error response must be the protocol's error object; anything else is an
// operational failure, never an empty success (BRC-193 §6).
function errorFrom (status, bytes) {
  let parsed
  try { parsed = JSON.parse(bytes.toString('utf8')) } catch { parsed = null }
  const e = parsed && parsed.version === 1 && parsed.error
  // retryAfterMs is a U32 (BRC-193 §6): any other value makes the body invalid.
  const after = e && e.retryAfterMs
  const afterOk = after === undefined || (Number.isInteger(after) && after >= 0 && after <= U32_MAX)
  if (e && typeof e.code === 'string' && typeof e.message === 'string' && afterOk) {
    return new LiveLookupError(e.code, e.message, {
      status,
      retryable: e.retryable === true,
      retryAfterMs: after,
      limit: e.limit
    })
  }
  // A 5xx without the protocol's error object is a failure of the path to the provider
  // (a proxy, a restarting process): retried like a refused connection.
  const transport = status >= 500
  return new LiveLookupError('unavailable', `HTTP ${status} without a valid protocol error body`, { status, retryable: transport, transport })
}

// A failure below HTTP (refused, reset, DNS, AuthFetch's "Network error while sending
// authenticated request"): always `unavailable`, always retryable.
function transportError (e) {
  if (e instanceof LiveLookupError) return e
  return new LiveLookupError('unavailable', `transport failure: ${e && e.message}`, { retryable: true, transport: true, cause: e })
}

// An application callback's own error is handed back unchanged, never retried.
class CallbackFailure { constructor (error) { this.error = error } }

function headerBytes (headers) {
  let n = 0
  for (const [k, v] of headers) n += k.length + v.length + 4
  return n
}

function checkHeaders (res, max) {
  if (headerBytes(res.headers) > max) throw new LiveLookupError('limited', `response headers exceed ${max} bytes`)
}

function nativeManifestError (e) {
  return e && typeof e.code === 'string' && e.retryable !== undefined
    ? fromNative(e, 'capability manifest: ')
    : new LiveLookupError('invalid', `capability manifest: ${e && e.message}`)
}

/**
 * Verifies a signed manifest natively (src/manifest/accept.rs) for `client`'s base URL and
 * chain, signed by `identity` when given; its errors as the client's.
 */
function acceptManifestFor (client, signed, identity) {
  try {
    return native.acceptManifest(signed, {
      identity,
      baseURL: client.baseURL,
      network: client.chain.network,
      genesisHash: client.chain.genesisHash,
      now: Math.floor(Date.now() / 1000),
      maxFutureSkew: MANIFEST_FUTURE_SKEW
    })
  } catch (e) {
    throw nativeManifestError(e)
  }
}

function sameChain (a, b) {
  return !!a && !!b && a.network === b.network && a.genesisHash === b.genesisHash
}

function randomRequestId () {
  return crypto.randomBytes(16).toString('hex') // 128 bits (BRC-193 §2)
}

function sleep (ms, signal) {
  return new Promise(resolve => {
    const t = setTimeout(done, ms)
    function done () { clearTimeout(t); signal?.removeEventListener('abort', done); resolve() }
    signal?.addEventListener('abort', done, { once: true })
  })
}

function timedOut (ms) {
  return new LiveLookupError('unavailable', `no response within ${ms} ms`, { retryable: true })
}

/**
 * One request with plain `fetch`, bounded by `ms` and the caller's `signal`, errors mapped as
 * the client's (`cancelled`, `unavailable` retryable on the deadline, transport failures).
 */
async function plainFetch (fetchFn, method, url, headers, body, ms, signal) {
  const timeout = AbortSignal.timeout(ms)
  try {
    return await fetchFn(url, {
      method,
      headers: { ...headers, 'Accept-Encoding': 'identity' },
      body,
      redirect: 'manual',
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout
    })
  } catch (e) {
    if (signal?.aborted) throw new LiveLookupError('cancelled', 'aborted')
    if (timeout.aborted) throw timedOut(ms)
    throw transportError(e)
  }
}

function raceDeadline (promise, ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => finish(reject, timedOut(ms)), ms)
    const onAbort = () => finish(reject, new LiveLookupError('cancelled', 'aborted'))
    function finish (f, v) { clearTimeout(t); signal?.removeEventListener('abort', onAbort); f(v) }
    signal?.addEventListener('abort', onAbort, { once: true })
    promise.then(v => finish(resolve, v), e => finish(reject, e))
  })
}

class LiveLookupClient {
  /**
   * @param {object} o
   * @param {string} o.baseURL the provider's advertised base URL (https:, or http: with allowInsecureHttp)
   * @param {{network:string, genesisHash:string}} o.chain the chain this application follows
   * @param {object} [o.authFetch] an @bsv/sdk AuthFetch or a NativeAuthFetch (BRC-103/104)
   * @param {Function} [o.fetch] plain fetch, for an explicitly unauthenticated public service
   * @param {CheckpointStore} o.store
   * See js/client/client.d.ts for the other options.
   */
  constructor (options) {
    knownKeys('LiveLookupClient', options, CLIENT_KEYS)
    knownKeys('limits', options.limits, LIMIT_KEYS)
    knownKeys('retry', options.retry, RETRY_KEYS)
    knownKeys('verification', options.verification, VERIFICATION_KEYS)
    const { baseURL, authFetch, fetch, store, chain, limits = {}, requestTimeoutMs = 30000, chainTracker, verification } = options
    // Without a baseURL the client follows only hosts a resolver finds (follow's `resolver`).
    if (baseURL !== undefined && (typeof baseURL !== 'string' || !/^https?:\/\//.test(baseURL))) throw new LiveLookupError('invalid', 'baseURL must be an https URL')
    if (baseURL !== undefined && baseURL.startsWith('http:') && options.allowInsecureHttp !== true) {
      throw new LiveLookupError('invalid', 'baseURL must be https: (allowInsecureHttp: true is for local development only)')
    }
    if (!chain || typeof chain.network !== 'string' || !/^[0-9a-f]{64}$/.test(chain.genesisHash || '')) {
      throw new LiveLookupError('invalid', 'chain {network, genesisHash} is required')
    }
    if (!store) throw new LiveLookupError('invalid', 'a CheckpointStore is required')
    if (!authFetch && typeof (fetch ?? globalThis.fetch) !== 'function') throw new LiveLookupError('invalid', 'authFetch or fetch is required')
    this._options = options
    this.baseURL = baseURL === undefined ? null : baseURL.replace(/\/+$/, '')
    this.chain = { network: chain.network, genesisHash: chain.genesisHash }
    this.providerIdentity = options.providerIdentity ?? null
    this._rawAuthFetch = authFetch ?? null
    this.authFetch = authFetch ? withoutFunding(authFetch) : null
    // A NativeAuthFetch whose fetch is its own (not a subclass's override) is asked for bytes.
    this._bytesTransport = authFetch instanceof NativeAuthFetch && authFetch.fetch === NativeAuthFetch.prototype.fetch ? authFetch : null
    this.fetch = authFetch ? null : (fetch ?? globalThis.fetch)
    this.store = store
    this.limits = {
      maxBytes: Math.min(limits.maxBytes ?? PROFILE_MAX_BYTES, PROFILE_MAX_BYTES),
      maxObservations: Math.min(limits.maxObservations ?? PROFILE_MAX_OBSERVATIONS, PROFILE_MAX_OBSERVATIONS),
      waitMs: Math.min(limits.waitMs ?? 20000, PROFILE_MAX_WAIT_MS)
    }
    this.maxHeaderBytes = Math.min(options.maxHeaderBytes ?? HEADER_MAX, HEADER_MAX)
    this.requestTimeoutMs = requestTimeoutMs
    const retry = options.retry ?? {}
    this.retry = { initialMs: retry.initialMs ?? 500, maxMs: retry.maxMs ?? 30000 }
    this._capability = null
    this.manifest = null
    // With a ChainTracker, evidence is verified after each receipt commit (js/client/verifier.js).
    this.verifier = chainTracker ? new (require('./verifier').EvidenceVerifier)({ store, chainTracker, ...verification }) : null
  }

  // Runs in the background: receipt never waits for verification; the jobs are durable,
  // so one that a crash interrupts runs again after the restart.
  _verifyAfterCommit () {
    if (this.verifier) this.verifier.run().catch(e => { this.verificationError = e })
  }

  // Every request has a deadline (long-poll wait plus a margin), so a provider that
  // never answers is an `unavailable` error, never a hang.
  async _send (method, url, headers, body, signal, waitMs = 0) {
    const ms = waitMs + this.requestTimeoutMs
    let res
    if (this.authFetch) {
      // AuthFetch carries only content-type, authorization and x-bsv-* headers inside
      // the signed BRC-104 request, so Cache-Control cannot be sent through it;
      // NativeAuthFetch sends it unsigned beside them (BRC-193 §2). AuthFetch
      // takes no AbortSignal: the deadline and the caller's signal race it instead.
      // NativeAuthFetch does take one, aborted once the race is lost to release the
      // socket. From a NativeAuthFetch the verified answer comes as bytes and a Map
      // of its headers, without a Response (_fetchBytes): readCapped and the header
      // checks below read either.
      // Nothing is sent once the caller gave up (its signal's abort event has passed).
      if (signal?.aborted) throw new LiveLookupError('cancelled', 'aborted')
      const signed = {}
      for (const [k, v] of Object.entries(headers)) if (this._bytesTransport || k.toLowerCase() !== 'cache-control') signed[k] = v
      const release = new AbortController()
      const config = { method, headers: signed, body, signal: release.signal }
      const sent = this._bytesTransport ? this._bytesTransport._fetchBytes(url, config) : this.authFetch.fetch(url, config)
      try {
        res = await raceDeadline(sent, ms, signal)
      } catch (e) {
        release.abort()
        throw transportError(e)
      }
    } else {
      res = await plainFetch(this.fetch, method, url, headers, body, ms, signal)
    }
    checkHeaders(res, this.maxHeaderBytes)
    return res
  }

  // After a transport failure the provider may be a new process: its BRC-103 session
  // and manifest are fetched again (a new handshake; the manifest is re-verified).
  _forgetConnection () {
    this._capability = null
    const peers = this._rawAuthFetch && this._rawAuthFetch.peers
    if (peers) delete peers[new URL(this.baseURL).origin]
  }

  /**
   * The capability digest of the provider's signed manifest (BRC-194), after verifying
   * the manifest: its BRC-77 signature by the provider identity (the identity AuthFetch
   * authenticated, and `providerIdentity` when configured), its base URL, its chain and
   * its validity window (src/manifest/accept.rs).
   */
  async capabilityDigest (signal) {
    if (this._capability) return this._capability
    const res = await this._send('GET', this.baseURL + '/overlay/v1/capabilities', { 'Cache-Control': 'no-store' }, undefined, signal)
    const bytes = await readCapped(res, res.status === 200 ? MANIFEST_MAX : ERROR_BODY_MAX)
    if (res.status !== 200) throw errorFrom(res.status, bytes)
    let signed
    try { signed = JSON.parse(bytes.toString('utf8')) } catch { signed = null }
    if (!signed || typeof signed.body !== 'object' || signed.body === null || typeof signed.signature !== 'string') {
      throw new LiveLookupError('invalid', 'capabilities response is not a signed manifest')
    }
    const identity = this._identityForManifest()
    const accepted = acceptManifestFor(this, signed, identity)
    this.manifest = accepted
    this._capability = accepted.digest
    return this._capability
  }

  _identityForManifest () {
    if (!this.authFetch) return this.providerIdentity
    const peer = this.authFetch.peers && this.authFetch.peers[new URL(this.baseURL).origin]
    const authenticated = peer && typeof peer.identityKey === 'string' ? peer.identityKey : null
    if (!authenticated) throw new LiveLookupError('unauthorized', 'no BRC-103 identity for the provider')
    if (this.providerIdentity && authenticated !== this.providerIdentity) {
      throw new LiveLookupError('invalid', 'the authenticated provider is not the configured providerIdentity')
    }
    return authenticated
  }

  // One POST; resolves with the exact 200 body bytes or throws the protocol error.
  // A `context-changed` answer means the provider's manifest changed: fetch it again
  // and repeat the request once with the new capability digest (BRC-194).
  async _post (path, payload, signal, waitMs = 0) {
    try {
      return await this._postOnce(path, payload, signal, waitMs)
    } catch (e) {
      if (e.code !== 'context-changed') throw e
      this._capability = null
      return this._postOnce(path, payload, signal, waitMs)
    }
  }

  async _postOnce (path, payload, signal, waitMs) {
    const headers = {
      'Content-Type': 'application/json',
      'Cache-Control': 'no-store',
      'x-bsv-overlay-profile': PROFILE,
      'x-bsv-overlay-capability': await this.capabilityDigest(signal)
    }
    const res = await this._send('POST', `${this.baseURL}/overlay/v1/lookup/${path}`, headers, JSON.stringify(payload), signal, waitMs)
    if (res.status === 402) {
      // Never funding: charging is outside this profile.
      await readCapped(res, ERROR_BODY_MAX).catch(() => {})
      throw new LiveLookupError('unsupported', 'provider asked for payment (402); lookup-live-v1 does not pay', { status: 402 })
    }
    const encoding = res.headers.get('content-encoding')
    if (encoding && encoding.toLowerCase() !== 'identity') {
      throw new LiveLookupError('invalid', `response Content-Encoding ${encoding} is not identity`)
    }
    const ok = res.status === 200
    const bytes = await readCapped(res, ok ? this.limits.maxBytes : ERROR_BODY_MAX)
    if (!ok) throw errorFrom(res.status, bytes)
    // A success answers the selection the request made: both selection headers are
    // echoed exactly (BRC-194 §1); under BRC-104 they are part of the signed response.
    for (const name of SELECTION_ECHO) {
      if (res.headers.get(name) !== headers[name]) {
        throw new LiveLookupError('invalid', `response does not echo ${name}`)
      }
    }
    // A BRC-104 response carries only the signed headers (no Content-Type); the body
    // itself is authenticated and parsed strictly by the native commit.
    const type = res.headers.get('content-type') || ''
    if (!this.authFetch && !/^application\/json\b/i.test(type)) throw new LiveLookupError('invalid', `batch Content-Type ${type}`)
    return bytes
  }

  // Who must be named as scope.provider (BRC-193 §1): the identity key the BRC-103
  // handshake authenticated, or the exact origin of an unauthenticated service.
  _expectedProvider () {
    const origin = new URL(this.baseURL).origin
    if (!this.authFetch) return origin
    const peer = this.authFetch.peers && this.authFetch.peers[origin]
    return peer && typeof peer.identityKey === 'string' ? peer.identityKey : null
  }

  // The source key of an open response. Routing only: the native commit re-parses the
  // exact bytes and checks every batch of the generation against this key and the open's
  // scope (so chain, rules digest and access cannot change inside a generation). Access is
  // not part of the key: a new partition is a new generation of the same source (§5).
  _sourceKeyOf (bytes, service, queryDigest, pinnedRules) {
    let scope
    try { scope = JSON.parse(bytes.toString('utf8')).scope } catch { scope = null }
    if (!scope || typeof scope !== 'object') throw new LiveLookupError('invalid', 'batch has no scope')
    const expected = this._expectedProvider()
    if (expected === null || scope.provider !== expected) {
      throw new LiveLookupError('invalid', `batch scope provider ${scope.provider} is not the provider this client talked to`)
    }
    if (scope.service !== service || scope.queryDigest !== queryDigest) {
      throw new LiveLookupError('invalid', 'batch scope is for another service or query')
    }
    const key = { provider: scope.provider, service: scope.service, queryDigest: scope.queryDigest }
    // A session on another chain or under other rules is not the followed source any
    // more: never committed, handled like reset-required (see follow).
    if (!sameChain(scope.chain, this.chain)) {
      throw new LiveLookupError('reset-required', 'batch scope.chain is not the configured chain', { mismatch: 'chain', sourceKey: key })
    }
    if (pinnedRules && scope.rulesDigest !== pinnedRules) {
      throw new LiveLookupError('reset-required', `batch scope.rulesDigest ${scope.rulesDigest} is not the pinned digest`, { mismatch: 'rulesDigest', sourceKey: key })
    }
    return key
  }

  // The commit runs on the libuv pool (commitBatchAsync): the JS thread stays free for the
  // application, the verifier's settlement and the provider's next answer meanwhile.
  // `whileCommitting` runs once the commit is under way (the follow loop reads ahead then).
  async _commit (key, generation, expectedCursor, bytes, membership, openLabel, whileCommitting) {
    crashPoint('after-receive')
    const pending = this.store.commitBatchAsync(key, generation, expectedCursor, bytes, {
      maxBytes: this.limits.maxBytes,
      maxObservations: this.limits.maxObservations,
      membership,
      openLabel
    })
    if (whileCommitting) whileCommitting()
    const outcome = await pending
    crashPoint('after-commit')
    this._verifyAfterCommit()
    return outcome
  }

  async _open (service, query, queryDigest, label, opts) {
    // BRC-194 §1: the manifest is read before any open, and a service it offers no
    // lookup-live-v1 for is refused here, never opened (js/client/finite.js).
    await this.capabilityDigest(opts.signal)
    const refused = finite.notOffered(this, service)
    if (refused) throw refused
    // The request id is stored before it is sent: after a crash the same open is
    // retried and the provider answers with its saved first batch (BRC-193 §8). The
    // commit of that batch removes it.
    let requestId = this.store.pendingOpen(label)
    if (!requestId) {
      requestId = randomRequestId()
      this.store.setPendingOpen(label, requestId)
    }
    for (let attempt = 1; ; attempt++) {
      const open = { version: 1, requestId, service, query, limits: { ...this.limits, waitMs: 0 } }
      if (opts.requiredRulesDigest) open.requiredRulesDigest = opts.requiredRulesDigest
      let bytes = null
      try {
        bytes = await this._post('open', open, opts.signal)
        const key = this._sourceKeyOf(bytes, service, queryDigest, opts.requiredRulesDigest)
        const generation = this.store.beginGeneration(key, label)
        const outcome = await this._commit(key, generation, null, bytes, opts.membership, label)
        return { key, outcome, bytes }
      } catch (e) {
        // A response refused here would come back identically for the same request
        // id, so a later open starts from a fresh one.
        if (bytes !== null) {
          this.store.setPendingOpen(label, randomRequestId())
          await this._discard(bytes, opts.signal)
        }
        // A stored request id may be fenced (expired) or its parameters changed (conflict).
        if ((e.code === 'expired' || e.code === 'conflict') && attempt < OPEN_ATTEMPTS) {
          requestId = randomRequestId()
          this.store.setPendingOpen(label, requestId)
          continue
        }
        throw e
      }
    }
  }

  // A refused open still created a session on the provider: close it (best effort) so
  // retries do not pile up sessions against the provider's per-principal limit.
  async _discard (bytes, signal) {
    let session = null
    try { session = JSON.parse(bytes.toString('utf8')).session } catch {}
    if (typeof session !== 'string') return
    await this._post('close', { version: 1, session }, signal).catch(() => {})
  }

  /**
   * The source key this client's follow of `query` on `service` committed under (at
   * `baseURL`, default this client's), or null before its first commit.
   */
  sourceKey (service, query, baseURL = this.baseURL) {
    return this.store.sourceForLabel(sourceLabel(baseURL.replace(/\/+$/, ''), service, query))
  }

  // One revision per accepted commit (a RevisionEvent: its lists are read on demand), and
  // one with outcome null for the stored state at the start of a follow.
  // Commits of other sources (on the pool) are held from before the event reads its
  // revision until the callback's synchronous part has returned, so the lists it promises
  // stay readable for all of that part; after its first await they may be past.
  async _emit (onRevision, key, outcome, bytes) {
    if (!onRevision) return
    let returned
    try {
      // Holding waits for a write already applying: wait for it here instead, off the thread.
      await this.store.whenIdle()
      this.store._holdCommits()
      try {
        returned = onRevision(new RevisionEvent(this.store, this.baseURL, key, outcome, bytes))
      } finally {
        this.store._releaseCommits()
      }
      await returned
    } catch (e) {
      throw new CallbackFailure(e)
    }
  }

  _delay (attempt, err) {
    // The provider's retryAfterMs (a validated U32) is honoured up to the local cap.
    if (err && err.retryAfterMs !== undefined) return Math.min(err.retryAfterMs, this.retry.maxMs)
    // Capped exponential backoff with jitter in [half, full] of the step.
    const step = Math.min(this.retry.maxMs, this.retry.initialMs * 2 ** Math.min(attempt - 1, 30))
    return Math.round(step / 2 + Math.random() * step / 2)
  }

  /**
   * Follows `query` on `service` until the handle is closed or `signal` aborts.
   * Resumes from the stored checkpoint; on reset-required or equivocation, begins a
   * new generation and opens again; transport failures are retried (connection state
   * `retrying`) from the last committed cursor. With `sources: [url, ...]`, follows the
   * same query on each provider into the same store (see docs/client.md).
   * @returns {FollowHandle} a handle with `close()` and `done`; awaiting it awaits `done`.
   */
  follow (service, query, opts = {}) {
    const ac = new AbortController()
    if (opts.signal) {
      if (opts.signal.aborted) ac.abort()
      else opts.signal.addEventListener('abort', () => ac.abort(), { once: true })
    }
    let done
    try {
      // Options are checked before anything starts: a refused follow touches neither
      // the store nor the network.
      if (!('verified' in opts)) knownKeys('follow', opts, FOLLOW_KEYS) // `verified` has its own message
      finite.checkFollowOptions(opts)
      checkRenew(opts.renew)
      if (this.baseURL === null && !opts.resolver && !Array.isArray(opts.sources)) throw new LiveLookupError('invalid', 'a client without baseURL follows only with `resolver` or `sources`')
      const o = { ...opts, signal: ac.signal, membership: membershipOf(opts, this.verifier !== null) }
      // With `finite`, each provider is negotiated through its manifest (finite.js); with
      // `resolver`, the providers are the hosts SLAP lists for the service (discovery.js).
      done = opts.resolver
        ? require('./discovery').followDiscovered(this, service, query, o)
        : Array.isArray(opts.sources)
          ? this._followMany(service, query, o)
          : finite.followProvider(this, service, query, o)
    } catch (e) {
      done = Promise.reject(e)
    }
    return {
      done,
      close () { ac.abort(); return done.then(() => {}, () => {}) },
      then (resolve, reject) { return done.then(resolve, reject) },
      catch (reject) { return done.catch(reject) }
    }
  }

  async _followMany (service, query, opts) {
    const { sources, ...rest } = opts
    if (sources.length === 0) throw new LiveLookupError('invalid', 'sources is empty')
    const urls = sources.map(u => (typeof u === 'string' ? u : '').replace(/\/+$/, ''))
    if (new Set(urls).size !== urls.length) throw new LiveLookupError('invalid', 'sources repeat a provider')
    // One client per provider, all on this client's store, chain and options; the store
    // partitions checkpoints, generations and memberships by source and keeps one
    // reconciled graph across them.
    // They share this client's verifier too: one run at a time over the store's jobs.
    const clients = urls.map(u => {
      if (u === this.baseURL) return this
      const c = new LiveLookupClient({ ...this._options, baseURL: u, chainTracker: undefined })
      c.verifier = this.verifier
      return c
    })
    // A callback's own error ends every source's follow, not only the one it came from.
    const all = new AbortController()
    if (rest.signal.aborted) all.abort()
    else rest.signal.addEventListener('abort', () => all.abort(), { once: true })
    const each = { ...rest, signal: all.signal }
    const results = await Promise.all(clients.map(c => finite.followProvider(c, service, query, each).then(
      r => ({ source: c.baseURL, sourceKey: r.sourceKey, error: null }),
      async error => {
        // One provider failing for good does not stop the others: its membership is
        // shown stale (connection 'failed') while they continue.
        if (error instanceof LiveLookupError) {
          if (rest.onState) await Promise.resolve(rest.onState({ source: c.baseURL, sourceKey: null, connection: 'failed', error })).catch(() => {})
          return { source: c.baseURL, sourceKey: null, error }
        }
        all.abort()
        throw error
      })))
    return { sources: results }
  }

  async _follow (service, query, opts) {
    const { onRevision, onState, signal } = opts
    const o = {
      signal,
      membership: opts.membership,
      requiredRulesDigest: opts.requiredRulesDigest,
      waitMs: Math.min(opts.waitMs ?? this.limits.waitMs, PROFILE_MAX_WAIT_MS),
      pollIntervalMs: opts.pollIntervalMs ?? 1000,
      pendingBudget: Math.min(opts.pendingBudget ?? 65536, 65536),
      readAhead: opts.readAhead === true,
      renew: opts.renew ?? null
    }
    const queryDigest = digest('lookup-query', { service, query })
    const label = sourceLabel(this.baseURL, service, query)
    let key = this.store.sourceForLabel(label)
    this._verifyAfterCommit() // resumes jobs left pending by an earlier run
    // What the next `connected` state reports (StateEvent.progress): 'resumed' from a stored
    // cursor, 'opened', 'started-over' (a new generation, with the reason) or 'snapshot-complete'.
    let progress = null
    let startOver = null // why the next open replaces the source's generation
    const stored = key ? this.store.checkpoint(key) : null
    // The scope.access the source was last served under: an open under another one (the
    // provider's policy moved this client's partition) is a new generation of the same
    // source, reported as a start-over for 'access-changed' (BRC-193 §5).
    let servedAccess = stored ? stored.access : null
    if (stored) {
      // A restarted application shows what it committed at once, before any request.
      try {
        await this._emit(onRevision, key, null, null)
      } catch (e) {
        throw e instanceof CallbackFailure ? e.error : e
      }
      if (stored.cursor && !stored.invalidated) progress = { progress: 'resumed', generation: stored.generation, cursor: stored.cursor }
      else if (stored.invalidated) startOver = stored.invalidated
    }
    let reopen = false
    let attempt = 0
    let connection = null
    // Generations invalidated in a row (equivocation, an invalid member) since one last
    // completed its snapshot intact: a provider that keeps serving the same invalid group
    // is opened again with backoff, not at once in a loop.
    let invalidRun = 0
    const read = (session, cursor) => this._post('read', {
      version: 1,
      session,
      cursor,
      limits: { maxBytes: this.limits.maxBytes, maxObservations: this.limits.maxObservations, waitMs: o.waitMs }
    }, signal, o.waitMs)
    // With `readAhead`, while a snapshot page commits, the next page is already being read
    // with the cursor that page carries. BRC-193 §4 asks for the commit before the cursor is
    // used, so this is off by default; reads are non-destructive (§4), so nothing depends on
    // this read until its cursor is the committed one. The next step uses it only then;
    // otherwise (the commit failed, a replay, a reset) it is dropped unread.
    let ahead = null
    const readAhead = (session, bytes) => {
      let b
      try { b = JSON.parse(bytes.toString('utf8')) } catch { return null }
      if (!b || b.phase !== 'snapshot' || b.snapshotComplete !== false || typeof b.cursor !== 'string' || signal.aborted) return null
      return { session, cursor: b.cursor, result: read(session, b.cursor).then(bytes => ({ bytes }), error => ({ error })) }
    }
    const setState = async (next, extra = {}) => {
      // Repeated attempts and progress are reported each time; steady states once.
      if (next === connection && !('attempt' in extra) && !('progress' in extra)) return
      connection = next
      if (!onState) return
      try {
        await onState({ source: this.baseURL, sourceKey: key, connection: next, ...extra })
      } catch (e) {
        throw new CallbackFailure(e)
      }
    }
    // Renewal (`renew`) counts from the store (`renewal`): the live groups the generation
    // received and when its snapshot completed, so a restart does not start them again.
    // A generation completed by a version that kept no time is timed from when this
    // follow first saw it live.
    let liveSince = stored && stored.snapshotComplete ? Date.now() : null
    // After a commit: if it completed the generation's snapshot, say so.
    const snapshotDone = async (generation, before) => {
      if (before) return
      await this.store.whenIdle()
      const now = this.store.checkpoint(key)
      if (now && now.generation === generation && now.snapshotComplete) {
        if (!now.invalidated) invalidRun = 0
        liveSince = Date.now()
        await setState('connected', { progress: 'snapshot-complete', generation })
      }
    }
    // A generation followed live long enough is replaced by a fresh snapshot, so what the
    // store keeps for it (receipt keys, group records, absent rows) is retired with it
    // (BRC-193 §9): the same path as a reset, chosen by the application's schedule.
    const renewalDue = (generation) => {
      if (!o.renew) return false
      const r = this.store.renewal(key)
      if (!r || r.generation !== generation) return false
      const since = r.liveSince ?? liveSince ?? Date.now()
      return (o.renew.afterGroups !== undefined && r.liveGroups >= o.renew.afterGroups) ||
        (o.renew.afterMs !== undefined && Date.now() - since >= o.renew.afterMs)
    }
    // One step: an open, or a read and its commit. Returns true when the step made
    // contact with the provider (so the connection is up).
    const step = async () => {
      // The step's store calls are synchronous: a write on the pool (another source's commit,
      // the verifier's results) is waited for here, not with the JS thread blocked in a call.
      await this.store.whenIdle()
      const cp = key && !reopen ? this.store.checkpoint(key) : null
      // A refreshed generation negotiated no access: moving from it to a live one is no change.
      if (cp && cp.access !== null && cp.access !== finite.FINITE_ACCESS) servedAccess = cp.access
      if (!cp || !cp.cursor || cp.invalidated) {
        if (cp && cp.invalidated) {
          startOver = cp.invalidated
          if (invalidRun > 0) {
            const delay = this._delay(invalidRun)
            const error = new LiveLookupError('reset-required', `source continuity invalidated again (${cp.invalidated})`, { sourceKey: key })
            await setState('reset-required', { attempt: invalidRun, nextRetryAt: Date.now() + delay, error })
            await sleep(delay, signal)
            if (signal.aborted) return
          }
          invalidRun++
        }
        const r = await this._open(service, query, queryDigest, label, o)
        key = r.key
        reopen = false
        const { generation, access } = this.store.checkpoint(key)
        // A changed access explains a provider's reset (or a restart's reopen); a reason of
        // this client's own (equivocation, invalid evidence, chain, rules) is kept.
        if (servedAccess !== null && access !== servedAccess && (startOver === null || startOver === 'reset-required' || startOver === 'expired' || startOver === 'renewal')) startOver = 'access-changed'
        servedAccess = access
        await setState('connected', startOver ? { progress: 'started-over', generation, reason: startOver } : { progress: 'opened', generation })
        startOver = null
        await this._emit(onRevision, key, r.outcome, r.bytes)
        await snapshotDone(generation, false)
        return
      }
      // Groups not yet in membership are durable pending work; when the budget is full,
      // receipt waits for verification to drain it instead of failing.
      if (o.membership !== 'claims') {
        const st = this.store.state(key)
        if (st.pendingCount + this.limits.maxObservations > o.pendingBudget) {
          await setState('paused', { pendingCount: st.pendingCount, pendingBudget: o.pendingBudget })
          await sleep(o.pollIntervalMs, signal)
          return
        }
      }
      let bytes
      try {
        const a = ahead
        ahead = null
        if (a && a.session === cp.session && a.cursor === cp.cursor) {
          const r = await a.result
          if (r.error) throw r.error
          bytes = r.bytes
        } else {
          bytes = await read(cp.session, cp.cursor)
        }
      } catch (e) {
        if (e.code === 'reset-required' || e.code === 'expired') { reopen = true; startOver = e.code; return }
        throw e
      }
      await setState('connected', progress ?? {})
      progress = null
      let outcome
      try {
        outcome = await this._commit(key, cp.generation, cp.cursor, bytes, o.membership, undefined, o.readAhead ? () => { ahead = readAhead(cp.session, bytes) } : null)
      } catch (e) {
        ahead = null
        // Continuity of this source is gone: a new generation replaces it.
        if (e.code === 'equivocation' || e.code === 'reset-required') { reopen = true; startOver = e.code; return }
        // Another follower of this branch committed first: continue from its cursor.
        if (e.code === 'conflict') return
        throw e
      }
      await this._emit(onRevision, key, outcome, bytes)
      await snapshotDone(cp.generation, cp.snapshotComplete)
      if (cp.snapshotComplete && renewalDue(cp.generation)) {
        // The old session is of no further use: closed at the provider (best effort; it
        // expires anyway), and the next step opens the new generation.
        await this.close(key, signal).catch(() => {})
        reopen = true
        startOver = 'renewal'
        liveSince = null
        return
      }
      // Without a server-side wait, pace empty polls instead of spinning.
      if (o.waitMs === 0 && outcome.applied === 0) await sleep(o.pollIntervalMs, signal)
    }
    while (!signal.aborted) {
      try {
        await step()
        attempt = 0
      } catch (e) {
        if (e instanceof CallbackFailure) throw e.error
        if (signal.aborted) break
        const err = e instanceof LiveLookupError ? e : new LiveLookupError('invalid', String(e && e.message), { cause: e })
        if (err.mismatch) {
          // The provider now serves another chain or rules: nothing of it is committed,
          // the source's published generation turns stale (a replacement is begun) and
          // the open is retried with backoff until the provider matches again.
          const cp = this.store.checkpoint(err.sourceKey)
          if (cp && cp.cursor) this.store.beginGeneration(err.sourceKey, label)
          key = err.sourceKey
          startOver = err.mismatch
          attempt++
          const delay = this._delay(attempt)
          await setState('reset-required', { attempt, nextRetryAt: Date.now() + delay, error: err })
          await sleep(delay, signal)
          continue
        }
        if (!err.retryable && !err.transport) throw err
        attempt++
        if (err.transport) this._forgetConnection()
        const delay = this._delay(attempt, err)
        await setState('retrying', { attempt, nextRetryAt: Date.now() + delay, error: err })
        await sleep(delay, signal)
      }
    }
    await setState('closed').catch(() => {})
    return { sourceKey: key }
  }

  /** Closes the current session of a followed source (idempotent on the server). */
  async close (sourceKey, signal) {
    const cp = this.store.checkpoint(sourceKey)
    if (!cp || !cp.session) return { closed: true }
    const bytes = await this._post('close', { version: 1, session: cp.session }, signal)
    return JSON.parse(bytes.toString('utf8'))
  }
}

// The client's BRC-103/104 transport and Rust-backed wallet, so a client-only application
// needs no other entry point.
const { NativeWallet } = require('../auth/wallet')
const { LEGACY_CONTEXT_SCHEMA, decodeContext, decodeObservation, decodeBatch } = require('./decode')

module.exports = {
  LiveLookupClient,
  CheckpointStore,
  LiveLookupError,
  NativeAuthFetch,
  NativeWallet,
  LEGACY_CONTEXT_SCHEMA,
  decodeContext,
  decodeObservation,
  decodeBatch,
  digest,
  canonicalJson,
  PROFILE
}

// What finite.js and discovery.js share with this module (not enumerable: not public API).
Object.defineProperty(module.exports, '_internal', {
  value: { knownKeys, readCapped, errorFrom, transportError, checkHeaders, plainFetch, acceptManifestFor, fromNative, sleep, crashPoint, CallbackFailure, sourceLabel }
})
