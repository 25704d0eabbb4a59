'use strict'
// The live companion for the notes lookup service (see docs/engine-notes.md and DESIGN.md
// "The live companion"): how an admitted output is indexed for live sessions.
const { NOTES_TOPIC, decodeNote } = require('./notesProtocol')

function createNotesCompanion () {
  return {
    rules: { id: 'urn:overlay-lookup-live:demo:notes-rules:1', parameters: {} },
    topics: [NOTES_TOPIC],
    index (output) {
      if (output.topic !== NOTES_TOPIC) return null
      // index() runs inside Engine.submit, for outputs NotesTopicManager admitted after decoding
      // them with every check and verifying the author's signature: checking the keys again
      // would only add time to each submit.
      const note = decodeNote(output.lockingScript, { checkKeys: false })
      if (note === null) return null
      // The BRC-24 context of a note is its text, so live clients need not decode the script.
      return { attributes: { author: note.author, length: note.text.length }, context: { text: note.text } }
    },
    select (query) {
      if (query === null || typeof query !== 'object' || Array.isArray(query)) throw new Error('query must be an object')
      if (typeof query.author === 'string') return { where: { eq: ['author', query.author] }, order: 'admission' }
      return { where: { all: true }, order: 'admission' }
    }
  }
}

module.exports = { createNotesCompanion }
