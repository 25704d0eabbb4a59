'use strict'
// Native wallet calls of a BRC-104 exchange, in process: microseconds per createSignature and
// per verifySignature (DER) with a public-key counterparty and a new key ID each call, as
// AuthServer and NativeAuthFetch make them (js/auth/brc104.js), after a warm-up; the median of
// `--rounds` rounds of `--n` calls each.
//
//   node bench/wallet.js [--rounds 5] [--n 5000]

const crypto = require('node:crypto')
const { PrivateKey } = require('@bsv/sdk')
const { NativeWallet } = require('../js')
const { coreOf } = require('../js/auth/wallet')
const { summary } = require('./lib/common')

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}

const key = (keyId, counterparty) => ({ level: 2, protocol: 'auth message signature', keyId, counterparty })
const signer = coreOf(NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex()))
const verifier = coreOf(NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex()))
const hash = crypto.randomBytes(32)
const n = arg('n', 5000)
const rounds = arg('rounds', 5)
const keyIDs = Array.from({ length: n }, () => `${crypto.randomBytes(32).toString('base64')} ${crypto.randomBytes(48).toString('base64')}`)
const signatures = keyIDs.map((k) => signer.createSignature(key(k, verifier.identityKey()), null, hash))

function perCall (fn) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) fn(i)
  return Number(process.hrtime.bigint() - t0) / n / 1000
}

const sign = (i) => signer.createSignature(key(keyIDs[i], verifier.identityKey()), null, hash)
const verify = (i) => {
  if (!verifier.verifySignatureDer(key(keyIDs[i], signer.identityKey()), signatures[i], null, hash)) throw new Error('a valid signature did not verify')
}
perCall(sign); perCall(verify) // warm-up
const out = { sign: [], verify: [] }
for (let r = 0; r < rounds; r++) {
  out.sign.push(perCall(sign))
  out.verify.push(perCall(verify))
}
for (const [name, xs] of Object.entries(out)) {
  const s = summary(xs, 'µs')
  console.log(`${name.padEnd(7)} ${s.median.toFixed(1)} µs per call (min ${s.min.toFixed(1)}, max ${s.max.toFixed(1)}), ${rounds} rounds of ${n}`)
}
