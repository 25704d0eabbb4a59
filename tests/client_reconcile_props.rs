//! First-seen cannot depend on worker timing (BRC-192 §10.2): random interleavings of
//! receives, verification completions and restarts end in the same reconciled state
//! as one in-order replay (each receive verified at once). The receives and view
//! changes themselves are the journal and keep their order; what varies is when and
//! in which order the verifier's answers arrive (always for the then-current context)
//! and where the store is closed and reopened from disk.

mod client_common;

use client_common::conformance::{self, Corpus, Runner};
use proptest::prelude::*;

const POOL: [&str; 16] =
    ["A", "B", "AC", "BC", "Q", "QC", "X", "E", "N", "R", "NC", "partial", "allFinal", "zeroFinal", "equal", "badSignature"];
const VIEWS: [&str; 4] = ["base", "included", "fork", "mature"];

#[derive(Clone, Debug)]
enum Event {
    Receive(Vec<usize>, u8),
    View(usize),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        5 => (prop::collection::vec(0..POOL.len(), 1..4), 0u8..3).prop_map(|(n, h)| Event::Receive(n, h)),
        1 => (0..VIEWS.len()).prop_map(Event::View),
    ]
}

/// After each event: how many pending jobs to answer (and which first), whether to restart.
#[derive(Clone, Debug)]
struct Timing {
    answer: usize,
    pick: Vec<usize>,
    restart: bool,
}

fn timing() -> impl Strategy<Value = Timing> {
    (0usize..4, prop::collection::vec(any::<usize>(), 4), prop::bool::weighted(0.25)).prop_map(|(answer, pick, restart)| Timing { answer, pick, restart })
}

fn apply(r: &mut Runner, e: &Event) {
    match e {
        Event::Receive(names, host) => {
            let names: Vec<String> = names.iter().map(|i| POOL[*i].to_string()).collect();
            r.receive(&names, &format!("host-{host}")).unwrap();
        }
        Event::View(v) => r.set_view(VIEWS[*v]).unwrap(),
    }
}

fn in_order(corpus: &Corpus, events: &[Event], non_final: bool) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Runner::new(corpus, dir.path(), non_final, "prop").unwrap();
    for e in events {
        apply(&mut r, e);
        let jobs = r.store().pending_verifications(None).unwrap();
        r.answer(&jobs).unwrap();
    }
    let s = r.state().unwrap();
    r.close().unwrap();
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]
    #[test]
    fn verification_timing_and_restarts_do_not_change_the_result(
        events in prop::collection::vec(event(), 1..8),
        timings in prop::collection::vec(timing(), 8),
        non_final in any::<bool>(),
    ) {
        let corpus = conformance::load(&conformance::vendored()).unwrap();
        let want = in_order(&corpus, &events, non_final);
        let dir = tempfile::tempdir().unwrap();
        let mut r = Runner::new(&corpus, dir.path(), non_final, "prop").unwrap();
        for (e, t) in events.iter().zip(timings.iter().cycle()) {
            apply(&mut r, e);
            let mut jobs = r.store().pending_verifications(None).unwrap();
            // Answer a few of the pending jobs, in a random order, one commit each.
            for p in t.pick.iter().take(t.answer) {
                if jobs.is_empty() {
                    break;
                }
                let j = jobs.remove(p % jobs.len());
                r.answer(&[j]).unwrap();
            }
            if t.restart {
                r.restart().unwrap();
            }
        }
        // The rest arrive last, newest receipt first.
        let mut rest = r.store().pending_verifications(None).unwrap();
        rest.reverse();
        for j in rest {
            r.answer(&[j]).unwrap();
        }
        r.restart().unwrap();
        prop_assert!(r.store().pending_verifications(None).unwrap().is_empty());
        let got = r.state().unwrap();
        r.close().unwrap();
        prop_assert_eq!(got, want);
    }
}

/// A store written before the pending-job markers existed (journal.rs, `Xq`) lists the
/// same jobs: by a full scan until it is configured again, then from the markers the
/// configure wrote.
#[test]
fn a_store_without_job_markers_gets_them_on_configure() {
    use overlay_lookup_live::client::journal::{JOBS_INDEXED, JOB_PREFIX};
    use overlay_lookup_live::client::reconcile::ReconcilerConfig;
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut r = Runner::new(&corpus, dir.path(), true, "prop").unwrap();
    for (i, names) in [vec!["A", "B"], vec!["AC", "Q"], vec!["X", "E", "N"]].iter().enumerate() {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        r.receive(&names, &format!("host-{i}")).unwrap();
    }
    let jobs = r.store().pending_verifications(None).unwrap();
    r.answer(&jobs[..1]).unwrap();
    let want = r.store().pending_verifications(None).unwrap();
    assert!(want.len() > 1, "the corpus leaves jobs pending");
    r.reopen_with(|path| {
        let db = open_raw(path);
        let markers: Vec<Vec<u8>> = raw_keys(&db, JOB_PREFIX);
        assert_eq!(markers.len(), want.len(), "one marker per pending job");
        let w = db.begin_write().unwrap();
        {
            let mut t = w.open_table(RAW_TABLE).unwrap();
            for k in markers {
                t.remove(k.as_slice()).unwrap();
            }
            t.remove(JOBS_INDEXED).unwrap();
        }
        w.commit().unwrap();
    })
    .unwrap();
    assert_eq!(r.store().pending_verifications(None).unwrap(), want, "the full scan, before configure");
    assert_eq!(pages(r.store(), 2), want, "pages of the full scan");
    r.store().configure_reconciler(&ReconcilerConfig { journal_id: "prop".into(), non_final: true, initial_context: "base".into() }).unwrap();
    r.reopen_with(|path| {
        let db = open_raw(path);
        assert_eq!(raw_keys(&db, JOB_PREFIX).len(), want.len(), "configure wrote the markers");
        assert_eq!(raw_keys(&db, JOBS_INDEXED).len(), 1);
    })
    .unwrap();
    assert_eq!(r.store().pending_verifications(None).unwrap(), want, "the markers, after configure");
    for size in [1, 2, want.len(), want.len() + 1] {
        assert_eq!(pages(r.store(), size), want, "pages of {size} from the markers");
    }
    let rest = r.store().pending_verifications(None).unwrap();
    r.answer(&rest).unwrap();
    assert!(r.store().pending_verifications(None).unwrap().is_empty());
    r.close().unwrap();
}

const RAW_TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("client-v1");

/// The store's redb file, opened directly (src/client/db.rs) while the store is closed.
fn open_raw(path: &std::path::Path) -> redb::Database {
    redb::Database::open(path.join(overlay_lookup_live::client::db::FILE)).unwrap()
}

/// Committed keys under `prefix`.
fn raw_keys(db: &redb::Database, prefix: &[u8]) -> Vec<Vec<u8>> {
    let r = db.begin_read().unwrap();
    let t = r.open_table(RAW_TABLE).unwrap();
    t.range::<&[u8]>(prefix..).unwrap().map(|kv| kv.unwrap().0.value().to_vec()).take_while(|k| k.starts_with(prefix)).collect()
}

/// Every pending job, read `size` at a time after the last one listed.
fn pages(store: &overlay_lookup_live::client::ClientDb, size: usize) -> Vec<overlay_lookup_live::client::reconcile::Job> {
    let mut all = Vec::new();
    loop {
        let page = store.pending_page(all.last(), size).unwrap();
        assert!(page.len() <= size);
        let done = page.len() < size;
        all.extend(page);
        if done {
            return all;
        }
    }
}
