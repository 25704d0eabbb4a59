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
//! Deferred index keys. The small keys placed by a hash ([`deferred`]: identities, member
//! and transaction indexes, spend edges, anchors) each land on a page of their own, so a
//! commit that wrote them in place rewrote a page per key (docs/design.md, "Storage").
//! A commit instead appends its writes of those keys as one record under [`DELTA`] (one
//! run of pages, durable with the rest of the commit), and [`Engine`] keeps every such
//! write not yet in place in memory, where reads find it first. When they reach the
//! engine's `merge_at` entries, they are written to their own keys, sorted, in commits of
//! [`MERGE_SLICE`], each page once for many keys, and the records are removed in the last.
//! A crash before that last commit leaves the records, so the next open reads them back
//! and the merge is done again (writing a key's newest value twice changes nothing). Every
//! read goes through [`Tx`], which sees the deferred writes with the snapshot they were
//! committed with, so nothing above this module knows where a key's value is kept.
//!
//! Engine. Stores written before 6 December 2026 are sled directories; `open` copies such a store
//! into a new redb file once ([`migrate_engine`]), so everything above this module sees one
//! ordered key-value table either way. Why redb: sled's page cache bound does not bound its
//! resident memory, which grows with the store (docs/design.md, "Storage";
//! bench/client-layout-results.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use redb::{ReadableTable, TableDefinition};
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
    pub(crate) db: Engine,
    lock: Mutex<()>,
}

/// Where deferred index writes are kept until merged (module docs, "Deferred index keys"):
/// `~d` and the commit's number (u64), a [`encode_delta`] list. After every other key.
pub const DELTA: &[u8] = b"~d";
/// Deferred writes held before they are merged into their keys (`OLL_CLIENT_MERGE_AT` sets
/// another bound, for tests). With the heap a merge leaves behind, they raised the client's
/// peak memory by 25 to 65 MiB (bench/client-memory-results.md, "store format 4").
pub const MERGE_AT: usize = 131_072;
/// Deferred writes merged per commit: a merge commit rewrites at most this many pages.
pub const MERGE_SLICE: usize = 8_192;

/// Whether `k` is one of the small keys placed by a hash, whose writes are deferred:
/// identities (`J`), member indexes (`K`), transaction indexes (`Xi`), spend edges (`Xe`)
/// and anchors (`Xa`).
pub(crate) fn deferred(k: &[u8]) -> bool {
    matches!(k.first(), Some(b'J' | b'K')) || [b"Xi", b"Xe", b"Xa"].iter().any(|p| k.starts_with(*p))
}

type Overlay = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// The redb file and the deferred writes not yet merged into it.
pub(crate) struct Engine {
    redb: redb::Database,
    /// Held while a snapshot is taken and while a commit is applied and published, so a
    /// [`Tx`] always sees the deferred writes of exactly the commits its snapshot holds.
    deferred: Mutex<Deferred>,
    merge_at: usize,
    merge_slice: usize,
}

struct Deferred {
    /// The newest value (`None`: removed) of each deferred key written since the last merge.
    overlay: std::sync::Arc<Overlay>,
    /// The number of the next [`DELTA`] record.
    next: u64,
}

impl Engine {
    /// `merge_at`: deferred writes held before a merge ([`MERGE_AT`]); `merge_slice`:
    /// written per merge commit ([`MERGE_SLICE`]). Smaller values are for tests.
    fn new(redb: redb::Database, merge_at: usize, merge_slice: usize) -> Result<Engine, ClientError> {
        let mut overlay = Overlay::new();
        let mut next = 0;
        {
            let r = redb.begin_read().map_err(storage)?;
            let t = r.open_table(TABLE).map_err(storage)?;
            for kv in t.range::<&[u8]>(DELTA..).map_err(storage)? {
                let (k, v) = kv.map_err(storage)?;
                let Some(n) = k.value().strip_prefix(DELTA).filter(|n| n.len() == 8) else { break };
                next = be_u64(n) + 1;
                for (k, v) in decode_delta(v.value())? {
                    overlay.insert(k, v);
                }
            }
        }
        Ok(Engine { redb, deferred: Mutex::new(Deferred { overlay: std::sync::Arc::new(overlay), next }), merge_at: merge_at.max(1), merge_slice: merge_slice.max(1) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Deferred> {
        // Commits publish only after redb has applied them, so a poisoned lock holds a
        // consistent state.
        self.deferred.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes every deferred key to its own key, [`MERGE_SLICE`] per commit, and removes
    /// the [`DELTA`] records in the last (module docs, "Deferred index keys").
    fn merge(&self, d: &mut Deferred) -> Result<(), ClientError> {
        let entries: Vec<(&Vec<u8>, &Option<Vec<u8>>)> = d.overlay.iter().collect();
        let slices = entries.chunks(self.merge_slice).count();
        for (i, slice) in entries.chunks(self.merge_slice).enumerate() {
            let mut w = self.redb.begin_write().map_err(storage)?;
            let last = i + 1 == slices;
            {
                let mut t = w.open_table(TABLE).map_err(storage)?;
                for (k, v) in slice {
                    apply(&mut t, k, v.as_deref())?;
                }
                if last {
                    let records: Vec<Vec<u8>> = t
                        .range::<&[u8]>(DELTA..)
                        .map_err(storage)?
                        .map(|kv| kv.map(|(k, _)| k.value().to_vec()).map_err(storage))
                        .take_while(|k| k.as_ref().map_or(true, |k| k.starts_with(DELTA)))
                        .collect::<Result<_, _>>()?;
                    for k in records {
                        t.remove(k.as_slice()).map_err(storage)?;
                    }
                }
            }
            // Until the last commit the records stay, so a crash re-merges from them: the
            // slices before it need not be synced on their own.
            if !last {
                w.set_durability(redb::Durability::None);
            }
            // Fail point for the crash tests: a slice of the merge built, nothing written.
            crate::store::crash::crash_point("client-merge");
            w.commit().map_err(storage)?;
        }
        d.overlay = std::sync::Arc::new(Overlay::new());
        Ok(())
    }
}

/// The rows a store holds, from the rows of its table (key order): the [`DELTA`] records
/// applied over the others, in order. For tests that read a store's file without opening it.
pub fn logical_rows(table: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ClientError> {
    let (records, rows): (Vec<_>, Vec<_>) = table.into_iter().partition(|(k, _)| k.starts_with(DELTA));
    let mut out: BTreeMap<Vec<u8>, Vec<u8>> = rows.into_iter().collect();
    for (_, v) in records {
        for (k, v) in decode_delta(&v)? {
            match v {
                Some(v) => out.insert(k, v),
                None => out.remove(&k),
            };
        }
    }
    Ok(out.into_iter().collect())
}

/// A [`DELTA`] record: the count (u32), then per write the key (u32 length, bytes), 0 for
/// a removal or 1 and the value (u32 length, bytes).
fn encode_delta(writes: &[(Vec<u8>, Option<Vec<u8>>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + writes.iter().map(|(k, v)| 9 + k.len() + v.as_ref().map_or(0, Vec::len)).sum::<usize>());
    out.extend_from_slice(&(writes.len() as u32).to_be_bytes());
    for (k, v) in writes {
        out.extend_from_slice(&(k.len() as u32).to_be_bytes());
        out.extend_from_slice(k);
        match v {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                out.extend_from_slice(v);
            }
        }
    }
    out
}

fn decode_delta(mut b: &[u8]) -> Result<Vec<(Vec<u8>, Option<Vec<u8>>)>, ClientError> {
    fn take<'b>(b: &mut &'b [u8], n: usize) -> Result<&'b [u8], ClientError> {
        if b.len() < n {
            return Err(ClientError::storage("corrupt deferred index record"));
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head)
    }
    fn len(b: &mut &[u8]) -> Result<usize, ClientError> {
        Ok(u32::from_be_bytes(take(b, 4)?.try_into().expect("4 bytes")) as usize)
    }
    let count = len(&mut b)?;
    let mut out = Vec::with_capacity(count.min(b.len() / 5));
    for _ in 0..count {
        let n = len(&mut b)?;
        let k = take(&mut b, n)?.to_vec();
        let v = match take(&mut b, 1)?[0] {
            0 => None,
            1 => {
                let n = len(&mut b)?;
                Some(take(&mut b, n)?.to_vec())
            }
            _ => return Err(ClientError::storage("corrupt deferred index record")),
        };
        out.push((k, v));
    }
    if !b.is_empty() {
        return Err(ClientError::storage("corrupt deferred index record"));
    }
    Ok(out)
}

/// Writes one key of a commit or merge to the table: a value, or its removal (`None`).
fn apply(t: &mut redb::Table<&[u8], &[u8]>, k: &[u8], v: Option<&[u8]>) -> Result<(), ClientError> {
    match v {
        Some(v) => t.insert(k, v).map(drop),
        None => t.remove(k).map(drop),
    }
    .map_err(storage)
}

fn storage<E: std::fmt::Display>(e: E) -> ClientError {
    ClientError::storage(e.to_string())
}

/// A commit under construction: reads see one committed snapshot (taken when the `Tx` is
/// made) and its own writes; [`Tx::finish`] applies it as one durable write transaction.
pub(crate) struct Tx<'a> {
    db: &'a Engine,
    read: Result<Snapshot, String>,
    /// The deferred writes of the commits `read` holds.
    overlay: std::sync::Arc<Overlay>,
    pub(crate) writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The transaction records this commit has decoded or written, by txid, each with whether
    /// this commit wrote it: a commit reads and rewrites the same record several times (a
    /// verdict, its receipts, its component), and decoding and encoding dominated those
    /// steps. Owned by `journal::load_tx`/`save_tx`, the records' one gate; a written record
    /// is encoded once, when [`Tx::finish`] calls `journal::flush_records`.
    pub(crate) records: std::cell::RefCell<super::codec::FastMap<crate::bitcoin::tx::Txid, (super::journal::TxRecord, bool)>>,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(db: &'a Engine) -> Self {
        let d = db.lock();
        let read = db.redb.begin_read().map_err(|e| e.to_string()).and_then(|r| r.open_table(TABLE).map_err(|e| e.to_string()));
        let overlay = d.overlay.clone();
        drop(d);
        Tx { db, read, overlay, writes: BTreeMap::new(), records: Default::default() }
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
    /// this commit's own writes are not included. The one range walk every scan uses: the
    /// table's rows with the deferred writes over them, without the [`DELTA`] records.
    fn committed_range<'s>(&'s self, prefix: &'s [u8], from: Option<&[u8]>) -> Result<impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), ClientError>> + 's, ClientError> {
        let start = from.unwrap_or(prefix);
        let table = self
            .snapshot()?
            .range::<&[u8]>(start..)
            .map_err(storage)?
            .map(|kv| kv.map(|(k, v)| (k.value().to_vec(), v.value().to_vec())).map_err(storage))
            .take_while(move |kv| kv.as_ref().map_or(true, |(k, _)| k.starts_with(prefix) && !k.starts_with(DELTA)))
            .peekable();
        let overlay = self.overlay.range::<[u8], _>((std::ops::Bound::Included(start), std::ops::Bound::Unbounded)).take_while(move |(k, _)| k.starts_with(prefix)).peekable();
        Ok(Merged { table, overlay })
    }
    /// Committed keys under `prefix`, in key order, from `from` on (all when `None`), at
    /// most `limit` (this commit's own writes are not included).
    pub(crate) fn committed_keys(&self, prefix: &[u8], from: Option<&[u8]>, limit: usize) -> Result<Vec<Vec<u8>>, ClientError> {
        self.committed_range(prefix, from)?.take(limit).map(|kv| kv.map(|(k, _)| k)).collect()
    }
    /// Committed keys and values under `prefix`, in key order.
    fn committed_scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ClientError> {
        self.committed_range(prefix, None)?.collect()
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
        if deferred(k) {
            if let Some(v) = self.overlay.get(k) {
                return Ok(v.clone());
            }
        }
        Ok(self.snapshot()?.get(k).map_err(storage)?.map(|v| v.value().to_vec()))
    }
    pub(crate) fn bump_revision(&mut self) -> Result<u64, ClientError> {
        let r = self.get(REVISION_KEY)?.map(|v| be_u64(&v)).unwrap_or(0) + 1;
        self.put(REVISION_KEY.to_vec(), r.to_be_bytes().to_vec());
        Ok(r)
    }
    pub(crate) fn finish(mut self) -> Result<(), ClientError> {
        super::journal::flush_records(&mut self)?;
        let Tx { db, read, overlay, writes, records: _ } = self;
        // The snapshot is released first: nothing reads it any more (and the overlay it
        // held, so publishing below need not copy it).
        drop(read);
        drop(overlay);
        let mut d = db.lock();
        let mut delta = Vec::new();
        let w = db.redb.begin_write().map_err(storage)?;
        {
            let mut t = w.open_table(TABLE).map_err(storage)?;
            for (k, v) in writes {
                if deferred(&k) {
                    delta.push((k, v));
                    continue;
                }
                apply(&mut t, &k, v.as_deref())?;
            }
            if !delta.is_empty() {
                t.insert([DELTA, &d.next.to_be_bytes()].concat().as_slice(), encode_delta(&delta).as_slice()).map_err(storage)?;
            }
        }
        // Fail point for the crash tests: the commit is built, not yet durable (nothing is
        // acknowledged before the commit below returns).
        crate::store::crash::crash_point("client-applied");
        w.commit().map_err(storage)?;
        // Published only now that it is durable; readers wait for `d` meanwhile.
        if !delta.is_empty() {
            d.next += 1;
            let overlay = std::sync::Arc::make_mut(&mut d.overlay);
            for (k, v) in delta {
                overlay.insert(k, v);
            }
        }
        // The commit is durable: a merge that fails leaves the deferred writes and their
        // records as they were, so it is not this commit's failure. The next commit merges
        // again (and a lasting storage fault fails that commit's own write).
        if d.overlay.len() >= db.merge_at {
            let _ = db.merge(&mut d);
        }
        Ok(())
    }
}

/// The table's rows under a prefix with the deferred writes over them (a deferred removal
/// hides the row), in key order.
struct Merged<T: Iterator, O: Iterator> {
    table: std::iter::Peekable<T>,
    overlay: std::iter::Peekable<O>,
}

impl<'o, T, O> Iterator for Merged<T, O>
where
    T: Iterator<Item = Result<(Vec<u8>, Vec<u8>), ClientError>>,
    O: Iterator<Item = (&'o Vec<u8>, &'o Option<Vec<u8>>)>,
{
    type Item = Result<(Vec<u8>, Vec<u8>), ClientError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.table.peek(), self.overlay.peek()) {
                (Some(Err(_)), _) => return self.table.next(),
                (None, None) => return None,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(Ok((t, _))), Some((o, _))) => t.as_slice().cmp(o.as_slice()),
            };
            match order {
                std::cmp::Ordering::Less => return self.table.next(),
                // The deferred write is newer than the table's row.
                std::cmp::Ordering::Equal => drop(self.table.next()),
                std::cmp::Ordering::Greater => {}
            }
            let (k, v) = self.overlay.next().expect("peeked");
            if let Some(v) = v {
                return Some(Ok((k.clone(), v.clone())));
            }
        }
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
        // `OLL_CLIENT_MERGE_AT` (tests): merge after this many deferred writes, in slices
        // of as many, so a test suite can run every path with merges after each commit.
        let merge_at = std::env::var("OLL_CLIENT_MERGE_AT").ok().and_then(|v| v.parse::<usize>().ok());
        let db = Engine::new(open_db(path.as_ref(), cache_bytes)?, merge_at.unwrap_or(MERGE_AT), merge_at.unwrap_or(MERGE_SLICE))?;
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
            let e = out.entry(space_of(&k)).or_default();
            e.0 += 1;
            e.1 += (k.len() + v.len()) as u64;
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

#[cfg(test)]
mod tests {
    //! The deferred index keys against a model: every read a [`Tx`] offers gives what a
    //! plain ordered map given the same commits holds, across merges, reopens and a crash
    //! in the middle of a merge.
    use super::*;

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    /// Deferred and plain key spaces, interleaved in key order.
    const PREFIXES: [&[u8]; 7] = [b"J", b"K", b"M", b"Xa", b"Xe", b"Xi", b"Xu"];

    fn engine(dir: &Path, merge_at: usize, slice: usize) -> Engine {
        Engine::new(open_db(dir, 1 << 20).unwrap(), merge_at, slice).unwrap()
    }

    /// The physical [`DELTA`] records of the file.
    fn records(e: &Engine) -> usize {
        let r = e.redb.begin_read().unwrap();
        let t = r.open_table(TABLE).unwrap();
        t.range::<&[u8]>(DELTA..).unwrap().count()
    }

    /// A deterministic stream of numbers (xorshift).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// One round: a commit of a few puts and removals over all key spaces (sometimes a
    /// whole space removed), applied to `model` as well.
    fn round(e: &Engine, rng: &mut Rng, model: &mut Model) {
        let mut tx = Tx::new(e);
        for _ in 0..rng.next(12) {
            let k = [PREFIXES[rng.next(PREFIXES.len() as u64) as usize], &[rng.next(40) as u8]].concat();
            if rng.next(4) == 0 {
                tx.writes.insert(k.clone(), None);
                model.remove(&k);
            } else {
                let v = vec![rng.next(256) as u8; 1 + rng.next(30) as usize];
                tx.put(k.clone(), v.clone());
                model.insert(k, v);
            }
        }
        if rng.next(40) == 0 {
            let p = PREFIXES[rng.next(PREFIXES.len() as u64) as usize];
            tx.delete_prefix(p).unwrap();
            model.retain(|k, _| !k.starts_with(p));
        }
        assert_eq!(tx.scan(b"").unwrap(), model.clone().into_iter().collect::<Vec<_>>(), "a commit reads its own writes over the store");
        tx.finish().unwrap();
    }

    /// Every kind of read a fresh `Tx` offers, against the model.
    fn check(e: &Engine, rng: &mut Rng, model: &Model) {
        let tx = Tx::new(e);
        let all: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
        assert_eq!(tx.scan(b"").unwrap(), all);
        for p in PREFIXES {
            let want: Vec<_> = all.iter().filter(|(k, _)| k.starts_with(p)).cloned().collect();
            assert_eq!(tx.scan(p).unwrap(), want, "scan of {}", String::from_utf8_lossy(p));
            let from = [p, &[rng.next(40) as u8]].concat();
            let keys: Vec<Vec<u8>> = want.iter().map(|(k, _)| k.clone()).filter(|k| *k >= from).take(5).collect();
            assert_eq!(tx.committed_keys(p, Some(&from), 5).unwrap(), keys);
        }
        for _ in 0..20 {
            let k = [PREFIXES[rng.next(PREFIXES.len() as u64) as usize], &[rng.next(40) as u8]].concat();
            assert_eq!(tx.get(&k).unwrap(), model.get(&k).cloned());
        }
    }

    #[test]
    fn deferred_writes_read_as_written_across_merges_and_reopens() {
        // `rng` makes the commits, `probe` the reads, so the reads change no commit.
        let run = |merge_at: usize, slice: usize, reopen_every: usize| {
            let dir = tempfile::tempdir().unwrap();
            let (mut rng, mut probe, mut model) = (Rng(0x9e37_79b9_7f4a_7c15), Rng(3), Model::new());
            let mut e = engine(dir.path(), merge_at, slice);
            let (mut held, mut merged) = (false, false);
            for i in 1..=600 {
                round(&e, &mut rng, &mut model);
                let n = records(&e);
                merged |= held && n == 0;
                held |= n > 0;
                check(&e, &mut probe, &model);
                if i % reopen_every == 0 {
                    drop(e);
                    e = engine(dir.path(), merge_at, slice);
                    check(&e, &mut probe, &model);
                }
            }
            (model, held, merged, records(&e))
        };
        let (model, held, merged, _) = run(40, 7, 50);
        assert!(held && merged, "writes were deferred, then merged");
        // The same commits, merged after every commit and never, read alike.
        let (every, held, _, left) = run(1, 3, 1000);
        assert!(every == model && !held && left == 0);
        let (never, held, merged, left) = run(usize::MAX, 1, 1000);
        assert!(never == model && held && !merged && left > 0);
    }

    #[test]
    fn a_delta_record_that_does_not_parse_is_a_storage_error() {
        let good = encode_delta(&[(b"Xi1".to_vec(), Some(b"v".to_vec())), (b"K2".to_vec(), None)]);
        assert_eq!(decode_delta(&good).unwrap().len(), 2);
        for bad in [&good[..good.len() - 1], &[&good[..], &[0]].concat()[..], &[0, 0, 0, 9][..]] {
            assert!(decode_delta(bad).unwrap_err().message.contains("corrupt deferred index record"));
        }
    }

    const CHILD: &str = "OLL_TEST_MERGE_CRASH_DIR";

    /// Run only as the child of the test below: rounds until the fail point kills it,
    /// saying which round's commit it is finishing.
    #[test]
    fn merge_crash_child() {
        let Ok(dir) = std::env::var(CHILD) else { return };
        let e = engine(Path::new(&dir), 40, 7);
        let (mut rng, mut model) = (Rng(7), Model::new());
        for i in 0.. {
            println!("finishing {i}");
            round(&e, &mut rng, &mut model);
        }
    }

    #[test]
    fn a_crash_during_a_merge_loses_no_write_and_the_merge_is_done_again() {
        use std::io::{BufRead, BufReader};
        for nth in [1, 2, 9] {
            let dir = tempfile::tempdir().unwrap();
            let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "client::db::tests::merge_crash_child", "--nocapture", "--test-threads=1"])
                .env(CHILD, dir.path())
                .env(crate::store::crash::ENV, format!("client-merge:{nth}"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let last = BufReader::new(child.stdout.take().unwrap())
                .lines()
                .filter_map(|l| l.unwrap().strip_prefix("finishing ").map(|n| n.parse::<usize>().unwrap()))
                .last()
                .unwrap();
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(child.wait().unwrap().signal(), Some(9), "killed at the fail point");
            // The round being finished was durable before its merge began.
            let (mut rng, mut model) = (Rng(7), Model::new());
            let scratch = tempfile::tempdir().unwrap();
            let replay = engine(scratch.path(), usize::MAX, 1);
            for _ in 0..=last {
                round(&replay, &mut rng, &mut model);
            }
            let e = engine(dir.path(), 40, 7);
            assert!(records(&e) > 0, "the records outlive a merge cut short");
            check(&e, &mut rng, &model);
            // The next commit merges again, whole.
            round(&e, &mut rng, &mut model);
            assert_eq!(records(&e), 0);
            check(&e, &mut rng, &model);
        }
    }

    /// A commit's record memo (`journal::load_tx`/`save_tx`): the commit reads its own
    /// writes, `all_txs` lists each record once in receipt order, nothing reaches the store
    /// before `finish`, a commit reading more records than the memo keeps reads the same, and
    /// a record's first receipt cannot move, whether the record is in the memo or not.
    #[test]
    fn a_commit_reads_its_records_through_its_memo_and_writes_them_at_finish() {
        use super::super::journal::{all_txs, load_tx, save_tx, IngressPosition, TxRecord};
        use crate::bitcoin::tx::Hash32;
        const N: u32 = 5000; // more than the memo keeps of records only read
        let txid = |n: u32| {
            let mut b = [0u8; 32];
            b[..4].copy_from_slice(&n.to_be_bytes());
            Hash32(b)
        };
        // Receipt order is the reverse of txid order, so an order by txid would show.
        let rec = |n: u32| TxRecord {
            txid: txid(n),
            raw: vec![n as u8; 60],
            inputs: vec![],
            outputs: 1,
            locktime: 0,
            first_raw: IngressPosition { position: u64::from(N - n), index: 0 },
            variants: vec![],
            placements: vec![],
            component: 0,
            published: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let e = engine(dir.path(), 700, 300);
        let mut tx = Tx::new(&e);
        for n in 0..N {
            save_tx(&mut tx, &rec(n)).unwrap();
        }
        assert_eq!(load_tx(&tx, &txid(7)).unwrap(), Some(rec(7)), "a commit reads a record it wrote");
        assert!(Tx::new(&e).scan(b"Xu").unwrap().is_empty(), "nothing is in the store before finish");
        tx.finish().unwrap();

        let mut tx = Tx::new(&e);
        for n in 0..N {
            assert_eq!(load_tx(&tx, &txid(n)).unwrap(), Some(rec(n)));
        }
        let mut changed = rec(10);
        changed.component = 7;
        save_tx(&mut tx, &changed).unwrap();
        assert_eq!(load_tx(&tx, &txid(10)).unwrap(), Some(changed.clone()));
        let all = all_txs(&tx).unwrap();
        let expected: Vec<TxRecord> = (0..N).rev().map(|n| if n == 10 { changed.clone() } else { rec(n) }).collect();
        assert_eq!(all, expected, "every record once, in receipt order, the commit's write over the store's");
        assert_eq!(load_tx(&Tx::new(&e), &txid(10)).unwrap(), Some(rec(10)), "another reader sees the store until finish");
        let mut moved = rec(20);
        moved.first_raw.position += 1;
        assert!(save_tx(&mut tx, &moved).is_err(), "a first receipt cannot move (record in the memo)");
        let mut moved = rec(N - 1);
        moved.first_raw.position += 1;
        let mut other = Tx::new(&e);
        assert!(save_tx(&mut other, &moved).is_err(), "a first receipt cannot move (record not read)");
        drop(other);
        tx.finish().unwrap();

        let tx = Tx::new(&e);
        assert_eq!(load_tx(&tx, &txid(10)).unwrap(), Some(changed.clone()));
        assert_eq!(all_txs(&tx).unwrap(), expected);
        // A commit dropped without finish leaves nothing.
        let mut dropped = Tx::new(&e);
        save_tx(&mut dropped, &rec(N)).unwrap();
        drop(dropped);
        assert_eq!(load_tx(&Tx::new(&e), &txid(N)).unwrap(), None);
    }
}
