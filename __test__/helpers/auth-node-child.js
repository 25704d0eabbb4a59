'use strict'
// An authenticated node (helpers/node.js) in its own process, for tests
// that measure the server alone. GET /__heap collects garbage (the process
// runs with --expose-gc) and answers the heap in use. 'close' stops it.
const { startNode } = require('./node')

;(async () => {
  const node = await startNode({
    maxWaitMs: 25000,
    before: (app) => app.get('/__heap', (req, res) => {
      global.gc()
      global.gc()
      res.json({ heapUsed: process.memoryUsage().heapUsed })
    })
  })
  process.on('message', async (m) => {
    if (m === 'close') {
      await node.close()
      process.exit(0)
    }
  })
  process.send({ origin: node.origin, capability: node.capability })
})().catch((e) => { console.error(e); process.exit(1) })
