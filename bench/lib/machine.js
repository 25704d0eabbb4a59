'use strict'
// What the benchmark ran on (results.json's `machine`), and a disk settle before a measurement:
// shared by bench/run.js and bench/client-scale.js.

const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

function tryExec (cmd, args) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return null
  }
}

function machine () {
  const cpus = os.cpus()
  const root = path.join(__dirname, '..', '..')
  const status = tryExec('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no'])
  return {
    cpuModel: cpus.length ? cpus[0].model : 'unknown',
    cpuCount: cpus.length,
    cpuMHz: cpus.length ? cpus[0].speed : null,
    availableParallelism: os.availableParallelism ? os.availableParallelism() : cpus.length,
    memoryBytes: os.totalmem(),
    freeMemoryBytesAtStart: os.freemem(),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    rustc: tryExec('rustc', ['-V']),
    gitCommit: tryExec('git', ['-C', root, 'rev-parse', 'HEAD']),
    gitDirty: status === null ? null : status.length > 0,
    loadAverageAtStart: os.loadavg()
  }
}

/**
 * Writes back every dirty page before a measurement starts: the catalogue section leaves
 * gigabytes to write back, and a later section's fsyncs would queue behind them.
 */
function settleDisk () {
  try {
    execFileSync('sync', [], { stdio: 'ignore' })
  } catch (e) {
    // Not available on this system: measurements then share the disk's write-back.
  }
}

module.exports = { machine, settleDisk }
