'use strict'
// A notes node in its own process, so a client bench measures the client's memory alone
// (bench/client-memory.js): builds `N` (argv[2]) OP_TRUE spends, serves them with
// serveNotes, prints one JSON line {origin, height} and closes when stdin ends.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { serveNotes, opTrueSpends } = require('./notes-node')
const { LocalChainTracker } = require('../../demo/chain')

async function main () {
  const n = Number(process.argv[2])
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-bench-notes-'))
  const tracker = new LocalChainTracker()
  const node = await serveNotes(dir, opTrueSpends(tracker, n))
  process.stdout.write(JSON.stringify({ origin: node.origin, height: tracker.height }) + '\n')
  process.stdin.resume()
  process.stdin.on('end', async () => {
    await node.close()
    fs.rmSync(dir, { recursive: true, force: true })
    process.exit(0)
  })
}

main().catch(e => { console.error(e); process.exit(1) })
