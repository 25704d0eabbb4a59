//! Selection for one reconciliation component (BRC-192 §10.1, §10.3, §10.4). Pure: the
//! reconciler loads the component's records and the chain facts, calls [`reconcile`],
//! and commits the result with the step that caused it.
//!
//! 1. Chain overrides: members included in the current view, with their journal
//!    ancestors, reserve their inputs first. Two of them spending one outpoint is a
//!    contradictory history in one view: the component stops with `context-changed`.
//! 2. Historical replay over journal frontiers (every readyAt, every context change,
//!    the current frontier), each in the context active there: candidates in total
//!    order take free inputs, or replace the single non-final selection holding exactly
//!    their ordered inputs; losers stay conflicts of this pass; deferred ones (parents
//!    not selected final yet, or non-final under `{nonFinal:false}`) come back at later
//!    frontiers. The first frontier where a candidate may be considered is its eligibility.
//! 3. Current-view rebuild: replacement chains collapse into their survivor, which
//!    inherits the original's reservation priority `(eligibleAt, total order)`;
//!    candidates never eligible use the current frontier. In that order, ancestors
//!    first, a candidate is selected when its parents are selected final today, its
//!    inputs are free and today's finality is allowed by the policy.

use std::collections::{BTreeMap, BTreeSet};

use super::chain::{is_final, replaces};
use super::journal::{CandidateOrder, Eligible, Meta, Published, Replacement, Status, TxRecord};
use super::order::{order_key, readiness, Facts, OrderKey, Readiness};
use crate::bitcoin::tx::{Outpoint, RawTx, Txid};

/// What the caller knows about the chain for this component.
pub struct ChainFacts<'a> {
    /// What supports readiness: confirmed anchors and Merkle claims in this view.
    pub support: Facts<'a>,
    /// Members confirmed in the current view (a placement on its chain, a verified
    /// Merkle claim of their own, or an anchor naming them).
    pub included: &'a BTreeSet<Txid>,
}

#[derive(Debug, PartialEq)]
pub struct Outcome {
    /// `None` while the component waits; the previous accepted results stay (stale).
    pub published: Option<BTreeMap<Txid, Published>>,
    pub pending: Option<String>,
    pub replacements: Vec<Replacement>,
    /// Readiness of each member (also while pending: orders of settled members).
    pub readiness: BTreeMap<Txid, Readiness>,
}

pub fn reconcile(members: &BTreeMap<Txid, TxRecord>, meta: &Meta, chain: &ChainFacts) -> Outcome {
    let ready = readiness(members, &chain.support);
    if members.keys().any(|t| ready[t].pending()) {
        return Outcome { published: None, pending: Some("verification-pending".into()), replacements: vec![], readiness: ready };
    }
    let parsed: BTreeMap<Txid, RawTx> = members.iter().map(|(t, r)| (*t, r.parsed())).collect();

    // 1. Chain overrides and their journal ancestor closure.
    let mut forced: BTreeSet<Txid> = BTreeSet::new();
    let mut todo: Vec<Txid> = chain.included.iter().copied().filter(|t| members.contains_key(t)).collect();
    while let Some(t) = todo.pop() {
        if forced.insert(t) {
            todo.extend(parsed[&t].inputs.iter().map(|i| i.prev.txid).filter(|p| members.contains_key(p)));
        }
    }
    let mut chain_holds: BTreeMap<Outpoint, Txid> = BTreeMap::new();
    for t in &forced {
        for i in &parsed[t].inputs {
            if let Some(other) = chain_holds.insert(i.prev, *t) {
                if other != *t {
                    return Outcome {
                        published: None,
                        pending: Some("context-changed".into()),
                        replacements: vec![],
                        readiness: ready,
                    };
                }
            }
        }
    }

    let mut candidates: Vec<(OrderKey, Txid)> = members
        .iter()
        .filter(|(t, _)| !forced.contains(*t))
        .filter_map(|(t, rec)| {
            let r = &ready[t];
            if r.invalid || r.limited {
                return None;
            }
            order_key(rec, r).map(|k| (k, *t))
        })
        .collect();
    candidates.sort();
    let order: BTreeMap<Txid, OrderKey> = candidates.iter().map(|(k, t)| (*t, *k)).collect();

    // 2. Historical replay.
    let now = meta.position;
    let mut frontiers: BTreeSet<u64> = candidates.iter().map(|(k, _)| k.0).collect();
    let first = frontiers.iter().next().copied().unwrap_or(now);
    frontiers.extend(meta.contexts.iter().map(|c| c.position).filter(|p| *p >= first));
    frontiers.insert(now);
    let non_final_ok = meta.non_final;
    let mut holds = chain_holds.clone();
    let mut selected: BTreeSet<Txid> = BTreeSet::new();
    let mut replaced: BTreeSet<Txid> = BTreeSet::new();
    let mut lost: BTreeSet<Txid> = BTreeSet::new();
    let mut eligible: BTreeMap<Txid, Eligible> = BTreeMap::new();
    let mut predecessor: BTreeMap<Txid, Txid> = BTreeMap::new();
    let mut replacements = Vec::new();
    for f in frontiers.iter().copied() {
        let ctx = meta.at(f);
        for (k, t) in &candidates {
            if k.0 > f || selected.contains(t) || replaced.contains(t) || lost.contains(t) {
                continue;
            }
            let tx = &parsed[t];
            let deps_ok = tx.inputs.iter().all(|i| {
                let p = i.prev.txid;
                !members.contains_key(&p) || forced.contains(&p) || (selected.contains(&p) && is_final(&parsed[&p], ctx.finality))
            });
            if !deps_ok || (!non_final_ok && !is_final(tx, ctx.finality)) {
                continue; // deferred: reconsidered at later frontiers
            }
            eligible.entry(*t).or_insert_with(|| Eligible { at: f, context_id: ctx.id.clone() });
            let occupants: BTreeSet<Txid> = tx.inputs.iter().filter_map(|i| holds.get(&i.prev).copied()).collect();
            if occupants.is_empty() {
                take(&mut holds, tx, *t);
                selected.insert(*t);
                continue;
            }
            let single = (occupants.len() == 1).then(|| *occupants.iter().next().unwrap());
            match single {
                Some(s) if selected.contains(&s) && !is_final(&parsed[&s], ctx.finality) && replaces(tx, &parsed[&s]) => {
                    selected.remove(&s);
                    replaced.insert(s);
                    take(&mut holds, tx, *t);
                    selected.insert(*t);
                    predecessor.insert(*t, s);
                    replacements.push(Replacement { previous: s, replacement: *t, at: f, context_id: ctx.id.clone() });
                }
                _ => {
                    lost.insert(*t);
                }
            }
        }
    }

    // 3. Current-view rebuild with inherited reservation priority.
    let cur = meta.current().finality;
    let priority = |t: &Txid| -> (u64, OrderKey) {
        let mut origin = *t;
        while let Some(p) = predecessor.get(&origin) {
            origin = *p;
        }
        match eligible.get(&origin) {
            Some(e) => (e.at, order[&origin]),
            None => (now, order[t]),
        }
    };
    let mut queue: Vec<((u64, OrderKey), Txid)> =
        candidates.iter().map(|(_, t)| *t).filter(|t| !replaced.contains(t)).map(|t| (priority(&t), t)).collect();
    queue.sort();
    let mut status: BTreeMap<Txid, (Status, String)> = BTreeMap::new();
    let mut holds = chain_holds;
    // Ancestors before descendants: a candidate waits in the queue until its journal
    // parents have a status (each pass settles at least the first waiting one).
    loop {
        let mut rest = Vec::new();
        let mut progressed = false;
        for (p, t) in queue {
            let tx = &parsed[&t];
            let parents: Vec<Txid> = tx.inputs.iter().map(|i| i.prev.txid).filter(|p| members.contains_key(p) && !forced.contains(p)).collect();
            if parents.iter().any(|p| order.contains_key(p) && !replaced.contains(p) && !status.contains_key(p)) {
                rest.push((p, t));
                continue;
            }
            progressed = true;
            let usable = parents.iter().all(|p| matches!(status.get(p), Some((Status::SelectedFinal, _))));
            let s = if !usable {
                (Status::DependentConflict, "a parent is not selected final in the current view".to_string())
            } else if !is_final(tx, cur) && !non_final_ok {
                (Status::Unsupported, "non-final and the policy is {nonFinal:false}".to_string())
            } else if let Some(h) = tx.inputs.iter().find_map(|i| holds.get(&i.prev)) {
                (Status::Conflicting, format!("an input is reserved by {h}"))
            } else {
                take(&mut holds, tx, t);
                if is_final(tx, cur) {
                    (Status::SelectedFinal, "selected".to_string())
                } else {
                    (Status::SelectedNonFinal, "selected as non-final intent".to_string())
                }
            };
            status.insert(t, s);
        }
        if rest.is_empty() || !progressed {
            break;
        }
        queue = rest;
    }

    let conflicts = conflict_sets(&parsed);
    let successor: BTreeMap<Txid, Txid> = predecessor.iter().map(|(n, o)| (*o, *n)).collect();
    let mut published = BTreeMap::new();
    for (t, rec) in members {
        let r = &ready[t];
        let (st, reason) = if forced.contains(t) {
            (Status::Included, "included in the current view".to_string())
        } else if r.invalid {
            (Status::Invalid, "no evidence variant verified".to_string())
        } else if r.limited {
            (Status::Limited, "verification was limited".to_string())
        } else if replaced.contains(t) {
            (Status::Conflicting, format!("replaced by {}", successor[t]))
        } else if let Some(s) = status.get(t) {
            s.clone()
        } else if r.refused {
            (Status::Unresolved, "its verified evidence came only in refused groups (a sibling candidate is invalid or limited)".to_string())
        } else {
            (Status::Unresolved, "missing or failed dependencies".to_string())
        };
        let order = r.ready.map(|ready_at| CandidateOrder {
            ready_at,
            depth: r.depth,
            ready_context: meta.at(ready_at).id.clone(),
        });
        published.insert(
            *t,
            Published {
                order,
                eligible: eligible.get(t).cloned(),
                status: st,
                reason,
                replaces: if st == Status::SelectedFinal || st == Status::SelectedNonFinal { predecessor.get(t).copied() } else { None },
                conflicts_with: conflicts.get(t).map(|s| s.iter().copied().collect()).unwrap_or_default(),
            },
        );
        let _ = rec;
    }
    Outcome { published: Some(published), pending: None, replacements, readiness: ready }
}

fn take(holds: &mut BTreeMap<Outpoint, Txid>, tx: &RawTx, t: Txid) {
    for i in &tx.inputs {
        holds.insert(i.prev, t);
    }
}

/// For each member, the other members spending one of its inputs (sorted, unique).
fn conflict_sets(parsed: &BTreeMap<Txid, RawTx>) -> BTreeMap<Txid, BTreeSet<Txid>> {
    let mut by_input: BTreeMap<Outpoint, Vec<Txid>> = BTreeMap::new();
    for (t, tx) in parsed {
        for i in &tx.inputs {
            by_input.entry(i.prev).or_default().push(*t);
        }
    }
    let mut out: BTreeMap<Txid, BTreeSet<Txid>> = BTreeMap::new();
    for spenders in by_input.values().filter(|s| s.len() > 1) {
        for a in spenders {
            for b in spenders {
                if a != b {
                    out.entry(*a).or_default().insert(*b);
                }
            }
        }
    }
    out
}

/// Whether any member's result can change with the chain context.
pub fn context_sensitive(members: &BTreeMap<Txid, TxRecord>) -> bool {
    members.values().any(|r| !r.placements.is_empty() || super::chain::context_sensitive(&r.parsed()))
}
