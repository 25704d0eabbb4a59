'use strict'
// The real router (js/router.js) in unauthenticated public mode on Express over loopback. The
// advertised base URL is a fixed https origin (the LiveLookup provider must equal it); the server
// itself listens on 127.0.0.1, and requests carry the selection headers of BRC-194 §1.

const express = require('express')
const { PrivateKey } = require('@bsv/sdk')
const { createRouter, PROFILE } = require('../../js/router')

/** The origin every benchmark store uses as its provider (public mode: provider = origin). */
const ORIGIN = 'https://bench.overlay-lookup-live.invalid'

/** Starts a server for `live`; resolves {base, headers, close()}. */
async function startServer (live) {
  const router = createRouter(live, {
    authentication: 'none',
    baseURL: ORIGIN,
    privateKey: PrivateKey.fromRandom().toHex()
  })
  const app = express()
  app.use(router)
  const server = app.listen(0, '127.0.0.1')
  await new Promise((resolve, reject) => { server.once('listening', resolve); server.once('error', reject) })
  const headers = {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    'x-bsv-overlay-profile': PROFILE
  }
  if (router.manifest && typeof router.manifest.digest === 'function') headers['x-bsv-overlay-capability'] = router.manifest.digest()
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    port: server.address().port,
    headers,
    async close () {
      server.closeAllConnections()
      await new Promise(resolve => server.close(resolve))
    }
  }
}

module.exports = { ORIGIN, startServer }
