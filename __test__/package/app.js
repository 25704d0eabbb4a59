'use strict'
// What an operator runs after `npm install overlay-lookup-live`: copied into a fresh project by
// __test__/package/run.js and run there, so `require('overlay-lookup-live')` resolves to the
// installed tarball (its platform package supplies the binary). It opens a store, wraps a lookup
// service, admits one real transaction output through the wrapped hook as an Engine would,
// serves the routes in public mode over loopback, checks one open and runs the package's
// `overlay-lookup-live check` command against it. It first checks that the package's other entry
// points (overlay-lookup-live/js/client, package.json) resolve.
// Exit code 0 and a last line "operator-app: ok" mean success.

const assert = require('assert')
const crypto = require('crypto')
const { execFile } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')
const express = require('express')
const { MerklePath, P2PKH, PrivateKey, Transaction, UnlockingScript } = require('@bsv/sdk')
const { LiveLookup, PROFILE, digest } = require('overlay-lookup-live')

/** A proven transaction with one P2PKH output (synthetic block; BEEF needs a proof or parents). */
function provenTransaction () {
  const tx = new Transaction(1, [{
    sourceTXID: crypto.randomBytes(32).toString('hex'),
    sourceOutputIndex: 0,
    unlockingScript: new UnlockingScript([]),
    sequence: 0xffffffff
  }], [{ lockingScript: new P2PKH().lock(PrivateKey.fromRandom().toAddress()), satoshis: 1000 }], 0)
  tx.merklePath = new MerklePath(1, [[
    { offset: 0, hash: crypto.randomBytes(32).toString('hex') },
    { offset: 1, hash: tx.id('hex'), txid: true }
  ]])
  return tx
}

/** The operator's existing BRC-24 lookup service (it only needs to exist here). */
const notesService = {
  admissionMode: 'locking-script',
  spendNotificationMode: 'none',
  async outputAdmittedByTopic () {},
  async outputSpent () {},
  async outputNoLongerRetainedInHistory () {},
  async outputEvicted () {},
  async lookup () { return [] },
  async getDocumentation () { return 'notes' },
  async getMetaData () { return { name: 'notes', shortDescription: 'notes' } }
}

/** Its live companion: every output in one collection, in admission order. */
const notesCompanion = {
  rules: { id: 'urn:example:notes-rules:1', parameters: {} },
  index () { return { attributes: { kind: 'note' } } },
  select () { return { where: { all: true }, order: 'admission' } }
}

function listen (app) {
  return new Promise((resolve, reject) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server))
    server.on('error', reject)
  })
}

/** Runs `overlay-lookup-live check` as an operator would, without blocking this server. */
function checkCommand (origin) {
  const bin = path.join(process.cwd(), 'node_modules', '.bin', 'overlay-lookup-live')
  const args = ['check', origin, '--service', 'ls_notes', '--allow-insecure-http', '--wait-ms', '200']
  return new Promise((resolve) => {
    execFile(bin, args, { timeout: 120000 }, (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr }))
  })
}

/** The package's other entry points (package.json exports) resolve in the installed tarball. */
function checkEntryPoints () {
  const root = require('overlay-lookup-live')
  for (const subpath of ['overlay-lookup-live/js/client', 'overlay-lookup-live/js/client.js']) {
    const client = require(subpath)
    assert.strictEqual(client.LiveLookupClient, root.LiveLookupClient, subpath)
    assert.strictEqual(client.CheckpointStore, root.CheckpointStore, subpath)
    assert.strictEqual(client.NativeAuthFetch, root.NativeAuthFetch, subpath)
    assert.strictEqual(client.NativeWallet, root.NativeWallet, subpath)
  }
  assert.strictEqual(require('overlay-lookup-live/package.json').name, 'overlay-lookup-live')
}

async function main () {
  checkEntryPoints()
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'operator-app-'))
  const app = express()
  const server = await listen(app)
  const origin = `http://127.0.0.1:${server.address().port}`
  const live = await LiveLookup.open({
    dataDir,
    create: true,
    chain: { network: 'test', genesisHash: '00'.repeat(32) },
    provider: origin
  })
  try {
    const wrapped = live.wrap('ls_notes', notesService, notesCompanion)
    const tx = provenTransaction()
    await wrapped.outputAdmittedByTopic({ mode: 'whole-tx', atomicBEEF: tx.toAtomicBEEF(), outputIndex: 0, topic: 'tm_notes' })

    app.use(live.router({ baseURL: origin, authentication: 'none', privateKey: PrivateKey.fromRandom().toHex(), allowLocalHttp: true }))

    const manifest = await (await fetch(`${origin}/overlay/v1/capabilities`)).json()
    const res = await fetch(`${origin}/overlay/v1/lookup/open`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'cache-control': 'no-store',
        'x-bsv-overlay-capability': digest('capabilities', manifest.body),
        'x-bsv-overlay-profile': PROFILE
      },
      body: JSON.stringify({
        version: 1,
        requestId: crypto.randomBytes(16).toString('hex'),
        service: 'ls_notes',
        query: {},
        limits: { maxBytes: 65536, maxObservations: 100, waitMs: 0 }
      })
    })
    const text = await res.text()
    assert.strictEqual(res.status, 200, text)
    const batch = JSON.parse(text)
    assert.strictEqual(batch.scope.provider, origin)
    assert.strictEqual(batch.snapshotComplete, true)
    const outputs = batch.groups.flatMap(g => g.observations.filter(o => o.kind === 'output'))
      .map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`)
    assert.deepStrictEqual(outputs, [`${tx.id('hex')}.0`])
    // The package's command line, installed in node_modules/.bin, checking this deployment.
    const checked = await checkCommand(origin)
    assert.strictEqual(checked.code, 0, checked.stdout + checked.stderr)
    assert.match(checked.stdout, /\n\d+ passed, 0 failed, \d+ skipped\n$/)
    console.log('operator-app: ' + checked.stdout.trim().split('\n').pop())
    // Which native file was loaded: the test checks it is the platform package's.
    for (const file of Object.keys(require.cache).filter(f => f.endsWith('.node'))) console.log('operator-app: binding', file)
    console.log('operator-app: ok')
  } finally {
    await new Promise(resolve => server.close(resolve))
    await live.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

main().catch((err) => { console.error(err); process.exit(1) })
