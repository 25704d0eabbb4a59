'use strict'
// Publishes one message to the example host: `node publish.js <url> <text>`. It asks the host's
// development faucet for a proven funding output, builds and signs a transaction with one
// message output, submits it to `POST <url>/submit` and prints `published <txid>.0`.
const { PrivateKey } = require('@bsv/sdk')
const { buildMessageTx } = require('./messages')

async function post (url, headers, body) {
  const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(30000) })
  const text = await res.text()
  if (!res.ok) throw new Error(`POST ${url}: ${res.status} ${text}`)
  return JSON.parse(text)
}

async function publish (url, text) {
  const key = PrivateKey.fromRandom()
  const funding = await post(`${url}/dev/fund`, { 'content-type': 'application/json' }, JSON.stringify({ address: key.toAddress() }))
  const { txid, beef } = await buildMessageTx(key, funding, text)
  const steak = await post(`${url}/submit`, { 'content-type': 'application/octet-stream', 'x-topics': JSON.stringify([funding.topic]) }, beef)
  return { txid, steak }
}

if (require.main === module) {
  const [url, ...words] = process.argv.slice(2)
  if (!url || words.length === 0) {
    console.error('usage: node publish.js <host url> <text>')
    process.exit(2)
  }
  publish(url.replace(/\/+$/, ''), words.join(' ')).then(({ txid, steak }) => {
    console.log(`published ${txid}.0 ${JSON.stringify(steak)}`)
  }, (e) => { console.error(String(e && e.message)); process.exit(1) })
}

module.exports = { publish }
