'use strict'
// A REAL @bsv/overlay 0.4.6 Engine on knex + better-sqlite3 in a temp dir, and a factory of REAL
// @bsv/sdk 2.x transactions (synthetic but SPV-valid: a local chain tracker knows our merkle roots).
// Shared by the Jest tests and the demo; the notes domain lives in demo/notes/.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Knex = require('knex')
const { Engine, KnexStorage } = require('@bsv/overlay')
const { Transaction, PrivateKey, P2PKH, PushDrop, ProtoWallet } = require('@bsv/sdk')
const { LocalChainTracker, mintFunding, SEQUENCE_FINAL } = require('../../demo/chain')
const { runOverlayMigrations } = require('../../demo/storage')
const { NotesTopicManager } = require('../../demo/notes/NotesTopicManager')
const { NOTES_TOPIC, NOTES_PROTOCOL, NOTES_KEY_ID, noteFields } = require('../../demo/notes/notesProtocol')

function addLatency (storage, turns) {
  const proto = Object.getPrototypeOf(storage)
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (name === 'constructor' || typeof proto[name] !== 'function') continue
    storage[name] = async (...args) => {
      for (let i = 0; i < turns; i++) await new Promise(resolve => setImmediate(resolve))
      return proto[name].apply(storage, args)
    }
  }
}

/** A console-shaped logger that keeps what the Engine logs (its caught hook errors) for tests. */
function recordingLogger () {
  const entries = []
  const log = (level) => (...args) => { entries.push({ level, args }) }
  return {
    entries,
    log: log('log'), info: log('info'), warn: log('warn'), error: log('error'), debug: log('debug'),
    time: () => {}, timeEnd: () => {}
  }
}

/**
 * Creates a real Engine. No broadcaster, no advertiser, GASP sync disabled for every topic.
 * storageLatencyTurns: every storage call first waits that many event-loop turns, as a storage
 * over the network would (better-sqlite3 answers within the same turn, hiding ordering races).
 * @param {{lookupServices?: object | ((knex) => Promise<object>|object), managers?: object, dir?: string, storageLatencyTurns?: number, chainTracker?: LocalChainTracker}} [options]
 */
async function createTestEngine (options = {}) {
  const dir = options.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'overlay-engine-'))
  const knex = Knex({
    client: 'better-sqlite3',
    connection: { filename: path.join(dir, 'overlay.sqlite') },
    useNullAsDefault: true
  })
  await runOverlayMigrations(knex)
  const storage = new KnexStorage(knex)
  if (options.storageLatencyTurns > 0) addLatency(storage, options.storageLatencyTurns)
  // Nodes of one test network share a tracker: the synthetic chain they all accept.
  const chainTracker = options.chainTracker ?? new LocalChainTracker()
  const managers = options.managers ?? { [NOTES_TOPIC]: new NotesTopicManager() }
  const lookupServices = typeof options.lookupServices === 'function'
    ? await options.lookupServices(knex)
    : (options.lookupServices ?? {})
  const syncConfiguration = Object.fromEntries(Object.keys(managers).map(t => [t, false]))
  const logger = recordingLogger()
  // Constructor order of 0.4.6: managers, lookupServices, storage, chainTracker, hostingURL,
  // shipTrackers, slapTrackers, broadcaster, advertiser, syncConfiguration, logTime, logPrefix,
  // throwOnBroadcastFailure, overlayBroadcastFacilitator, logger.
  const engine = new Engine(managers, lookupServices, storage, chainTracker,
    undefined, undefined, undefined, undefined, undefined, syncConfiguration,
    false, '[test-engine] ', false, undefined, logger)
  return {
    engine,
    knex,
    storage,
    chainTracker,
    logger,
    dir,
    async close () {
      await knex.destroy()
      if (options.dir === undefined) fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/**
 * Builds real, signed transactions carrying notes. Each note is remembered so later
 * transactions can spend it; BEEFs carry every unproven ancestor down to a proven funding tx.
 */
class NoteFactory {
  /** @param {LocalChainTracker} chainTracker @param {{authorKey?: PrivateKey}} [options] */
  constructor (chainTracker, options = {}) {
    this.chainTracker = chainTracker
    this.authorKey = options.authorKey ?? PrivateKey.fromRandom()
    this.wallet = new ProtoWallet(this.authorKey)
    this.pushDrop = new PushDrop(this.wallet)
    this.fundingKey = PrivateKey.fromRandom()
  }

  async authorIdentityKey () {
    const { publicKey } = await this.wallet.getPublicKey({ identityKey: true })
    return publicKey
  }

  /** A proven funding transaction (in a freshly minted synthetic block) paying one P2PKH output. */
  fund (satoshis = 100000) {
    return mintFunding(this.chainTracker, this.fundingKey.toAddress(), satoshis)
  }

  /** A note's locking script; `to` (an identity key) addresses it to one recipient. */
  async noteScript (text, to = null) {
    // forSelf: the lock is the author's own child key toward "anyone", whose signature anyone can check.
    return this.pushDrop.lock(noteFields(text, await this.authorIdentityKey(), to), NOTES_PROTOCOL, NOTES_KEY_ID, 'anyone', true)
  }

  /**
   * Builds and signs a transaction.
   * @param {{spend?: Array<Note>, notes?: Array<string|{text: string, to: string}>, plainOutputs?: number, fundingAt?: number}} spec
   *   spend: notes to spend; notes: texts of new notes (outputs 0..n-1), or {text, to} for a note
   *   addressed to the identity key `to`; plainOutputs: extra
   *   P2PKH outputs after the notes; fundingAt: input index of a fresh funding input (default:
   *   first input, so spent notes follow it; pass spend.length to put it last, or -1 for none).
   * @returns {Promise<{tx: Transaction, txid: string, beef: number[], notes: Note[], spent: Note[]}>}
   */
  async build (spec) {
    const spend = spec.spend ?? []
    const texts = (spec.notes ?? []).map(n => typeof n === 'string' ? { text: n, to: null } : n)
    const fundingAt = spec.fundingAt ?? 0
    const noteInputs = spend.map(note => ({
      sourceTransaction: note.tx,
      sourceOutputIndex: note.outputIndex,
      unlockingScriptTemplate: this.pushDrop.unlock(NOTES_PROTOCOL, NOTES_KEY_ID, 'anyone', 'all', false,
        note.satoshis, note.tx.outputs[note.outputIndex].lockingScript),
      sequence: SEQUENCE_FINAL
    }))
    const inputs = [...noteInputs]
    if (fundingAt >= 0) {
      const funding = this.fund()
      inputs.splice(fundingAt, 0, {
        sourceTransaction: funding.tx,
        sourceOutputIndex: funding.outputIndex,
        unlockingScriptTemplate: new P2PKH().unlock(this.fundingKey),
        sequence: SEQUENCE_FINAL
      })
    }
    if (inputs.length === 0) throw new Error('a transaction needs at least one input')
    const tx = new Transaction()
    for (const input of inputs) tx.addInput(input)
    for (const { text, to } of texts) tx.addOutput({ lockingScript: await this.noteScript(text, to), satoshis: 1000 })
    const plain = spec.plainOutputs ?? (texts.length === 0 ? 1 : 0) // a transaction needs an output
    for (let i = 0; i < plain; i++) {
      tx.addOutput({ lockingScript: new P2PKH().lock(this.fundingKey.toAddress()), satoshis: 500 })
    }
    await tx.sign()
    const txid = tx.id('hex')
    const notes = texts.map(({ text, to }, outputIndex) => ({ txid, outputIndex, text, to, satoshis: 1000, tx }))
    return { tx, txid, beef: tx.toBEEF(), notes, spent: spend }
  }

  /** New notes in one transaction. */
  createNotes (texts) {
    return this.build({ notes: texts })
  }

  /** Spends `note` and creates its replacement in the same transaction. */
  replaceNote (note, text, options = {}) {
    return this.build({ spend: [note], notes: [text], fundingAt: options.fundingAt })
  }

  /** Spends notes without replacing them (the transaction pays a plain P2PKH output). */
  spendNotes (notes, options = {}) {
    return this.build({ spend: notes, notes: [], fundingAt: options.fundingAt })
  }
}

module.exports = { LocalChainTracker, runOverlayMigrations, createTestEngine, NoteFactory, recordingLogger }
