//! The checkpoint store's key layout change (src/client/store.rs, "Format"): access left
//! the source identity (BRC-193 §5, §9), so a store written before it (format 1, where
//! access was hashed into every key prefix) is migrated when it is opened.
//!
//! The format-1 store is `tests/fixtures/client-store-v1.json`: every key and value the
//! previous build wrote, and what that build reported for each source (how it was made:
//! `tests/fixtures/client-store-v1.md`). A test loads the keys into a real sled directory
//! and opens it with this build.

mod client_common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use client_common::fixture;
use overlay_lookup_live::bitcoin::beef;
use overlay_lookup_live::bitcoin::tx::Hash32;
use overlay_lookup_live::client::reconcile::{VerificationResult, VerificationStatus};
use overlay_lookup_live::client::journal::TxRecord;
use overlay_lookup_live::client::{ClientDb, CommitOptions, ErrorCode, SourceKey};
use serde_json::{json, Value};

const CHILD_ENV: &str = "OLL_MIGRATE_CRASH_CHILD";

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

fn v1() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/client-store-v1.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// sled's file lock can outlive a dropped handle for a moment (its threads finish).
fn raw_open(path: &Path) -> sled::Db {
    for _ in 0..200 {
        match sled::open(path) {
            Ok(db) => return db,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    panic!("sled lock on {} not released", path.display())
}

/// A sled directory holding exactly the fixture's format-1 keys.
fn old_store(dir: &Path) -> PathBuf {
    let path = dir.join("s");
    sled_store(&path, &v1_rows());
    path
}

/// A sled directory (the engine before redb) holding exactly `rows` in the client tree.
fn sled_store(path: &Path, rows: &Rows) {
    let db = raw_open(path);
    let tree = db.open_tree("client-v1").unwrap();
    for (k, v) in rows {
        tree.insert(k.as_slice(), v.as_slice()).unwrap();
    }
    db.flush().unwrap();
}

/// Every key and value of the store (closed): its redb file, or the sled directory a
/// store of an earlier version kept (src/client/db.rs, "Engine").
fn dump(path: &Path) -> Rows {
    let file = path.join(overlay_lookup_live::client::db::FILE);
    if file.exists() {
        const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("client-v1");
        let db = redb::Database::open(file).unwrap();
        let r = db.begin_read().unwrap();
        let t = r.open_table(TABLE).unwrap();
        let table = t.range::<&[u8]>(..).unwrap().map(|kv| kv.unwrap()).map(|(k, v)| (k.value().to_vec(), v.value().to_vec())).collect();
        return overlay_lookup_live::client::db::logical_rows(table).unwrap();
    }
    let db = raw_open(path);
    let tree = db.open_tree("client-v1").unwrap();
    tree.iter().map(|kv| kv.unwrap()).map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
}

fn v1_rows() -> Rows {
    v1()["tree"].as_array().unwrap().iter().map(|r| (hex::decode(r[0].as_str().unwrap()).unwrap(), hex::decode(r[1].as_str().unwrap()).unwrap())).collect()
}

/// The key prefix the previous build used: access hashed in as a fourth field.
fn old_sid(scope: &Value) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for f in ["provider", "service", "queryDigest", "access"] {
        let s = scope[f].as_str().unwrap();
        h.update((s.len() as u64).to_be_bytes());
        h.update(s.as_bytes());
    }
    h.finalize().into()
}

fn scope_of(name: &str) -> Value {
    v1()["expect"][name]["scope"].clone()
}

fn key_of(name: &str) -> SourceKey {
    fixture::source_key(&scope_of(name))
}

fn with_prefix(rows: &Rows, tag: u8, sid: &[u8; 32]) -> Vec<Vec<u8>> {
    rows.iter().filter(|(k, _)| k.len() > 32 && k[0] == tag && &k[1..33] == sid).map(|(k, _)| k.clone()).collect()
}

/// What this build reports for `key`, in the fixture's terms (state without its revision).
fn report(store: &ClientDb, key: &SourceKey) -> Value {
    let mut cp = serde_json::to_value(store.checkpoint(key).unwrap()).unwrap();
    cp.as_object_mut().unwrap().remove("access");
    let mut state = serde_json::to_value(store.state(key).unwrap()).unwrap();
    state.as_object_mut().unwrap().remove("revision");
    json!({
        "checkpoint": cp,
        "members": store.members(key).unwrap(),
        "partialMembers": store.partial_members(key).unwrap(),
        "state": state,
    })
}

fn expected(name: &str) -> Value {
    let e = &v1()["expect"][name];
    let mut state = e["state"].clone();
    state.as_object_mut().unwrap().remove("revision");
    json!({ "checkpoint": e["checkpoint"], "members": e["members"], "partialMembers": e["partialMembers"], "state": state })
}

fn jobs(store: &ClientDb) -> Vec<Value> {
    store
        .pending_verifications(None)
        .unwrap()
        .iter()
        .map(|j| json!({"txid": j.txid.to_hex(), "variant": j.variant.to_hex(), "contextId": j.context_id}))
        .collect()
}

/// The fixture is what the previous build wrote: no format record, each source under the
/// prefix that hashed its access.
fn check_fixture_is_format_1() {
    let rows = v1_rows();
    assert!(!rows.iter().any(|(k, _)| k == b"meta/format"));
    for name in ["a-wide", "a-narrow", "b", "c-1", "c-2"] {
        let sid = old_sid(&scope_of(name));
        assert_eq!(with_prefix(&rows, b'S', &sid).len(), 1, "{name} is keyed by its old prefix");
        assert_ne!(sid, key_of(name).id());
    }
}

/// A source an access change did not split reads as it did: same checkpoint, rows, pending
/// replacement and counters, under its new key (an alias to the records' old prefix).
#[test]
fn a_format_1_store_opens_with_each_source_under_its_new_key() {
    check_fixture_is_format_1();
    let dir = tempfile::tempdir().unwrap();
    let path = old_store(dir.path());
    let store = ClientDb::open(&path).unwrap();
    let b = key_of("b");
    assert_eq!(report(&store, &b), expected("b"));
    assert_eq!(store.state(&b).unwrap().pending_generation, Some(1), "the replacement in progress survived");
    assert_eq!(store.checkpoint(&b).unwrap().unwrap().access.as_deref(), Some("access-b"));
    assert_eq!(store.source_for_label("follow-b").unwrap(), Some(b.clone()));
    assert_eq!(store.source_for_label("follow-a").unwrap(), Some(key_of("a-narrow")));
    // The journal's jobs are the same: its group references kept their prefix.
    assert_eq!(Value::Array(jobs(&store)), v1()["expect"]["jobs"]);
    // The replacement continues where it stopped and swaps in as before.
    let s = fixture::scope("02bb", "ls_notes", "q", "access-b", "e9");
    let last = fixture::batch("sess-b1", &s, "snapshot", vec![], "b1-c2", true, 1, 1);
    let out = store.commit_batch(&b, 1, Some("b1-c1"), &last, &CommitOptions::default()).unwrap();
    assert!(out.swapped);
    assert!(store.members(&b).unwrap().iter().all(|m| m.generation == 1 && !m.stale));
    store.close().unwrap();
    let rows = dump(&path);
    assert_eq!(rows.iter().find(|(k, _)| k == b"meta/format").map(|(_, v)| v.clone()), Some(overlay_lookup_live::client::store::FORMAT.to_be_bytes().to_vec()));
    assert_eq!(
        rows.iter().find(|(k, _)| k[0] == b'A' && k[1..] == b.id()).map(|(_, v)| v.clone()),
        Some(old_sid(&scope_of("b")).to_vec()),
        "the alias names the old prefix"
    );
}

/// Old sources that differ only in access are one source now: the one the follow label
/// names survives (a-narrow, though its highWater is lower: a newer epoch), else the one
/// with the higher highWater (c-2, though begun first); the others' generations are
/// retired (rows and receipts gone, records kept as fences) and drop out of membership.
#[test]
fn old_sources_that_differ_only_in_access_collapse_into_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = old_store(dir.path());
    let store = ClientDb::open(&path).unwrap();
    let (a, c) = (key_of("a-narrow"), key_of("c-2"));
    assert_eq!(a, key_of("a-wide"));
    assert_eq!(c, key_of("c-1"));
    assert_eq!(report(&store, &a), expected("a-narrow"));
    assert_eq!(report(&store, &c), expected("c-2"));
    assert!(store.members(&a).unwrap().iter().all(|m| !m.stale), "the survivor is not stale");
    assert_eq!(store.revision().unwrap(), v1()["expect"]["revision"].as_u64().unwrap() + 1, "one revision retired the others");
    // Store-wide membership (BRC-192 §10.5): the survivors' rows, none of the retired.
    let chain = serde_json::from_value(scope_of("b")["chain"].clone()).unwrap();
    let rows = store.memberships_json(&chain).unwrap();
    let gone = [scope_of("a-wide")["access"].clone(), scope_of("c-1")["access"].clone()];
    let kept: Vec<Value> = v1()["expect"]["memberships"].as_array().unwrap().iter().filter(|r| !gone.contains(&r["scope"]["access"])).cloned().collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows, kept);
    // The retired receipts no longer hold anything: verifying the evidence only a retired
    // group was waiting for is accepted and publishes nothing in the survivors.
    let bytes = {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/beef/bundles.json")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let c = v["cases"].as_array().unwrap().iter().find(|c| c["name"] == "mined subject toBEEF 15e3c307").unwrap().clone();
        hex::decode(c["hex"].as_str().unwrap()).unwrap()
    };
    let txid = Hash32::from_hex("15e3c307010a784889725b7866a362d92b18aa40f9341d6cfdc0770fdf4f7da1").unwrap();
    let job = store.pending_verifications(Some(&txid)).unwrap().remove(0);
    let raw = beef::parse(&bytes).unwrap().raw(&txid).unwrap().0.raw.to_vec();
    let before = (store.members(&a).unwrap(), store.members(&c).unwrap());
    store
        .accept_verifications(&[VerificationResult {
            txid,
            variant: job.variant,
            context_id: job.context_id.clone(),
            status: VerificationStatus::Verified,
            raw: Some(raw),
            placement: None,
            reason: String::new(),
            policy: None,
        }])
        .unwrap();
    assert_eq!((store.members(&a).unwrap(), store.members(&c).unwrap()), before);

    // The survivor goes on receiving from its stored cursor, and a later access change
    // is a new generation of it (BRC-193 §5).
    let narrow = scope_of("a-narrow");
    let live = fixture::batch("sess-a2", &narrow, "live", vec![fixture::group("m4", 4, vec![fixture::withdraw("w4", &narrow, &fixture::hex32("x"), 0)])], "a2-c3", true, 4, 4);
    assert_eq!(store.commit_batch(&a, 0, Some("a2-c2"), &live, &CommitOptions::default()).unwrap().applied, 1);
    let narrower = fixture::scope("02aa", "ls_notes", "q", "access-a-narrower", "e2");
    let g = store.begin_generation(&a, Some("follow-a")).unwrap();
    assert_eq!(g, 1);
    let open = fixture::batch("sess-a3", &narrower, "snapshot", vec![], "a3-c1", true, 4, 4);
    assert!(store.commit_batch(&a, g, None, &open, &CommitOptions::default()).unwrap().swapped);
    assert!(store.members(&a).unwrap().is_empty(), "the narrowed snapshot holds nothing");
    store.close().unwrap();

    let rows = dump(&path);
    for name in ["a-wide", "c-1"] {
        let sid = old_sid(&scope_of(name));
        for tag in [b'M', b'K', b'R', b'J', b'I', b'O'] {
            assert!(with_prefix(&rows, tag, &sid).is_empty(), "{name}: no {} rows", tag as char);
        }
        let gens = with_prefix(&rows, b'G', &sid);
        assert_eq!(gens.len(), 1, "{name}: its generation record stays as a fence");
        let g: Value = overlay_lookup_live::client::codec::decode(&rows.iter().find(|(k, _)| k == &gens[0]).unwrap().1).unwrap();
        assert_eq!(g["retired"], true);
        let s: Value = overlay_lookup_live::client::codec::decode(&rows.iter().find(|(k, _)| k[0] == b'S' && k[1..] == sid).unwrap().1).unwrap();
        assert_eq!((s["current"].clone(), s["pending"].clone()), (Value::Null, Value::Null));
        let survivor = if name == "a-wide" { "a-narrow" } else { "c-2" };
        assert_eq!(s["merged_into"], hex::encode(old_sid(&scope_of(survivor))));
    }
    // The survivor's old generation was retired by the swap, under the same prefix.
    let sid = old_sid(&scope_of("a-narrow"));
    assert!(with_prefix(&rows, b'M', &sid).is_empty());
    assert_eq!(with_prefix(&rows, b'G', &sid).len(), 2);
}

/// A format-2 store kept in sled (the engine before redb) is copied key for key: the same
/// rows, and no sled file left in the directory.
#[test]
fn a_sled_store_is_copied_into_redb_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = old_store(dir.path());
    // First the format-2 store the previous engine held: migrate the layout, then put the
    // migrated rows back into a sled directory of their own.
    ClientDb::open(&path).unwrap().close().unwrap();
    let format2 = dump(&path);
    let sled_path = dir.path().join("sled-format-2");
    sled_store(&sled_path, &format2);
    assert!(!sled_path.join(overlay_lookup_live::client::db::FILE).exists());
    let store = ClientDb::open(&sled_path).unwrap();
    assert_eq!(store.raw_rows().unwrap(), format2, "every key and value, as sled held them");
    store.close().unwrap();
    let left: Vec<String> = std::fs::read_dir(&sled_path).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, vec![overlay_lookup_live::client::db::FILE.to_string()], "only the redb file is left");
    assert_eq!(dump(&sled_path), format2);
}

/// A sled store larger than one chunk of the copy (src/client/db.rs copies 65,536 keys per
/// write transaction) arrives whole: every key, in order, with its value.
#[test]
fn a_large_sled_store_is_copied_in_chunks_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large");
    // Opaque values under a key space no format step rewrites (evidence bytes).
    let mut rows: Rows = (0u32..150_000).map(|i| ([b"Xd".as_slice(), &i.to_be_bytes()].concat(), i.to_le_bytes().repeat(3))).collect();
    rows.push((b"meta/format".to_vec(), overlay_lookup_live::client::store::FORMAT.to_be_bytes().to_vec()));
    rows.sort();
    sled_store(&path, &rows);
    let store = ClientDb::open(&path).unwrap();
    let copied = store.raw_rows().unwrap();
    store.close().unwrap();
    assert_eq!(copied.len(), rows.len());
    assert!(copied == rows, "every key and value, in order");
}

/// A migrated store is not migrated again; a new store is written in the current format
/// from the start, its sources under their own id.
#[test]
fn migration_runs_once_and_a_new_store_starts_in_the_current_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = old_store(dir.path());
    ClientDb::open(&path).unwrap().close().unwrap();
    let once = dump(&path);
    ClientDb::open(&path).unwrap().close().unwrap();
    assert_eq!(dump(&path), once);

    let fresh = dir.path().join("fresh");
    let store = ClientDb::open(&fresh).unwrap();
    assert_eq!(store.revision().unwrap(), 0);
    let s = fixture::scope("02aa", "ls_notes", "q", "p1", "e1");
    let key = fixture::source_key(&s);
    store.begin_generation(&key, None).unwrap();
    store.close().unwrap();
    let rows = dump(&fresh);
    assert_eq!(rows.iter().find(|(k, _)| k == b"meta/format").map(|(_, v)| v.clone()), Some(overlay_lookup_live::client::store::FORMAT.to_be_bytes().to_vec()));
    assert_eq!(with_prefix(&rows, b'S', &key.id()).len(), 1);
    assert!(!rows.iter().any(|(k, _)| k[0] == b'A'));
}

#[test]
fn a_store_of_a_newer_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    {
        let db = raw_open(&path);
        db.open_tree("client-v1").unwrap().insert(b"meta/format", (overlay_lookup_live::client::store::FORMAT + 1).to_be_bytes().to_vec()).unwrap();
        db.flush().unwrap();
    }
    let e = ClientDb::open(&path).err().expect("refused");
    assert_eq!(e.code, ErrorCode::Unsupported);
    assert_eq!(dump(&path).len(), 1, "nothing was written");
}

/// Whether `rows`, read after a crash during the migration of `before` (which ends as
/// `after`), is a store the migration can go on from: `before` or `after`, or `before`
/// with some of its transaction records and member rows moved (the upgrade's first steps
/// commit in chunks): every other key as `before` has it, each transaction record exactly
/// once, either under its old `Xt` key with its old bytes or unchanged under its place in
/// receipt order (`Xu`) with its `Xi` index naming that place, and each member row exactly
/// once, under its old key or, with the same bytes, under place 0 with its `K` index; and
/// each group or observation identity under its old `I` or `O` key or its `J` key; and,
/// once anything changed, the store marked with this version's format and the one it had.
fn whole(rows: &Rows, before: &Rows, after: &Rows) -> bool {
    if rows == before || rows == after {
        return true;
    }
    // Begun: the store says this version's format (an older version refuses it) and what it was.
    let marker = |k: &[u8]| k == b"meta/format" || k == b"meta/upgrading-from";
    let meta = |k: &[u8]| rows.iter().find(|(rk, _)| rk == k).map(|(_, v)| v.clone());
    let was = before.iter().find(|(k, _)| k == b"meta/format").map_or(1, |(_, v)| u64::from_be_bytes(v[..].try_into().unwrap()));
    if meta(b"meta/format") != Some(overlay_lookup_live::client::store::FORMAT.to_be_bytes().to_vec()) || meta(b"meta/upgrading-from") != Some(was.to_be_bytes().to_vec()) {
        return false;
    }
    let moving = |k: &[u8]| k.starts_with(b"Xt") || k.starts_with(b"Xi") || k.starts_with(b"Xu") || [b'M', b'K', b'I', b'O', b'J'].contains(&k[0]) || marker(k);
    let others = |r: &Rows| r.iter().filter(|(k, _)| !moving(k)).cloned().collect::<Rows>();
    if others(rows) != others(before) {
        return false;
    }
    let has = |k: &[u8], v: &[u8]| rows.iter().any(|(rk, rv)| rk == k && rv == v);
    let mut expected = 0;
    for (k, v) in before.iter().filter(|(k, _)| moving(k)) {
        let (at_old, at_new, keys_if_new) = if k.starts_with(b"Xt") {
            let rec: TxRecord = overlay_lookup_live::client::codec::decode(v).unwrap();
            let at = [rec.first_raw.position.to_be_bytes().as_slice(), &rec.first_raw.index.to_be_bytes()].concat();
            let place = [b"Xu".as_slice(), &at, &rec.txid.0].concat();
            let index = [b"Xi".as_slice(), &rec.txid.0].concat();
            let moved = has(&index, &at) && rows.iter().any(|(rk, rv)| *rk == place && overlay_lookup_live::client::codec::decode::<TxRecord>(rv).unwrap() == rec);
            (has(k, v), moved, 2)
        } else if k[0] == b'M' {
            let (prefix, op) = k.split_at(41);
            let index = [b"K".as_slice(), &prefix[1..], op].concat();
            let place = [prefix, &[0u8; 8], op].concat();
            (has(k, v), has(&index, &0u64.to_be_bytes()) && has(&place, v), 2)
        } else if k[0] == b'I' || k[0] == b'O' {
            let kind = if k[0] == b'I' { b'g' } else { b'o' };
            (has(k, v), has(&[b"J".as_slice(), &k[1..], &[0, kind]].concat(), v), 1)
        } else if marker(k) {
            continue; // checked above
        } else {
            return false; // format 2 has no `Xi`, `Xu` or `K` keys
        };
        if at_old == at_new {
            return false;
        }
        expected += if at_new { keys_if_new } else { 1 };
    }
    rows.iter().filter(|(k, _)| moving(k) && !marker(k)).count() == expected
}

/// Opens the store at `path` in a child process that is killed (SIGKILL) at the fail point
/// `point` (`name:n`), before the open returns.
fn open_killed_at(path: &Path, point: &str) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "migrate_crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, path)
        .env("OLL_CRASH_POINT", point)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let opened = BufReader::new(child.stdout.take().unwrap()).lines().any(|l| l.unwrap() == "opened");
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert!(!opened && status.signal() == Some(9), "{point}: the child was killed at the fail point ({status:?})");
}

/// The child: opens the store (migrating it) and reports; runs only when spawned below.
#[test]
fn migrate_crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    ClientDb::open(&path).unwrap().close().unwrap();
    println!("opened");
}

/// A crash at any point of the migration (the sled store copied into redb and not yet
/// renamed; a chunk of transaction records, member rows or identities moved and not written; the key-layout batch
/// built and not written, or written and not committed) leaves a store the migration can
/// go on from (`whole`), and opening it again ends with exactly the store an uninterrupted
/// migration makes.
#[test]
fn a_crash_during_migration_leaves_a_store_that_migrates_to_the_same_result() {
    let reference = {
        let dir = tempfile::tempdir().unwrap();
        let path = old_store(dir.path());
        ClientDb::open(&path).unwrap().close().unwrap();
        dump(&path)
    };
    let before = v1_rows();
    assert_ne!(reference, before);
    for point in ["client-engine:1", "client-move-tx:1", "client-move-members:1", "client-move-identities:1", "client-move-identities:2", "client-migrate:1", "client-applied:1"] {
        let dir = tempfile::tempdir().unwrap();
        let path = old_store(dir.path());
        open_killed_at(&path, point);
        let after_crash = dump(&path);
        assert!(whole(&after_crash, &before, &reference), "{point}: the migration is torn");
        ClientDb::open(&path).unwrap().close().unwrap();
        assert_eq!(dump(&path), reference, "{point}: opening again migrates to the same store");
    }
}

// --- format 2 to 3: the journal's transaction records in order of first receipt ---------

fn v2() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/client-store-v2.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn v2_rows() -> Rows {
    v2()["table"].as_array().unwrap().iter().map(|r| (hex::decode(r[0].as_str().unwrap()).unwrap(), hex::decode(r[1].as_str().unwrap()).unwrap())).collect()
}

/// A redb store (the engine since 6 December 2026) holding exactly `rows`.
fn redb_store(path: &Path, rows: &Rows) {
    const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("client-v1");
    std::fs::create_dir_all(path).unwrap();
    let db = redb::Database::create(path.join(overlay_lookup_live::client::db::FILE)).unwrap();
    let w = db.begin_write().unwrap();
    {
        let mut t = w.open_table(TABLE).unwrap();
        for (k, v) in rows {
            t.insert(k.as_slice(), v.as_slice()).unwrap();
        }
    }
    w.commit().unwrap();
}

fn tx_records(rows: &Rows, prefix: &[u8]) -> Vec<TxRecord> {
    let mut recs: Vec<TxRecord> = rows.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, v)| overlay_lookup_live::client::codec::decode(v).unwrap()).collect();
    recs.sort_by_key(|r| r.txid);
    recs
}

/// The fixture is what the previous build wrote: format 2, each transaction record under
/// `Xt` and its txid, none in the new spaces.
fn check_fixture_is_format_2(rows: &Rows) {
    assert_eq!(rows.iter().find(|(k, _)| k == b"meta/format").map(|(_, v)| v.clone()), Some(2u64.to_be_bytes().to_vec()));
    assert!(rows.iter().filter(|(k, _)| k.starts_with(b"Xt")).count() >= 4);
    assert!(!rows.iter().any(|(k, _)| k.starts_with(b"Xi") || k.starts_with(b"Xu")));
}

/// A format-2 store opens with every transaction record moved to its place in receipt
/// order, every member row to its place (0 for the rows it had) and every identity into
/// the one identity space, unchanged, and reports what the build that wrote it reported: checkpoints,
/// members, pending jobs, memberships and the revision (the move changes nothing visible).
#[test]
fn a_format_2_store_opens_with_its_records_and_rows_moved_and_reads_the_same() {
    let rows = v2_rows();
    check_fixture_is_format_2(&rows);
    let expect = &v2()["expect"];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    redb_store(&path, &rows);
    let store = ClientDb::open(&path).unwrap();
    for name in ["a-narrow", "b", "c-1", "c-2"] {
        let key = fixture::source_key(&expect[name]["scope"]);
        let got = json!({
            "checkpoint": store.checkpoint(&key).unwrap(),
            "members": store.members(&key).unwrap(),
            "partialMembers": store.partial_members(&key).unwrap(),
            "state": store.state(&key).unwrap(),
        });
        let want = json!({ "checkpoint": expect[name]["checkpoint"], "members": expect[name]["members"], "partialMembers": expect[name]["partialMembers"], "state": expect[name]["state"] });
        assert_eq!(got, want, "{name}");
    }
    assert_eq!(Value::Array(jobs(&store)), expect["jobs"]);
    assert_eq!(json!(store.revision().unwrap()), expect["revision"]);
    let chain = serde_json::from_value(expect["b"]["scope"]["chain"].clone()).unwrap();
    assert_eq!(Value::Array(store.memberships_json(&chain).unwrap()), expect["memberships"]);
    store.close().unwrap();

    let after = dump(&path);
    assert_eq!(after.iter().find(|(k, _)| k == b"meta/format").map(|(_, v)| v.clone()), Some(overlay_lookup_live::client::store::FORMAT.to_be_bytes().to_vec()));
    assert!(!after.iter().any(|(k, _)| k == b"meta/upgrading-from"), "the upgrade is marked done");
    assert!(!after.iter().any(|(k, _)| k.starts_with(b"Xt")), "no record is left under its txid");
    assert_eq!(tx_records(&after, b"Xu"), tx_records(&rows, b"Xt"), "every record moved, unchanged");
    for r in tx_records(&after, b"Xu") {
        let at = [r.first_raw.position.to_be_bytes().as_slice(), &r.first_raw.index.to_be_bytes()].concat();
        assert!(after.contains(&([b"Xi".as_slice(), &r.txid.0].concat(), at)), "{}: indexed by its first receipt", r.txid.to_hex());
    }
    let legacy_rows: Rows = rows.iter().filter(|(k, _)| k[0] == b'M').cloned().collect();
    assert!(legacy_rows.len() >= 4 && legacy_rows.iter().all(|(k, _)| k.len() == 1 + 32 + 8 + 36));
    assert_eq!(after.iter().filter(|(k, _)| k[0] == b'M').count(), legacy_rows.len());
    for (k, v) in &legacy_rows {
        let (prefix, op) = k.split_at(41);
        assert!(after.contains(&([prefix, &[0u8; 8], op].concat(), v.clone())), "a member row moved to place 0, unchanged");
        assert!(after.contains(&([b"K".as_slice(), &prefix[1..], op].concat(), 0u64.to_be_bytes().to_vec())), "and indexed");
    }
    for (k, v) in rows.iter().filter(|(k, _)| k[0] == b'I' || k[0] == b'O') {
        let kind = if k[0] == b'I' { b'g' } else { b'o' };
        assert!(after.contains(&([b"J".as_slice(), &k[1..], &[0, kind]].concat(), v.clone())), "an identity moved, unchanged");
    }
    assert_eq!(after.iter().filter(|(k, _)| k[0] == b'J').count(), rows.iter().filter(|(k, _)| k[0] == b'I' || k[0] == b'O').count());
    assert!(!after.iter().any(|(k, _)| k[0] == b'I' || k[0] == b'O'));
    let others = |r: &Rows| r.iter().filter(|(k, _)| !(k.starts_with(b"Xt") || k.starts_with(b"Xi") || k.starts_with(b"Xu") || [b'M', b'K', b'I', b'O', b'J'].contains(&k[0]) || k == b"meta/format")).cloned().collect::<Rows>();
    assert_eq!(others(&after), others(&rows), "no other key changed");
}

/// A format-3 store (written before the index keys were deferred: every key in place, no
/// `~d` record) is only marked with the current format when it opens, and reads the same.
#[test]
fn a_format_3_store_is_marked_current_and_reads_the_same() {
    let expect = &v2()["expect"];
    let dir = tempfile::tempdir().unwrap();
    // The fixture brought to the current format, then written back as format 3 kept it.
    let upgraded = dir.path().join("upgraded");
    redb_store(&upgraded, &v2_rows());
    ClientDb::open(&upgraded).unwrap().close().unwrap();
    let format = |v: u64| (b"meta/format".to_vec(), v.to_be_bytes().to_vec());
    let current = overlay_lookup_live::client::store::FORMAT;
    let v3: Rows = dump(&upgraded).into_iter().map(|(k, v)| if k == b"meta/format" { format(3) } else { (k, v) }).collect();
    assert!(v3.iter().any(|(k, _)| k[0] == b'J') && v3.iter().any(|(k, _)| k.starts_with(b"Xi")));
    let path = dir.path().join("s");
    redb_store(&path, &v3);
    let store = ClientDb::open(&path).unwrap();
    let key = fixture::source_key(&expect["b"]["scope"]);
    assert_eq!(json!(store.members(&key).unwrap()), expect["b"]["members"]);
    assert_eq!(json!(store.revision().unwrap()), expect["revision"]);
    let want: Rows = v3.iter().map(|(k, v)| if k == b"meta/format" { format(current) } else { (k.clone(), v.clone()) }).collect();
    assert_eq!(store.raw_rows().unwrap(), want, "nothing but the format changed");
    store.close().unwrap();
    assert!(!dump(&path).iter().any(|(k, _)| k == b"meta/upgrading-from"));
}

/// A format-2 store whose journal holds `n` more transaction records than the fixture
/// (copies of one of its records under other txids and receipts).
fn large_format_2(path: &Path, n: u32) -> Rows {
    use overlay_lookup_live::client::codec;
    use overlay_lookup_live::client::membership::MemberRow;
    use sha2::Digest;
    let mut rows = v2_rows();
    let model = tx_records(&rows, b"Xt").remove(0);
    let (row_key, row) = rows.iter().find(|(k, _)| k[0] == b'M').cloned().unwrap();
    let row: MemberRow = codec::decode(&row).unwrap();
    let generation = &row_key[..41];
    for i in 0..n {
        let mut r = model.clone();
        r.txid = Hash32(sha2::Sha256::digest(i.to_be_bytes()).into());
        r.first_raw.position = 1_000 + u64::from(i / 7);
        r.first_raw.index = i % 7;
        rows.push(([b"Xt".as_slice(), &r.txid.0].concat(), codec::encode(&r).unwrap()));
        // A member row of that output, and a group and an observation identity, in the
        // generation of the fixture's first row.
        let mut m = row.clone();
        m.outpoint.txid = r.txid.to_hex();
        m.outpoint.output_index = i % 3;
        rows.push(([generation, &m.outpoint.key()].concat(), codec::encode(&m).unwrap()));
        let ord = (10_000 + u64::from(i)).to_be_bytes().to_vec();
        rows.push(([b"I".as_slice(), &generation[1..], format!("s-{i:08}").as_bytes()].concat(), ord.clone()));
        rows.push(([b"O".as_slice(), &generation[1..], format!("s-{i:08}.0").as_bytes()].concat(), ord));
    }
    rows.sort();
    redb_store(path, &rows);
    rows
}

/// A journal and a membership larger than one chunk of the move (store.rs moves
/// `MOVE_CHUNK` keys per durable commit, so its memory is bounded) arrive whole, and a
/// crash after a chunk committed (the next built, not written) leaves every record, row
/// and identity whole under one of its keys; opening again finishes the move, to exactly
/// the store an uninterrupted one makes.
#[test]
fn a_large_journal_moves_in_chunks_and_a_crash_between_them_loses_no_record() {
    use overlay_lookup_live::client::store::MOVE_CHUNK;
    let n = (MOVE_CHUNK * 2 + 100) as u32;
    let reference = {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let before = large_format_2(&path, n);
        ClientDb::open(&path).unwrap().close().unwrap();
        let after = dump(&path);
        assert_eq!(tx_records(&after, b"Xu"), tx_records(&before, b"Xt"));
        let count = |r: &Rows, t: &[u8]| r.iter().filter(|(k, _)| k.starts_with(t)).count();
        assert_eq!(count(&after, b"Xi"), count(&before, b"Xt"));
        assert_eq!((count(&after, b"K"), count(&after, b"M")), (count(&before, b"M"), count(&before, b"M")));
        assert_eq!(count(&after, b"J"), count(&before, b"I") + count(&before, b"O"));
        assert!(count(&before, b"M") > 2 * MOVE_CHUNK && count(&before, b"O") > 2 * MOVE_CHUNK);
        after
    };
    // The second chunk of each step (for identities: of the observations, after the groups'
    // three chunks).
    for point in ["client-move-tx:2", "client-move-members:2", "client-move-identities:5"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let before = large_format_2(&path, n);
        open_killed_at(&path, point);
        let after_crash = dump(&path);
        assert!(after_crash != before && after_crash != reference, "{point}: the crash fell between two commits of the move");
        assert!(whole(&after_crash, &before, &reference), "{point}: a record, row or identity is torn or lost");
        ClientDb::open(&path).unwrap().close().unwrap();
        assert_eq!(dump(&path), reference, "{point}");
    }
}
