//! What the store reports (BRC-192 §10.5): the `ReconciledState` shape, and
//! currentness of outputs derived from the reconciled graph, kept apart from source
//! membership. An output is `current` only when its creating transaction is a
//! confirmed anchor or selected final / included today, and no selected final or
//! included transaction spends it. A source re-entering a spent output changes that
//! source's membership row, never this.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{json, Value};

use super::journal::*;
use super::parse::Chain;
use super::reconcile::{anchor_confirmed, outpoint_edges};
use super::store::{decode, CheckpointStore, Tx};
use super::tx::{Outpoint, Txid};
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

struct Loaded {
    meta: Meta,
    txs: BTreeMap<Txid, TxRecord>,
    pending: BTreeMap<u64, String>,
    replacements: Vec<Replacement>,
    anchors: BTreeMap<Txid, AnchorRecord>,
}

fn load(tx: &Tx) -> Result<Option<Loaded>, ClientError> {
    let Some(meta) = tx.get_json::<Meta>(META)? else { return Ok(None) };
    let mut txs = BTreeMap::new();
    for (_, v) in tx.scan(TX_PREFIX)? {
        let r: TxRecord = decode(&v)?;
        txs.insert(r.txid, r);
    }
    let mut pending = BTreeMap::new();
    let mut replacements = Vec::new();
    for (_, v) in tx.scan(COMPONENT_PREFIX)? {
        let c: Component = decode(&v)?;
        if let Some(p) = c.pending {
            pending.insert(c.id, p);
        }
        replacements.extend(c.replacements);
    }
    // Replacement records keep their replay frontier order (never sorted by txid).
    replacements.sort_by_key(|r| r.at);
    let mut anchors = BTreeMap::new();
    for (_, v) in tx.scan(ANCHOR_PREFIX)? {
        let a: AnchorRecord = decode(&v)?;
        anchors.insert(a.txid, a);
    }
    Ok(Some(Loaded { meta, txs, pending, replacements, anchors }))
}

impl Loaded {
    fn is_pending(&self, t: &Txid) -> bool {
        self.txs.get(t).is_some_and(|r| self.pending.contains_key(&r.component))
    }
    fn status(&self, t: &Txid) -> Option<Status> {
        self.txs.get(t).and_then(|r| r.published.as_ref()).map(|p| p.status)
    }
    fn output(&self, tx: &Tx, op: Outpoint) -> Result<OutputView, ClientError> {
        let view = |state, spent_by| Ok(OutputView { outpoint: op, state, spent_by });
        let creator_ok = if let Some(a) = self.anchors.get(&op.txid) {
            if op.vout >= a.outputs || !anchor_confirmed(tx, self.meta.current().tip, a)? {
                return view(OutputState::Unknown, None);
            }
            true
        } else if let Some(r) = self.txs.get(&op.txid) {
            if op.vout >= r.outputs {
                return view(OutputState::Unknown, None);
            }
            if self.is_pending(&op.txid) {
                return view(if r.published.is_some() { OutputState::Stale } else { OutputState::Pending }, None);
            }
            match self.status(&op.txid) {
                Some(s) if s.spends() => true,
                Some(Status::Conflicting | Status::DependentConflict) => return view(OutputState::Conflicting, None),
                _ => return view(OutputState::Unknown, None),
            }
        } else {
            false
        };
        if !creator_ok {
            return view(OutputState::Unknown, None);
        }
        let spenders = outpoint_edges(tx, &op)?;
        if let Some(s) = spenders.iter().find(|s| !self.is_pending(s) && self.status(s).is_some_and(|st| st.spends())) {
            return view(OutputState::Spent, Some(*s));
        }
        if let Some(s) = spenders.iter().find(|s| self.is_pending(s)) {
            let stale = self.txs[s].published.is_some();
            return view(if stale { OutputState::Stale } else { OutputState::Pending }, None);
        }
        view(OutputState::Current, None)
    }
}

impl CheckpointStore {
    /// Currentness of the given outputs (any outpoint; unknown ones are `unknown`).
    pub fn output_states(&self, outpoints: &[Outpoint]) -> Result<Vec<OutputView>, ClientError> {
        let tx = Tx::new(&self.tree);
        let Some(l) = load(&tx)? else {
            return Ok(outpoints.iter().map(|o| OutputView { outpoint: *o, state: OutputState::Unknown, spent_by: None }).collect());
        };
        outpoints.iter().map(|o| l.output(&tx, *o)).collect()
    }

    /// The summary an application shows for the current accepted revision.
    pub fn reconciled_view(&self) -> Result<Option<ReconciledView>, ClientError> {
        let tx = Tx::new(&self.tree);
        let Some(l) = load(&tx)? else { return Ok(None) };
        let mut current = Vec::new();
        let mut spent = Vec::new();
        let creators: Vec<(Txid, u32)> = l
            .anchors
            .values()
            .map(|a| (a.txid, a.outputs))
            .chain(l.txs.values().filter(|r| !l.is_pending(&r.txid) && l.status(&r.txid).is_some_and(|s| s.spends())).map(|r| (r.txid, r.outputs)))
            .collect();
        let mut seen = BTreeSet::new();
        for (t, n) in creators {
            if !seen.insert(t) {
                continue;
            }
            for vout in 0..n {
                let o = l.output(&tx, Outpoint { txid: t, vout })?;
                match o.state {
                    OutputState::Current => current.push(o.outpoint),
                    OutputState::Spent => spent.push((o.outpoint, o.spent_by.expect("spent has a spender"))),
                    _ => {}
                }
            }
        }
        // Spends of outputs whose creator is not known as confirmed are still spends.
        for r in l.txs.values().filter(|r| !l.is_pending(&r.txid) && l.status(&r.txid).is_some_and(|s| s.spends())) {
            for i in &r.inputs {
                if !seen.contains(&i.prev.txid) {
                    spent.push((i.prev, r.txid));
                }
            }
        }
        current.sort();
        spent.sort();
        let pending: Vec<Txid> = l.txs.keys().filter(|t| l.is_pending(t)).copied().collect();
        let stale = l.txs.values().filter(|r| l.is_pending(&r.txid)).filter_map(|r| r.published.as_ref().map(|p| (r.txid, p.status))).collect();
        let conflicting = l
            .txs
            .keys()
            .filter(|t| !l.is_pending(t) && matches!(l.status(t), Some(Status::Conflicting | Status::DependentConflict)))
            .copied()
            .collect();
        Ok(Some(ReconciledView {
            revision: self.revision()?,
            context: l.meta.current().id.clone(),
            through: l.meta.position,
            current,
            spent,
            pending,
            conflicting,
            stale,
        }))
    }

    /// The §10.5 `ReconciledState` (JSON, U64 values as decimal strings), with the
    /// published memberships of every source. `chain` is the configured chain.
    pub fn reconciled_state(&self, chain: &Chain) -> Result<Option<Value>, ClientError> {
        let tx = Tx::new(&self.tree);
        let Some(l) = load(&tx)? else { return Ok(None) };
        let journal = l.meta.journal_id.clone();
        let pos = |p: &IngressPosition| json!({"journalId": journal, "position": p.position.to_string(), "index": p.index});
        let outpoint = |o: &Outpoint| json!({"chain": chain, "txid": o.txid, "outputIndex": o.vout});
        let mut transactions = Vec::new();
        for r in l.txs.values() {
            let pending = l.is_pending(&r.txid);
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
        for (id, reason) in &l.pending {
            let comp: Component = tx.get_json(&component_key(*id))?.ok_or_else(|| ClientError::storage("component missing"))?;
            pending_components.push(json!({"txids": comp.members, "reason": reason}));
        }
        let memberships = self.memberships_json(chain)?;
        Ok(Some(json!({
            "profile": PROFILE,
            "nonFinal": l.meta.non_final,
            "journalId": journal,
            "through": l.meta.position.to_string(),
            "contextId": l.meta.current().id,
            "transactions": transactions,
            "memberships": memberships,
            "replacements": l.replacements.iter().map(|r| json!({
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
    /// `None` until the reconciler is configured.
    pub reconciled: Option<ReconciledView>,
    /// Currentness of each present member's outpoint (same order as `members`;
    /// `None` for absent rows or when the reconciler is not configured).
    pub currentness: Vec<Option<OutputState>>,
}

impl CheckpointStore {
    pub fn revision_snapshot(&self, source: &super::SourceKey) -> Result<RevisionSnapshot, ClientError> {
        let _g = self.guard();
        let members = self.members(source)?;
        let partial_members = self.partial_members(source)?;
        let state = self.state(source)?;
        let reconciled = self.reconciled_view()?;
        let currentness = if reconciled.is_some() {
            let ops: Vec<Outpoint> = members
                .iter()
                .filter(|m| m.row.present)
                .map(|m| Ok(Outpoint { txid: super::tx::Hash32::from_hex(&m.row.outpoint.txid)?, vout: m.row.outpoint.output_index }))
                .collect::<Result<_, ClientError>>()?;
            let mut states = self.output_states(&ops)?.into_iter();
            members.iter().map(|m| if m.row.present { states.next().map(|o| o.state) } else { None }).collect()
        } else {
            vec![None; members.len()]
        };
        Ok(RevisionSnapshot { members, partial_members, state, reconciled, currentness })
    }
}
