'use strict'
// HTTP transport of the profile (BRC-193 §2, §6, §8; BRC-194 §1): an Express
// router for POST {base}/overlay/v1/lookup/{open,read,close} and GET
// {base}/overlay/v1/capabilities, plus POST /.well-known/auth for BRC-103.
// Mount it at the application root before any body parser or compression: it
// reads the raw body itself, under the 1 MiB bound, and answers with the exact
// bytes the native core produced. BRC-103/104 is js/auth/authserver.js.

const express = require('express')
const wire = require('../common/wire')
const { CapabilityManifest, PROFILE } = require('./manifest')
const { NativeWallet } = require('../auth/wallet')
const { AuthServer } = require('../auth/authserver')
const observe = require('./observe')

const MAX_BODY = wire.PROFILE_LIMITS.maxRequestBytes
/** A refused body up to this many times its cap is drained before the refusal (readBody). */
const DRAIN_FACTOR = 4
const MAX_HEADER_BYTES = wire.PROFILE_LIMITS.maxHeaderBytes
/** Bound of a handshake body (an initialRequest is a few hundred bytes). */
const MAX_HANDSHAKE = 64 * 1024
const VARY = 'Authorization, x-bsv-auth-identity-key, x-bsv-overlay-capability, x-bsv-overlay-profile'
const SELECTION_HEADERS = ['x-bsv-overlay-capability', 'x-bsv-overlay-profile']
const AUTH_HEADERS = [
  'x-bsv-auth-version', 'x-bsv-auth-message-type', 'x-bsv-auth-identity-key', 'x-bsv-auth-nonce',
  'x-bsv-auth-your-nonce', 'x-bsv-auth-signature', 'x-bsv-auth-request-id', 'x-bsv-auth-requested-certificates'
]
const EXPOSED = [...AUTH_HEADERS, ...SELECTION_HEADERS]
/**
 * Signed answers sent per event-loop turn. A commit can wake many
 * authenticated polls at once; each answer is signed on the JS thread, so
 * they go out a few at a time and other requests are read in between.
 */
const SIGNED_PER_TURN = 16

/** The path part of the advertised base URL, without a trailing slash. */
function basePath (baseURL) {
  const u = new URL(baseURL)
  return u.pathname.replace(/\/+$/, '')
}

/** Headers every response carries, errors included (BRC-193 §8). */
function baseHeaders (req, res, allowedOrigins) {
  // Express's default banner says nothing a client needs, on every answer.
  res.removeHeader('X-Powered-By')
  res.setHeader('Cache-Control', 'private, no-store')
  res.setHeader('Vary', VARY)
  res.setHeader('X-Content-Type-Options', 'nosniff')
  res.setHeader('X-Accel-Buffering', 'no')
  const origin = req.headers.origin
  if (origin && allowedOrigins.has(origin)) {
    res.setHeader('Access-Control-Allow-Origin', origin)
    res.setHeader('Access-Control-Allow-Credentials', 'true')
    res.setHeader('Access-Control-Expose-Headers', EXPOSED.join(', '))
    res.setHeader('Vary', VARY + ', Origin')
  }
}

/**
 * Echoes the selection headers. Set before an answer is signed, so that under
 * BRC-104 they are among its signed headers (a client refuses an answer
 * carrying an `x-bsv-*` header outside the signature).
 */
function echoSelection (req, res) {
  for (const name of SELECTION_HEADERS) {
    const v = req.headers[name]
    if (typeof v === 'string' && v.length <= 1024) res.setHeader(name, v)
  }
}

/**
 * Writes an answer as is: no ETag (res.send would hash a body of up to
 * 4 MiB for a no-store answer that is never revalidated).
 */
function send (res, status, body) {
  if (res.headersSent || res.writableEnded) return
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body)
  res.statusCode = status
  res.setHeader('Content-Type', 'application/json')
  res.setHeader('Content-Length', buf.length)
  res.end(buf)
}

function sendError (res, code, message) {
  send(res, wire.statusOf(code), wire.errorBody(code, message))
}

/** The 401 for a request that fails BRC-103 (unsigned: there is no exchange to sign in). */
function refuseAuth (res) {
  sendError(res, 'unauthorized', 'BRC-103 authentication failed')
}

/**
 * Transport checks made before any byte of the body is read: [code, message] and, for a
 * request refused as too large, what becomes of the rest of it ('close' or 'drop').
 */
function checkTransport (req) {
  if (req.method !== 'POST') return ['invalid', 'lookup routes accept POST only']
  let headerBytes = 0
  const seen = new Set()
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i].toLowerCase()
    headerBytes += req.rawHeaders[i].length + req.rawHeaders[i + 1].length + 4
    if (seen.has(name)) return ['invalid', 'duplicate header: ' + name]
    seen.add(name)
  }
  if (headerBytes > MAX_HEADER_BYTES) return ['limited', 'request headers exceed 16 KiB', 'close']
  const encoding = req.headers['content-encoding']
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    return ['unsupported', 'Content-Encoding must be identity']
  }
  // A declared length over the cap is refused at once, without waiting for a body that may
  // never come; the caller then drops what does come (`dropBody`), or closes the connection
  // when even that would be too much.
  const length = req.headers['content-length']
  if (length !== undefined && Number(length) > MAX_BODY) {
    return ['limited', 'request body exceeds 1 MiB', Number(length) > MAX_BODY * DRAIN_FACTOR ? 'close' : 'drop']
  }
  return null
}

/**
 * Request checks that can be answered inside the authenticated exchange (so the
 * answer is signed): content type, and, for unauthenticated callers only,
 * `Cache-Control: no-store` (AuthFetch cannot send that header).
 */
function checkRequest (req, authenticated) {
  if (req.headers['content-type'] !== 'application/json') return ['invalid', 'Content-Type must be exactly application/json']
  if (!authenticated) {
    const cc = req.headers['cache-control']
    if (typeof cc !== 'string' || !cc.split(',').map(s => s.trim().toLowerCase()).includes('no-store')) {
      return ['invalid', 'requests must send Cache-Control: no-store']
    }
  }
  return null
}

/**
 * Reads the raw body, refusing one past `max` bytes (`bound` names it) with a `limited` error.
 * A refused body is read to its end and dropped before the refusal is answered (nothing past
 * `max` is kept): closing a connection with unread bytes resets it, and a reverse proxy still
 * streaming the body (nginx with `proxy_request_buffering off`) then answers its own 502 page
 * instead of the limited envelope. A body over DRAIN_FACTOR times `max` is refused without
 * waiting for the rest (`e.drained` false: the caller closes the connection).
 */
function readBody (req, max = MAX_BODY, bound = '1 MiB') {
  return new Promise((resolve, reject) => {
    const chunks = []
    let size = 0
    let done = false
    const refuse = (drained) => {
      done = true
      reject(Object.assign(new Error(`request body exceeds ${bound}`), { code: 'limited', drained }))
    }
    req.on('data', (chunk) => {
      if (done) return
      size += chunk.length
      if (size > max * DRAIN_FACTOR) return refuse(false)
      if (size > max) chunks.length = 0
      else chunks.push(chunk)
    })
    req.on('end', () => {
      if (done) return
      if (size > max) return refuse(true)
      done = true
      resolve(Buffer.concat(chunks))
    })
    req.on('error', (e) => { if (!done) { done = true; reject(e) } })
  })
}

/**
 * Reads and drops a refused request's body after its answer was sent, so the connection
 * stays usable and a reverse proxy still streaming the body gets the answer instead of a
 * reset. Bounded: past DRAIN_FACTOR times the cap the connection is closed.
 */
function dropBody (req) {
  let size = 0
  req.on('data', (chunk) => {
    size += chunk.length
    if (size > MAX_BODY * DRAIN_FACTOR) req.destroy()
  })
  req.on('error', () => {})
  req.resume()
}

/**
 * Answers a CORS preflight (it carries no credentials, so it is answered
 * before authentication): the allowed methods and headers for a configured
 * origin, the unauthorized envelope for any other.
 */
function preflight (req, res, allowedOrigins) {
  const origin = req.headers.origin
  if (origin && allowedOrigins.has(origin)) {
    res.setHeader('Access-Control-Allow-Methods', 'GET, POST, OPTIONS')
    res.setHeader('Access-Control-Allow-Headers', ['content-type', 'cache-control', ...EXPOSED].join(', '))
    res.setHeader('Access-Control-Max-Age', '600')
    return res.status(204).end()
  }
  sendError(res, 'unauthorized', 'origin not allowed')
}

/**
 * Runs `fn` now while fewer than SIGNED_PER_TURN answers ran in this event-loop
 * turn, else queues it for a later turn (SIGNED_PER_TURN per turn). A lone
 * answer goes out at once; a burst of woken polls is spread over turns, with
 * other requests read in between.
 */
function createTurns () {
  const queue = []
  let spent = 0
  let scheduled = false
  const schedule = () => {
    if (!scheduled) { scheduled = true; setImmediate(turn) }
  }
  const turn = () => {
    scheduled = false
    spent = 0
    for (const fn of queue.splice(0, SIGNED_PER_TURN)) { spent++; fn() }
    if (queue.length > 0) schedule()
  }
  return (fn) => {
    schedule()
    if (queue.length === 0 && spent < SIGNED_PER_TURN) { spent++; fn() } else queue.push(fn)
  }
}

function validateProvider (live, options, manifest) {
  const provider = live.options.provider
  if (options.authentication === 'brc103') {
    if (provider !== manifest.identity) {
      throw new TypeError('with BRC-103 the LiveLookup provider must be the identity key of privateKey (' + manifest.identity + ')')
    }
    return
  }
  const base = new URL(options.baseURL)
  if (base.protocol !== 'https:' && !options.allowLocalHttp) {
    throw new TypeError('unauthenticated public mode needs an https baseURL (plain HTTP only with allowLocalHttp)')
  }
  if (provider !== base.origin) {
    throw new TypeError('in unauthenticated public mode the LiveLookup provider must be the exact origin ' + base.origin)
  }
}

/**
 * The provider identity key as 64 lowercase hex: a hex string as given, or a @bsv/sdk
 * PrivateKey (anything with toHex()).
 */
function privateKeyHex (key) {
  if (key !== null && typeof key === 'object' && typeof key.toHex === 'function') return String(key.toHex()).padStart(64, '0')
  if (key === undefined || key === null) {
    throw new TypeError('router needs privateKey: the provider identity key (64 hex, or a @bsv/sdk PrivateKey) that signs the capability manifest, in public mode too; keep it with the data directory so the manifest identity stays the same across restarts')
  }
  if (typeof key === 'string' && /^[0-9a-fA-F]{64}$/.test(key)) return key.toLowerCase()
  throw new TypeError('router privateKey must be 64 hex characters or a @bsv/sdk PrivateKey')
}

/** Checks a health or metrics path option; null when not asked for. */
function routePath (value, name) {
  if (value === undefined || value === null || value === false) return null
  if (typeof value !== 'string' || !value.startsWith('/')) throw new TypeError(`router ${name} must be a path such as '/${name}' (or left out)`)
  return value
}

/**
 * The startup line through the LiveLookup's `log` hook, and warnings for a configuration that
 * would serve nothing useful.
 */
function logStartup (live, options, manifest) {
  const services = [...live.services.keys()]
  live.logEvent({
    op: 'start',
    provider: live.options.provider,
    identity: manifest.identity,
    mode: options.authentication === 'brc103' ? 'brc103' : 'public',
    baseURL: options.baseURL,
    store: live.options.dataDir,
    epoch: live.epoch,
    highWater: live.highWater,
    services,
    engineAttached: !!live.engine
  })
  if (services.length === 0) {
    live.logEvent({ op: 'config', action: 'warning', reason: 'the router serves no lookup service yet: wrap one with live.wrap(name, lookupService, companion) and register the result in engine.lookupServices before live.router(...)' })
  } else if (!live.engine) {
    live.logEvent({ op: 'config', action: 'warning', reason: `services ${services.join(', ')} are wrapped but no Engine is attached: call await live.attach(engine) after registering them, or the feed misses what the Engine admits` })
  }
}

/**
 * Builds the router. See js/provider/router.d.ts for the options.
 * @param {import('./live').LiveLookup} live
 */
function createRouter (live, options = {}) {
  const authentication = options.authentication
  if (authentication !== 'brc103' && authentication !== 'none') {
    throw new TypeError("router needs authentication: 'brc103' (BRC-103 callers) or 'none' (public mode), explicitly")
  }
  if (!options.baseURL) throw new TypeError('router needs baseURL (the advertised base URL)')
  options = { ...options, privateKey: privateKeyHex(options.privateKey) }
  const healthPath = routePath(options.health, 'health')
  const metricsPath = routePath(options.metrics, 'metrics')
  const manifest = new CapabilityManifest(live, {
    privateKey: options.privateKey,
    baseURL: options.baseURL,
    authentication,
    allowLocalHttp: options.allowLocalHttp,
    ttlSeconds: options.manifestSeconds
  })
  validateProvider(live, options, manifest)
  const allowedOrigins = new Set(options.allowedOrigins || [])
  if (allowedOrigins.has('*')) throw new TypeError('a wildcard origin is not allowed: list exact origins')
  let auth = null
  let wallet = null
  if (authentication === 'brc103') {
    // The identity's crypto runs in the Rust core unless a wallet is given.
    wallet = options.wallet || NativeWallet.fromPrivateKey(options.privateKey)
    auth = new AuthServer(wallet, manifest.identity, options.authSessions)
  }
  const inTurn = createTurns()
  const log = typeof options.log === 'function' ? options.log : () => {}
  const prefix = basePath(options.baseURL) + '/overlay/v1'
  const router = express.Router()
  // Requests are counted for the metrics route (js/provider/observe.js) only when it is served.
  const counters = metricsPath ? live.metrics : null
  const mode = authentication === 'brc103' ? 'brc103' : 'public'

  const health = () => observe.healthOf(live, { mode, baseURL: options.baseURL })
  if (healthPath) {
    router.get(healthPath, (req, res) => {
      const body = health()
      res.setHeader('Cache-Control', 'no-store')
      send(res, body.status === 'ok' ? 200 : 503, JSON.stringify(body))
    })
  }
  if (metricsPath) {
    router.get(metricsPath, (req, res) => {
      const text = Buffer.from(observe.metricsText(live))
      res.statusCode = 200
      res.setHeader('Cache-Control', 'no-store')
      res.setHeader('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
      res.setHeader('Content-Length', text.length)
      res.end(text)
    })
  }

  /** Sends an answer, signed first when it answers a verified BRC-104 exchange. */
  const answer = async (res, status, body, exchange) => {
    if (!exchange) return send(res, status, body)
    if (res.headersSent || res.writableEnded) return
    const buf = Buffer.isBuffer(body) ? body : Buffer.from(body)
    await auth.sign(exchange, res, status, buf)
    send(res, status, buf)
  }
  const answerError = (res, code, message, exchange) => answer(res, wire.statusOf(code), wire.errorBody(code, message), exchange)

  /**
   * The exchange a request belongs to: null for a request without BRC-104
   * headers, false for one whose authentication fails, else the verified
   * exchange (js/auth/authserver.js).
   */
  const exchangeOf = async (req, body) => {
    if (!AuthServer.signed(req)) return null
    return (await auth.verify(req, body)) || false
  }

  if (auth) {
    // BRC-103 handshakes always go to the origin root. Browsers preflight it
    // like the lookup routes, and its answers carry the same §8 headers.
    router.options('/.well-known/auth', (req, res) => {
      baseHeaders(req, res, allowedOrigins)
      preflight(req, res, allowedOrigins)
    })
    router.post('/.well-known/auth', async (req, res) => {
      baseHeaders(req, res, allowedOrigins)
      let message
      try {
        message = JSON.parse((await readBody(req, MAX_HANDSHAKE, '64 KiB')).toString('utf8'))
      } catch (e) {
        if (!e.drained) res.setHeader('Connection', 'close')
        return sendError(res, e.code === 'limited' ? 'limited' : 'invalid', 'unreadable handshake body')
      }
      try {
        const reply = await auth.handshake(message)
        if (!reply) return refuseAuth(res)
        res.setHeader('x-bsv-auth-version', reply.version)
        res.setHeader('x-bsv-auth-message-type', reply.messageType)
        res.setHeader('x-bsv-auth-identity-key', reply.identityKey)
        res.setHeader('x-bsv-auth-your-nonce', reply.yourNonce)
        send(res, 200, JSON.stringify(reply))
      } catch (e) {
        log({ op: 'handshake', status: 503, error: String((e && e.code) || 'internal') })
        sendError(res, 'unavailable', 'the provider failed to answer')
      }
    })
  }

  router.use(prefix, (req, res, next) => {
    baseHeaders(req, res, allowedOrigins)
    if (req.method !== 'OPTIONS') return next()
    preflight(req, res, allowedOrigins)
  })

  // The manifest is public: readable with a plain GET in both modes, and
  // signed for a BRC-104 caller.
  router.get(prefix + '/capabilities', async (req, res) => {
    const exchange = auth ? await exchangeOf(req, Buffer.alloc(0)) : null
    if (exchange === false) return refuseAuth(res)
    answer(res, 200, manifest.bytes(), exchange).catch(() => sendError(res, 'unavailable', 'the provider failed to answer'))
  })

  const handlers = {
    open: (body, caller, signal) => live.open(body, caller, { signal }),
    close: (body, caller) => live.closeSession(body, caller),
    read: (body, caller, signal) => live.read(body, caller, { signal })
  }

  router.all(prefix + '/lookup/:op', async (req, res, next) => {
    const op = req.params.op
    if (!Object.prototype.hasOwnProperty.call(handlers, op)) return sendError(res, 'not-found', 'unknown lookup route')
    // A body parser mounted ahead of this router has read the body already: say so instead
    // of waiting for bytes that never come (docs/operators.md "Overlay Express").
    if (req.readableEnded) return sendError(res, 'unsupported', 'the lookup routes must be mounted before any body parser')
    const bad = checkTransport(req)
    if (bad) {
      // What becomes of the rest of the request: the connection closes, or the body is dropped.
      if (bad[2] === 'close') res.setHeader('Connection', 'close')
      else if (bad[2] === 'drop') dropBody(req)
      return sendError(res, bad[0], bad[1])
    }
    let body
    try {
      body = await readBody(req)
    } catch (e) {
      if (!e.drained) res.setHeader('Connection', 'close')
      return sendError(res, e.code === 'limited' ? 'limited' : 'invalid', e.code === 'limited' ? e.message : 'unreadable request body')
    }
    let exchange = null
    const fail = (e) => {
      log({ op, status: 503, error: String((e && e.code) || 'internal') })
      // Unsigned: the failure may be the signing itself.
      sendError(res, 'unavailable', 'the provider failed to answer')
    }
    try {
      if (auth) {
        exchange = await exchangeOf(req, body)
        if (exchange === false) return refuseAuth(res)
      }
      echoSelection(req, res)
      if (auth && !exchange) return sendError(res, 'unauthorized', 'BRC-103 authentication is required')
      const refused = checkRequest(req, !!auth) ||
        manifest.check(op, req.headers['x-bsv-overlay-capability'], req.headers['x-bsv-overlay-profile'])
      if (refused) return await answerError(res, refused[0], refused[1], exchange)
      const caller = exchange ? { principal: exchange.identityKey, authenticated: true } : { principal: '', authenticated: false }
      const ac = new AbortController()
      const onClose = () => { if (!res.writableEnded) ac.abort() }
      res.on('close', onClose)
      let out
      try {
        out = await handlers[op](body, caller, ac.signal)
      } finally {
        res.off('close', onClose)
      }
      if (ac.signal.aborted) return
      // Cursors and bodies never reach the log.
      log({ op, status: out.status, principal: caller.principal || null, bytes: out.body.length })
      if (counters) observe.countRequest(counters, op, out.status, out.body)
      if (!exchange) return send(res, out.status, out.body)
      inTurn(() => answer(res, out.status, out.body, exchange).catch(fail))
    } catch (e) {
      fail(e)
    }
  })

  // Anything else under the prefix (a prefix mount matches the same paths on Express 4 and 5).
  router.use(prefix, (req, res) => sendError(res, 'not-found', 'unknown route'))
  router.manifest = manifest
  router.health = health
  router.metrics = () => observe.metricsText(live)
  logStartup(live, options, manifest)
  // The BRC-104 wallet and sessions in use (null in public mode), for
  // diagnostics; the wallet never exposes its key.
  router.wallet = wallet
  router.auth = auth
  return router
}

module.exports = { createRouter, validateProvider, PROFILE, VARY, MAX_BODY }
