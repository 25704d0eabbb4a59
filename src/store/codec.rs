//! Compact binary encoding of row versions and log groups. Hand-written (no extra crate) so that
//! a scan can read the fixed header of a row version (removed-at, hash) without decoding its
//! attributes. Every decoder is total: malformed bytes give `None`, which callers turn into a
//! `Corrupt` error, never a panic.
use crate::select::{AttrValue, Attributes};

use super::{BlobRef, Context, Outpoint, RemoveReason};

pub(crate) struct W(pub Vec<u8>);

impl W {
    pub fn new() -> Self {
        W(Vec::with_capacity(128))
    }
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub fn var(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.var(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    pub fn raw(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    pub fn blob(&mut self, b: &BlobRef) {
        self.raw(&b.hash);
        self.raw(&b.at.to_be_bytes());
    }
    pub fn outpoint(&mut self, o: &Outpoint) {
        self.raw(&o.txid);
        self.raw(&o.output_index.to_be_bytes());
    }
    pub fn context(&mut self, c: &Option<Context>) {
        match c {
            None => self.u8(0),
            Some(c) => {
                self.u8(1);
                self.bytes(c.schema.as_bytes());
                self.bytes(&c.bytes);
            }
        }
    }
    pub fn attrs(&mut self, a: &Attributes) {
        self.var(a.len() as u64);
        for (k, v) in a {
            self.bytes(k.as_bytes());
            self.value(v);
        }
    }
    fn value(&mut self, v: &AttrValue) {
        match v {
            AttrValue::Bool(b) => self.u8(*b as u8),
            AttrValue::Int(i) => {
                self.u8(2);
                self.var(((*i << 1) ^ (*i >> 63)) as u64);
            }
            AttrValue::Str(s) => {
                self.u8(3);
                self.bytes(s.as_bytes());
            }
            AttrValue::List(items) => {
                self.u8(4);
                self.var(items.len() as u64);
                for i in items {
                    self.value(i);
                }
            }
        }
    }
}

pub(crate) struct R<'a> {
    b: &'a [u8],
    pub pos: usize,
}

impl<'a> R<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        R { b, pos: 0 }
    }
    pub fn done(&self) -> bool {
        self.pos == self.b.len()
    }
    pub fn u8(&mut self) -> Option<u8> {
        let v = *self.b.get(self.pos)?;
        self.pos += 1;
        Some(v)
    }
    pub fn raw(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.raw(8)?.try_into().ok()?))
    }
    pub fn h32(&mut self) -> Option<[u8; 32]> {
        self.raw(32)?.try_into().ok()
    }
    pub fn blob(&mut self) -> Option<BlobRef> {
        Some(BlobRef { hash: self.h32()?, at: self.u64()? })
    }
    pub fn var(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= ((b & 0x7F) as u64) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.var()?).ok()?;
        self.raw(n)
    }
    pub fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
    pub fn outpoint(&mut self) -> Option<Outpoint> {
        let txid = self.h32()?;
        let output_index = u32::from_be_bytes(self.raw(4)?.try_into().ok()?);
        Some(Outpoint { txid, output_index })
    }
    pub fn context(&mut self) -> Option<Option<Context>> {
        match self.u8()? {
            0 => Some(None),
            1 => Some(Some(Context { schema: self.string()?, bytes: self.bytes()?.to_vec() })),
            _ => None,
        }
    }
    pub fn attrs(&mut self) -> Option<Attributes> {
        let n = self.var()?;
        let mut a = Attributes::new();
        for _ in 0..n {
            let k = self.string()?;
            let v = self.value(true)?;
            a.insert(k, v);
        }
        Some(a)
    }
    fn value(&mut self, list_ok: bool) -> Option<AttrValue> {
        Some(match self.u8()? {
            0 => AttrValue::Bool(false),
            1 => AttrValue::Bool(true),
            2 => {
                let z = self.var()?;
                AttrValue::Int(((z >> 1) as i64) ^ -((z & 1) as i64))
            }
            3 => AttrValue::Str(self.string()?),
            4 if list_ok => {
                let n = self.var()?;
                let mut items = Vec::new();
                for _ in 0..n {
                    items.push(self.value(false)?);
                }
                AttrValue::List(items)
            }
            _ => return None,
        })
    }
}

/// A stored row version. Layout: removed u64 (0 = present) | flags u8 | [expires u64] |
/// beef hash 32 | beef at u64 | topic | context | attributes. `removed` is first and fixed-size so removal
/// rewrites the same length and a visibility check reads 8 bytes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RowVersion {
    pub removed: u64,
    pub expires_at: Option<u64>,
    pub beef: BlobRef,
    pub topic: String,
    pub context: Option<Context>,
    pub attributes: Attributes,
}

impl RowVersion {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W::new();
        w.u64(self.removed);
        w.u8(self.expires_at.is_some() as u8);
        if let Some(e) = self.expires_at {
            w.u64(e);
        }
        w.blob(&self.beef);
        w.bytes(self.topic.as_bytes());
        w.context(&self.context);
        w.attrs(&self.attributes);
        w.0
    }
    pub fn decode(b: &[u8]) -> Option<RowVersion> {
        let mut r = R::new(b);
        let removed = r.u64()?;
        let expires_at = match r.u8()? {
            0 => None,
            1 => Some(r.u64()?),
            _ => return None,
        };
        let v = RowVersion {
            removed,
            expires_at,
            beef: r.blob()?,
            topic: r.string()?,
            context: r.context()?,
            attributes: r.attrs()?,
        };
        r.done().then_some(v)
    }
}

/// `removed` of an encoded row version without decoding the rest.
pub(crate) fn row_removed(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}

/// Overwrite `removed` in an encoded row version (same length).
pub(crate) fn set_row_removed(b: &mut [u8], seq: u64) {
    b[..8].copy_from_slice(&seq.to_be_bytes());
}

/// The version of a row before a change, as projection needs it (BRC-193 §3 membership
/// before the group): its admission sequence (to find and compact the row version), topic and
/// attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct OldVersion {
    pub created: u64,
    pub topic: String,
    pub attributes: Attributes,
}

/// The version of a row after a change.
#[derive(Clone, Debug, PartialEq)]
pub struct NewVersion {
    pub topic: String,
    pub attributes: Attributes,
    pub beef: BlobRef,
    pub context: Option<Context>,
    pub expires_at: Option<u64>,
}

/// One effective change inside a log group: everything projection needs, without rows.
#[derive(Clone, Debug, PartialEq)]
pub struct LogChange {
    pub service: String,
    pub outpoint: Outpoint,
    pub old: Option<OldVersion>,
    pub new: Option<NewVersion>,
    /// Why the row left (set when `new` is None).
    pub reason: Option<RemoveReason>,
    /// Spending txid and the spending transaction's BEEF (reason Spent only).
    pub spend: Option<(super::Txid, BlobRef)>,
    /// Whether topic, evidence (BEEF hash) or context differ between old and new.
    pub evidence_changed: bool,
}

/// A log-only record of a changed chain view (see `Change::Invalidate`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalidation {
    pub service: String,
    pub context_id: String,
    pub reason: String,
}

/// A committed log group: the ordered effective changes of one commit. Invalidations come
/// before every row change of the group (enforced by `commit::validate`).
#[derive(Clone, Debug, PartialEq)]
pub struct LogGroup {
    pub changes: Vec<LogChange>,
    pub invalidations: Vec<Invalidation>,
}

/// Tag of the optional trailer holding invalidations. Groups without invalidations encode
/// exactly as before the trailer existed, so older logs decode unchanged.
const INVALIDATIONS_TAG: u8 = 1;

fn reason_code(r: Option<RemoveReason>) -> u8 {
    match r {
        None => 0,
        Some(RemoveReason::Spent) => 1,
        Some(RemoveReason::Evicted) => 2,
        Some(RemoveReason::NotRetained) => 3,
        Some(RemoveReason::Expired) => 4,
    }
}

fn reason_from(c: u8) -> Option<Option<RemoveReason>> {
    Some(match c {
        0 => None,
        1 => Some(RemoveReason::Spent),
        2 => Some(RemoveReason::Evicted),
        3 => Some(RemoveReason::NotRetained),
        4 => Some(RemoveReason::Expired),
        _ => return None,
    })
}

impl LogGroup {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W::new();
        w.var(self.changes.len() as u64);
        for c in &self.changes {
            w.bytes(c.service.as_bytes());
            w.outpoint(&c.outpoint);
            let flags = (c.old.is_some() as u8)
                | (c.new.is_some() as u8) << 1
                | (c.spend.is_some() as u8) << 2
                | (c.evidence_changed as u8) << 3;
            w.u8(flags);
            w.u8(reason_code(c.reason));
            if let Some(o) = &c.old {
                w.u64(o.created);
                w.bytes(o.topic.as_bytes());
                w.attrs(&o.attributes);
            }
            if let Some(n) = &c.new {
                w.bytes(n.topic.as_bytes());
                w.attrs(&n.attributes);
                w.blob(&n.beef);
                w.context(&n.context);
                match n.expires_at {
                    None => w.u8(0),
                    Some(e) => {
                        w.u8(1);
                        w.u64(e);
                    }
                }
            }
            if let Some((txid, b)) = &c.spend {
                w.raw(txid);
                w.blob(b);
            }
        }
        if !self.invalidations.is_empty() {
            w.u8(INVALIDATIONS_TAG);
            w.var(self.invalidations.len() as u64);
            for i in &self.invalidations {
                w.bytes(i.service.as_bytes());
                w.bytes(i.context_id.as_bytes());
                w.bytes(i.reason.as_bytes());
            }
        }
        w.0
    }

    pub fn decode(b: &[u8]) -> Option<LogGroup> {
        let mut r = R::new(b);
        let n = r.var()?;
        let mut changes = Vec::new();
        for _ in 0..n {
            let service = r.string()?;
            let outpoint = r.outpoint()?;
            let flags = r.u8()?;
            let reason = reason_from(r.u8()?)?;
            let old = if flags & 1 != 0 {
                Some(OldVersion { created: r.u64()?, topic: r.string()?, attributes: r.attrs()? })
            } else {
                None
            };
            let new = if flags & 2 != 0 {
                Some(NewVersion {
                    topic: r.string()?,
                    attributes: r.attrs()?,
                    beef: r.blob()?,
                    context: r.context()?,
                    expires_at: match r.u8()? {
                        0 => None,
                        1 => Some(r.u64()?),
                        _ => return None,
                    },
                })
            } else {
                None
            };
            let spend = if flags & 4 != 0 { Some((r.h32()?, r.blob()?)) } else { None };
            changes.push(LogChange {
                service,
                outpoint,
                old,
                new,
                reason,
                spend,
                evidence_changed: flags & 8 != 0,
            });
        }
        let mut invalidations = Vec::new();
        if !r.done() {
            if r.u8()? != INVALIDATIONS_TAG {
                return None;
            }
            let n = r.var()?;
            if n == 0 {
                return None; // the trailer is only written when non-empty: one encoding per group
            }
            for _ in 0..n {
                invalidations.push(Invalidation { service: r.string()?, context_id: r.string()?, reason: r.string()? });
            }
        }
        r.done().then_some(LogGroup { changes, invalidations })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs() -> Attributes {
        let mut a = Attributes::new();
        a.insert("n".into(), AttrValue::Int(-42));
        a.insert("big".into(), AttrValue::Int(crate::select::MAX_SAFE_INT));
        a.insert("s".into(), AttrValue::Str("x\0y".into()));
        a.insert("l".into(), AttrValue::List(vec![AttrValue::Bool(true), AttrValue::Str("q".into())]));
        a
    }

    #[test]
    fn row_version_round_trip_and_removed_in_place() {
        let v = RowVersion {
            removed: 0,
            expires_at: Some(99),
            beef: BlobRef { hash: [7; 32], at: 3 },
            topic: "tm".into(),
            context: Some(Context { schema: "urn:x".into(), bytes: vec![1, 2] }),
            attributes: attrs(),
        };
        let mut e = v.encode();
        assert_eq!(RowVersion::decode(&e), Some(v.clone()));
        set_row_removed(&mut e, 5);
        assert_eq!(row_removed(&e), Some(5));
        assert_eq!(RowVersion::decode(&e).unwrap().removed, 5);
        for cut in 0..e.len() {
            assert!(RowVersion::decode(&e[..cut]).is_none());
        }
    }

    #[test]
    fn log_group_round_trip() {
        let g = LogGroup {
            changes: vec![LogChange {
                service: "ls".into(),
                outpoint: Outpoint { txid: [1; 32], output_index: 3 },
                old: Some(OldVersion { created: 4, topic: "t".into(), attributes: attrs() }),
                new: Some(NewVersion {
                    topic: "t".into(),
                    attributes: Attributes::new(),
                    beef: BlobRef { hash: [2; 32], at: 1 },
                    context: None,
                    expires_at: Some(0),
                }),
                reason: Some(RemoveReason::Spent),
                spend: Some(([3; 32], BlobRef { hash: [4; 32], at: 2 })),
                evidence_changed: true,
            }],
            invalidations: vec![],
        };
        let e = g.encode();
        assert_eq!(LogGroup::decode(&e), Some(g.clone()));
        assert!(LogGroup::decode(&e[..e.len() - 1]).is_none());
        // A trailer of invalidations extends the encoding without changing its prefix.
        let mut with = g;
        with.invalidations = vec![Invalidation { service: "ls".into(), context_id: "chain-view/1".into(), reason: "reorg".into() }];
        let e2 = with.encode();
        assert_eq!(&e2[..e.len()], &e[..]);
        assert_eq!(LogGroup::decode(&e2), Some(with));
        for cut in e.len() + 1..e2.len() {
            assert!(LogGroup::decode(&e2[..cut]).is_none());
        }
        let mut bad = e.clone();
        bad.push(7);
        assert!(LogGroup::decode(&bad).is_none(), "unknown trailer tag");
        let mut empty = e;
        empty.extend_from_slice(&[INVALIDATIONS_TAG, 0]);
        assert!(LogGroup::decode(&empty).is_none(), "empty trailer is not canonical");
    }

    #[test]
    fn invalidation_only_group_round_trips() {
        let g = LogGroup {
            changes: vec![],
            invalidations: vec![
                Invalidation { service: "a".into(), context_id: "chain-view/0".into(), reason: "r".into() },
                Invalidation { service: "b".into(), context_id: "chain-view/0".into(), reason: "r".into() },
            ],
        };
        assert_eq!(LogGroup::decode(&g.encode()), Some(g));
    }
}
