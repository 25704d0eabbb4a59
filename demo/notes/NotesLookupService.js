'use strict'
// A plain @bsv/overlay LookupService for notes, storing one row per live note in a knex table.
// It supports every admission and spend-notification mode of @bsv/overlay 0.4.6, chosen at
// construction, so tests can wrap services of different modes. It knows nothing of live lookup.
const { Transaction } = require('@bsv/sdk')
const { NOTES_TOPIC, decodeNote, scriptToHex } = require('./notesProtocol')

const ADMISSION_MODES = ['locking-script', 'whole-tx']
const SPEND_MODES = ['none', 'txid', 'script', 'whole-tx']

class NotesLookupService {
  /**
   * @param {import('knex').Knex} knex
   * @param {{table?: string, admissionMode?: string, spendNotificationMode?: string}} [options]
   */
  constructor (knex, options = {}) {
    this.knex = knex
    this.table = options.table ?? 'notes'
    this.admissionMode = options.admissionMode ?? 'locking-script'
    this.spendNotificationMode = options.spendNotificationMode ?? 'none'
    if (!ADMISSION_MODES.includes(this.admissionMode)) throw new Error(`unknown admissionMode ${this.admissionMode}`)
    if (!SPEND_MODES.includes(this.spendNotificationMode)) throw new Error(`unknown spendNotificationMode ${this.spendNotificationMode}`)
  }

  /** Creates the table if needed (or adds the recipient column); call once before registering the service. */
  async init () {
    if (await this.knex.schema.hasTable(this.table)) {
      if (!(await this.knex.schema.hasColumn(this.table, 'recipient'))) {
        await this.knex.schema.alterTable(this.table, t => { t.string('recipient', 66).nullable() })
      }
      return
    }
    await this.knex.schema.createTable(this.table, t => {
      t.string('txid', 64).notNullable()
      t.integer('outputIndex').notNullable()
      t.string('author', 66).notNullable()
      t.text('text').notNullable()
      t.bigInteger('admittedAt').notNullable()
      // An addressed note's recipient; null for a public note.
      t.string('recipient', 66).nullable()
      t.primary(['txid', 'outputIndex'])
      t.index(['author'])
    })
  }

  async outputAdmittedByTopic (payload) {
    if (payload.topic !== NOTES_TOPIC) return
    let txid, script
    if (payload.mode === 'locking-script') {
      txid = payload.txid
      script = scriptToHex(payload.lockingScript)
    } else {
      const tx = Transaction.fromAtomicBEEF(payload.atomicBEEF)
      txid = tx.id('hex')
      script = tx.outputs[payload.outputIndex].lockingScript.toHex()
    }
    const note = decodeNote(script)
    if (note === null) return
    await this.knex(this.table)
      .insert({ txid, outputIndex: payload.outputIndex, author: note.author, text: note.text, admittedAt: Date.now(), recipient: note.recipient })
      .onConflict(['txid', 'outputIndex']).ignore()
  }

  async outputSpent (payload) {
    if (payload.topic !== NOTES_TOPIC) return
    await this.remove(payload.txid, payload.outputIndex)
  }

  async outputNoLongerRetainedInHistory (txid, outputIndex, topic) {
    if (topic !== NOTES_TOPIC) return
    await this.remove(txid, outputIndex)
  }

  async outputEvicted (txid, outputIndex) {
    await this.remove(txid, outputIndex)
  }

  async remove (txid, outputIndex) {
    await this.knex(this.table).where({ txid, outputIndex }).del()
  }

  /**
   * Query: {} for all public notes, {author} for one author's public notes, {txid, outputIndex}
   * for one note (the outpoint names it: how a publisher finds its own note to spend it).
   * Addressed notes are for author and recipient only, and this unauthenticated finite
   * lookup cannot tell who asks, so it never lists them.
   * Answers a LookupFormula (outpoints); the Engine hydrates them with BEEF.
   */
  async lookup (question) {
    const query = question.query ?? {}
    if (typeof query !== 'object' || Array.isArray(query)) throw new Error('query must be an object')
    const q = this.knex(this.table).select('txid', 'outputIndex').orderBy([{ column: 'admittedAt' }, { column: 'txid' }, { column: 'outputIndex' }])
    if (typeof query.author === 'string') q.where({ author: query.author })
    if (typeof query.txid === 'string') q.where({ txid: query.txid, outputIndex: Number(query.outputIndex ?? 0) })
    else q.whereNull('recipient')
    const rows = await q
    return rows.map(r => ({ txid: r.txid, outputIndex: Number(r.outputIndex) }))
  }

  async getDocumentation () {
    return '# ls_notes\nQuery `{}` for all notes, `{author}` for one author, `{txid, outputIndex}` for one note.'
  }

  async getMetaData () {
    return { name: 'Notes lookup', shortDescription: 'Find notes by author.' }
  }
}

module.exports = { NotesLookupService }
