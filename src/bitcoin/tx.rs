//! Raw Bitcoin transactions as the reconciler needs them (BRC-192 §10.1, §10.3): the
//! txid derived from the exact bytes, the ordered input vector (outpoints and
//! sequences), the output count and the locktime. Nothing here trusts a name or a
//! claimed txid: the txid is double SHA-256 of the bytes, shown reversed.
//!
//! Parsing is complete and bounded: every byte is consumed, counts are checked against
//! the remaining length before anything is allocated, and repeated input outpoints are
//! rejected (a valid transaction cannot spend one outpoint twice, §10.5).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use super::Error;

/// Largest raw transaction accepted (the BRC-192 §9 message bound).
pub const MAX_RAW_BYTES: usize = 4 * 1024 * 1024;

/// A txid or block hash in display order (the reversed double SHA-256), so that byte
/// order is the lexicographic order of its lowercase hex (§10.2 tie-break).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hash32(pub [u8; 32]);

impl Hash32 {
    pub fn from_hex(s: &str) -> Result<Hash32, Error> {
        // One pass, checking and decoding together: every stored record holds hashes as
        // hex, so this runs for each one a reconciliation step loads.
        fn nibble(c: u8) -> Option<u8> {
            match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            }
        }
        let s = s.as_bytes();
        let bad = || Error::invalid("a hash is 64 lowercase hex digits");
        if s.len() != 64 {
            return Err(bad());
        }
        let mut b = [0u8; 32];
        for (out, pair) in b.iter_mut().zip(s.chunks_exact(2)) {
            *out = (nibble(pair[0]).ok_or_else(bad)? << 4) | nibble(pair[1]).ok_or_else(bad)?;
        }
        Ok(Hash32(b))
    }
    /// From 32 bytes already in display order (as stored in keys).
    pub fn from_key_bytes(b: &[u8]) -> Hash32 {
        let mut d = [0u8; 32];
        d.copy_from_slice(b);
        Hash32(d)
    }
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
    /// The display form of a double SHA-256 digest.
    pub fn of_double_sha256(bytes: &[u8]) -> Hash32 {
        let mut d: [u8; 32] = Sha256::digest(Sha256::digest(bytes)).into();
        d.reverse();
        Hash32(d)
    }
    /// From the internal (little-endian, on-the-wire) byte order.
    pub fn from_wire(b: &[u8]) -> Hash32 {
        let mut d = [0u8; 32];
        d.copy_from_slice(b);
        d.reverse();
        Hash32(d)
    }
}

impl fmt::Debug for Hash32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", &self.to_hex()[..12])
    }
}

impl fmt::Display for Hash32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Display-order hex in human-readable formats (JSON), the 32 bytes in binary ones (the
/// client store's record codec). Either is read.
impl Serialize for Hash32 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_hex())
        } else {
            s.serialize_bytes(&self.0)
        }
    }
}

struct Hash32Visitor;

impl<'de> serde::de::Visitor<'de> for Hash32Visitor {
    type Value = Hash32;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("32 bytes or 64 hex digits")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Hash32, E> {
        Hash32::from_hex(v).map_err(E::custom)
    }
    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Hash32, E> {
        let b: [u8; 32] = v.try_into().map_err(|_| E::invalid_length(v.len(), &self))?;
        Ok(Hash32(b))
    }
}

impl<'de> Deserialize<'de> for Hash32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hash32, D::Error> {
        if d.is_human_readable() {
            d.deserialize_str(Hash32Visitor)
        } else {
            d.deserialize_any(Hash32Visitor)
        }
    }
}

pub type Txid = Hash32;

/// An outpoint in the configured chain (the chain is fixed per reconciler).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct Outpoint {
    pub txid: Txid,
    #[serde(rename = "outputIndex")]
    pub vout: u32,
}

impl Outpoint {
    /// 36 key bytes: txid then index big-endian, so keys sort by outpoint.
    pub fn key(&self) -> [u8; 36] {
        let mut k = [0u8; 36];
        k[..32].copy_from_slice(&self.txid.0);
        k[32..].copy_from_slice(&self.vout.to_be_bytes());
        k
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Input {
    pub prev: Outpoint,
    pub sequence: u32,
}

pub const SEQUENCE_FINAL: u32 = 0xffff_ffff;

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RawTx {
    pub txid: Txid,
    pub inputs: Vec<Input>,
    pub outputs: u32,
    pub locktime: u32,
}

impl RawTx {
    pub fn is_coinbase(&self) -> bool {
        self.inputs.len() == 1 && self.inputs[0].prev.txid == Hash32::default() && self.inputs[0].prev.vout == u32::MAX
    }
}

/// A bounded little-endian reader over bytes.
pub struct Reader<'a> {
    b: &'a [u8],
    pub at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Reader { b, at: 0 }
    }
    /// The whole input.
    pub fn bytes(&self) -> &'a [u8] {
        self.b
    }
    pub fn rest(&self) -> &'a [u8] {
        &self.b[self.at..]
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len()).ok_or_else(|| truncated())?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    pub fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    pub fn varint(&mut self) -> Result<u64, Error> {
        let first = self.take(1)?[0];
        Ok(match first {
            0xfd => u16::from_le_bytes(self.take(2)?.try_into().unwrap()) as u64,
            0xfe => u32::from_le_bytes(self.take(4)?.try_into().unwrap()) as u64,
            0xff => u64::from_le_bytes(self.take(8)?.try_into().unwrap()),
            n => n as u64,
        })
    }
    /// A count of items at least `min_bytes` each: bounded by what is left to read.
    pub fn count(&mut self, min_bytes: usize) -> Result<usize, Error> {
        let n = self.varint()?;
        let left = (self.b.len() - self.at) as u64;
        if n.saturating_mul(min_bytes as u64) > left {
            return Err(truncated());
        }
        Ok(n as usize)
    }
}

fn truncated() -> Error {
    Error::invalid("truncated: the bytes end before the structure does")
}

/// Parses one complete raw transaction.
pub fn parse_tx(raw: &[u8]) -> Result<RawTx, Error> {
    if raw.len() > MAX_RAW_BYTES {
        return Err(Error::Limited("raw transaction exceeds 4 MiB".into()));
    }
    let (tx, len) = parse_prefix(raw)?;
    if len != raw.len() {
        return Err(Error::invalid("trailing bytes after the raw transaction"));
    }
    Ok(tx)
}

/// One input as it stands in the bytes (script borrowed from them).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct InputView<'a> {
    pub prev: Outpoint,
    pub script: &'a [u8],
    pub sequence: u32,
}

/// One output as it stands in the bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OutputView<'a> {
    pub satoshis: u64,
    pub script: &'a [u8],
}

/// A whole raw transaction, scripts borrowed from its bytes: what a script check or a
/// lookup-service hook reads.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TxView<'a> {
    pub txid: Txid,
    pub version: u32,
    pub inputs: Vec<InputView<'a>>,
    pub outputs: Vec<OutputView<'a>>,
    pub locktime: u32,
    /// The transaction's own bytes.
    pub raw: &'a [u8],
}

impl TxView<'_> {
    /// The summary the reconciler keeps.
    pub fn summary(&self) -> RawTx {
        RawTx {
            txid: self.txid,
            inputs: self.inputs.iter().map(|i| Input { prev: i.prev, sequence: i.sequence }).collect(),
            outputs: self.outputs.len() as u32,
            locktime: self.locktime,
        }
    }
}

/// Parses the raw transaction at the start of `bytes` (as inside a BEEF); returns it
/// and its length.
pub fn parse_prefix(raw: &[u8]) -> Result<(RawTx, usize), Error> {
    let view = view_prefix(raw)?;
    let len = view.raw.len();
    Ok((view.summary(), len))
}

/// The whole transaction at the start of `bytes`, scripts borrowed.
pub fn view_prefix(raw: &[u8]) -> Result<TxView<'_>, Error> {
    let mut r = Reader { b: raw, at: 0 };
    let version = r.u32()?;
    let n_in = r.count(41)?;
    if n_in == 0 {
        return Err(Error::invalid("transaction has no inputs"));
    }
    let mut inputs = Vec::with_capacity(n_in);
    for _ in 0..n_in {
        let txid = Hash32::from_wire(r.take(32)?);
        let vout = r.u32()?;
        let len = r.count(1)?;
        let script = r.take(len)?;
        let sequence = r.u32()?;
        inputs.push(InputView { prev: Outpoint { txid, vout }, script, sequence });
    }
    let n_out = r.count(9)?;
    if n_out == 0 {
        return Err(Error::invalid("transaction has no outputs"));
    }
    let mut outputs = Vec::with_capacity(n_out);
    for _ in 0..n_out {
        let satoshis = u64::from_le_bytes(r.take(8)?.try_into().unwrap());
        let len = r.count(1)?;
        outputs.push(OutputView { satoshis, script: r.take(len)? });
    }
    let locktime = r.u32()?;
    let bytes = &raw[..r.at];
    let mut seen: Vec<Outpoint> = inputs.iter().map(|i| i.prev).collect();
    seen.sort();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::invalid("transaction spends one outpoint twice"));
    }
    Ok(TxView { txid: Hash32::of_double_sha256(bytes), version, inputs, outputs, locktime, raw: bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The corpus's P transaction: one input (root:0), eight outputs.
    const ROOT: &str = "01000000010000000000000000000000000000000000000000000000000000000000000000ffffffff03020101ffffffff0140420f00000000001976a914dbc396ab52d44c8b901c3c8e4e15ea1daf04859788ac00000000";

    #[test]
    fn from_hex_takes_exactly_64_lowercase_hex_digits() {
        let h = "f960d4b8db0fb91eea28e5d6f90c834d3896054b47f44d925b5f10ed3a2d9e3d";
        assert_eq!(Hash32::from_hex(h).unwrap().to_hex(), h);
        assert_eq!(Hash32::from_hex(&"0".repeat(64)).unwrap(), Hash32([0; 32]));
        assert_eq!(Hash32::from_hex(&"f".repeat(64)).unwrap(), Hash32([0xff; 32]));
        for bad in [&h[..63], &format!("{h}0"), &h.to_uppercase(), &format!("g{}", &h[1..]), &format!("{} ", &h[..63]), "", &"é".repeat(32)] {
            assert!(Hash32::from_hex(bad).is_err(), "{bad:?} is not a hash");
        }
    }

    #[test]
    fn txid_is_the_reversed_double_sha256() {
        let raw = hex::decode(ROOT).unwrap();
        let t = parse_tx(&raw).unwrap();
        assert_eq!(t.txid.to_hex(), "f960d4b8db0fb91eea28e5d6f90c834d3896054b47f44d925b5f10ed3a2d9e3d");
        assert!(t.is_coinbase());
        assert_eq!((t.outputs, t.locktime), (1, 0));
    }

    #[test]
    fn truncation_trailing_bytes_and_huge_counts_are_invalid() {
        let raw = hex::decode(ROOT).unwrap();
        for cut in [0, 3, 5, 40, raw.len() - 1] {
            assert!(parse_tx(&raw[..cut]).is_err(), "cut at {cut}");
        }
        let mut more = raw.clone();
        more.push(0);
        assert!(parse_tx(&more).is_err());
        // An input count of 2^32 with four bytes behind it is refused before allocating.
        let mut huge = raw[..4].to_vec();
        huge.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert!(parse_tx(&huge).is_err());
    }
}

/// Appends a Bitcoin CompactSize integer (the shortest form, as serializers write it).
pub(crate) fn write_varint(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xfc => out.push(n as u8),
        0xfd..=0xffff => {
            out.push(0xfd);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x10000..=0xffff_ffff => {
            out.push(0xfe);
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
        _ => {
            out.push(0xff);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}
