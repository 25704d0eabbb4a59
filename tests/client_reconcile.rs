//! Reconciler cases beyond the corpus traces, on the real on-disk store with the
//! corpus's real transactions: contradictory chain histories in one view, the
//! receipt path from a committed batch's BEEF, the verification port's guards, and
//! bad input that must leave the store unchanged.

mod client_common;

use client_common::conformance::{self, Runner};
use client_common::fixture;
use overlay_lookup_live::client::journal::{Placement, Status};
use overlay_lookup_live::client::reconcile::{Received, VerificationResult, VerificationStatus};
use overlay_lookup_live::bitcoin::tx::Hash32;
use overlay_lookup_live::client::{CommitOptions, ErrorCode};

fn names(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

#[test]
fn two_included_spends_of_one_outpoint_stop_the_component_with_context_changed() {
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut r = Runner::new(&corpus, dir.path(), true, "cc").unwrap();
    r.receive(&names(&["A"]), "h").unwrap();
    r.receive(&names(&["B"]), "h").unwrap();
    r.verify(&names(&["A", "B"]), None).unwrap();
    let a = r.txids["A"];
    assert_eq!(r.store().transaction(&a).unwrap().unwrap().published.unwrap().status, Status::SelectedFinal);
    // A second, contradictory placement claim in the block that already holds B.
    let block = r.store().transaction(&r.txids["B"]).unwrap().unwrap().placements[0];
    r.store().add_placement(&a, Placement { block: block.block, height: block.height }).unwrap();
    r.set_view("included").unwrap();
    let state = r.state().unwrap();
    assert_eq!(state["pendingComponents"][0]["reason"], "context-changed");
    // The previous accepted choice stays, shown as stale; nothing is picked by txid.
    let view = r.store().reconciled_view().unwrap().unwrap();
    assert!(view.stale.contains(&(a, Status::SelectedFinal)));
    assert!(view.pending.contains(&a) && view.pending.contains(&r.txids["B"]));
    // Back on a view where the claims do not contradict, the component settles again.
    r.set_view("fork").unwrap();
    assert!(r.state().unwrap()["pendingComponents"].as_array().unwrap().is_empty());
    r.close().unwrap();
}

#[test]
fn a_committed_batch_journals_its_beef_transactions_in_the_same_commit() {
    use base64::Engine;
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut r = Runner::new(&corpus, dir.path(), true, "beef").unwrap();
    let s = fixture::scope("02aa", "svc", "q", "public", "e1");
    let key = fixture::source_key(&s);
    let st = r.store();
    let g = st.begin_generation(&key, None).unwrap();
    let b = r.txids["B"];
    let beef = corpus.vectors["inclusion"]["beef"].as_str().unwrap();
    let mut out = fixture::output("o1", &s, &b.to_hex(), 0, None);
    out["payload"]["evidence"]["beef"] = serde_json::json!(beef);
    // An observation whose BEEF does not hold its asserted target adds nothing.
    let mut wrong = fixture::output("o2", &s, &r.txids["A"].to_hex(), 0, None);
    wrong["payload"]["evidence"]["beef"] = serde_json::json!(beef);
    let body = fixture::batch("sess", &s, "snapshot", vec![fixture::group("g1", 3, vec![out, wrong])], "c1", true, 3, 3);
    let before = st.reconciler_meta().unwrap().unwrap().position;
    st.commit_batch(&key, g, None, &body, &CommitOptions::default()).unwrap();
    let meta = st.reconciler_meta().unwrap().unwrap();
    assert_eq!(meta.position, before + 1, "one ingress position for the batch");
    let rec = st.transaction(&b).unwrap().expect("B journaled with the receipt");
    assert_eq!(rec.first_raw.position, meta.position);
    assert!(st.transaction(&r.txids["A"]).unwrap().is_none());
    let variant = Hash32(sha2::Digest::finalize(sha2::Digest::chain_update(sha2::Sha256::default(), base64::engine::general_purpose::STANDARD.decode(beef).unwrap())).into());
    let jobs = st.pending_verifications(Some(&b)).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].variant, variant, "the variant id is SHA-256 of the exact BEEF bytes");
    // `o2` is an invalid member: its group is quarantined and the generation invalidated
    // (BRC-192 §8), so the same batch again is refused, and the journal does not move.
    let state = st.state(&key).unwrap();
    assert_eq!(state.quarantined, 1);
    assert!(state.invalidated.as_deref().is_some_and(|w| w.starts_with("invalid-evidence: ")));
    assert_eq!(st.commit_batch(&key, g, None, &body, &CommitOptions::default()).unwrap_err().code, ErrorCode::ResetRequired);
    assert_eq!(st.reconciler_meta().unwrap().unwrap().position, meta.position);
    r.restart().unwrap();
    assert_eq!(r.store().pending_verifications(Some(&b)).unwrap(), jobs);
    r.close().unwrap();
}

#[test]
fn the_verification_port_checks_context_fact_and_variant() {
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut r = Runner::new(&corpus, dir.path(), true, "port").unwrap();
    r.receive(&names(&["A"]), "h").unwrap();
    let a = r.txids["A"];
    let job = r.store().pending_verifications(Some(&a)).unwrap().remove(0);
    let raw_a = hex::decode(corpus.vectors["transactions"]["A"]["raw"].as_str().unwrap()).unwrap();
    let raw_b = hex::decode(corpus.vectors["transactions"]["B"]["raw"].as_str().unwrap()).unwrap();
    let result = |ctx: &str, raw: Vec<u8>, variant: Hash32| VerificationResult {
        txid: a,
        variant,
        context_id: ctx.into(),
        status: VerificationStatus::Verified,
        raw: Some(raw),
        placement: None,
        reason: "t".into(),
        policy: None,
    };
    let rev = r.store().revision().unwrap();
    // Another context: stale, not recorded.
    assert_eq!(r.store().accept_verifications(&[result("fork", raw_a.clone(), job.variant)]).unwrap().stale, 1);
    // A fact that is not A's bytes: invalid, nothing written.
    assert_eq!(r.store().accept_verifications(&[result("base", raw_b, job.variant)]).unwrap_err().code, ErrorCode::Invalid);
    // An unknown variant: invalid.
    assert_eq!(r.store().accept_verifications(&[result("base", raw_a.clone(), Hash32([7; 32]))]).unwrap_err().code, ErrorCode::Invalid);
    assert_eq!(r.store().revision().unwrap(), rev, "refused results write nothing");
    assert_eq!(r.store().accept_verifications(&[result("base", raw_a.clone(), job.variant)]).unwrap().accepted, 1);
    // The same verdict again is a no-op; a contradicting one is a conflict.
    assert_eq!(r.store().accept_verifications(&[result("base", raw_a.clone(), job.variant)]).unwrap().ignored, 1);
    let mut contra = result("base", raw_a, job.variant);
    contra.status = VerificationStatus::Invalid;
    assert_eq!(r.store().accept_verifications(&[contra]).unwrap_err().code, ErrorCode::Conflict);
    r.close().unwrap();
}

#[test]
fn malformed_transactions_and_unknown_contexts_change_nothing() {
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = Runner::new(&corpus, dir.path(), true, "bad").unwrap();
    let st = r.store();
    let rev = st.revision().unwrap();
    let raw_a = hex::decode(corpus.vectors["transactions"]["A"]["raw"].as_str().unwrap()).unwrap();
    for bad in [vec![], raw_a[..raw_a.len() - 1].to_vec(), [raw_a.clone(), vec![0]].concat()] {
        // One bad transaction refuses the whole receive: the good one is not journaled.
        let items = [Received { raw: raw_a.clone(), evidence: vec![] }, Received { raw: bad, evidence: vec![] }];
        assert_eq!(st.receive_transactions("h", &items).unwrap_err().code, ErrorCode::Invalid);
    }
    assert_eq!(st.set_context("nowhere").unwrap_err().code, ErrorCode::Invalid);
    assert_eq!(st.revision().unwrap(), rev);
    assert_eq!(st.reconciler_meta().unwrap().unwrap().position, 0);
    assert!(st.transaction(&r.txids["A"]).unwrap().is_none());
    r.close().unwrap();
}

#[test]
fn an_anchor_counts_only_where_its_block_is_on_the_chain() {
    use overlay_lookup_live::client::chain::Finality;
    use overlay_lookup_live::client::current::OutputState;
    use overlay_lookup_live::bitcoin::tx::Outpoint;
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut r = Runner::new(&corpus, dir.path(), true, "anchor").unwrap();
    r.store().define_context("headerless", Finality { tip_height: 200, mtp: 1_000_000_000 }).unwrap();
    r.receive(&names(&["A"]), "h").unwrap();
    r.verify(&names(&["A"]), None).unwrap();
    let (p, a) = (r.txids["P"], r.txids["A"]);
    let status = |r: &Runner| r.store().transaction(&a).unwrap().unwrap().published.unwrap().status;
    assert_eq!(status(&r), Status::SelectedFinal);
    // P's placement is in block "base": a context without that chain does not confirm it.
    r.set_view("headerless").unwrap();
    assert_eq!(status(&r), Status::Unresolved);
    let p1 = Outpoint { txid: p, vout: 1 };
    assert_eq!(r.store().output_states(&[p1]).unwrap()[0].state, OutputState::Unknown);
    r.set_view("fork").unwrap(); // fork builds on base: P is confirmed again
    assert_eq!(status(&r), Status::SelectedFinal);
    assert_eq!(r.store().output_states(&[p1]).unwrap()[0].state, OutputState::Current);
    r.close().unwrap();
}

/// A BEEF V1 bundle of unmined transactions (no BUMPs).
fn beef_of(raws: &[Vec<u8>]) -> String {
    use base64::Engine;
    let mut b = vec![0x01, 0x00, 0xbe, 0xef, 0x00, raws.len() as u8];
    for r in raws {
        b.extend_from_slice(r);
        b.push(0);
    }
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[test]
fn a_bundle_journals_its_target_and_unconfirmed_ancestors_only() {
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let raw = |n: &str| hex::decode(corpus.vectors["transactions"][n]["raw"].as_str().unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = Runner::new(&corpus, dir.path(), true, "bundle").unwrap();
    let s = fixture::scope("02aa", "svc", "q", "public", "e1");
    let key = fixture::source_key(&s);
    let st = r.store();
    let g = st.begin_generation(&key, None).unwrap();
    // Target QC with its parent Q in the bundle, plus an unrelated A: Q and QC only.
    let mut out = fixture::output("o1", &s, &r.txids["QC"].to_hex(), 0, None);
    out["payload"]["evidence"]["beef"] = serde_json::json!(beef_of(&[raw("A"), raw("Q"), raw("QC")]));
    let body = fixture::batch("sess", &s, "snapshot", vec![fixture::group("g1", 3, vec![out])], "c1", true, 3, 3);
    st.commit_batch(&key, g, None, &body, &CommitOptions::default()).unwrap();
    assert!(st.transaction(&r.txids["A"]).unwrap().is_none(), "an unrelated bundle member is not journaled");
    let (q, qc) = (st.transaction(&r.txids["Q"]).unwrap().unwrap(), st.transaction(&r.txids["QC"]).unwrap().unwrap());
    // One receive: new transactions indexed by ascending txid (Q 1977.. before QC 3b90..).
    assert_eq!((q.first_raw.position, q.first_raw.index, qc.first_raw.position, qc.first_raw.index), (1, 0, 1, 1));
    r.close().unwrap();
}
