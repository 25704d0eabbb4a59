//! Key layout of the single sled tree. Every logical table is a one-byte prefix; service and
//! attribute names are NUL-terminated (NUL is rejected in names), so keys sort by name and a
//! name is never a prefix of another name's keys. Integers are big-endian so keys sort
//! numerically. Outpoints are txid (32) then output index (4, big-endian).
//!
//! | prefix | key                                            | value                       |
//! |--------|------------------------------------------------|-----------------------------|
//! | `m`    | meta name                                      | meta value                  |
//! | `l`    | seq                                            | encoded LogGroup            |
//! | `r`    | service 0 created outpoint                     | encoded RowVersion          |
//! | `c`    | service 0 outpoint                             | created of current version  |
//! | `i`    | service 0 attr 0 scalar created outpoint       | empty (index entry)         |
//! | `e`    | expiresAt service 0 outpoint                   | created                     |
//! | `h`    | sha256(BEEF)                                   | blob record (see below)     |
//! | `b`    | at sha256(BEEF)                                | BEEF bytes                  |
//! | `s`    | service 0                                      | first seq (ever had rows)   |
//! | `x`    | aux key (session layer)                        | aux value                   |
//!
//! A blob record is `count u64 | length u64 | at u64`: how many row versions and log records
//! name the BEEF, and where its bytes are. `at` is the sequence of the group that stored them
//! first; the bytes never move and are never rewritten while the count changes. Keying the
//! bytes by `at` first puts the evidence of rows admitted together side by side, in the
//! order a snapshot reads them (admission order), so a snapshot page reads a few neighbouring
//! leaves instead of one random leaf per row. Row versions and log records carry `at` next to
//! the hash ([`super::BlobRef`]), so reading evidence needs no blob record.
use crate::select::{encode_scalar, Scalar};

use super::Outpoint;

pub const META: u8 = b'm';
pub const LOG: u8 = b'l';
pub const ROW: u8 = b'r';
pub const CURRENT: u8 = b'c';
pub const INDEX: u8 = b'i';
pub const TIMER: u8 = b'e';
pub const BLOB_REF: u8 = b'h';
pub const BLOB: u8 = b'b';
pub const SERVICE: u8 = b's';
pub const AUX: u8 = b'x';

/// Row-version suffix inside a service: created (8) + outpoint (36). This is also the public
/// resume key of a snapshot row.
pub const VERSION_KEY_LEN: usize = 44;

pub fn meta(name: &str) -> Vec<u8> {
    let mut k = vec![META];
    k.extend_from_slice(name.as_bytes());
    k
}

pub fn log(seq: u64) -> [u8; 9] {
    let mut k = [LOG; 9];
    k[1..].copy_from_slice(&seq.to_be_bytes());
    k
}

pub fn service_prefix(table: u8, service: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(service.len() + 64);
    k.push(table);
    k.extend_from_slice(service.as_bytes());
    k.push(0);
    k
}

pub fn push_outpoint(k: &mut Vec<u8>, o: &Outpoint) {
    k.extend_from_slice(&o.txid);
    k.extend_from_slice(&o.output_index.to_be_bytes());
}

pub fn version_suffix(created: u64, o: &Outpoint) -> [u8; VERSION_KEY_LEN] {
    let mut k = [0u8; VERSION_KEY_LEN];
    k[..8].copy_from_slice(&created.to_be_bytes());
    k[8..40].copy_from_slice(&o.txid);
    k[40..].copy_from_slice(&o.output_index.to_be_bytes());
    k
}

pub fn parse_version_suffix(b: &[u8]) -> Option<(u64, Outpoint)> {
    if b.len() != VERSION_KEY_LEN {
        return None;
    }
    let created = u64::from_be_bytes(b[..8].try_into().ok()?);
    let txid = b[8..40].try_into().ok()?;
    let output_index = u32::from_be_bytes(b[40..].try_into().ok()?);
    Some((created, Outpoint { txid, output_index }))
}

pub fn row(service: &str, created: u64, o: &Outpoint) -> Vec<u8> {
    let mut k = service_prefix(ROW, service);
    k.extend_from_slice(&version_suffix(created, o));
    k
}

pub fn current(service: &str, o: &Outpoint) -> Vec<u8> {
    let mut k = service_prefix(CURRENT, service);
    push_outpoint(&mut k, o);
    k
}

pub fn index_attr_prefix(service: &str, attr: &str) -> Vec<u8> {
    let mut k = service_prefix(INDEX, service);
    k.extend_from_slice(attr.as_bytes());
    k.push(0);
    k
}

pub fn index(service: &str, attr: &str, v: &Scalar, created: u64, o: &Outpoint) -> Vec<u8> {
    let mut k = index_attr_prefix(service, attr);
    encode_scalar(v, &mut k);
    k.extend_from_slice(&version_suffix(created, o));
    k
}

pub fn timer(expires_at: u64, service: &str, o: &Outpoint) -> Vec<u8> {
    let mut k = Vec::with_capacity(service.len() + 46);
    k.push(TIMER);
    k.extend_from_slice(&expires_at.to_be_bytes());
    k.extend_from_slice(service.as_bytes());
    k.push(0);
    push_outpoint(&mut k, o);
    k
}

/// (expiresAt, service, outpoint) of a timer key.
pub fn parse_timer(k: &[u8]) -> Option<(u64, String, Outpoint)> {
    let rest = k.strip_prefix(&[TIMER])?;
    let at = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    let rest = &rest[8..];
    let nul = rest.iter().position(|&b| b == 0)?;
    let service = std::str::from_utf8(&rest[..nul]).ok()?.to_string();
    let op = &rest[nul + 1..];
    if op.len() != 36 {
        return None;
    }
    Some((
        at,
        service,
        Outpoint { txid: op[..32].try_into().ok()?, output_index: u32::from_be_bytes(op[32..].try_into().ok()?) },
    ))
}

pub fn blob_ref(h: &[u8; 32]) -> [u8; 33] {
    let mut k = [BLOB_REF; 33];
    k[1..].copy_from_slice(h);
    k
}

pub fn blob(b: &super::BlobRef) -> [u8; 41] {
    let mut k = [BLOB; 41];
    k[1..9].copy_from_slice(&b.at.to_be_bytes());
    k[9..].copy_from_slice(&b.hash);
    k
}

pub fn aux(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(AUX);
    k.extend_from_slice(key);
    k
}

/// Smallest key greater than every key starting with `p` (None if `p` is all 0xFF).
pub fn prefix_end(p: &[u8]) -> Option<Vec<u8>> {
    let mut e = p.to_vec();
    while let Some(last) = e.pop() {
        if last < 0xFF {
            e.push(last + 1);
            return Some(e);
        }
    }
    None
}
