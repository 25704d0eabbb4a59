'use strict'
// The server's heap after garbage collection stays flat over 5,000
// authenticated requests with the native wallet (with ProtoWallet it grew
// about 3.6 KB per request). The server runs in its own process with
// --expose-gc; the clients (AuthFetch with NativeWallet) run here.
const path = require('node:path')
const { fork } = require('node:child_process')
const { PrivateKey } = require('@bsv/sdk')
const { NativeWallet } = require('../js')
const { lookupClient, readReq, openCaughtUp } = require('./helpers/node')

jest.setTimeout(240000)

test('heap after GC does not grow over 5,000 authenticated requests', async () => {
  const child = fork(path.join(__dirname, 'helpers', 'auth-node-child.js'), [], { execArgv: ['--expose-gc'], stdio: 'inherit' })
  try {
    const { origin, capability } = await new Promise((resolve, reject) => {
      child.once('message', resolve)
      child.once('exit', (code) => reject(new Error('server exited ' + code)))
    })
    const heap = async () => {
      // The smallest of three readings after GC.
      let least = Infinity
      for (let i = 0; i < 3; i++) least = Math.min(least, (await (await fetch(`${origin}/__heap`)).json()).heapUsed)
      return least
    }
    const clients = Array.from({ length: 8 }, () => lookupClient(origin, capability, NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex())))
    const batches = await Promise.all(clients.map((c) => openCaughtUp(c)))
    let requests = 0
    const run = (total) => Promise.all(clients.map(async (c, i) => {
      for (let n = 0; n < total / clients.length; n++) {
        const r = await c.post('read', readReq(batches[i]))
        if (r.status !== 200) throw new Error('read answered ' + r.status)
        batches[i] = r.body
        requests++
      }
    }))
    await run(1000) // warm-up: code, caches and sessions settle
    const before = await heap()
    await run(4000)
    const after = await heap()
    expect(requests).toBe(5000)
    const growth = after - before
    console.log(`server heap after GC: ${(before / 1048576).toFixed(1)} MiB after 1,000 requests, ${(after / 1048576).toFixed(1)} MiB after 5,000 (${(growth / 4000).toFixed(0)} B per request)`)
    // 4,000 requests at the old 3.6 KB each would be about 14 MB.
    expect(growth).toBeLessThan(3 * 1048576)
  } finally {
    child.send('close')
    await new Promise((resolve) => child.once('exit', resolve))
  }
})
