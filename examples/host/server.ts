// The example host (examples/host/server.js) in TypeScript: it compiles with `tsc --strict`
// (with skipLibCheck, as `tsc --init` sets it) against the installed packages' own types, plus
// @types/express and @types/node. Same environment: PORT, HOST, DATA_DIR, AUTH=none|brc103.
import fs = require('node:fs')
import path = require('node:path')
import crypto = require('node:crypto')
import express = require('express')
import { Engine, KnexStorage, LookupService } from '@bsv/overlay'
import { PrivateKey, P2PKH } from '@bsv/sdk'
import { LiveLookup, openSqlite, LocalChainTracker, mintFunding, HealthReport } from 'overlay-lookup-live'
import { TOPIC, SERVICE, MessagesTopicManager, MessagesLookupService, messagesCompanion } from './messages'

const CHAIN = {
  network: 'local-dev',
  genesisHash: crypto.createHash('sha256').update('overlay-lookup-live example: local development chain').digest('hex')
}
type Auth = 'none' | 'brc103'

function identityKey (dataDir: string): PrivateKey {
  const file = path.join(dataDir, 'server-key.hex')
  if (fs.existsSync(file)) return PrivateKey.fromHex(fs.readFileSync(file, 'utf8').trim())
  const key = PrivateKey.fromRandom()
  fs.writeFileSync(file, key.toHex().padStart(64, '0') + '\n', { mode: 0o600 })
  return key
}

export async function startHost (port: number, host: string, dataDir: string, auth: Auth): Promise<{ url: string, health: () => HealthReport, close: () => Promise<void> }> {
  fs.mkdirSync(dataDir, { recursive: true })
  const key = identityKey(dataDir)
  const chainTracker = LocalChainTracker.persisted(path.join(dataDir, 'chain-roots.json'))
  const app = express()
  const server = await new Promise<import('node:http').Server>((resolve) => { const s = app.listen(port, host, () => resolve(s)) })
  const address = server.address()
  const baseURL = `http://${host}:${typeof address === 'object' && address !== null ? address.port : port}`

  const liveDir = path.join(dataDir, 'live')
  const live = await LiveLookup.open({
    dataDir: liveDir,
    create: !fs.existsSync(liveDir),
    chain: CHAIN,
    provider: auth === 'brc103' ? key.toPublicKey().toString() : new URL(baseURL).origin,
    log: (entry) => console.log(JSON.stringify(entry))
  })
  const knex = await openSqlite(dataDir)
  const inner = new MessagesLookupService(knex)
  await inner.init()
  const lookupServices: Record<string, LookupService> = {}
  // wrap returns the type of the service it wraps: an @bsv/overlay LookupService stays one.
  lookupServices[SERVICE] = live.wrap(SERVICE, inner, messagesCompanion)
  const engine = new Engine({ [TOPIC]: new MessagesTopicManager() }, lookupServices, new KnexStorage(knex), chainTracker, baseURL,
    undefined, undefined, undefined, undefined, { [TOPIC]: false })
  await live.attach(engine)

  const router = live.router({ baseURL, authentication: auth, privateKey: key, allowLocalHttp: true, health: '/health', metrics: '/metrics' })
  app.use(router)
  app.post('/submit', express.raw({ type: () => true, limit: '1mb' }), async (req, res) => {
    const topics: unknown = JSON.parse(String(req.headers['x-topics'] ?? 'null'))
    if (!Array.isArray(topics)) return void res.status(400).json({ status: 'error', message: 'x-topics must be a JSON array' })
    try {
      res.json(await engine.submit({ beef: [...(req.body as Buffer)], topics: topics.map(String) }))
    } catch (e) {
      res.status(400).json({ status: 'error', message: String((e as Error).message) })
    }
  })
  app.post('/lookup', express.json(), async (req, res) => {
    const body = req.body as { service?: string, query?: unknown }
    try {
      res.json(await engine.lookup({ service: String(body.service), query: body.query ?? {} }))
    } catch (e) {
      res.status(400).json({ status: 'error', message: String((e as Error).message) })
    }
  })
  app.post('/dev/fund', express.json(), (req, res) => {
    const address = String((req.body as { address?: string }).address)
    new P2PKH().lock(address) // throws on a malformed address
    const f = mintFunding(chainTracker, address, 10000)
    res.json({ txid: f.tx.id('hex'), outputIndex: f.outputIndex, satoshis: f.satoshis, beef: Buffer.from(f.tx.toBEEF()).toString('hex'), topic: TOPIC })
  })
  return {
    url: baseURL,
    health: () => router.health(),
    async close () {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await live.close()
      await knex.destroy()
    }
  }
}

if (require.main === module) {
  const auth: Auth = process.env.AUTH === 'brc103' ? 'brc103' : 'none'
  startHost(Number(process.env.PORT ?? 8080), process.env.HOST ?? '127.0.0.1', path.resolve(process.env.DATA_DIR ?? './host-data'), auth)
    .then((h) => console.log(`listening on ${h.url}`), (e: unknown) => { console.error(e); process.exit(1) })
}
