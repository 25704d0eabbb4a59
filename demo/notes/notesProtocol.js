'use strict'
// The "notes" token format shared by the demo topic manager, lookup service and live companion.
// A note is a PushDrop output whose fields are:
//   [0] the marker "notes-v1" (UTF-8)
//   [1] the note text (UTF-8, 1..NOTE_TEXT_MAX bytes)
//   [2] the author's identity key (33-byte compressed secp256k1 point)
//   [3] only in a note addressed to someone: the recipient's identity key (33 bytes)
//   last: the author's signature over the fields before it (added by PushDrop.lock)
// An addressed note is for its author and recipient only: live catalogues that index it
// show it to those two alone (notesCompanion.js), and the BRC-24 lookup of the demo's
// NotesLookupService lists public notes only.
// The locking key is the author's BRC-42 child for NOTES_PROTOCOL / NOTES_KEY_ID with counterparty
// "anyone", so anyone can check the signature and only the author can spend the note.
const { LockingScript, PushDrop, PublicKey, Utils, OP } = require('@bsv/sdk')

const NOTES_TOPIC = 'tm_notes'
const NOTES_MARKER = 'notes-v1'
const NOTES_PROTOCOL = [1, 'overlay live notes']
const NOTES_KEY_ID = '1'
const NOTE_TEXT_MAX = 1000

/**
 * Decodes a locking script (hex, bytes, or any @bsv/sdk Script of either major version: only
 * its bytes are read, never its class) into a note, or returns null when it is not one.
 * `checkKeys: false` skips checking that the locking key and the author field are curve points
 * (two pure-JS point decompressions, most of this function's time), for callers that only see
 * notes the topic manager admitted: it decoded them with the checks and verified the author's
 * signature with the author key.
 * @param {unknown} script
 * @param {{checkKeys?: boolean}} [options]
 * @returns {{text: string, author: string, recipient: string | null, signature: number[], fieldsForSignature: number[]} | null}
 */
function decodeNote (script, { checkKeys = true } = {}) {
  let fields
  try {
    const locking = LockingScript.fromHex(scriptToHex(script))
    fields = checkKeys ? PushDrop.decode(locking).fields : pushDropFields(locking)
  } catch (_) {
    return null
  }
  if (fields.length !== 4 && fields.length !== 5) return null
  if (Utils.toUTF8(fields[0]) !== NOTES_MARKER) return null
  const textBytes = fields[1]
  if (textBytes.length < 1 || textBytes.length > NOTE_TEXT_MAX) return null
  const keys = fields.slice(2, fields.length - 1)
  if (keys.some(k => k.length !== 33)) return null
  const [author, recipient = null] = keys.map(k => Utils.toHex(k))
  if (checkKeys) {
    try {
      for (const k of keys) PublicKey.fromString(Utils.toHex(k))
    } catch (_) {
      return null
    }
  }
  return {
    text: Utils.toUTF8(textBytes),
    author,
    recipient,
    signature: fields[fields.length - 1],
    fieldsForSignature: fields.slice(0, fields.length - 1).flat()
  }
}

/**
 * The fields of a PushDrop script with its lock before the fields, as PushDrop.decode reads them
 * (small numbers pushed as opcodes map back to their byte), without decompressing the lock key.
 */
function pushDropFields (script) {
  const chunks = script.chunks
  if (chunks.length < 3 || chunks[0].data?.length !== 33) throw new Error('not a PushDrop script')
  const fields = []
  for (let i = 2; i < chunks.length; i++) {
    const { op, data } = chunks[i]
    let field = data ?? []
    if (field.length === 0) {
      if (op >= 80 && op <= 95) field = [op - 80]
      else if (op === 0) field = [0]
      else if (op === 0x4f) field = [0x81]
    }
    fields.push(field)
    const next = chunks[i + 1]?.op
    if (next === OP.OP_DROP || next === OP.OP_2DROP) break
  }
  return fields
}

/** Hex of a script given as hex, bytes, or an object with toHex() (either SDK major version). */
function scriptToHex (script) {
  if (typeof script === 'string') return script
  if (script instanceof Uint8Array || Array.isArray(script)) return Buffer.from(script).toString('hex')
  if (script !== null && typeof script === 'object' && typeof script.toHex === 'function') return script.toHex()
  throw new TypeError('expected a script as hex, bytes or a Script object')
}

/**
 * Note fields (before PushDrop appends the signature) for a text, the author identity key and,
 * for an addressed note, the recipient identity key.
 */
function noteFields (text, authorIdentityKey, recipientIdentityKey = null) {
  const fields = [
    Utils.toArray(NOTES_MARKER, 'utf8'),
    Utils.toArray(text, 'utf8'),
    Utils.toArray(authorIdentityKey, 'hex')
  ]
  if (recipientIdentityKey !== null) fields.push(Utils.toArray(recipientIdentityKey, 'hex'))
  return fields
}

module.exports = {
  NOTES_TOPIC,
  NOTES_MARKER,
  NOTES_PROTOCOL,
  NOTES_KEY_ID,
  NOTE_TEXT_MAX,
  decodeNote,
  scriptToHex,
  noteFields
}
