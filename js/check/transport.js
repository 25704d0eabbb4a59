'use strict'
// HTTP exchanges of the conformance checker (js/check/index.js). Every answer is kept whole:
// its status, every header as it arrived and the exact body bytes. The checks judge headers a
// BRC-104 client never hands to its caller (Cache-Control, Vary, Content-Encoding, CORS) and
// compare bodies byte for byte, so nothing here decodes, follows or retries on its own.
// Redirects are never followed (BRC-193 §2).

const http = require('node:http')
const https = require('node:https')
const zlib = require('node:zlib')
const { NativeAuthFetch } = require('../auth/authfetch')

/** Bound on one answer's body: the profile's 4 MiB maximum plus room for a faulty provider. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024

/** Response headers with lower-case names; repeated names joined with ', ' (as fetch does). */
function headerMap (rawHeaders) {
  const map = new Map()
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase()
    const prior = map.get(name)
    map.set(name, prior === undefined ? rawHeaders[i + 1] : `${prior}, ${rawHeaders[i + 1]}`)
  }
  return map
}

/**
 * The body as the provider meant it: a compressed body (already reported by the
 * content-encoding check) is decoded so that the other checks still judge its content.
 */
function decodedBody (encoding, body) {
  const e = (encoding || '').trim().toLowerCase()
  try {
    if (e === 'gzip' || e === 'x-gzip') return zlib.gunzipSync(body)
    if (e === 'deflate') return zlib.inflateSync(body)
    if (e === 'br') return zlib.brotliDecompressSync(body)
  } catch (_) {
    return body
  }
  return body
}

/** An answer as the checks read it. */
class Answer {
  constructor ({ label, op, method, url, status, rawHeaders, body, signed, ms }) {
    this.label = label
    this.op = op
    this.method = method
    this.url = url
    this.status = status
    this.headers = headerMap(rawHeaders)
    this.raw = body
    this.body = decodedBody(this.headers.get('content-encoding'), body)
    this.signed = signed
    this.ms = ms
    /** When the answer arrived (ms since the epoch). */
    this.at = Date.now()
    this._json = undefined
  }

  /** The body parsed as JSON, or undefined when it is not JSON. */
  get json () {
    if (this._json === undefined) {
      try { this._json = JSON.parse(this.body.toString('utf8')) } catch (_) { this._json = null }
    }
    return this._json === null ? undefined : this._json
  }

  header (name) {
    return this.headers.get(name)
  }

  /** `open 409` style name of the exchange, for FAIL lines. */
  get name () {
    return `${this.label} (${this.method} ${this.op} answered ${this.status})`
  }
}

/**
 * One plain HTTP exchange over node:http(s): resolves {status, rawHeaders, body}, never
 * following a redirect. An answer that arrives while the request body is still being
 * written (a provider refusing an oversized body early) is kept; the write error after it
 * is not a failure.
 */
function exchange (url, { method, headers, body, timeoutMs }) {
  return new Promise((resolve, reject) => {
    const secure = url.protocol === 'https:'
    let settled = false
    const done = (f, v) => { if (!settled) { settled = true; clearTimeout(timer); f(v) } }
    const req = (secure ? https : http).request(url, { method, headers, agent: false }, (res) => {
      const chunks = []
      let size = 0
      res.on('data', (chunk) => {
        size += chunk.length
        if (size > MAX_ANSWER_BYTES) {
          req.destroy()
          done(reject, new Error(`the answer body exceeds ${MAX_ANSWER_BYTES} bytes`))
          return
        }
        chunks.push(chunk)
      })
      res.on('end', () => done(resolve, { status: res.statusCode, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks) }))
      res.on('error', (e) => done(reject, e))
      res.on('close', () => { if (!res.complete) done(reject, new Error('the answer ended before its last byte')) })
    })
    const timer = setTimeout(() => {
      req.destroy()
      done(reject, new Error(`no answer within ${timeoutMs} ms`))
    }, timeoutMs)
    req.on('error', (e) => done(reject, e))
    if (body !== undefined && body !== null) req.end(body)
    else req.end()
  })
}

/**
 * NativeAuthFetch that keeps the last answer as it arrived (every header, not only the
 * signed ones it hands back), before verifying it. The checker sends one request at a time
 * per instance, so "last" is the answer to the request in flight.
 */
class CapturingAuthFetch extends NativeAuthFetch {
  async _verify (url, entry, session, requestId, res) {
    this.lastAnswer = res
    return super._verify(url, entry, session, requestId, res)
  }
}

/**
 * The checker's client of one provider. `auth` 'brc103' sends lookup requests through a
 * BRC-104 client with `wallet`; 'none' sends them as plain HTTP. `raw` always sends plain
 * HTTP (probes that need headers a BRC-104 client cannot send: Origin, Accept-Encoding,
 * padding). Every answer is appended to `answers`.
 */
class CheckTransport {
  constructor ({ baseURL, auth, wallet, timeoutMs }) {
    this.base = baseURL
    this.auth = auth
    this.timeoutMs = timeoutMs
    this.answers = []
    this.authFetch = auth === 'brc103' ? new CapturingAuthFetch(wallet, { maxBodyBytes: MAX_ANSWER_BYTES }) : null
  }

  url (suffix) {
    return new URL(this.base + suffix)
  }

  /** Plain HTTP, whatever the mode. `headers` values of null are left out. */
  async raw (label, { method = 'POST', suffix, headers = {}, body, op, waitMs = 0 }) {
    const url = this.url(suffix)
    const h = {}
    for (const [k, v] of Object.entries(headers)) if (v !== null && v !== undefined) h[k] = v
    if (body !== undefined && h['content-length'] === undefined) h['content-length'] = Buffer.byteLength(body)
    const started = Date.now()
    const res = await exchange(url, { method, headers: h, body, timeoutMs: waitMs + this.timeoutMs })
    return this.keep(new Answer({ label, op: op || suffix, method, url: url.href, status: res.status, rawHeaders: res.rawHeaders, body: res.body, signed: false, ms: Date.now() - started }))
  }

  /**
   * A request in the checked mode: BRC-104 signed with 'brc103' (the answer must verify),
   * plain HTTP otherwise. Resolves the Answer; an answer that does not verify rejects with
   * an Error whose `answer` is what arrived.
   */
  async send (label, { method = 'POST', suffix, headers = {}, body, op, waitMs = 0 }) {
    if (!this.authFetch) return this.raw(label, { method, suffix, headers, body, op, waitMs })
    const url = this.url(suffix)
    const signedHeaders = {}
    for (const [k, v] of Object.entries(headers)) {
      const name = k.toLowerCase()
      // What a BRC-104 client can send: content-type, authorization and x-bsv-* headers.
      if (v !== null && v !== undefined && (name === 'content-type' || name === 'authorization' || name.startsWith('x-bsv-'))) signedHeaders[name] = v
    }
    const started = Date.now()
    this.authFetch.lastAnswer = null
    let verified
    try {
      verified = await this.authFetch._fetchBytes(url.href, { method, headers: signedHeaders, body, signal: AbortSignal.timeout(waitMs + this.timeoutMs) })
    } catch (e) {
      const got = this.authFetch.lastAnswer
      const status = (e && e.details && e.details.status) || (got && got.status)
      const err = new Error(`the answer was not a verified BRC-104 response (${e && e.message})`)
      if (got) err.answer = this.keep(new Answer({ label, op: op || suffix, method, url: url.href, status: got.status, rawHeaders: got.rawHeaders, body: got.body, signed: false, ms: Date.now() - started }))
      err.status = status
      throw err
    }
    const got = this.authFetch.lastAnswer
    const rawHeaders = got ? got.rawHeaders : [...verified.headers.entries()].flat()
    return this.keep(new Answer({ label, op: op || suffix, method, url: url.href, status: verified.status, rawHeaders, body: verified.body, signed: true, ms: Date.now() - started }))
  }

  keep (answer) {
    this.answers.push(answer)
    return answer
  }

  close () {
    if (this.authFetch) this.authFetch.close()
  }
}

module.exports = { CheckTransport, Answer, exchange, headerMap, MAX_ANSWER_BYTES }
