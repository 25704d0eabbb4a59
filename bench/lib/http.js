'use strict'
// The real router (js/provider/router.js) on Express over loopback, in unauthenticated public mode (the
// default) or with BRC-103 authentication. In public mode the advertised base URL is a fixed https
// origin (the LiveLookup provider must equal it); with BRC-103 the provider is the server's
// identity key. The server itself listens on 127.0.0.1, and requests carry the selection headers
// of BRC-194 §1. Also: a plain node:http client with its own keep-alive Agent, for the sections
// that hold many requests open at once.

const http = require('node:http')
const express = require('express')
const { PrivateKey } = require('@bsv/sdk')
const { createRouter, PROFILE } = require('../../js/provider/router')
const { now } = require('./common')

/** The origin every public-mode benchmark store uses as its provider (public mode: provider = origin). */
const ORIGIN = 'https://bench.overlay-lookup-live.invalid'

/**
 * Starts a server for `live`; resolves {base, port, headers, close()}.
 * @param {object} [o]
 * @param {'none'|'brc103'} [o.authentication] default 'none'
 * @param {string} [o.privateKey] hex; with 'brc103' the live provider must be its identity key
 * @param {(app: import('express').Express) => void} [o.routes] mounts further routes after the
 *   live router (as an operator's own routes would be, e.g. an Overlay-Express-style /lookup)
 * @param {number} [o.keepAliveTimeoutMs] server keep-alive timeout (Node's default is 5 s)
 */
async function startServer (live, o = {}) {
  const authentication = o.authentication || 'none'
  const router = createRouter(live, {
    authentication,
    baseURL: ORIGIN,
    privateKey: o.privateKey || PrivateKey.fromRandom().toHex()
  })
  const app = express()
  app.use(router)
  if (o.routes) o.routes(app)
  const server = app.listen(0, '127.0.0.1')
  if (o.keepAliveTimeoutMs) server.keepAliveTimeout = o.keepAliveTimeoutMs
  await new Promise((resolve, reject) => { server.once('listening', resolve); server.once('error', reject) })
  const headers = {
    'content-type': 'application/json',
    'x-bsv-overlay-profile': PROFILE
  }
  // AuthFetch cannot send Cache-Control; the router requires it of unauthenticated callers only.
  if (authentication === 'none') headers['cache-control'] = 'no-store'
  if (router.manifest && typeof router.manifest.digest === 'function') headers['x-bsv-overlay-capability'] = router.manifest.digest()
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    port: server.address().port,
    headers,
    server,
    async close () {
      server.closeAllConnections()
      await new Promise(resolve => server.close(resolve))
    }
  }
}

/**
 * A keep-alive node:http Agent allowing `sockets` connections to one origin at once (Node's global
 * agent also has no per-origin cap, but a bench should say what it used).
 */
function agent (sockets) {
  return new http.Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets, scheduling: 'fifo' })
}

/**
 * POSTs `body` to a lookup route of `server` through `ag`. Resolves {status, body, at}: `body` is
 * the parsed JSON of a 200 answer (the raw text otherwise) and `at` is performance.now() once the
 * whole response was received and parsed. Never rejects on an HTTP status.
 */
function postRaw (ag, server, op, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      agent: ag,
      host: '127.0.0.1',
      port: server.port,
      method: 'POST',
      path: `/overlay/v1/lookup/${op}`,
      headers: { ...server.headers, 'content-length': body.length }
    }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let parsed = text
        if (res.statusCode === 200) {
          try { parsed = JSON.parse(text) } catch (e) { return reject(new Error(`unparsable ${op} answer: ${text.slice(0, 200)}`)) }
        }
        resolve({ status: res.statusCode, body: parsed, at: now() })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

module.exports = { ORIGIN, startServer, agent, postRaw }
