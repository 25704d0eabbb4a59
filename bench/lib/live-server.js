'use strict'
// A benchmark server in its own process, so that its CPU time is its own: a live store
// (a few seeded rows of the notes service) behind the real router, in public mode or with
// BRC-103 (the router's default native wallet). Started with fork(); answers IPC messages:
//   {cmd: 'cpu'}     -> {cpuMicros}: user + system CPU of this process so far
//   {cmd: 'waiters'} -> {waiters}: long polls parked in the store
//   {cmd: 'commit', expect} -> {at, lastWrittenAt}: commits one group; `at` is the wall clock
//                       (ms since the epoch, sub-millisecond) just before live.commit is called;
//                       with `expect`, lastWrittenAt is when the expect-th read answer after it
//                       was completely handed to the OS (the response's 'finish')
//   {cmd: 'close'}
// The first message it sends is {ready: {base, port, headers}}.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { PrivateKey } = require('@bsv/sdk')
const { LiveLookup } = require('../../js')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { plainService } = require('../../__test__/helpers/live')
const { ORIGIN, startServer } = require('./http')
const rows = require('./rows')
const { accessOptions, accessCompanion } = require('./access')

const wallClock = () => performance.timeOrigin + performance.now()

async function main () {
  const cfg = JSON.parse(process.argv[2] || '{}')
  const dir = fs.mkdtempSync(path.join(cfg.dir || os.tmpdir(), 'live-server-'))
  const key = PrivateKey.fromRandom()
  const authentication = cfg.authentication || 'none'
  const big = 1 << 20
  const live = await LiveLookup.open({
    dataDir: path.join(dir, 'live'),
    create: true,
    chain: { network: 'test', genesisHash: '00'.repeat(32) },
    provider: authentication === 'brc103' ? key.toPublicKey().toString() : ORIGIN,
    sessionSeconds: 3600,
    replaySeconds: 600,
    compactionIntervalMs: 0,
    // Public mode has one (empty) principal: the per-principal caps are the store's caps there.
    maxSessionsPerPrincipal: big,
    maxWaiters: big,
    maxWaitersPerPrincipal: big,
    // bench/access.js: principals in access partitions (lib/access.js); none by default.
    ...accessOptions(cfg.access)
  })
  live.wrap(rows.SERVICE, plainService(), cfg.access ? accessCompanion(cfg.access) : createNotesCompanion())
  const templates = await rows.standaloneTemplates()
  await rows.loadLive(live, templates, 0, 10, 10)
  let next = 10
  const server = await startServer(live, { authentication, privateKey: key.toHex(), keepAliveTimeoutMs: 120000 })
  let finished = null // {count, expect, resolve} while a commit's answers are counted
  server.server.on('request', (req, res) => {
    if (req.url !== '/overlay/v1/lookup/read') return
    res.once('finish', () => {
      if (finished && ++finished.count === finished.expect) finished.resolve(wallClock())
    })
  })
  process.on('message', async (m) => {
    if (m.cmd === 'cpu') {
      const u = process.cpuUsage()
      process.send({ cpuMicros: u.user + u.system })
    } else if (m.cmd === 'waiters') {
      process.send({ waiters: live.stats().waiters })
    } else if (m.cmd === 'commit') {
      const written = m.expect ? new Promise((resolve) => { finished = { count: 0, expect: m.expect, resolve } }) : null
      const at = wallClock()
      await live.commit([rows.admitChange(rows.row(templates, next++))])
      const lastWrittenAt = written ? await written : null
      finished = null
      process.send({ at, lastWrittenAt })
    } else if (m.cmd === 'close') {
      await server.close()
      await live.close()
      fs.rmSync(dir, { recursive: true, force: true })
      process.exit(0)
    }
  })
  process.send({ ready: { base: server.base, port: server.port, headers: server.headers } })
}

main().catch((e) => { process.stderr.write(String(e && e.stack) + '\n'); process.exit(1) })
