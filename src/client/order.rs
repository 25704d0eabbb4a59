//! Readiness and candidate order (BRC-192 §10.2), for one component.
//!
//! A transaction's support is its raw bytes with a verified evidence variant plus the
//! support of every unconfirmed parent; confirmed anchors need nothing more.
//! `readyAt` is the minimum over sufficient support sets of the greatest receipt
//! position in the set: with one position per variant this is
//! `max(earliest verified variant, readyAt of each journal parent)`. Verification
//! completion never enters it. The same computation over variants that are verified
//! *or still unverified* gives the earliest support that could still turn out
//! sufficient (`potential`); when that is earlier than `readyAt` (or `readyAt` is not
//! yet known) the earliest support is not determined and the component waits (the
//! barrier). A transaction with a missing or failed dependency has neither: it is
//! unresolved and reserves nothing.

use std::collections::{BTreeMap, BTreeSet};

use super::journal::{TxRecord, VerdictStatus};
use super::tx::{Outpoint, Txid};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub ready: Option<u64>,
    pub potential: Option<u64>,
    pub depth: u32,
    /// Every variant failed verification.
    pub invalid: bool,
    /// No variant verified or pending, some limited.
    pub limited: bool,
    /// Inputs whose parent is neither in the journal nor a confirmed anchor, or failed.
    pub missing: Vec<Outpoint>,
}

impl Readiness {
    /// The earliest support is not settled yet: verification that could move it is unfinished.
    pub fn pending(&self) -> bool {
        match (self.potential, self.ready) {
            (Some(p), Some(r)) => p < r,
            (Some(_), None) => true,
            _ => false,
        }
    }
}

/// Readiness of every member. `anchors` holds the confirmed parents outside the journal.
pub fn readiness(members: &BTreeMap<Txid, TxRecord>, anchors: &BTreeSet<Txid>) -> BTreeMap<Txid, Readiness> {
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
            let r = own(rec, members, anchors, &out);
            out.insert(t, r);
        }
    }
    out
}

fn own(rec: &TxRecord, members: &BTreeMap<Txid, TxRecord>, anchors: &BTreeSet<Txid>, done: &BTreeMap<Txid, Readiness>) -> Readiness {
    let first_with = |ok: &dyn Fn(Option<VerdictStatus>) -> bool| {
        rec.variants.iter().filter(|v| ok(v.verdict.as_ref().map(|d| d.status))).map(|v| v.first().position).min()
    };
    let verified = first_with(&|s| s == Some(VerdictStatus::Verified));
    let possible = first_with(&|s| s.is_none() || s == Some(VerdictStatus::Verified));
    let invalid = !rec.variants.is_empty() && rec.variants.iter().all(|v| matches!(&v.verdict, Some(d) if d.status == VerdictStatus::Invalid));
    let limited = possible.is_none() && rec.variants.iter().any(|v| matches!(&v.verdict, Some(d) if d.status == VerdictStatus::Limited));
    let mut ready = verified;
    let mut potential = possible;
    let mut missing = Vec::new();
    let mut parent_ready = Vec::new();
    for i in &rec.inputs {
        let p = i.prev.txid;
        if let Some(pr) = done.get(&p).filter(|_| members.contains_key(&p)) {
            if pr.invalid || pr.limited || !pr.missing.is_empty() {
                missing.push(i.prev);
                continue;
            }
            ready = max_opt(ready, pr.ready);
            potential = max_opt(potential, pr.potential);
            parent_ready.push((pr.ready, pr.depth));
        } else if !anchors.contains(&p) {
            missing.push(i.prev);
        }
    }
    if !missing.is_empty() {
        return Readiness { ready: None, potential: None, depth: 0, invalid, limited, missing };
    }
    // depth: 0 when every unconfirmed parent was ready earlier; otherwise one more than
    // the deepest parent ready at the same position (ancestors first at a shared readyAt).
    let depth = match ready {
        Some(r) => parent_ready.iter().filter(|(pr, _)| *pr == Some(r)).map(|(_, d)| d + 1).max().unwrap_or(0),
        None => 0,
    };
    Readiness { ready, potential, depth, invalid, limited, missing }
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.max(b?))
}

/// The total candidate order key `(readyAt, depth, firstRaw.position, firstRaw.index, txid)`.
pub type OrderKey = (u64, u32, u64, u32, Txid);

pub fn order_key(rec: &TxRecord, r: &Readiness) -> Option<OrderKey> {
    Some((r.ready?, r.depth, rec.first_raw.position, rec.first_raw.index, rec.txid))
}
