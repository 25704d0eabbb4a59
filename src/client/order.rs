//! Readiness and candidate order (BRC-192 §10.2), for one component.
//!
//! A *support set* for a transaction is one evidence variant of it whose receipt
//! counts (its group's evidence all verified, [`super::evidence`]) plus support for
//! every parent: a journal parent's own readiness, a confirmed anchor (from the
//! position its proof arrived; an application's anchor from the start), or a proven
//! parent the same bundle carries. A variant whose bundle proves the transaction
//! itself (a mined subject) needs no parents. `readyAt` is the minimum over support
//! sets of the greatest receipt position in the set; verification completion never
//! enters it. The same computation over variants that are verified *or still
//! unjudged*, with receipts that count or may yet count, gives the earliest support
//! that could still turn out sufficient (`potential`); when that is earlier than
//! `readyAt` (or `readyAt` is not yet known) the earliest support is not determined
//! and the component waits (the barrier). A transaction with no complete support set
//! has neither: it is unresolved and reserves nothing.

use std::collections::{BTreeMap, BTreeSet};

use super::journal::{TxRecord, VerdictStatus};
use crate::bitcoin::tx::{Hash32, Outpoint, Txid};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub ready: Option<u64>,
    pub potential: Option<u64>,
    pub depth: u32,
    /// Every variant failed verification.
    pub invalid: bool,
    /// No variant verified or pending, some limited.
    pub limited: bool,
    /// Verified evidence exists, but every group that brought it was refused.
    pub refused: bool,
    /// Inputs without support (parent neither in the journal, nor confirmed, nor
    /// carried proven), when no complete support set exists.
    pub missing: Vec<Outpoint>,
}

impl Readiness {
    /// The readiness of a member whose component is settled: support at `ready`, and no
    /// unfinished verification that could move it (its potential is its support).
    pub fn settled(ready: u64, depth: u32) -> Readiness {
        Readiness { ready: Some(ready), potential: Some(ready), depth, invalid: false, limited: false, refused: false, missing: vec![] }
    }

    /// The earliest support is not settled yet: verification that could move it is unfinished.
    pub fn pending(&self) -> bool {
        match (self.potential, self.ready) {
            (Some(p), Some(r)) => p < r,
            (Some(_), None) => true,
            _ => false,
        }
    }
}

/// What the component's chain facts contribute to support.
#[derive(Clone, Copy)]
pub struct Facts<'a> {
    /// Confirmed transactions (parents outside the journal, or members an anchor
    /// names): the position from which each supports, `None` for always.
    pub anchors: &'a BTreeMap<Txid, Option<u64>>,
    /// `(txid, variant id)`: the variant's bundle carries a Merkle path for `txid`
    /// (the variant's own transaction, or a parent it supplies) that holds in the
    /// current view.
    pub proven: &'a BTreeSet<(Txid, Hash32)>,
}

/// Readiness of every member.
pub fn readiness(members: &BTreeMap<Txid, TxRecord>, facts: &Facts) -> BTreeMap<Txid, Readiness> {
    let mut out: BTreeMap<Txid, Readiness> = BTreeMap::new();
    // Parents before children: a transaction's txid commits to its inputs, so the
    // dependency relation is acyclic; an explicit stack avoids deep recursion.
    for root in members.keys() {
        let mut stack = vec![(*root, false)];
        while let Some((t, expanded)) = stack.pop() {
            if out.contains_key(&t) {
                continue;
            }
            let rec = &members[&t];
            if !expanded {
                stack.push((t, true));
                for i in &rec.inputs {
                    if members.contains_key(&i.prev.txid) && !out.contains_key(&i.prev.txid) {
                        stack.push((i.prev.txid, false));
                    }
                }
                continue;
            }
            let r = own(rec, members, facts, &out);
            out.insert(t, r);
        }
    }
    out
}

/// The readiness of `rec` alone, from its parents' (`members` holds its journal parents,
/// `done` their readiness): what [`readiness`] computes for it (`incremental.rs`).
pub(crate) fn leaf_readiness(rec: &TxRecord, members: &BTreeMap<Txid, TxRecord>, facts: &Facts, done: &BTreeMap<Txid, Readiness>) -> Readiness {
    own(rec, members, facts, done)
}

fn own(rec: &TxRecord, members: &BTreeMap<Txid, TxRecord>, facts: &Facts, done: &BTreeMap<Txid, Readiness>) -> Readiness {
    let verdicts = |s: VerdictStatus| rec.variants.iter().filter(|v| matches!(&v.verdict, Some(d) if d.status == s)).count();
    let possible_any = rec.variants.iter().any(|v| v.possible().is_some());
    let invalid = !rec.variants.is_empty() && verdicts(VerdictStatus::Invalid) == rec.variants.len();
    let limited = !possible_any && verdicts(VerdictStatus::Limited) > 0;
    let refused = !possible_any && verdicts(VerdictStatus::Verified) > 0;
    // The best support: (readyAt, needs no parents). Ties prefer a parent-free one.
    let mut best: Option<(u64, bool)> = None;
    let mut offer = |r: Option<u64>, free: bool| {
        if let Some(r) = r {
            if best.is_none_or(|(b, bf)| r < b || (r == b && free && !bf)) {
                best = Some((r, free));
            }
        }
    };
    let mut potential = None;
    // An anchor naming this transaction supports it without parents.
    if let Some(at) = facts.anchors.get(&rec.txid) {
        offer(Some(at.unwrap_or(0)), true);
        potential = Some(at.unwrap_or(0));
    }
    let mut missing = Vec::new();
    for v in &rec.variants {
        let Some(possible) = v.possible() else { continue };
        // A variant proving this very transaction (a mined subject) needs no parents.
        if facts.proven.contains(&(rec.txid, v.id)) {
            offer(v.support(), true);
            potential = min_opt(potential, Some(possible));
            continue;
        }
        let mut r = v.support();
        let mut q = Some(possible);
        let mut absent = Vec::new();
        for i in &rec.inputs {
            let p = i.prev.txid;
            if members.contains_key(&p) {
                let pr = &done[&p];
                if pr.potential.is_none() {
                    absent.push(i.prev); // a failed or unresolved parent
                    continue;
                }
                r = max_opt(r, pr.ready);
                q = max_opt(q, pr.potential);
            } else if let Some(at) = facts.anchors.get(&p) {
                // A confirmed parent supports from the position its proof arrived.
                r = r.map(|x| x.max(at.unwrap_or(0)));
                q = q.map(|x| x.max(at.unwrap_or(0)));
            } else if !facts.proven.contains(&(p, v.id)) {
                absent.push(i.prev); // neither in the journal, confirmed, nor carried proven
            }
        }
        if absent.is_empty() {
            offer(r, false);
            potential = min_opt(potential, q);
        } else if missing.is_empty() {
            missing = absent;
        }
    }
    if potential.is_some() {
        missing.clear();
    }
    let ready = best.map(|(r, _)| r);
    // depth: 0 when every unconfirmed parent was ready earlier (or the support needs
    // no parents); otherwise one more than the deepest parent ready at the same
    // position (ancestors first at a shared readyAt).
    let depth = match best {
        Some((r, false)) => rec
            .inputs
            .iter()
            .filter(|i| members.contains_key(&i.prev.txid))
            .map(|i| &done[&i.prev.txid])
            .filter(|pr| pr.ready == Some(r))
            .map(|pr| pr.depth + 1)
            .max()
            .unwrap_or(0),
        _ => 0,
    };
    Readiness { ready, potential, depth, invalid, limited, refused, missing }
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.max(b?))
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The total candidate order key `(readyAt, depth, firstRaw.position, firstRaw.index, txid)`.
pub type OrderKey = (u64, u32, u64, u32, Txid);

pub fn order_key(rec: &TxRecord, r: &Readiness) -> Option<OrderKey> {
    Some((r.ready?, r.depth, rec.first_raw.position, rec.first_raw.index, rec.txid))
}
