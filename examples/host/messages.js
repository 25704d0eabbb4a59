'use strict'
// The example's overlay service: a topic of short public messages, each an unspendable data
// output `OP_FALSE OP_RETURN "overlay-lookup-live/example" <UTF-8 text>`. It has the three parts
// an @bsv/overlay host registers: a topic manager (what the Engine admits), a BRC-24 lookup
// service (a knex table of messages; what /lookup answers) and the live companion of that
// service (how each admitted output is indexed for lookup-live sessions).
const { Transaction, LockingScript, P2PKH } = require('@bsv/sdk')

const TOPIC = 'tm_messages'
const SERVICE = 'ls_messages'
const MARKER = 'overlay-lookup-live/example'
const MAX_TEXT_BYTES = 512

/** A data push of `bytes` (at most 65535 of them) as hex. */
function pushHex (bytes) {
  const b = Buffer.from(bytes)
  let head
  if (b.length < 0x4c) head = Buffer.from([b.length])
  else if (b.length <= 0xff) head = Buffer.from([0x4c, b.length])
  else head = Buffer.from([0x4d, b.length & 0xff, b.length >> 8])
  return head.toString('hex') + b.toString('hex')
}

const PREFIX = '006a' + pushHex(Buffer.from(MARKER))

/** The locking script of a message. */
function messageScript (text) {
  const bytes = Buffer.from(String(text), 'utf8')
  if (bytes.length === 0 || bytes.length > MAX_TEXT_BYTES) throw new RangeError(`a message is 1..${MAX_TEXT_BYTES} bytes of UTF-8`)
  return LockingScript.fromHex(PREFIX + pushHex(bytes))
}

/** The text of a message script (a LockingScript or hex), or null when it is not one. */
function decodeMessage (script) {
  const hex = typeof script === 'string' ? script : script.toHex()
  if (!hex.startsWith(PREFIX)) return null
  const rest = Buffer.from(hex.slice(PREFIX.length), 'hex')
  let len, at
  if (rest.length > 0 && rest[0] > 0 && rest[0] < 0x4c) { len = rest[0]; at = 1 } else if (rest[0] === 0x4c && rest.length >= 2) { len = rest[1]; at = 2 } else if (rest[0] === 0x4d && rest.length >= 3) { len = rest[1] | (rest[2] << 8); at = 3 } else return null
  if (at + len !== rest.length || len > MAX_TEXT_BYTES) return null
  const text = rest.subarray(at).toString('utf8')
  return Buffer.from(text, 'utf8').equals(rest.subarray(at)) ? text : null
}

/** Admits every message output of a submitted transaction. */
class MessagesTopicManager {
  async identifyAdmissibleOutputs (beef, previousCoins) {
    const tx = Transaction.fromBEEF(beef)
    const outputsToAdmit = []
    tx.outputs.forEach((o, i) => { if (decodeMessage(o.lockingScript) !== null) outputsToAdmit.push(i) })
    return { outputsToAdmit, coinsToRetain: [] }
  }

  async getDocumentation () { return `# ${TOPIC}\nData outputs: OP_FALSE OP_RETURN "${MARKER}" <text>.` }
  async getMetaData () { return { name: 'Messages', shortDescription: 'Short public messages (overlay-lookup-live example).' } }
}

/** The BRC-24 lookup service: one row per admitted message in a knex table. */
class MessagesLookupService {
  /** @param {import('knex').Knex} knex */
  constructor (knex) {
    this.knex = knex
    this.admissionMode = 'locking-script'
    this.spendNotificationMode = 'none'
  }

  async init () {
    if (await this.knex.schema.hasTable('example_messages')) return
    await this.knex.schema.createTable('example_messages', t => {
      t.string('txid', 64).notNullable()
      t.integer('outputIndex').notNullable()
      t.text('text').notNullable()
      t.increments('seq')
      t.unique(['txid', 'outputIndex'])
    })
  }

  async outputAdmittedByTopic (payload) {
    if (payload.topic !== TOPIC || payload.mode !== 'locking-script') return
    const text = decodeMessage(payload.lockingScript)
    if (text === null) return
    await this.knex('example_messages').insert({ txid: payload.txid, outputIndex: payload.outputIndex, text })
      .onConflict(['txid', 'outputIndex']).ignore()
  }

  async outputSpent (payload) { await this.remove(payload.txid, payload.outputIndex) }
  async outputNoLongerRetainedInHistory (txid, outputIndex) { await this.remove(txid, outputIndex) }
  async outputEvicted (txid, outputIndex) { await this.remove(txid, outputIndex) }
  async remove (txid, outputIndex) { await this.knex('example_messages').where({ txid, outputIndex }).del() }

  /** Query `{}`: every message, oldest first (a LookupFormula; the Engine adds the BEEFs). */
  async lookup () {
    const rows = await this.knex('example_messages').select('txid', 'outputIndex').orderBy('seq')
    return rows.map(r => ({ txid: r.txid, outputIndex: Number(r.outputIndex) }))
  }

  async getDocumentation () { return `# ${SERVICE}\nQuery \`{}\`: every message, oldest first.` }
  async getMetaData () { return { name: 'Messages lookup', shortDescription: 'Every message.' } }
}

/** The live companion of ls_messages (docs/companions.md). */
const messagesCompanion = {
  rules: { id: 'urn:overlay-lookup-live:example:messages:1', parameters: {} },
  topics: [TOPIC],
  index (output) {
    const text = decodeMessage(output.lockingScript)
    if (text === null) return null
    // The BRC-24 context carries the text, so followers need not decode the script.
    return { attributes: { length: Buffer.byteLength(text) }, context: { text } }
  },
  select (query) {
    if (query === null || typeof query !== 'object' || Array.isArray(query)) throw new Error('query must be an object ({})')
    return { where: { all: true }, order: 'admission' }
  }
}

/**
 * A signed transaction spending `funding` (a P2PKH output to `key`, as the host's development
 * faucet returns it) into one message output and the change back to `key`. Resolves with
 * `{ txid, beef }`.
 */
async function buildMessageTx (key, funding, text) {
  const source = Transaction.fromBEEF(Array.from(Buffer.from(funding.beef, 'hex')))
  const tx = new Transaction()
  tx.addInput({ sourceTransaction: source, sourceOutputIndex: funding.outputIndex, unlockingScriptTemplate: new P2PKH().unlock(key) })
  tx.addOutput({ lockingScript: messageScript(text), satoshis: 0 })
  tx.addOutput({ lockingScript: new P2PKH().lock(key.toAddress()), satoshis: funding.satoshis })
  await tx.sign()
  return { txid: tx.id('hex'), beef: Buffer.from(tx.toBEEF()) }
}

module.exports = { TOPIC, SERVICE, MARKER, messageScript, decodeMessage, MessagesTopicManager, MessagesLookupService, messagesCompanion, buildMessageTx }
