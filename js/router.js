'use strict'
// HTTP transport of the profile (BRC-193 §2, §6, §8; BRC-194 §1): an Express
// router for POST {base}/overlay/v1/lookup/{open,read,close} and GET
// {base}/overlay/v1/capabilities, plus POST /.well-known/auth for BRC-103.
// Mount it at the application root before any body parser or compression: it
// reads the raw body itself, under the 1 MiB bound, and answers with the exact
// bytes the native core produced. See docs/operators.md for the constraints of
// the BRC-104 middleware that shape this file.

const express = require('express')
const { Peer, SessionManager } = require('@bsv/sdk')
const wire = require('./wire')
const { CapabilityManifest, PROFILE } = require('./manifest')
const { NativeWallet } = require('./wallet')

const MAX_BODY = 1024 * 1024
const MAX_HEADER_BYTES = 16 * 1024
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

/**
 * Headers every response carries, errors included (BRC-193 §8). They are set
 * with Node's setHeader: the BRC-104 wrapper drops non-`x-bsv-` headers set
 * through Express's res.set after it wrapped the response.
 */
function baseHeaders (req, res, allowedOrigins) {
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
 * Echoes the selection headers. Through res.set, so that under BRC-104 they are
 * part of the signed response (an x-bsv- header outside the signature makes the
 * client's verification fail).
 */
function echoSelection (req, res) {
  for (const name of SELECTION_HEADERS) {
    const v = req.headers[name]
    if (typeof v === 'string' && v.length <= 1024) res.set(name, v)
  }
}

function send (res, status, body) {
  if (res.headersSent || res.writableEnded) return
  const buf = Buffer.from(body)
  res.setHeader('Content-Type', 'application/json')
  if (res.locals && res.locals.overlayLiveDirect) {
    // Unauthenticated mode: written as is. res.send would add an ETag (a SHA-1 over
    // the whole body, up to 4 MiB) that a no-store answer never uses.
    res.statusCode = status
    res.setHeader('Content-Length', buf.length)
    res.end(buf)
    return
  }
  // BRC-103: the auth middleware signs the body through res.send.
  res.status(status).send(buf)
}

function sendError (res, code, message) {
  send(res, wire.statusOf(code), wire.errorBody(code, message))
}

/** Transport checks made before any byte of the body is read. */
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
  if (headerBytes > MAX_HEADER_BYTES) return ['limited', 'request headers exceed 16 KiB']
  const encoding = req.headers['content-encoding']
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    return ['unsupported', 'Content-Encoding must be identity']
  }
  const length = req.headers['content-length']
  if (length !== undefined && Number(length) > MAX_BODY) return ['limited', 'request body exceeds 1 MiB']
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

/** Reads the raw body, refusing at the first byte past 1 MiB. */
function readBody (req) {
  return new Promise((resolve, reject) => {
    const chunks = []
    let size = 0
    let done = false
    req.on('data', (chunk) => {
      if (done) return
      size += chunk.length
      if (size > MAX_BODY) {
        done = true
        req.pause()
        reject(Object.assign(new Error('request body exceeds 1 MiB'), { code: 'limited' }))
        return
      }
      chunks.push(chunk)
    })
    req.on('end', () => { if (!done) { done = true; resolve(Buffer.concat(chunks)) } })
    req.on('error', (e) => { if (!done) { done = true; reject(e) } })
  })
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
 * The BRC-104 middleware, assembled from its parts the way
 * createAuthMiddleware does, so that the router holds its Peer. What the
 * middleware registers for one request (a general-message listener, which it
 * removes only when the request verifies; a certificate listener per new
 * identity's handshake, removed only when certificates arrive, which the
 * router never requests; the handshake's response handle, kept when the
 * handshake fails) is released when that request's response closes, so
 * failed or forged requests leave nothing behind.
 */
function createAuth (wallet) {
  const { ExpressTransport } = require('@bsv/auth-express-middleware')
  const transport = new ExpressTransport(true)
  // Unauthenticated requests pass as 'unknown' so that the public manifest
  // stays readable with a plain GET; lookup routes refuse them.
  const peer = new Peer(wallet, transport, undefined, new SessionManager())
  transport.setPeer(peer)
  let registered = null
  const track = (listen, stop) => {
    const original = peer[listen].bind(peer)
    const release = peer[stop].bind(peer)
    peer[listen] = (callback) => {
      const id = original(callback)
      if (registered) registered.push(() => release(id))
      return id
    }
  }
  track('listenForGeneralMessages', 'stopListeningForGeneralMessages')
  track('listenForCertificatesReceived', 'stopListeningForCertificatesReceived')
  const middleware = (req, res, next) => {
    const mine = registered = []
    try {
      transport.handleIncomingRequest(req, res, next)
    } finally {
      registered = null
    }
    if (mine.length > 0 || req.path === '/.well-known/auth') {
      res.once('close', () => {
        for (const release of mine) release()
        const handles = transport.openNonGeneralHandles
        for (const key of Object.keys(handles)) {
          handles[key] = handles[key].filter((h) => h.res !== res)
          if (handles[key].length === 0) delete handles[key]
        }
      })
    }
  }
  middleware.peer = peer
  return middleware
}

/**
 * Runs the BRC-104 middleware and then `onPass`. A request that fails
 * authentication (the middleware answers those itself with its own JSON,
 * 401 or, for a forged nonce, 500) gets the profile's 401 `unauthorized`
 * envelope (BRC-193 §6) with the §8 headers instead, whatever the reason.
 */
function authenticate (auth, req, res, onPass) {
  let passed = false
  const refuse = () => sendError(res, 'unauthorized', 'BRC-103 authentication failed')
  const json = res.json
  res.json = function (body) {
    // The middleware's failures are `{status: 'error', ...}`; its handshake
    // answer (an AuthMessage sent with res.send) also arrives here.
    if (!passed && body && body.status === 'error') return refuse()
    return json.call(this, body)
  }
  auth(req, res, (err) => {
    if (err) return refuse()
    passed = true
    onPass()
  })
}

/** Queues `fn` to run in a later event-loop turn, SIGNED_PER_TURN per turn. */
function createTurns () {
  const queue = []
  const drain = () => {
    for (const fn of queue.splice(0, SIGNED_PER_TURN)) fn()
    if (queue.length > 0) setImmediate(drain)
  }
  return (fn) => {
    queue.push(fn)
    if (queue.length === 1) setImmediate(drain)
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
 * Builds the router. See js/router.d.ts for the options.
 * @param {import('./live').LiveLookup} live
 */
function createRouter (live, options = {}) {
  const authentication = options.authentication
  if (authentication !== 'brc103' && authentication !== 'none') {
    throw new TypeError("router needs authentication: 'brc103' or 'none' (explicitly)")
  }
  if (!options.baseURL) throw new TypeError('router needs baseURL (the advertised base URL)')
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
    wallet = options.authMiddleware ? options.wallet || null : options.wallet || NativeWallet.fromPrivateKey(options.privateKey)
    auth = options.authMiddleware || createAuth(wallet)
  }
  const inTurn = createTurns()
  const log = typeof options.log === 'function' ? options.log : () => {}
  const prefix = basePath(options.baseURL) + '/overlay/v1'
  const router = express.Router()

  if (auth) {
    // BRC-103 handshakes always go to the origin root; the middleware needs the
    // parsed JSON there (and only there). Browsers preflight it like the
    // lookup routes, and its answers carry the same §8 headers.
    router.options('/.well-known/auth', (req, res) => {
      baseHeaders(req, res, allowedOrigins)
      preflight(req, res, allowedOrigins)
    })
    const json = express.json({ limit: '64kb' })
    router.post('/.well-known/auth', (req, res, next) => {
      baseHeaders(req, res, allowedOrigins)
      json(req, res, (err) => {
        if (err) return sendError(res, err.status === 413 ? 'limited' : 'invalid', 'unreadable handshake body')
        authenticate(auth, req, res, () => sendError(res, 'not-found', 'unknown route'))
      })
    })
  }

  router.use(prefix, (req, res, next) => {
    if (!auth) res.locals.overlayLiveDirect = true
    baseHeaders(req, res, allowedOrigins)
    if (req.method !== 'OPTIONS') return next()
    preflight(req, res, allowedOrigins)
  })

  router.get(prefix + '/capabilities', (req, res, next) => {
    const serve = () => send(res, 200, manifest.bytes())
    if (!auth) return serve()
    authenticate(auth, req, res, serve)
  })

  const handlers = {
    open: (body, caller, signal) => live.open(body, caller, { signal }),
    close: (body, caller) => live.closeSession(body, caller),
    read: (body, caller, signal) => live.read(body, caller, { signal })
  }

  router.all(prefix + '/lookup/:op', async (req, res, next) => {
    const op = req.params.op
    if (!Object.prototype.hasOwnProperty.call(handlers, op)) return sendError(res, 'not-found', 'unknown lookup route')
    const bad = checkTransport(req)
    if (bad) {
      if (bad[0] === 'limited') res.setHeader('Connection', 'close')
      return sendError(res, bad[0], bad[1])
    }
    let body
    try {
      body = await readBody(req)
    } catch (e) {
      res.setHeader('Connection', 'close')
      return sendError(res, e.code === 'limited' ? 'limited' : 'invalid', e.code === 'limited' ? e.message : 'unreadable request body')
    }
    // The BRC-104 middleware verifies the exact bytes it finds on req.body.
    req.body = body
    const run = async () => {
      echoSelection(req, res)
      const principal = auth ? req.auth && req.auth.identityKey : ''
      if (auth && (!principal || principal === 'unknown')) {
        return sendError(res, 'unauthorized', 'BRC-103 authentication is required')
      }
      const refused = checkRequest(req, !!auth) ||
        manifest.check(op, req.headers['x-bsv-overlay-capability'], req.headers['x-bsv-overlay-profile'])
      if (refused) return sendError(res, refused[0], refused[1])
      const caller = auth ? { principal, authenticated: true } : { principal: '', authenticated: false }
      const ac = new AbortController()
      const onClose = () => { if (!res.writableEnded) ac.abort() }
      res.on('close', onClose)
      try {
        const out = await handlers[op](body, caller, ac.signal)
        if (ac.signal.aborted) return
        // Cursors and bodies never reach the log.
        log({ op, status: out.status, principal: caller.principal || null, bytes: out.body.length })
        if (!auth) return send(res, out.status, out.body)
        inTurn(() => {
          try { send(res, out.status, out.body) } catch (e) { fail(e) }
        })
      } finally {
        res.off('close', onClose)
      }
    }
    const fail = (e) => {
      log({ op, status: 503, error: String((e && e.code) || 'internal') })
      sendError(res, 'unavailable', 'the provider failed to answer')
    }
    if (!auth) return run().catch(fail)
    authenticate(auth, req, res, () => run().catch(fail))
  })

  router.all(prefix + '/{*rest}', (req, res) => sendError(res, 'not-found', 'unknown route'))
  router.manifest = manifest
  // The BRC-104 wallet and middleware in use (null in public mode), for
  // diagnostics; the wallet never exposes its key.
  router.wallet = wallet
  router.auth = auth
  return router
}

module.exports = { createRouter, PROFILE, VARY, MAX_BODY }
