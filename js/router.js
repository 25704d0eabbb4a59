'use strict'
// HTTP transport of the profile (BRC-193 §2, §6, §8; BRC-194 §1): an Express
// router for POST /overlay/v1/lookup/{open,read,close} and GET
// /overlay/v1/capabilities. Mount it before any body parser or compression: it
// reads the raw body itself, under the 1 MiB bound, and answers with the exact
// bytes the native core produced.

const express = require('express')
const wire = require('./wire')

const MAX_BODY = 1024 * 1024
const MAX_HEADER_BYTES = 16 * 1024
const PROFILE = 'https://bsv.brc.dev/overlays/0193#lookup-live-v1'
const VARY = 'Authorization, x-bsv-auth-identity-key, x-bsv-overlay-capability, x-bsv-overlay-profile'
const SELECTION_HEADERS = ['x-bsv-overlay-capability', 'x-bsv-overlay-profile']
const EXPOSED = [
  'x-bsv-auth-version', 'x-bsv-auth-message-type', 'x-bsv-auth-identity-key', 'x-bsv-auth-nonce',
  'x-bsv-auth-your-nonce', 'x-bsv-auth-signature', 'x-bsv-auth-request-id', 'x-bsv-auth-requested-certificates',
  ...SELECTION_HEADERS
]

/** Headers every response carries, errors included (BRC-193 §8). */
function baseHeaders (req, res, allowedOrigins) {
  res.setHeader('Cache-Control', 'private, no-store')
  res.setHeader('Vary', VARY)
  res.setHeader('X-Content-Type-Options', 'nosniff')
  res.setHeader('X-Accel-Buffering', 'no')
  for (const name of SELECTION_HEADERS) {
    const v = req.headers[name]
    if (typeof v === 'string' && v.length <= 1024) res.setHeader(name, v)
  }
  const origin = req.headers.origin
  if (origin && allowedOrigins.has(origin)) {
    res.setHeader('Access-Control-Allow-Origin', origin)
    res.setHeader('Access-Control-Allow-Credentials', 'true')
    res.setHeader('Access-Control-Expose-Headers', EXPOSED.join(', '))
    res.append('Vary', 'Origin')
  }
}

function send (res, status, body) {
  if (res.headersSent || res.writableEnded) return
  res.status(status)
  res.setHeader('Content-Type', 'application/json')
  res.setHeader('Content-Length', String(body.length))
  res.end(body)
}

function sendError (res, code, message, extra) {
  send(res, wire.statusOf(code), wire.errorBody(code, message, extra))
}

/** The request policy of BRC-193 §2 and §8, before any byte of the body is read. */
function checkRequest (req) {
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
  if (req.headers['content-type'] !== 'application/json') return ['invalid', 'Content-Type must be exactly application/json']
  const cc = req.headers['cache-control']
  if (typeof cc !== 'string' || !cc.split(',').map(s => s.trim().toLowerCase()).includes('no-store')) {
    return ['invalid', 'requests must send Cache-Control: no-store']
  }
  const length = req.headers['content-length']
  if (length !== undefined && Number(length) > MAX_BODY) return ['limited', 'request body exceeds 1 MiB']
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
 * Checks the selection headers of BRC-194 §1 against the current manifest.
 * Returns an error tuple or null.
 */
function checkSelection (req, manifest) {
  const profile = req.headers['x-bsv-overlay-profile']
  if (profile !== PROFILE) return ['unsupported', 'x-bsv-overlay-profile must name ' + PROFILE]
  if (manifest) {
    const capability = req.headers['x-bsv-overlay-capability']
    if (capability !== manifest.digest()) return ['context-changed', 'the capability manifest changed; fetch it again']
  }
  return null
}

/**
 * Builds the router.
 * @param {import('./live').LiveLookup} live
 * @param {object} options see js/router.d.ts
 */
function createRouter (live, options = {}) {
  const authentication = options.authentication
  if (authentication !== 'brc103' && authentication !== 'none') {
    throw new TypeError("router needs authentication: 'brc103' or 'none' (explicitly)")
  }
  if (authentication === 'brc103' && !options.authMiddleware) {
    throw new TypeError("authentication 'brc103' needs authMiddleware (or use liveRouter with a wallet)")
  }
  const allowedOrigins = new Set(options.allowedOrigins || [])
  if (allowedOrigins.has('*')) throw new TypeError('a wildcard origin is not allowed with credentials')
  const manifest = options.manifest || null
  const log = typeof options.log === 'function' ? options.log : () => {}
  const router = express.Router()

  router.use('/overlay/v1', (req, res, next) => {
    baseHeaders(req, res, allowedOrigins)
    if (req.method === 'OPTIONS') {
      const origin = req.headers.origin
      if (origin && allowedOrigins.has(origin)) {
        res.setHeader('Access-Control-Allow-Methods', 'GET, POST, OPTIONS')
        res.setHeader('Access-Control-Allow-Headers', ['content-type', 'cache-control', ...EXPOSED].join(', '))
        res.setHeader('Access-Control-Max-Age', '600')
      }
      res.status(204).end()
      return
    }
    next()
  })

  router.get('/overlay/v1/capabilities', (req, res) => {
    if (!manifest) return sendError(res, 'not-found', 'no capability manifest is configured')
    send(res, 200, manifest.bytes())
  })

  const handlers = {
    open: (body, caller) => live.open(body, caller),
    close: (body, caller) => live.closeSession(body, caller),
    read: (body, caller, signal) => live.read(body, caller, { signal })
  }

  router.all('/overlay/v1/lookup/:op', async (req, res, next) => {
    const handler = handlers[req.params.op]
    if (!handler) return sendError(res, 'not-found', 'unknown lookup route')
    const bad = checkRequest(req) || checkSelection(req, manifest)
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
    req.rawBody = body
    // The BRC-104 middleware verifies the JSON body it finds on req.body.
    try {
      req.body = JSON.parse(body.toString('utf8'))
    } catch {
      req.body = {}
    }
    const run = async () => {
      const caller = authentication === 'brc103'
        ? { principal: req.auth && req.auth.identityKey, authenticated: true }
        : { principal: '', authenticated: false }
      if (authentication === 'brc103' && (!caller.principal || caller.principal === 'unknown')) {
        return sendError(res, 'unauthorized', 'BRC-103 authentication is required')
      }
      const ac = new AbortController()
      const onClose = () => { if (!res.writableEnded) ac.abort() }
      res.on('close', onClose)
      try {
        const out = await handler(body, caller, ac.signal)
        if (ac.signal.aborted) return
        log({ op: req.params.op, status: out.status, principal: caller.principal || null, bytes: out.body.length })
        send(res, out.status, Buffer.from(out.body))
      } catch (e) {
        log({ op: req.params.op, status: 503, error: String(e && e.code) })
        sendError(res, 'unavailable', 'the provider failed to answer')
      } finally {
        res.off('close', onClose)
      }
    }
    if (authentication === 'brc103') {
      options.authMiddleware(req, res, (err) => {
        if (err) return next(err)
        run().catch(next)
      })
    } else {
      run().catch(next)
    }
  })

  router.all('/overlay/v1/{*rest}', (req, res) => sendError(res, 'not-found', 'unknown route'))
  return router
}

module.exports = { createRouter, PROFILE, VARY, MAX_BODY }
