#!/usr/bin/env node
'use strict'
// The client's receipt beside a plain SQLite client and a raw drain (section 16, clientscale;
// bench/sections/clientscale.js says what is measured), from the command line:
//
//   node bench/client-scale.js --outputs N [--rows raw,verify,sqlite,client,verifying] [--runs R]
//                              [--out DIR] [--tmp DIR]
//
// --out DIR writes results.json and RESULTS.md there (the same files as `npm run bench --
// --only clientscale`; `node bench/run.js --render DIR/results.json` re-renders them); without
// it the table is printed. The catalogue is cached as DIR/oll-bench-cache-<N>-<version> under
// --tmp (os.tmpdir() by default) and reused by the next run of the same N.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { run } = require('./sections/clientscale')
const { ROWS } = require('./lib/clientscale-row')
const { machine } = require('./lib/machine')
const { renderReport, clientScaleSection } = require('./lib/report')

function parseArgs (argv) {
  const a = { outputs: 100000, rows: ROWS, runs: 1, out: null, tmp: os.tmpdir() }
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    if (k === '--outputs') a.outputs = Number(argv[++i])
    else if (k === '--rows') a.rows = argv[++i].split(',')
    else if (k === '--runs') a.runs = Number(argv[++i])
    else if (k === '--out') a.out = path.resolve(argv[++i])
    else if (k === '--tmp') a.tmp = path.resolve(argv[++i])
    else throw new Error(`unknown argument ${k} (see the header of bench/client-scale.js)`)
  }
  if (!Number.isSafeInteger(a.outputs) || a.outputs < 1) throw new Error('--outputs must be a positive integer')
  if (!Number.isSafeInteger(a.runs) || a.runs < 1) throw new Error('--runs must be a positive integer')
  for (const r of a.rows) if (!ROWS.includes(r)) throw new Error(`unknown row ${r} (rows: ${ROWS.join(', ')})`)
  return a
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const started = Date.now()
  const results = {
    command: 'node bench/client-scale.js ' + process.argv.slice(2).join(' '),
    quick: false,
    startedAt: new Date(started).toISOString(),
    machine: machine(),
    sections: {},
    sectionSeconds: {},
    cargo: null
  }
  const scratch = fs.mkdtempSync(path.join(args.tmp, 'overlay-live-clientscale-'))
  try {
    results.plans = { clientscale: { outputs: args.outputs, rows: args.rows, runs: args.runs } }
    results.sections.clientscale = await run({ ...results.plans.clientscale, dir: scratch, cacheRoot: args.tmp })
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true })
  }
  results.durationSeconds = (Date.now() - started) / 1000
  results.sectionSeconds.clientscale = results.durationSeconds
  results.machine.loadAverageAtEnd = os.loadavg()
  if (args.out) {
    fs.mkdirSync(args.out, { recursive: true })
    fs.writeFileSync(path.join(args.out, 'results.json'), JSON.stringify(results, null, 2) + '\n')
    fs.writeFileSync(path.join(args.out, 'RESULTS.md'), renderReport(results))
    process.stderr.write(`[bench] wrote ${path.join(args.out, 'RESULTS.md')}\n`)
  } else {
    process.stdout.write(clientScaleSection(results.sections.clientscale, results.command) + '\n')
  }
}

main().catch((err) => {
  process.stderr.write((err && err.stack ? err.stack : String(err)) + '\n')
  process.exit(1)
})
