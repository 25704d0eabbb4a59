'use strict'
// Overlay Express hosts (docs/operators.md "Overlay Express").
//
// 2.2 and other hosts without a lookup slot: `mountOnOverlayExpress` puts this package's own
// router on `server.app` before `start()`, which adds the host's body parsers, its wildcard
// CORS and its 404 handler after it; the router therefore still reads the raw request bytes.
//
// 2.8 and later: `createOutputLookupRouter` (@bsv/overlay-express/output-lookup) and
// `OverlayExpress.configureOutputLookup` serve the BRC-193 routes themselves, with the host's
// own BRC-103 authentication, and hand each parsed request to a structural `companion`:
// `open`, `read` and `close`, each called as (input, {principal, capabilityDigest}, signal)
// and answering {body, headers} for a success or throwing an Error whose own `code`,
// `retryable` and (for limited) `limit` the router turns into the error envelope.
// `createOutputLookupCompanion` builds that companion from a LiveLookup, together with the
// manifest and clock the router options ask for.

const { CapabilityManifest, PROFILE } = require('./manifest')
const { validateProvider } = require('./router')
const wire = require('../common/wire')

/**
 * @param {object} server an OverlayExpress instance, after configureEngine() and before start()
 * @param {import('./live').LiveLookup} live
 * @param {object} routerOptions see js/provider/router.d.ts
 */
async function mountOnOverlayExpress (server, live, routerOptions) {
  if (!server || !server.app || typeof server.app.use !== 'function') {
    throw new TypeError('mountOnOverlayExpress needs an OverlayExpress instance (its app is used)')
  }
  // start() has installed the host's body parsers: mounted now, the router would come after them.
  if (server.isListening === true || server.startTime !== undefined) {
    throw new TypeError('mount the live router before OverlayExpress.start(): start() adds body parsers ahead of it')
  }
  server.app.use(live.router(routerOptions))
  if (server.engine) await live.attach(server.engine)
  return server
}

/**
 * A failure as createOutputLookupRouter reads it: an Error whose own `code`, `retryable` and
 * `limit` properties become the envelope (the router replaces the message with its own).
 */
class OutputLookupError extends Error {
  constructor (code, message, { retryable = false, retryAfterMs, limit, status } = {}) {
    super(message)
    this.name = 'OutputLookupError'
    this.code = code
    this.retryable = retryable
    if (retryAfterMs !== undefined) this.retryAfterMs = retryAfterMs
    if (limit !== undefined) this.limit = limit
    if (status !== undefined) this.status = status
  }
}

/** The error for a call whose caller went away: the router sends nothing for it. */
function aborted () {
  return Object.assign(new Error('the caller went away'), { name: 'AbortError', code: 'ABORT_ERR' })
}

/** A native error answer as an OutputLookupError. */
function failure (res) {
  let e = null
  try { e = JSON.parse(res.body.toString('utf8')).error } catch (_) {}
  if (!e || typeof e.code !== 'string') return new OutputLookupError('unavailable', 'the provider failed to answer', { retryable: true, status: 503 })
  return new OutputLookupError(e.code, e.message, { retryable: e.retryable === true, retryAfterMs: e.retryAfterMs, limit: e.limit, status: res.status })
}

/** The parsed request as the bytes LiveLookup parses strictly itself. */
function requestBytes (input) {
  let text
  try { text = JSON.stringify(input) } catch (_) { text = undefined }
  if (typeof text !== 'string') throw new OutputLookupError('invalid', 'the request is not a JSON value', { status: 400 })
  return Buffer.from(text, 'utf8')
}

/**
 * Everything `createOutputLookupRouter(options)` / `server.configureOutputLookup(options)`
 * takes from the provider: `companion`, `service`, `baseURL`, `identity`, `chain`,
 * `authentication`, `allowLocalHTTP`, `manifest()` and `now()`. The host adds its own parts
 * (`allowedOrigins`; `authenticate` for the plain router; request capacity).
 * @param {import('./live').LiveLookup} live
 * @param {{service: string, privateKey: string, baseURL: string, authentication: 'brc103'|'none',
 *          allowLocalHttp?: boolean, manifestSeconds?: number}} options
 */
function createOutputLookupCompanion (live, options = {}) {
  const { service, privateKey, baseURL, authentication, allowLocalHttp = false, manifestSeconds } = options
  if (authentication !== 'brc103' && authentication !== 'none') throw new TypeError("the companion needs authentication: 'brc103' or 'none' (explicitly)")
  if (typeof service !== 'string' || !live.services.has(service)) throw new TypeError(`no wrapped lookup service named ${service}: wrap it with live.wrap first`)
  if (typeof baseURL !== 'string') throw new TypeError('the companion needs baseURL (the advertised base URL of this service)')
  // The router binds one service per base path and checks that the manifest lists only it.
  const manifest = new CapabilityManifest(live, { privateKey, baseURL, authentication, allowLocalHttp, ttlSeconds: manifestSeconds, service })
  validateProvider(live, { authentication, baseURL, allowLocalHttp }, manifest)
  const signed = () => JSON.parse(manifest.bytes().toString('utf8'))

  /** The LiveLookup caller for the router's verified caller. */
  const callerOf = (who) => {
    if (authentication === 'none') return { principal: '', authenticated: false }
    const principal = who && who.principal
    if (typeof principal !== 'string' || !/^0[23][0-9a-f]{64}$/.test(principal)) {
      throw new OutputLookupError('unauthorized', 'an authenticated principal is required', { status: 401 })
    }
    return { principal, authenticated: true }
  }

  /** One companion method: selection check, the LiveLookup call, the answer or the error. */
  const method = (op, call) => async (input, who, signal) => {
    const caller = callerOf(who)
    const digest = who && typeof who.capabilityDigest === 'string' ? who.capabilityDigest : null
    // Opens select the current manifest; reads and closes any issued during their session.
    const refused = manifest.check(op, digest, PROFILE)
    if (refused) throw new OutputLookupError(refused[0], refused[1], { status: wire.statusOf(refused[0]) })
    if (signal && signal.aborted) throw aborted()
    const res = await call(requestBytes(input), caller, signal)
    if (signal && signal.aborted) throw aborted()
    if (res.status !== 200) throw failure(res)
    return {
      // A copy: a read's body may be a view into a buffer shared with other answers.
      body: res.body.toString('utf8'),
      // What the router compares with the caller's selection; it sets Cache-Control and Vary itself.
      headers: { 'x-bsv-overlay-capability': digest, 'x-bsv-overlay-profile': PROFILE }
    }
  }

  const companion = {
    open: method('open', (body, caller, signal) => live.open(body, caller, { signal })),
    read: method('read', (body, caller, signal) => live.read(body, caller, { signal })),
    close: method('close', (body, caller) => live.closeSession(body, caller))
  }
  const first = signed().body
  return {
    companion,
    service,
    baseURL: first.baseURL,
    identity: manifest.identity,
    chain: { network: first.chain.network, genesisHash: first.chain.genesisHash },
    authentication,
    allowLocalHTTP: !!allowLocalHttp,
    manifest: signed,
    now: () => String(manifest.now())
  }
}

module.exports = { mountOnOverlayExpress, createOutputLookupCompanion, OutputLookupError }
