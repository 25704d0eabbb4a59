'use strict'
// NativeAuthFetch: a lean BRC-104 client (BRC-103 mutual authentication over
// HTTP) for Node, wire-compatible with @bsv/auth-express-middleware servers
// and @bsv/sdk's Peer. It sends the same bytes as the SDK's AuthFetch (its
// serializeRequest, Peer.toPeer and SimplifiedFetchTransport) and accepts a
// response exactly when AuthFetch's Peer would (processInitialResponse,
// processGeneralMessage), but keeps everything in Buffers, hashes with
// node:crypto, sends over node:http(s) with a keep-alive Agent, and with a
// NativeWallet calls its Rust core directly. Any other BRC-100 wallet (e.g.
// ProtoWallet) works through its async methods.
//
// Not supported (this package's lookup-live-v1 profile uses neither):
// certificate exchange (no certificates are requested or offered, as with an
// AuthFetch whose wallet holds none) and 402 payments (the response is
// returned as it is). A response without BRC-104 authentication is an error,
// never a plain answer.

const http = require('node:http')
const https = require('node:https')
const { AUTH_VERSION, HEX, randomBytes, sortHeaders, signedHeaders, requestPayload, responsePayload, signerOf } = require('./brc104')

const DEFAULTS = { maxHeaderBytes: 16 * 1024, maxBodyBytes: 8 * 1024 * 1024, handshakeTimeoutMs: 30000 }
const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
// Utils.toUTF8 in the SDK is a default TextDecoder (a leading BOM is dropped,
// invalid bytes become U+FFFD): nonce key IDs must be decoded the same way.
const UTF8 = new TextDecoder()

/** createNonce (SDK auth/utils): 16 random bytes and their 'server hmac' for 'self', base64. */
async function createNonce (signer) {
  const first = randomBytes(16)
  const mac = await signer.hmac(UTF8.decode(first), first)
  return Buffer.concat([first, mac]).toString('base64')
}

/** verifyNonce (SDK auth/utils): the second part is our HMAC of the first. */
async function verifyNonce (signer, nonce) {
  const bytes = Buffer.from(nonce, 'base64')
  const data = bytes.subarray(0, 16)
  return signer.verifyHmac(UTF8.decode(data), data, bytes.subarray(16))
}

// --- Requests ----------------------------------------------------------------

/** The request body as bytes: strings as UTF-8, bytes as they are, other objects as JSON (AuthFetch). */
function bodyBytes (body) {
  if (typeof body === 'string') return Buffer.from(body, 'utf8')
  if (body instanceof ArrayBuffer) return Buffer.from(body)
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  if (typeof body === 'object') return Buffer.from(JSON.stringify(body), 'utf8')
  throw new TypeError('Unsupported body type in this SimplifiedFetch implementation.')
}

/**
 * Method, signed headers and body of a request, checked and normalized as
 * AuthFetch.serializeRequest does: only content-type (parameters dropped),
 * authorization and x-bsv-* (not x-bsv-auth-*) headers; a body-carrying
 * method without a body gets '{}' for JSON and none otherwise. One header may go
 * unsigned: `cache-control`, a directive to caches on the way (BRC-193 §2 asks every
 * lookup-live request to send `no-store`), which no server reads as content.
 */
function prepare (method, headers, body) {
  if (typeof method !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(method)) throw new TypeError(`invalid HTTP method ${method}`)
  method = method.toUpperCase() // what node:http sends, so what the server signs
  const pairs = []
  const unsigned = []
  const seen = new Set()
  for (let [k, v] of Object.entries(headers || {})) {
    k = k.toLowerCase()
    v = String(v)
    if (k.startsWith('x-bsv-') || k === 'authorization') {
      if (k.startsWith('x-bsv-auth')) throw new Error('No BSV auth headers allowed here!')
    } else if (k === 'content-type') {
      v = v.split(';')[0].trim()
    } else if (k === 'cache-control') {
      if (seen.has(k)) throw new TypeError(`header ${k} given twice`)
      seen.add(k)
      unsigned.push([k, v])
      continue
    } else {
      throw new Error('Unsupported header in the simplified fetch implementation. Only content-type, authorization, x-bsv-* and (unsigned) cache-control headers are supported.')
    }
    if (seen.has(k)) throw new TypeError(`header ${k} given twice`)
    seen.add(k)
    pairs.push([k, v])
  }
  sortHeaders(pairs)
  const contentType = seen.has('content-type') ? pairs.find(([k]) => k === 'content-type')[1] : null
  if (METHODS_WITH_BODY.has(method) && body === undefined) body = contentType !== null && contentType.includes('application/json') ? '{}' : ''
  const bytes = body ? bodyBytes(body) : null
  if (bytes !== null && contentType === null) throw new Error('Content-Type header is required for requests with a body.')
  return { method, pairs, unsigned, body: bytes }
}

// --- Responses ---------------------------------------------------------------

/** Response headers as fetch's Headers holds them: lower-case names, repeats joined with ', '. */
function headerMap (rawHeaders) {
  const map = new Map()
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const k = rawHeaders[i].toLowerCase()
    const v = rawHeaders[i + 1]
    const prior = map.get(k)
    map.set(k, prior === undefined ? v : `${prior}, ${v}`)
  }
  return map
}

function unauthenticated (url, status, body, missing) {
  const what = missing.length > 0 ? `missing headers: ${missing.join(', ')}` : 'response lacked required BSV auth headers'
  const preview = body.length > 0 ? body.subarray(0, 512).toString('utf8') : undefined
  const parts = [`Received HTTP ${status} from ${url} without valid BSV authentication (${what})`]
  if (preview !== undefined) parts.push(`body preview: ${preview}`)
  return Object.assign(new Error(parts.join(' - ')), { details: { url, status, missingHeaders: missing, bodyPreview: preview } })
}

function rejected (url, why) {
  return Object.assign(new Error(`BRC-104 response from ${url} rejected: ${why}`), { code: 'ERR_AUTH_RESPONSE' })
}

// --- Transport ---------------------------------------------------------------

function networkError (url, e) {
  if (e && e.name === 'AbortError') return e
  const error = new Error(`Network error while sending authenticated request to ${url}: ${e && e.message}`)
  error.cause = e
  if (e && e.code) error.code = e.code
  return error
}

/**
 * One HTTP exchange; resolves {status, rawHeaders, body} with the body read
 * whole but never past `limits.maxBodyBytes` (the header block is bounded by
 * the parser's maxHeaderSize). A request that fails on a reused keep-alive
 * socket before any answer (the server closed it meanwhile, e.g. it
 * restarted) is sent once more on a new one, as Node's docs recommend.
 */
async function exchange (agents, limits, url, method, headers, body, signal) {
  try {
    return await exchangeOnce(agents, limits, url, method, headers, body, signal)
  } catch (e) {
    if (!e.retryOnNewSocket) throw e
    return exchangeOnce(agents, limits, url, method, headers, body, signal)
  }
}

/**
 * The error an aborted request rejects with: node:http's own (an AbortError
 * whose cause is the signal's reason). The signal is listened to here rather
 * than given to http.request, whose abort wiring costs more than the rest of
 * the request's setup.
 */
function abortError (signal) {
  return Object.assign(new Error('The operation was aborted', { cause: signal.reason }), { code: 'ABORT_ERR', name: 'AbortError' })
}

function exchangeOnce (agents, limits, url, method, headers, body, signal) {
  if (signal && signal.aborted) return Promise.reject(abortError(signal))
  return new Promise((resolve, reject) => {
    let settled = false
    const settle = () => {
      settled = true
      if (signal) signal.removeEventListener('abort', onAbort)
    }
    const fail = (e) => { if (!settled) { settle(); req.destroy(); reject(e) } }
    const onAbort = () => fail(abortError(signal))
    const tooLarge = () => fail(Object.assign(new Error(`response body from ${url.href} exceeds ${limits.maxBodyBytes} bytes`), { code: 'ERR_RESPONSE_TOO_LARGE' }))
    const secure = url.protocol === 'https:'
    const req = (secure ? https : http).request({
      protocol: url.protocol,
      hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: url.port || undefined,
      path: url.pathname + url.search,
      method,
      headers,
      agent: secure ? agents.https : agents.http,
      maxHeaderSize: limits.maxHeaderBytes
    }, (res) => {
      const declared = Number(res.headers['content-length'])
      if (declared > limits.maxBodyBytes) return tooLarge()
      const chunks = []
      let total = 0
      res.on('data', (chunk) => {
        total += chunk.length
        if (total > limits.maxBodyBytes) return tooLarge()
        chunks.push(chunk)
      })
      res.on('end', () => {
        if (settled) return
        settle()
        resolve({ status: res.statusCode, rawHeaders: res.rawHeaders, body: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, total) })
      })
      res.on('error', (e) => fail(networkError(url.href, e)))
      res.on('close', () => { if (!res.complete) fail(networkError(url.href, new Error('response closed before its end'))) })
    })
    let answered = false
    req.once('response', () => { answered = true })
    req.on('error', (e) => {
      const error = networkError(url.href, e)
      if (req.reusedSocket && !answered && e && e.code === 'ECONNRESET') error.retryOnNewSocket = true
      fail(error)
    })
    if (signal) signal.addEventListener('abort', onAbort, { once: true })
    req.end(body || undefined)
  })
}

/** Waits for `promise`, or rejects as soon as `signal` aborts. */
function raceSignal (promise, signal) {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (v) => { signal.removeEventListener('abort', onAbort); resolve(v) },
      (e) => { signal.removeEventListener('abort', onAbort); reject(e) })
  })
}

// --- The client --------------------------------------------------------------

class NativeAuthFetch {
  /**
   * @param {object} wallet a NativeWallet (its Rust core is called directly) or any BRC-100 wallet
   * @param {object} [options] see js/auth/authfetch.d.ts
   */
  constructor (wallet, options = {}) {
    if (!wallet || typeof wallet !== 'object') throw new TypeError('NativeAuthFetch needs a wallet')
    // Everything mutable lives in objects held here, never in fields assigned
    // later: a view made with Object.create (LiveLookupClient's withoutFunding)
    // then shares the sessions and agents of the instance it views.
    this._signer = signerOf(wallet)
    this._limits = {
      maxHeaderBytes: options.maxHeaderBytes ?? DEFAULTS.maxHeaderBytes,
      maxBodyBytes: options.maxBodyBytes ?? DEFAULTS.maxBodyBytes,
      handshakeTimeoutMs: options.handshakeTimeoutMs ?? DEFAULTS.handshakeTimeoutMs
    }
    const agentOptions = { keepAlive: true, ...options.agentOptions }
    this._agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) }
    /**
     * One entry per origin, as AuthFetch's `peers`: `identityKey` is the
     * server's identity once the handshake verified; deleting the entry
     * forgets the session (the next request handshakes again).
     */
    this.peers = {}
  }

  /**
   * A BRC-104 request; resolves a WHATWG Response holding the status, the
   * signed headers (x-bsv-*, authorization) plus x-bsv-auth-identity-key, and
   * the body, as AuthFetch does (an AuthResponse: the body is held as bytes).
   * Rejects if the response does not verify.
   */
  async fetch (url, config = {}) {
    const { status, headers, body } = await this._fetchBytes(url, config)
    const response = new AuthResponse(body, { status, statusText: `${status}`, headers })
    if (status === 402) return this.handlePaymentAndRetry(url, config, response)
    return response
  }

  /**
   * fetch() without the Response: resolves the verified answer as {status,
   * headers: Map of the same headers, body: Buffer}, with no 402 step. For
   * LiveLookupClient (js/client/client.js), which reads the bytes and a few headers.
   */
  async _fetchBytes (url, config = {}) {
    const parsed = new URL(url)
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError(`unsupported URL scheme ${parsed.protocol}`)
    const { signal } = config
    if (signal && signal.aborted) throw signal.reason
    const req = prepare(config.method ?? 'GET', config.headers, config.body)
    let answer = await this._attempt(parsed, req, signal)
    if (answer.stale) {
      // A stale session (the server no longer knows it, e.g. it restarted):
      // dropped by _verify; one more try over a new handshake.
      answer = await this._attempt(parsed, req, signal)
      if (answer.stale) throw answer.stale
    }
    return answer.verified
  }

  /**
   * AuthFetch pays a 402 here and retries. This profile never pays: the 402
   * response is returned as it is (kept as a method so that callers that
   * override it, as LiveLookupClient does, see the same surface).
   */
  async handlePaymentAndRetry (_url, _config, response) {
    return response
  }

  /** Destroys the keep-alive sockets, so that the process can exit. */
  close () {
    this._agents.http.destroy()
    this._agents.https.destroy()
  }

  /** The origin's session, sharing one handshake among concurrent first requests. */
  async _session (origin, signal) {
    let entry = this.peers[origin]
    if (entry && entry.session) return entry
    if (!entry) {
      entry = { identityKey: undefined, supportsMutualAuth: undefined, session: null, pending: null }
      this.peers[origin] = entry
    }
    if (!entry.pending) {
      entry.pending = this._handshake(origin).then((session) => {
        entry.session = session
        entry.identityKey = session.peerIdentityKey
        entry.supportsMutualAuth = true
        entry.pending = null
        return entry
      }, (e) => {
        entry.pending = null
        if (this.peers[origin] === entry) delete this.peers[origin]
        throw e
      })
    }
    return raceSignal(entry.pending, signal)
  }

  /** BRC-103 handshake (Peer.initiateHandshake + processInitialResponse). */
  async _handshake (origin) {
    const signer = this._signer
    const identityKey = await signer.identityKey()
    const sessionNonce = await createNonce(signer)
    const body = Buffer.from(JSON.stringify({
      version: AUTH_VERSION,
      messageType: 'initialRequest',
      identityKey,
      initialNonce: sessionNonce,
      requestedCertificates: { certifiers: [], types: {} }
    }), 'utf8')
    const url = new URL(origin + '/.well-known/auth')
    const res = await exchange(this._agents, this._limits, url, 'POST',
      { 'content-type': 'application/json', 'content-length': body.length }, body, AbortSignal.timeout(this._limits.handshakeTimeoutMs))
    if (res.status < 200 || res.status > 299) throw unauthenticated(url.href, res.status, res.body, [])
    let m
    try { m = JSON.parse(res.body.toString('utf8')) } catch { m = null }
    if (!m || typeof m !== 'object') throw rejected(url.href, 'the handshake answer is not a JSON AuthMessage')
    if (m.version !== AUTH_VERSION) throw rejected(url.href, `auth version ${m.version}, expected ${AUTH_VERSION}`)
    if (m.messageType !== 'initialResponse') throw rejected(url.href, `message type ${m.messageType}, expected initialResponse`)
    if (typeof m.identityKey !== 'string' || typeof m.initialNonce !== 'string' || m.initialNonce === '') {
      throw rejected(url.href, 'the initial response lacks identityKey or initialNonce')
    }
    if (m.yourNonce !== sessionNonce || !(await verifyNonce(signer, m.yourNonce))) {
      throw rejected(url.href, `Initial response nonce verification failed from peer: ${m.identityKey}`)
    }
    const der = derBytes(m.signature)
    const parts = [Buffer.from(sessionNonce + m.initialNonce, 'base64')]
    if (der === null || !(await signer.verify(`${sessionNonce} ${m.initialNonce}`, m.identityKey, parts, der))) {
      throw rejected(url.href, `Unable to verify initial response signature for peer: ${m.identityKey}`)
    }
    return { sessionNonce, peerNonce: m.initialNonce, peerIdentityKey: m.identityKey }
  }

  /**
   * One signed request over the origin's session. Resolves {verified}, or
   * {stale: error} when the server answered 401 without authentication (the
   * session is then dropped).
   */
  async _attempt (url, req, signal) {
    const entry = await this._session(url.origin, signal)
    const session = entry.session
    const signer = this._signer
    const requestId = randomBytes(32)
    const payload = requestPayload(requestId, req.method, url, req.pairs, req.body)
    const nonce = randomBytes(32).toString('base64')
    const signature = await signer.sign(`${nonce} ${session.peerNonce}`, session.peerIdentityKey, payload)
    const headers = {}
    for (const [k, v] of req.pairs) headers[k] = v
    for (const [k, v] of req.unsigned) headers[k] = v
    headers['x-bsv-auth-version'] = AUTH_VERSION
    headers['x-bsv-auth-identity-key'] = await signer.identityKey()
    headers['x-bsv-auth-nonce'] = nonce
    headers['x-bsv-auth-your-nonce'] = session.peerNonce
    headers['x-bsv-auth-signature'] = signature.toString('hex')
    headers['x-bsv-auth-request-id'] = requestId.toString('base64')
    if (req.body !== null) headers['content-length'] = req.body.length
    else if (METHODS_WITH_BODY.has(req.method)) headers['content-length'] = 0
    const res = await exchange(this._agents, this._limits, url, req.method, headers, req.body, signal)
    return this._verify(url, entry, session, requestId, res)
  }

  /** Checks a general response as SimplifiedFetchTransport + Peer.processGeneralMessage do. */
  async _verify (url, entry, session, requestId, res) {
    const where = url.href
    const h = headerMap(res.rawHeaders)
    const missing = ['x-bsv-auth-version', 'x-bsv-auth-identity-key', 'x-bsv-auth-signature']
      .filter((name) => !h.has(name) || h.get(name).trim().length === 0)
    if (missing.length > 0) {
      const error = unauthenticated(where, res.status, res.body, missing)
      if (res.status === 401) {
        if (this.peers[url.origin] === entry) delete this.peers[url.origin]
        return { stale: error }
      }
      throw error
    }
    if (h.get('x-bsv-auth-version') !== AUTH_VERSION) throw rejected(where, `auth version ${h.get('x-bsv-auth-version')}, expected ${AUTH_VERSION}`)
    if (h.get('x-bsv-auth-message-type') === 'certificateRequest') throw rejected(where, 'the server requests certificates, which this client does not offer')
    const identityKey = h.get('x-bsv-auth-identity-key')
    if (identityKey !== session.peerIdentityKey) throw rejected(where, `signed by ${identityKey}, not the session's ${session.peerIdentityKey}`)
    // The session nonce is ours and passed verifyNonce in the handshake, so an
    // equal string verifies as our nonce again.
    if (h.get('x-bsv-auth-your-nonce') !== session.sessionNonce) throw rejected(where, `Unable to verify nonce for general message from: ${identityKey}`)
    const nonce = h.get('x-bsv-auth-nonce')
    if (nonce === undefined) throw rejected(where, 'no x-bsv-auth-nonce')
    const id = h.get('x-bsv-auth-request-id')
    if (id === undefined || !Buffer.from(id, 'base64').equals(requestId)) throw rejected(where, 'the answer is for another request id')
    const certs = h.get('x-bsv-auth-requested-certificates')
    if (certs !== undefined) {
      try { JSON.parse(certs) } catch { throw rejected(where, 'malformed x-bsv-auth-requested-certificates') }
    }
    const sig = h.get('x-bsv-auth-signature')
    if (!HEX.test(sig)) throw rejected(where, 'x-bsv-auth-signature is not hex')
    const signed = signedHeaders([...h.entries()], false)
    const parts = responsePayload(requestId, res.status, signed, res.body)
    const valid = await this._signer.verify(`${nonce} ${session.sessionNonce}`, session.peerIdentityKey, parts, Buffer.from(sig, 'hex'))
    if (!valid) throw rejected(where, `Invalid signature in generalMessage from ${session.peerIdentityKey}`)
    // What a Response cannot hold is refused, as AuthFetch's new Response would.
    if (res.status < 200 || res.status > 599) throw rejected(where, `status ${res.status} cannot be returned as a Response`)
    if (res.body.length > 0 && NULL_BODY_STATUSES.has(res.status)) throw rejected(where, `status ${res.status} cannot be returned as a Response (it has a body)`)
    const headers = new Map(signed)
    headers.set('x-bsv-auth-identity-key', identityKey)
    return { verified: { status: res.status, headers, body: res.body } }
  }
}

/** Statuses whose Response may carry no body (Fetch standard: null body status). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304])

/**
 * What fetch() resolves: a WHATWG Response whose body is the verified bytes,
 * held in memory. status, statusText, ok and headers are Response's own; the
 * body members are Response's too, but over the bytes: undici's Response
 * given a body builds a ReadableStream and its transfer machinery up front,
 * which costs more than the rest of a small answer's client-side handling, so
 * here `body` makes that stream only when it is read, and text(), json(),
 * arrayBuffer(), bytes() and blob() take the bytes directly. As with any
 * Response, the body is consumed once (a null body, here an empty one, never).
 */
class AuthResponse extends Response {
  #bytes
  #stream = null
  #used = false

  /** @param {Buffer} bytes the body (empty: a null body) @param {ResponseInit} init */
  constructor (bytes, init) {
    super(null, init)
    this.#bytes = bytes
  }

  get body () {
    if (this.#bytes.length === 0) return null
    if (this.#stream === null) {
      // A copy: a byte stream transfers (detaches) the buffer of what it is given.
      const copy = new Uint8Array(this.#bytes)
      this.#stream = new ReadableStream({
        type: 'bytes',
        pull: (controller) => { this.#used = true; controller.enqueue(copy); controller.close() },
        cancel: () => { this.#used = true }
      })
    }
    return this.#stream
  }

  get bodyUsed () { return this.#used }

  /**
   * Whether the body must be read through its stream (`body` was asked for);
   * otherwise marks it used (a second read rejects, as Response's does).
   */
  #viaStream () {
    if (this.#stream !== null) return true
    if (this.#used) throw new TypeError('Body is unusable: Body has already been read')
    if (this.#bytes.length > 0) this.#used = true
    return false
  }

  #fromStream () { return new Response(this.#stream, { headers: this.headers }) }

  async text () { return this.#viaStream() ? this.#fromStream().text() : UTF8.decode(this.#bytes) }
  async json () { return this.#viaStream() ? this.#fromStream().json() : JSON.parse(UTF8.decode(this.#bytes)) }
  async arrayBuffer () { return this.#viaStream() ? this.#fromStream().arrayBuffer() : new Uint8Array(this.#bytes).buffer }
  async bytes () { return this.#viaStream() ? this.#fromStream().bytes() : new Uint8Array(this.#bytes) }
  async blob () { return (this.#viaStream() ? this.#fromStream() : new Response(this.#bytes, { headers: this.headers })).blob() }
  async formData () { return (this.#viaStream() ? this.#fromStream() : new Response(this.#bytes, { headers: this.headers })).formData() }

  clone () {
    if (this.#used || (this.#stream !== null && this.#stream.locked)) throw new TypeError('Response.clone: Body has already been consumed.')
    return new AuthResponse(this.#bytes, { status: this.status, statusText: this.statusText, headers: this.headers })
  }
}

/** A DER signature given as an array of bytes (as AuthMessage JSON carries it); null otherwise. */
function derBytes (value) {
  if (!Array.isArray(value) || value.length === 0 || value.length > 80) return null
  for (const v of value) if (typeof v !== 'number' || (v & 0xff) !== v) return null
  return Buffer.from(value)
}

/** The request payload bytes for `requestId` (exported for the tests, as AuthResponse, not from the package root). */
function serializeRequest (requestId, method, headers, body, url) {
  const req = prepare(method, headers, body)
  return Buffer.concat(requestPayload(requestId, req.method, new URL(url), req.pairs, req.body))
}

module.exports = { NativeAuthFetch, AuthResponse, serializeRequest }
