// Builds the demo's real transactions, in the browser (window.bsv, the @bsv/sdk UMD bundle) and
// in Node (demo/publish.js passes require('@bsv/sdk')). `info` is the host's GET /demo/info: the
// note format constants come from the host so they exist once (demo/notes/notesProtocol.js).
// One key plays every role of a demo principal: BRC-103 identity, note author, funding owner.
/* global define */
(function (root, factory) {
  if (typeof module === 'object' && module.exports) module.exports = factory
  else root.createNotesTx = factory
})(typeof self !== 'undefined' ? self : this, function createNotesTx (bsv, info) {
  'use strict'
  const SEQUENCE_FINAL = 0xffffffff
  const NOTE_SATOSHIS = 1000
  const { Transaction, PushDrop, ProtoWallet, P2PKH, Utils } = bsv

  function hexToBytes (hex) { return Utils.toArray(hex, 'hex') }

  /**
   * A note transaction: spends the faucet's funding output (P2PKH to key) and creates one note,
   * addressed to the identity key `to` when given (then only its author and that recipient see
   * it in the live catalogue). The rest of the funding is left as fee: nothing is broadcast,
   * the Engine only checks SPV.
   */
  async function buildPublish (key, funding, text, to) {
    if (typeof text !== 'string' || text.length === 0) throw new Error('a note needs some text')
    if (Utils.toArray(text, 'utf8').length > info.maxTextBytes) throw new Error(`a note holds at most ${info.maxTextBytes} bytes`)
    if (to !== undefined && to !== null && to !== '' && !/^0[23][0-9a-f]{64}$/.test(to)) throw new Error('the recipient must be an identity key (66 hex digits)')
    const wallet = new ProtoWallet(key)
    const { publicKey } = await wallet.getPublicKey({ identityKey: true })
    const fields = [Utils.toArray(info.marker, 'utf8'), Utils.toArray(text, 'utf8'), hexToBytes(publicKey)]
    if (to) fields.push(hexToBytes(to))
    // forSelf: locked to the author's own child key toward "anyone", whose signature anyone can check.
    const lockingScript = await new PushDrop(wallet).lock(fields, info.protocolID, info.keyID, 'anyone', true)
    const fundingTx = Transaction.fromBEEF(hexToBytes(funding.beef), funding.txid)
    const tx = new Transaction()
    tx.addInput({
      sourceTransaction: fundingTx,
      sourceOutputIndex: funding.outputIndex,
      unlockingScriptTemplate: new P2PKH().unlock(key),
      sequence: SEQUENCE_FINAL
    })
    tx.addOutput({ lockingScript, satoshis: NOTE_SATOSHIS })
    await tx.sign()
    return { txid: tx.id('hex'), beef: tx.toBEEF() }
  }

  /**
   * Spends one of key's own notes (withdrawing it from the overlay), paying its value back to key.
   * `noteBeef` is a BEEF holding the note's transaction (the live evidence, or a lookup answer).
   */
  async function buildWithdraw (key, noteBeef, txid, outputIndex) {
    const wallet = new ProtoWallet(key)
    const noteTx = Transaction.fromBEEF(noteBeef, txid)
    const out = noteTx.outputs[outputIndex]
    if (!out) throw new Error('the BEEF has no such output')
    const tx = new Transaction()
    tx.addInput({
      sourceTransaction: noteTx,
      sourceOutputIndex: outputIndex,
      unlockingScriptTemplate: new PushDrop(wallet).unlock(info.protocolID, info.keyID, 'anyone', 'all', false, out.satoshis, out.lockingScript),
      sequence: SEQUENCE_FINAL
    })
    tx.addOutput({ lockingScript: new P2PKH().lock(key.toAddress()), satoshis: Math.floor(out.satoshis / 2) })
    await tx.sign()
    return { txid: tx.id('hex'), beef: tx.toBEEF() }
  }

  return { buildPublish, buildWithdraw }
})
