'use strict'
// An HTTP reverse proxy with one deliberate fault, for the conformance checker's tests. It
// forwards every request to the node behind it and changes the request or the answer the way
// a misbehaving provider (or a misconfigured proxy in front of a good one) would. The faults
// edit bodies, so they are for the public mode (a BRC-104 signature would expose them first).

const http = require('node:http')
const zlib = require('node:zlib')

function json (body) {
  try { return JSON.parse(body.toString('utf8')) } catch (_) { return null }
}

function isBatch (j) {
  return j && typeof j === 'object' && typeof j.cursor === 'string' && typeof j.session === 'string'
}

/** Each fault: `request(req, body, state)` may return a new request body; `answer(req, body, res, state)` edits the answer. */
const FAULTS = {
  /** Error answers lose Cache-Control: private, no-store. */
  'cache-control-on-errors': {
    answer (req, body, res) { if (res.status >= 400) res.headers['cache-control'] = 'no-cache' }
  },
  /** Bodies are gzip-compressed whenever the client offers gzip. */
  compression: {
    answer (req, body, res) {
      if (/gzip/.test(req.headers['accept-encoding'] || '') && res.body.length > 0) {
        res.body = zlib.gzipSync(res.body)
        res.headers['content-encoding'] = 'gzip'
      }
    }
  },
  /** Every answer allows any origin with credentials. */
  'credentialed-wildcard-cors': {
    answer (req, body, res) {
      res.headers['access-control-allow-origin'] = '*'
      res.headers['access-control-allow-credentials'] = 'true'
    }
  },
  /** A read repeated with the same body gets a page whose group id changed. */
  'replay-drift': {
    answer (req, body, res, state) {
      if (!req.url.endsWith('/lookup/read') || res.status !== 200) return
      const key = body.toString('utf8')
      if (!state.seen.has(key)) return state.seen.add(key)
      const j = json(res.body)
      if (!isBatch(j)) return
      if (j.groups.length > 0) j.groups[0].id += '-changed'
      else j.expiresAt = String(BigInt(j.expiresAt) + 1n)
      res.body = Buffer.from(JSON.stringify(j))
    }
  },
  /** A read naming a cursor the provider never issued is sent on with the session's last real cursor. */
  'forged-cursor-accepted': {
    request (req, body, state) {
      if (!req.url.endsWith('/lookup/read')) return body
      const j = json(body)
      const issued = j && state.issued.get(j.session)
      if (!issued || issued.all.has(j.cursor)) return body
      return Buffer.from(JSON.stringify({ ...j, cursor: issued.last }))
    },
    answer (req, body, res, state) {
      const j = res.status === 200 ? json(res.body) : null
      if (!isBatch(j)) return
      const issued = state.issued.get(j.session) || { all: new Set(), last: null }
      issued.all.add(j.cursor)
      issued.last = j.cursor
      state.issued.set(j.session, issued)
    }
  },
  /** Batches claim a highWater one below their through. */
  'through-above-highwater': {
    answer (req, body, res) {
      const j = res.status === 200 ? json(res.body) : null
      if (!isBatch(j) || BigInt(j.through) === 0n) return
      j.highWater = String(BigInt(j.through) - 1n)
      res.body = Buffer.from(JSON.stringify(j))
    }
  }
}

const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'content-length']

/**
 * Starts the proxy on loopback. Set `proxy.target` (an origin) before sending requests; the
 * node behind it advertises `proxy.origin` as its base URL.
 */
async function startFaultyProxy (fault) {
  const hooks = FAULTS[fault]
  if (!hooks) throw new Error(`unknown fault ${fault}`)
  const state = { seen: new Set(), issued: new Map() }
  const proxy = { target: null, fault }
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      let body = Buffer.concat(chunks)
      if (hooks.request) body = hooks.request(req, body, state)
      const headers = { ...req.headers, host: new URL(proxy.target).host, 'content-length': body.length }
      delete headers['transfer-encoding']
      let answered = false
      const up = http.request(proxy.target + req.url, { method: req.method, headers, agent: false }, (ur) => {
        const parts = []
        ur.on('data', (c) => parts.push(c))
        ur.on('end', () => {
          answered = true
          const answer = { status: ur.statusCode, headers: { ...ur.headers }, body: Buffer.concat(parts) }
          if (hooks.answer) hooks.answer(req, body, answer, state)
          for (const h of HOP_BY_HOP) delete answer.headers[h]
          answer.headers['content-length'] = answer.body.length
          res.writeHead(answer.status, answer.headers)
          res.end(answer.body)
        })
      })
      up.on('error', () => {
        if (answered || res.headersSent) return
        res.statusCode = 502
        res.end()
      })
      up.end(body.length > 0 ? body : undefined)
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  proxy.origin = `http://127.0.0.1:${server.address().port}`
  proxy.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  return proxy
}

module.exports = { startFaultyProxy, FAULTS: Object.keys(FAULTS) }
