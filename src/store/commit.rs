//! The committer: one thread owns every write to the live index and log. Writers enqueue groups;
//! the committer drains whatever is queued, assigns consecutive sequences, stages all effective
//! changes in memory and applies them as ONE sled batch; a flusher thread then flushes (one flush
//! for every batch applied so far) and only then publishes (highWater, watch) and replies. This
//! is group commit: concurrent writers share a batch and a flush, and staging the next drain
//! overlaps the previous flush. The hand-over to the flusher is a rendezvous, so while a flush
//! runs at most one applied drain waits for the next one and new requests pile up into a single
//! following drain: every sled batch costs log I/O of its own (sled seals its I/O buffer around
//! each batch), so fewer, larger batches are cheaper per group.
//!
//! Why a single writer thread: blob reference counts, the current-version pointers and the
//! sequence counter are read-modify-write state; serializing them here needs no locks and lets
//! each drain read its own staged writes through [`Txn`].
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::select::{index_values, validate_attributes};

use super::codec::{Invalidation, LogChange, LogGroup, NewVersion, OldVersion, RowVersion};
use super::crash::crash_point;
use super::{compact, keys, sha256, BlobRef, Change, GroupBudget, Outpoint, Recorded, RemoveReason, Shape, Shared, StoreError};
use super::{MAX_BEEF_BYTES, MAX_CONTEXT_BYTES, MAX_INVALIDATION_TEXT_BYTES, MAX_SERVICE_BYTES, MAX_TOPIC_BYTES};

type Reply<T> = SyncSender<Result<T, StoreError>>;
/// Each staged group's reply channel and its outcome, answered after the flush.
type Replies = Vec<(Reply<Option<u64>>, Result<Option<u64>, StoreError>)>;

pub(crate) enum Req {
    /// `due_by`: the clock (Unix seconds) when the change was made (its gate ticket was
    /// taken); expiries due by then are numbered before it, later ones after.
    Commit { changes: Vec<Change>, mode: Mode, due_by: Option<u64>, reply: Reply<Option<u64>> },
    /// Changes with no atomicity between them: split into groups that fit the budget.
    CommitDivisible { changes: Vec<Change>, mode: Mode, due_by: Option<u64>, reply: Reply<Option<u64>> },
    /// Answered once everything sent before it is applied, flushed and published.
    Sync { reply: Reply<()> },
    Expire { now: u64, reply: Reply<Option<u64>> },
    Compact { horizon: u64, max_items: usize, reply: Reply<bool> },
    /// A new epoch whose first group (sequence 1, unless `first` changes nothing) is written
    /// in the same batch as the reset.
    Reset { first: Vec<Change>, reply: Reply<(String, Option<u64>)> },
    Shutdown,
}

/// What a commit does with a group beyond the budget or a cap.
pub(crate) enum Mode {
    /// Refuses it; nothing of it is written.
    Refuse,
    /// Records it anyway, noting what that took (`Store::commit_recorded`).
    Record(Arc<Mutex<Recorded>>),
}

/// [`Mode`] as staging applies it.
#[derive(Clone, Copy)]
enum Policy<'a> {
    Refuse,
    Record { notes: &'a Mutex<Recorded> },
}

impl Mode {
    fn policy(&self) -> Policy<'_> {
        match self {
            Mode::Refuse => Policy::Refuse,
            Mode::Record(notes) => Policy::Record { notes },
        }
    }
}

impl Policy<'_> {
    fn note(&self, f: impl FnOnce(&mut Recorded)) {
        if let Policy::Record { notes } = self {
            f(&mut notes.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }
}

const RETAINED_BYTES: &str = "retained bytes";

/// Exact counters kept in `meta/stats`, updated in the same batch as the data they count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    pub live_rows: u64,
    pub log_groups: u64,
    pub log_bytes: u64,
    pub row_bytes: u64,
    pub blob_bytes: u64,
}

impl Stats {
    pub fn encode(&self) -> Vec<u8> {
        [self.live_rows, self.log_groups, self.log_bytes, self.row_bytes, self.blob_bytes]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect()
    }
    pub fn decode(b: &[u8]) -> Option<Stats> {
        if b.len() != 40 {
            return None;
        }
        let f = |i: usize| u64::from_be_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        Some(Stats { live_rows: f(0), log_groups: f(1), log_bytes: f(2), row_bytes: f(3), blob_bytes: f(4) })
    }
    pub fn retained(&self) -> u64 {
        self.log_bytes.saturating_add(self.row_bytes).saturating_add(self.blob_bytes)
    }
}

fn check_name(what: &str, s: &str, max: usize) -> Result<(), StoreError> {
    if s.is_empty() || s.len() > max || s.contains('\0') {
        return Err(StoreError::Invalid(format!("{what} must be 1..={max} bytes without NUL")));
    }
    Ok(())
}

/// Reject malformed changes before they reach the committer (runs on the caller's thread).
pub(crate) fn validate(changes: &[Change]) -> Result<(), StoreError> {
    let mut saw_row_change = false;
    for c in changes {
        if !matches!(c, Change::Invalidate { .. }) {
            saw_row_change = true;
        }
        match c {
            Change::Admit { service, topic, attributes, beef, context, .. } => {
                check_name("service", service, MAX_SERVICE_BYTES)?;
                check_name("topic", topic, MAX_TOPIC_BYTES)?;
                validate_attributes(attributes).map_err(|e| StoreError::Invalid(e.message))?;
                if beef.is_empty() || beef.len() > MAX_BEEF_BYTES {
                    return Err(StoreError::Invalid(format!("beef must be 1..={MAX_BEEF_BYTES} bytes")));
                }
                if let Some(ctx) = context {
                    check_name("context schema", &ctx.schema, MAX_TOPIC_BYTES)?;
                    if ctx.bytes.len() > MAX_CONTEXT_BYTES {
                        return Err(StoreError::Invalid(format!("context over {MAX_CONTEXT_BYTES} bytes")));
                    }
                }
            }
            Change::Remove { service, reason, spend, .. } => {
                check_name("service", service, MAX_SERVICE_BYTES)?;
                if let Some(s) = spend {
                    if *reason != RemoveReason::Spent {
                        return Err(StoreError::Invalid("spend evidence needs reason Spent".into()));
                    }
                    if s.beef.is_empty() || s.beef.len() > MAX_BEEF_BYTES {
                        return Err(StoreError::Invalid(format!("spend beef must be 1..={MAX_BEEF_BYTES} bytes")));
                    }
                }
            }
            Change::Refresh { service, beef, .. } => {
                check_name("service", service, MAX_SERVICE_BYTES)?;
                if beef.is_empty() || beef.len() > MAX_BEEF_BYTES {
                    return Err(StoreError::Invalid(format!("beef must be 1..={MAX_BEEF_BYTES} bytes")));
                }
            }
            Change::Invalidate { service, context_id, reason } => {
                check_name("service", service, MAX_SERVICE_BYTES)?;
                check_name("invalidation contextId", context_id, MAX_INVALIDATION_TEXT_BYTES)?;
                check_name("invalidation reason", reason, MAX_INVALIDATION_TEXT_BYTES)?;
                if saw_row_change {
                    return Err(StoreError::Invalid("invalidations must precede the row changes of their group".into()));
                }
            }
        }
    }
    Ok(())
}

type Writes = HashMap<Vec<u8>, Option<Vec<u8>>>;

/// (count, length, at) of an encoded blob record.
fn decode_blob_record(v: &[u8]) -> Option<(u64, u64, u64)> {
    if v.len() != 24 {
        return None;
    }
    let n = |i: usize| u64::from_be_bytes(v[i..i + 8].try_into().unwrap());
    Some((n(0), n(8), n(16)))
}

/// Where an encoded blob record says the bytes are.
pub(crate) fn blob_record_at(v: &[u8]) -> Option<u64> {
    decode_blob_record(v).map(|(_, _, at)| at)
}

/// Retained bytes of one blob as encoded: its record (33 + 24) and its bytes (41 + len).
fn blob_bytes(len: u64) -> u64 {
    33 + 24 + 41 + len
}

/// Staged writes of one group, layered over the drain's staged writes and the database.
pub(crate) struct Txn<'a> {
    db: &'a sled::Db,
    base: &'a Writes,
    pub writes: Writes,
    pub stats: Stats,
    /// Services whose marker is known to be stored (read-only cache of the committer).
    known_services: Option<&'a HashSet<String>>,
    /// Services whose marker this transaction found stored (to add to that cache).
    pub found_services: Vec<String>,
}

impl<'a> Txn<'a> {
    pub fn new(db: &'a sled::Db, base: &'a Writes, stats: Stats) -> Self {
        Txn { db, base, writes: Writes::new(), stats, known_services: None, found_services: Vec::new() }
    }
    fn with_known_services(mut self, known: &'a HashSet<String>) -> Self {
        self.known_services = Some(known);
        self
    }
    pub fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(v) = self.writes.get(k) {
            return Ok(v.clone());
        }
        if let Some(v) = self.base.get(k) {
            return Ok(v.clone());
        }
        Ok(self.db.get(k).map_err(StoreError::io("reading the index"))?.map(|v| v.to_vec()))
    }
    pub fn put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.writes.insert(k, Some(v));
    }
    pub fn del(&mut self, k: Vec<u8>) {
        self.writes.insert(k, None);
    }

    /// Add `refs` references to a blob, storing it on first reference at group `seq`;
    /// returns where it is. Invariant kept by `add_refs`/`drop_ref` (and only they write
    /// blob records and bytes):
    /// a blob's record exists iff its count — the row versions plus log records naming its
    /// hash — is positive, and its bytes exist at the record's `at` iff the record does.
    /// Record, count and bytes change in the same batch as the rows and log records that
    /// reference them (layout: `keys` module docs).
    pub fn add_refs(&mut self, h: &[u8; 32], beef: &[u8], seq: u64, refs: u64) -> Result<BlobRef, StoreError> {
        let (count, len, at) = match self.blob_ref(h)? {
            Some(rec) => rec,
            None => {
                let blob = BlobRef { hash: *h, at: seq };
                self.put(keys::blob(&blob).to_vec(), beef.to_vec());
                self.stats.blob_bytes += blob_bytes(beef.len() as u64);
                (0, beef.len() as u64, seq)
            }
        };
        self.put_blob_ref(h, count + refs, len, at);
        Ok(BlobRef { hash: *h, at })
    }

    /// Drop one reference; the blob is deleted with its last reference.
    pub fn drop_ref(&mut self, h: &[u8; 32]) -> Result<(), StoreError> {
        let Some((count, len, at)) = self.blob_ref(h)? else { return Ok(()) };
        if count <= 1 {
            self.del(keys::blob_ref(h).to_vec());
            self.del(keys::blob(&BlobRef { hash: *h, at }).to_vec());
            self.stats.blob_bytes = self.stats.blob_bytes.saturating_sub(blob_bytes(len));
        } else {
            self.put_blob_ref(h, count - 1, len, at);
        }
        Ok(())
    }

    /// Length of a blob that has a record (0 if it has none).
    fn blob_len(&self, h: &[u8; 32]) -> Result<u64, StoreError> {
        Ok(self.blob_ref(h)?.map_or(0, |(_, len, _)| len))
    }

    /// (count, length, at) of a blob's record; `None` if it has no record.
    fn blob_ref(&self, h: &[u8; 32]) -> Result<Option<(u64, u64, u64)>, StoreError> {
        let Some(v) = self.get(&keys::blob_ref(h))? else { return Ok(None) };
        decode_blob_record(&v).map(Some).ok_or_else(|| StoreError::Invalid("malformed blob record".into()))
    }

    fn put_blob_ref(&mut self, h: &[u8; 32], count: u64, len: u64, at: u64) {
        let mut v = Vec::with_capacity(24);
        for n in [count, len, at] {
            v.extend_from_slice(&n.to_be_bytes());
        }
        self.put(keys::blob_ref(h).to_vec(), v);
    }

    fn current(&self, service: &str, o: &Outpoint) -> Result<Option<(u64, RowVersion)>, StoreError> {
        let Some(c) = self.get(&keys::current(service, o))? else { return Ok(None) };
        let created = u64::from_be_bytes(
            c.as_slice().try_into().map_err(|_| StoreError::Invalid("malformed current-row pointer".into()))?,
        );
        let row = self
            .get(&keys::row(service, created, o))?
            .and_then(|b| RowVersion::decode(&b))
            .ok_or_else(|| StoreError::Invalid(format!("row version {created} of a current row is unreadable")))?;
        Ok(Some((created, row)))
    }

    fn create_version(&mut self, service: &str, created: u64, o: &Outpoint, row: &RowVersion) -> Result<(), StoreError> {
        let enc = row.encode();
        let k = keys::row(service, created, o);
        let mut size = (k.len() + enc.len()) as u64;
        self.put(k, enc);
        for (name, v) in &row.attributes {
            for s in index_values(v) {
                let ik = keys::index(service, name, &s, created, o);
                size += ik.len() as u64;
                self.put(ik, Vec::new());
            }
        }
        self.put(keys::current(service, o), created.to_be_bytes().to_vec());
        if let Some(at) = row.expires_at {
            self.put(keys::timer(at, service, o), created.to_be_bytes().to_vec());
        }
        if !self.known_services.is_some_and(|k| k.contains(service)) {
            let marker = keys::service_prefix(keys::SERVICE, service);
            if self.writes.contains_key(&marker) {
                // Staged by this same group: not stored unless the group commits.
            } else if self.get(&marker)?.is_none() {
                self.put(marker, created.to_be_bytes().to_vec());
            } else {
                self.found_services.push(service.to_string());
            }
        }
        self.stats.row_bytes += size;
        self.stats.live_rows += 1;
        Ok(())
    }

    /// Mark the current version removed at `seq`. A version created by this same group is never
    /// visible to any snapshot, so it is deleted outright (its key would collide otherwise).
    fn remove_version(&mut self, service: &str, o: &Outpoint, created: u64, row: &RowVersion, seq: u64) -> Result<(), StoreError> {
        self.del(keys::current(service, o));
        if let Some(at) = row.expires_at {
            self.del(keys::timer(at, service, o));
        }
        self.stats.live_rows = self.stats.live_rows.saturating_sub(1);
        if created == seq {
            return self.delete_version(service, o, created, row);
        }
        let mut enc = row.encode();
        super::codec::set_row_removed(&mut enc, seq);
        self.put(keys::row(service, created, o), enc);
        Ok(())
    }

    /// Delete a row version's storage (row, index entries, its blob reference).
    pub fn delete_version(&mut self, service: &str, o: &Outpoint, created: u64, row: &RowVersion) -> Result<(), StoreError> {
        let k = keys::row(service, created, o);
        let mut size = (k.len() + row.encode().len()) as u64;
        self.del(k);
        for (name, v) in &row.attributes {
            for s in index_values(v) {
                let ik = keys::index(service, name, &s, created, o);
                size += ik.len() as u64;
                self.del(ik);
            }
        }
        self.stats.row_bytes = self.stats.row_bytes.saturating_sub(size);
        self.drop_ref(&row.beef.hash)
    }

    pub fn read_row(&self, service: &str, created: u64, o: &Outpoint) -> Result<Option<RowVersion>, StoreError> {
        match self.get(&keys::row(service, created, o))? {
            None => Ok(None),
            Some(b) => RowVersion::decode(&b)
                .map(Some)
                .ok_or_else(|| StoreError::Invalid(format!("row version {created} is unreadable"))),
        }
    }
}

/// Apply one group's changes at `seq`; returns the effective changes (empty = no change).
fn apply_changes(txn: &mut Txn, seq: u64, changes: Vec<Change>) -> Result<LogGroup, StoreError> {
    let mut log = Vec::new();
    let mut invalidations = Vec::new();
    for c in changes {
        match c {
            Change::Admit { service, outpoint, topic, attributes, beef, context, expires_at } => {
                // `at` is settled by `replace_row`, once it knows whether the blob is stored.
                let new_row = RowVersion {
                    removed: 0,
                    expires_at,
                    beef: BlobRef { hash: sha256(&beef), at: seq },
                    topic,
                    context,
                    attributes,
                };
                let cur = txn.current(&service, &outpoint)?;
                if let Some(change) = replace_row(txn, seq, service, outpoint, cur, new_row, &beef)? {
                    log.push(change);
                }
            }
            Change::Refresh { service, outpoint, beef } => {
                // Only a present row's evidence is replaced: a refresh never admits.
                let Some((created, old)) = txn.current(&service, &outpoint)? else { continue };
                let new_row = RowVersion { removed: 0, beef: BlobRef { hash: sha256(&beef), at: seq }, ..old.clone() };
                if let Some(change) = replace_row(txn, seq, service, outpoint, Some((created, old)), new_row, &beef)? {
                    log.push(change);
                }
            }
            Change::Invalidate { service, context_id, reason } => {
                invalidations.push(Invalidation { service, context_id, reason });
            }
            Change::Remove { service, outpoint, reason, spend } => {
                let Some((created, old)) = txn.current(&service, &outpoint)? else { continue };
                txn.remove_version(&service, &outpoint, created, &old, seq)?;
                let spend = match spend {
                    Some(s) => {
                        let blob = txn.add_refs(&sha256(&s.beef), &s.beef, seq, 1)?;
                        Some((s.spending_txid, blob))
                    }
                    None => None,
                };
                log.push(LogChange {
                    service,
                    outpoint,
                    old: Some(OldVersion { created, topic: old.topic, attributes: old.attributes }),
                    new: None,
                    reason: Some(reason),
                    spend,
                    evidence_changed: false,
                });
            }
        }
    }
    Ok(LogGroup { changes: log, invalidations })
}

/// Make `new_row` the current version of (service, outpoint) at `seq`, replacing `cur`.
/// `None` when it equals the current version (no change).
fn replace_row(
    txn: &mut Txn,
    seq: u64,
    service: String,
    outpoint: Outpoint,
    cur: Option<(u64, RowVersion)>,
    mut new_row: RowVersion,
    beef: &[u8],
) -> Result<Option<LogChange>, StoreError> {
    if let Some((_, old)) = &cur {
        if old.beef.hash == new_row.beef.hash {
            new_row.beef.at = old.beef.at; // the same bytes, already stored there
        }
        if *old == new_row {
            return Ok(None); // identical re-admission: no change
        }
    }
    let old = match cur {
        Some((created, old)) => {
            txn.remove_version(&service, &outpoint, created, &old, seq)?;
            Some((created, old))
        }
        None => None,
    };
    // Two references: the row version's and the log record's.
    new_row.beef = txn.add_refs(&new_row.beef.hash, beef, seq, 2)?;
    txn.create_version(&service, seq, &outpoint, &new_row)?;
    let evidence_changed = old.as_ref().is_some_and(|(_, o)| {
        o.topic != new_row.topic || o.beef.hash != new_row.beef.hash || o.context != new_row.context
    });
    Ok(Some(LogChange {
        service,
        outpoint,
        old: old.map(|(created, o)| OldVersion { created, topic: o.topic, attributes: o.attributes }),
        new: Some(NewVersion {
            topic: new_row.topic,
            attributes: new_row.attributes,
            beef: new_row.beef,
            context: new_row.context,
            expires_at: new_row.expires_at,
        }),
        reason: None,
        spend: None,
        evidence_changed,
    }))
}

/// Stage `group` as log record `seq`; false when it holds no effective change (then nothing
/// of it may be kept: the caller drops the transaction).
fn record_group(txn: &mut Txn, seq: u64, group: LogGroup) -> bool {
    if group.changes.is_empty() && group.invalidations.is_empty() {
        return false;
    }
    if !group.invalidations.is_empty() {
        // The chain view current from here on is named after this group; written in the same
        // batch as the group so a crash cannot separate them.
        txn.put(keys::meta(super::VIEW_SINCE), seq.to_be_bytes().to_vec());
    }
    let enc = group.encode();
    txn.stats.log_groups += 1;
    txn.stats.log_bytes += 9 + enc.len() as u64;
    txn.put(keys::log(seq).to_vec(), enc);
    true
}

/// Changes withdrawing every row due at `now`, ordered by (expiresAt, service, outpoint).
fn due_expiries(db: &sled::Db, now: u64) -> Result<Vec<Change>, StoreError> {
    let mut out = Vec::new();
    for kv in db.scan_prefix([keys::TIMER]) {
        let (k, _) = kv.map_err(StoreError::io("scanning timers"))?;
        let (at, service, outpoint) =
            keys::parse_timer(&k).ok_or_else(|| StoreError::Invalid("malformed timer key".into()))?;
        if at > now {
            break; // expiry is exclusive: due when now >= expiresAt
        }
        out.push(Change::Remove { service, outpoint, reason: RemoveReason::Expired, spend: None });
    }
    Ok(out)
}

/// The earliest expiry timer in the tree (Unix seconds), `u64::MAX` if none. One seek.
pub(crate) fn first_timer(db: &sled::Db) -> Result<u64, StoreError> {
    match db.scan_prefix([keys::TIMER]).next() {
        None => Ok(u64::MAX),
        Some(kv) => {
            let (k, _) = kv.map_err(StoreError::io("reading the first timer"))?;
            // A malformed key reads as due now: the expiry pass then reports it.
            Ok(keys::parse_timer(&k).map_or(0, |(at, _, _)| at))
        }
    }
}

/// Per service, the observations and bytes a group (or a part of one) gives a session at its
/// widest, as the budget measures them.
#[derive(Default, Clone)]
struct Tally(HashMap<String, (u64, u64)>);

impl Tally {
    fn add(&mut self, budget: &dyn GroupBudget, service: &str, shape: &Shape) {
        let bytes = budget.observation_bytes(service, shape);
        let e = self.0.entry(service.to_string()).or_default();
        e.0 += 1;
        e.1 += bytes;
    }

    /// The first service whose part does not fit, with its observation count.
    fn misfit(&self, budget: &dyn GroupBudget, seq: u64) -> Option<(&str, u64)> {
        let mut services: Vec<_> = self.0.iter().collect();
        services.sort();
        services
            .into_iter()
            .find(|(service, (n, bytes))| !budget.fits(service, seq, *n, *bytes))
            .map(|(service, (n, _))| (service.as_str(), *n))
    }
}

/// The widest observations of one effective change of a group.
fn widest_of_log(txn: &Txn, change: &LogChange, out: &mut Vec<Shape>) -> Result<(), StoreError> {
    match &change.new {
        Some(n) => out.push(Shape::Output {
            outpoint: change.outpoint.clone(),
            beef_len: txn.blob_len(&n.beef.hash)?,
            context: n.context.as_ref().map(|c| (c.schema.clone(), c.bytes.len() as u64)),
        }),
        None => {
            let reason = change.reason.map_or("removed", RemoveReason::as_withdraw_reason);
            out.push(Shape::Withdraw { outpoint: change.outpoint.clone(), reason });
            if let Some((spending_txid, blob)) = &change.spend {
                out.push(Shape::Spend { previous: change.outpoint.clone(), spending_txid: *spending_txid, beef_len: txn.blob_len(&blob.hash)? });
            }
        }
    }
    Ok(())
}

/// The widest observations `change` would add, read before it is applied: the same as
/// [`widest_of_log`] gives once it is (an identical re-admission or a removal of an absent
/// row adds none).
fn widest_of_change(txn: &Txn, change: &Change, out: &mut Vec<Shape>) -> Result<(), StoreError> {
    match change {
        Change::Admit { service, outpoint, topic, attributes, beef, context, expires_at } => {
            if let Some((_, old)) = txn.current(service, outpoint)? {
                // An identical re-admission is no change (as `replace_row` decides).
                let same = old.topic == *topic
                    && old.attributes == *attributes
                    && old.expires_at == *expires_at
                    && old.context == *context
                    && old.beef.hash == sha256(beef);
                if same {
                    return Ok(());
                }
            }
            out.push(Shape::Output {
                outpoint: outpoint.clone(),
                beef_len: beef.len() as u64,
                context: context.as_ref().map(|c| (c.schema.clone(), c.bytes.len() as u64)),
            });
        }
        Change::Refresh { service, outpoint, beef } => {
            let Some((_, old)) = txn.current(service, outpoint)? else { return Ok(()) };
            if old.beef.hash != sha256(beef) {
                out.push(Shape::Output {
                    outpoint: outpoint.clone(),
                    beef_len: beef.len() as u64,
                    context: old.context.as_ref().map(|c| (c.schema.clone(), c.bytes.len() as u64)),
                });
            }
        }
        Change::Remove { service, outpoint, reason, spend } => {
            if txn.current(service, outpoint)?.is_none() {
                return Ok(());
            }
            out.push(Shape::Withdraw { outpoint: outpoint.clone(), reason: reason.as_withdraw_reason() });
            if let Some(s) = spend {
                out.push(Shape::Spend { previous: outpoint.clone(), spending_txid: s.spending_txid, beef_len: s.beef.len() as u64 });
            }
        }
        Change::Invalidate { context_id, reason, .. } => {
            out.push(Shape::Invalidated { context_id: context_id.clone(), reason: reason.clone() });
        }
    }
    Ok(())
}

fn change_service(c: &Change) -> &str {
    match c {
        Change::Admit { service, .. }
        | Change::Remove { service, .. }
        | Change::Refresh { service, .. }
        | Change::Invalidate { service, .. } => service,
    }
}

/// The committer's private state (the applied, not necessarily durable, state of the store).
pub(crate) struct Committer {
    pub db: sled::Db,
    pub shared: Arc<Shared>,
    /// Highest sequence applied to the tree (published only after the flusher's flush).
    pub high_water: u64,
    pub stats: Stats,
    flusher: Option<(SyncSender<FlushMsg>, JoinHandle<()>)>,
    /// Services whose marker (`s` record) is stored: saves a read per admitted row. Markers are
    /// only ever deleted by `reset`, which clears this.
    services: HashSet<String>,
}

/// Staged groups of one drain: written in one batch, flushed once.
struct Drain {
    writes: Writes,
    stats: Stats,
    last_seq: u64,
    replies: Replies,
}

/// Work handed from the committer to the flusher thread.
enum FlushMsg {
    /// A drain applied to the tree up to `last_seq`: flush, publish, reply.
    Applied { last_seq: u64, replies: Replies },
    /// Answered once everything sent before it is flushed and published.
    Barrier(SyncSender<()>),
}

pub(crate) fn spawn(db: sled::Db, shared: Arc<Shared>, stats: Stats, rx: Receiver<Req>) -> std::io::Result<JoinHandle<()>> {
    let high_water = shared.high_water.load(Ordering::Acquire);
    // A rendezvous channel: the committer can hand over an applied drain only when the flusher
    // is idle. While it waits, requests queue up and become the next (larger) drain, so there is
    // at most one applied drain waiting per flush — each sled batch costs log I/O of its own, and
    // many small batches per flush would multiply it.
    let (ftx, frx) = mpsc::sync_channel(0);
    let (fdb, fshared) = (db.clone(), shared.clone());
    let flusher = std::thread::Builder::new().name("oll-flusher".into()).spawn(move || flusher(fdb, fshared, frx))?;
    let mut c = Committer { db, shared, high_water, stats, flusher: Some((ftx, flusher)), services: HashSet::new() };
    std::thread::Builder::new().name("oll-committer".into()).spawn(move || c.run(rx))
}

/// The flusher: one flush covers every drain applied before it (the committer keeps staging
/// and applying the next drain meanwhile — a two-stage pipeline). Publication strictly follows
/// the flush, and sequences are published in order because drains arrive in order.
fn flusher(db: sled::Db, shared: Arc<Shared>, rx: Receiver<FlushMsg>) {
    while let Ok(first) = rx.recv() {
        let mut msgs = vec![first];
        while let Ok(m) = rx.try_recv() {
            msgs.push(m);
        }
        let mut last = None;
        let mut replies = Vec::new();
        let mut barriers = Vec::new();
        for m in msgs {
            match m {
                FlushMsg::Applied { last_seq, replies: r } => {
                    last = Some(last_seq);
                    replies.extend(r);
                }
                FlushMsg::Barrier(b) => barriers.push(b),
            }
        }
        if let Some(last) = last {
            let failed = shared.failed.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let outcome = match failed {
                Some(f) => Err(StoreError::Failed(f)),
                None => db.flush().map(|_| ()).map_err(StoreError::io("flushing committed groups")),
            };
            match outcome {
                Ok(()) => {
                    crash_point("after-flush");
                    publish(&shared, last);
                    for (reply, r) in replies {
                        let _ = reply.send(r);
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    mark_failed(&shared, &msg);
                    for (reply, r) in replies {
                        let _ = reply.send(match r {
                            Ok(Some(_)) => Err(StoreError::Failed(msg.clone())),
                            other => other,
                        });
                    }
                }
            }
        }
        for b in barriers {
            let _ = b.send(());
        }
    }
}

fn mark_failed(shared: &Shared, msg: &str) {
    let mut f = shared.failed.lock().unwrap_or_else(|p| p.into_inner());
    if f.is_none() {
        *f = Some(msg.to_string());
    }
}

/// Readers only learn of a sequence after it is durable (BRC-193 §4).
pub(crate) fn publish(shared: &Shared, hw: u64) {
    shared.high_water.store(hw, Ordering::Release);
    *shared.published_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
    shared.watch.send_replace(hw);
}

/// The meta record written with every batch: highWater and the counters.
pub(crate) fn state_record(hw: u64, stats: &Stats) -> Vec<u8> {
    let mut v = hw.to_be_bytes().to_vec();
    v.extend_from_slice(&stats.encode());
    v
}

pub(crate) fn parse_state(b: &[u8]) -> Option<(u64, Stats)> {
    if b.len() != 48 {
        return None;
    }
    Some((u64::from_be_bytes(b[..8].try_into().ok()?), Stats::decode(&b[8..])?))
}

/// Most requests taken into one drain; bounds batch size and reply latency.
const MAX_DRAIN: usize = 4096;

impl Committer {
    fn run(&mut self, rx: Receiver<Req>) {
        while let Ok(first) = rx.recv() {
            let mut reqs = vec![first];
            while reqs.len() < MAX_DRAIN {
                match rx.try_recv() {
                    Ok(r) => reqs.push(r),
                    Err(_) => break,
                }
            }
            if !self.handle(reqs) {
                break;
            }
        }
        // Close the pipeline: everything applied gets flushed, published and answered.
        if let Some((tx, handle)) = self.flusher.take() {
            drop(tx);
            let _ = handle.join();
        }
    }

    fn new_drain(&self) -> Drain {
        Drain { writes: Writes::new(), stats: self.stats, last_seq: self.high_water, replies: Vec::new() }
    }

    /// Wait until every applied drain is flushed and published.
    fn barrier(&self) {
        if let Some((tx, _)) = &self.flusher {
            let (btx, brx) = mpsc::sync_channel(1);
            if tx.send(FlushMsg::Barrier(btx)).is_ok() {
                let _ = brx.recv();
            }
        }
    }

    /// Handle a burst of requests; returns false on shutdown.
    fn handle(&mut self, reqs: Vec<Req>) -> bool {
        let mut drain = self.new_drain();
        for req in reqs {
            if let Req::Commit { due_by, .. } | Req::CommitDivisible { due_by, .. } = &req {
                // Expiries due when the change was made are numbered before it (BRC-193 §8).
                if let Some(at) = self.due_by(*due_by) {
                    let _ = self.expire(&mut drain, at);
                }
            }
            match req {
                Req::Commit { changes, mode, reply, .. } => {
                    let result = self.stage_group(&mut drain, changes, mode.policy());
                    drain.replies.push((reply, result));
                }
                Req::CommitDivisible { changes, mode, reply, .. } => {
                    let r = self.stage_divisible(&mut drain, changes, mode.policy());
                    self.answer_with_drain(&mut drain, reply, r);
                }
                Req::Sync { reply } => {
                    self.flush_drain(&mut drain);
                    self.barrier();
                    let _ = reply.send(self.failed_check());
                }
                Req::Expire { now, reply } => {
                    let r = self.expire(&mut drain, now);
                    self.answer_with_drain(&mut drain, reply, r);
                }
                Req::Compact { horizon, max_items, reply } => {
                    let d = std::mem::replace(&mut drain, self.new_drain());
                    self.finish(d);
                    self.barrier();
                    let r = self.failed_check().and_then(|_| compact::step(self, horizon, max_items));
                    self.note_failure(&r);
                    drain = self.new_drain();
                    let _ = reply.send(r);
                }
                Req::Reset { first, reply } => {
                    let d = std::mem::replace(&mut drain, self.new_drain());
                    self.finish(d);
                    self.barrier(); // no older sequence may be published after the reset
                    let r = self.failed_check().and_then(|_| self.reset(first));
                    self.note_failure(&r);
                    drain = self.new_drain();
                    let _ = reply.send(r);
                }
                Req::Shutdown => {
                    self.finish(drain);
                    return false;
                }
            }
        }
        self.finish(drain);
        true
    }

    /// `at` (a change's time, Unix seconds) when an expiry timer is due by it.
    fn due_by(&self, at: Option<u64>) -> Option<u64> {
        let at = at?;
        (self.shared.next_timer.load(Ordering::Acquire) <= at).then_some(at)
    }

    /// Commits the expiries due at `now` (read from the tree, so what is staged so far is
    /// applied first) and waits until they are published: only then does `next_timer` move
    /// past them, so a reader that finds no timer due already sees their withdraws.
    fn expire(&mut self, drain: &mut Drain, now: u64) -> Result<Option<u64>, StoreError> {
        self.failed_check()?;
        self.flush_drain(drain);
        let r = due_expiries(&self.db, now).and_then(|changes| self.stage_divisible(drain, changes, Policy::Refuse));
        self.flush_drain(drain);
        self.barrier();
        let exact = first_timer(&self.db).inspect(|first| self.shared.next_timer.store(*first, Ordering::Release));
        r.and_then(|seq| exact.map(|_| seq))
    }

    /// Applies what is staged in `drain` and starts it anew after what was applied.
    fn flush_drain(&mut self, drain: &mut Drain) {
        let d = std::mem::replace(drain, self.new_drain());
        self.finish(d);
        // Made after the finish: it numbers on from what the finish applied.
        *drain = self.new_drain();
    }

    /// Replies once the drain holding the result's groups is durable; an error at once.
    fn answer_with_drain(&self, drain: &mut Drain, reply: Reply<Option<u64>>, r: Result<Option<u64>, StoreError>) {
        match r {
            Ok(seq) => drain.replies.push((reply, Ok(seq))),
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    /// Stages `changes` as consecutive groups that each fit the budget (see
    /// `Store::commit_divisible`). On error nothing of them stays staged.
    fn stage_divisible(&mut self, drain: &mut Drain, changes: Vec<Change>, policy: Policy) -> Result<Option<u64>, StoreError> {
        self.failed_check()?;
        if changes.is_empty() {
            return Ok(None);
        }
        // Whatever was staged before is applied first, so a failure here discards only these.
        self.flush_drain(drain);
        let chunks = self.partition(drain, changes)?;
        let mut last = None;
        for chunk in chunks {
            match self.stage_group(drain, chunk, policy) {
                Ok(Some(seq)) => last = Some(seq),
                Ok(None) => {}
                Err(e) => {
                    *drain = self.new_drain();
                    return Err(e);
                }
            }
        }
        Ok(last)
    }

    /// Splits `changes`, in order, into runs whose widest observations fit the budget for
    /// every service (one run without a budget). Each change's observations are read from the
    /// state before it; the changes of a divisible commit touch distinct rows, so that is the
    /// state it is applied to.
    fn partition(&self, drain: &Drain, changes: Vec<Change>) -> Result<Vec<Vec<Change>>, StoreError> {
        let Some(budget) = self.budget() else { return Ok(vec![changes]) };
        let txn = Txn::new(&self.db, &drain.writes, drain.stats);
        let mut runs = Vec::new();
        let mut run: Vec<Change> = Vec::new();
        let mut tally = Tally::default();
        let mut shapes = Vec::new();
        for c in changes {
            shapes.clear();
            widest_of_change(&txn, &c, &mut shapes)?;
            let mut with = tally.clone();
            for sh in &shapes {
                with.add(&*budget, change_service(&c), sh);
            }
            let seq = drain.last_seq + 1 + runs.len() as u64;
            if !run.is_empty() && !shapes.is_empty() && with.misfit(&*budget, seq).is_some() {
                runs.push(std::mem::take(&mut run));
                tally = Tally::default();
                for sh in &shapes {
                    tally.add(&*budget, change_service(&c), sh);
                }
            } else {
                tally = with;
            }
            run.push(c);
        }
        if !run.is_empty() {
            runs.push(run);
        }
        Ok(runs)
    }

    fn budget(&self) -> Option<Arc<dyn GroupBudget>> {
        self.shared.budget.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Refuses a group that no session could ever be served (BRC-193 §8).
    fn check_budget(&self, txn: &Txn, seq: u64, group: &LogGroup) -> Result<(), StoreError> {
        let Some(budget) = self.budget() else { return Ok(()) };
        let mut tally = Tally::default();
        for inv in &group.invalidations {
            let shape = Shape::Invalidated { context_id: inv.context_id.clone(), reason: inv.reason.clone() };
            tally.add(&*budget, &inv.service, &shape);
        }
        let mut shapes = Vec::new();
        for ch in &group.changes {
            shapes.clear();
            widest_of_log(txn, ch, &mut shapes)?;
            for sh in &shapes {
                tally.add(&*budget, &ch.service, sh);
            }
        }
        match tally.misfit(&*budget, seq) {
            None => Ok(()),
            Some((service, n)) => Err(StoreError::TooLarge(format!(
                "this group gives a session of {service} {n} observations, more than the provider can ever serve in one batch ({})",
                budget.describe()
            ))),
        }
    }

    fn failed_check(&self) -> Result<(), StoreError> {
        match self.shared.failed.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            Some(msg) => Err(StoreError::Failed(msg)),
            None => Ok(()),
        }
    }

    fn note_failure<T>(&mut self, r: &Result<T, StoreError>) {
        if let Err(e @ StoreError::Io { .. }) = r {
            mark_failed(&self.shared, &e.to_string());
        }
    }

    /// Stage one group into the drain; on error nothing of it is staged.
    fn stage_group(&mut self, drain: &mut Drain, changes: Vec<Change>, policy: Policy) -> Result<Option<u64>, StoreError> {
        self.failed_check()?;
        let seq = drain.last_seq + 1;
        let mut txn = Txn::new(&self.db, &drain.writes, drain.stats).with_known_services(&self.services);
        let mut unservable = false;
        let result = apply_changes(&mut txn, seq, changes).and_then(|group| {
            match self.check_budget(&txn, seq, &group) {
                // Recorded all the same: sessions that reach it are told `permanent-group`.
                Err(StoreError::TooLarge(_)) if matches!(policy, Policy::Record { .. }) => unservable = true,
                r => r?,
            }
            if !record_group(&mut txn, seq, group) {
                return Ok(None);
            }
            self.check_caps(&drain.stats, &txn.stats, policy)?;
            Ok(Some(seq))
        });
        // Found markers are stored whatever became of this group: the cache stays exact.
        let Txn { writes, stats, found_services, .. } = txn;
        self.services.extend(found_services);
        if let Ok(Some(seq)) = result {
            drain.writes.extend(writes);
            drain.stats = stats;
            drain.last_seq = seq;
            if unservable {
                self.shared.unservable_groups.fetch_add(1, Ordering::Relaxed);
                policy.note(|n| n.unservable += 1);
            }
        }
        result
    }

    /// Caps apply only to growth: a group that shrinks the store always commits. A recorded
    /// group goes beyond either cap, and that is noted: what it records already happened in
    /// the Engine, and no promised history is discarded to make room (BRC-193 §4; opens are
    /// refused instead while the store is over `max_retained_bytes`, see `Store::over_retained`).
    fn check_caps(&self, before: &Stats, after: &Stats, policy: Policy) -> Result<(), StoreError> {
        if let Some(limit) = self.shared.max_rows {
            if after.live_rows > limit && after.live_rows > before.live_rows {
                match policy {
                    Policy::Refuse => return Err(StoreError::Limit { what: "rows", limit }),
                    Policy::Record { .. } => policy.note(|n| n.over_cap = true),
                }
            }
        }
        if let Some(limit) = self.shared.max_retained_bytes {
            if after.retained() > limit && after.retained() > before.retained() {
                match policy {
                    Policy::Record { .. } => policy.note(|n| n.over_cap = true),
                    Policy::Refuse => return Err(StoreError::Limit { what: RETAINED_BYTES, limit }),
                }
            }
        }
        Ok(())
    }

    /// Apply the drain as one atomic batch and hand it to the flusher, which flushes, then
    /// publishes and replies. Drains without writes are answered at once.
    fn finish(&mut self, drain: Drain) {
        let Drain { mut writes, stats, last_seq, replies } = drain;
        if writes.is_empty() {
            for (reply, r) in replies {
                let _ = reply.send(r);
            }
            return;
        }
        writes.insert(keys::meta("state"), Some(state_record(last_seq, &stats)));
        let touches_timers = writes.keys().any(|k| k.first() == Some(&keys::TIMER));
        let mut outcome = self.apply(writes, "committing a group");
        if touches_timers && outcome.is_ok() {
            // After the apply and before the publish: see `Store::apply_expiries`.
            outcome = self.note_timers();
        }
        self.note_failure(&outcome);
        match outcome {
            Ok(()) => {
                crash_point("after-write");
                self.high_water = last_seq;
                self.set_stats(stats);
                let msg = FlushMsg::Applied { last_seq, replies };
                if let Some((tx, _)) = &self.flusher {
                    if let Err(mpsc::SendError(FlushMsg::Applied { replies, .. })) = tx.send(msg) {
                        for (reply, _) in replies {
                            let _ = reply.send(Err(StoreError::Closed));
                        }
                    }
                }
            }
            Err(e) => {
                let msg = e.to_string();
                for (reply, r) in replies {
                    let _ = reply.send(match r {
                        Ok(Some(_)) => Err(StoreError::Failed(msg.clone())),
                        other => other,
                    });
                }
            }
        }
    }

    /// The applied counters, and the retained bytes opens compare with the budget.
    pub(crate) fn set_stats(&mut self, stats: Stats) {
        self.stats = stats;
        self.shared.retained.store(stats.retained(), Ordering::Release);
    }

    /// Lowers `next_timer` to the earliest timer in the tree and wakes the timer thread when
    /// it moved earlier. It is never raised here: a removed timer may belong to a group not
    /// yet published, and `expire` raises it once that is (until then a stale earlier value
    /// only costs one expiry pass that finds nothing).
    fn note_timers(&self) -> Result<(), StoreError> {
        let first = first_timer(&self.db)?;
        if first < self.shared.next_timer.fetch_min(first, Ordering::AcqRel) {
            super::timer::kick(&self.shared);
        }
        Ok(())
    }

    /// One atomic batch (not yet flushed).
    pub fn apply(&self, writes: Writes, what: &str) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        for (k, v) in writes {
            match v {
                Some(v) => batch.insert(k, v),
                None => batch.remove(k),
            }
        }
        crash_point("before-write");
        self.db.apply_batch(batch).map_err(StoreError::io(what))
    }

    /// New epoch, empty log and index; session records (`x`) and the secret survive. Runs
    /// after a barrier, so nothing older is published afterwards. `first` becomes the new
    /// epoch's first group in the same atomic batch: no reader can observe the new epoch
    /// without it (a reset that restates the collection never shows it empty in between).
    fn reset(&mut self, first: Vec<Change>) -> Result<(String, Option<u64>), StoreError> {
        let mut writes = Writes::new();
        for table in [keys::LOG, keys::ROW, keys::CURRENT, keys::INDEX, keys::TIMER, keys::BLOB_REF, keys::BLOB, keys::SERVICE] {
            for kv in self.db.scan_prefix([table]) {
                let (k, _) = kv.map_err(StoreError::io("scanning for reset"))?;
                writes.insert(k.to_vec(), None);
            }
        }
        self.services.clear(); // the markers are deleted with everything else
        let epoch = super::new_epoch()?;
        writes.insert(keys::meta("epoch"), Some(epoch.clone().into_bytes()));
        writes.insert(keys::meta("state"), Some(state_record(0, &Stats::default())));
        writes.insert(keys::meta("compacted"), Some(0u64.to_be_bytes().to_vec()));
        writes.insert(keys::meta(super::VIEW_SINCE), None); // a new epoch starts a new view at 0
        // The deletions above are the base the first group reads through: it sees an empty store.
        let mut txn = Txn::new(&self.db, &writes, Stats::default());
        let group = apply_changes(&mut txn, 1, first)?;
        let (seq, stats) = if record_group(&mut txn, 1, group) {
            self.check_caps(&self.stats, &txn.stats, Policy::Refuse)?;
            let Txn { writes: staged, stats, .. } = txn;
            writes.extend(staged);
            (1, stats)
        } else {
            (0, Stats::default())
        };
        writes.insert(keys::meta("state"), Some(state_record(seq, &stats)));
        self.apply(writes, "resetting the epoch")?;
        self.db.flush().map_err(StoreError::io("flushing the reset"))?;
        *self.shared.epoch.write().unwrap_or_else(|p| p.into_inner()) = epoch.clone();
        self.shared.compacted.store(0, Ordering::Release);
        self.high_water = seq;
        self.set_stats(stats);
        // Exact: the old timers went with the old epoch, and the first group may add some.
        self.shared.next_timer.store(first_timer(&self.db)?, Ordering::Release);
        publish(&self.shared, seq);
        super::timer::kick(&self.shared);
        Ok((epoch, (seq > 0).then_some(seq)))
    }
}
