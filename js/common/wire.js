'use strict'
// JS face of the Rust `wire` module: strict request parsing, RFC 8785 canonical
// JSON and BRC-192 digests. Every failure is an Error with `.code` (the wire
// error code, e.g. 'invalid') and `.status` (its HTTP status, BRC-193 §6), set by js/common/native.js.

const native = require('./native')

/** Error code -> HTTP status, taken from the Rust table so it exists once. */
const STATUS = Object.freeze(native.wireErrorStatuses())

/**
 * The profile identifier and its hard limits (BRC-193 §1, §2, §8), taken from Rust
 * (`wire::limits`) so they exist once: `{profile, maxRequestBytes, maxResponseBytes,
 * minResponseBytes, maxObservations, maxWaitMs, maxErrorBodyBytes, maxHeaderBytes}`.
 */
const PROFILE_LIMITS = Object.freeze(native.wireProfile())
const PROFILE = PROFILE_LIMITS.profile

function statusOf (code) {
  return Object.prototype.hasOwnProperty.call(STATUS, code) ? STATUS[code] : undefined
}

function wireError (code, message) {
  const err = new Error(message)
  err.code = code
  err.status = statusOf(code)
  return err
}

function requestBody (body) {
  if (typeof body === 'string') {
    // Converting a JS string to UTF-8 would silently turn a raw lone surrogate
    // into U+FFFD; reject it here as the byte-level parser would (BRC-192 §1).
    if (!body.isWellFormed()) throw wireError('invalid', 'request body contains an unpaired surrogate')
    return body
  }
  if (Buffer.isBuffer(body)) return body
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  throw wireError('invalid', 'request body must be a string or a Buffer')
}

/** A request body (string or bytes) as a Buffer, with requestBody's checks. */
function requestBytes (body) {
  const b = requestBody(body)
  return typeof b === 'string' ? Buffer.from(b, 'utf8') : b
}

/** Parses and validates an Open request body; returns the normalized Open. */
function parseOpen (body) {
  return native.wireParseOpen(requestBody(body))
}

/** Parses and validates a Read request body. */
function parseRead (body) {
  return native.wireParseRead(requestBody(body))
}

/** Parses and validates a Close request body. */
function parseClose (body) {
  return native.wireParseClose(requestBody(body))
}

// JSON text of a JS value with JSON.stringify semantics (toJSON, undefined
// members dropped), except that values JCS cannot represent are errors rather
// than silently becoming null (RFC 8785 §3.2.2.3).
function jsonText (value) {
  let text
  try {
    text = JSON.stringify(value, (key, v) => {
      if (typeof v === 'number' && !Number.isFinite(v)) throw wireError('invalid', 'non-finite number')
      if (typeof v === 'bigint') throw wireError('invalid', 'BigInt is not a JSON value')
      return v
    })
  } catch (err) {
    if (err && err.code === 'invalid') throw err
    throw wireError('invalid', `value is not serializable as JSON: ${err && err.message}`)
  }
  if (text === undefined) throw wireError('invalid', 'value is not serializable as JSON')
  return text
}

/** RFC 8785 canonical JSON of a JS value. */
function canonicalize (value) {
  const text = jsonText(value)
  return native.wireCanonicalizeJson(text)
}

/** digest(T, B) of BRC-192 §1: lowercase hex SHA-256 of "BRC-OUTPUT/1/"+T, 0x00, JCS(B). */
function digest (type, body) {
  if (typeof type !== 'string') throw wireError('invalid', 'packet type must be a string')
  const text = jsonText(body)
  return native.wireDigestJson(type, text)
}

/**
 * Complete error response body (a Buffer of at most 4096 bytes):
 * `{version:1, error:{code, message, retryable, retryAfterMs?, limit?}}`.
 */
function errorBody (code, message, options) {
  if (typeof code !== 'string' || typeof message !== 'string') {
    throw wireError('invalid', 'errorBody(code, message) takes two strings')
  }
  return native.wireErrorBody(code, message, options == null ? undefined : options)
}

module.exports = {
  PROFILE,
  PROFILE_LIMITS,
  STATUS,
  statusOf,
  wireError,
  parseOpen,
  parseRead,
  parseClose,
  requestBytes,
  canonicalize,
  digest,
  errorBody
}
