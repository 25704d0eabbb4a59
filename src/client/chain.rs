//! Chain views and finality contexts (BRC-192 §8 ChainView, §10.3).
//!
//! A header chain is held as parsed 80-byte headers (hash derived from the bytes,
//! proof of work checked against its own `bits`). A view names a tip; its height
//! comes from walking the links to a header of known height, and its median time past
//! is the median timestamp of the tip and its ten predecessors (fewer near genesis).
//! A finality context without headers carries height and MTP as configured by the
//! caller. Either way the values come from the configured chain verifier, never from
//! a provider or a clock.

use serde::{Deserialize, Serialize};

use crate::bitcoin::tx::{Hash32, RawTx, SEQUENCE_FINAL};
use super::ClientError;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub hash: Hash32,
    pub prev: Hash32,
    #[serde(rename = "merkleRoot")]
    pub merkle_root: Hash32,
    pub time: u32,
    pub bits: u32,
}

/// Parses an 80-byte header and checks its proof of work against its own target.
pub fn parse_header(raw: &[u8]) -> Result<Header, ClientError> {
    if raw.len() != 80 {
        return Err(ClientError::invalid("a block header is exactly 80 bytes"));
    }
    let hash = Hash32::of_double_sha256(raw);
    let bits = u32::from_le_bytes(raw[72..76].try_into().unwrap());
    let target = target_of(bits).ok_or_else(|| ClientError::invalid("header bits are not a valid target"))?;
    if hash.0 > target {
        return Err(ClientError::invalid("header hash is above its target"));
    }
    Ok(Header {
        hash,
        prev: Hash32::from_wire(&raw[4..36]),
        merkle_root: Hash32::from_wire(&raw[36..68]),
        time: u32::from_le_bytes(raw[68..72].try_into().unwrap()),
        bits,
    })
}

/// The compact target as 32 big-endian bytes (display order compares with a hash).
fn target_of(bits: u32) -> Option<[u8; 32]> {
    let exp = (bits >> 24) as usize;
    let mantissa = bits & 0x007f_ffff;
    if bits & 0x0080_0000 != 0 || mantissa == 0 || exp > 32 {
        return None;
    }
    let mut t = [0u8; 32];
    let m = mantissa.to_be_bytes(); // [0, b1, b2, b3]
    for (i, byte) in m[1..].iter().enumerate() {
        // byte i of the mantissa sits at big-endian position 32 - exp + i
        let pos = (32 + i).checked_sub(exp)?;
        if pos < 32 {
            t[pos] = *byte;
        } else if *byte != 0 {
            return None;
        }
    }
    Some(t)
}

/// The finality parameters of one context: the selected tip height and its median
/// time past (§10.3: H = tipHeight + 1, M = MTP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finality {
    #[serde(rename = "tipHeight")]
    pub tip_height: u64,
    #[serde(rename = "medianTimePast")]
    pub mtp: u64,
}

const LOCKTIME_THRESHOLD: u32 = 500_000_000;

/// Exact finality of an unconfirmed transaction (§10.3, the pinned node's strict
/// boundary): locktime 0, or every sequence final, or locktime strictly below H
/// (height locks) or strictly below M (time locks). Equality is non-final.
pub fn is_final(tx: &RawTx, at: Finality) -> bool {
    if tx.locktime == 0 || tx.inputs.iter().all(|i| i.sequence == SEQUENCE_FINAL) {
        return true;
    }
    let lock = tx.locktime as u64;
    if tx.locktime < LOCKTIME_THRESHOLD {
        lock < at.tip_height.saturating_add(1)
    } else {
        lock < at.mtp
    }
}

/// Whether finality of `tx` can differ between contexts at all.
pub fn context_sensitive(tx: &RawTx) -> bool {
    !(tx.locktime == 0 || tx.inputs.iter().all(|i| i.sequence == SEQUENCE_FINAL))
}

/// The non-final replacement relation (§10.3): identical ordered input-outpoint
/// vectors, every new sequence at least the old one, at least one strictly greater.
/// Nothing else (sums, maxima, locktime) matters.
pub fn replaces(new: &RawTx, old: &RawTx) -> bool {
    if new.inputs.len() != old.inputs.len() {
        return false;
    }
    let mut greater = false;
    for (n, o) in new.inputs.iter().zip(&old.inputs) {
        if n.prev != o.prev || n.sequence < o.sequence {
            return false;
        }
        greater |= n.sequence > o.sequence;
    }
    greater
}

/// Median of the tip's and up to ten predecessors' timestamps.
pub fn median_time_past(times: &[u32]) -> u64 {
    let mut t: Vec<u32> = times.iter().copied().take(11).collect();
    if t.is_empty() {
        return 0;
    }
    t.sort_unstable();
    t[t.len() / 2] as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitcoin::tx::{Input, Outpoint};

    fn tx(lock: u32, seqs: &[u32]) -> RawTx {
        RawTx {
            txid: Hash32::default(),
            inputs: seqs
                .iter()
                .enumerate()
                .map(|(i, s)| Input { prev: Outpoint { txid: Hash32([1; 32]), vout: i as u32 }, sequence: *s })
                .collect(),
            outputs: 1,
            locktime: lock,
        }
    }

    #[test]
    fn strict_boundaries() {
        let at = |h, m| Finality { tip_height: h, mtp: m };
        assert!(!is_final(&tx(110, &[1]), at(109, 0)), "locktime equal to H is non-final");
        assert!(is_final(&tx(110, &[1]), at(110, 0)));
        assert!(!is_final(&tx(500_000_000, &[1]), at(1, 500_000_000)));
        assert!(is_final(&tx(500_000_000, &[1]), at(1, 500_000_001)));
        assert!(is_final(&tx(0, &[1]), at(0, 0)));
        assert!(is_final(&tx(999, &[SEQUENCE_FINAL, SEQUENCE_FINAL]), at(0, 0)));
        assert!(!is_final(&tx(999, &[SEQUENCE_FINAL, 7]), at(0, 0)));
    }

    #[test]
    fn replacement_is_componentwise() {
        assert!(replaces(&tx(1, &[2, 7]), &tx(1, &[1, 7])));
        assert!(!replaces(&tx(1, &[2, 7]), &tx(1, &[2, 7])), "equal");
        assert!(!replaces(&tx(1, &[3, 6]), &tx(1, &[2, 7])), "incomparable");
        assert!(!replaces(&tx(1, &[0, 100]), &tx(1, &[2, 7])), "larger maximum, one smaller");
        assert!(!replaces(&tx(1, &[3, 8, 1]), &tx(1, &[2, 7])), "extra input");
    }

    #[test]
    fn targets() {
        // 0x207fffff: the regtest-style easy target 7fffff00..00
        let t = target_of(0x207f_ffff).unwrap();
        assert_eq!(&t[..3], &[0x7f, 0xff, 0xff]);
        assert!(t[3..].iter().all(|b| *b == 0));
        assert!(target_of(0x1d00_ffff).is_some());
        assert!(target_of(0x0080_0000).is_none());
    }
}
