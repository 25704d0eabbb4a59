//! A snapshot scan ends as soon as its stop check says so (BRC-193 §5: cancellation reaches
//! the database scan), for every scan plan, and the store counts the entries scans read.

mod store_common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use overlay_lookup_live::store::{StopCheck, StoreError};
use serde_json::json;
use store_common::*;

const ROWS: u32 = 2_000;

fn filled() -> (tempfile::TempDir, std::sync::Arc<overlay_lookup_live::store::Store>) {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(500) {
        s.commit(chunk.iter().map(|&n| admit("ls", n, json!({"color": "red", "n": n as i64}))).collect()).unwrap();
    }
    (dir, s)
}

/// A stop check that turns true after it has been asked `after` times.
fn stop_after(after: u64) -> (StopCheck, Arc<AtomicU64>) {
    let asked = Arc::new(AtomicU64::new(0));
    let a = asked.clone();
    (Arc::new(move || a.fetch_add(1, Ordering::Relaxed) >= after), asked)
}

#[test]
fn every_scan_plan_stops_early_with_cancelled_and_reads_almost_nothing_more() {
    let (_dir, s) = filled();
    let w = s.high_water();
    let plans = [
        // Matches nothing: the admission walk reads every row before it could answer.
        json!({"where": {"not": {"eq": ["color", "red"]}}, "order": "admission"}),
        // Index merge of an eq prefix.
        json!({"where": {"eq": ["color", "red"]}, "order": "admission"}),
        // Attribute order: a walk of that attribute's index.
        json!({"where": {"all": true}, "order": {"attribute": "n"}}),
    ];
    for plan in plans {
        let selection = sel(plan.clone());
        let before = s.scan_examined();
        let full: Vec<_> = s.snapshot("ls", &selection, w, None).unwrap().collect::<Result<_, _>>().unwrap();
        let whole = s.scan_examined() - before;
        assert!(whole >= ROWS as u64, "{plan}: a full scan reads every entry ({whole})");
        assert!(full.len() == 0 || full.len() == ROWS as usize, "{plan}");

        let (stop, _) = stop_after(50);
        let before = s.scan_examined();
        let got: Vec<_> = s.snapshot_until("ls", &selection, w, None, Some(stop)).unwrap().collect();
        let read = s.scan_examined() - before;
        assert!(matches!(got.last(), Some(Err(StoreError::Cancelled))), "{plan}: ends with Cancelled, got {:?}", got.last());
        assert!(got.iter().filter(|r| r.is_err()).count() == 1, "{plan}: one error, then nothing");
        assert!(read <= 60, "{plan}: a stopped scan read {read} entries of {whole}");
    }
}

#[test]
fn a_scan_stopped_before_it_starts_reads_nothing() {
    let (_dir, s) = filled();
    let before = s.scan_examined();
    let stop: StopCheck = Arc::new(|| true);
    let r = s.snapshot_until("ls", &sel(json!({"where": {"all": true}})), s.high_water(), None, Some(stop));
    assert!(matches!(r, Err(StoreError::Cancelled)));
    assert_eq!(s.scan_examined(), before);
}
