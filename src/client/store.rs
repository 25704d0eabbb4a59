//! The durable checkpoint store (BRC-193 §4, §8, §9; BRC-192 §2, §10.5).
//!
//! One database per path (`db.rs`: a redb file in the store's directory), one table
//! `client-v1`, key prefixes:
//!
//! | key | value |
//! |---|---|
//! | `meta/revision` | store revision, u64 big-endian |
//! | `meta/format` | key layout version, u64 big-endian ([`FORMAT`]; absent: format 1) |
//! | `meta/upgrading-from` | while an older store is being upgraded: its format, u64 big-endian |
//! | `A` id | `sid` of a source that a format-1 store kept under its old prefix (32 bytes) |
//! | `S` sid | [`SourceRecord`]: current/pending generation, next generation |
//! | `G` sid gen | [`GenRecord`]: session, scope, cursor, watermarks, receipt/acceptance counters |
//! | `R` sid gen ordinal | [`GroupRecord`]: a received group, its effects, verified/accepted |
//! | `J` sid gen groupId 0 `g` | ordinal of that group (group identity) |
//! | `J` sid gen observationId 0 `o` | ordinal of its group (observation identity) |
//! | `K` sid gen outpoint | the place of that outpoint's member row (u64: the ordinal of the group that first touched it) |
//! | `M` sid gen place outpoint | [`MemberRow`] of that generation (format 2: `M` sid gen outpoint, moved by `open`) |
//! | `Q` sid gen n | quarantined conflicting batch (equivocation) |
//! | `L` label | [`SourceKey`] JSON (so a client can find its source before opening) |
//! | `P` label | request id of an open sent but not yet committed |
//! | `~d` n | deferred writes of `J`, `K` and the journal's `Xi`, `Xe`, `Xa` keys not yet in place (`db.rs`) |
//!
//! `sid` is the source's key prefix (32 bytes): `A` id if present, else the id
//! itself, where id is [`SourceKey::id`] of `{provider, service, queryDigest}`. `gen` and
//! ordinals are u64 big-endian, `outpoint` is 32 txid bytes + u32 big-endian index.
//! Values are records in the `codec.rs` encoding (JSON from earlier versions is still
//! read). The journal's group references (`GroupRef::source`) hold `sid`.
//!
//! Format. Format 1 (no `meta/format`) hashed `access` into the source id, so a changed
//! access partition became a new source whose predecessor stayed listed, stale, for ever.
//! Format 2 keeps access in the generation's scope: the same source begins a new
//! generation (BRC-193 §5, §9). [`ClientDb::upgrade_format`] migrates a format-1 store
//! when it is opened, in one durable commit (the upgrade's last, below), so a crash
//! leaves it undone or done whole and opening again redoes the same migration: records
//! stay under their old prefix and each source gets an `A` alias to it (work in the
//! number of sources, no journal rewrite). Old sources that differ only in access become
//! one source: the alias names the one a follow label names (format 1 rewrote the label
//! at every new generation, so it is the one the follow was using), else the one with
//! the highest `highWater` (then the larger prefix); the others' generations are retired
//! in place (rows and receipts go, records stay as fences) and their source record
//! names the survivor (`merged_into`). Format 3 keeps the journal's transaction records in
//! order of first receipt instead of under their txid (`journal.rs`, `Xi` and `Xu`), and
//! member rows in order of the group that first touched them (`K`, `M`), so the records one
//! commit writes are neighbours: keyed by a hash, each dirtied a page of its own; and group
//! and observation identities in one key space (`J`, format 2's `I` and `O`), where an
//! observation's key lands beside its group's when its id extends the group's. Opening a
//! format-2 (or format-1) store first moves all three, [`MOVE_CHUNK`] keys per durable
//! commit (`move_tx_records`, `move_member_rows`, `move_identities`: bounded memory at any
//! size; a crash between commits leaves each record or row whole under one key, and opening
//! again moves the rest). The first commit of the upgrade already writes `meta/format`,
//! with `meta/upgrading-from` (the format the store had) until the last, so a version that
//! cannot read a half-moved store refuses it. Format 4 defers the writes of the small keys
//! placed by a hash (`db.rs`, "Deferred index keys"): a version that does not read the `~d`
//! records would miss them, so a format-3 store is marked format 4 when it is opened (it
//! has no deferred writes: nothing moves). The engine changed too (sled to redb,
//! `db.rs`); that copy happens before the layout upgrades, below the key layout, and
//! changes no key.
//!
//! Invariants:
//! - every mutation is one write transaction (all-or-nothing), durable before the
//!   call returns, so a cursor handed back to the caller is durable with its groups;
//! - commits are serialized by one mutex, and the database's file lock keeps a second
//!   handle out, so two cursors are never advanced concurrently for one branch;
//! - a batch is committed only against the generation's committed cursor; a stale
//!   cursor is `conflict` unless the batch is an exact replay (then a no-op);
//! - only the newest generation of a source receives; older ones are no-ops;
//! - every batch of a generation carries that generation's scope (access included);
//! - acceptance into membership follows receipt order and stops at the first
//!   unverified group; a pending generation replaces the current one only once its
//!   whole snapshot is accepted, in the same commit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::checks::{self, BatchLimits, Position};
use super::db::{be_u64, decode, key, ClientDb, Tx, REVISION_KEY};
use super::evidence;
use super::journal::Candidate;
use super::group::{GroupRecord, Membership};
use super::journal::GroupEvidence;
use super::journal::{save_tx, GroupRef, ReceiptState, TxRecord, LEGACY_TX_PREFIX};
use super::membership::{self, MemberRow, RetainedObservation};
use super::parse::{self, ParsedBatch, Phase, Scope};
use super::{ClientError, ErrorCode, SourceKey};

/// Bounded durable pending work: received but not yet accepted groups per generation.
pub const MAX_PENDING_GROUPS: u64 = 65_536;
/// Bounded quarantine per generation (the generation stops receiving after the first).
const MAX_QUARANTINE: u64 = 4;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SourceRecord {
    key: SourceKey,
    current: Option<u64>,
    pending: Option<u64>,
    next_generation: u64,
    /// A format-1 source merged into another at migration (hex `sid` of the survivor):
    /// all its generations are retired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    merged_into: Option<String>,
}

impl SourceRecord {
    fn newest(&self) -> Option<u64> {
        self.next_generation.checked_sub(1)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct GenRecord {
    generation: u64,
    session: Option<String>,
    scope: Option<Scope>,
    cursor: Option<String>,
    phase: Option<Phase>,
    snapshot_complete: bool,
    through: u64,
    high_water: u64,
    expires_at: u64,
    replay_until: u64,
    /// Groups received (next ordinal).
    received: u64,
    /// Groups accepted into membership: always a prefix of the received ones.
    accepted: u64,
    /// Received-group count when the snapshot-complete batch was committed.
    snapshot_groups: Option<u64>,
    /// When that batch was committed (ms since the Unix epoch): the generation is followed
    /// live from then on. Absent in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    snapshot_completed_at: Option<u64>,
    /// The whole snapshot is accepted.
    complete: bool,
    invalidated: Option<String>,
    retired: bool,
    quarantined: u64,
}

impl GenRecord {
    fn position(&self) -> Position {
        Position {
            session: self.session.clone(),
            scope: self.scope.clone(),
            phase: self.phase,
            snapshot_complete: self.snapshot_complete,
            through: self.through,
            expires_at: self.expires_at,
            replay_until: self.replay_until,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct QuarantineRecord {
    reason: String,
    batch: String,
}

/// Options of one commit.
#[derive(Clone, Debug)]
pub struct CommitOptions {
    /// Byte limit the client requested for this response (the profile maximum applies too).
    pub max_bytes: usize,
    pub max_observations: usize,
    /// When the batch's groups enter source membership.
    pub membership: Membership,
    /// For the open response: the label whose pending open request id this commit
    /// consumes (removed in the same write).
    pub open_label: Option<String>,
}

impl Default for CommitOptions {
    fn default() -> Self {
        CommitOptions {
            max_bytes: checks::PROFILE_MAX_BYTES,
            max_observations: checks::PROFILE_MAX_OBSERVATIONS,
            membership: Membership::Claims,
            open_label: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommitOutcome {
    pub revision: u64,
    /// Groups newly received and committed.
    pub applied: u64,
    /// Groups already held with identical content.
    pub duplicates: u64,
    /// Groups accepted into membership by this commit.
    pub accepted: u64,
    /// The generation was retired or superseded: nothing was written.
    pub ignored: bool,
    /// This commit swapped in a newly complete generation.
    pub swapped: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceCheckpoint {
    pub generation: u64,
    pub session: Option<String>,
    pub cursor: Option<String>,
    pub phase: Option<Phase>,
    pub through: u64,
    #[serde(rename = "highWater")]
    pub high_water: u64,
    #[serde(rename = "snapshotComplete")]
    pub snapshot_complete: bool,
    #[serde(rename = "expiresAt")]
    pub expires_at: u64,
    #[serde(rename = "replayUntil")]
    pub replay_until: u64,
    pub epoch: Option<String>,
    /// The generation's `scope.access` (null before its first commit).
    pub access: Option<String>,
    pub invalidated: Option<String>,
}

/// [`ClientDb::renewal`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Renewal {
    pub generation: u64,
    /// Groups received after the snapshot-complete batch.
    #[serde(rename = "liveGroups")]
    pub live_groups: u64,
    /// When the snapshot-complete batch was committed (ms since the Unix epoch); `None`
    /// for a generation completed by a version that did not record it.
    #[serde(rename = "liveSince")]
    pub live_since: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingGroup {
    pub generation: u64,
    #[serde(rename = "groupId")]
    pub group_id: String,
    pub sequence: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceState {
    pub revision: u64,
    #[serde(rename = "currentGeneration")]
    pub current_generation: Option<u64>,
    #[serde(rename = "pendingGeneration")]
    pub pending_generation: Option<u64>,
    /// The published membership is not being kept up to date: a replacement is in
    /// progress or continuity was invalidated.
    pub stale: bool,
    pub invalidated: Option<String>,
    /// Received but not yet accepted groups (at most 64 listed).
    #[serde(rename = "pendingGroups")]
    pub pending_groups: Vec<PendingGroup>,
    #[serde(rename = "pendingCount")]
    pub pending_count: u64,
    /// Receipt/acceptance counters of the newest generation.
    pub received: u64,
    pub accepted: u64,
    /// Quarantined for this source, all generations: equivocating batches, and groups whose
    /// evidence was refused at receipt (BRC-192 §8).
    pub quarantined: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberView {
    /// The row as stored.
    #[serde(flatten)]
    pub row: MemberRow,
    pub generation: u64,
    pub stale: bool,
    pub partial: bool,
}

fn pending_open_key(label: &str) -> Vec<u8> {
    let mut k = vec![b'P'];
    k.extend_from_slice(label.as_bytes());
    k
}

fn label_key(label: &str) -> Vec<u8> {
    let mut k = vec![b'L'];
    k.extend_from_slice(label.as_bytes());
    k
}

fn reset_required(m: impl Into<String>) -> ClientError {
    ClientError::new(ErrorCode::ResetRequired, m)
}

/// How a received group relates to what the generation already holds.
enum Identity {
    New,
    Duplicate,
    Equivocation(String),
}

impl ClientDb {

    pub fn revision(&self) -> Result<u64, ClientError> {
        Ok(Tx::new(&self.db).get(REVISION_KEY)?.map(|v| be_u64(&v)).unwrap_or(0))
    }

    /// Starts a new generation of `source` (first open, or after reset-required /
    /// equivocation). The current generation stays visible, marked stale, until the
    /// new one's snapshot is accepted. A still-pending older replacement is retired.
    pub fn begin_generation(&self, source: &SourceKey, label: Option<&str>) -> Result<u64, ClientError> {
        source.validate()?;
        if let Some(l) = label {
            parse::check_text("label", l)?;
        }
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let sid = sid_of(&tx, source)?;
        let mut src: SourceRecord = tx.get_json(&key(b'S', &sid, None, &[]))?.unwrap_or(SourceRecord {
            key: source.clone(),
            current: None,
            pending: None,
            next_generation: 0,
            merged_into: None,
        });
        let generation = src.next_generation;
        src.next_generation = generation.checked_add(1).ok_or_else(|| ClientError::invalid("generation overflow"))?;
        if let Some(old) = src.pending.take() {
            retire(&mut tx, &sid, old)?;
        }
        src.pending = Some(generation);
        tx.put_json(key(b'G', &sid, Some(generation), &[]), &GenRecord { generation, ..Default::default() });
        tx.put_json(key(b'S', &sid, None, &[]), &src);
        if let Some(l) = label {
            tx.put_json(label_key(l), source);
        }
        tx.bump_revision()?;
        tx.finish()?;
        Ok(generation)
    }

    /// Records the request id of an open about to be sent, so that after a crash the
    /// same open is retried with it and the provider returns its saved first batch
    /// instead of creating a second session (BRC-193 §8).
    pub fn set_pending_open(&self, label: &str, request_id: &str) -> Result<(), ClientError> {
        parse::check_text("label", label)?;
        parse::check_text("requestId", request_id)?;
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        tx.put(pending_open_key(label), request_id.as_bytes().to_vec());
        tx.finish()
    }

    pub fn pending_open(&self, label: &str) -> Result<Option<String>, ClientError> {
        let v = Tx::new(&self.db).get(&pending_open_key(label))?;
        v.map(|b| String::from_utf8(b).map_err(|_| ClientError::storage("corrupt pending open")))
            .transpose()
    }

    pub fn source_for_label(&self, label: &str) -> Result<Option<SourceKey>, ClientError> {
        Tx::new(&self.db).get_json(&label_key(label))
    }

    /// The record of the source's newest generation (`None`: unknown source, or none begun).
    fn newest_gen(&self, source: &SourceKey) -> Result<Option<GenRecord>, ClientError> {
        let tx = Tx::new(&self.db);
        let sid = sid_of(&tx, source)?;
        let Some(src) = tx.get_json::<SourceRecord>(&key(b'S', &sid, None, &[]))? else { return Ok(None) };
        let Some(newest) = src.newest() else { return Ok(None) };
        load_gen(&tx, &sid, newest).map(Some)
    }

    /// The newest generation's committed position, or `None` for an unknown source.
    pub fn checkpoint(&self, source: &SourceKey) -> Result<Option<SourceCheckpoint>, ClientError> {
        let Some(g) = self.newest_gen(source)? else { return Ok(None) };
        Ok(Some(SourceCheckpoint {
            generation: g.generation,
            session: g.session,
            cursor: g.cursor,
            phase: g.phase,
            through: g.through,
            high_water: g.high_water,
            snapshot_complete: g.snapshot_complete,
            expires_at: g.expires_at,
            replay_until: g.replay_until,
            epoch: g.scope.as_ref().map(|s| s.epoch.clone()),
            access: g.scope.map(|s| s.access),
            invalidated: g.invalidated,
        }))
    }

    /// How long the newest generation has been followed live, for a renewal schedule
    /// (`follow(..., { renew })`): the live groups it received since its snapshot
    /// completed, and when that was. `None` for an unknown source or before the snapshot
    /// completed. Kept in the store, so a restarted follow keeps counting.
    pub fn renewal(&self, source: &SourceKey) -> Result<Option<Renewal>, ClientError> {
        let Some(g) = self.newest_gen(source)? else { return Ok(None) };
        Ok(g.snapshot_groups.map(|s| Renewal { generation: g.generation, live_groups: g.received.saturating_sub(s), live_since: g.snapshot_completed_at }))
    }

    /// Commits one received batch (exact response bytes) for `generation`, after every
    /// check of BRC-193 §3/§8, against `expected_cursor` (the cursor the read used;
    /// `None` for the open response). Returns only after the commit is durable.
    pub fn commit_batch(
        &self,
        source: &SourceKey,
        generation: u64,
        expected_cursor: Option<&str>,
        body: &[u8],
        opts: &CommitOptions,
    ) -> Result<CommitOutcome, ClientError> {
        let limits = BatchLimits::new(opts.max_bytes, opts.max_observations);
        checks::check_size(body.len(), &limits)?;
        let batch = parse::parse_batch(body)?;
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let sid = sid_of(&tx, source)?;
        let mut src: SourceRecord = tx
            .get_json(&key(b'S', &sid, None, &[]))?
            .ok_or_else(|| ClientError::invalid("unknown source: begin a generation first"))?;
        let mut gen = load_gen(&tx, &sid, generation)?;
        if gen.retired || src.newest() != Some(generation) {
            // Late work from a retired or superseded generation changes nothing.
            return Ok(CommitOutcome { revision: self.revision()?, ignored: true, ..no_outcome() });
        }
        if let Some(why) = &gen.invalidated {
            return Err(reset_required(format!("source continuity invalidated ({why}): begin a new generation")));
        }
        let identities = classify(&tx, &sid, generation, &batch)?;
        if let Some(why) = identities.iter().find_map(|i| match i {
            Identity::Equivocation(w) => Some(w.clone()),
            _ => None,
        }) {
            quarantine(&mut tx, &sid, &mut gen, body, &why)?;
            tx.bump_revision()?;
            tx.finish()?;
            return Err(ClientError::new(ErrorCode::Equivocation, why));
        }
        let duplicates = identities.iter().filter(|i| matches!(i, Identity::Duplicate)).count() as u64;
        if expected_cursor != gen.cursor.as_deref() {
            // A replay of groups already committed is harmless (BRC-193 §4); anything
            // else against a stale cursor would advance a second cursor.
            if !batch.groups.is_empty() && duplicates == batch.groups.len() as u64 {
                return Ok(CommitOutcome { revision: self.revision()?, duplicates, ..no_outcome() });
            }
            return Err(ClientError::conflict("expected cursor is not the committed cursor"));
        }
        checks::check_batch(&gen.position(), source, &batch, &limits)?;
        let fresh: Vec<&parse::ParsedGroup> =
            batch.groups.iter().zip(&identities).filter(|(_, i)| matches!(i, Identity::New)).map(|(g, _)| g).collect();
        let refs: Vec<GroupRef> = (0..fresh.len() as u64)
            .map(|k| GroupRef { source: crate::bitcoin::tx::Hash32(sid), generation, ordinal: gen.received + k })
            .collect();
        let assembled = match tx.get(super::journal::META)?.is_some() {
            true => Some(evidence::assemble(&fresh, &refs)),
            false => None,
        };
        let candidates: Option<Vec<_>> = assembled.as_ref().map(|a| a.groups.iter().map(|(c, _)| c.clone()).collect());
        let applied = receive(&mut tx, &sid, &mut gen, &batch, &identities, opts.membership, candidates.as_deref())?;
        if let Some(a) = &assembled {
            receive_evidence(&mut tx, &mut gen, &batch.scope.provider, &refs, a)?;
        }
        if let (None, Some(label)) = (expected_cursor, &opts.open_label) {
            tx.writes.insert(pending_open_key(label), None);
        }
        advance_position(&mut gen, &batch);
        let (accepted, swapped) = accept(&mut tx, &sid, &mut src, &mut gen)?;
        tx.put_json(key(b'G', &sid, Some(generation), &[]), &gen);
        tx.put_json(key(b'S', &sid, None, &[]), &src);
        let revision = tx.bump_revision()?;
        tx.finish()?;
        Ok(CommitOutcome { revision, applied, duplicates, accepted, ignored: false, swapped })
    }

    /// Marks a received group verified and accepts whatever that unblocks, in order.
    pub fn mark_verified(&self, source: &SourceKey, generation: u64, group_id: &str) -> Result<CommitOutcome, ClientError> {
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let sid = sid_of(&tx, source)?;
        let mut src: SourceRecord =
            tx.get_json(&key(b'S', &sid, None, &[]))?.ok_or_else(|| ClientError::invalid("unknown source"))?;
        let mut gen = load_gen(&tx, &sid, generation)?;
        if gen.retired {
            return Ok(CommitOutcome { revision: self.revision()?, ignored: true, ..no_outcome() });
        }
        let ord = tx
            .get(&identity_key(&sid, generation, GROUP_ID, group_id))?
            .ok_or_else(|| ClientError::invalid(format!("group {group_id} was not received in this generation")))?;
        let rkey = key(b'R', &sid, Some(generation), &ord[..8]);
        let mut rec: GroupRecord = tx.get_json(&rkey)?.ok_or_else(|| ClientError::storage("group record missing"))?;
        if rec.verified {
            return Ok(CommitOutcome { revision: self.revision()?, duplicates: 1, ..no_outcome() });
        }
        rec.verified = true;
        tx.put_json(rkey, &rec);
        let (accepted, swapped) = accept(&mut tx, &sid, &mut src, &mut gen)?;
        tx.put_json(key(b'G', &sid, Some(generation), &[]), &gen);
        tx.put_json(key(b'S', &sid, None, &[]), &src);
        let revision = tx.bump_revision()?;
        tx.finish()?;
        Ok(CommitOutcome { revision, accepted, swapped, ..no_outcome() })
    }

    /// The published membership: the current generation's rows, present and absent.
    pub fn members(&self, source: &SourceKey) -> Result<Vec<MemberView>, ClientError> {
        let tx = Tx::new(&self.db);
        let sid = sid_of(&tx, source)?;
        let Some(src) = tx.get_json::<SourceRecord>(&key(b'S', &sid, None, &[]))? else { return Ok(vec![]) };
        let Some(cur) = src.current else { return Ok(vec![]) };
        let g = load_gen(&tx, &sid, cur)?;
        let stale = src.pending.is_some() || g.invalidated.is_some();
        self.rows(&sid, cur, stale, false)
    }

    /// The replacement in progress, shown explicitly as partial (BRC-193 §9).
    pub fn partial_members(&self, source: &SourceKey) -> Result<Vec<MemberView>, ClientError> {
        let tx = Tx::new(&self.db);
        let sid = sid_of(&tx, source)?;
        let Some(src) = tx.get_json::<SourceRecord>(&key(b'S', &sid, None, &[]))? else { return Ok(vec![]) };
        match src.pending {
            Some(p) => self.rows(&sid, p, false, true),
            None => Ok(vec![]),
        }
    }

    /// A generation's member rows, in outpoint order.
    fn rows(&self, sid: &[u8; 32], generation: u64, stale: bool, partial: bool) -> Result<Vec<MemberView>, ClientError> {
        let mut rows: Vec<(Vec<u8>, MemberRow)> = Vec::new();
        for (k, v) in Tx::new(&self.db).scan(&key(b'M', sid, Some(generation), &[]))? {
            rows.push((k[MEMBER_PLACE_END..].to_vec(), decode(&v)?));
        }
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(rows.into_iter().map(|(_, row)| MemberView { row, generation, stale, partial }).collect())
    }

    pub fn state(&self, source: &SourceKey) -> Result<SourceState, ClientError> {
        let tx = Tx::new(&self.db);
        let sid = sid_of(&tx, source)?;
        let revision = self.revision()?;
        let Some(src) = tx.get_json::<SourceRecord>(&key(b'S', &sid, None, &[]))? else {
            return Ok(SourceState {
                revision,
                current_generation: None,
                pending_generation: None,
                stale: false,
                invalidated: None,
                pending_groups: vec![],
                pending_count: 0,
                received: 0,
                accepted: 0,
                quarantined: 0,
            });
        };
        let mut pending_groups = Vec::new();
        let mut pending_count = 0;
        let mut invalidated = None;
        for g in [src.current, src.pending].into_iter().flatten() {
            let rec = load_gen(&tx, &sid, g)?;
            if rec.invalidated.is_some() {
                invalidated = rec.invalidated.clone();
            }
            pending_count += rec.received - rec.accepted;
            for ord in rec.accepted..rec.received.min(rec.accepted + 64) {
                if pending_groups.len() >= 64 {
                    break;
                }
                let r: GroupRecord = tx
                    .get_json(&key(b'R', &sid, Some(g), &ord.to_be_bytes()))?
                    .ok_or_else(|| ClientError::storage("group record missing"))?;
                pending_groups.push(PendingGroup { generation: g, group_id: r.id, sequence: r.sequence });
            }
        }
        let newest = match src.newest() {
            Some(n) => load_gen(&tx, &sid, n)?,
            None => GenRecord::default(),
        };
        if newest.invalidated.is_some() {
            invalidated = newest.invalidated.clone();
        }
        // Quarantined claims are kept across generations (retiring does not drop them).
        let mut quarantined = 0;
        for g in 0..src.next_generation {
            quarantined += load_gen(&tx, &sid, g)?.quarantined;
        }
        let cur_invalid = match src.current {
            Some(c) => load_gen(&tx, &sid, c)?.invalidated.is_some(),
            None => false,
        };
        Ok(SourceState {
            revision,
            current_generation: src.current,
            pending_generation: src.pending,
            stale: src.current.is_some() && (src.pending.is_some() || cur_invalid),
            invalidated,
            pending_groups,
            pending_count,
            received: newest.received,
            accepted: newest.accepted,
            quarantined,
        })
    }
}



fn no_outcome() -> CommitOutcome {
    CommitOutcome { revision: 0, applied: 0, duplicates: 0, accepted: 0, ignored: false, swapped: false }
}

fn load_gen(tx: &Tx, sid: &[u8; 32], generation: u64) -> Result<GenRecord, ClientError> {
    tx.get_json(&key(b'G', sid, Some(generation), &[]))?
        .ok_or_else(|| ClientError::invalid(format!("unknown generation {generation}")))
}

/// The kinds of [`identity_key`].
const GROUP_ID: u8 = b'g';
const OBSERVATION_ID: u8 = b'o';

/// The identity key of a group (`GROUP_ID`) or an observation (`OBSERVATION_ID`) in
/// generation `g`: one key space for both, the id first and then its kind (after a zero
/// byte, so the key names one (id, kind) pair whatever bytes the id holds). An observation
/// whose id extends its group's, as this package's provider names them, lands beside the
/// group's key, so a received group dirties one page of the index instead of two.
fn identity_key(sid: &[u8; 32], g: u64, kind: u8, id: &str) -> Vec<u8> {
    key(b'J', sid, Some(g), &[id.as_bytes(), &[0, kind]].concat())
}

/// Group and observation identity against what this generation already holds
/// (dedupe key: source scope + generation + id, BRC-192 §2).
fn classify(tx: &Tx, sid: &[u8; 32], generation: u64, b: &ParsedBatch) -> Result<Vec<Identity>, ClientError> {
    let mut out = Vec::with_capacity(b.groups.len());
    for g in &b.groups {
        let digest = hex::encode(g.digest);
        if let Some(ord) = tx.get(&identity_key(sid, generation, GROUP_ID, &g.id))? {
            let rec: GroupRecord = tx
                .get_json(&key(b'R', sid, Some(generation), &ord[..8]))?
                .ok_or_else(|| ClientError::storage("group record missing"))?;
            out.push(if rec.digest == digest {
                Identity::Duplicate
            } else {
                Identity::Equivocation(format!("group {} replayed with different content", g.id))
            });
            continue;
        }
        let mut id = Identity::New;
        for o in &g.observations {
            if tx.get(&identity_key(sid, generation, OBSERVATION_ID, &o.id))?.is_some() {
                id = Identity::Equivocation(format!("observation {} reappeared in another group", o.id));
                break;
            }
        }
        out.push(id);
    }
    Ok(out)
}

/// Keeps the conflicting claim (bounded) and invalidates the generation's continuity.
fn quarantine(tx: &mut Tx, sid: &[u8; 32], gen: &mut GenRecord, body: &[u8], why: &str) -> Result<(), ClientError> {
    use base64::Engine;
    if gen.quarantined < MAX_QUARANTINE {
        let rec = QuarantineRecord {
            reason: why.to_string(),
            batch: base64::engine::general_purpose::STANDARD.encode(body),
        };
        tx.put_json(key(b'Q', sid, Some(gen.generation), &gen.quarantined.to_be_bytes()), &rec);
    }
    gen.quarantined += 1;
    gen.invalidated = Some("equivocation".into());
    tx.put_json(key(b'G', sid, Some(gen.generation), &[]), gen);
    Ok(())
}

/// Stores the new groups as durable receipts (pending work until accepted), each
/// with its evidence candidates when the reconciler tracks evidence.
fn receive(
    tx: &mut Tx,
    sid: &[u8; 32],
    gen: &mut GenRecord,
    b: &ParsedBatch,
    identities: &[Identity],
    gate: Membership,
    candidates: Option<&[std::collections::BTreeSet<Candidate>]>,
) -> Result<u64, ClientError> {
    let fresh = identities.iter().filter(|i| matches!(i, Identity::New)).count() as u64;
    if gen.received - gen.accepted + fresh > MAX_PENDING_GROUPS {
        return Err(ClientError::new(ErrorCode::Limited, "too many groups awaiting acceptance"));
    }
    let g = gen.generation;
    let new_groups = b.groups.iter().zip(identities).filter(|(_, i)| matches!(i, Identity::New));
    for (k, (group, _)) in new_groups.enumerate() {
        let ord = gen.received;
        let rec = GroupRecord {
            id: group.id.clone(),
            sequence: group.sequence,
            phase: b.phase,
            digest: hex::encode(group.digest),
            observations: group
                .observations
                .iter()
                .map(|o| RetainedObservation { id: o.id.clone(), effect: o.effect.clone() })
                .collect(),
            verified: gate == Membership::Claims,
            accepted: false,
            gate,
            candidates: candidates.map(|c| c[k].iter().copied().collect()).unwrap_or_default(),
            evidence: candidates.map(|_| GroupEvidence::Pending),
            evidence_reason: None,
        };
        tx.put_json(key(b'R', sid, Some(g), &ord.to_be_bytes()), &rec);
        tx.put(identity_key(sid, g, GROUP_ID, &group.id), ord.to_be_bytes().to_vec());
        for o in &group.observations {
            tx.put(identity_key(sid, g, OBSERVATION_ID, &o.id), ord.to_be_bytes().to_vec());
        }
        gen.received += 1;
    }
    Ok(fresh)
}

/// The batch's evidence enters the reconciliation journal in the commit that receives
/// it, at one new ingress position (BRC-192 §10.2); groups whose candidates already
/// all have verdicts settle at once. A group whose own evidence is refused at receipt is
/// quarantined and invalidates the generation's continuity under every membership rule;
/// invalid evidence found later does so under the `verified` rule (BRC-192 §8: a new
/// generation must follow).
/// An invalid member's group is quarantined (it never applies: `accept`) and the
/// generation's continuity invalidated, whatever the membership rule (BRC-192 §8).
fn invalidate_for_evidence(gen: &mut GenRecord, why: &str) {
    gen.quarantined += 1;
    if gen.invalidated.is_none() {
        gen.invalidated = Some(format!("invalid-evidence: {why}"));
    }
}

fn receive_evidence(
    tx: &mut Tx,
    gen: &mut GenRecord,
    provider: &str,
    refs: &[GroupRef],
    assembled: &evidence::Assembled,
) -> Result<(), ClientError> {
    let refusals = assembled.groups.iter().any(|(_, r)| !r.is_empty());
    let mut comps = std::collections::BTreeSet::new();
    if !assembled.items.is_empty() || refusals {
        let (position, touched) = super::reconcile::receive_in(tx, provider, &assembled.items, &assembled.bundles)?;
        comps.extend(touched);
        let at = super::journal::IngressPosition { position, index: 0 };
        for ((_, refused), gref) in assembled.groups.iter().zip(refs) {
            evidence::record_refusals(tx, refused, at, provider, gref)?;
        }
    }
    let mut settled = evidence::Settled::default();
    let mut judge = std::collections::BTreeSet::new();
    for ((_, refused), gref) in assembled.groups.iter().zip(refs) {
        match refused.is_empty() {
            true => judge.insert(*gref),
            false => {
                let invalid_before = settled.invalid.len();
                evidence::refuse(tx, gref, refused, &mut settled)?;
                // An invalid member, whatever the rule: the whole group is quarantined (it
                // never applies, see accept) and the source's continuity is invalidated.
                if let Some((_, why)) = settled.invalid.get(invalid_before) {
                    invalidate_for_evidence(gen, why);
                }
                false
            }
        };
    }
    let judged = evidence::settle(tx, &judge)?;
    settled.components.extend(judged.components);
    comps.extend(settled.components);
    super::reconcile::recompute_components(tx, &comps)?;
    // A group judged invalid now (its verdicts were known already): as a refusal at receipt,
    // under every rule (BRC-192 §8).
    for (_, why) in judged.invalid {
        invalidate_for_evidence(gen, &why);
    }
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn advance_position(gen: &mut GenRecord, b: &ParsedBatch) {
    gen.session = Some(b.session.clone());
    gen.scope = Some(b.scope.clone());
    gen.cursor = Some(b.cursor.clone());
    gen.phase = Some(b.phase);
    gen.snapshot_complete = b.snapshot_complete;
    gen.through = b.through;
    gen.high_water = b.high_water;
    gen.expires_at = b.expires_at;
    gen.replay_until = b.replay_until;
    if b.phase == Phase::Snapshot && b.snapshot_complete {
        gen.snapshot_groups = Some(gen.received);
        gen.snapshot_completed_at = Some(now_ms());
    }
}

// --- member rows ---------------------------------------------------------------------

/// Where a member row's key ends its place and begins its outpoint (`M` sid gen place).
const MEMBER_PLACE_END: usize = 1 + 32 + 8 + 8;

/// The row of outpoint `op` (its key bytes) in generation `g`, with its place: the ordinal
/// of the group that first touched it (module docs, `K` and `M`).
fn load_member(tx: &Tx, sid: &[u8; 32], g: u64, op: &[u8]) -> Result<Option<(u64, MemberRow)>, ClientError> {
    let Some(place) = tx.get(&key(b'K', sid, Some(g), op))? else { return Ok(None) };
    let place = <[u8; 8]>::try_from(place.as_slice()).map(u64::from_be_bytes).map_err(|_| ClientError::storage("corrupt member index"))?;
    let row = tx.get_json(&member_key(sid, g, place, op))?.ok_or_else(|| ClientError::storage("indexed member row missing"))?;
    Ok(Some((place, row)))
}

/// Writes a member row: the one place rows are written. A new row takes the place of the
/// group being accepted (`ordinal`), and its index key is written once; a row keeps its
/// place for as long as its generation lives, so the rows a commit accepts are neighbours
/// (keyed by outpoint, each landed on a page of its own; bench/client-layout-results.md).
fn save_member(tx: &mut Tx, sid: &[u8; 32], g: u64, place: Option<u64>, ordinal: u64, op: &[u8], row: &MemberRow) {
    let place = place.unwrap_or_else(|| {
        tx.put(key(b'K', sid, Some(g), op), ordinal.to_be_bytes().to_vec());
        ordinal
    });
    tx.put_json(member_key(sid, g, place, op), row);
}

fn member_key(sid: &[u8; 32], g: u64, place: u64, op: &[u8]) -> Vec<u8> {
    key(b'M', sid, Some(g), &[place.to_be_bytes().as_slice(), op].concat())
}

/// Accepts verified groups in receipt order (snapshot order, then ascending live
/// sequence), stopping at the first unverified one; then, if the whole snapshot is
/// accepted, publishes the generation, swapping out the one it replaces.
fn accept(tx: &mut Tx, sid: &[u8; 32], src: &mut SourceRecord, gen: &mut GenRecord) -> Result<(u64, bool), ClientError> {
    let g = gen.generation;
    let mut n = 0;
    while gen.accepted < gen.received {
        let rkey = key(b'R', sid, Some(g), &gen.accepted.to_be_bytes());
        let mut rec: GroupRecord = tx.get_json(&rkey)?.ok_or_else(|| ClientError::storage("group record missing"))?;
        // A group with invalid evidence (refused at receipt: it does not hold the named
        // transaction or output; or judged invalid) is quarantined under every rule:
        // nothing of it is applied, not even by markVerified.
        let refused = rec.evidence == Some(GroupEvidence::Invalid);
        if !rec.verified && !refused {
            break;
        }
        if refused {
            rec.accepted = true;
            tx.put_json(rkey, &rec);
            gen.accepted += 1;
            n += 1;
            continue;
        }
        let mut rows = BTreeMap::new();
        let mut places = BTreeMap::new();
        for op in membership::touched(&rec.observations) {
            let k = op.key();
            if let Some((place, r)) = load_member(tx, sid, g, &k)? {
                rows.insert(k.clone(), r);
                places.insert(k, place);
            }
        }
        membership::apply_group(&mut rows, rec.phase, rec.sequence, &rec.observations);
        for (k, r) in &rows {
            save_member(tx, sid, g, places.get(k).copied(), gen.accepted, k, r);
        }
        rec.accepted = true;
        tx.put_json(rkey, &rec);
        gen.accepted += 1;
        n += 1;
    }
    let mut swapped = false;
    if !gen.complete && gen.snapshot_groups.is_some_and(|s| gen.accepted >= s) {
        gen.complete = true;
        if src.pending == Some(g) {
            if let Some(old) = src.current.take() {
                retire(tx, sid, old)?;
            }
            src.current = Some(g);
            src.pending = None;
            swapped = true;
        }
    }
    Ok((n, swapped))
}

impl ClientDb {
    /// Accepts verification results, all in one commit. A result for another context
    /// than the current one is stale and not recorded; unresolved, cancelled and
    /// context-changed results leave the job pending. Groups whose candidates now all
    /// have verdicts are settled in the same commit (`evidence::settle`), and the
    /// generations they unblock accept what follows.
    pub fn accept_verifications(&self, results: &[super::reconcile::VerificationResult]) -> Result<super::reconcile::StepOutcome, ClientError> {
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let mut out = super::reconcile::StepOutcome::default();
        let Some(settled) = super::reconcile::apply_verifications(&mut tx, results, &mut out)? else {
            out.revision = self.revision()?;
            return Ok(out);
        };
        after_settle(&mut tx, &settled)?;
        out.revision = tx.bump_revision()?;
        crate::store::crash::crash_point("client-accept");
        tx.finish()?;
        Ok(out)
    }
}

/// After evidence settled outside a receipt (verification results, a budget change):
/// each generation holding a settled group accepts what it now unblocks, and a group
/// under the `verified` rule with invalid evidence invalidates its generation.
pub(crate) fn after_settle(tx: &mut Tx, settled: &evidence::Settled) -> Result<(), ClientError> {
    let mut gens = std::collections::BTreeSet::new();
    gens.extend(settled.verified.iter().map(|g| (g.source, g.generation)));
    gens.extend(settled.invalid.iter().map(|(g, _)| (g.source, g.generation)));
    for (source, generation) in gens {
        let sid = source.0;
        let Some(mut src) = tx.get_json::<SourceRecord>(&key(b'S', &sid, None, &[]))? else { continue };
        let mut gen = load_gen(tx, &sid, generation)?;
        if gen.retired {
            continue;
        }
        // Judged invalid by verification after receipt: under every rule, as at receipt
        // (BRC-192 §8). Under `claims` its rows were listed at receipt; they stay until the
        // new generation the invalidation calls for replaces them.
        for (_, why) in settled.invalid.iter().filter(|(g, _)| g.source == source && g.generation == generation) {
            invalidate_for_evidence(&mut gen, why);
        }
        accept(tx, &sid, &mut src, &mut gen)?;
        tx.put_json(key(b'G', &sid, Some(generation), &[]), &gen);
        tx.put_json(key(b'S', &sid, None, &[]), &src);
    }
    Ok(())
}

/// Retires a generation: its rows and receipts go (only this source's), and its
/// record stays as a fence so late work from it is a no-op.
fn retire(tx: &mut Tx, sid: &[u8; 32], generation: u64) -> Result<(), ClientError> {
    // Evidence of its groups still waiting for verdicts no longer holds a barrier:
    // those receipts will never count (the evidence stays in the journal).
    let mut comps = std::collections::BTreeSet::new();
    for (k, v) in tx.scan(&key(b'R', sid, Some(generation), &[]))? {
        let rec: GroupRecord = decode(&v)?;
        if rec.evidence == Some(GroupEvidence::Pending) {
            let gref = GroupRef { source: crate::bitcoin::tx::Hash32(*sid), generation, ordinal: be_u64(&k[41..49]) };
            evidence::set_receipts(tx, &gref, &rec.candidates, ReceiptState::Refused, &mut comps)?;
        }
    }
    super::reconcile::recompute_components(tx, &comps)?;
    for tag in [b'M', b'K', b'R', b'J'] {
        tx.delete_prefix(&key(tag, sid, Some(generation), &[]))?;
    }
    let mut g = load_gen(tx, sid, generation)?;
    g.retired = true;
    tx.put_json(key(b'G', sid, Some(generation), &[]), &g);
    Ok(())
}

impl ClientDb {
    /// Published memberships of every source (current generations), as §10.5
    /// `SourceMembership` rows sorted by scope, generation and outpoint.
    pub fn memberships_json(&self, chain: &parse::Chain) -> Result<Vec<serde_json::Value>, ClientError> {
        let tx = Tx::new(&self.db);
        let mut rows = Vec::new();
        for (k, v) in tx.scan(b"S")? {
            let src: SourceRecord = decode(&v)?;
            let Some(cur) = src.current else { continue };
            let sid = sid_in(&k)?;
            let g = load_gen(&tx, &sid, cur)?;
            let scope = serde_json::to_value(&g.scope).expect("scope serializes");
            for m in self.rows(&sid, cur, false, false)? {
                let r = m.row;
                let sort = (scope.to_string(), cur, r.outpoint.clone());
                rows.push((
                    sort,
                    serde_json::json!({
                        "scope": scope, "generation": cur.to_string(),
                        "outpoint": {"chain": chain, "txid": r.outpoint.txid, "outputIndex": r.outpoint.output_index},
                        "present": r.present, "phase": r.phase.as_str(), "sequence": r.sequence.to_string(),
                        "observationId": r.observation_id,
                    }),
                ));
            }
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(rows.into_iter().map(|(_, v)| v).collect())
    }
}

// --- source identity and the store format ------------------------------------------

/// The key layout this version writes (`meta/format`; see the module docs, "Format").
pub const FORMAT: u64 = 4;
const FORMAT_KEY: &[u8] = b"meta/format";
/// While an older store is being brought to [`FORMAT`]: the format it had (u64; 1 for a
/// store without `meta/format`). The upgrade's first commit writes it with `meta/format`,
/// its last removes it (`upgrade_format`).
const UPGRADING_KEY: &[u8] = b"meta/upgrading-from";

fn alias_key(id: &[u8; 32]) -> Vec<u8> {
    key(b'A', id, None, &[])
}

/// The key prefix of `source`'s records: where a format-1 store kept them (its `A`
/// alias), else the source id itself.
fn sid_of(tx: &Tx, source: &SourceKey) -> Result<[u8; 32], ClientError> {
    let id = source.id();
    match tx.get(&alias_key(&id))? {
        None => Ok(id),
        Some(v) => v.as_slice().try_into().map_err(|_| ClientError::storage("corrupt source alias")),
    }
}

/// The `sid` of an `S` record's key.
fn sid_in(k: &[u8]) -> Result<[u8; 32], ClientError> {
    k.get(1..).and_then(|s| s.try_into().ok()).ok_or_else(|| ClientError::storage("corrupt source key"))
}

/// A source key as format 1 wrote it (in `S` records and `L` labels), access included.
#[derive(Deserialize)]
struct LegacySourceKey {
    provider: String,
    service: String,
    #[serde(rename = "queryDigest")]
    query_digest: String,
    access: String,
}

impl LegacySourceKey {
    /// Format 1's `sid`: the source id with access as a fourth field.
    fn sid(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for f in [&self.provider, &self.service, &self.query_digest, &self.access] {
            h.update((f.len() as u64).to_be_bytes());
            h.update(f.as_bytes());
        }
        h.finalize().into()
    }
}

impl ClientDb {
    /// Brings the store to [`FORMAT`] (called by `open`): a new store is marked, an older
    /// one is migrated (module docs, "Format"): marked [`FORMAT`] with what it was, its
    /// records moved in bounded commits, then the format-1 step if it was format 1 and
    /// the mark removed. A crash anywhere leaves a store that says [`FORMAT`] and what is
    /// left, so the next open goes on and an older version refuses it. A store written by
    /// a newer version is refused (`unsupported`).
    pub(crate) fn upgrade_format(&self) -> Result<(), ClientError> {
        let _g = self.guard();
        let tx = Tx::new(&self.db);
        let (from, begun) = match tx.get(FORMAT_KEY)? {
            Some(v) if v.len() == 8 && be_u64(&v) == FORMAT => match tx.get(UPGRADING_KEY)? {
                None => return Ok(()),
                Some(f) if f.len() == 8 => (be_u64(&f), true),
                Some(_) => return Err(ClientError::storage("corrupt store upgrade marker")),
            },
            Some(v) if v.len() == 8 && be_u64(&v) > FORMAT => {
                return Err(ClientError::unsupported(format!(
                    "checkpoint store format {} is newer than this version's ({FORMAT})",
                    be_u64(&v)
                )))
            }
            // Format 3 lacks only the deferred index records (db.rs), which start empty.
            Some(v) if v.len() == 8 && matches!(be_u64(&v), 2 | 3) => (be_u64(&v), false),
            Some(_) => return Err(ClientError::storage("corrupt store format")),
            // A new store is marked in one commit: nothing to move.
            None if tx.committed_keys(b"", None, 1)?.is_empty() => {
                let mut tx = Tx::new(&self.db);
                tx.put(FORMAT_KEY.to_vec(), FORMAT.to_be_bytes().to_vec());
                return tx.finish();
            }
            None => (1, false),
        };
        drop(tx);
        if !begun {
            // From here on the store says [`FORMAT`], so a version that cannot read a
            // half-moved store refuses it; the marker says what is left to do.
            let mut tx = Tx::new(&self.db);
            tx.put(FORMAT_KEY.to_vec(), FORMAT.to_be_bytes().to_vec());
            tx.put(UPGRADING_KEY.to_vec(), from.to_be_bytes().to_vec());
            tx.finish()?;
        }
        move_tx_records(&self.db)?;
        move_member_rows(&self.db)?;
        move_identities(&self.db)?;
        let mut tx = Tx::new(&self.db);
        if from == 1 && migrate_from_v1(&mut tx)? {
            tx.bump_revision()?;
        }
        tx.writes.insert(UPGRADING_KEY.to_vec(), None);
        // Fail point for the crash tests: the migration built, nothing written.
        crate::store::crash::crash_point("client-migrate");
        tx.finish()
    }
}

/// Entries moved per durable commit by [`move_chunked`]: what one commit holds in memory
/// is bounded, whatever the store's size.
pub const MOVE_CHUNK: usize = 4096;

/// The length of a member row's key in format 2: `M` sid gen outpoint (no place).
const LEGACY_MEMBER_KEY: usize = 1 + 32 + 8 + 36;

/// One step of the format-2-to-3 move: every entry under `prefix` that `still_to_move`
/// accepts is written where `rewrite` puts it and its old key removed, [`MOVE_CHUNK`] keys
/// looked at per durable commit. Each commit moves whole entries (new keys written, old
/// one removed) and nothing reads the store before `open` has finished, so a crash between
/// commits leaves every entry under exactly one key, and opening again moves the rest to
/// the same places. `crash_point` names the step for the crash tests (a chunk built,
/// nothing written). No visible state changes, so the revision stays.
fn move_chunked(
    db: &super::db::Engine,
    prefix: &[u8],
    crash_point: &str,
    still_to_move: impl Fn(&[u8]) -> bool,
    mut rewrite: impl FnMut(&mut Tx, &[u8], Vec<u8>) -> Result<(), ClientError>,
) -> Result<(), ClientError> {
    let mut from: Option<Vec<u8>> = None;
    loop {
        let mut tx = Tx::new(db);
        let keys = tx.committed_keys(prefix, from.as_deref(), MOVE_CHUNK)?;
        let Some(last) = keys.last() else { return Ok(()) };
        // Moved entries may stay under `prefix` (member rows do): go on past this chunk.
        from = Some([last.as_slice(), &[0]].concat());
        let mut moved = false;
        for k in keys.into_iter().filter(|k| still_to_move(k)) {
            let v = tx.get(&k)?.ok_or_else(|| ClientError::storage("an entry vanished during the store's upgrade"))?;
            rewrite(&mut tx, &k, v)?;
            tx.writes.insert(k, None);
            moved = true;
        }
        if moved {
            crate::store::crash::crash_point(crash_point);
            tx.finish()?;
        }
    }
}

/// Format 2 to 3, first step: each transaction record leaves its `Xt` txid key for its
/// place in receipt order (`journal::save_tx`).
fn move_tx_records(db: &super::db::Engine) -> Result<(), ClientError> {
    move_chunked(db, LEGACY_TX_PREFIX, "client-move-tx", |_| true, |tx, _, v| save_tx(tx, &decode::<TxRecord>(&v)?))
}

/// Format 2 to 3, second step: each member row leaves its `M` sid gen outpoint key for
/// `M` sid gen 0 outpoint with its `K` index (place 0: the rows a store had keep their
/// outpoint order). A key's length tells a row still to move from a moved one.
fn move_member_rows(db: &super::db::Engine) -> Result<(), ClientError> {
    move_chunked(db, b"M", "client-move-members", |k| k.len() == LEGACY_MEMBER_KEY, |tx, k, v| {
        let sid: [u8; 32] = k[1..33].try_into().expect("key length checked");
        let g = be_u64(&k[33..41]);
        tx.put(key(b'K', &sid, Some(g), &k[41..]), 0u64.to_be_bytes().to_vec());
        tx.put(member_key(&sid, g, 0, &k[41..]), v);
        Ok(())
    })
}

/// Format 2 to 3, third step: the group (`I` sid gen id) and observation (`O` sid gen id)
/// identity keys become [`identity_key`]s with the same value.
fn move_identities(db: &super::db::Engine) -> Result<(), ClientError> {
    for (tag, kind) in [(b'I', GROUP_ID), (b'O', OBSERVATION_ID)] {
        move_chunked(db, &[tag], "client-move-identities", |_| true, |tx, k, v| {
            let corrupt = || ClientError::storage("corrupt identity key");
            let sid: [u8; 32] = k.get(1..33).and_then(|s| s.try_into().ok()).ok_or_else(corrupt)?;
            let g = k.get(33..41).map(be_u64).ok_or_else(corrupt)?;
            tx.put(key(b'J', &sid, Some(g), &[&k[41..], &[0, kind]].concat()), v);
            Ok(())
        })?;
    }
    Ok(())
}

/// Format 1 to 2: an alias per source (from its new id to the prefix its records keep),
/// and the generations of old sources that collapse into another retired. Returns
/// whether anything visible changed (a source was merged). Deterministic: the same
/// format-1 store always gives the same writes.
fn migrate_from_v1(tx: &mut Tx) -> Result<bool, ClientError> {
    // A follow's label names the source it began last (format 1 rewrote it at every begin).
    let mut labelled = std::collections::BTreeSet::new();
    for (_, v) in tx.scan(b"L")? {
        if let Ok(k) = decode::<LegacySourceKey>(&v) {
            labelled.insert(k.sid());
        }
    }
    // Old sources by new id, each ranked (labelled, newest highWater, sid): the last wins.
    let mut by_id: BTreeMap<[u8; 32], Vec<((bool, u64, [u8; 32]), SourceRecord)>> = BTreeMap::new();
    for (k, v) in tx.scan(b"S")? {
        let old = sid_in(&k)?;
        let rec: SourceRecord = decode(&v)?;
        let high_water = match rec.newest() {
            Some(n) => load_gen(tx, &old, n)?.high_water,
            None => 0,
        };
        by_id.entry(rec.key.id()).or_default().push(((labelled.contains(&old), high_water, old), rec));
    }
    let mut merged = false;
    for (id, mut olds) in by_id {
        olds.sort_by(|a, b| a.0.cmp(&b.0));
        let ((_, _, survivor), _) = olds.pop().expect("one source at least");
        if survivor != id {
            tx.put(alias_key(&id), survivor.to_vec());
        }
        // The others were this source under an earlier access: their generations end
        // as a replaced generation does (rows and receipts go; the records stay as fences).
        for ((_, _, old), mut rec) in olds {
            for g in 0..rec.next_generation {
                if !load_gen(tx, &old, g)?.retired {
                    retire(tx, &old, g)?;
                }
            }
            rec.current = None;
            rec.pending = None;
            rec.merged_into = Some(hex::encode(survivor));
            tx.put_json(key(b'S', &old, None, &[]), &rec);
            merged = true;
        }
    }
    Ok(merged)
}
