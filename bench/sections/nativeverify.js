'use strict'
// Evidence verification jobs per second (issue 33): the native engine (src/bitcoin/verify.rs)
// against the @bsv/sdk engine in the same run, for two kinds of evidence:
//  (a) a mined subject: the job's transaction carries its own Merkle path (one root claim);
//  (b) a 1-input P2PKH spend of a mined parent (one signature check, one root claim).
// A job is the verifier's whole per-job work short of the store: decode and bound the BEEF,
// find the job's transaction, verify, and settle the Merkle claims with the ChainTracker
// (a LocalChainTracker, through the per-run cache js/client/verifier.js uses). Figures:
//  - sdk: checkEvidence with engine 'sdk' (Beef.fromBinary + Transaction.verify), one job at a
//    time on the JS thread, as the verifier runs it;
//  - native, one thread: verifyBeef (synchronous, on the JS thread) then settle, one job at a time;
//  - native, pool: verifyBeefBatch (the libuv pool, `batch` jobs per task) with `workers`
//    batches in flight, then settle; as EvidenceVerifier runs the native engine.
// Every job's verdict is checked (all must verify), so a fast wrong answer cannot pass.

const os = require('node:os')
const native = require('../../js/common/native')
const { checkEvidence, cachedTracker, settle, VERIFIER_DEFAULTS } = require('../../js/client/verifier')
const C = require('../../__test__/helpers/verify-corpus')
const { now, summary, progress } = require('../lib/common')

function minedJobs (tracker, n) {
  const jobs = []
  for (let i = 0; i < n; i++) {
    const tx = C.minedParent(tracker, [[0x51, 0x87 + (i % 2)]], 1000 + i)
    jobs.push({ txid: tx.id('hex'), beef: Buffer.from(tx.toBEEF()) })
  }
  return jobs
}

async function p2pkhJobs (tracker, n) {
  const jobs = []
  for (let i = 0; i < n; i++) {
    const tx = await C.p2pkhSpend(tracker)
    jobs.push({ txid: tx.id('hex'), beef: Buffer.from(tx.toBEEF()) })
  }
  return jobs
}

const limits = { ...VERIFIER_DEFAULTS }

function expectVerified (r, job) {
  if (r.status !== 'verified') throw new Error(`job ${job.txid} did not verify: ${r.status} ${r.reason}`)
}

async function sdkRate (jobs, tracker) {
  const t = cachedTracker(tracker)
  const t0 = now()
  for (const job of jobs) expectVerified(await checkEvidence(job, job.beef, t, { ...limits, engine: 'sdk' }), job)
  return jobs.length / ((now() - t0) / 1000)
}

async function nativeOneThread (jobs, tracker) {
  const t = cachedTracker(tracker)
  const o = { maxBytes: limits.maxBytes, maxTransactions: limits.maxTransactions, maxDepth: limits.maxDepth, maxScriptBytes: limits.maxScriptBytes }
  const t0 = now()
  for (const job of jobs) expectVerified(await settle(native.verifyBeef(job.beef, job.txid, o), t), job)
  return jobs.length / ((now() - t0) / 1000)
}

async function nativePool (jobs, tracker, batch, workers) {
  const t = cachedTracker(tracker)
  const o = { maxBytes: limits.maxBytes, maxTransactions: limits.maxTransactions, maxDepth: limits.maxDepth, maxScriptBytes: limits.maxScriptBytes }
  let next = 0
  const t0 = now()
  await Promise.all(Array.from({ length: workers }, async () => {
    while (next < jobs.length) {
      const part = jobs.slice(next, next + batch)
      next += part.length
      const vs = await native.verifyBeefBatch(part, o)
      const rs = await Promise.all(vs.map(v => settle(v, t)))
      rs.forEach((r, i) => expectVerified(r, part[i]))
    }
  }))
  return jobs.length / ((now() - t0) / 1000)
}

async function run (cfg) {
  const tracker = new C.LocalChainTracker()
  const kinds = {
    mined: minedJobs(tracker, cfg.jobs),
    p2pkh: await p2pkhJobs(tracker, cfg.jobs)
  }
  const out = { jobs: cfg.jobs, sdkJobs: cfg.sdkJobs, batch: cfg.batch, workers: cfg.workers, cpus: os.cpus().length, uvThreadpool: Number(process.env.UV_THREADPOOL_SIZE || 4), kinds: {} }
  for (const [name, jobs] of Object.entries(kinds)) {
    const sdk = []; const one = []; const pool = []; const oneOverSdk = []; const poolOverSdk = []
    for (let r = 0; r < cfg.runs; r++) {
      // Interleaved in every run, so the ratios pair figures measured together.
      const s = await sdkRate(jobs.slice(0, cfg.sdkJobs), tracker)
      const a = await nativeOneThread(jobs, tracker)
      const b = await nativePool(jobs, tracker, cfg.batch, cfg.workers)
      sdk.push(s); one.push(a); pool.push(b); oneOverSdk.push(a / s); poolOverSdk.push(b / s)
      progress(`nativeverify ${name} run ${r + 1}/${cfg.runs}: sdk ${s.toFixed(0)}/s, native one thread ${a.toFixed(0)}/s, pool ${b.toFixed(0)}/s`)
    }
    out.kinds[name] = {
      sdkJobsPerSec: summary(sdk, 'jobs/s'),
      nativeOneThreadJobsPerSec: summary(one, 'jobs/s'),
      nativePoolJobsPerSec: summary(pool, 'jobs/s'),
      oneThreadOverSdk: summary(oneOverSdk, 'x'),
      poolOverSdk: summary(poolOverSdk, 'x')
    }
  }
  return out
}

module.exports = { run }
