//! Signature digests, as the SDK's `TransactionSignature.formatBytes` writes them:
//! - with SIGHASH_FORKID (0x40) and without the Chronicle bit (0x20): the BIP143-style
//!   digest BSV signs today (hashPrevouts, hashSequence, the spent output's script code
//!   and amount, hashOutputs);
//! - otherwise the original digest (a copy of the transaction with the other inputs'
//!   scripts emptied, OP_CODESEPARATOR removed from the script code), including its
//!   SIGHASH_SINGLE quirk: an input without a matching output signs the number one.

use sha2::{Digest, Sha256};

use crate::bitcoin::tx::{write_varint, TxView};

pub const ALL: u8 = 0x01;
pub const NONE: u8 = 0x02;
pub const SINGLE: u8 = 0x03;
pub const CHRONICLE: u8 = 0x20;
pub const FORKID: u8 = 0x40;
pub const ANYONECANPAY: u8 = 0x80;

fn sha256d(b: &[u8]) -> [u8; 32] {
    Sha256::digest(Sha256::digest(b)).into()
}


fn wire(txid: &crate::bitcoin::tx::Hash32) -> [u8; 32] {
    let mut w = txid.0;
    w.reverse();
    w
}

/// The parts of the BIP143 digest shared by every input of a transaction.
#[derive(Default)]
pub struct Cache {
    prevouts: Option<[u8; 32]>,
    sequence: Option<[u8; 32]>,
    outputs: Option<[u8; 32]>,
}

/// What the digest of one input signs.
pub struct Signing<'a, 'b> {
    pub tx: &'b TxView<'a>,
    pub input: usize,
    /// Amount of the output this input spends.
    pub satoshis: u64,
    /// The script code (the executing script after the last OP_CODESEPARATOR, with the
    /// signatures removed), already serialized.
    pub subscript: &'b [u8],
    pub scope: u8,
}

/// Whether this scope uses the original digest.
pub fn uses_original(scope: u8) -> bool {
    scope & FORKID == 0 || scope & CHRONICLE != 0
}

/// The 32-byte message an ECDSA signature with `scope` signs (big-endian as the
/// verifier reads it).
pub fn digest(s: &Signing<'_, '_>, cache: &mut Cache) -> [u8; 32] {
    let base = s.scope & 0x1f;
    if uses_original(s.scope) {
        if base == SINGLE && s.input >= s.tx.outputs.len() {
            let mut one = [0u8; 32];
            one[0] = 1;
            return one;
        }
        return sha256d(&original(s));
    }
    sha256d(&bip143(s, cache))
}

/// The BIP143-style preimage.
pub fn bip143(s: &Signing<'_, '_>, cache: &mut Cache) -> Vec<u8> {
    let tx = s.tx;
    let base = s.scope & 0x1f;
    let acp = s.scope & ANYONECANPAY != 0;
    let mut prevouts = [0u8; 32];
    let mut sequence = [0u8; 32];
    let mut outputs = [0u8; 32];
    if !acp {
        prevouts = *cache.prevouts.get_or_insert_with(|| {
            let mut b = Vec::with_capacity(tx.inputs.len() * 36);
            for i in &tx.inputs {
                b.extend_from_slice(&wire(&i.prev.txid));
                b.extend_from_slice(&i.prev.vout.to_le_bytes());
            }
            sha256d(&b)
        });
    }
    if !acp && base != SINGLE && base != NONE {
        sequence = *cache.sequence.get_or_insert_with(|| {
            let mut b = Vec::with_capacity(tx.inputs.len() * 4);
            for i in &tx.inputs {
                b.extend_from_slice(&i.sequence.to_le_bytes());
            }
            sha256d(&b)
        });
    }
    let write_output = |b: &mut Vec<u8>, o: &crate::bitcoin::tx::OutputView<'_>| {
        b.extend_from_slice(&o.satoshis.to_le_bytes());
        write_varint(b, o.script.len() as u64);
        b.extend_from_slice(o.script);
    };
    if base != SINGLE && base != NONE {
        outputs = *cache.outputs.get_or_insert_with(|| {
            let mut b = Vec::new();
            for o in &tx.outputs {
                write_output(&mut b, o);
            }
            sha256d(&b)
        });
    } else if base == SINGLE && s.input < tx.outputs.len() {
        let mut b = Vec::new();
        write_output(&mut b, &tx.outputs[s.input]);
        outputs = sha256d(&b);
    }
    let me = &tx.inputs[s.input];
    let mut w = Vec::with_capacity(160 + s.subscript.len());
    w.extend_from_slice(&tx.version.to_le_bytes());
    w.extend_from_slice(&prevouts);
    w.extend_from_slice(&sequence);
    w.extend_from_slice(&wire(&me.prev.txid));
    w.extend_from_slice(&me.prev.vout.to_le_bytes());
    write_varint(&mut w, s.subscript.len() as u64);
    w.extend_from_slice(s.subscript);
    w.extend_from_slice(&s.satoshis.to_le_bytes());
    w.extend_from_slice(&me.sequence.to_le_bytes());
    w.extend_from_slice(&outputs);
    w.extend_from_slice(&tx.locktime.to_le_bytes());
    w.extend_from_slice(&(s.scope as u32).to_le_bytes());
    w
}

/// The original preimage (the SDK's `formatOTDA`).
pub fn original(s: &Signing<'_, '_>) -> Vec<u8> {
    let tx = s.tx;
    let base = s.scope & 0x1f;
    let acp = s.scope & ANYONECANPAY != 0;
    let single = base == SINGLE;
    let none = base == NONE;
    let code = super::remove_codeseparators(s.subscript);
    let mut w = Vec::with_capacity(tx.raw.len() + code.len());
    w.extend_from_slice(&tx.version.to_le_bytes());
    let me = &tx.inputs[s.input];
    let write_me = |w: &mut Vec<u8>| {
        w.extend_from_slice(&wire(&me.prev.txid));
        w.extend_from_slice(&me.prev.vout.to_le_bytes());
        write_varint(w, code.len() as u64);
        w.extend_from_slice(&code);
        w.extend_from_slice(&me.sequence.to_le_bytes());
    };
    if acp {
        write_varint(&mut w, 1);
        write_me(&mut w);
    } else {
        write_varint(&mut w, tx.inputs.len() as u64);
        for (k, i) in tx.inputs.iter().enumerate() {
            if k == s.input {
                write_me(&mut w);
                continue;
            }
            w.extend_from_slice(&wire(&i.prev.txid));
            w.extend_from_slice(&i.prev.vout.to_le_bytes());
            w.push(0);
            let seq = if single || none { 0 } else { i.sequence };
            w.extend_from_slice(&seq.to_le_bytes());
        }
    }
    if single {
        let n = s.input + usize::from(s.input < tx.outputs.len());
        write_varint(&mut w, n as u64);
        for _ in 0..s.input {
            w.extend_from_slice(&[0xff; 8]);
            w.push(0);
        }
        if let Some(o) = tx.outputs.get(s.input) {
            w.extend_from_slice(&o.satoshis.to_le_bytes());
            write_varint(&mut w, o.script.len() as u64);
            w.extend_from_slice(o.script);
        }
    } else if none {
        write_varint(&mut w, 0);
    } else {
        write_varint(&mut w, tx.outputs.len() as u64);
        for o in &tx.outputs {
            w.extend_from_slice(&o.satoshis.to_le_bytes());
            write_varint(&mut w, o.script.len() as u64);
            w.extend_from_slice(o.script);
        }
    }
    w.extend_from_slice(&tx.locktime.to_le_bytes());
    w.extend_from_slice(&(s.scope as u32).to_le_bytes());
    w
}
