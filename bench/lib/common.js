'use strict'
// Small helpers shared by the benchmark sections: timing, summaries, memory readings.

const fs = require('node:fs')
const path = require('node:path')

/** Milliseconds from a monotonic clock. */
function now () {
  return performance.now()
}

/** Sorted copy. */
function sorted (values) {
  return [...values].sort((a, b) => a - b)
}

/** Nearest-rank percentile (p in 0..100) of a list of numbers. */
function percentile (values, p) {
  if (values.length === 0) return NaN
  const s = sorted(values)
  const rank = Math.ceil((p / 100) * s.length)
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))]
}

/**
 * min/median/max of repeated runs, keeping the raw values for results.json.
 * The median of an even count is the lower middle value (a value that was measured).
 */
function summary (values, unit) {
  if (values.length === 0) return { n: 0, unit, min: null, median: null, max: null, runs: [] }
  const s = sorted(values)
  return { n: s.length, unit, min: s[0], median: s[Math.floor((s.length - 1) / 2)], max: s[s.length - 1], runs: values }
}

/** Resident set size in bytes, from /proc (process.memoryUsage().rss reads the same number). */
function rssBytes () {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))
    if (m) return Number(m[1]) * 1024
  } catch {}
  return process.memoryUsage().rss
}

/** Peak resident set size in bytes (VmHWM) of this process. */
function peakRssBytes () {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))
    if (m) return Number(m[1]) * 1024
  } catch {}
  return null
}

/** Bytes this process has caused to be written to storage (`write_bytes` of /proc/self/io):
 * a count of the store's page writes that the machine's load does not change. */
function writtenBytes () {
  try {
    const m = /^write_bytes:\s+(\d+)$/m.exec(fs.readFileSync('/proc/self/io', 'utf8'))
    if (m) return Number(m[1])
  } catch {}
  return null
}

/** Runs a full GC when the process was started with --expose-gc (twice: weak callbacks). */
function gc () {
  if (typeof global.gc === 'function') {
    global.gc()
    global.gc()
  }
}

/** A memory reading after a GC. */
function memory () {
  gc()
  const m = process.memoryUsage()
  return { rss: rssBytes(), heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers }
}

/**
 * Total bytes of the regular files under dir (which must exist). The store may be
 * open: sled deletes files of its own in the background (large values in `blobs/`),
 * so a file or directory listed and gone before it is read counts as nothing.
 */
function dirBytes (dir, listed = false) {
  let total = 0
  const list = () => fs.readdirSync(dir, { withFileTypes: true })
  for (const e of listed ? ifPresent(list, []) : list()) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) total += dirBytes(p, true)
    else if (e.isFile()) total += ifPresent(() => fs.statSync(p).size, 0)
  }
  return total
}

/** `read()`, or `absent` if the file it reads no longer exists. */
function ifPresent (read, absent) {
  try {
    return read()
  } catch (e) {
    if (e.code === 'ENOENT') return absent
    throw e
  }
}

function sleep (ms) {
  return new Promise(resolve => setTimeout(resolve, ms))
}

/** Waits until predicate() is true, polling every few ms; throws after timeoutMs. */
async function until (predicate, timeoutMs, what) {
  const end = Date.now() + timeoutMs
  while (!predicate()) {
    if (Date.now() > end) throw new Error('timed out waiting for ' + what)
    await sleep(5)
  }
}

/** Logs progress to stderr so stdout stays clean for tools. */
function progress (...args) {
  process.stderr.write('[bench] ' + args.join(' ') + '\n')
}

/** The delivery latency figures of a long-poll section, from per-run percentiles. */
/**
 * When, on `now()`'s clock, the store's latest commit became durable and visible to readers
 * (`live.stats().publishedAgoMs` read right after `now()`); NaN if it has not published yet.
 */
function publishedAt (live) {
  const t = now()
  const ago = live.stats().publishedAgoMs
  return ago == null ? NaN : t - ago
}

function deliverySummary ({ p50, p99, max, p50Ack, p99Ack, p50Pub, p99Pub, commitMs }) {
  return {
    deliveryFromPublicationP50Ms: summary(p50Pub, 'ms'),
    deliveryFromPublicationP99Ms: summary(p99Pub, 'ms'),
    deliveryFromCommitCallP50Ms: summary(p50, 'ms'),
    deliveryFromCommitCallP99Ms: summary(p99, 'ms'),
    deliveryFromCommitCallMaxMs: summary(max, 'ms'),
    deliveryFromCommitAckP50Ms: summary(p50Ack, 'ms'),
    deliveryFromCommitAckP99Ms: summary(p99Ack, 'ms'),
    commitAckMs: summary(commitMs, 'ms')
  }
}

module.exports = { deliverySummary, publishedAt, now, percentile, summary, rssBytes, peakRssBytes, writtenBytes, gc, memory, dirBytes, sleep, until, progress }
