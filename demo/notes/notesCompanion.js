'use strict'
// The live companion for the notes lookup service (see docs/engine-notes.md and DESIGN.md
// "The live companion"): how an admitted output is indexed for live sessions, and who may
// see it.
const { NOTES_TOPIC, decodeNote } = require('./notesProtocol')

/** Everyone may see a public note; its `readers` attribute holds this one entry. */
const EVERYONE = '*'

/**
 * `addressed: false` (the default): a public catalogue. Addressed notes are not part of it
 * (`index` returns null for them), so every caller may see every row and no visibility is
 * declared.
 * `addressed: true`: the demo's catalogue, for a host whose access partition is the caller's
 * identity key (demo/server.js `authorize`). Every note is indexed with `readers`: `['*']` for
 * a public note, `[author, recipient]` for an addressed one; `visibility` lets a partition see
 * the rows whose readers hold '*' or itself, one indexed `in` (docs/companions.md).
 */
function createNotesCompanion ({ addressed = false } = {}) {
  const companion = {
    rules: { id: 'urn:overlay-lookup-live:demo:notes-rules:' + (addressed ? 'addressed:1' : '1'), parameters: {} },
    topics: [NOTES_TOPIC],
    index (output) {
      if (output.topic !== NOTES_TOPIC) return null
      // index() runs inside Engine.submit, for outputs NotesTopicManager admitted after decoding
      // them with every check and verifying the author's signature: checking the keys again
      // would only add time to each submit.
      const note = decodeNote(output.lockingScript, { checkKeys: false })
      if (note === null) return null
      if (note.recipient !== null && !addressed) return null
      const attributes = { author: note.author, length: note.text.length }
      if (addressed) attributes.readers = note.recipient === null ? [EVERYONE] : [note.author, note.recipient]
      // The BRC-24 context of a note is its text, so live clients need not decode the script.
      const context = note.recipient === null ? { text: note.text } : { text: note.text, to: note.recipient }
      return { attributes, context }
    },
    select (query) {
      if (query === null || typeof query !== 'object' || Array.isArray(query)) throw new Error('query must be an object')
      if (typeof query.author === 'string') return { where: { eq: ['author', query.author] }, order: 'admission' }
      return { where: { all: true }, order: 'admission' }
    }
  }
  if (addressed) {
    companion.visibility = ({ partition }) => ({ in: ['readers', [EVERYONE, partition]] })
  }
  return companion
}

module.exports = { createNotesCompanion, EVERYONE }
