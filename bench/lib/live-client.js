'use strict'
// A benchmark client in its own process. Public mode: node:http keep-alive requests. BRC-103:
// the package's NativeWallet behind `transport` 'native' (NativeAuthFetch, the default) or
// 'authfetch' (@bsv/sdk's AuthFetch), one identity per `sessionsPerIdentity` sessions (16). Started with fork();
// config {base, port, headers, authentication, sessions, transport}. It opens its sessions
// (snapshot read to the end, then caught up), sends {ready}, then answers:
//   {cmd: 'reads', ms}  -> {reads, cpuMicros}: back-to-back caught-up reads (waitMs 0) on every
//                          session for ms, and this process's CPU time (user + system) meanwhile
//   {cmd: 'park'}       -> sends one long poll (waitMs 25 s) per session, replies {parked} at once,
//                          then {answered: [wall-clock ms when each answer was received and parsed]}
//   {cmd: 'first', n}   -> {firstMs: [...]}: n new identities in turn, each one read of a new
//                          session with its first (handshake) request timed
//   {cmd: 'close'}
const { AuthFetch, PrivateKey } = require('@bsv/sdk')
const { NativeWallet, NativeAuthFetch } = require('../../js')
const { agent, postRaw } = require('./http')
const client = require('./client')

const NOWAIT = { maxBytes: 65536, maxObservations: 100, waitMs: 0 }
const WAIT = { ...NOWAIT, waitMs: 25000 }
const wallClock = () => performance.timeOrigin + performance.now()

const closers = []

function authClient (transport) {
  const wallet = NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex())
  if (transport === 'authfetch') return new AuthFetch(wallet)
  if (transport !== 'native') throw new Error(`unknown transport ${transport}`)
  const af = new NativeAuthFetch(wallet)
  closers.push(() => af.close())
  return af
}

function poster (server, authentication, ag, transport = 'native') {
  if (authentication === 'none') {
    return async (op, body) => {
      const res = await postRaw(ag, server, op, body)
      if (res.status !== 200) throw new Error(`${op} answered ${res.status}: ${String(res.body).slice(0, 200)}`)
      return res.body
    }
  }
  const af = authClient(transport)
  return async (op, body) => {
    const res = await af.fetch(`${server.base}/overlay/v1/lookup/${op}`, { method: 'POST', headers: server.headers, body: body.toString('utf8') })
    const text = await res.text()
    if (res.status !== 200) throw new Error(`BRC-103 ${op} answered ${res.status}: ${text.slice(0, 200)}`)
    return JSON.parse(text)
  }
}

async function openCaughtUp (post) {
  let b = await post('open', client.openBody({}, NOWAIT))
  while (!b.snapshotComplete) b = await post('read', client.readBody(b.session, b.cursor, NOWAIT))
  b = await post('read', client.readBody(b.session, b.cursor, NOWAIT))
  return { post, session: b.session, cursor: b.cursor }
}

async function main () {
  const cfg = JSON.parse(process.argv[2])
  const server = { base: cfg.base, port: cfg.port, headers: cfg.headers }
  const ag = agent(cfg.sessions + 8)
  const sessions = []
  let post = null
  for (let i = 0; i < cfg.sessions; i++) {
    if (i % (cfg.sessionsPerIdentity || 16) === 0) post = poster(server, cfg.authentication, ag, cfg.transport)
    sessions.push(await openCaughtUp(post))
  }
  process.on('message', async (m) => {
    if (m.cmd === 'reads') {
      process.send(await client.caughtUpReads(sessions, m.ms, (s) => s.post('read', client.readBody(s.session, s.cursor, NOWAIT))))
    } else if (m.cmd === 'park') {
      const polls = sessions.map(async (s) => {
        const b = await s.post('read', client.readBody(s.session, s.cursor, WAIT))
        const at = wallClock()
        if (b.groups.length !== 1) throw new Error('a woken poll did not hold exactly one group')
        s.cursor = b.cursor
        return at
      })
      process.send({ parked: true })
      process.send({ answered: await Promise.all(polls) })
    } else if (m.cmd === 'first') {
      const firstMs = []
      for (let i = 0; i < m.n; i++) {
        const p = poster(server, cfg.authentication, ag, cfg.transport)
        const t0 = performance.now()
        await p('open', client.openBody({}, NOWAIT))
        firstMs.push(performance.now() - t0)
      }
      process.send({ firstMs })
    } else if (m.cmd === 'close') {
      ag.destroy()
      for (const close of closers) close()
      process.exit(0)
    }
  })
  process.send({ ready: true })
}

main().catch((e) => { process.stderr.write(String(e && e.stack) + '\n'); process.exit(1) })
