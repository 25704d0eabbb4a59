'use strict'
// BRC-104 (BRC-103 over HTTP) messages as both sides of this package build
// them: the payload a request and an answer sign, and the wallet calls that
// sign and verify it. The bytes are those of @bsv/sdk 2.1.0 (AuthFetch and
// SimplifiedFetchTransport on the client, Peer with
// @bsv/auth-express-middleware 2.0.5 on the server), built here from Buffers
// rather than number[] arrays. The provider side is js/auth/authserver.js, the
// client js/auth/authfetch.js.

const crypto = require('node:crypto')
const { coreOf } = require('./wallet')

const AUTH_VERSION = '0.1'
const SIGNATURE_PROTOCOL = [2, 'auth message signature']
const NONCE_PROTOCOL = [2, 'server hmac']
/** Non-empty hex of whole bytes, as signatures travel in `x-bsv-auth-signature`. */
const HEX = /^(?:[0-9a-fA-F]{2})+$/

// Random bytes (nonces, request ids) cut from a pool drawn from the CSPRNG a
// few KiB at a time: one randomBytes call per message costs more than the
// bytes. A pool is never reused once cut, so no two callers share bytes.
const POOL_BYTES = 4096
let pool = Buffer.alloc(0)
let poolAt = 0
function randomBytes (n) {
  if (poolAt + n > pool.length) { pool = crypto.randomBytes(POOL_BYTES); poolAt = 0 }
  const out = pool.subarray(poolAt, poolAt + n)
  poolAt += n
  return out
}

/** Bitcoin varint, as the SDK's Writer.writeVarIntNum (a negative n as its 64-bit two's complement). */
function varint (n) {
  if (n < 0) {
    const b = Buffer.alloc(9)
    b[0] = 0xff
    b.writeBigInt64LE(BigInt(n), 1)
    return b
  }
  if (n < 0xfd) return Buffer.of(n)
  if (n <= 0xffff) { const b = Buffer.alloc(3); b[0] = 0xfd; b.writeUInt16LE(n, 1); return b }
  if (n <= 0xffffffff) { const b = Buffer.alloc(5); b[0] = 0xfe; b.writeUInt32LE(n, 1); return b }
  const b = Buffer.alloc(9); b[0] = 0xff; b.writeBigUInt64LE(BigInt(n), 1); return b
}

/** What an absent field (no path, no query, no body) is written as: varint(-1). */
const NO_FIELD = varint(-1)

/** varint(length) + bytes (a string as UTF-8), appended to `parts`. */
function field (parts, value) {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value
  parts.push(varint(bytes.length), bytes)
}

/** `[name, value]` pairs sorted as the SDK sorts signed headers (localeCompare on the name). */
function sortHeaders (pairs) {
  return pairs.sort(([a], [b]) => a.localeCompare(b))
}

/**
 * The signed headers among `entries` ([name, value]): lower-case names,
 * `x-bsv-*` except `x-bsv-auth-*`, `authorization`, and with `contentType`
 * (requests) the content type without its parameters. Taken in code-unit
 * order of the names (as fetch's Headers iterates them), then sorted.
 */
function signedHeaders (entries, contentType) {
  const pairs = []
  for (const [name, value] of entries.map(([k, v]) => [k.toLowerCase(), v]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (name.startsWith('x-bsv-auth')) continue
    if (name.startsWith('x-bsv-') || name === 'authorization') pairs.push([name, String(value)])
    else if (contentType && name === 'content-type') pairs.push([name, String(value).split(';')[0].trim()])
  }
  return sortHeaders(pairs)
}

function headerFields (parts, pairs) {
  parts.push(varint(pairs.length))
  for (const [k, v] of pairs) {
    field(parts, k)
    field(parts, v)
  }
}

/**
 * What a request signs (AuthFetch.serializeRequest; the middleware reads the
 * same from Express): request id, method, path, query (absent when empty),
 * signed header pairs, body (absent when null or empty). A list of Buffers.
 */
function requestPayload (requestId, method, url, pairs, body) {
  const parts = [requestId]
  field(parts, method)
  if (url.pathname.length > 0) field(parts, url.pathname)
  else parts.push(NO_FIELD)
  if (url.search.length > 0) field(parts, url.search)
  else parts.push(NO_FIELD)
  headerFields(parts, pairs)
  if (body !== null && body.length > 0) field(parts, body)
  else parts.push(NO_FIELD)
  return parts
}

/**
 * What an answer signs, as SimplifiedFetchTransport rebuilds it to verify:
 * request id, status, signed header pairs, body with its length (0 when
 * empty; the middleware would write -1 there, which no client accepts).
 */
function responsePayload (requestId, status, pairs, body) {
  const parts = [requestId, varint(status)]
  headerFields(parts, pairs)
  parts.push(varint(body.length))
  if (body.length > 0) parts.push(body)
  return parts
}

/** SHA-256 of the parts end to end (one copy and one native update cost less than an update per part). */
function sha256 (parts) {
  return crypto.createHash('sha256').update(Buffer.concat(parts)).digest()
}

function verificationFailure (e) {
  return e && (e.code === 'ERR_INVALID_SIGNATURE' || e.code === 'ERR_INVALID_HMAC')
}

/**
 * The wallet operations BRC-103/104 needs, over a NativeWallet's core: flat
 * arguments and Buffers, the message hashed here. Synchronous.
 */
function nativeSigner (core) {
  const identityKey = core.identityKey()
  const [level, protocol] = SIGNATURE_PROTOCOL
  const [nonceLevel, nonceProtocol] = NONCE_PROTOCOL
  const nonceKey = keyId => ({ level: nonceLevel, protocol: nonceProtocol, keyId, counterparty: 'self' })
  const signatureKey = (keyId, counterparty) => ({ level, protocol, keyId, counterparty })
  return {
    identityKey: () => identityKey,
    hmac: (keyID, data) => core.createHmac(nonceKey(keyID), data),
    verifyHmac: (keyID, data, mac) => core.verifyHmac(nonceKey(keyID), data, mac),
    sign: (keyID, counterparty, parts) => core.createSignature(signatureKey(keyID, counterparty), null, sha256(parts)),
    verify: (keyID, counterparty, parts, der) => core.verifySignatureDer(signatureKey(keyID, counterparty), der, null, sha256(parts))
  }
}

/** The same operations through any BRC-100 wallet's async methods (ProtoWallet and the like). */
function walletSigner (wallet) {
  let identityKey = null
  const bytes = (parts) => Array.from(Buffer.concat(parts))
  return {
    async identityKey () {
      if (identityKey === null) identityKey = (await wallet.getPublicKey({ identityKey: true })).publicKey
      return identityKey
    },
    async hmac (keyID, data) {
      const { hmac } = await wallet.createHmac({ protocolID: NONCE_PROTOCOL, keyID, data: Array.from(data), counterparty: 'self' })
      return Buffer.from(hmac)
    },
    async verifyHmac (keyID, data, mac) {
      try {
        const { valid } = await wallet.verifyHmac({ protocolID: NONCE_PROTOCOL, keyID, data: Array.from(data), hmac: Array.from(mac), counterparty: 'self' })
        return valid === true
      } catch (e) {
        if (verificationFailure(e)) return false
        throw e
      }
    },
    async sign (keyID, counterparty, parts) {
      const { signature } = await wallet.createSignature({ protocolID: SIGNATURE_PROTOCOL, keyID, counterparty, data: bytes(parts) })
      return Buffer.from(signature)
    },
    async verify (keyID, counterparty, parts, der) {
      try {
        const { valid } = await wallet.verifySignature({ protocolID: SIGNATURE_PROTOCOL, keyID, counterparty, data: bytes(parts), signature: Array.from(der) })
        return valid === true
      } catch (e) {
        if (verificationFailure(e)) return false
        throw e
      }
    }
  }
}

/** The signer for `wallet`: its core directly for a NativeWallet, its BRC-100 methods otherwise. */
function signerOf (wallet) {
  const core = coreOf(wallet)
  return core ? nativeSigner(core) : walletSigner(wallet)
}

module.exports = { AUTH_VERSION, HEX, randomBytes, varint, sortHeaders, signedHeaders, requestPayload, responsePayload, signerOf }
