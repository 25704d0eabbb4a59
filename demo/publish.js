'use strict'
// Command-line publisher for the demo host: `npm run demo:publish -- "text"` builds a real note
// transaction (funded by the host's development faucet) and submits it through /submit;
// `npm run demo:publish -- --to <identity key> "text"` addresses the note to one recipient (only
// author and recipient see it live); `npm run demo:publish -- --withdraw <txid>.<outputIndex>`
// spends one of this publisher's notes.
// Same PORT / HOST / DEMO_DATA_DIR as the server; the publisher's key is kept in the data
// directory (publisher-key.hex), so repeated runs are one principal that can withdraw its notes.
const fs = require('node:fs')
const path = require('node:path')
const bsv = require('@bsv/sdk')
const createNotesTx = require('./public/notes-tx')

const REQUEST_MS = 15000

async function request (url, init = {}) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_MS) })
  const text = await res.text()
  let body
  try { body = JSON.parse(text) } catch (_) { body = text }
  if (!res.ok) throw new Error(`${init.method || 'GET'} ${url}: ${res.status} ${typeof body === 'string' ? body : body.message || JSON.stringify(body)}`)
  return body
}

function loadKey (dataDir) {
  const file = path.join(dataDir, 'publisher-key.hex')
  if (fs.existsSync(file)) return bsv.PrivateKey.fromHex(fs.readFileSync(file, 'utf8').trim())
  const key = bsv.PrivateKey.fromRandom()
  fs.mkdirSync(dataDir, { recursive: true })
  fs.writeFileSync(file, key.toHex().padStart(64, '0') + '\n', { mode: 0o600 })
  return key
}

async function submit (url, info, built) {
  return request(`${url}/submit`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', 'x-topics': JSON.stringify([info.topic]) },
    body: Buffer.from(built.beef)
  })
}

/** Publishes one note as `key`, addressed to the identity key `options.to` if given; resolves with {txid, steak}. */
async function publishNote (url, key, text, options = {}) {
  const info = await request(`${url}/demo/info`)
  const funding = await request(`${url}/demo/fund`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ address: key.toAddress() })
  })
  const built = await createNotesTx(bsv, info).buildPublish(key, funding, text, options.to)
  return { txid: built.txid, steak: await submit(url, info, built) }
}

/** Spends the note at outpoint `txid.outputIndex` (it must be key's own); resolves with {txid, steak}. */
async function withdrawNote (url, key, outpoint) {
  const m = /^([0-9a-f]{64})\.(\d+)$/.exec(outpoint || '')
  if (!m) throw new Error('--withdraw needs <txid>.<outputIndex>')
  const [txid, outputIndex] = [m[1], Number(m[2])]
  const info = await request(`${url}/demo/info`)
  const answer = await request(`${url}/lookup`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ service: info.service, query: { txid, outputIndex } })
  })
  const found = (answer.outputs || [])[0]
  if (!found) throw new Error(`no live note at ${outpoint}`)
  const built = await createNotesTx(bsv, info).buildWithdraw(key, found.beef, txid, outputIndex)
  return { txid: built.txid, steak: await submit(url, info, built) }
}

async function main (argv) {
  const port = Number(process.env.PORT || 8080)
  const url = `http://${process.env.HOST || '127.0.0.1'}:${port}`
  const key = loadKey(path.resolve(process.env.DEMO_DATA_DIR || 'demo-data'))
  if (argv[0] === '--withdraw') {
    const out = await withdrawNote(url, key, argv[1])
    console.log(`withdrew ${argv[1]} in ${out.txid}: ${JSON.stringify(out.steak)}`)
    return
  }
  const to = argv[0] === '--to' ? argv[1] : undefined
  const text = argv.slice(to === undefined ? 0 : 2).join(' ').trim()
  if (!text) throw new Error('usage: npm run demo:publish -- [--to <identity key>] "note text"   |   npm run demo:publish -- --withdraw <txid>.<outputIndex>')
  const out = await publishNote(url, key, text, { to })
  console.log(`published ${out.txid}.0: ${JSON.stringify(out.steak)}`)
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((e) => { console.error(String(e && e.message ? e.message : e)); process.exit(1) })
}

module.exports = { publishNote, withdrawNote, loadKey }
