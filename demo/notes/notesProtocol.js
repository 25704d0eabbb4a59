'use strict'
// The "notes" token format shared by the demo topic manager, lookup service and live companion.
// A note is a PushDrop output whose fields are:
//   [0] the marker "notes-v1" (UTF-8)
//   [1] the note text (UTF-8, 1..NOTE_TEXT_MAX bytes)
//   [2] the author's identity key (33-byte compressed secp256k1 point)
//   [3] the author's signature over fields 0..2 (added by PushDrop.lock)
// The locking key is the author's BRC-42 child for NOTES_PROTOCOL / NOTES_KEY_ID with counterparty
// "anyone", so anyone can check the signature and only the author can spend the note.
const { LockingScript, PushDrop, PublicKey, Utils } = require('@bsv/sdk')

const NOTES_TOPIC = 'tm_notes'
const NOTES_MARKER = 'notes-v1'
const NOTES_PROTOCOL = [1, 'overlay live notes']
const NOTES_KEY_ID = '1'
const NOTE_TEXT_MAX = 1000

/**
 * Decodes a locking script (hex, bytes, or any @bsv/sdk Script of either major version: only
 * its bytes are read, never its class) into a note, or returns null when it is not one.
 * @returns {{text: string, author: string, signature: number[], fieldsForSignature: number[]} | null}
 */
function decodeNote (script) {
  let decoded
  try {
    decoded = PushDrop.decode(LockingScript.fromHex(scriptToHex(script)))
  } catch (_) {
    return null
  }
  const { fields } = decoded
  if (fields.length !== 4) return null
  if (Utils.toUTF8(fields[0]) !== NOTES_MARKER) return null
  const textBytes = fields[1]
  if (textBytes.length < 1 || textBytes.length > NOTE_TEXT_MAX) return null
  if (fields[2].length !== 33) return null
  const author = Utils.toHex(fields[2])
  try {
    PublicKey.fromString(author)
  } catch (_) {
    return null
  }
  return {
    text: Utils.toUTF8(textBytes),
    author,
    signature: fields[3],
    fieldsForSignature: [...fields[0], ...fields[1], ...fields[2]]
  }
}

/** Hex of a script given as hex, bytes, or an object with toHex() (either SDK major version). */
function scriptToHex (script) {
  if (typeof script === 'string') return script
  if (script instanceof Uint8Array || Array.isArray(script)) return Buffer.from(script).toString('hex')
  if (script !== null && typeof script === 'object' && typeof script.toHex === 'function') return script.toHex()
  throw new TypeError('expected a script as hex, bytes or a Script object')
}

/** Note fields (before PushDrop appends the signature) for a text and author identity key. */
function noteFields (text, authorIdentityKey) {
  return [
    Utils.toArray(NOTES_MARKER, 'utf8'),
    Utils.toArray(text, 'utf8'),
    Utils.toArray(authorIdentityKey, 'hex')
  ]
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
