//! Differential test of the leaf step (`src/client/incremental.rs`) against the whole
//! recompute. With the check on, every leaf step is compared with the whole recompute of
//! its component inside the same commit (a difference fails the step); random workloads
//! mix what the leaf step must leave to the whole recompute: competing spends, children
//! received before their parents, re-entries from another source, invalid and limited
//! verdicts, non-final transactions, and context changes. Each workload also runs on a
//! second store with the leaf step off, and both must report the same reconciled view.
//! Its own test binary: the switches are process-wide.

use std::collections::BTreeMap;

use overlay_lookup_live::bitcoin::tx::{Hash32, Txid};
use overlay_lookup_live::client::chain::Finality;
use overlay_lookup_live::client::incremental;
use overlay_lookup_live::client::journal::Anchor;
use overlay_lookup_live::client::reconcile::{Received, ReconcilerConfig, VerificationResult, VerificationStatus};
use overlay_lookup_live::client::ClientDb;
use proptest::prelude::*;
use sha2::{Digest, Sha256};

fn varint(n: usize, out: &mut Vec<u8>) {
    out.push(n as u8);
}

/// A raw transaction spending `inputs` (txid, vout) with `outputs` OP_TRUE outputs; a
/// `locktime` above zero with non-final sequences makes it non-final below that height.
fn raw_tx(inputs: &[(Txid, u32)], outputs: usize, tag: u64, locktime: u32) -> Vec<u8> {
    let mut t = 1u32.to_le_bytes().to_vec();
    varint(inputs.len(), &mut t);
    for (txid, vout) in inputs {
        let mut w = txid.0;
        w.reverse();
        t.extend_from_slice(&w);
        t.extend_from_slice(&vout.to_le_bytes());
        t.push(0);
        t.extend_from_slice(&(if locktime > 0 { 0u32 } else { u32::MAX }).to_le_bytes());
    }
    varint(outputs, &mut t);
    for i in 0..outputs {
        t.extend_from_slice(&(1000 + i as u64 + tag).to_le_bytes());
        t.push(1);
        t.push(0x51);
    }
    t.extend_from_slice(&locktime.to_le_bytes());
    t
}

#[derive(Clone, Debug)]
enum Op {
    /// Receive `n` new transactions, each spending one or two outputs picked by the seeds
    /// (an output already spent makes a competitor); `late` holds the last one back
    /// (its child may arrive first).
    Receive { n: u8, seeds: [u16; 4], two_inputs: bool, locktime: bool, late: bool },
    /// Answer pending jobs picked by the seeds: mostly verified, some invalid or limited.
    Verify { seeds: [u16; 3], verdict: u8 },
    /// The same transaction received again from another source.
    Reenter { seed: u16 },
    /// A new finality context (a higher tip), made active.
    Context,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1u8..4, any::<[u16; 4]>(), any::<bool>(), prop::bool::weighted(0.15), prop::bool::weighted(0.1))
            .prop_map(|(n, seeds, two_inputs, locktime, late)| Op::Receive { n, seeds, two_inputs, locktime, late }),
        5 => (any::<[u16; 3]>(), 0u8..20).prop_map(|(seeds, verdict)| Op::Verify { seeds, verdict }),
        1 => any::<u16>().prop_map(|seed| Op::Reenter { seed }),
        1 => Just(Op::Context),
    ]
}

struct World {
    /// Outputs that exist (anchored or journaled), to spend.
    outputs: Vec<(Txid, u32)>,
    raws: BTreeMap<Txid, Vec<u8>>,
    held_back: Vec<Vec<u8>>,
    tag: u64,
    height: u64,
    contexts: u32,
}

fn store_at(dir: &std::path::Path, name: &str) -> ClientDb {
    let store = ClientDb::open(dir.join(name)).unwrap();
    store.define_context("c0", Finality { tip_height: 100, mtp: 1_000_000 }).unwrap();
    store.configure_reconciler(&ReconcilerConfig { journal_id: "diff".into(), non_final: true, initial_context: "c0".into() }).unwrap();
    store
}

/// Applies `ops` to both stores (the same calls, in the same order).
fn run(ops: &[Op], stores: &[&ClientDb]) -> Result<(), String> {
    let mut w = World { outputs: vec![], raws: BTreeMap::new(), held_back: vec![], tag: 0, height: 100, contexts: 0 };
    for a in 0..4u64 {
        let raw = raw_tx(&[(Hash32([a as u8 + 1; 32]), 0)], 2, a, 0);
        let txid = Hash32::of_double_sha256(&raw);
        for s in stores {
            s.add_anchor(&raw, Anchor::Preverified).map_err(|e| e.to_string())?;
        }
        w.outputs.extend([(txid, 0), (txid, 1)]);
    }
    for op in ops {
        match op {
            Op::Receive { n, seeds, two_inputs, locktime, late } => {
                let mut items = Vec::new();
                for k in 0..*n as usize {
                    let first = w.outputs[seeds[k] as usize % w.outputs.len()];
                    let mut inputs = vec![first];
                    if *two_inputs {
                        let second = w.outputs[seeds[3] as usize % w.outputs.len()];
                        if second != first {
                            inputs.push(second);
                        }
                    }
                    w.tag += 1;
                    let lock = if *locktime { (w.height + 2) as u32 } else { 0 };
                    let raw = raw_tx(&inputs, 1 + (seeds[k] % 2) as usize, w.tag, lock);
                    let txid = Hash32::of_double_sha256(&raw);
                    w.raws.insert(txid, raw.clone());
                    w.outputs.push((txid, 0));
                    items.push(raw);
                }
                if *late {
                    w.held_back.push(items.pop().expect("n >= 1"));
                } else if let Some(back) = w.held_back.pop() {
                    items.push(back);
                }
                if items.is_empty() {
                    continue;
                }
                let received: Vec<Received> = items.into_iter().map(|raw| Received { raw, evidence: vec![] }).collect();
                for s in stores {
                    s.receive_transactions("a", &received).map_err(|e| e.to_string())?;
                }
            }
            Op::Verify { seeds, verdict } => {
                let jobs = stores[0].pending_verifications(None).map_err(|e| e.to_string())?;
                if jobs.is_empty() {
                    continue;
                }
                let mut results = Vec::new();
                for s in seeds {
                    let j = &jobs[*s as usize % jobs.len()];
                    if results.iter().any(|r: &VerificationResult| r.txid == j.txid) {
                        continue;
                    }
                    let status = match verdict {
                        0 => VerificationStatus::Invalid,
                        1 => VerificationStatus::Limited,
                        _ => VerificationStatus::Verified,
                    };
                    results.push(VerificationResult {
                        txid: j.txid,
                        variant: j.variant,
                        context_id: j.context_id.clone(),
                        status,
                        raw: Some(w.raws[&j.txid].clone()),
                        placement: None,
                        reason: "test".into(),
                        policy: (status == VerificationStatus::Limited).then(|| "p".into()),
                    });
                }
                for s in stores {
                    s.accept_verifications(&results).map_err(|e| e.to_string())?;
                }
            }
            Op::Reenter { seed } => {
                let Some((_, raw)) = w.raws.iter().nth(*seed as usize % w.raws.len().max(1)) else { continue };
                let received = [Received { raw: raw.clone(), evidence: vec![] }];
                for s in stores {
                    s.receive_transactions("b", &received).map_err(|e| e.to_string())?;
                }
            }
            Op::Context => {
                w.contexts += 1;
                w.height += 3;
                let id = format!("c{}", w.contexts);
                for s in stores {
                    s.define_context(&id, Finality { tip_height: w.height, mtp: 1_000_000 + w.height }).map_err(|e| e.to_string())?;
                    s.set_context(&id).map_err(|e| e.to_string())?;
                }
            }
        }
    }
    Ok(())
}

fn view(store: &ClientDb) -> String {
    format!("{:?}", store.reconciled_view().unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn leaf_steps_give_what_the_whole_recompute_gives(ops in prop::collection::vec(op(), 1..40)) {
        incremental::set_check(true);
        let dir = tempfile::tempdir().unwrap();
        let a = store_at(dir.path(), "a");
        run(&ops, &[&a]).map_err(TestCaseError::fail)?;
        // The same workload with every step recomputed whole.
        incremental::set_enabled(false);
        let b = store_at(dir.path(), "b");
        let whole = run(&ops, &[&b]);
        incremental::set_enabled(true);
        whole.map_err(TestCaseError::fail)?;
        prop_assert_eq!(view(&a), view(&b));
    }
}

/// The workload the leaf step is for: chains of spends, each received and then verified.
/// Every step after a chain's first is a leaf step, and the results are the whole
/// recompute's (the check is on).
#[test]
fn a_chain_of_spends_is_stepped_from_its_leaf() {
    incremental::set_check(true);
    let dir = tempfile::tempdir().unwrap();
    let store = store_at(dir.path(), "chain");
    let root = raw_tx(&[(Hash32([9; 32]), 0)], 1, 0, 0);
    store.add_anchor(&root, Anchor::Preverified).unwrap();
    let mut head = Hash32::of_double_sha256(&root);
    let (leaf0, _) = incremental::counts();
    for step in 0..200u64 {
        let raw = raw_tx(&[(head, 0)], 1, step + 1, 0);
        head = Hash32::of_double_sha256(&raw);
        store.receive_transactions("a", &[Received { raw: raw.clone(), evidence: vec![] }]).unwrap();
        let variant = Hash32(Sha256::digest(&raw).into());
        let r = VerificationResult {
            txid: head,
            variant,
            context_id: "c0".into(),
            status: VerificationStatus::Verified,
            raw: Some(raw),
            placement: None,
            reason: "test".into(),
            policy: None,
        };
        store.accept_verifications(&[r]).unwrap();
    }
    let (leaf1, _) = incremental::counts();
    // Receipt and verification of every spend but the first (which starts the component).
    assert!(leaf1 - leaf0 >= 2 * 199, "leaf steps: {}", leaf1 - leaf0);
    let view = store.reconciled_view().unwrap().unwrap();
    assert_eq!(view.current.len(), 1, "only the newest output is unspent and current");
}
