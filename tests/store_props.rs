//! Property tests against a simple in-memory model of the versioned index:
//! - every snapshot at every W equals the model's rows at W, filtered and ordered as the
//!   selection says (admission, or attribute asc/desc with the documented tie-breaks);
//! - a snapshot at a fixed W read before and after more commits is identical, and resuming
//!   from any row's key yields exactly the rest of the scan;
//! - applying the projections of groups W+1..=H to the snapshot at W yields the snapshot at H.
mod store_common;

use std::collections::BTreeMap;

use overlay_lookup_live::select::{order_value, AttrValue, Attributes, Order, Selection};
use overlay_lookup_live::store::{BlobRef, Change, Context, Outpoint, Projected, RemoveReason, SpendInput, Store};
use proptest::prelude::*;
use serde_json::json;
use store_common::*;

#[derive(Clone, Debug, PartialEq)]
struct Row {
    topic: String,
    attrs: Attributes,
    beef: Vec<u8>,
    ctx: Option<Context>,
    exp: Option<u64>,
    created: u64,
}

type State = BTreeMap<(String, Outpoint), Row>;

#[derive(Clone, Debug)]
enum Op {
    Admit { svc: bool, n: u32, topic: bool, k: i64, tags: u8, s: u8, beef: u8, ctx: u8 },
    Remove { svc: bool, n: u32, how: u8 },
    /// New evidence for a row if present (a merkle proof arrived).
    Refresh { svc: bool, n: u32, beef: u8 },
    /// A chain-view invalidation (log only).
    Invalidate { svc: bool },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<bool>(), 0u32..24, any::<bool>(), 0i64..5, 0u8..8, 0u8..4, 0u8..2, 0u8..3).prop_map(
            |(svc, n, topic, k, tags, s, beef, ctx)| Op::Admit { svc, n, topic, k, tags, s, beef, ctx }
        ),
        1 => (any::<bool>(), 0u32..24, 0u8..3).prop_map(|(svc, n, how)| Op::Remove { svc, n, how }),
        1 => (any::<bool>(), 0u32..24, 0u8..3).prop_map(|(svc, n, beef)| Op::Refresh { svc, n, beef }),
        1 => any::<bool>().prop_map(|svc| Op::Invalidate { svc }),
    ]
}

fn svc_name(b: bool) -> String {
    if b { "ls".into() } else { "other".into() }
}

fn to_change(o: &Op) -> Change {
    match *o {
        Op::Admit { svc, n, topic, k, tags, s, beef, ctx } => {
            let tag_list: Vec<AttrValue> =
                ["a", "b", "c"].iter().enumerate().filter(|(i, _)| tags & (1 << i) != 0).map(|(_, t)| AttrValue::Str(t.to_string())).collect();
            let mut attrs = Attributes::new();
            attrs.insert("k".into(), AttrValue::Int(k));
            attrs.insert("tag".into(), AttrValue::List(tag_list));
            if s > 0 {
                attrs.insert("s".into(), AttrValue::Str(["x", "xy", "y"][s as usize - 1].into()));
            }
            Change::Admit {
                service: svc_name(svc),
                outpoint: op(n),
                topic: if topic { "t1".into() } else { "t2".into() },
                attributes: attrs,
                beef: vec![n as u8, beef],
                context: (ctx > 0).then(|| Context { schema: "urn:c".into(), bytes: vec![ctx] }),
                expires_at: None,
            }
        }
        Op::Remove { svc, n, how } => Change::Remove {
            service: svc_name(svc),
            outpoint: op(n),
            reason: [RemoveReason::Spent, RemoveReason::Evicted, RemoveReason::NotRetained][how as usize],
            spend: (how == 0).then(|| SpendInput { spending_txid: [n as u8; 32], beef: vec![9, n as u8] }),
        },
        // Beef values 0..2 coincide with admissions' evidence, so some refreshes are no-ops.
        Op::Refresh { svc, n, beef } => Change::Refresh { service: svc_name(svc), outpoint: op(n), beef: vec![n as u8, beef] },
        Op::Invalidate { svc } => Change::Invalidate {
            service: svc_name(svc),
            context_id: "chain-view/0".into(),
            reason: "reorg".into(),
        },
    }
}

/// The model's effect of one group; `true` if anything changed.
fn apply(state: &mut State, seq: u64, changes: &[Change]) -> bool {
    let mut changed = false;
    for c in changes {
        match c {
            Change::Admit { service, outpoint, topic, attributes, beef, context, expires_at } => {
                let key = (service.clone(), outpoint.clone());
                let row = Row {
                    topic: topic.clone(),
                    attrs: attributes.clone(),
                    beef: beef.clone(),
                    ctx: context.clone(),
                    exp: *expires_at,
                    created: seq,
                };
                let same = state.get(&key).is_some_and(|r| Row { created: seq, ..r.clone() } == row);
                if !same {
                    state.insert(key, row);
                    changed = true;
                }
            }
            Change::Remove { service, outpoint, .. } => {
                changed |= state.remove(&(service.clone(), outpoint.clone())).is_some();
            }
            Change::Refresh { service, outpoint, beef } => {
                if let Some(r) = state.get_mut(&(service.clone(), outpoint.clone())) {
                    if r.beef != *beef {
                        r.beef = beef.clone();
                        r.created = seq;
                        changed = true;
                    }
                }
            }
            Change::Invalidate { .. } => changed = true,
        }
    }
    changed
}

/// What the snapshot of `svc` under `sel` must contain, in order.
fn expected(state: &State, svc: &str, sel: &Selection) -> Vec<Outpoint> {
    let mut rows: Vec<(&Outpoint, &Row)> = state
        .iter()
        .filter(|((s, _), r)| s == svc && sel.matches(&r.topic, &r.attrs))
        .map(|((_, o), r)| (o, r))
        .collect();
    match &sel.order {
        Order::Admission => rows.sort_by(|a, b| (a.1.created, a.0).cmp(&(b.1.created, b.0))),
        Order::Attribute { name, desc } => {
            rows.sort_by(|a, b| {
                (order_value(a.1.attrs.get(name)), a.1.created, a.0).cmp(&(order_value(b.1.attrs.get(name)), b.1.created, b.0))
            });
            if *desc {
                rows.reverse();
            }
        }
    }
    rows.into_iter().map(|(o, _)| o.clone()).collect()
}

fn selections() -> Vec<Selection> {
    [
        json!({"where": {"all": true}}),
        json!({"where": {"eq": ["k", 1]}}),
        json!({"where": {"in": ["k", [0, 2, 4]]}}),
        json!({"where": {"eq": ["tag", "a"]}}),
        json!({"where": {"prefix": ["s", "x"]}}),
        json!({"where": {"range": ["k", {"gte": 1, "lt": 3}]}}),
        json!({"where": {"and": [{"eq": ["tag", "b"]}, {"not": {"eq": ["k", 0]}}]}}),
        json!({"where": {"or": [{"eq": ["s", "y"]}, {"eq": ["tag", "c"]}]}}),
        json!({"where": {"topic": "t1"}}),
        json!({"where": {"all": true}, "order": {"attribute": "k"}}),
        json!({"where": {"eq": ["tag", "b"]}, "order": {"attribute": "k", "direction": "desc"}}),
        json!({"where": {"range": ["k", {"gt": 0, "lte": 3}]}, "order": {"attribute": "k"}}),
        json!({"where": {"all": true}, "order": {"attribute": "s", "direction": "desc"}}),
        json!({"where": {"prefix": ["s", "x"]}, "order": {"attribute": "s"}}),
        json!({"where": {"topic": "t2"}, "order": {"attribute": "tag"}}),
        json!({"where": {"range": ["k", {"gte": 1}]}, "order": {"attribute": "s"}}),
        json!({"where": {"in": ["k", [1, 3]]}, "order": {"attribute": "tag", "direction": "desc"}}),
    ]
    .iter()
    .map(|v| Selection::from_json(v).unwrap())
    .collect()
}

/// A scan's (resume key, outpoint) pairs.
type Scan = Vec<(Vec<u8>, Outpoint)>;

fn scan(s: &Store, sel: &Selection, w: u64, after: Option<&[u8]>) -> Scan {
    s.snapshot("ls", sel, w, after).unwrap().map(|r| r.map(|r| (r.key, r.outpoint)).unwrap()).collect()
}

/// Membership (outpoint -> (beef hash, context)) after applying projections to a snapshot.
type Members = BTreeMap<Outpoint, (BlobRef, Option<Context>)>;

fn members_at(s: &Store, sel: &Selection, w: u64) -> Members {
    s.snapshot("ls", sel, w, None).unwrap().map(|r| r.unwrap()).map(|r| (r.outpoint, (r.beef, r.context))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn snapshots_resumption_and_projection_agree_with_the_model(
        groups in prop::collection::vec(prop::collection::vec(op_strategy(), 1..5), 1..40),
        cut in 0usize..40,
        picks in prop::collection::vec(any::<prop::sample::Index>(), 4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path());
        let sels = selections();
        let mut history: Vec<State> = vec![State::new()];
        let cut = cut.min(groups.len());
        let mut frozen: Vec<(u64, Vec<Scan>)> = Vec::new();
        for (i, g) in groups.iter().enumerate() {
            if i == cut {
                // Read every selection at this W now; re-read after more commits below.
                let w = s.high_water();
                frozen.push((w, sels.iter().map(|sel| scan(&s, sel, w, None)).collect()));
            }
            let mut changes: Vec<Change> = g.iter().map(to_change).collect();
            // The store requires invalidations first in their group (stable: the rest keeps order).
            changes.sort_by_key(|c| !matches!(c, Change::Invalidate { .. }));
            let mut next = history.last().unwrap().clone();
            let seq = history.len() as u64;
            let changed = apply(&mut next, seq, &changes);
            let got = s.commit(changes).unwrap();
            prop_assert_eq!(got, changed.then_some(seq));
            if changed {
                history.push(next);
            }
        }
        let hw = s.high_water();
        prop_assert_eq!(hw as usize, history.len() - 1);
        // Snapshots at every W match the model.
        for (w, state) in history.iter().enumerate() {
            for sel in &sels {
                let got: Vec<Outpoint> = scan(&s, sel, w as u64, None).into_iter().map(|(_, o)| o).collect();
                prop_assert_eq!(got, expected(state, "ls", sel), "w={} sel={:?}", w, sel);
            }
        }
        // A snapshot read before later commits is unchanged.
        for (w, scans) in &frozen {
            for (sel, before) in sels.iter().zip(scans) {
                prop_assert_eq!(&scan(&s, sel, *w, None), before);
            }
        }
        // Resuming from any key yields the rest of the scan.
        for (pi, pick) in picks.iter().enumerate() {
            let w = pick.index(history.len()) as u64;
            for sel in &sels {
                let full = scan(&s, sel, w, None);
                if full.is_empty() { continue; }
                let i = picks[(pi + 1) % picks.len()].index(full.len());
                let rest = scan(&s, sel, w, Some(&full[i].0));
                prop_assert_eq!(&rest[..], &full[i + 1..]);
            }
        }
        // Projection: snapshot at W plus projections of later groups = snapshot at HW.
        let w0 = picks[0].index(history.len()) as u64;
        for sel in &sels {
            let mut m = members_at(&s, sel, w0);
            for r in s.log_after(w0, hw) {
                let (_, g) = r.unwrap();
                let mut rows_seen = false;
                for p in s.project(&g, "ls", sel) {
                    match p {
                        Projected::Invalidated { .. } => { prop_assert!(!rows_seen, "invalidations precede row observations"); continue; }
                        _ => rows_seen = true,
                    }
                    match p {
                        Projected::Invalidated { .. } => {}
                        Projected::Output { outpoint, beef, context, .. } => { m.insert(outpoint, (beef, context)); }
                        Projected::Withdraw { outpoint, .. } => { prop_assert!(m.remove(&outpoint).is_some(), "withdraw of a non-member"); }
                        Projected::Spend { previous, .. } => { prop_assert!(!m.contains_key(&previous), "spend must follow its withdraw"); }
                    }
                }
            }
            prop_assert_eq!(m, members_at(&s, sel, hw), "sel={:?}", sel);
        }
    }
}
