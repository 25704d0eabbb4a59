'use strict'
// Follows the example host's ls_messages live: `node follow.js <host url>`. It opens a session,
// drains the snapshot, then long-polls for changes, printing each message once it is present;
// the checkpoint (FOLLOW_DB, default ./follower.db) lets a restart resume where it stopped.
// AUTH=brc103 follows a BRC-103 host with an identity of its own (kept in <FOLLOW_DB>.key).
// UNTIL=<text> stops once a message with that text is present (scripts and tests use it).
const fs = require('node:fs')
const crypto = require('node:crypto')
const { PrivateKey } = require('@bsv/sdk')
const { LiveLookupClient, CheckpointStore, NativeAuthFetch, NativeWallet } = require('overlay-lookup-live')

/** The example host's chain (examples/host/server.js CHAIN). */
const CHAIN = {
  network: 'local-dev',
  genesisHash: crypto.createHash('sha256').update('overlay-lookup-live example: local development chain').digest('hex')
}

/** A message's text from its BRC-24 context ({text}), or null. */
function textOf (member) {
  if (!member.context) return null
  for (const encoding of ['base64', 'hex', 'utf8']) {
    try {
      const value = JSON.parse(Buffer.from(member.context.bytes, encoding).toString('utf8'))
      if (value && typeof value.text === 'string') return value.text
    } catch (_) {}
  }
  return null
}

function identity (file) {
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim()
  const hex = PrivateKey.fromRandom().toHex().padStart(64, '0')
  fs.writeFileSync(file, hex + '\n', { mode: 0o600 })
  return hex
}

function follow (url, { db = './follower.db', auth = 'none', until = null, log = console.log } = {}) {
  const store = CheckpointStore.open(db)
  const transport = auth === 'brc103'
    ? { authFetch: new NativeAuthFetch(NativeWallet.fromPrivateKey(identity(db + '.key'))) }
    : { fetch }
  const client = new LiveLookupClient({
    baseURL: url,
    allowInsecureHttp: new URL(url).protocol === 'http:', // local development only
    chain: CHAIN,
    store,
    limits: { maxBytes: 1 << 20, maxObservations: 256, waitMs: 20000 },
    ...transport
  })
  const seen = new Set()
  const handle = client.follow('ls_messages', {}, {
    // Without a ChainTracker the client cannot check evidence, so it must be told what to
    // show: `claims` lists a row as the provider claims it, before any check. A production
    // follower passes `chainTracker` to LiveLookupClient instead, and then shows only rows
    // whose evidence verified (the default, BRC-193 §9; docs/client.md "Sources, generations and membership").
    membership: 'claims',
    onState ({ connection, error }) {
      log(`connection: ${connection}${error ? ` (${error.code}: ${error.message})` : ''}`)
    },
    onRevision ({ members, state }) {
      for (const m of members) {
        const id = `${m.outpoint.txid}.${m.outpoint.outputIndex}`
        if (!m.present || seen.has(id)) continue
        seen.add(id)
        const text = textOf(m)
        log(`message ${id} (${m.phase}): ${text === null ? '(no text)' : text}`)
        if (until !== null && text === until) handle.close()
      }
      if (state.stale) log('stale: the provider is replacing the collection')
    }
  })
  return { handle, done: handle.done.finally(() => store.close()) }
}

if (require.main === module) {
  const url = process.argv[2]
  if (!url) {
    console.error('usage: node follow.js <host url>   (AUTH=none|brc103, FOLLOW_DB, UNTIL)')
    process.exit(2)
  }
  const f = follow(url.replace(/\/+$/, ''), { db: process.env.FOLLOW_DB, auth: process.env.AUTH || 'none', until: process.env.UNTIL ?? null })
  process.once('SIGINT', () => f.handle.close())
  f.done.then(() => console.log('follow ended'), (e) => { console.error(`follow failed: ${e.code} ${e.message}`); process.exit(1) })
}

module.exports = { follow, CHAIN }
