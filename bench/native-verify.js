#!/usr/bin/env node
'use strict'
// Native evidence verification against the @bsv/sdk path, on its own (the same section runs
// in `npm run bench` as "nativeverify"): jobs/s for (a) mined subjects and (b) 1-input P2PKH
// spends of a mined parent, sdk / native one thread / native pool (bench/sections/nativeverify.js).
//
//   node bench/native-verify.js [--jobs 4000] [--sdk-jobs 400] [--runs 5] [--batch 64] [--workers 4]
//
// Prints the result as JSON and as the markdown rows bench/RESULTS.md shows.

const { run } = require('./sections/nativeverify')
const { nativeVerifySection } = require('./lib/report')

function arg (name, dflt) {
  const i = process.argv.indexOf('--' + name)
  return i < 0 ? dflt : Number(process.argv[i + 1])
}

run({ dir: null, jobs: arg('jobs', 4000), sdkJobs: arg('sdk-jobs', 400), runs: arg('runs', 5), batch: arg('batch', 64), workers: arg('workers', 4) }).then(r => {
  process.stdout.write(JSON.stringify(r, null, 2) + '\n\n' + nativeVerifySection(r) + '\n')
}, e => { console.error(e); process.exit(1) })
