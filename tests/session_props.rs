//! Sessions against a simple model (BRC-193 §3, §4): random commits interleaved with
//! paged reads under random limits. Whatever the paging, the snapshot equals the
//! collection at W, the live groups after it replay every later change in order, the
//! watermarks stay coherent, and repeating a read returns the same bytes.

mod session_common;

use std::collections::BTreeMap;
use std::sync::Arc;

use overlay_lookup_live::select::AttrValue;
use overlay_lookup_live::session::{CancelToken, Caller, Provider};
use overlay_lookup_live::store::{Change, Outpoint, RemoveReason};
use serde_json::{json, Value};

/// A small deterministic generator (xorshift), so failures reproduce from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn outpoint(n: u64) -> Outpoint {
    let mut txid = [0u8; 32];
    txid[..8].copy_from_slice(&n.to_be_bytes());
    txid[31] = 1;
    Outpoint { txid, output_index: (n % 3) as u32 }
}

fn key(o: &Value) -> String {
    format!("{}.{}", o["txid"].as_str().unwrap(), o["outputIndex"])
}

fn outpoint_key(o: &Outpoint) -> String {
    format!("{}.{}", hex::encode(o.txid), o.output_index)
}

struct World {
    provider: Arc<Provider>,
    /// Model: present rows (outpoint key -> version counter), and its history per seq.
    present: BTreeMap<u64, u64>,
    history: Vec<(u64, BTreeMap<u64, u64>)>,
    rng: Rng,
    version: u64,
}

impl World {
    fn commit_random(&mut self) {
        let mut changes = Vec::new();
        for _ in 0..1 + self.rng.below(3) {
            let n = self.rng.below(40);
            let admit = !self.present.contains_key(&n) || self.rng.below(3) == 0;
            if admit {
                self.version += 1;
                changes.push(Change::Admit {
                    service: "svc".into(),
                    outpoint: outpoint(n),
                    topic: "tm".into(),
                    attributes: BTreeMap::from([("k".to_string(), AttrValue::Int((n % 2) as i64))]),
                    beef: format!("beef-{n}-{}", self.version).into_bytes(),
                    context: None,
                    expires_at: None,
                });
            } else {
                changes.push(Change::Remove { service: "svc".into(), outpoint: outpoint(n), reason: RemoveReason::Evicted, spend: None });
            }
        }
        // Apply to the model in change order, as the store does.
        let before = self.present.clone();
        for c in &changes {
            match c {
                Change::Admit { outpoint, beef, .. } => {
                    let n = u64::from_be_bytes(outpoint.txid[..8].try_into().unwrap());
                    self.present.insert(n, String::from_utf8(beef.clone()).unwrap().rsplit('-').next().unwrap().parse().unwrap());
                }
                Change::Remove { outpoint, .. } => {
                    let n = u64::from_be_bytes(outpoint.txid[..8].try_into().unwrap());
                    self.present.remove(&n);
                }
                _ => unreachable!("this model only admits and removes"),
            }
        }
        let seq = self.provider.store().commit(changes).unwrap();
        match seq {
            Some(s) => self.history.push((s, self.present.clone())),
            None => assert_eq!(before, self.present, "a no-op commit must not change the model"),
        }
    }

    fn model_at(&self, w: u64) -> BTreeMap<String, ()> {
        let state = self.history.iter().rev().find(|(s, _)| *s <= w).map(|(_, m)| m.clone()).unwrap_or_default();
        state.keys().map(|n| (outpoint_key(&outpoint(*n)), ())).collect()
    }
}

fn read_body(session: &str, cursor: &str, max_obs: u32) -> Vec<u8> {
    serde_json::to_vec(&json!({"version":1,"session":session,"cursor":cursor,"limits":{"maxBytes":65536,"maxObservations":max_obs,"waitMs":0}})).unwrap()
}

async fn read(p: &Arc<Provider>, caller: &Caller, body: Vec<u8>) -> (u16, Vec<u8>) {
    let r = p.read(body, caller.clone(), "public".into(), CancelToken::new()).await;
    (r.status, r.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_and_replay_match_the_model() {
    for seed in 1..=12u64 {
        let dir = tempfile::tempdir().unwrap();
        let provider = session_common::provider_in(dir.path());
        let store = provider.store().clone();
        let mut world = World { provider: provider.clone(), present: BTreeMap::new(), history: Vec::new(), rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)), version: 0 };
        for _ in 0..world.rng.below(30) {
            world.commit_random();
        }
        let caller = Caller { principal: String::new(), authenticated: false };
        let open = serde_json::to_vec(&json!({
            "version": 1, "requestId": format!("request-{seed:016}"), "service": "svc", "query": {},
            "limits": {"maxBytes": 65536, "maxObservations": 1 + world.rng.below(4), "waitMs": 0}
        }))
        .unwrap();
        let res = provider.open(&open, &caller, "public", &json!({"where": {"all": true}}));
        assert_eq!(res.status, 200, "{}", String::from_utf8_lossy(&res.body));
        let mut batch: Value = serde_json::from_slice(&res.body).unwrap();
        let w: u64 = batch["through"].as_str().unwrap().parse().unwrap();
        let session = batch["session"].as_str().unwrap().to_string();
        let mut snapshot = BTreeMap::new();
        let mut live_seen = world.model_at(w);
        let mut last_through = w;
        let mut last_seq = w;
        loop {
            let phase = batch["phase"].as_str().unwrap().to_string();
            let through: u64 = batch["through"].as_str().unwrap().parse().unwrap();
            let high: u64 = batch["highWater"].as_str().unwrap().parse().unwrap();
            assert!(through <= high, "seed {seed}: through above highWater");
            assert!(through >= last_through, "seed {seed}: through decreased");
            last_through = through;
            for g in batch["groups"].as_array().unwrap() {
                let seq: u64 = g["sequence"].as_str().unwrap().parse().unwrap();
                assert!(seq <= through, "seed {seed}: group beyond through");
                if phase == "snapshot" {
                    assert_eq!(seq, w, "seed {seed}: snapshot groups have sequence W");
                    for o in g["observations"].as_array().unwrap() {
                        assert!(snapshot.insert(key(&o["payload"]["evidence"]), ()).is_none(), "seed {seed}: duplicate row");
                    }
                } else {
                    assert!(seq > last_seq, "seed {seed}: live sequences must increase");
                    last_seq = seq;
                    for o in g["observations"].as_array().unwrap() {
                        match o["kind"].as_str().unwrap() {
                            "output" => {
                                live_seen.insert(key(&o["payload"]["evidence"]), ());
                            }
                            "withdraw" => {
                                live_seen.remove(&key(&o["payload"]["outpoint"]));
                            }
                            other => panic!("unexpected kind {other}"),
                        }
                    }
                }
            }
            if phase == "snapshot" && batch["snapshotComplete"] == true {
                assert_eq!(snapshot, world.model_at(w), "seed {seed}: snapshot differs from the collection at W");
            }
            // Commit in between reads, sometimes.
            if world.rng.below(2) == 0 {
                world.commit_random();
            }
            let live_done = phase == "live" && through == provider.store().high_water();
            if live_done {
                break;
            }
            let cursor = batch["cursor"].as_str().unwrap().to_string();
            let asked = 1 + world.rng.below(4) as u32;
            let mut body = read_body(&session, &cursor, asked);
            let (mut status, mut bytes) = read(&provider, &caller, body.clone()).await;
            if status == 413 {
                // A whole group is never split: raise the limit to the advertised minimum,
                // as a client does, and read the same cursor again.
                let e: Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(e["error"]["limit"]["kind"], "group", "seed {seed}");
                let need = e["error"]["limit"]["minimumObservations"].as_u64().unwrap() as u32;
                assert!(need > asked, "seed {seed}: the minimum must exceed what did not fit");
                body = read_body(&session, &cursor, need);
                (status, bytes) = read(&provider, &caller, body.clone()).await;
            }
            assert_eq!(status, 200, "seed {seed}: {}", String::from_utf8_lossy(&bytes));
            // A repeated read of a non-empty page returns identical bytes (replay-stable).
            let next: Value = serde_json::from_slice(&bytes).unwrap();
            if !next["groups"].as_array().unwrap().is_empty() {
                let (_, again) = read(&provider, &caller, body).await;
                let again: Value = serde_json::from_slice(&again).unwrap();
                assert_eq!(again["groups"], next["groups"], "seed {seed}: replay changed a page");
            }
            batch = next;
        }
        assert_eq!(live_seen, world.model_at(provider.store().high_water()), "seed {seed}: snapshot + live != collection");
        store.close().unwrap();
    }
}
