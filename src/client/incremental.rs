//! A reconciliation step computed from the one leaf it changed (BRC-192 §10.3), instead of
//! replaying the whole component (`reconcile::compute`).
//!
//! Why: spends join a component to all of its history, so an output spent again and again
//! made every step of a live follow cost time in the length of that history
//! (bench/reconcile-results.md, churn). Most steps change one *leaf*: a transaction no
//! journaled transaction spends from, that competes with nobody for its inputs. Its
//! arrival or its verdict cannot move any other member's result:
//! - readiness flows from parents to children only, and a leaf has no children;
//! - it takes inputs nobody else spends, so no reservation of the replay or of the
//!   current-view rebuild changes, and no conflict set gains a member;
//! - the one frontier it adds to the replay (its `readyAt`) can only make a deferred
//!   candidate eligible earlier, and the component's `exact` flag says there is none.
//!
//! So the leaf's result is computed from its parents' published results and its own facts,
//! exactly as the whole replay would compute it, under conditions checked here; when any
//! fails the caller recomputes the whole component (which sets `exact` again). The
//! conditions are deliberately narrow: whatever they leave out costs time, never
//! correctness. [`check`] compares every leaf step with the whole recompute when
//! `OLL_CHECK_INCREMENTAL` is set (the test suites set it).

use std::collections::BTreeMap;
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

use super::chain::is_final;
use super::db::Tx;
use super::journal::*;
use super::order::{leaf_readiness, Readiness};
use super::reconcile::{self, outpoint_edges, ViewFacts};
use super::ClientError;
use crate::bitcoin::tx::{Hash32, Txid};

/// Computes and writes the step for `comp` from the one leaf this commit changed, when the
/// conditions hold; `false` (nothing written) when the whole component must be recomputed.
pub(crate) fn leaf_step(tx: &mut Tx, meta: &Meta, comp: &mut Component, changes: &mut Option<Changes>) -> Result<bool, ClientError> {
    if !ENABLED.with(|e| e.get()) || !comp.exact || comp.pending.is_some() != comp.pending_leaf.is_some() {
        return Ok(false);
    }
    let Some(mut leaf) = the_changed_leaf(tx, meta, comp, changes)? else { return Ok(false) };
    // Its parents in the journal are members (`link` merged them): each must be settled
    // and selected (or included) in the current view, with its order known.
    let mut known: BTreeMap<Txid, TxRecord> = BTreeMap::new();
    let mut done: BTreeMap<Txid, Readiness> = BTreeMap::new();
    for i in &leaf.inputs {
        let p = i.prev.txid;
        if known.contains_key(&p) {
            continue;
        }
        let Some(rec) = load_tx(tx, &p)? else { continue };
        let Some(published) = &rec.published else { return Ok(false) };
        let Some(order) = &published.order else { return Ok(false) };
        if !matches!(published.status, Status::SelectedFinal | Status::Included) {
            return Ok(false);
        }
        // A settled member's potential support is its support (nothing it relies on
        // waits for a verdict), so its readiness is its published order.
        done.insert(p, Readiness::settled(order.ready_at, order.depth));
        known.insert(p, rec);
    }
    let mut facts = ViewFacts::default();
    facts.gather(tx, meta.current().tip, &leaf, |p| known.contains_key(p) || *p == leaf.txid)?;
    if facts.included.contains(&leaf.txid) {
        // A chain fact of its own forces its ancestors (the replay's chain overrides).
        return Ok(false);
    }
    let sensitive = tx.get(&sensitive_key(comp.id))?.is_some() || facts.chain || super::chain::context_sensitive(&leaf.parsed());
    let before = comp.clone();
    let r = leaf_readiness(&leaf, &known, &super::order::Facts { anchors: &facts.anchors, proven: &facts.proven }, &done);
    if r.pending() {
        // The whole replay would wait: the other members keep their results (stale).
        comp.pending = Some("verification-pending".into());
        comp.pending_leaf = Some(leaf.txid);
        reconcile::write_component(tx, &before, comp, sensitive)?;
        return Ok(true);
    }
    let (Some(ready), false, false) = (r.ready, r.invalid, r.limited) else { return Ok(false) };
    // The replay considers it first at its own readyAt, in the context active there: it is
    // eligible then if its journal parents were selected by then and are final there.
    let ctx = meta.at(ready);
    for rec in known.values() {
        let published = rec.published.as_ref().expect("checked above");
        if published.status == Status::Included {
            continue;
        }
        let selected_by_then = published.eligible.as_ref().is_some_and(|e| e.at <= ready);
        if !selected_by_then || !is_final(&rec.parsed(), ctx.finality) {
            return Ok(false);
        }
    }
    let parsed = leaf.parsed();
    if !meta.non_final && !is_final(&parsed, ctx.finality) {
        return Ok(false); // deferred to a later frontier: left to the whole replay
    }
    // It takes free inputs, and in the current view its parents are selected final.
    let current = meta.current().finality;
    let (status, reason) = if !is_final(&parsed, current) && !meta.non_final {
        (Status::Unsupported, "non-final and the policy is {nonFinal:false}")
    } else if is_final(&parsed, current) {
        (Status::SelectedFinal, "selected")
    } else {
        (Status::SelectedNonFinal, "selected as non-final intent")
    };
    let published = Published {
        order: Some(CandidateOrder { ready_at: ready, depth: r.depth, ready_context: ctx.id.clone() }),
        eligible: Some(Eligible { at: ready, context_id: ctx.id.clone() }),
        status,
        reason: reason.to_string(),
        replaces: None,
        conflicts_with: vec![],
    };
    reconcile::publish(tx, &mut leaf, published)?;
    comp.pending = None;
    comp.pending_leaf = None;
    reconcile::write_component(tx, &before, comp, sensitive)?;
    Ok(true)
}

/// What a commit changed, read once for every component it recomputes (a page's receipt
/// or verification recomputes many): its transaction records by component, and the
/// anchors it wrote with the spenders of their outputs.
pub(crate) struct Changes {
    /// A context change, a new header or a new view: no step is computed from a leaf.
    blocked: bool,
    by_component: BTreeMap<u64, Vec<TxRecord>>,
    /// (anchored txid, an anchor existed before this commit, spenders of its outputs).
    anchors: Vec<(Txid, bool, Vec<Txid>)>,
}

impl Changes {
    fn of(tx: &Tx, meta: &Meta) -> Result<Changes, ClientError> {
        let mut blocked = tx.written(b"Xh").next().is_some() || tx.written(b"Xv").next().is_some();
        if let Some(old) = tx.committed(META)? {
            let old: Meta = super::db::decode(&old)?;
            blocked |= old.contexts != meta.contexts;
        }
        let mut by_component: BTreeMap<u64, Vec<TxRecord>> = BTreeMap::new();
        let mut anchors = Vec::new();
        if !blocked {
            for rec in written_txs(tx) {
                by_component.entry(rec.component).or_default().push(rec);
            }
            for k in tx.written(ANCHOR_PREFIX) {
                let a = Hash32(k[ANCHOR_PREFIX.len()..].try_into().map_err(|_| ClientError::storage("anchor key"))?);
                let spenders = tx.scan(&edges_of_tx(&a))?.iter().map(|(e, _)| edge_of_key(e).1).collect();
                anchors.push((a, tx.committed(k)?.is_some(), spenders));
            }
        }
        Ok(Changes { blocked, by_component, anchors })
    }
}

/// The one member of `comp` this commit changed, if it is a leaf without competitors
/// (and, when the component waits, the leaf it waits for), and nothing else this commit
/// did can move another member: no context change, no new header, no anchor another
/// member relies on. `changes` is read from the commit on first use.
fn the_changed_leaf(tx: &Tx, meta: &Meta, comp: &Component, changes: &mut Option<Changes>) -> Result<Option<TxRecord>, ClientError> {
    if changes.is_none() {
        *changes = Some(Changes::of(tx, meta)?);
    }
    let changes = changes.as_ref().expect("read above");
    if changes.blocked {
        return Ok(None);
    }
    let leaf = match changes.by_component.get(&comp.id).map(Vec::as_slice) {
        Some([leaf]) => leaf.clone(),
        _ => return Ok(None),
    };
    if comp.pending_leaf.is_some_and(|p| p != leaf.txid) {
        return Ok(None);
    }
    if !tx.scan(&edges_of_tx(&leaf.txid))?.is_empty() {
        return Ok(None); // something spends from it: not a leaf
    }
    for i in &leaf.inputs {
        if outpoint_edges(tx, &i.prev)? != [leaf.txid] {
            return Ok(None); // a competitor for one of its inputs
        }
    }
    // An anchor this commit wrote may only concern the leaf: a new one naming the leaf or
    // a parent of it (an anchor that existed and changed could take a fact away).
    for (a, existed, spenders) in &changes.anchors {
        let mine = *a == leaf.txid || leaf.inputs.iter().any(|i| i.prev.txid == *a);
        if !mine || *existed {
            if comp.contains(tx, a)? {
                return Ok(None);
            }
            for spender in spenders {
                if *spender != leaf.txid && comp.contains(tx, spender)? {
                    return Ok(None);
                }
            }
        }
    }
    Ok(Some(leaf))
}

thread_local! {
    /// Leaf steps and whole recomputes made on this thread, and whether leaf steps are
    /// taken on it (the tests compare with the whole recompute alone).
    static COUNTS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    static ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Steps computed from their leaf, and whole recomputes, made on this thread (the
/// benches and tests that count work call the store on one thread).
pub fn counts() -> (u64, u64) {
    COUNTS.with(|c| c.get())
}

pub(crate) fn count(leaf: bool) {
    COUNTS.with(|c| {
        let (l, w) = c.get();
        c.set(if leaf { (l + 1, w) } else { (l, w + 1) });
    });
}

/// Turns leaf steps off (every step recomputes whole) or on, on this thread (tests).
pub fn set_enabled(on: bool) {
    ENABLED.with(|e| e.set(on));
}

/// 0: not read yet; 1: off; 2: on.
static CHECK: AtomicU8 = AtomicU8::new(0);

/// Turns the comparison of every leaf step with the whole recompute on or off (tests);
/// by default it follows `OLL_CHECK_INCREMENTAL`.
pub fn set_check(on: bool) {
    CHECK.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

fn checking() -> bool {
    match CHECK.load(Ordering::Relaxed) {
        0 => {
            let on = std::env::var_os("OLL_CHECK_INCREMENTAL").is_some_and(|v| v != "0");
            set_check(on);
            on
        }
        v => v == 2,
    }
}

/// With the check on, the whole recompute of `comp` after a leaf step must give what the
/// step wrote: every member's published result, the pending state and the replacements.
/// A difference is an `unavailable` error naming the member (the commit is not applied).
pub(crate) fn check(tx: &Tx, meta: &Meta, comp: &Component) -> Result<(), ClientError> {
    if !checking() {
        return Ok(());
    }
    let whole = reconcile::compute(tx, meta, comp)?;
    let differs = |what: String| Err(ClientError::storage(format!("incremental step differs from the whole recompute of component {}: {what}", comp.id)));
    match &whole.outcome.published {
        Some(published) => {
            if comp.pending.is_some() {
                return differs(format!("the step left it pending ({:?}), the whole recompute publishes", comp.pending));
            }
            for (t, p) in published {
                if whole.members[t].published.as_ref() != Some(p) {
                    return differs(format!("{t}: step {:?}, whole {:?}", whole.members[t].published, p));
                }
            }
            if whole.outcome.replacements != comp.replacements {
                return differs("replacements".into());
            }
        }
        None => {
            if whole.outcome.pending != comp.pending {
                return differs(format!("pending: step {:?}, whole {:?}", comp.pending, whole.outcome.pending));
            }
        }
    }
    let marker = tx.get(&sensitive_key(comp.id))?.is_some();
    if marker != whole.sensitive {
        return differs(format!("context marker: step {marker}, whole {}", whole.sensitive));
    }
    Ok(())
}
