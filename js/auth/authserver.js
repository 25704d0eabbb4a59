'use strict'
// The provider's side of BRC-103 mutual authentication over HTTP (BRC-104),
// for the router's own routes: the handshake at /.well-known/auth, the check of
// a signed request, and the signature of its answer, on the bytes of
// js/auth/brc104.js, so any BRC-104 client (AuthFetch in Node or a browser,
// NativeAuthFetch) works unchanged. What it leaves out is what the router
// never uses: certificate exchange, and unsigned fall-through on lookup routes.
//
// Why not @bsv/auth-express-middleware: per request it copies headers and
// bodies into number[] arrays, frames them with the SDK's Writer/Reader,
// installs closures on the response and a listener on its Peer, and keeps
// every session forever. Here a request is one Buffer payload and one native
// verification, an answer one payload and one native signature, and sessions
// live in a bounded table.

const { AUTH_VERSION, HEX, randomBytes, signedHeaders, requestPayload, responsePayload, signerOf } = require('./brc104')

/** Longest nonce accepted from a client, in characters (the SDK's are 64). */
const MAX_NONCE_CHARS = 256
/** Longest signature accepted, in hex characters (DER is at most 72 bytes). */
const MAX_SIGNATURE_HEX = 2 * 80
const IDENTITY = /^0[23][0-9a-f]{64}$/

/** `s` decoded if it is canonical base64 (re-encodes to itself); else null. */
function base64Exact (s) {
  if (typeof s !== 'string' || s.length === 0 || s.length > MAX_NONCE_CHARS) return null
  const bytes = Buffer.from(s, 'base64')
  return bytes.toString('base64') === s ? bytes : null
}

/** `s` decoded if it is non-empty even-length hex within the DER bound; else null. */
function hexExact (s) {
  if (typeof s !== 'string' || s.length > MAX_SIGNATURE_HEX || !HEX.test(s)) return null
  return Buffer.from(s, 'hex')
}

/**
 * What the client signed for an Express request with `body` as its exact
 * bytes: the path and query as the request line carries them.
 */
function requestPayloadOf (requestId, req, body) {
  const url = new URL('http://host' + req.originalUrl)
  return requestPayload(requestId, req.method, url, signedHeaders(Object.entries(req.headers), true), body)
}

/**
 * Sessions by the nonce the provider issued, least recently used first (a
 * Map keeps insertion order; a use re-inserts). At most `max` in all and
 * `perIdentity` per client identity: a new handshake beyond either bound
 * drops the least recently used, whose client is then told its session is
 * unknown (401) and handshakes again, as AuthFetch does by itself.
 */
class SessionTable {
  constructor (max, perIdentity) {
    this.max = max
    this.perIdentity = perIdentity
    this.byNonce = new Map()
    this.countByIdentity = new Map()
  }

  get size () { return this.byNonce.size }

  add (session) {
    const mine = this.countByIdentity.get(session.peerIdentityKey) || 0
    if (mine >= this.perIdentity) {
      for (const s of this.byNonce.values()) {
        if (s.peerIdentityKey === session.peerIdentityKey) { this.remove(s); break }
      }
    }
    if (this.byNonce.size >= this.max) this.remove(this.byNonce.values().next().value)
    this.byNonce.set(session.sessionNonce, session)
    this.countByIdentity.set(session.peerIdentityKey, (this.countByIdentity.get(session.peerIdentityKey) || 0) + 1)
  }

  /** The session issued as `nonce`, marked as just used; undefined if none. */
  use (nonce) {
    const session = this.byNonce.get(nonce)
    if (session) {
      this.byNonce.delete(nonce)
      this.byNonce.set(nonce, session)
    }
    return session
  }

  remove (session) {
    this.byNonce.delete(session.sessionNonce)
    const left = this.countByIdentity.get(session.peerIdentityKey) - 1
    if (left > 0) this.countByIdentity.set(session.peerIdentityKey, left)
    else this.countByIdentity.delete(session.peerIdentityKey)
  }
}

class AuthServer {
  /**
   * @param {object} wallet the provider's BRC-100 wallet (a NativeWallet for speed)
   * @param {string} identityKey the wallet's identity key (hex)
   * @param {{ maxSessions?: number, sessionsPerIdentity?: number }} [options]
   */
  constructor (wallet, identityKey, options = {}) {
    this.signer = signerOf(wallet)
    this.identityKey = identityKey
    this.sessions = new SessionTable(options.maxSessions || 50000, options.sessionsPerIdentity || 16)
  }

  /**
   * Answers a BRC-103 initialRequest (the parsed JSON of a POST to
   * /.well-known/auth) with the initialResponse to send as JSON, and records
   * the session; null for anything else (the caller refuses it). The
   * provider's nonce is 48 random bytes, as long as the SDK's (16 random and
   * a 32-byte HMAC), so its base64 has no padding: the SDK's client decodes
   * the two nonces concatenated as one string. Only this table checks it.
   */
  async handshake (message) {
    if (!message || typeof message !== 'object' || message.version !== AUTH_VERSION) return null
    if (message.messageType !== 'initialRequest') return null
    const { identityKey, initialNonce } = message
    if (typeof identityKey !== 'string' || !IDENTITY.test(identityKey)) return null
    const theirs = base64Exact(initialNonce)
    if (!theirs) return null
    const ours = randomBytes(48)
    const sessionNonce = ours.toString('base64')
    let signature
    try {
      signature = await this.signer.sign(`${initialNonce} ${sessionNonce}`, identityKey, [theirs, ours])
    } catch {
      return null // not a point on the curve
    }
    this.sessions.add({ sessionNonce, peerNonce: initialNonce, peerIdentityKey: identityKey })
    return {
      version: AUTH_VERSION,
      messageType: 'initialResponse',
      identityKey: this.identityKey,
      initialNonce: sessionNonce,
      yourNonce: initialNonce,
      signature: Array.from(signature)
    }
  }

  /** True when the request carries BRC-104 auth headers (it is a general message). */
  static signed (req) {
    return req.headers['x-bsv-auth-request-id'] !== undefined
  }

  /**
   * Checks a general message: version, a session this provider issued to the
   * identity the request names, and the signature over the request payload
   * with `body` as its exact bytes. The identity is the session's: a request
   * naming another identity than the one that handshook is refused (the
   * middleware would take the header's word for it). Resolves to the
   * exchange ({identityKey, session, requestId}) or null.
   */
  async verify (req, body) {
    const h = req.headers
    if (h['x-bsv-auth-version'] !== AUTH_VERSION) return null
    const requestId = base64Exact(h['x-bsv-auth-request-id'])
    if (!requestId || requestId.length !== 32) return null
    const identityKey = h['x-bsv-auth-identity-key']
    const nonce = h['x-bsv-auth-nonce']
    if (typeof nonce !== 'string' || nonce.length === 0 || nonce.length > MAX_NONCE_CHARS) return null
    const signature = hexExact(h['x-bsv-auth-signature'])
    if (!signature) return null
    const session = typeof h['x-bsv-auth-your-nonce'] === 'string' ? this.sessions.use(h['x-bsv-auth-your-nonce']) : undefined
    if (!session || session.peerIdentityKey !== identityKey) return null
    let valid
    try {
      const payload = requestPayloadOf(requestId, req, body)
      valid = await this.signer.verify(`${nonce} ${session.sessionNonce}`, identityKey, payload, signature)
    } catch {
      return null // an unparsable URL or a malformed signature
    }
    if (!valid) return null
    return { identityKey, session, requestId }
  }

  /**
   * Signs an answer to a verified exchange and sets its auth headers on `res`.
   * The signed headers are the `x-bsv-*` (and `authorization`) headers already
   * set on `res`: set every such header before calling this.
   */
  async sign (exchange, res, status, body) {
    const headers = signedHeaders(Object.entries(res.getHeaders()), false)
    const nonce = randomBytes(32).toString('base64')
    const payload = responsePayload(exchange.requestId, status, headers, body)
    const signature = await this.signer.sign(`${nonce} ${exchange.session.peerNonce}`, exchange.identityKey, payload)
    res.setHeader('x-bsv-auth-version', AUTH_VERSION)
    res.setHeader('x-bsv-auth-identity-key', this.identityKey)
    res.setHeader('x-bsv-auth-nonce', nonce)
    res.setHeader('x-bsv-auth-your-nonce', exchange.session.peerNonce)
    res.setHeader('x-bsv-auth-signature', Buffer.from(signature).toString('hex'))
    res.setHeader('x-bsv-auth-request-id', exchange.requestId.toString('base64'))
  }
}

module.exports = { AuthServer, requestPayloadOf }
