//! Property test of the durable store against a plain model (BRC-193 §4, §9): a
//! random stream of live membership groups, delivered in random batch sizes, with
//! random replays of already committed batches and random restarts, ends with the
//! same membership as applying each group once, in order.

mod client_common;

use std::collections::BTreeMap;

use client_common::fixture::{self, hex32};
use overlay_lookup_live::client::{ClientDb, CommitOptions};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    /// A new batch of groups; each group is a list of (outpoint index, present).
    Batch(Vec<Vec<(u32, bool)>>),
    /// Replay the k-th committed batch (modulo their count).
    Replay(usize),
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => prop::collection::vec(prop::collection::vec((0u32..4, any::<bool>()), 1..4), 0..4).prop_map(Step::Batch),
        2 => any::<usize>().prop_map(Step::Replay),
        1 => Just(Step::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
    #[test]
    fn store_matches_model(steps in prop::collection::vec(step(), 1..14), gaps in prop::collection::vec(1u64..4, 64)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut store = Some(ClientDb::open(&path).unwrap());
        let s = fixture::scope("02aa", "svc", "q", "public", "e1");
        let key = fixture::source_key(&s);
        let txid = hex32("tx");
        let g = store.as_ref().unwrap().begin_generation(&key, None).unwrap();
        let open = fixture::batch("sess", &s, "snapshot", vec![], "c0", true, 0, 0);
        store.as_ref().unwrap().commit_batch(&key, g, None, &open, &CommitOptions::default()).unwrap();

        let mut model: BTreeMap<u32, (bool, u64)> = BTreeMap::new();
        let mut committed: Vec<(String, Vec<u8>, bool)> = Vec::new();
        let (mut cursor, mut seq, mut n, mut gap) = ("c0".to_string(), 0u64, 0usize, gaps.iter().cycle());
        for st in steps {
            let st_ref = store.as_ref().unwrap();
            match st {
                Step::Batch(groups) => {
                    let mut rendered = Vec::new();
                    let has_groups = !groups.is_empty();
                    for changes in groups {
                        seq += gap.next().unwrap();
                        let obs = changes.iter().enumerate().map(|(i, (idx, present))| {
                            let id = format!("o{seq}-{i}");
                            if *present { fixture::output(&id, &s, &txid, *idx, None) } else { fixture::withdraw(&id, &s, &txid, *idx) }
                        }).collect();
                        for (idx, present) in &changes {
                            model.insert(*idx, (*present, seq));
                        }
                        rendered.push(fixture::group(&format!("g{seq}"), seq, obs));
                    }
                    n += 1;
                    let next = format!("c{n}");
                    // through may run past the last group (irrelevant records skipped).
                    let through = seq + 1;
                    seq = through;
                    let body = fixture::batch("sess", &s, "live", rendered, &next, true, through, through + 2);
                    st_ref.commit_batch(&key, g, Some(&cursor), &body, &CommitOptions::default()).unwrap();
                    committed.push((cursor.clone(), body, has_groups));
                    cursor = next;
                }
                Step::Replay(k) if !committed.is_empty() => {
                    let (expected, body, has_groups) = &committed[k % committed.len()];
                    let r = st_ref.commit_batch(&key, g, Some(expected), body, &CommitOptions::default());
                    if *has_groups {
                        // A replay of committed groups is a no-op.
                        let out = r.unwrap();
                        prop_assert_eq!((out.applied, out.accepted, out.duplicates > 0), (0, 0, true));
                    } else {
                        // An empty batch from an old cursor would move the cursor back: refused.
                        prop_assert_eq!(r.unwrap_err().code, overlay_lookup_live::client::ErrorCode::Conflict);
                    }
                }
                Step::Replay(_) => {}
                Step::Restart => {
                    store.take().unwrap().close().unwrap();
                    store = Some(ClientDb::open(&path).unwrap());
                }
            }
        }
        let st = store.as_ref().unwrap();
        let got: BTreeMap<u32, (bool, u64)> = st.members(&key).unwrap().into_iter()
            .map(|m| (m.row.outpoint.output_index, (m.row.present, m.row.sequence))).collect();
        prop_assert_eq!(got, model);
        prop_assert_eq!(st.checkpoint(&key).unwrap().unwrap().cursor, Some(cursor));
        let state = st.state(&key).unwrap();
        prop_assert_eq!(state.received, state.accepted);
    }
}
