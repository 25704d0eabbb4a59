'use strict'
// The shipped example as an operator runs it after installing the tarballs: copied into a fresh
// project by __test__/package/run.js and run there. For each AUTH given on the command line
// (none, brc103) it starts node_modules/overlay-lookup-live/examples/host/server.js, reads
// /health, follows live with examples/follower/follow.js while examples/host/publish.js
// publishes, runs `overlay-lookup-live check` against the host (every check must pass), scrapes
// /metrics and stops the host. Exit code 0 and a last line "example: ok" mean success.
const assert = require('assert')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn } = require('child_process')

const EXAMPLES = path.join(process.cwd(), 'node_modules', 'overlay-lookup-live', 'examples')
/** A bound on each step, so a broken host fails the run instead of hanging it. */
const STEP_MS = 120000

function start (file, args, env) {
  const child = spawn(process.execPath, [file, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  const waiters = []
  const onData = (d) => {
    out += d
    for (const w of waiters.splice(0)) if (!w(out)) waiters.push(w)
  }
  child.stdout.on('data', onData)
  child.stderr.on('data', onData)
  const exited = new Promise(resolve => child.once('exit', (code, signal) => resolve(code === null ? signal : code)))
  const bounded = (p, what) => {
    let timer
    const limit = new Promise((resolve, reject) => { timer = setTimeout(() => reject(new Error(`${what} took over ${STEP_MS} ms:\n${out}`)), STEP_MS) })
    return Promise.race([p, limit]).finally(() => clearTimeout(timer))
  }
  return {
    child,
    output: () => out,
    exited: () => bounded(exited, `${path.basename(file)} to exit`),
    /** Resolves with the first match of `pattern` in the output. */
    match (pattern) {
      return bounded(new Promise((resolve, reject) => {
        const test = (text) => { const m = pattern.exec(text); if (m) resolve(m); return !!m }
        if (!test(out)) waiters.push(test)
        exited.then((code) => reject(new Error(`${path.basename(file)} exited ${code} before printing ${pattern}:\n${out}`)))
      }), `${path.basename(file)} to print ${pattern}`)
    }
  }
}

async function runOne (auth, dataDir) {
  const host = start(path.join(EXAMPLES, 'host', 'server.js'), [], { PORT: '0', DATA_DIR: dataDir, AUTH: auth })
  try {
    const url = (await host.match(/listening on (http:\/\/\S+)/))[1]
    const health = await fetch(url + '/health')
    const report = await health.json()
    assert.strictEqual(health.status, 200, JSON.stringify(report))
    assert.deepStrictEqual(report.services, ['ls_messages'])

    const text = `hello from ${auth}`
    const follower = start(path.join(EXAMPLES, 'follower', 'follow.js'), [url], { AUTH: auth, FOLLOW_DB: path.join(dataDir, 'follower.db'), UNTIL: text })
    await follower.match(/connection: connected/)
    const publisher = start(path.join(EXAMPLES, 'host', 'publish.js'), [url, text], {})
    assert.strictEqual(await publisher.exited(), 0, publisher.output())
    const outpoint = /published ([0-9a-f]{64}\.0)/.exec(publisher.output())[1]
    assert.strictEqual(await follower.exited(), 0, follower.output())
    assert(follower.output().includes(`message ${outpoint} (live): ${text}`), follower.output())

    const bin = path.join(process.cwd(), 'node_modules', '.bin', 'overlay-lookup-live')
    const checker = spawn(bin, ['check', url, '--service', 'ls_messages', '--allow-insecure-http', '--wait-ms', '200', ...(auth === 'brc103' ? ['--auth', 'brc103'] : [])])
    let report2 = ''
    checker.stdout.on('data', (d) => { report2 += d })
    checker.stderr.on('data', (d) => { report2 += d })
    const code = await new Promise(resolve => checker.once('exit', resolve))
    assert.strictEqual(code, 0, report2)
    const summary = /\n(\d+) passed, 0 failed, (\d+) skipped\n$/.exec(report2)
    assert(summary, report2)

    const metrics = await fetch(url + '/metrics')
    assert.strictEqual(metrics.status, 200)
    assert.match(metrics.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
    const scrape = await metrics.text()
    assert.match(scrape, /^overlay_live_publication_lag_seconds_count [1-9]\d*$/m)
    assert.match(scrape, /^overlay_live_requests_total\{op="open",outcome="ok",status="200",code=""\} [1-9]\d*$/m)
    host.child.kill('SIGTERM')
    assert.strictEqual(await host.exited(), 0, host.output())
    console.log(`example: AUTH=${auth} ok (check: ${summary[1]} passed, 0 failed, ${summary[2]} skipped)`)
  } finally {
    if (host.child.exitCode === null && host.child.signalCode === null) host.child.kill('SIGKILL')
  }
}

async function main () {
  const modes = process.argv.slice(2)
  assert(modes.length > 0, 'usage: node example.js none|brc103 ...')
  for (const auth of modes) {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'example-host-'))
    try {
      await runOne(auth, dataDir)
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  }
  console.log('example: ok')
}

main().catch((err) => { console.error(err); process.exit(1) })
