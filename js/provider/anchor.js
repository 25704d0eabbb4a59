'use strict'
// The restore anchor (docs/operators.md "Resets, restores and shutdown"): a small file kept
// OUTSIDE the data directory that records the store's epoch and the highest sequence it has
// published. A data directory restored from an older copy cannot tell from inside itself
// that it went back in time; compared with the anchor, it can: same epoch with a lower
// highWater, or another epoch, means that sequences could be served again with other
// contents, which BRC-193 §8 forbids within an epoch.

const fs = require('fs')
const path = require('path')

const ANCHOR_VERSION = 1

/** True when `dir` does not exist or holds nothing (a store opened there is created now). */
function isEmptyDir (dir) {
  try {
    return fs.readdirSync(dir).length === 0
  } catch (e) {
    if (e.code === 'ENOENT') return true
    throw e
  }
}

/** `<dataDir>.anchor`, beside the data directory (it does not survive a restore of the parent). */
function defaultAnchorPath (dataDir) {
  const dir = path.resolve(dataDir)
  return path.join(path.dirname(dir), path.basename(dir) + '.anchor')
}

/**
 * What the anchor file says: `{ state: 'missing' }`, `{ state: 'unreadable', detail }` or
 * `{ state: 'ok', epoch, highWater }` (highWater as a BigInt).
 */
function readAnchor (file) {
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch (e) {
    if (e.code === 'ENOENT') return { state: 'missing' }
    return { state: 'unreadable', detail: e.message }
  }
  try {
    const a = JSON.parse(text)
    if (a.version !== ANCHOR_VERSION || typeof a.epoch !== 'string' || !/^(0|[1-9][0-9]*)$/.test(a.highWater)) {
      return { state: 'unreadable', detail: 'not an anchor record of this version' }
    }
    return { state: 'ok', epoch: a.epoch, highWater: BigInt(a.highWater) }
  } catch (e) {
    return { state: 'unreadable', detail: 'not JSON' }
  }
}

/**
 * Why the store at (epoch, highWater) cannot be the one the anchor last saw, or null when
 * it can. A missing anchor is a first start (or a lost anchor): nothing to compare.
 */
function restoredReason (anchor, epoch, highWater) {
  if (anchor.state === 'missing') return null
  if (anchor.state === 'unreadable') return `the restore anchor is unreadable (${anchor.detail})`
  if (anchor.epoch !== epoch) return `the store's epoch ${epoch} is not the epoch ${anchor.epoch} the restore anchor last recorded`
  if (BigInt(highWater) < anchor.highWater) {
    return `the store's highWater ${highWater} is below the ${anchor.highWater} it had already published (restored from an older copy)`
  }
  return null
}

/**
 * Writes the anchor durably: a temporary file, fsync, rename over the old one, fsync of the
 * directory. A crash leaves the old anchor or the new one, never a torn one.
 */
async function writeAnchor (file, epoch, highWater) {
  const body = JSON.stringify({ version: ANCHOR_VERSION, epoch, highWater: String(highWater), writtenAt: new Date().toISOString() }) + '\n'
  const tmp = file + '.tmp'
  const fh = await fs.promises.open(tmp, 'w')
  try {
    await fh.writeFile(body)
    await fh.sync()
  } finally {
    await fh.close()
  }
  await fs.promises.rename(tmp, file)
  const dir = await fs.promises.open(path.dirname(file), 'r')
  try {
    await dir.sync()
  } finally {
    await dir.close()
  }
}

/**
 * Keeps the anchor of one store up to date: `update()` writes when the epoch or highWater
 * changed since the last write (never two writes at once; a request made during a write is
 * served by one more write after it). `current()` returns `{ epoch, highWater }`, or null
 * while nothing may be recorded (a restored store waiting for its new epoch: recording its
 * rolled-back state would erase the evidence). Every `every` ms a timer calls `update`
 * (unref'd: it never keeps Node alive); its failures go to `onError`.
 */
class AnchorKeeper {
  constructor (file, current, every, onError = () => {}) {
    this.file = file
    this.current = current
    this.written = null
    this.writing = null
    this.again = false
    if (every > 0) {
      this.timer = setInterval(() => { this.update().catch(onError) }, every)
      this.timer.unref()
    }
  }

  async update () {
    if (this.writing) {
      this.again = true
      return this.writing
    }
    const run = async () => {
      do {
        this.again = false
        const now = this.current()
        if (now === null) continue
        const key = now.epoch + '/' + now.highWater
        if (key === this.written) continue
        await writeAnchor(this.file, now.epoch, now.highWater)
        this.written = key
      } while (this.again)
    }
    // Cleared in a later microtask, never inside `run`: a pass with nothing to write finishes
    // synchronously, before `this.writing` is assigned, and clearing it there would leave the
    // settled promise in place, so every later update() would return it and write nothing.
    const writing = run().finally(() => {
      if (this.writing === writing) this.writing = null
    })
    this.writing = writing
    return writing
  }

  async stop () {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    if (this.writing) await this.writing.catch(() => {})
  }
}

module.exports = { isEmptyDir, defaultAnchorPath, readAnchor, restoredReason, writeAnchor, AnchorKeeper }
