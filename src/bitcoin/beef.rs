//! BEEF bundles: V1 (BRC-62), V2 (BRC-96, which adds txid-only entries) and the Atomic
//! BEEF prefix around either (BRC-95), with the BUMP Merkle paths they carry (BRC-74).
//!
//! [`read`] walks a bundle once, borrowing every transaction from the input bytes, and
//! computes each txid from those bytes (the Atomic prefix and the BUMP leaves only
//! *name* transactions; nothing here believes a name). It checks structure only:
//! whether the proofs and scripts are valid is the verifier's question.
//!
//! Two strictness levels, for two callers:
//! - [`parse`] (the client, for evidence from a remote provider): the bundle must be the
//!   whole input, and an Atomic subject must be one of its raw transactions.
//! - [`read`] (the provider's hooks, for bundles the Engine itself wrote): bytes after
//!   the bundle are ignored, as `@bsv/sdk`'s `Beef.fromBinary` ignores them.

use std::collections::BTreeMap;

use crate::bitcoin::tx::{view_prefix, Hash32, Reader, TxView, Txid};
use super::Error;

const ATOMIC_PREFIX: [u8; 4] = [0x01, 0x01, 0x01, 0x01];
const V1_MAGIC: [u8; 4] = [0x01, 0x00, 0xbe, 0xef];
const V2_MAGIC: [u8; 4] = [0x02, 0x00, 0xbe, 0xef];
/// V2 transaction entry formats (BRC-96).
const RAW_TX: u8 = 0;
const RAW_TX_AND_BUMP: u8 = 1;
const TXID_ONLY: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// One BUMP: block height and, per tree level, offset -> hash (`None`: the duplicate
/// flag, i.e. the hash is its sibling's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bump {
    pub height: u64,
    pub levels: Vec<BTreeMap<u64, Option<[u8; 32]>>>,
}

/// A transaction entry of a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// The raw transaction, with the index of its BUMP when the bundle proves it.
    Raw { tx: TxView<'a>, bump: Option<usize> },
    /// V2 only: the bundle names the transaction but does not carry it (an unresolved
    /// dependency until its bytes are known from elsewhere).
    TxidOnly(Txid),
}

impl Entry<'_> {
    pub fn txid(&self) -> Txid {
        match self {
            Entry::Raw { tx, .. } => tx.txid,
            Entry::TxidOnly(t) => *t,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Beef<'a> {
    pub version: Version,
    /// The Atomic BEEF subject, if the bundle is atomic.
    pub subject: Option<Txid>,
    pub bumps: Vec<Bump>,
    pub entries: Vec<Entry<'a>>,
}

impl<'a> Beef<'a> {
    /// The entry naming `txid` (the last one, when a malformed bundle repeats it).
    pub fn find(&self, txid: &Txid) -> Option<&Entry<'a>> {
        self.entries.iter().rev().find(|e| e.txid() == *txid)
    }
    /// The raw transaction `txid` and its BUMP index, if the bundle carries its bytes.
    pub fn raw(&self, txid: &Txid) -> Option<(&TxView<'a>, Option<usize>)> {
        self.entries.iter().rev().find_map(|e| match e {
            Entry::Raw { tx, bump } if tx.txid == *txid => Some((tx, *bump)),
            _ => None,
        })
    }
}

/// Reads a bundle from the start of `bytes`; returns it and the number of bytes it
/// took. An Atomic subject must be among the raw transactions.
pub fn read(bytes: &[u8]) -> Result<(Beef<'_>, usize), Error> {
    let mut r = Reader::new(bytes);
    let mut subject = None;
    let mut magic = r.take(4)?;
    if magic == ATOMIC_PREFIX {
        subject = Some(Hash32::from_wire(r.take(32)?));
        magic = r.take(4)?;
    }
    let version = match <[u8; 4]>::try_from(magic).expect("4 bytes") {
        V1_MAGIC => Version::V1,
        V2_MAGIC => Version::V2,
        _ => return Err(Error::invalid(format!("not a BEEF V1 or V2 bundle (starts with {})", hex::encode(magic)))),
    };
    let mut bumps = Vec::new();
    for _ in 0..r.count(2)? {
        bumps.push(read_bump(&mut r)?);
    }
    let mut entries = Vec::new();
    for _ in 0..r.count(1)? {
        let entry = match version {
            Version::V1 => {
                let tx = view_prefix(r.rest())?;
                r.take(tx.raw.len())?;
                let bump = match r.take(1)?[0] {
                    0 => None,
                    1 => Some(r.varint()?),
                    f => return Err(Error::invalid(format!("BEEF BUMP flag {f} is neither 0 nor 1"))),
                };
                Entry::Raw { tx, bump: bump.map(|i| i as usize) }
            }
            Version::V2 => match r.take(1)?[0] {
                TXID_ONLY => Entry::TxidOnly(Hash32::from_wire(r.take(32)?)),
                format @ (RAW_TX | RAW_TX_AND_BUMP) => {
                    let bump = if format == RAW_TX_AND_BUMP { Some(r.varint()? as usize) } else { None };
                    let tx = view_prefix(r.rest())?;
                    r.take(tx.raw.len())?;
                    Entry::Raw { tx, bump }
                }
                f => return Err(Error::invalid(format!("BEEF V2 transaction format {f} is unknown"))),
            },
        };
        if let Entry::Raw { bump: Some(i), .. } = &entry {
            if *i >= bumps.len() {
                return Err(Error::invalid("a BEEF transaction names a BUMP the bundle does not have"));
            }
        }
        entries.push(entry);
    }
    let beef = Beef { version, subject, bumps, entries };
    if let Some(s) = subject {
        if beef.raw(&s).is_none() {
            return Err(Error::invalid(format!("the Atomic BEEF does not hold its subject transaction {s}")));
        }
    }
    Ok((beef, r.at))
}

/// Parses a whole bundle: bytes after it are invalid.
pub fn parse(bytes: &[u8]) -> Result<Beef<'_>, Error> {
    let (beef, used) = read(bytes)?;
    if used != bytes.len() {
        return Err(Error::invalid("trailing bytes after the BEEF"));
    }
    Ok(beef)
}

/// One BUMP on its own (BRC-74 binary), the whole input.
pub fn parse_bump(bytes: &[u8]) -> Result<Bump, Error> {
    let mut r = Reader::new(bytes);
    let bump = read_bump(&mut r)?;
    if r.at != bytes.len() {
        return Err(Error::invalid("trailing bytes after the BUMP"));
    }
    Ok(bump)
}

fn read_bump(r: &mut Reader<'_>) -> Result<Bump, Error> {
    let height = r.varint()?;
    let tree = r.take(1)?[0] as usize;
    let mut levels = Vec::with_capacity(tree);
    for _ in 0..tree {
        let mut level = BTreeMap::new();
        for _ in 0..r.count(2)? {
            let offset = r.varint()?;
            let flags = r.take(1)?[0];
            let hash = if flags & 1 == 1 { None } else { Some(<[u8; 32]>::try_from(r.take(32)?).expect("32 bytes")) };
            if level.insert(offset, hash).is_some() {
                return Err(Error::invalid("a BUMP level repeats an offset"));
            }
        }
        levels.push(level);
    }
    Ok(Bump { height, levels })
}

/// The Merkle root a BUMP computes for `txid`, in display order (as a block header's
/// root is shown and as a ChainTracker is asked), or `None` when the path does not
/// cover `txid` or lacks a sibling it needs. One implementation: [`super::merkle`].
pub fn merkle_root(bump: &Bump, txid: &Txid) -> Option<Hash32> {
    super::merkle::compute_root(bump, txid).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // A one-input, one-output transaction (the corpus's root P transaction).
    const ROOT: &str = "01000000010000000000000000000000000000000000000000000000000000000000000000ffffffff03020101ffffffff0140420f00000000001976a914dbc396ab52d44c8b901c3c8e4e15ea1daf04859788ac00000000";

    fn v2(entries: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut b = V2_MAGIC.to_vec();
        b.push(0); // no BUMPs
        b.push(entries.len() as u8);
        for (format, body) in entries {
            b.push(*format);
            b.extend_from_slice(body);
        }
        b
    }

    #[test]
    fn v2_txid_only_and_raw_entries() {
        let raw = hex::decode(ROOT).unwrap();
        let named = [7u8; 32];
        let bytes = v2(&[(TXID_ONLY, named.to_vec()), (RAW_TX, raw.clone())]);
        let beef = parse(&bytes).unwrap();
        assert_eq!(beef.version, Version::V2);
        assert_eq!(beef.entries[0], Entry::TxidOnly(Hash32::from_wire(&named)));
        let txid = Hash32::of_double_sha256(&raw);
        assert_eq!(beef.raw(&txid).map(|(t, b)| (t.raw, b)), Some((raw.as_slice(), None)));
        // A txid-only entry is found by name but carries no bytes.
        assert!(beef.raw(&Hash32::from_wire(&named)).is_none());
        assert!(beef.find(&Hash32::from_wire(&named)).is_some());
    }

    #[test]
    fn atomic_subject_must_be_carried_and_trailing_bytes_are_refused() {
        let raw = hex::decode(ROOT).unwrap();
        let txid = Hash32::of_double_sha256(&raw);
        let mut wire = txid.0;
        wire.reverse();
        let body = v2(&[(RAW_TX, raw.clone())]);
        let atomic = [ATOMIC_PREFIX.as_slice(), &wire, &body].concat();
        assert_eq!(parse(&atomic).unwrap().subject, Some(txid));
        let other = [ATOMIC_PREFIX.as_slice(), &[9u8; 32], &body].concat();
        assert!(parse(&other).unwrap_err().message().contains("subject"));
        let mut longer = atomic.clone();
        longer.push(0);
        assert!(parse(&longer).is_err());
        assert_eq!(read(&longer).unwrap().1, atomic.len());
        for cut in 0..atomic.len() {
            assert!(parse(&atomic[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn unknown_formats_and_missing_bumps_are_invalid() {
        let raw = hex::decode(ROOT).unwrap();
        assert!(parse(&v2(&[(3, raw.clone())])).is_err());
        let mut b = V2_MAGIC.to_vec();
        b.extend_from_slice(&[0, 1, RAW_TX_AND_BUMP, 0]);
        b.extend_from_slice(&raw);
        assert!(parse(&b).unwrap_err().message().contains("BUMP"));
    }
}
