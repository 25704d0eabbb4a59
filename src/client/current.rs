//! What the store reports (BRC-192 §10.5): the `ReconciledState` shape, and
//! currentness of outputs derived from the reconciled graph, kept apart from source
//! membership. An output is `current` only when its creating transaction is a
//! confirmed anchor or selected final / included today, and no selected final or
//! included transaction spends it. A source re-entering a spent output changes that
//! source's membership row, never this.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{json, Value};

use super::journal::*;
use super::parse::Chain;
use super::reconcile::{anchor_confirmed, outpoint_edges};
use super::db::{decode, ClientDb, Tx};
use crate::bitcoin::tx::{Hash32, Outpoint, Txid};
use super::ClientError;

/// Currentness of one output, as an application shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputState {
    /// Created by a confirmed or selected final transaction and not spent by one.
    Current,
    /// Consumed by a selected final or included transaction (see `spent_by`).
    Spent,
    /// Its creator or a spender waits for verification; nothing accepted yet.
    Pending,
    /// Waiting like `Pending`, while the previous accepted result is still shown.
    Stale,
    /// Its creator lost to a conflicting spend (or depends on one that did).
    Conflicting,
    /// Nothing verified establishes this output (unknown, unresolved, invalid,
    /// unsupported, or only a non-final intent).
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OutputView {
    pub outpoint: Outpoint,
    pub state: OutputState,
    #[serde(rename = "spentBy")]
    pub spent_by: Option<Txid>,
}

/// The application-facing summary of one accepted revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReconciledView {
    pub revision: u64,
    pub context: String,
    pub through: u64,
    /// Unspent outputs of confirmed and selected final transactions.
    pub current: Vec<Outpoint>,
    /// `{outpoint, by}`: outputs consumed by a selected final or included spend.
    pub spent: Vec<(Outpoint, Txid)>,
    /// Transactions of components waiting for verification or a consistent view.
    pub pending: Vec<Txid>,
    /// Transactions that lost a conflict (`conflicting`, `dependent-conflict`).
    pub conflicting: Vec<Txid>,
    /// Previous accepted status of transactions whose component is pending.
    pub stale: Vec<(Txid, Status)>,
}

/// Records read on demand (and cached) within one read of the store.
struct Loaded<'a> {
    tx: &'a Tx<'a>,
    meta: Meta,
    txs: RefCell<BTreeMap<Txid, Option<TxRecord>>>,
    comps: RefCell<BTreeMap<u64, Option<Component>>>,
    anchors: RefCell<BTreeMap<Txid, Option<AnchorRecord>>>,
}

fn load<'a>(tx: &'a Tx<'a>) -> Result<Option<Loaded<'a>>, ClientError> {
    let Some(meta) = tx.get_json::<Meta>(META)? else { return Ok(None) };
    Ok(Some(Loaded { tx, meta, txs: RefCell::default(), comps: RefCell::default(), anchors: RefCell::default() }))
}

impl<'a> Loaded<'a> {
    /// Loads every transaction, component and anchor (for the store-wide views).
    fn load_all(&self) -> Result<(), ClientError> {
        for r in all_txs(self.tx)? {
            self.txs.borrow_mut().insert(r.txid, Some(r));
        }
        for (_, v) in self.tx.scan(COMPONENT_PREFIX)? {
            let c: Component = decode(&v)?;
            self.comps.borrow_mut().insert(c.id, Some(c));
        }
        for (_, v) in self.tx.scan(ANCHOR_PREFIX)? {
            let a: AnchorRecord = decode(&v)?;
            self.anchors.borrow_mut().insert(a.txid, Some(a));
        }
        Ok(())
    }
    fn rec(&self, t: &Txid) -> Result<Option<TxRecord>, ClientError> {
        if let Some(r) = self.txs.borrow().get(t) {
            return Ok(r.clone());
        }
        let r: Option<TxRecord> = load_tx(self.tx, t)?;
        self.txs.borrow_mut().insert(*t, r.clone());
        Ok(r)
    }
    fn comp(&self, id: u64) -> Result<Option<Component>, ClientError> {
        if let Some(c) = self.comps.borrow().get(&id) {
            return Ok(c.clone());
        }
        let c: Option<Component> = self.tx.get_json(&component_key(id))?;
        self.comps.borrow_mut().insert(id, c.clone());
        Ok(c)
    }
    fn anchor(&self, t: &Txid) -> Result<Option<AnchorRecord>, ClientError> {
        if let Some(a) = self.anchors.borrow().get(t) {
            return Ok(a.clone());
        }
        let a: Option<AnchorRecord> = self.tx.get_json(&anchor_key(t))?;
        self.anchors.borrow_mut().insert(*t, a.clone());
        Ok(a)
    }
    fn is_pending(&self, t: &Txid) -> Result<bool, ClientError> {
        Ok(match self.rec(t)? {
            Some(r) => self.comp(r.component)?.is_some_and(|c| c.pending.is_some()),
            None => false,
        })
    }
    fn status(&self, t: &Txid) -> Result<Option<Status>, ClientError> {
        Ok(self.rec(t)?.and_then(|r| r.published).map(|p| p.status))
    }
    /// A settled transaction whose spend counts today.
    fn spends(&self, t: &Txid) -> Result<bool, ClientError> {
        Ok(!self.is_pending(t)? && self.status(t)?.is_some_and(|s| s.spends()))
    }
    fn output(&self, op: Outpoint) -> Result<OutputView, ClientError> {
        let view = |state, spent_by| Ok(OutputView { outpoint: op, state, spent_by });
        if let Some(a) = self.anchor(&op.txid)? {
            if op.vout >= a.outputs || !anchor_confirmed(self.tx, self.meta.current().tip, &a)? {
                return view(OutputState::Unknown, None);
            }
        } else if let Some(r) = self.rec(&op.txid)? {
            if op.vout >= r.outputs {
                return view(OutputState::Unknown, None);
            }
            if self.is_pending(&op.txid)? {
                return view(if r.published.is_some() { OutputState::Stale } else { OutputState::Pending }, None);
            }
            match r.published.map(|p| p.status) {
                Some(s) if s.spends() => {}
                Some(Status::Conflicting | Status::DependentConflict) => return view(OutputState::Conflicting, None),
                _ => return view(OutputState::Unknown, None),
            }
        } else {
            return view(OutputState::Unknown, None);
        }
        let spenders = outpoint_edges(self.tx, &op)?;
        for s in &spenders {
            if self.spends(s)? {
                return view(OutputState::Spent, Some(*s));
            }
        }
        for s in &spenders {
            if self.is_pending(s)? {
                let stale = self.rec(s)?.is_some_and(|r| r.published.is_some());
                return view(if stale { OutputState::Stale } else { OutputState::Pending }, None);
            }
        }
        view(OutputState::Current, None)
    }
    /// Pending and stale transactions, from the index of pending components.
    fn pending_lists(&self) -> Result<(Vec<Txid>, Vec<(Txid, Status)>), ClientError> {
        let mut pending = Vec::new();
        let mut stale = Vec::new();
        for (k, _) in self.tx.scan(PENDING_PREFIX)? {
            let id = u64::from_be_bytes(k[2..10].try_into().unwrap());
            let Some(c) = self.comp(id)? else { continue };
            for m in &c.members_of(&self.tx)? {
                pending.push(*m);
                if let Some(p) = self.rec(m)?.and_then(|r| r.published) {
                    stale.push((*m, p.status));
                }
            }
        }
        pending.sort();
        stale.sort();
        Ok((pending, stale))
    }
    /// Settled losers of a conflict, from the conflict index.
    fn conflicting(&self) -> Result<Vec<Txid>, ClientError> {
        let mut out = Vec::new();
        for (k, _) in self.tx.scan(CONFLICT_PREFIX)? {
            let t = Hash32::from_key_bytes(&k[2..34]);
            if !self.is_pending(&t)? {
                out.push(t);
            }
        }
        Ok(out)
    }
}

impl ClientDb {
    /// Currentness of the given outputs (any outpoint; unknown ones are `unknown`).
    /// Reads only the records these outputs involve.
    pub fn output_states(&self, outpoints: &[Outpoint]) -> Result<Vec<OutputView>, ClientError> {
        let tx = Tx::new(&self.db);
        let Some(l) = load(&tx)? else {
            return Ok(outpoints.iter().map(|o| OutputView { outpoint: *o, state: OutputState::Unknown, spent_by: None }).collect());
        };
        outpoints.iter().map(|o| l.output(*o)).collect()
    }

    /// The store-wide summary: every current and spent output the store knows. Reads
    /// every record (its cost grows with the tracked transactions).
    pub fn reconciled_view(&self) -> Result<Option<ReconciledView>, ClientError> {
        let tx = Tx::new(&self.db);
        let Some(l) = load(&tx)? else { return Ok(None) };
        l.load_all()?;
        let mut current = Vec::new();
        let mut spent = Vec::new();
        let mut creators: Vec<(Txid, u32)> = l.anchors.borrow().values().flatten().map(|a| (a.txid, a.outputs)).collect();
        let settled: Vec<TxRecord> = l.txs.borrow().values().flatten().cloned().collect();
        let mut spending = Vec::new();
        for r in &settled {
            if l.spends(&r.txid)? {
                creators.push((r.txid, r.outputs));
                spending.push(r);
            }
        }
        let mut seen = BTreeSet::new();
        for (t, n) in creators {
            if !seen.insert(t) {
                continue;
            }
            for vout in 0..n {
                let o = l.output(Outpoint { txid: t, vout })?;
                match o.state {
                    OutputState::Current => current.push(o.outpoint),
                    OutputState::Spent => spent.push((o.outpoint, o.spent_by.expect("spent has a spender"))),
                    _ => {}
                }
            }
        }
        // Spends of outputs whose creator is not known as confirmed are still spends.
        for r in spending {
            for i in &r.inputs {
                if !seen.contains(&i.prev.txid) {
                    spent.push((i.prev, r.txid));
                }
            }
        }
        current.sort();
        spent.sort();
        Ok(Some(self.view_of_lists(&l, current, spent)?))
    }

    /// The summary for a set of outputs (a source's members): `current` and `spent`
    /// among them, `pending`, `stale` and `conflicting` store-wide from their indexes.
    /// Reads only what those outputs and indexes involve.
    pub fn reconciled_view_of(&self, outpoints: &[Outpoint]) -> Result<Option<(ReconciledView, Vec<OutputState>)>, ClientError> {
        let tx = Tx::new(&self.db);
        let Some(l) = load(&tx)? else { return Ok(None) };
        let mut current = Vec::new();
        let mut spent = Vec::new();
        let mut states = Vec::with_capacity(outpoints.len());
        for o in outpoints {
            let v = l.output(*o)?;
            match v.state {
                OutputState::Current => current.push(v.outpoint),
                OutputState::Spent => spent.push((v.outpoint, v.spent_by.expect("spent has a spender"))),
                _ => {}
            }
            states.push(v.state);
        }
        current.sort();
        current.dedup();
        spent.sort();
        spent.dedup();
        Ok(Some((self.view_of_lists(&l, current, spent)?, states)))
    }

    /// A view with these `current` and `spent` lists (sorted by the caller) and the
    /// store-wide `pending`, `stale` and `conflicting` lists read from their indexes.
    fn view_of_lists(&self, l: &Loaded<'_>, current: Vec<Outpoint>, spent: Vec<(Outpoint, Txid)>) -> Result<ReconciledView, ClientError> {
        let (pending, stale) = l.pending_lists()?;
        Ok(ReconciledView {
            revision: self.revision()?,
            context: l.meta.current().id.clone(),
            through: l.meta.position,
            current,
            spent,
            pending,
            conflicting: l.conflicting()?,
            stale,
        })
    }

    /// The §10.5 `ReconciledState` (JSON, U64 values as decimal strings), with the
    /// published memberships of every source. `chain` is the configured chain.
    pub fn reconciled_state(&self, chain: &Chain) -> Result<Option<Value>, ClientError> {
        let tx = Tx::new(&self.db);
        let Some(l) = load(&tx)? else { return Ok(None) };
        l.load_all()?;
        let journal = l.meta.journal_id.clone();
        let pos = |p: &IngressPosition| json!({"journalId": journal, "position": p.position.to_string(), "index": p.index});
        let outpoint = |o: &Outpoint| json!({"chain": chain, "txid": o.txid, "outputIndex": o.vout});
        let mut transactions = Vec::new();
        let records: Vec<TxRecord> = l.txs.borrow().values().flatten().cloned().collect();
        for r in &records {
            let pending = l.is_pending(&r.txid)?;
            let mut evidence: Vec<String> = r
                .variants
                .iter()
                .filter(|v| matches!(&v.verdict, Some(d) if d.status == VerdictStatus::Verified))
                .map(|v| v.id.to_hex())
                .collect();
            evidence.sort();
            evidence.dedup();
            let mut t = json!({
                "txid": r.txid, "evidenceIds": evidence, "firstRaw": pos(&r.first_raw),
                "dependencies": r.inputs.iter().map(|i| outpoint(&i.prev)).collect::<Vec<_>>(),
            });
            match &r.published {
                Some(p) => {
                    if let Some(o) = &p.order {
                        t["order"] = json!({"firstRaw": pos(&r.first_raw), "readyAt": o.ready_at.to_string(), "depth": o.depth, "readyContextId": o.ready_context});
                    }
                    if let Some(e) = &p.eligible {
                        t["eligible"] = json!({"at": e.at.to_string(), "contextId": e.context_id});
                    }
                    t["status"] = json!(p.status.as_str());
                    t["reason"] = json!(if pending { format!("stale while pending: {}", p.reason) } else { p.reason.clone() });
                    if let Some(x) = &p.replaces {
                        t["replaces"] = json!(x);
                    }
                    t["conflictsWith"] = json!(p.conflicts_with);
                }
                None => {
                    t["status"] = json!("unresolved");
                    t["reason"] = json!("verification pending");
                    t["conflictsWith"] = json!([]);
                }
            }
            transactions.push(t);
        }
        let mut pending_components = Vec::new();
        let mut replacements = Vec::new();
        for c in l.comps.borrow().values().flatten() {
            if let Some(reason) = &c.pending {
                pending_components.push(json!({"txids": c.members_of(&tx)?, "reason": reason}));
            }
            replacements.extend(c.replacements.iter().cloned());
        }
        // Replacement records keep their replay frontier order (never sorted by txid).
        replacements.sort_by_key(|r| r.at);
        let memberships = self.memberships_json(chain)?;
        Ok(Some(json!({
            "profile": PROFILE,
            "nonFinal": l.meta.non_final,
            "journalId": journal,
            "through": l.meta.position.to_string(),
            "contextId": l.meta.current().id,
            "transactions": transactions,
            "memberships": memberships,
            "replacements": replacements.iter().map(|r| json!({
                "previous": r.previous, "replacement": r.replacement, "at": r.at.to_string(), "contextId": r.context_id
            })).collect::<Vec<_>>(),
            "pendingComponents": pending_components,
        })))
    }
}

/// One coherent revision of a followed source for an application: membership and the
/// reconciled state read under the commit lock, so no commit lands between them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RevisionSnapshot {
    pub members: Vec<super::MemberView>,
    #[serde(rename = "partialMembers")]
    pub partial_members: Vec<super::MemberView>,
    pub state: super::SourceState,
    /// `None` until the reconciler is configured. `current` and `spent` cover this
    /// source's present members; `pending`, `stale` and `conflicting` are store-wide.
    pub reconciled: Option<ReconciledView>,
    /// Currentness of each present member's outpoint (same order as `members`;
    /// `None` for absent rows or when the reconciler is not configured).
    pub currentness: Vec<Option<OutputState>>,
}

impl ClientDb {
    /// With `at`, the snapshot of that revision only: a `conflict` error once a later
    /// commit has landed (a revision event read after the store moved on).
    pub fn revision_snapshot(&self, source: &super::SourceKey, at: Option<u64>) -> Result<RevisionSnapshot, ClientError> {
        let _g = self.guard();
        if let Some(at) = at {
            let now = self.revision()?;
            if now != at {
                return Err(ClientError::conflict(format!("revision {at} is past (the store is at {now}): read a revision event's lists in its callback, or call revisionSnapshot")));
            }
        }
        let members = self.members(source)?;
        let partial_members = self.partial_members(source)?;
        let state = self.state(source)?;
        let ops: Vec<Outpoint> = members
            .iter()
            .filter(|m| m.row.present)
            .map(|m| Ok(Outpoint { txid: crate::bitcoin::tx::Hash32::from_hex(&m.row.outpoint.txid)?, vout: m.row.outpoint.output_index }))
            .collect::<Result<_, ClientError>>()?;
        let (reconciled, currentness) = match self.reconciled_view_of(&ops)? {
            Some((view, states)) => {
                let mut states = states.into_iter();
                let c = members.iter().map(|m| if m.row.present { states.next() } else { None }).collect();
                (Some(view), c)
            }
            None => (None, vec![None; members.len()]),
        };
        Ok(RevisionSnapshot { members, partial_members, state, reconciled, currentness })
    }
}
