//! Replays the membership-only traces of `spec/reconciliation-traces.json` through the
//! real on-disk CheckpointStore (BRC-193 §9, BRC-192 §10.5). Each `membership` step
//! becomes a real batch body (a live step in a fresh generation is preceded by an
//! empty completed snapshot, as an open would deliver); `restart` closes and reopens
//! the sled store; `expect` compares the published memberships
//! (`source/generation/outpoint/present|absent/sequence`). The transaction-level parts
//! of the traces (receive/verify/states/current/spent) belong to the BRC-192 graph
//! and are not part of this store; they are skipped and said so here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use overlay_lookup_live::client::fixture::{self, hex32};
use overlay_lookup_live::client::{CheckpointStore, CommitOptions, CommitOutcome, SourceKey};
use serde_json::{json, Value};

const TRACES: [&str; 5] = [
    "withdrawal-reentry-never-revives-spent-output",
    "membership-verification-preserves-source-order",
    "generation-reset-fences-old-workers",
    "within-group-membership-array-order",
    "snapshot-groups-sharing-watermark-retain-page-order",
];

fn traces() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spec/reconciliation-traces.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("trace file {} is required: {e}", path.display()));
    serde_json::from_str(&text).expect("trace file is JSON")
}

/// Per trace generation: what the harness sent, so a replay resends the same bytes
/// against the same cursor, as a repeated read would.
#[derive(Default)]
struct GenState {
    cursor: Option<String>,
    sent: BTreeMap<String, (Option<String>, Vec<u8>)>,
    store_generation: u64,
}

struct Harness {
    dir: tempfile::TempDir,
    store: Option<CheckpointStore>,
    gens: BTreeMap<(String, u64), GenState>,
    names: BTreeMap<String, String>,
}

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let store = Some(CheckpointStore::open(dir.path().join("store")).unwrap());
        Harness { dir, store, gens: BTreeMap::new(), names: BTreeMap::new() }
    }

    fn store(&self) -> &CheckpointStore {
        self.store.as_ref().unwrap()
    }

    fn restart(&mut self) {
        self.store.take().unwrap().close().unwrap();
        self.store = Some(CheckpointStore::open(self.dir.path().join("store")).unwrap());
    }

    fn scope(source: &str, generation: u64) -> Value {
        fixture::scope(&format!("host-{source}"), "ls_trace", "trace-query", "public", &format!("epoch-{generation}"))
    }

    fn key(source: &str) -> SourceKey {
        fixture::source_key(&Self::scope(source, 0))
    }

    /// "P:0" -> (txid, 0); remembers the name for printing memberships back.
    fn outpoint(&mut self, name: &str) -> (String, u32) {
        let (tx, idx) = name.split_once(':').unwrap();
        let txid = hex32(&format!("tx:{tx}"));
        self.names.insert(txid.clone(), tx.to_string());
        (txid, idx.parse().unwrap())
    }

    fn commit(&mut self, source: &str, generation: u64, expected: Option<String>, body: Vec<u8>, verified: bool) -> CommitOutcome {
        let g = self.gens[&(source.to_string(), generation)].store_generation;
        let opts = CommitOptions { verified, ..CommitOptions::default() };
        self.store().commit_batch(&Self::key(source), g, expected.as_deref(), &body, &opts).unwrap()
    }

    fn membership(&mut self, step: &Value) {
        let source = step["source"].as_str().unwrap().to_string();
        let generation = step["generation"].as_u64().unwrap();
        let sequence = step["sequence"].as_u64().unwrap();
        let id = step["id"].as_str().unwrap().to_string();
        let verified = step["verified"].as_bool().unwrap_or(true);
        let complete = step["complete"].as_bool().unwrap_or(false);
        let phase = step["phase"].as_str().unwrap_or(if complete { "snapshot" } else { "live" }).to_string();
        let scope = Self::scope(&source, generation);
        let session = format!("session-{source}-{generation}");
        let gk = (source.clone(), generation);

        if !self.gens.contains_key(&gk) {
            let g = self.store().begin_generation(&Self::key(&source), None).unwrap();
            assert_eq!(g, generation, "store generations are numbered like the trace's");
            self.gens.insert(gk.clone(), GenState { store_generation: g, ..Default::default() });
            if phase == "live" {
                // What an open of a source with an empty collection returns: a completed
                // snapshot at W = 0; the live groups follow it.
                let body = fixture::batch(&session, &scope, "snapshot", vec![], "open", true, 0, 0);
                self.commit(&source, generation, None, body, true);
                self.gens.get_mut(&gk).unwrap().cursor = Some("open".into());
            }
        }

        if let Some((expected, body)) = self.gens[&gk].sent.get(&id).cloned() {
            // Replay of a committed group: the same read returns the same bytes.
            let out = self.commit(&source, generation, expected, body, verified);
            assert_eq!((out.applied, out.accepted), (0, 0), "replay of {id} must be a no-op");
            return;
        }

        let mut observations = Vec::new();
        for (i, c) in step["changes"].as_array().unwrap().iter().enumerate() {
            let (txid, idx) = self.outpoint(c["outpoint"].as_str().unwrap());
            let oid = format!("{id}#{i}");
            observations.push(if c["present"].as_bool().unwrap() {
                fixture::output(&oid, &scope, &txid, idx, Some("{\"n\":1}"))
            } else {
                fixture::withdraw(&oid, &scope, &txid, idx)
            });
        }
        let cursor = format!("after-{id}");
        let body = fixture::batch(
            &session,
            &scope,
            &phase,
            vec![fixture::group(&id, sequence, observations)],
            &cursor,
            complete || phase == "live",
            sequence,
            sequence,
        );
        let expected = self.gens[&gk].cursor.clone();
        let out = self.commit(&source, generation, expected.clone(), body.clone(), verified);
        let st = self.gens.get_mut(&gk).unwrap();
        st.sent.insert(id, (expected, body));
        if !out.ignored {
            assert_eq!(out.applied, 1);
            st.cursor = Some(cursor);
        }
    }

    fn verified(&mut self, step: &Value) {
        let source = step["source"].as_str().unwrap();
        let generation = step["generation"].as_u64().unwrap();
        let g = self.gens[&(source.to_string(), generation)].store_generation;
        self.store().mark_verified(&Self::key(source), g, step["id"].as_str().unwrap()).unwrap();
    }

    fn memberships(&self) -> Vec<String> {
        let sources: std::collections::BTreeSet<&String> = self.gens.keys().map(|(s, _)| s).collect();
        let mut out = Vec::new();
        for s in sources {
            for m in self.store().members(&Self::key(s)).unwrap() {
                out.push(format!(
                    "{s}/{}/{}:{}/{}/{}",
                    m.generation,
                    self.names[&m.row.outpoint.txid],
                    m.row.outpoint.output_index,
                    if m.row.present { "present" } else { "absent" },
                    m.row.sequence
                ));
            }
        }
        out.sort();
        out
    }
}

fn run(trace: &Value) {
    let name = trace["name"].as_str().unwrap();
    let mut h = Harness::new();
    let mut expects = 0;
    for step in trace["steps"].as_array().unwrap() {
        match step["op"].as_str().unwrap() {
            "membership" => h.membership(step),
            "membershipVerified" => h.verified(step),
            "restart" => h.restart(),
            "expect" => {
                let mut want: Vec<String> = step["value"]["memberships"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{name}: expect without memberships"))
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect();
                want.sort();
                assert_eq!(h.memberships(), want, "trace {name}, expect #{expects}");
                expects += 1;
            }
            // Transaction receipt/verification belong to the BRC-192 graph, not this store.
            "receive" | "verify" => {}
            other => panic!("{name}: unexpected op {other}"),
        }
    }
    assert!(expects > 0, "{name} checked nothing");
}

#[test]
fn membership_traces_replay_through_the_durable_store() {
    let all = traces();
    assert_eq!(all.len(), 34, "the trace corpus has 34 traces");
    for name in TRACES {
        let t = all.iter().find(|t| t["name"] == json!(name)).unwrap_or_else(|| panic!("trace {name} missing"));
        run(t);
    }
}

/// Pending and stale state during the reset trace, which the trace itself does not
/// print: the old generation is stale, the new one is partial and pending.
#[test]
fn reset_trace_exposes_stale_and_pending_state() {
    let all = traces();
    let t = all.iter().find(|t| t["name"] == json!("generation-reset-fences-old-workers")).unwrap();
    let steps = t["steps"].as_array().unwrap();
    let mut h = Harness::new();
    h.membership(&steps[0]);
    h.membership(&steps[1]);
    let key = Harness::key("a");
    let st = h.store().state(&key).unwrap();
    assert_eq!((st.current_generation, st.pending_generation, st.stale), (Some(0), Some(1), true));
    assert_eq!(st.pending_count, 1);
    assert_eq!(st.pending_groups[0].group_id, "snapshot");
    assert!(h.store().members(&key).unwrap().iter().all(|m| m.stale));
    assert!(h.store().partial_members(&key).unwrap().is_empty(), "the pending snapshot group is not accepted yet");
    h.restart();
    h.verified(&steps[4]);
    let st = h.store().state(&key).unwrap();
    assert_eq!((st.current_generation, st.pending_generation, st.stale, st.pending_count), (Some(1), None, false, 0));
    assert!(h.store().members(&key).unwrap().iter().all(|m| !m.stale));
}
