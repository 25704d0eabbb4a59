#!/usr/bin/env node
'use strict'
// One configuration of the receipt section (bench/sections/receipt.js) from the command line,
// with the JS thread's time split printed:
//
//   node bench/receipt.js [--snapshot 10000] [--verify 1] [--concurrency 4] [--engine native|sdk]

const { measureReceipt } = require('./sections/receipt')

function arg (name, dflt) {
  const i = process.argv.indexOf('--' + name)
  return i < 0 ? dflt : process.argv[i + 1]
}

async function main () {
  const verify = arg('verify', '1') !== '0'
  const m = await measureReceipt({ snapshot: Number(arg('snapshot', 10000)), engine: verify ? arg('engine', 'native') : null, concurrency: Number(arg('concurrency', 4)) })
  const f = x => x.toFixed(0)
  const a = m.atReceipt
  console.log(`built ${m.snapshot} outputs in ${m.buildS.toFixed(1)} s, provider loaded in ${m.loadS.toFixed(1)} s`)
  console.log(`snapshot of ${m.snapshot} outputs in ${m.batches} batches: received in ${(m.receiptMs / 1000).toFixed(2)} s (${f(m.obsPerSec)} obs/s)` +
    (verify ? `, all current ${(m.doneMs / 1000).toFixed(2)} s after the start (${m.doneOverReceipt.toFixed(2)}x receipt)` : ' (no verifier)'))
  console.log(`event-loop delay over the receipt: p99 ${m.loopDelayP99Ms.toFixed(1)} ms, max ${m.loopDelayMaxMs.toFixed(1)} ms`)
  console.log(`until receipt: commitBatchAsync ${f(m.commitMs)} ms until durable in ${m.commitCalls} calls (${(m.commitMs / m.commitCalls).toFixed(1)} ms per batch); verifier store calls on the JS thread ${f(m.verifierStoreMs)} ms ` +
    `(pendingVerifications ${f(a.pendingVerifications.ms)} ms / ${a.pendingVerifications.calls}, ` +
    `verificationEvidence ${f(a.verificationEvidence.ms)} ms); acceptVerificationsAsync ${f(a.acceptVerificationsAsync.ms)} ms until durable / ${a.acceptVerificationsAsync.calls}; state ${f(m.stateMs)} ms; revisionSnapshot ${f(m.revisionSnapshotMs)} ms; rest, outside commits (HTTP, JSON, client loop, provider) ${f(m.restMs)} ms`)
  if (verify) console.log(`after receipt: pendingVerifications ${f(m.afterReceipt.pendingVerifications.ms)} ms, acceptVerificationsAsync ${f(m.afterReceipt.acceptVerificationsAsync.ms)} ms until durable`)
}

main().catch(e => { console.error(e); process.exit(1) })
