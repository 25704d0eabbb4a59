'use strict'
// Hosts of the overlay network as it is, for the finite and discovery tests: a plain
// @bsv/overlay Engine (knex + SQLite, real transactions) behind the routes Overlay Express
// installs (overlay-express-host.js: POST /lookup, POST /submit, no lookup-live routes, no
// manifest), and a SLAP tracker of the same kind whose tokens are made and read with
// @bsv/sdk's OverlayAdminTokenTemplate. @bsv/overlay 0.4.6 ships no SLAP topic manager or
// lookup service (they live in @bsv/overlay-discovery-services), so the two below admit and
// list those tokens, and nothing more.

const { Transaction, P2PKH, PrivateKey, ProtoWallet, OverlayAdminTokenTemplate } = require('@bsv/sdk')
const { OverlayExpressHost } = require('./overlay-express-host')
const { createTestEngine } = require('./engine')
const { mintFunding, SEQUENCE_FINAL } = require('../../demo/chain')
const { NotesLookupService } = require('../../demo/notes/NotesLookupService')
const { NotesTopicManager } = require('../../demo/notes/NotesTopicManager')
const { NOTES_TOPIC } = require('../../demo/notes/notesProtocol')

/**
 * Records `METHOD path` of every request the host receives; `pause()` holds new BRC-24
 * lookups at the door and resolves once none is being answered, `resume()` lets them in
 * (so a test changes the host between two whole answers); `host.editAnswer`, when set,
 * rewrites each BRC-24 answer before it is sent (a host serving forged evidence).
 */
function recordRequests (host) {
  host.requests = []
  let gate = null
  let inflight = 0
  let drained = null
  host.app.use((req, res, next) => {
    host.requests.push(`${req.method} ${req.path}`)
    next()
  })
  host.app.use('/lookup', async (req, res, next) => {
    while (gate) await gate.promise
    inflight++
    let done = false
    res.on('close', () => {
      if (done) return
      done = true
      if (--inflight === 0 && drained) { drained(); drained = null }
    })
    const edit = host.editAnswer
    if (edit) {
      const json = res.json.bind(res)
      res.json = (body) => json(edit(body))
    }
    next()
  })
  host.pause = () => {
    if (!gate) {
      let resolve
      const promise = new Promise(r => { resolve = r })
      gate = { promise, resolve }
    }
    return inflight === 0 ? Promise.resolve() : new Promise(r => { drained = r })
  }
  host.resume = () => {
    const g = gate
    gate = null
    if (g) g.resolve()
  }
}

/**
 * A notes host answering BRC-24 only: a real Engine on `engineDir` (kept across restarts)
 * with the notes topic manager and the plain NotesLookupService as `ls_notes`, on `port`
 * (0: any). `submit(built)` is the Engine's own submit.
 */
async function startNotesHost ({ chainTracker, engineDir, port = 0 } = {}) {
  let inner = null
  const t = await createTestEngine({
    dir: engineDir,
    chainTracker,
    managers: { [NOTES_TOPIC]: new NotesTopicManager() },
    lookupServices: async (knex) => {
      inner = new NotesLookupService(knex)
      await inner.init()
      return { ls_notes: inner }
    }
  })
  const host = new OverlayExpressHost()
  host.engine = t.engine
  recordRequests(host)
  await host.listen(port)
  await host.start()
  return {
    host,
    t,
    inner,
    origin: host.origin,
    port: host.srv.port,
    requests: host.requests,
    pause: () => host.pause(),
    editAnswers: (edit) => { host.editAnswer = edit },
    resume: () => host.resume(),
    submit: (built) => t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] }),
    async close () {
      await host.close()
      await t.close()
    }
  }
}

/** Admits outputs that decode as SLAP advertisements (OverlayAdminTokenTemplate.decode). */
class SlapTopicManager {
  async identifyAdmissibleOutputs (beef) {
    const tx = Transaction.fromBEEF(beef)
    const outputsToAdmit = []
    tx.outputs.forEach((o, i) => {
      try {
        if (OverlayAdminTokenTemplate.decode(o.lockingScript).protocol === 'SLAP') outputsToAdmit.push(i)
      } catch {}
    })
    return { outputsToAdmit, coinsToRetain: [] }
  }

  async getDocumentation () { return 'SLAP advertisements' }
  async getMetaData () { return { name: 'SLAP', shortDescription: 'SLAP advertisements' } }
}

/** `ls_slap`: lists the advertisements of the service named in the query. */
class SlapLookupService {
  constructor () {
    this.admissionMode = 'locking-script'
    this.spendNotificationMode = 'none'
    this.ads = new Map() // "txid.index" -> {txid, outputIndex, service}
  }

  async outputAdmittedByTopic (p) {
    if (p.topic !== 'tm_slap') return
    const ad = OverlayAdminTokenTemplate.decode(p.lockingScript)
    this.ads.set(`${p.txid}.${p.outputIndex}`, { txid: p.txid, outputIndex: p.outputIndex, service: ad.topicOrService })
  }

  async outputSpent (p) { this.ads.delete(`${p.txid}.${p.outputIndex}`) }
  async outputNoLongerRetainedInHistory (txid, outputIndex) { this.ads.delete(`${txid}.${outputIndex}`) }
  async outputEvicted (txid, outputIndex) { this.ads.delete(`${txid}.${outputIndex}`) }

  async lookup (question) {
    const service = question.query && question.query.service
    return [...this.ads.values()].filter(a => a.service === service).map(({ txid, outputIndex }) => ({ txid, outputIndex }))
  }

  async getDocumentation () { return 'SLAP lookup' }
  async getMetaData () { return { name: 'SLAP lookup', shortDescription: 'SLAP lookup' } }
}

/**
 * A SLAP tracker: an Engine host with tm_slap / ls_slap. `advertise(domain, service, key)`
 * submits one SLAP token made with @bsv/sdk's OverlayAdminTokenTemplate by the identity of
 * `key` (a host's identity key; a fresh one if not given), and resolves with its txid.
 */
async function startSlapTracker ({ chainTracker }) {
  const t = await createTestEngine({
    chainTracker,
    managers: { tm_slap: new SlapTopicManager() },
    lookupServices: { ls_slap: new SlapLookupService() }
  })
  const host = new OverlayExpressHost()
  host.engine = t.engine
  recordRequests(host)
  await host.listen()
  await host.start()
  const fundingKey = PrivateKey.fromRandom()
  return {
    host,
    t,
    origin: host.origin,
    requests: host.requests,
    async advertise (domain, service, key = PrivateKey.fromRandom()) {
      const wallet = new ProtoWallet(key)
      const lockingScript = await new OverlayAdminTokenTemplate(wallet).lock('SLAP', domain, service)
      const funding = mintFunding(chainTracker, fundingKey.toAddress())
      const tx = new Transaction()
      tx.addInput({ sourceTransaction: funding.tx, sourceOutputIndex: funding.outputIndex, unlockingScriptTemplate: new P2PKH().unlock(fundingKey), sequence: SEQUENCE_FINAL })
      tx.addOutput({ lockingScript, satoshis: 1 })
      await tx.sign()
      const steak = await t.engine.submit({ beef: tx.toBEEF(), topics: ['tm_slap'] })
      if (!steak.tm_slap || steak.tm_slap.outputsToAdmit.length !== 1) throw new Error('the tracker did not admit the advertisement')
      return tx.id('hex')
    },
    async close () {
      await host.close()
      await t.close()
    }
  }
}

module.exports = { startNotesHost, startSlapTracker }
