'use strict'
// demo/notes/notesProtocol.js: the companion's decodeNote without the key checks reads the same
// notes as the full decode (real scripts from NoteFactory, including texts whose single byte
// PushDrop pushes as a small-number opcode), and still refuses what is not a note.
const { P2PKH, PrivateKey, LockingScript } = require('@bsv/sdk')
const { NoteFactory, LocalChainTracker } = require('./helpers/engine')
const { decodeNote } = require('../demo/notes/notesProtocol')

test('checkKeys: false decodes every note exactly like the full decode', async () => {
  const f = new NoteFactory(new LocalChainTracker())
  const texts = ['a', '\u0000', '\u0001', '\u0010', '\u0011', '\u0081', 'héllo wörld', 'x'.repeat(1000)]
  for (const text of texts) {
    const script = await f.noteScript(text)
    const full = decodeNote(script)
    // PushDrop.decode maps OP_1..OP_15 back to bytes but not OP_16: a note of text "\u0010" does
    // not decode (so the topic manager never admits it), and the lean decode agrees.
    if (text === '\u0010') expect(full).toBeNull()
    else expect(full.text).toBe(text)
    expect(decodeNote(script, { checkKeys: false })).toEqual(full)
    expect(decodeNote(script.toHex(), { checkKeys: false })).toEqual(full)
  }
})

test('checkKeys: false still refuses scripts that are not notes', async () => {
  const f = new NoteFactory(new LocalChainTracker())
  const note = await f.noteScript('a note')
  const notNotes = [
    new P2PKH().lock(PrivateKey.fromRandom().toAddress()),
    LockingScript.fromHex('6a0568656c6c6f'), // OP_RETURN data
    LockingScript.fromHex(''),
    // The note with its marker field changed.
    LockingScript.fromHex(note.toHex().replace(Buffer.from('notes-v1').toString('hex'), Buffer.from('notes-v2').toString('hex')))
  ]
  for (const script of notNotes) {
    expect(decodeNote(script)).toBeNull()
    expect(decodeNote(script, { checkKeys: false })).toBeNull()
  }
  // An author field that is not a curve point: only the full decode checks it (the topic
  // manager, which admits nothing it cannot verify).
  const { author } = decodeNote(note)
  const badAuthor = LockingScript.fromHex(note.toHex().replace(author, '05' + author.slice(2)))
  expect(decodeNote(badAuthor)).toBeNull()
  expect(decodeNote(badAuthor, { checkKeys: false }).author).toBe('05' + author.slice(2))
})
