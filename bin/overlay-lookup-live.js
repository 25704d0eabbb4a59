#!/usr/bin/env node
'use strict'
// The package's command line. `overlay-lookup-live check <baseURL> --service <name> ...` runs
// the conformance checker (js/check/index.js) against a BRC-193 provider and prints one line
// per check, then `N passed, M failed, K skipped`. Exit code 0 when every check passed, 1 when one
// failed, 2 when the checker could not run (bad arguments).

const { parseArgs } = require('node:util')
const { needing } = require('../js/check/rules')

/** What the checks can need, as --help names it. */
const NEEDS = [
  ['mutate', '--mutate'],
  ['empty-query', '--empty-query'],
  ['brc103', '--auth brc103'],
  ['second-principal', 'a second principal (made by the checker under --auth brc103)'],
  ['origin', '--origin'],
  ['long', '--long (runs long: waits for a session to expire)']
]

/** `text` wrapped at 96 columns, each line after `indent`. */
function wrap (text, indent) {
  const lines = []
  let line = ''
  for (const word of text.split(' ')) {
    if (line && (indent + line + ' ' + word).length > 96) { lines.push(indent + line); line = word } else line = line ? line + ' ' + word : word
  }
  if (line) lines.push(indent + line)
  return lines.join('\n')
}

const USAGE = `usage: overlay-lookup-live check <baseURL> --service <name> [options]

Checks a BRC-193 (lookup-live-v1) provider from outside, over HTTP. Prints one line per check
(ok <check> / FAIL <check>: <seen>; <rule> (<section>) / skip <check>: <why>), then
N passed, M failed, K skipped. Exit 0 when none failed, 1 when one failed, 2 for bad arguments.

  --service <name>        the lookup service to check (required)
  --query <json>          the query to open (default {})
  --empty-query <json>    a query of the service that selects nothing (checks an empty snapshot)
  --auth none|brc103      how to call it: public, or BRC-103 with a fresh random identity (default none)
  --allow-insecure-http   allow a plain http base URL (local development only)
  --mutate '<command>'    a command that commits a change the query selects, run with /bin/sh -c
                          (twice); a failure is reported with the error line of its stderr
  --origin <origin>       a browser origin the provider allows, to check its CORS preflight
  --wait-ms <n>           the long-poll bound to test (default 2000; 25000 tests proxy timeouts)
  --timeout-ms <n>        time allowed per request beyond its wait (default 30000)
  --long                  run the checks that wait for a session to expire
  --long-budget-ms <n>    the longest they wait (default 120000); a later expiry skips them
  --json                  print the report as JSON instead of lines
  --only <names>          report only these checks: comma-separated names or name prefixes
                          (e.g. long-poll,limits.clamp); every check still runs

Checks that need more than a plain run (skipped without it):
${NEEDS.map(([what, flag]) => `  ${flag}:\n${wrap(needing(what).join(', '), '    ')}`).join('\n')}
`

/** --help: the usage on stdout, exit 0. */
function help () {
  process.stdout.write(USAGE)
}

function usage (message) {
  if (message) process.stderr.write(`overlay-lookup-live: ${message}\n`)
  process.stderr.write(USAGE)
  process.exitCode = 2
}

function integer (value, name) {
  if (value === undefined) return undefined
  if (!/^[0-9]+$/.test(value)) throw new TypeError(`--${name} must be a whole number`)
  return Number(value)
}

async function check (argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      service: { type: 'string' },
      query: { type: 'string' },
      'empty-query': { type: 'string' },
      auth: { type: 'string' },
      'allow-insecure-http': { type: 'boolean' },
      mutate: { type: 'string' },
      origin: { type: 'string' },
      'wait-ms': { type: 'string' },
      'timeout-ms': { type: 'string' },
      long: { type: 'boolean' },
      'long-budget-ms': { type: 'string' },
      json: { type: 'boolean' },
      only: { type: 'string' },
      help: { type: 'boolean' }
    }
  })
  if (values.help) return help()
  if (positionals.length !== 1) return usage('give exactly one base URL')
  let query = {}
  if (values.query !== undefined) {
    try {
      query = JSON.parse(values.query)
    } catch (e) {
      return usage(`--query is not JSON: ${e.message}`)
    }
  }
  let emptyQuery
  if (values['empty-query'] !== undefined) {
    try {
      emptyQuery = JSON.parse(values['empty-query'])
    } catch (e) {
      return usage(`--empty-query is not JSON: ${e.message}`)
    }
  }
  const { runChecks, summaryLine } = require('../js/check')
  const json = !!values.json
  let report
  try {
    report = await runChecks({
      baseURL: positionals[0],
      service: values.service,
      query,
      emptyQuery,
      auth: values.auth || 'none',
      allowInsecureHttp: !!values['allow-insecure-http'],
      mutate: values.mutate,
      origin: values.origin,
      waitMs: integer(values['wait-ms'], 'wait-ms'),
      timeoutMs: integer(values['timeout-ms'], 'timeout-ms'),
      long: !!values.long,
      longBudgetMs: integer(values['long-budget-ms'], 'long-budget-ms'),
      only: values.only === undefined ? undefined : values.only.split(',').map(x => x.trim()).filter(Boolean),
      onResult: json ? null : (r) => process.stdout.write(r.line + '\n')
    })
  } catch (e) {
    if (e instanceof TypeError) return usage(e.message)
    throw e
  }
  if (json) process.stdout.write(JSON.stringify(report, null, 2) + '\n')
  else process.stdout.write(summaryLine(report) + '\n')
  process.exitCode = report.ok ? 0 : 1
}

async function main (argv) {
  const [command, ...rest] = argv
  if (command === 'check') {
    try {
      return await check(rest)
    } catch (e) {
      if (e && e.code && String(e.code).startsWith('ERR_PARSE_ARGS')) return usage(e.message)
      throw e
    }
  }
  if (command === '--help' || command === 'help') return help()
  if (command === undefined) return usage()
  usage(`unknown command ${command}`)
}

main(process.argv.slice(2)).catch((e) => {
  process.stderr.write(`overlay-lookup-live: ${e && e.stack ? e.stack : e}\n`)
  process.exitCode = 2
})
