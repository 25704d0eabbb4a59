//! The durable ingress journal and the records the reconciler keeps (BRC-192 §10.2,
//! §10.5). Everything lives in the checkpoint store's tree under the prefix `X`, so a
//! reconciliation step and the store revision commit in one write:
//!
//! | key | value |
//! |---|---|
//! | `Xm` | [`Meta`]: journal id, last position, `{nonFinal}`, context changes |

//! | `Xi` txid | where the transaction's record is: its first raw receipt (position, index; 12 bytes) |
//! | `Xu` position, index, txid | [`TxRecord`]: raw facts, evidence variants and verdicts, placements, published result, in order of first receipt |
//! | `Xt` txid | the same record as format 2 kept it (moved by `open`, no longer written) |
//! | `Xe` parent txid, vout, spender txid | spend edge from an actual input (value empty) |
//! | `Xa` txid | [`AnchorRecord`]: a confirmed transaction outside the journal |
//! | `Xh` hash | [`HeaderRecord`] |
//! | `Xv` id | [`ContextDef`]: a named chain view or finality context |
//! | `Xk` component | [`Component`]: members (while few), pending reason, replacement journal |
//! | `Xn` component txid | a member of a long component (value empty) |
//! | `Xs` component | marker: the component's result can depend on the chain context |
//! | `Xp` component | marker: the component is pending |
//! | `Xc` txid | marker: the transaction's published status is a lost conflict |
//! | `Xd` position, variant id | the exact evidence bytes of a variant, under the position of its first receipt (kept for the verifier) |
//! | `Xb` variant id | the same, as stores written before 7 December 2026 keep it (read, no longer written) |
//! | `Xr` txid variant | [`Rejection`]: evidence refused at receipt, with its verdict |
//! | `Xl` txid | marker: a variant of the transaction has a `limited` verdict |
//! | `Xq` first position, index, txid, variant | marker: the variant has no verdict (a pending verification job) |
//!
//! A position is taken by each receive and each context change; what a receive brought is
//! in the receipts of its transactions' records (`Xu`, each with its position), so no
//! per-position entry is kept (stores written before keep their `Xj` entries, unread).
//!
//! Positions, component ids and heights are u64 big-endian, indexes u32 big-endian;
//! txids are 32 bytes in display order. Records are read and written through
//! [`load_tx`], [`save_tx`], [`written_txs`] and [`all_txs`] alone: they keep
//! a commit's memo of decoded records (`db::Tx::records`), and a record a commit writes is
//! encoded once, by [`flush_records`] when the commit finishes. A path that read or wrote
//! `Xu` or `Xi` keys around them would miss the memo's records or leave it stale.
//!
//! Invariant: an `Xq` marker exists exactly while its variant's verdict is `None`. A
//! variant's first receipt never changes, so its marker key is fixed; the three places
//! that set or clear a verdict (a new variant in `reconcile::receive_in`,
//! `reconcile::apply_verifications`, `ClientDb::requeue_limited`) write the marker in the
//! same commit, and `ClientDb::pending_page` reads the markers alone, in job order.

use serde::{Deserialize, Serialize};

use std::collections::BTreeSet;

use super::chain::{Finality, Header};
use super::db::Tx;
use super::ClientError;
use crate::bitcoin::tx::{Hash32, Input, Outpoint, RawTx, Txid};

pub const META: &[u8] = b"Xm";

/// Where a variant's evidence bytes are kept: under the journal position of its first
/// receipt, so each receive appends its bundles in one run of keys (a bundle is the largest
/// value of an output; keyed by its hash, every one landed on a page of its own).
pub fn evidence_key(first_position: u64, variant: &Hash32) -> Vec<u8> {
    [b"Xd".as_slice(), &first_position.to_be_bytes(), &variant.0].concat()
}
/// The evidence key of stores written before `Xd` (variant id alone), still read.
pub fn evidence_key_by_variant(variant: &Hash32) -> Vec<u8> {
    [b"Xb".as_slice(), &variant.0].concat()
}
/// Transaction records, in the order of their first raw receipt (`Xu` position, index,
/// txid). A receive's new records are one run of adjacent keys, and a verifier that works
/// in job order rewrites neighbours: keyed by txid, every record landed on a page of its
/// own in both commits (bench/client-layout-results.md, "Format 3").
pub const TX_RECORDS: &[u8] = b"Xu";
/// Format 2 kept each record under `Xt` txid; format 3's open moves them (store.rs).
pub const LEGACY_TX_PREFIX: &[u8] = b"Xt";
/// The small key placed by the txid: where the transaction's record is.
fn tx_index_key(txid: &Txid) -> Vec<u8> {
    [b"Xi".as_slice(), &txid.0].concat()
}
/// Where a record sits among [`TX_RECORDS`]: its first raw receipt (position, index), the
/// value of its index key too.
fn receipt_at(first_raw: IngressPosition) -> [u8; 12] {
    let mut at = [0u8; 12];
    at[..8].copy_from_slice(&first_raw.position.to_be_bytes());
    at[8..].copy_from_slice(&first_raw.index.to_be_bytes());
    at
}
/// The record key of a transaction at `at` (see [`receipt_at`]).
fn tx_record_key(at: &[u8], txid: &Txid) -> Result<Vec<u8>, ClientError> {
    if at.len() != 12 {
        return Err(ClientError::storage("corrupt journal: transaction index"));
    }
    Ok([TX_RECORDS, at, &txid.0].concat())
}

/// How many records a commit keeps in its memo only because it read them. A commit that
/// reads the whole journal (a context change recomputing every component) would otherwise
/// hold every record in memory at once; the records it writes are kept whatever the count,
/// as their encoded writes were before.
const READ_MEMO: usize = 4096;

/// The transaction's record, if the journal has it. Decoded once per commit (up to
/// [`READ_MEMO`] records read): later reads in the same commit are served from the commit's
/// memo (`Tx::records`).
pub(crate) fn load_tx(tx: &Tx, txid: &Txid) -> Result<Option<TxRecord>, ClientError> {
    if let Some((rec, _)) = tx.records.borrow().get(txid) {
        return Ok(Some(rec.clone()));
    }
    let Some(at) = tx.get(&tx_index_key(txid))? else { return Ok(None) };
    let rec: TxRecord = tx.get_json(&tx_record_key(&at, txid)?)?.ok_or_else(|| ClientError::storage("corrupt journal: indexed transaction record missing"))?;
    let mut memo = tx.records.borrow_mut();
    if memo.len() < READ_MEMO {
        memo.insert(*txid, (rec.clone(), false));
    }
    Ok(Some(rec))
}

/// Writes the transaction's record: the one place records are written. The index key is
/// written once, with the first record: a record's first raw receipt never changes
/// (`reconcile::receive_in` sets it), so a later write rewrites only the record. The
/// record itself goes to the commit's memo and is encoded once, by [`flush_records`].
pub(crate) fn save_tx(tx: &mut Tx, rec: &TxRecord) -> Result<(), ClientError> {
    let at = receipt_at(rec.first_raw);
    let known = tx.records.borrow().get(&rec.txid).map(|(r, _)| receipt_at(r.first_raw));
    let old = match known {
        // A record in the memo was read through, or written with, its index key.
        Some(old) => Some(old.to_vec()),
        None => tx.get(&tx_index_key(&rec.txid))?,
    };
    match old {
        Some(old) if old != at => return Err(ClientError::storage("corrupt journal: a transaction's first receipt changed")),
        Some(_) => {}
        None => tx.put(tx_index_key(&rec.txid), at.to_vec()),
    }
    tx.records.borrow_mut().insert(rec.txid, (rec.clone(), true));
    Ok(())
}

/// Puts the records this commit wrote into its writes, each encoded once; `Tx::finish`
/// calls it before applying the commit.
pub(crate) fn flush_records(tx: &mut Tx) -> Result<(), ClientError> {
    let records = std::mem::take(&mut *tx.records.borrow_mut());
    for (rec, written) in records.values() {
        if *written {
            tx.put_json(tx_record_key(&receipt_at(rec.first_raw), &rec.txid)?, rec);
        }
    }
    Ok(())
}

/// The records this commit wrote, in order of first receipt.
pub(crate) fn written_txs(tx: &Tx) -> Vec<TxRecord> {
    let mut out: Vec<TxRecord> = tx.records.borrow().values().filter(|(_, w)| *w).map(|(r, _)| r.clone()).collect();
    out.sort_by_key(|r| (r.first_raw.position, r.first_raw.index, r.txid));
    out
}

/// Every transaction record (in order of first receipt), this commit's writes included.
pub(crate) fn all_txs(tx: &Tx) -> Result<Vec<TxRecord>, ClientError> {
    let memo = tx.records.borrow();
    let mut out: Vec<TxRecord> = Vec::new();
    for (k, v) in tx.scan(TX_RECORDS)? {
        let txid = k.len().checked_sub(32).and_then(|at| k[at..].try_into().ok()).map(Hash32).ok_or_else(|| ClientError::storage("corrupt journal: record key"))?;
        if memo.get(&txid).is_some_and(|(_, w)| *w) {
            continue;
        }
        out.push(super::db::decode(&v)?);
    }
    drop(memo);
    out.extend(written_txs(tx));
    out.sort_by_key(|r| (r.first_raw.position, r.first_raw.index, r.txid));
    Ok(out)
}

pub fn edge_key(prev: &Outpoint, spender: &Txid) -> Vec<u8> {
    [b"Xe".as_slice(), &prev.key(), &spender.0].concat()
}
/// Spenders of one outpoint.
pub fn edges_of_outpoint(prev: &Outpoint) -> Vec<u8> {
    [b"Xe".as_slice(), &prev.key()].concat()
}
/// Spenders of any output of `txid`.
pub fn edges_of_tx(txid: &Txid) -> Vec<u8> {
    [b"Xe".as_slice(), &txid.0].concat()
}
/// The spender txid and the spent outpoint of an edge key.
pub fn edge_of_key(k: &[u8]) -> (Outpoint, Txid) {
    let mut t = [0u8; 32];
    t.copy_from_slice(&k[2..34]);
    let vout = u32::from_be_bytes(k[34..38].try_into().unwrap());
    let mut s = [0u8; 32];
    s.copy_from_slice(&k[38..70]);
    (Outpoint { txid: Hash32(t), vout }, Hash32(s))
}
pub fn anchor_key(txid: &Txid) -> Vec<u8> {
    [b"Xa".as_slice(), &txid.0].concat()
}
pub const ANCHOR_PREFIX: &[u8] = b"Xa";
pub fn header_key(hash: &Hash32) -> Vec<u8> {
    [b"Xh".as_slice(), &hash.0].concat()
}
pub fn context_key(id: &str) -> Vec<u8> {
    [b"Xv".as_slice(), id.as_bytes()].concat()
}
pub fn component_key(id: u64) -> Vec<u8> {
    [b"Xk".as_slice(), &id.to_be_bytes()].concat()
}
pub const COMPONENT_PREFIX: &[u8] = b"Xk";
pub fn sensitive_key(id: u64) -> Vec<u8> {
    [b"Xs".as_slice(), &id.to_be_bytes()].concat()
}
pub const SENSITIVE_PREFIX: &[u8] = b"Xs";
pub fn pending_key(id: u64) -> Vec<u8> {
    [b"Xp".as_slice(), &id.to_be_bytes()].concat()
}
pub const PENDING_PREFIX: &[u8] = b"Xp";
pub fn conflict_key(txid: &Txid) -> Vec<u8> {
    [b"Xc".as_slice(), &txid.0].concat()
}
pub const CONFLICT_PREFIX: &[u8] = b"Xc";
pub fn limited_key(txid: &Txid) -> Vec<u8> {
    [b"Xl".as_slice(), &txid.0].concat()
}
pub const LIMITED_PREFIX: &[u8] = b"Xl";
pub fn job_key(first: IngressPosition, txid: &Txid, variant: &Hash32) -> Vec<u8> {
    [b"Xq".as_slice(), &first.position.to_be_bytes(), &first.index.to_be_bytes(), &txid.0, &variant.0].concat()
}
pub const JOB_PREFIX: &[u8] = b"Xq";
/// The first receipt, txid and variant of a job marker key.
pub fn job_of_key(k: &[u8]) -> Option<(IngressPosition, Txid, Hash32)> {
    if k.len() != 2 + 8 + 4 + 32 + 32 {
        return None;
    }
    let position = u64::from_be_bytes(k[2..10].try_into().ok()?);
    let index = u32::from_be_bytes(k[10..14].try_into().ok()?);
    Some((IngressPosition { position, index }, Hash32(k[14..46].try_into().ok()?), Hash32(k[46..78].try_into().ok()?)))
}
/// Set when every pending job has its `Xq` marker (a store written before the markers
/// existed gets them from `configure_reconciler`).
pub const JOBS_INDEXED: &[u8] = b"meta/jobs-indexed";
pub fn rejection_key(txid: &Txid, variant: &Hash32) -> Vec<u8> {
    [b"Xr".as_slice(), &txid.0, &variant.0].concat()
}
/// Rejections of one transaction's evidence.
pub fn rejections_of(txid: &Txid) -> Vec<u8> {
    [b"Xr".as_slice(), &txid.0].concat()
}

/// The registered profile of §10.
pub const PROFILE: &str = "https://bsv.brc.dev/apps/0192#bitcoin-spend-reconciliation-v1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextChange {
    pub position: u64,
    pub id: String,
    pub finality: Finality,
    /// The view's tip, for a header-chain view.
    pub tip: Option<Hash32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    #[serde(rename = "journalId")]
    pub journal_id: String,
    /// The last assigned ingress position (the current journal frontier).
    pub position: u64,
    #[serde(rename = "nonFinal")]
    pub non_final: bool,
    /// Every retained context change, ascending; the first is at position 0.
    pub contexts: Vec<ContextChange>,
    #[serde(rename = "nextComponent")]
    pub next_component: u64,
}

impl Meta {
    pub fn current(&self) -> &ContextChange {
        self.contexts.last().expect("a journal always has its initial context")
    }
    /// The context active at `position` (the latest change at or before it).
    pub fn at(&self, position: u64) -> &ContextChange {
        let i = self.contexts.partition_point(|c| c.position <= position);
        &self.contexts[i.saturating_sub(1)]
    }
}

/// `{journalId, position, index}` of §10.5 (the journal id is the store's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IngressPosition {
    pub position: u64,
    pub index: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictStatus {
    Verified,
    Invalid,
    Limited,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: VerdictStatus,
    #[serde(rename = "contextId")]
    pub context_id: String,
    pub reason: String,
    /// For `limited`: the verification budget it was measured against (a verifier
    /// with another budget may try the variant again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// A received group of a source generation (the checkpoint store's `R` record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupRef {
    pub source: Hash32,
    pub generation: u64,
    pub ordinal: u64,
}

/// Whether a receipt counts as support (BRC-192 §8: a group's evidence publishes
/// whole, or not at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiptState {
    /// Its group still waits for a verdict on some candidate: possible support only.
    Open,
    /// Counts: received outside a group, or its group's evidence all verified.
    Accepted,
    /// Its group was refused (a candidate invalid or limited) or retired.
    Refused,
}

fn accepted() -> ReceiptState {
    ReceiptState::Accepted
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub at: IngressPosition,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupRef>,
    #[serde(default = "accepted")]
    pub state: ReceiptState,
}

/// A Merkle path's claim: the block at `height` has this root (display order). Only
/// a verified variant's claims count, and only on the current view's chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Proof {
    pub height: u64,
    pub root: Hash32,
}

/// A proven parent the variant's bundle carries (so it needs no other support).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Supplied {
    pub txid: Txid,
    pub outputs: u32,
    pub proof: Proof,
}

/// One evidence variant of a transaction, keyed by the digest of its exact bytes
/// (BRC-192 §2). Its support position is its first counting receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    pub id: Hash32,
    pub receipts: Vec<Receipt>,
    pub verdict: Option<Verdict>,
    /// The bundle's Merkle path for this very transaction: a mined subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<Proof>,
    /// Proven parents the bundle carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supplies: Vec<Supplied>,
}

impl Variant {
    pub fn first(&self) -> IngressPosition {
        self.receipts[0].at
    }
    /// The earliest position at which this variant counts as support, if verified.
    pub fn support(&self) -> Option<u64> {
        if !matches!(&self.verdict, Some(v) if v.status == VerdictStatus::Verified) {
            return None;
        }
        self.receipts.iter().filter(|r| r.state == ReceiptState::Accepted).map(|r| r.at.position).min()
    }
    /// The earliest position at which it could still turn out to be support: verified
    /// or unjudged, with a receipt that counts or may yet count.
    pub fn possible(&self) -> Option<u64> {
        if matches!(&self.verdict, Some(v) if v.status != VerdictStatus::Verified) {
            return None;
        }
        self.receipts.iter().filter(|r| r.state != ReceiptState::Refused).map(|r| r.at.position).min()
    }
}

/// Evidence refused when it was received (it does not parse, does not carry the
/// asserted transaction or output, or exceeds a bound), with the verdict saying why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub txid: Txid,
    pub variant: Hash32,
    pub verdict: Verdict,
    pub receipts: Vec<Receipt>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Placement {
    pub block: Hash32,
    pub height: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Unresolved,
    Invalid,
    Limited,
    Unsupported,
    Conflicting,
    DependentConflict,
    SelectedNonFinal,
    SelectedFinal,
    Included,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Unresolved => "unresolved",
            Status::Invalid => "invalid",
            Status::Limited => "limited",
            Status::Unsupported => "unsupported",
            Status::Conflicting => "conflicting",
            Status::DependentConflict => "dependent-conflict",
            Status::SelectedNonFinal => "selected-non-final",
            Status::SelectedFinal => "selected-final",
            Status::Included => "included",
        }
    }
    /// Consumes its inputs in today's view (a selected final or included spend).
    pub fn spends(self) -> bool {
        matches!(self, Status::SelectedFinal | Status::Included)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateOrder {
    #[serde(rename = "readyAt")]
    pub ready_at: u64,
    pub depth: u32,
    #[serde(rename = "readyContextId")]
    pub ready_context: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Eligible {
    pub at: u64,
    #[serde(rename = "contextId")]
    pub context_id: String,
}

/// The accepted result of one transaction. While its component is pending this is the
/// previous accepted result, shown as stale.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub order: Option<CandidateOrder>,
    pub eligible: Option<Eligible>,
    pub status: Status,
    pub reason: String,
    pub replaces: Option<Txid>,
    #[serde(rename = "conflictsWith")]
    pub conflicts_with: Vec<Txid>,
}

/// Raw bytes: hex in JSON (what the bindings show), bytes in the store's record codec.
pub(crate) mod hex_bytes {
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};
    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&hex::encode(b))
        } else {
            s.serialize_bytes(b)
        }
    }
    struct HexOrBytes;
    impl<'de> Visitor<'de> for HexOrBytes {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("hex text or bytes")
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<Vec<u8>, E> {
            hex::decode(v).map_err(E::custom)
        }
        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_any(HexOrBytes)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxRecord {
    pub txid: Txid,
    #[serde(with = "hex_bytes")]
    pub raw: Vec<u8>,
    pub inputs: Vec<Input>,
    pub outputs: u32,
    pub locktime: u32,
    #[serde(rename = "firstRaw")]
    pub first_raw: IngressPosition,
    pub variants: Vec<Variant>,
    pub placements: Vec<Placement>,
    pub component: u64,
    pub published: Option<Published>,
}

impl TxRecord {
    pub fn parsed(&self) -> RawTx {
        RawTx { txid: self.txid, inputs: self.inputs.clone(), outputs: self.outputs, locktime: self.locktime }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnchorRecord {
    pub txid: Txid,
    pub outputs: u32,
    pub anchor: Anchor,
    /// The journal position of the receipt that supplied it; `None` for an anchor the
    /// application configured (it supports every position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Anchor {
    /// Configured as verified (e.g. a checkpointed root).
    Preverified,
    /// Included at a block: confirmed only in views whose chain holds that block.
    Placed { placement: Placement },
    /// Proven by a verified bundle's Merkle path: confirmed in a header view whose
    /// block at that height has the root, and in every view without headers (there
    /// the ChainTracker that verified it is the chain).
    Proven { proof: Proof },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderRecord {
    pub header: Header,
    pub height: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextDef {
    pub id: String,
    pub finality: Finality,
    pub tip: Option<Hash32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replacement {
    pub previous: Txid,
    pub replacement: Txid,
    pub at: u64,
    #[serde(rename = "contextId")]
    pub context_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    pub id: u64,
    /// Its members, sorted, while there are at most [`INLINE_MEMBERS`]; empty once they
    /// are kept as `Xn` keys (`spilled`).
    pub members: Vec<Txid>,
    /// The members are `Xn` keys: a long component (a chain of spends) then gains a member
    /// with one small write, not a rewrite of its whole list.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spilled: bool,
    /// Set while the component waits (`verification-pending`, `context-changed`).
    pub pending: Option<String>,
    pub replacements: Vec<Replacement>,
    /// The members' published results are what a whole recompute gives (except
    /// `pending_leaf`'s), and every candidate has been eligible, so a step that changes
    /// one leaf can be computed from that leaf alone (`incremental.rs`). Set by a whole
    /// recompute; a record written before the field existed reads `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exact: bool,
    /// The one member whose verification holds the component pending, when everything
    /// else is settled (`exact`).
    #[serde(default, rename = "pendingLeaf", skip_serializing_if = "Option::is_none")]
    pub pending_leaf: Option<Txid>,
}

/// Members a component keeps in its record; past this they are `Xn` keys.
pub const INLINE_MEMBERS: usize = 64;

pub fn member_key(component: u64, txid: &Txid) -> Vec<u8> {
    [b"Xn".as_slice(), &component.to_be_bytes(), &txid.0].concat()
}
fn members_prefix(component: u64) -> Vec<u8> {
    [b"Xn".as_slice(), &component.to_be_bytes()].concat()
}

impl Component {
    pub fn new(id: u64, first: Txid) -> Component {
        Component { id, members: vec![first], spilled: false, pending: None, replacements: vec![], exact: false, pending_leaf: None }
    }
    /// Every member, in txid order.
    pub(crate) fn members_of(&self, tx: &Tx) -> Result<Vec<Txid>, ClientError> {
        if !self.spilled {
            return Ok(self.members.clone());
        }
        let prefix = members_prefix(self.id);
        Ok(tx.scan(&prefix)?.into_iter().map(|(k, _)| Hash32(k[prefix.len()..].try_into().expect("member key"))).collect())
    }
    pub(crate) fn contains(&self, tx: &Tx, txid: &Txid) -> Result<bool, ClientError> {
        if !self.spilled {
            return Ok(self.members.binary_search(txid).is_ok());
        }
        Ok(tx.get(&member_key(self.id, txid))?.is_some())
    }
    /// Adds members (inside the caller's commit; the caller writes the record).
    pub(crate) fn add(&mut self, tx: &mut Tx, txids: &[Txid]) {
        if !self.spilled && self.members.len() + txids.len() <= INLINE_MEMBERS {
            self.members.extend_from_slice(txids);
            self.members.sort();
            self.members.dedup();
            return;
        }
        if !self.spilled {
            self.spilled = true;
            for m in std::mem::take(&mut self.members) {
                tx.put(member_key(self.id, &m), vec![]);
            }
        }
        for m in txids {
            tx.put(member_key(self.id, m), vec![]);
        }
    }
    /// Removes the member keys of a component merged into another.
    pub(crate) fn drop_members(&self, tx: &mut Tx) -> Result<(), ClientError> {
        if self.spilled {
            tx.delete_prefix(&members_prefix(self.id))?;
        }
        Ok(())
    }
}

/// A group's evidence candidate: one transaction with one evidence variant.
pub type Candidate = (Txid, Hash32);

/// A group's evidence verdict from its candidates' verdicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupEvidence {
    /// A candidate has no verdict yet.
    Pending,
    /// Every candidate verified: the group's receipts count.
    Verified,
    /// A candidate is invalid: the group is quarantined (its receipts never count).
    Invalid,
    /// A candidate exceeded a bound (and none is invalid): refused under this budget.
    Limited,
}

/// Components of the transactions spending any output of `txid`.
pub(crate) fn spender_components(tx: &Tx, txid: &Txid) -> Result<BTreeSet<u64>, ClientError> {
    let mut out = BTreeSet::new();
    for (k, _) in tx.scan(&edges_of_tx(txid))? {
        let (_, spender) = edge_of_key(&k);
        let rec: TxRecord = load_tx(tx, &spender)?.ok_or_else(|| ClientError::storage("corrupt journal: edge spender"))?;
        out.insert(rec.component);
    }
    Ok(out)
}
