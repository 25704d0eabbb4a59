//! The client's database: one redb file (`client.redb` in the store's directory, table
//! `client-v1`) and the commits on it. Every module of the client reads and writes through
//! a [`Tx`]; [`ClientDb`] is the handle the bindings hold, with its operations grouped by
//! concern (`store.rs`: checkpoints and batches, `reconcile.rs`: the spend graph and
//! verification, `current.rs`: reconciled views).
//!
//! Invariants (enforced here): a commit is one redb write transaction, applied
//! all-or-nothing and durable (redb's default `Durability::Immediate` syncs) before
//! [`Tx::finish`] returns; a [`Tx`] reads one committed snapshot plus its own writes;
//! commits are serialized by [`ClientDb::guard`]; redb's file lock keeps a second handle
//! (in this process or another) out. Values are records in the [`super::codec`] encoding
//! (JSON written by earlier versions is still read: [`decode`]); key layouts are in
//! `store.rs` and `journal.rs`.
//!
//! Engine. Stores written before 6 December 2026 are sled directories; `open` copies such a store
//! into a new redb file once ([`migrate_engine`]), so everything above this module sees one
//! ordered key-value table either way. Why redb: sled's page cache bound does not bound its
//! resident memory, which grows with the store (docs/design.md, "Storage";
//! bench/client-layout-results.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use redb::TableDefinition;
use serde::Serialize;

use super::{ClientError, ErrorCode};

pub(crate) const REVISION_KEY: &[u8] = b"meta/revision";

/// The one table every key lives in.
const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("client-v1");
/// The database file inside the store's directory.
pub const FILE: &str = "client.redb";
/// Where a sled-era store is copied before it is renamed to [`FILE`].
const MIGRATING: &str = "client.redb.migrating";
/// Keys per write transaction of the copy from sled.
const MIGRATE_CHUNK: usize = 65_536;
/// The files and directories a sled-era store kept in the store's directory.
const SLED_FILES: [&str; 3] = ["conf", "db", "blobs"];

/// How long `open` waits for the file lock: a store closed a moment ago (by another
/// thread of this process, or a process that is exiting) can still hold it.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

type Snapshot = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

pub struct ClientDb {
    pub(crate) db: redb::Database,
    lock: Mutex<()>,
}

fn storage<E: std::fmt::Display>(e: E) -> ClientError {
    ClientError::storage(e.to_string())
}

/// A commit under construction: reads see one committed snapshot (taken when the `Tx` is
/// made) and its own writes; [`Tx::finish`] applies it as one durable write transaction.
pub(crate) struct Tx<'a> {
    db: &'a redb::Database,
    read: Result<Snapshot, String>,
    pub(crate) writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(db: &'a redb::Database) -> Self {
        let read = db.begin_read().map_err(|e| e.to_string()).and_then(|r| r.open_table(TABLE).map_err(|e| e.to_string()));
        Tx { db, read, writes: BTreeMap::new() }
    }
    fn snapshot(&self) -> Result<&Snapshot, ClientError> {
        self.read.as_ref().map_err(|e| ClientError::storage(e.clone()))
    }
    pub(crate) fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        if let Some(v) = self.writes.get(k) {
            return Ok(v.clone());
        }
        self.committed(k)
    }
    pub(crate) fn get_json<T: serde::de::DeserializeOwned>(&self, k: &[u8]) -> Result<Option<T>, ClientError> {
        self.get(k)?.map(|v| decode(&v)).transpose()
    }
    pub(crate) fn put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.writes.insert(k, Some(v));
    }
    pub(crate) fn put_json<T: Serialize>(&mut self, k: Vec<u8>, v: &T) {
        self.put(k, super::codec::encode(v).expect("records serialize"));
    }
    /// The committed rows under `prefix`, in key order, from `from` on (all when `None`);
    /// this commit's own writes are not included. The one range walk every scan uses.
    fn committed_range<'s>(&'s self, prefix: &'s [u8], from: Option<&[u8]>) -> Result<impl Iterator<Item = Result<(redb::AccessGuard<'s, &'static [u8]>, redb::AccessGuard<'s, &'static [u8]>), ClientError>> + 's, ClientError> {
        let start = from.unwrap_or(prefix);
        let rows = self.snapshot()?.range::<&[u8]>(start..).map_err(storage)?;
        Ok(rows.map(|kv| kv.map_err(storage)).take_while(move |kv| kv.as_ref().map_or(true, |(k, _)| k.value().starts_with(prefix))))
    }
    /// Committed keys under `prefix`, in key order, from `from` on (all when `None`), at
    /// most `limit` (this commit's own writes are not included).
    pub(crate) fn committed_keys(&self, prefix: &[u8], from: Option<&[u8]>, limit: usize) -> Result<Vec<Vec<u8>>, ClientError> {
        self.committed_range(prefix, from)?.take(limit).map(|kv| kv.map(|(k, _)| k.value().to_vec())).collect()
    }
    /// Committed keys and values under `prefix`, in key order.
    fn committed_scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ClientError> {
        self.committed_range(prefix, None)?.map(|kv| kv.map(|(k, v)| (k.value().to_vec(), v.value().to_vec()))).collect()
    }
    pub(crate) fn delete_prefix(&mut self, prefix: &[u8]) -> Result<(), ClientError> {
        // Keys only: the values being deleted are never copied out of the store.
        for k in self.committed_keys(prefix, None, usize::MAX)? {
            self.writes.insert(k, None);
        }
        let pending: Vec<Vec<u8>> = self.written(prefix).cloned().collect();
        for k in pending {
            self.writes.insert(k, None);
        }
        Ok(())
    }
    /// Keys and values under `prefix`, this commit's own writes included, in key order.
    pub(crate) fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ClientError> {
        let mut out: BTreeMap<Vec<u8>, Vec<u8>> = self.committed_scan(prefix)?.into_iter().collect();
        for (k, v) in self.writes.range(prefix.to_vec()..).take_while(|(k, _)| k.starts_with(prefix)) {
            match v {
                Some(v) => out.insert(k.clone(), v.clone()),
                None => out.remove(k),
            };
        }
        Ok(out.into_iter().collect())
    }
    /// Keys under `prefix` this commit writes or removes, in key order (what the commit
    /// changed, without reading the store).
    pub(crate) fn written(&self, prefix: &[u8]) -> impl Iterator<Item = &Vec<u8>> {
        let p = prefix.to_vec();
        self.writes.range(prefix.to_vec()..).take_while(move |(k, _)| k.starts_with(&p)).map(|(k, _)| k)
    }
    /// The value of `k` as committed before this commit.
    pub(crate) fn committed(&self, k: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        Ok(self.snapshot()?.get(k).map_err(storage)?.map(|v| v.value().to_vec()))
    }
    pub(crate) fn bump_revision(&mut self) -> Result<u64, ClientError> {
        let r = self.get(REVISION_KEY)?.map(|v| be_u64(&v)).unwrap_or(0) + 1;
        self.put(REVISION_KEY.to_vec(), r.to_be_bytes().to_vec());
        Ok(r)
    }
    pub(crate) fn finish(self) -> Result<(), ClientError> {
        // The snapshot is released first: nothing reads it any more.
        drop(self.read);
        let w = self.db.begin_write().map_err(storage)?;
        {
            let mut t = w.open_table(TABLE).map_err(storage)?;
            for (k, v) in &self.writes {
                match v {
                    Some(v) => t.insert(k.as_slice(), v.as_slice()).map_err(storage)?,
                    None => t.remove(k.as_slice()).map_err(storage)?,
                };
            }
        }
        // Fail point for the crash tests: the commit is built, not yet durable (nothing is
        // acknowledged before the commit below returns).
        crate::store::crash::crash_point("client-applied");
        w.commit().map_err(storage)?;
        Ok(())
    }
}

fn space_of(k: &[u8]) -> String {
    match k.first() {
        Some(b'X') if k.len() > 1 => String::from_utf8_lossy(&k[..2]).into_owned(),
        Some(b'm') => String::from_utf8_lossy(k.split(|b| *b == b'/').next().unwrap_or(k)).into_owned(),
        Some(&t) => String::from_utf8_lossy(&[t]).into_owned(),
        None => String::new(),
    }
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(v: &[u8]) -> Result<T, ClientError> {
    super::codec::decode(v).map_err(|e| ClientError::storage(format!("corrupt record: {e}")))
}

pub(crate) fn be_u64(v: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&v[..8]);
    u64::from_be_bytes(b)
}

pub(crate) fn key(tag: u8, sid: &[u8; 32], gen: Option<u64>, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + 32 + 8 + rest.len());
    k.push(tag);
    k.extend_from_slice(sid);
    if let Some(g) = gen {
        k.extend_from_slice(&g.to_be_bytes());
    }
    k.extend_from_slice(rest);
    k
}

impl ClientDb {
    /// Opens (or creates) the store in the directory `path`. Only one open store per path.
    pub fn open(path: impl AsRef<Path>) -> Result<ClientDb, ClientError> {
        Self::open_with(path, DEFAULT_CACHE_BYTES)
    }

    /// [`ClientDb::open`] with redb's page cache bounded to `cache_bytes` (the cache
    /// holds recently used pages; everything else is read from disk on demand).
    pub fn open_with(path: impl AsRef<Path>, cache_bytes: u64) -> Result<ClientDb, ClientError> {
        let db = open_db(path.as_ref(), cache_bytes)?;
        let store = ClientDb { db, lock: Mutex::new(()) };
        // An older key layout is migrated before anything reads it (store.rs, "Format").
        store.upgrade_format()?;
        Ok(store)
    }

    /// Releases the path so it can be reopened (every commit is already durable).
    pub fn close(self) -> Result<(), ClientError> {
        drop(self.db);
        Ok(())
    }

    /// Keys and bytes (key plus value) per key space, for diagnostics and for the tests
    /// and benches that count what a commit writes. A key space is the key's tag: one
    /// byte, two for the journal (`X?`), the text before `/` for `meta/...`. Scans the
    /// whole table.
    pub fn space_usage(&self) -> Result<BTreeMap<String, (u64, u64)>, ClientError> {
        // Sizes are added up row by row: nothing of the table is held in memory.
        let tx = Tx::new(&self.db);
        let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for kv in tx.committed_range(b"", None)? {
            let (k, v) = kv?;
            let e = out.entry(space_of(k.value())).or_default();
            e.0 += 1;
            e.1 += (k.value().len() + v.value().len()) as u64;
        }
        Ok(out)
    }

    /// Every key and value, in key order (for tests that compare stores byte for byte).
    pub fn raw_rows(&self) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ClientError> {
        Tx::new(&self.db).committed_scan(b"")
    }

    pub(crate) fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        // A panic while holding the lock cannot leave a half-applied commit (writes
        // are applied only by `finish`), so a poisoned lock is safe to reuse.
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// 64 MiB: at 100,000 outputs with a verifier, 16, 64 and 256 MiB received at the same speed
/// (the operating system's page cache serves what redb's does not hold); 64 MiB peaked at
/// 389 MiB RSS, 256 MiB at 772 MiB (bench/RESULTS.md section 16, docs/client.md).
pub const DEFAULT_CACHE_BYTES: u64 = 64 * 1024 * 1024;

fn open_db(dir: &Path, cache_bytes: u64) -> Result<redb::Database, ClientError> {
    std::fs::create_dir_all(dir).map_err(|e| ClientError::storage(format!("cannot create {}: {e}", dir.display())))?;
    let file = dir.join(FILE);
    if !file.exists() && dir.join("conf").exists() {
        migrate_engine(dir, cache_bytes)?;
    }
    let db = with_lock_wait(dir, || redb::Database::builder().set_cache_size(cache_bytes as usize).create(&file), |e| matches!(e, redb::DatabaseError::DatabaseAlreadyOpen))?;
    // A migration that crashed after its rename leaves the sled files: they are copied.
    remove_sled_files(dir)?;
    // The table exists from the first open on, so read snapshots can always open it; it is
    // created (one durable commit) only in a new file, an existing store opens with reads.
    let exists = match db.begin_read().map_err(storage)?.open_table(TABLE) {
        Ok(_) => true,
        Err(redb::TableError::TableDoesNotExist(_)) => false,
        Err(e) => return Err(storage(e)),
    };
    if !exists {
        let w = db.begin_write().map_err(storage)?;
        w.open_table(TABLE).map_err(storage)?;
        w.commit().map_err(storage)?;
    }
    Ok(db)
}

/// Retries `open` while the store is locked by a handle being closed (`locked` tells
/// that error apart), then gives up with `unavailable`. Serves redb and, for the copy of a
/// sled-era store, sled.
fn with_lock_wait<T, E: std::fmt::Display>(dir: &Path, open: impl Fn() -> Result<T, E>, locked: impl Fn(&E) -> bool) -> Result<T, ClientError> {
    let started = std::time::Instant::now();
    loop {
        match open() {
            Ok(db) => return Ok(db),
            Err(e) if locked(&e) && started.elapsed() < LOCK_WAIT => std::thread::sleep(std::time::Duration::from_millis(10)),
            Err(e) if locked(&e) => {
                return Err(ClientError::new(ErrorCode::Unavailable, format!("checkpoint store {} is open elsewhere (locked)", dir.display())))
            }
            Err(e) => return Err(storage(e)),
        }
    }
}

/// Format 3 changed the engine: a sled-era store (sled's `conf` in the directory, no
/// [`FILE`]) is copied key for key into a new redb file, which is synced and then renamed
/// to [`FILE`]; only then are the sled files removed. A crash before the rename leaves the
/// sled store whole (the next open copies it again from the start); after it, the copy is
/// complete and the next open finishes the removal. The key layout is migrated after this,
/// by `upgrade_format`, as for any store.
fn migrate_engine(dir: &Path, cache_bytes: u64) -> Result<(), ClientError> {
    let old = open_sled(dir)?;
    let tree = old.open_tree("client-v1").map_err(storage)?;
    let tmp = dir.join(MIGRATING);
    let _ = std::fs::remove_file(&tmp);
    {
        // Copied in chunks, so memory stays bounded for a store of any size; the chunks
        // need no sync of their own (nobody reads the file before the rename), the last
        // commit makes them all durable.
        let db = redb::Database::builder().set_cache_size(cache_bytes as usize).create(&tmp).map_err(storage)?;
        let mut rows = tree.iter().peekable();
        loop {
            let mut w = db.begin_write().map_err(storage)?;
            let last = {
                let mut t = w.open_table(TABLE).map_err(storage)?;
                for kv in rows.by_ref().take(MIGRATE_CHUNK) {
                    let (k, v) = kv.map_err(storage)?;
                    t.insert(k.as_ref(), v.as_ref()).map_err(storage)?;
                }
                rows.peek().is_none()
            };
            if !last {
                w.set_durability(redb::Durability::None);
            }
            w.commit().map_err(storage)?;
            if last {
                break;
            }
        }
    }
    drop(tree);
    drop(old);
    // Fail point for the crash tests: the copy is durable under its temporary name.
    crate::store::crash::crash_point("client-engine");
    std::fs::rename(&tmp, dir.join(FILE)).map_err(|e| ClientError::storage(format!("cannot rename {}: {e}", tmp.display())))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| ClientError::storage(format!("cannot sync {}: {e}", dir.display())))?;
    Ok(())
}

fn remove_sled_files(dir: &Path) -> Result<(), ClientError> {
    let mut paths: Vec<PathBuf> = SLED_FILES.iter().map(|f| dir.join(f)).collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        paths.extend(entries.flatten().map(|e| e.path()).filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("snap."))));
    }
    for p in paths {
        let r = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        match r {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(ClientError::storage(format!("cannot remove {}: {e}", p.display()))),
            _ => {}
        }
    }
    Ok(())
}

/// A sled-era store, opened to be copied (sled's lock can outlive a handle dropped a
/// moment ago while its threads finish).
fn open_sled(dir: &Path) -> Result<sled::Db, ClientError> {
    with_lock_wait(dir, || sled::Config::new().path(dir).open(), |e| {
        matches!(e, sled::Error::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock || io.to_string().contains("could not acquire lock"))
    })
}
