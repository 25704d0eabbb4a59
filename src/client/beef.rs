//! Structural parsing of BEEF V1 (BRC-62) and Atomic BEEF (BRC-95) bundles: the
//! transactions they carry, each with its txid derived from its bytes, and their
//! BUMPs (BRC-74). This is what the journal needs to index a receipt; checking the
//! proofs and Scripts is the verifier's job (the next step of the client).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::tx::{parse_prefix, Hash32, Reader, Txid};
use super::ClientError;

/// One BUMP: block height and, per tree level, offset -> hash (`None`: duplicate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bump {
    pub height: u64,
    pub levels: Vec<BTreeMap<u64, Option<[u8; 32]>>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeefTx {
    pub txid: Txid,
    pub raw: Vec<u8>,
    pub bump: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Beef {
    /// The Atomic BEEF subject, if the bundle is atomic.
    pub subject: Option<Txid>,
    pub bumps: Vec<Bump>,
    pub txs: Vec<BeefTx>,
}

impl Beef {
    pub fn find(&self, txid: &Txid) -> Option<&BeefTx> {
        self.txs.iter().find(|t| t.txid == *txid)
    }
}

fn sha256d(a: &[u8]) -> [u8; 32] {
    Sha256::digest(Sha256::digest(a)).into()
}

/// Parses a whole bundle; trailing bytes are invalid.
pub fn parse_beef(bytes: &[u8]) -> Result<Beef, ClientError> {
    let mut r = Reader::new(bytes);
    let mut subject = None;
    if bytes.starts_with(&[1, 1, 1, 1]) {
        r.take(4)?;
        subject = Some(Hash32::from_wire(r.take(32)?));
    }
    if r.take(4)? != [0x01, 0x00, 0xbe, 0xef] {
        return Err(ClientError::invalid("not a BEEF V1 bundle"));
    }
    let mut bumps = Vec::new();
    for _ in 0..r.count(2)? {
        let height = r.varint()?;
        let tree = r.take(1)?[0] as usize;
        let mut levels = Vec::with_capacity(tree);
        for _ in 0..tree {
            let mut level = BTreeMap::new();
            for _ in 0..r.count(2)? {
                let offset = r.varint()?;
                let flags = r.take(1)?[0];
                let hash = if flags & 1 == 1 { None } else { Some(<[u8; 32]>::try_from(r.take(32)?).unwrap()) };
                level.insert(offset, hash);
            }
            levels.push(level);
        }
        bumps.push(Bump { height, levels });
    }
    let mut txs = Vec::new();
    for _ in 0..r.count(10)? {
        let (tx, len) = parse_prefix(r.rest())?;
        let raw = r.take(len)?.to_vec();
        let bump = match r.take(1)?[0] {
            0 => None,
            1 => {
                let i = r.varint()? as usize;
                if i >= bumps.len() {
                    return Err(ClientError::invalid("BEEF transaction names a missing BUMP"));
                }
                Some(i)
            }
            _ => return Err(ClientError::invalid("BEEF BUMP flag is neither 0 nor 1")),
        };
        txs.push(BeefTx { txid: tx.txid, raw, bump });
    }
    if !r.rest().is_empty() {
        return Err(ClientError::invalid("trailing bytes after the BEEF"));
    }
    if let Some(s) = subject {
        if !txs.iter().any(|t| t.txid == s) {
            return Err(ClientError::invalid("Atomic BEEF subject is not in the bundle"));
        }
    }
    Ok(Beef { subject, bumps, txs })
}

/// The Merkle root (wire byte order) a BUMP computes for `txid`, or `None` when the
/// path does not cover it.
pub fn merkle_root(bump: &Bump, txid: &Txid) -> Option<[u8; 32]> {
    let mut wire = txid.0;
    wire.reverse();
    let mut offset = *bump.levels.first()?.iter().find(|(_, h)| **h == Some(wire))?.0;
    let mut h = wire;
    for (depth, level) in bump.levels.iter().enumerate() {
        let sib = match level.get(&(offset ^ 1)) {
            Some(Some(x)) => *x,
            Some(None) => h,
            // A block of one transaction: its root is the txid itself.
            None if depth + 1 == bump.levels.len() && offset == 0 && level.len() == 1 => break,
            None => return None,
        };
        h = if offset & 1 == 0 { sha256d(&[h, sib].concat()) } else { sha256d(&[sib, h].concat()) };
        offset >>= 1;
    }
    Some(h)
}
