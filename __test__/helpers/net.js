'use strict'
// Loopback plumbing shared by the HTTP tests: servers on 127.0.0.1, a TCP proxy
// that records and can edit bytes in flight, fresh wallets, and a way to see the
// BRC-103 Peer's verdict on a response (AuthFetch itself swallows a failed
// verification and never settles: docs/operators.md).
const net = require('net')
const { PrivateKey, ProtoWallet } = require('@bsv/sdk')


function listen (server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)))
}

// Forwards bytes both ways. `edit.response` / `edit.request` may rewrite a
// chunk (same length keeps HTTP framing valid); `cutAfterRequest(text)`
// returning true closes both sockets right after forwarding that request.
async function startProxy (targetPort, edit = {}) {
  const seen = { requests: [], responses: [], edits: 0 }
  const sockets = new Set()
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1')
    sockets.add(client); sockets.add(upstream)
    client.on('data', (chunk) => {
      let text = chunk.toString('latin1')
      seen.requests.push(text)
      if (edit.request) {
        const edited = edit.request(text)
        if (edited !== text) { seen.edits++; text = edited }
      }
      upstream.write(Buffer.from(text, 'latin1'))
      if (edit.cutAfterRequest && edit.cutAfterRequest(text)) {
        // Let the request reach the server, then drop the client connection.
        upstream.once('drain', () => {})
        setImmediate(() => client.destroy())
      }
    })
    upstream.on('data', (chunk) => {
      let text = chunk.toString('latin1')
      seen.responses.push(text)
      if (edit.response) {
        const edited = edit.response(text)
        if (edited !== text) { seen.edits++; text = edited }
      }
      client.write(Buffer.from(text, 'latin1'))
    })
    const closeBoth = () => { client.destroy(); upstream.destroy() }
    client.on('close', closeBoth); upstream.on('close', closeBoth)
    client.on('error', closeBoth); upstream.on('error', closeBoth)
  })
  const port = await listen(server)
  return {
    port,
    seen,
    close: () => { for (const s of sockets) s.destroy(); return new Promise((resolve) => server.close(resolve)) }
  }
}

/** Express `app` on 127.0.0.1:`port` (0: any free port; a fixed one restarts a node at its origin). */
async function startServer (app, port = 0) {
  const server = app.listen(port, '127.0.0.1')
  await new Promise((resolve, reject) => { server.once('listening', resolve); server.once('error', reject) })
  return { server, port: server.address().port, close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve) }) }
}

function newWallet () {
  const key = PrivateKey.fromRandom()
  return { wallet: new ProtoWallet(key), identity: key.toPublicKey().toString() }
}

// Replaces AuthFetch's transport callback with one that reports the real
// Peer's verdict on each incoming message (SimplifiedFetchTransport swallows
// verification errors, see the notes), so "rejected" is observable without
// waiting for a timeout.
function observeVerdicts (authFetch, origin) {
  const peer = authFetch.peers[origin].peer
  const verdicts = []
  let wake = null
  peer.transport.onData(async (message) => {
    try {
      await peer.handleIncomingMessage(message)
      verdicts.push({ accepted: true })
    } catch (e) {
      verdicts.push({ accepted: false, error: e.message })
    }
    if (wake) wake()
  })
  return {
    verdicts,
    next: (count) => new Promise((resolve) => {
      const check = () => { if (verdicts.length >= count) resolve(verdicts[count - 1]); else wake = check }
      check()
    })
  }
}

function track (promise) {
  const state = { settled: false }
  promise.then(() => { state.settled = true }, () => { state.settled = true })
  return state
}

const flush = () => new Promise((resolve) => setImmediate(resolve))


module.exports = { listen, startProxy, startServer, newWallet, observeVerdicts, track, flush }
