'use strict'
// The provider of the client-scale section (bench/sections/clientscale.js) in its own process,
// so the client rows' time, CPU and peak RSS are theirs alone: the cached P2PKH catalogue
// (lib/p2pkh-catalogue.js) served by serveNotes (public mode, loopback HTTP, one wrapped notes
// service). Started by lib/child-process.js with {catalogue, dir}; sends
// {ready: {origin, outputs, loadS}} once every output is committed, and closes on {cmd: 'close'}.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { serveNotes } = require('./notes-node')
const { readTransactions } = require('./p2pkh-catalogue')

async function main () {
  const cfg = JSON.parse(process.argv[2])
  const dir = fs.mkdtempSync(path.join(cfg.dir || os.tmpdir(), 'clientscale-provider-'))
  const t0 = performance.now()
  const txs = readTransactions(cfg.catalogue)
  const node = await serveNotes(dir, txs)
  const loadS = (performance.now() - t0) / 1000
  process.on('message', async (m) => {
    if (m.cmd !== 'close') return
    await node.close()
    fs.rmSync(dir, { recursive: true, force: true })
    process.exit(0)
  })
  process.send({ ready: { origin: node.origin, outputs: txs.length, loadS } })
}

main().catch((e) => { process.stderr.write(String(e && e.stack) + '\n'); process.exit(1) })
