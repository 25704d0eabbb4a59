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
    reconcile_with(members, meta, chain, Scan::Waiting)
}

/// How the historical replay finds a frontier's candidates. Both give the same
/// outcome; `Every` is the definition as written (each frontier scans every candidate)
/// and stays as the tests' reference for `Waiting`.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Scan {
    Waiting,
    #[cfg_attr(not(test), allow(dead_code))]
    Every,
}

fn reconcile_with(members: &BTreeMap<Txid, TxRecord>, meta: &Meta, chain: &ChainFacts, scan: Scan) -> Outcome {
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
    // A frontier visits, in total order, the candidates ready by then and not yet
    // selected, replaced or lost: those deferred at earlier frontiers, then those whose
    // readyAt it reaches (their keys sort after every earlier one's). A candidate once
    // selected leaves only by being replaced, and replaced and lost are final, so the
    // ones left out can never be visited again: the replay is linear in the candidates
    // plus the deferrals, not candidates times frontiers.
    let mut admitted = 0;
    let mut waiting: Vec<usize> = Vec::new();
    for f in frontiers.iter().copied() {
        let ctx = meta.at(f);
        while admitted < candidates.len() && candidates[admitted].0 .0 <= f {
            waiting.push(admitted);
            admitted += 1;
        }
        let visiting = match scan {
            Scan::Waiting => std::mem::take(&mut waiting),
            Scan::Every => (0..admitted).collect(),
        };
        for &c in &visiting {
            let (_, t) = &candidates[c];
            if selected.contains(t) || replaced.contains(t) || lost.contains(t) {
                continue;
            }
            let tx = &parsed[t];
            let deps_ok = tx.inputs.iter().all(|i| {
                let p = i.prev.txid;
                !members.contains_key(&p) || forced.contains(&p) || (selected.contains(&p) && is_final(&parsed[&p], ctx.finality))
            });
            if !deps_ok || (!non_final_ok && !is_final(tx, ctx.finality)) {
                waiting.push(c); // deferred: reconsidered at later frontiers
                continue;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitcoin::tx::{Hash32, Input, SEQUENCE_FINAL};
    use crate::client::chain::Finality;
    use crate::client::journal::{ContextChange, IngressPosition, Receipt, ReceiptState, Variant, Verdict, VerdictStatus};

    /// proptest's deterministic generator: a fixed sequence, so a failure names its case.
    struct Rng(proptest::test_runner::TestRng);
    impl Rng {
        fn next(&mut self) -> u64 {
            proptest::prelude::Rng::next_u64(&mut self.0)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
            xs[self.below(xs.len() as u64) as usize]
        }
        fn hash(&mut self) -> Hash32 {
            let mut h = [0u8; 32];
            for c in h.chunks_mut(8) {
                c.copy_from_slice(&self.next().to_be_bytes());
            }
            Hash32(h)
        }
    }

    fn record(txid: Txid, inputs: Vec<Input>, locktime: u32, at: u64, verdict: Option<VerdictStatus>) -> TxRecord {
        let receipt = Receipt { at: IngressPosition { position: at, index: 0 }, source: "s".into(), group: None, state: ReceiptState::Accepted };
        let verdict = verdict.map(|status| Verdict { status, context_id: "c0".into(), reason: String::new(), policy: None });
        TxRecord {
            txid,
            raw: vec![],
            inputs,
            outputs: 2,
            locktime,
            first_raw: IngressPosition { position: at, index: 0 },
            variants: vec![Variant { id: txid, receipts: vec![receipt], verdict, proof: None, supplies: vec![] }],
            placements: vec![],
            component: 0,
            published: None,
        }
    }

    /// One random component: members spending earlier members' outputs or external
    /// anchors (so conflicts, dependencies and same-input replacements occur), final and
    /// non-final by height or time, received at random positions, under a journal with
    /// context changes that move finality.
    fn component(rng: &mut Rng) -> (BTreeMap<Txid, TxRecord>, Meta, BTreeMap<Txid, Option<u64>>) {
        let mut anchors = BTreeMap::new();
        let mut pool: Vec<Outpoint> = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let t = rng.hash();
            anchors.insert(t, rng.pick(&[None, Some(1), Some(6), Some(12)]));
            pool.extend((0..2).map(|vout| Outpoint { txid: t, vout }));
        }
        let mut members = BTreeMap::new();
        let mut order: Vec<Txid> = Vec::new();
        for _ in 0..2 + rng.below(10) {
            let t = rng.hash();
            let seq = |rng: &mut Rng| rng.pick(&[0, 1, 7, 0xffff_fffe, SEQUENCE_FINAL]);
            let inputs: Vec<Input> = match order.last().filter(|_| rng.below(4) == 0) {
                // A same-input alternative of an earlier member, with other sequences.
                Some(_) => {
                    let other = &members[&order[rng.below(order.len() as u64) as usize]];
                    let other: &TxRecord = other;
                    other.inputs.iter().map(|i| Input { prev: i.prev, sequence: seq(rng) }).collect()
                }
                None => {
                    let mut ins: Vec<Input> = Vec::new();
                    for _ in 0..1 + rng.below(2) {
                        let prev = rng.pick(&pool);
                        if !ins.iter().any(|i| i.prev == prev) {
                            ins.push(Input { prev, sequence: seq(rng) });
                        }
                    }
                    ins
                }
            };
            let locktime = rng.pick(&[0, 0, 4, 9, 20, 600_000_000]);
            let verdict = rng.pick(&[Some(VerdictStatus::Verified), Some(VerdictStatus::Verified), Some(VerdictStatus::Verified), Some(VerdictStatus::Invalid), None]);
            members.insert(t, record(t, inputs, locktime, 1 + rng.below(20), verdict));
            pool.extend((0..2).map(|vout| Outpoint { txid: t, vout }));
            order.push(t);
        }
        let mut contexts = vec![ContextChange { position: 0, id: "c0".into(), finality: Finality { tip_height: 3, mtp: 500_000_000 }, tip: None }];
        for (k, p) in [5u64, 11, 17].into_iter().enumerate() {
            if rng.below(2) == 0 {
                let finality = Finality { tip_height: rng.pick(&[2, 8, 25]), mtp: rng.pick(&[500_000_000, 700_000_000]) };
                contexts.push(ContextChange { position: p, id: format!("c{}", k + 1), finality, tip: None });
            }
        }
        let meta = Meta { journal_id: "j".into(), position: 22, non_final: rng.below(2) == 0, contexts, next_component: 1 };
        (members, meta, anchors)
    }

    #[test]
    fn the_waiting_scan_replays_exactly_as_scanning_every_candidate() {
        let mut rng = Rng(proptest::test_runner::TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha));
        let (mut replaced, mut conflicting, mut deferred) = (0, 0, 0);
        for case in 0..4000 {
            let (members, meta, anchors) = component(&mut rng);
            let proven = BTreeSet::new();
            let included = BTreeSet::new();
            let facts = ChainFacts { support: Facts { anchors: &anchors, proven: &proven }, included: &included };
            let fast = reconcile_with(&members, &meta, &facts, Scan::Waiting);
            let every = reconcile_with(&members, &meta, &facts, Scan::Every);
            assert_eq!(fast, every, "case {case}");
            replaced += usize::from(!fast.replacements.is_empty());
            if let Some(p) = &fast.published {
                conflicting += usize::from(p.values().any(|p| p.status == Status::Conflicting));
                // Eligible later than ready: the candidate was deferred at a frontier.
                deferred += usize::from(p.values().any(|p| matches!((&p.order, &p.eligible), (Some(o), Some(e)) if e.at > o.ready_at)));
            }
        }
        // The cases reach what the scan order matters for.
        assert!(replaced > 40 && conflicting > 300 && deferred > 100, "replaced {replaced}, conflicting {conflicting}, deferred {deferred}");
    }
}
