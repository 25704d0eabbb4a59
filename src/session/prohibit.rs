//! Prohibitions: rows that may no longer be disclosed to anyone (BRC-193 §8: a root serving
//! prohibition prohibits disclosure now, including replay of a historical live output).
//!
//! A prohibition names rows of one service by outpoint, or by a filter in the selection
//! language (`select/mod.rs`) over their attributes. [`Provider::prohibit`] makes it durable and
//! in force before it returns:
//! 1. its record is written (flushed) and the rows it names join the in-memory set that every
//!    serialization checks: a snapshot row or a live `output`/`spend` of a prohibited row is
//!    never rendered; the session that reaches one ends with `reset-required` instead;
//! 2. the sessions that hold a prohibited row — in their snapshot, or in a retained log group
//!    after their watermark — end with `reset-required`, waiting polls included;
//! 3. the rows still present are withdrawn (reason `evicted`) in one committed group, so a
//!    snapshot captured after it never holds them, and later admissions of them are turned
//!    into removals in the store's admission gate ([`Prohibitions`] is its change filter),
//!    whatever their entrance (an attached Engine's submits, reconciliation at attach, a
//!    re-seeded epoch, `live.commit`), so no later log group does.
//!
//! A prohibition takes its place in the gate's order like any change: changes made before it
//! are published first, and none made after it is committed while it runs. Opens wait too
//! (`Provider::admission`): none captures a watermark between the record and the withdrawal.
//! At start every stored prohibition is in force before anything is admitted, and rows a
//! prohibition names that are present anyway (a store written by an older version that let
//! them in) are withdrawn then, so every open can be served.
//! Finding the sessions of step 2 reads each prohibited row's present version and one pass of
//! the retained log after the oldest open session's watermark. A record not marked done (the
//! process stopped half way) is applied again when the provider starts.
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::select::{Attributes, Filter, Order, Selection};
use crate::store::{Admission, Change, ChangeFilter, Outpoint, RemoveReason, Ticket, Turn};
use crate::wire::{ErrorCode, WireError};

use super::record::PROHIBIT_PREFIX;
use super::{err, store_err, End, LiveSession, Provider};

/// At most this many outpoints are named by one prohibition.
pub const MAX_OUTPOINTS: usize = 10_000;

/// A prohibition as stored (JSON, under `prohibit/{number}`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProhibitionRecord {
    pub number: u64,
    pub service: String,
    /// Outpoints named, as `txid.outputIndex`.
    #[serde(default)]
    pub outpoints: Vec<String>,
    /// A filter (`where` of a selection) over the rows' topic and attributes.
    #[serde(default)]
    pub filter: Option<Value>,
    pub reason: String,
    /// Every outpoint the filter matched (a present row, or a version in the retained log)
    /// when it was applied; serialization checks outpoints only.
    #[serde(default)]
    pub resolved: Vec<String>,
    /// The sequence of the group that withdrew the present rows (highWater then if none).
    #[serde(default)]
    pub sequence: u64,
    pub done: bool,
}

/// What a prohibition did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProhibitOutcome {
    pub number: u64,
    /// The withdrawing group's sequence, if any row was present.
    pub sequence: Option<u64>,
    /// Present rows withdrawn.
    pub rows: usize,
    /// Sessions ended with reset-required.
    pub sessions: usize,
}

fn outpoint_text(o: &Outpoint) -> String {
    format!("{}.{}", hex::encode(o.txid), o.output_index)
}

pub fn parse_outpoint(s: &str) -> Option<Outpoint> {
    let (t, i) = s.split_once('.')?;
    let txid: [u8; 32] = hex::decode(t).ok()?.try_into().ok()?;
    if hex::encode(txid) != t || i.is_empty() || (i.len() > 1 && i.starts_with('0')) {
        return None;
    }
    Some(Outpoint { txid, output_index: i.parse().ok()? })
}

fn compile_filter(v: &Value) -> Result<Filter, WireError> {
    Selection::from_json(&json!({ "where": v }))
        .map(|s| s.filter)
        .map_err(|e| err(ErrorCode::Invalid, format!("prohibition filter: {e}")))
}

#[derive(Default)]
struct Inner {
    /// Prohibited outpoints, per service.
    outpoints: HashMap<String, HashSet<Outpoint>>,
    /// Filters, per service: admissions matching one are refused.
    rules: HashMap<String, Vec<Filter>>,
    next: u64,
}

/// The prohibitions in force, loaded from the store at start.
#[derive(Default)]
pub struct Prohibitions {
    /// Whether any prohibition exists: the check on every serialized row is one load then.
    any: AtomicBool,
    inner: RwLock<Inner>,
}

impl Prohibitions {
    /// Whether the row (service, outpoint) may not be serialized.
    pub fn is_prohibited(&self, service: &str, o: &Outpoint) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        self.inner.read().unwrap().outpoints.get(service).is_some_and(|s| s.contains(o))
    }

    fn blocks(&self, inner: &Inner, service: &str, o: &Outpoint, topic: &str, a: &Attributes) -> bool {
        inner.outpoints.get(service).is_some_and(|s| s.contains(o))
            || inner.rules.get(service).is_some_and(|fs| fs.iter().any(|f| f.matches(topic, a)))
    }

    /// Changes as they may be committed: an admission of a prohibited row becomes its removal
    /// (reason `evicted`; a no-op when absent), a refresh of one is dropped.
    pub fn filter_changes(&self, changes: Vec<Change>) -> Vec<Change> {
        if !self.any.load(Ordering::Acquire) {
            return changes;
        }
        let inner = self.inner.read().unwrap();
        changes
            .into_iter()
            .filter_map(|c| match c {
                Change::Admit { service, outpoint, topic, attributes, .. } if self.blocks(&inner, &service, &outpoint, &topic, &attributes) => {
                    Some(Change::Remove { service, outpoint, reason: RemoveReason::Evicted, spend: None })
                }
                Change::Refresh { ref service, ref outpoint, .. } if inner.outpoints.get(service).is_some_and(|s| s.contains(outpoint)) => None,
                other => Some(other),
            })
            .collect()
    }

    fn insert(&self, service: &str, outpoints: impl IntoIterator<Item = Outpoint>, rule: Option<Filter>) {
        let mut inner = self.inner.write().unwrap();
        inner.outpoints.entry(service.to_string()).or_default().extend(outpoints);
        if let Some(f) = rule {
            inner.rules.entry(service.to_string()).or_default().push(f);
        }
        self.any.store(true, Ordering::Release);
    }

    fn take_number(&self) -> u64 {
        let mut inner = self.inner.write().unwrap();
        inner.next += 1;
        inner.next
    }
}

impl ChangeFilter for Prohibitions {
    fn filter(&self, changes: Vec<Change>) -> Vec<Change> {
        self.filter_changes(changes)
    }
}

/// A version a prohibition names: at `seq` (its creation or removal; `u64::MAX` for a version
/// present now), with what selections match.
struct Hit {
    seq: u64,
    topic: String,
    attributes: Attributes,
}

/// What a prohibition names, compiled.
struct Target {
    service: String,
    outpoints: HashSet<Outpoint>,
    filter: Option<Filter>,
}

impl Target {
    fn names(&self, o: &Outpoint, topic: &str, a: &Attributes) -> bool {
        self.outpoints.contains(o) || self.filter.as_ref().is_some_and(|f| f.matches(topic, a))
    }
}

impl Provider {
    /// Loads the stored prohibitions, applies any that a stopped process left half done, and
    /// withdraws present rows that a prohibition names (see the module docs).
    pub(super) fn load_prohibitions(&self) -> Result<(), WireError> {
        let mut records = Vec::new();
        for item in self.store.aux_scan_prefix(PROHIBIT_PREFIX) {
            let (_, raw) = item.map_err(store_err)?;
            let rec: ProhibitionRecord =
                serde_json::from_slice(&raw).map_err(|_| err(ErrorCode::Unavailable, "unreadable prohibition record"))?;
            let target = self.target_of(&rec)?;
            let resolved = rec.resolved.iter().filter_map(|s| parse_outpoint(s));
            self.prohibited.insert(&rec.service, target.outpoints.iter().cloned().chain(resolved), target.filter.clone());
            let mut inner = self.prohibited.inner.write().unwrap();
            inner.next = inner.next.max(rec.number);
            drop(inner);
            records.push((rec, target));
        }
        if records.is_empty() {
            return Ok(());
        }
        let turn = self.exclusive_turn(None)?;
        let _admission = self.admission.write().unwrap();
        let mut strays = Vec::new();
        for (rec, target) in records {
            if !rec.done {
                self.apply_prohibition(&turn, rec, target)?;
            } else {
                let service = target.service.clone();
                strays.extend(self.present_hits(&target)?.0.into_iter().map(|o| (service.clone(), o)));
            }
        }
        strays.sort();
        strays.dedup();
        if !strays.is_empty() {
            let removals = strays
                .into_iter()
                .map(|(service, outpoint)| Change::Remove { service, outpoint, reason: RemoveReason::Evicted, spend: None })
                .collect();
            self.store.admit_in_turn(&turn, removals, Admission { divisible: true, recorded: true }).map_err(store_err)?;
        }
        Ok(())
    }

    fn target_of(&self, rec: &ProhibitionRecord) -> Result<Target, WireError> {
        let outpoints = rec
            .outpoints
            .iter()
            .map(|s| parse_outpoint(s).ok_or_else(|| err(ErrorCode::Invalid, format!("prohibition: {s:?} is not a txid.outputIndex outpoint"))))
            .collect::<Result<HashSet<_>, _>>()?;
        let filter = rec.filter.as_ref().map(compile_filter).transpose()?;
        Ok(Target { service: rec.service.clone(), outpoints, filter })
    }

    /// Prohibits serving rows of `service`: those at `outpoints` (`txid.outputIndex`) and those
    /// whose topic and attributes match `filter`. Durable and in force when it returns (module
    /// docs).
    /// It takes its place in the store's admission order (`ticket`, or one taken now).
    pub fn prohibit(&self, ticket: Option<Ticket>, service: &str, outpoints: Vec<String>, filter: Option<Value>, reason: &str) -> Result<ProhibitOutcome, WireError> {
        let turn = self.exclusive_turn(ticket)?;
        if service.is_empty() || service.len() > crate::store::MAX_SERVICE_BYTES {
            return Err(err(ErrorCode::Invalid, "prohibition: service must be 1..=256 bytes"));
        }
        if outpoints.is_empty() && filter.is_none() {
            return Err(err(ErrorCode::Invalid, "prohibition: name outpoints, a filter, or both"));
        }
        if outpoints.len() > MAX_OUTPOINTS {
            return Err(err(ErrorCode::Invalid, format!("prohibition: at most {MAX_OUTPOINTS} outpoints")));
        }
        if reason.len() > 1024 {
            return Err(err(ErrorCode::Invalid, "prohibition: reason is at most 1024 bytes"));
        }
        let _admission = self.admission.write().unwrap();
        let rec = ProhibitionRecord {
            number: self.prohibited.take_number(),
            service: service.to_string(),
            outpoints,
            filter,
            reason: reason.to_string(),
            resolved: Vec::new(),
            sequence: 0,
            done: false,
        };
        let target = self.target_of(&rec)?;
        self.write_prohibition(&rec)?;
        self.prohibited.insert(service, target.outpoints.iter().cloned(), target.filter.clone());
        self.apply_prohibition(&turn, rec, target)
    }

    fn write_prohibition(&self, rec: &ProhibitionRecord) -> Result<(), WireError> {
        self.store
            .aux_write(vec![(prohibition_key(rec.number), Some(serde_json::to_vec(rec).expect("serializes")))])
            .map_err(store_err)
    }

    /// Steps 2 and 3 of the module docs, in the gate turn and under the admission lock held by
    /// the caller.
    fn apply_prohibition(&self, turn: &Turn<'_>, mut rec: ProhibitionRecord, target: Target) -> Result<ProhibitOutcome, WireError> {
        self.load_all_sessions()?;
        let now = self.now();
        let epoch = self.store.epoch();
        let sessions: Vec<Arc<LiveSession>> = self.sessions_where(
            |r| !r.ended() && r.service == target.service && r.epoch == epoch && now < r.expires_at,
            |found| found.cloned().collect(),
        );
        let (present, mut hits) = self.present_hits(&target)?;
        let high_water = self.store.high_water();
        let mut resolved: HashSet<Outpoint> = present.iter().cloned().collect();
        if let Some(from) = sessions.iter().map(|s| s.record().w).min() {
            // History compacted below a session's watermark ends that session anyway
            // (reset-required): the walk starts where the log does.
            let from = from.max(self.store.compacted_through());
            for item in self.store.log_after(from, high_water) {
                let (seq, group) = item.map_err(store_err)?;
                for ch in group.changes.iter().filter(|c| c.service == target.service) {
                    for (topic, attributes) in ch.old.iter().map(|o| (&o.topic, &o.attributes)).chain(ch.new.iter().map(|n| (&n.topic, &n.attributes))) {
                        if target.names(&ch.outpoint, topic, attributes) {
                            resolved.insert(ch.outpoint.clone());
                            hits.push(Hit { seq, topic: topic.clone(), attributes: attributes.clone() });
                        }
                    }
                }
            }
        }
        // Every outpoint found joins the set serialization checks, before any session is
        // judged: a read racing this one cannot render them any more.
        self.prohibited.insert(&target.service, resolved.iter().cloned(), None);
        let affected: Vec<Arc<LiveSession>> = sessions
            .into_iter()
            .filter(|s| {
                let rec = s.record();
                let Some(sel) = self.session_view(s, &rec).selection.clone() else { return true };
                hits.iter().any(|h| h.seq > rec.w && sel.matches(&h.topic, &h.attributes))
            })
            .collect();
        // Groups rendered before now may hold a prohibited row; those rendered from here on
        // are checked.
        self.groups.clear();
        // The sessions end (durably, with what was resolved) before the withdrawal is
        // committed: its group wakes waiting polls, which must find their session ended.
        rec.resolved = {
            let mut v: Vec<String> = resolved.iter().filter(|o| !target.outpoints.contains(o)).map(outpoint_text).collect();
            v.sort();
            v
        };
        let pending = vec![(prohibition_key(rec.number), Some(serde_json::to_vec(&rec).expect("serializes")))];
        self.end_sessions(&affected, End::Reset, pending)?;
        let removals: Vec<Change> = present
            .iter()
            .map(|o| Change::Remove { service: target.service.clone(), outpoint: o.clone(), reason: RemoveReason::Evicted, spend: None })
            .collect();
        let rows = removals.len();
        let sequence = if removals.is_empty() {
            None
        } else {
            self.store.admit_in_turn(turn, removals, Admission { divisible: true, recorded: false }).map_err(store_err)?.sequence
        };
        rec.sequence = sequence.unwrap_or(high_water);
        rec.done = true;
        self.write_prohibition(&rec)?;
        Ok(ProhibitOutcome { number: rec.number, sequence, rows, sessions: affected.len() })
    }

    /// The named rows present now, and their versions as hits.
    fn present_hits(&self, target: &Target) -> Result<(Vec<Outpoint>, Vec<Hit>), WireError> {
        let mut present: Vec<Outpoint> = Vec::new();
        let mut candidates: Vec<Outpoint> = target.outpoints.iter().cloned().collect();
        if let Some(f) = &target.filter {
            let sel = Selection { filter: f.clone(), order: Order::Admission };
            for row in self.store.snapshot(&target.service, &sel, self.store.high_water(), None).map_err(store_err)? {
                candidates.push(row.map_err(store_err)?.outpoint);
            }
        }
        candidates.sort();
        candidates.dedup();
        let mut hits = Vec::new();
        for o in candidates {
            if let Some(v) = self.store.present_version(&target.service, &o).map_err(store_err)? {
                hits.push(Hit { seq: u64::MAX, topic: v.topic, attributes: v.attributes });
                present.push(o);
            }
        }
        Ok((present, hits))
    }

    /// A row about to be serialized for session `id` is prohibited: the session ends with
    /// reset-required (step 1 of the module docs), and this is the answer.
    pub(super) fn prohibited_row(&self, id: &[u8; 16]) -> WireError {
        if let Ok(Some(s)) = self.session(id) {
            let _ = self.end_sessions(&[s], End::Reset, Vec::new());
        }
        err(ErrorCode::ResetRequired, "a row of this session may no longer be disclosed; open a new session")
    }
}

fn prohibition_key(number: u64) -> Vec<u8> {
    [PROHIBIT_PREFIX, &number.to_be_bytes()[..]].concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{CancelToken, Caller, ProviderConfig};
    use crate::store::{Store, StoreConfig};

    fn provider(dir: &std::path::Path) -> Arc<Provider> {
        let store = Store::open(StoreConfig { create: true, ..StoreConfig::new(dir) }).unwrap();
        let cfg = ProviderConfig::for_tests("https://provider.example");
        let p = Provider::new(store, cfg).unwrap();
        p.register_service("svc", &json!({"id": "urn:test", "parameters": {}})).unwrap();
        p
    }

    fn admit(n: u8) -> Change {
        Change::Admit {
            service: "svc".into(),
            outpoint: Outpoint { txid: [n; 32], output_index: 0 },
            topic: "t".into(),
            attributes: Default::default(),
            beef: vec![n; 10],
            context: None,
            expires_at: None,
        }
    }

    async fn read(p: &Arc<Provider>, b: &Value) -> Value {
        let body = serde_json::to_vec(&json!({"version": 1, "session": b["session"], "cursor": b["cursor"], "limits": {"maxBytes": 65536, "maxObservations": 1, "waitMs": 0}})).unwrap();
        let r = p.read(body, Caller { principal: "a".into(), authenticated: true }, "public".into(), CancelToken::new()).await;
        serde_json::from_slice(&r.body).unwrap()
    }

    /// The backstop behind step 2: a row in the prohibited set that reaches serialization
    /// (here, a session step 2 never judged) is not rendered; the session ends instead.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_prohibited_row_reaching_serialization_ends_its_session_in_snapshot_and_live() {
        let dir = tempfile::tempdir().unwrap();
        let p = provider(dir.path());
        p.commit(vec![admit(1), admit(2)]).unwrap();
        let open = |rid: &str| {
            let body = serde_json::to_vec(&json!({"version": 1, "requestId": rid, "service": "svc", "query": {},
                "limits": {"maxBytes": 65536, "maxObservations": 1, "waitMs": 0}})).unwrap();
            let r = p.open(&body, &Caller { principal: "a".into(), authenticated: true }, "public", &json!({"where": {"all": true}}));
            serde_json::from_slice::<Value>(&r.body).unwrap()
        };
        let draining = open("backstop-request-0000000000000001");
        let mut caught_up = open("backstop-request-0000000000000002");
        while caught_up["phase"] != "live" || caught_up["groups"] != json!([]) {
            caught_up = read(&p, &caught_up).await;
        }
        p.commit(vec![admit(3)]).unwrap();
        p.prohibited.insert("svc", [Outpoint { txid: [2; 32], output_index: 0 }, Outpoint { txid: [3; 32], output_index: 0 }], None);
        for b in [&draining, &caught_up] {
            assert_eq!(read(&p, b).await["error"]["code"], "reset-required", "the prohibited row is not served");
            assert_eq!(read(&p, b).await["error"]["code"], "reset-required", "and the session has ended");
        }
        p.store().close().unwrap();
    }

    #[test]
    fn outpoints_parse_canonically() {
        let t = "ab".repeat(32);
        assert_eq!(parse_outpoint(&format!("{t}.7")).map(|o| o.output_index), Some(7));
        for bad in [format!("{t}"), format!("{t}.07"), format!("{t}."), format!("{}.1", "AB".repeat(32)), "x.1".into(), format!("{t}.4294967296")] {
            assert!(parse_outpoint(&bad).is_none(), "{bad}");
        }
    }
}
