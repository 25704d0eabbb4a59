'use strict'
// Topic manager for tm_notes: admits every output that is a well-formed note whose author
// signature verifies. Spent notes are not retained in history by default, so the Engine deletes a
// spent note and calls outputNoLongerRetainedInHistory. With `retainHistory`, a spent note is kept
// as history of the notes that replace it (only when the transaction admits a new note).
const { Transaction, ProtoWallet } = require('@bsv/sdk')
const { NOTES_PROTOCOL, NOTES_KEY_ID, decodeNote } = require('./notesProtocol')

const anyoneWallet = new ProtoWallet('anyone')

class NotesTopicManager {
  /** @param {{retainHistory?: boolean}} [options] */
  constructor (options = {}) {
    this.retainHistory = options.retainHistory === true
  }

  async identifyAdmissibleOutputs (beef, previousCoins) {
    const tx = Transaction.fromBEEF(beef)
    const outputsToAdmit = []
    for (let i = 0; i < tx.outputs.length; i++) {
      const note = decodeNote(tx.outputs[i].lockingScript)
      if (note === null) continue
      if (await signatureValid(note)) outputsToAdmit.push(i)
    }
    return {
      outputsToAdmit,
      coinsToRetain: this.retainHistory && outputsToAdmit.length > 0 ? [...previousCoins] : []
    }
  }

  async getDocumentation () {
    return '# tm_notes\nAdmits PushDrop notes: marker `notes-v1`, UTF-8 text, author identity key, author signature.'
  }

  async getMetaData () {
    return { name: 'Notes', shortDescription: 'Short signed text notes.' }
  }
}

async function signatureValid (note) {
  try {
    const { valid } = await anyoneWallet.verifySignature({
      data: note.fieldsForSignature,
      signature: note.signature,
      protocolID: NOTES_PROTOCOL,
      keyID: NOTES_KEY_ID,
      counterparty: note.author
    })
    return valid === true
  } catch (_) {
    return false // verifySignature throws on a bad signature
  }
}

module.exports = { NotesTopicManager }
