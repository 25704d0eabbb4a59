//! Evidence assembly at receipt (src/client/evidence.rs) on a real redb store, with real
//! bundles written by @bsv/sdk (tests/fixtures/beef/bundles.json): which claims enter the
//! journal as verification jobs, and which are refused with a recorded verdict and reason.

mod client_common;

use base64::Engine;
use overlay_lookup_live::bitcoin::beef;
use overlay_lookup_live::bitcoin::tx::Hash32;
use overlay_lookup_live::client::chain::Finality;
use client_common::fixture;
use overlay_lookup_live::client::journal::VerdictStatus;
use overlay_lookup_live::client::reconcile::ReconcilerConfig;
use overlay_lookup_live::client::{ClientDb, CommitOptions};
use serde_json::Value;

fn bundle(name_prefix: &str) -> Vec<u8> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/beef/bundles.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let c = v["cases"].as_array().unwrap().iter().find(|c| c["name"].as_str().unwrap().starts_with(name_prefix)).unwrap();
    hex::decode(c["hex"].as_str().unwrap()).unwrap()
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// A store with the reconciler and one source whose open batch carries `observations`
/// (one group each); returns the store and the group count it accepted into membership.
fn receive(dir: &std::path::Path, observations: Vec<Value>) -> (ClientDb, u64) {
    let store = ClientDb::open(dir.join("s")).unwrap();
    store.define_context("tip", Finality { tip_height: 900_000, mtp: 4_000_000_000 }).unwrap();
    store.configure_reconciler(&ReconcilerConfig { journal_id: "t".into(), non_final: false, initial_context: "tip".into() }).unwrap();
    let s = fixture::scope("02aa", "ls_notes", "q", "public", "e1");
    let key = fixture::source_key(&s);
    let g = store.begin_generation(&key, None).unwrap();
    let groups = observations.into_iter().enumerate().map(|(i, o)| fixture::group(&format!("g{i}"), 5, vec![o])).collect();
    let body = fixture::batch("sess", &s, "snapshot", groups, "c1", true, 5, 5);
    let out = store.commit_batch(&key, g, None, &body, &CommitOptions::default()).unwrap();
    let present = store.members(&key).unwrap().iter().filter(|m| m.row.present).count() as u64;
    assert_eq!(out.applied, store.state(&key).unwrap().received);
    (store, present)
}

fn output(id: &str, txid: &Hash32, vout: u32, beef: &[u8]) -> Value {
    let s = fixture::scope("02aa", "ls_notes", "q", "public", "e1");
    fixture::output_with(id, &s, &txid.to_hex(), vout, None, &b64(beef))
}

fn subject(bytes: &[u8]) -> (Hash32, usize) {
    let b = beef::parse(bytes).unwrap();
    let last = b.entries.last().unwrap().txid();
    let outputs = b.raw(&last).unwrap().0.outputs.len();
    (b.subject.unwrap_or(last), outputs)
}

#[test]
fn v1_v2_and_atomic_bundles_become_jobs_for_their_target_and_unproven_ancestors() {
    for name in ["Transaction.toBEEF", "new Beef()", "toBinaryAtomic", "engine toAtomicBEEF", "mined subject atomic"] {
        let dir = tempfile::tempdir().unwrap();
        let bytes = bundle(name);
        let (target, _) = subject(&bytes);
        let (store, present) = receive(dir.path(), vec![output("o", &target, 0, &bytes)]);
        assert_eq!(present, 1, "{name}");
        let jobs = store.pending_verifications(None).unwrap();
        assert!(jobs.iter().any(|j| j.txid == target), "{name}: a job for the target");
        // Proven transactions are claims of the bundle, never jobs of their own.
        let b = beef::parse(&bytes).unwrap();
        for j in &jobs {
            assert!(b.raw(&j.txid).is_some_and(|(_, bump)| bump.is_none() || j.txid == target), "{name}");
        }
        let rec = store.transaction(&target).unwrap().unwrap();
        assert_eq!(rec.variants[0].proof.is_some(), name.starts_with("mined"), "{name}: a mined subject carries its proof");
        store.close().unwrap();
    }
}

#[test]
fn claims_the_bytes_refute_are_refused_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let good = bundle("toBinaryAtomic");
    let (target, outputs) = subject(&good);
    let other = bundle("mined subject atomic");
    let (other_txid, _) = subject(&other);
    let partial = bundle("txid-only parent");
    let txid_only = beef::parse(&partial).unwrap().entries.iter().find_map(|e| match e {
        beef::Entry::TxidOnly(t) => Some(*t),
        _ => None,
    });
    let cases: Vec<(Value, Hash32, &str)> = vec![
        (output("index", &target, outputs as u32 + 998, &good), target, "does not exist"),
        (output("junk", &target, 0, b"not a bundle"), target, "not a valid BEEF"),
        (output("subject", &target, 0, &other), target, "is not the asserted transaction"),
        (output("absent", &other_txid, 0, &bundle("new Beef()")), other_txid, "does not hold transaction"),
        (output("txid-only", &txid_only.unwrap(), 0, &partial), txid_only.unwrap(), "without its bytes"),
    ];
    let observations = cases.iter().map(|(o, _, _)| o.clone()).collect();
    let (store, present) = receive(dir.path(), observations);
    // None is a member: each group's only claim was refused.
    assert_eq!(present, 0);
    assert!(store.pending_verifications(None).unwrap().is_empty());
    for (_, txid, why) in &cases {
        let r = store.rejections(txid).unwrap();
        assert!(
            r.iter().any(|r| r.verdict.status == VerdictStatus::Invalid && r.verdict.reason.contains(why)),
            "{why}: {:?}",
            r.iter().map(|r| &r.verdict.reason).collect::<Vec<_>>()
        );
    }
    store.close().unwrap();
    // The refusals are durable.
    let reopened = ClientDb::open(dir.path().join("s")).unwrap();
    assert!(!reopened.rejections(&target).unwrap().is_empty());
}

#[test]
fn evidence_is_kept_under_its_first_receipt_and_stores_keyed_by_variant_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = bundle("toBinaryAtomic");
    let (target, _) = subject(&bytes);
    let (store, _) = receive(dir.path(), vec![output("o", &target, 0, &bytes)]);
    let job = store.pending_verifications(None).unwrap().into_iter().find(|j| j.txid == target).unwrap();
    let first = store.transaction(&target).unwrap().unwrap().variants[0].first().position;
    assert_eq!(store.verification_evidence(&target, &job.variant).unwrap().as_deref(), Some(bytes.as_slice()));
    // Kept once, under the receive's position: `Xd` position variant.
    let held: Vec<Vec<u8>> = store.raw_rows().unwrap().into_iter().filter(|(_, v)| *v == bytes).map(|(k, _)| k).collect();
    store.close().unwrap();
    let file = dir.path().join("s").join(overlay_lookup_live::client::db::FILE);
    assert_eq!(held, vec![[b"Xd".as_slice(), &first.to_be_bytes(), &job.variant.0].concat()]);
    // A store written before keeps the bytes under `Xb` variant: moved there, they are still
    // the job's evidence.
    {
        const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("client-v1");
        let db = redb::Database::open(&file).unwrap();
        let w = db.begin_write().unwrap();
        {
            let mut t = w.open_table(TABLE).unwrap();
            t.remove(held[0].as_slice()).unwrap();
            t.insert([b"Xb".as_slice(), &job.variant.0].concat().as_slice(), bytes.as_slice()).unwrap();
        }
        w.commit().unwrap();
    }
    let store = ClientDb::open(dir.path().join("s")).unwrap();
    assert_eq!(store.verification_evidence(&target, &job.variant).unwrap().as_deref(), Some(bytes.as_slice()));
    store.close().unwrap();
}
