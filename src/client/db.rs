//! The client's database: one sled tree (`client-v1`) and the commits on it. Every module of
//! the client reads and writes through a [`Tx`]; [`ClientDb`] is the handle the bindings
//! hold, with its operations grouped by concern (`store.rs`: checkpoints and batches,
//! `reconcile.rs`: the spend graph and verification, `current.rs`: reconciled views).
//!
//! Invariants (enforced here): a commit is one sled batch applied all-or-nothing and flushed
//! before [`Tx::finish`] returns; commits are serialized by [`ClientDb::guard`]; sled's file
//! lock keeps a second process out. Values are records in the [`super::codec`] encoding
//! (JSON written by earlier versions is still read: [`decode`]); key layouts are in
//! `store.rs` and `journal.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

use super::{ClientError, ErrorCode};

pub(crate) const REVISION_KEY: &[u8] = b"meta/revision";

/// How long `open` waits for sled's file lock: a store closed a moment ago in this
/// process can keep it while sled's background threads finish with the dropped Db.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

pub struct ClientDb {
    pub(crate) db: sled::Db,
    pub(crate) tree: sled::Tree,
    lock: Mutex<()>,
}

/// A commit under construction: reads see its own writes; [`Tx::finish`] applies it
/// as one sled batch and flushes.
pub(crate) struct Tx<'a> {
    tree: &'a sled::Tree,
    pub(crate) writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(tree: &'a sled::Tree) -> Self {
        Tx { tree, writes: BTreeMap::new() }
    }
    pub(crate) fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        if let Some(v) = self.writes.get(k) {
            return Ok(v.clone());
        }
        Ok(self.tree.get(k).map_err(ClientError::storage)?.map(|v| v.to_vec()))
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
    pub(crate) fn delete_prefix(&mut self, prefix: &[u8]) -> Result<(), ClientError> {
        for kv in self.tree.scan_prefix(prefix) {
            let (k, _) = kv.map_err(ClientError::storage)?;
            self.writes.insert(k.to_vec(), None);
        }
        let pending: Vec<Vec<u8>> = self.writes.keys().filter(|k| k.starts_with(prefix)).cloned().collect();
        for k in pending {
            self.writes.insert(k, None);
        }
        Ok(())
    }
    /// Keys and values under `prefix`, this commit's own writes included, in key order.
    pub(crate) fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ClientError> {
        let mut out: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for kv in self.tree.scan_prefix(prefix) {
            let (k, v) = kv.map_err(ClientError::storage)?;
            out.insert(k.to_vec(), v.to_vec());
        }
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
        Ok(self.tree.get(k).map_err(ClientError::storage)?.map(|v| v.to_vec()))
    }
    pub(crate) fn bump_revision(&mut self) -> Result<u64, ClientError> {
        let r = self.get(REVISION_KEY)?.map(|v| be_u64(&v)).unwrap_or(0) + 1;
        self.put(REVISION_KEY.to_vec(), r.to_be_bytes().to_vec());
        Ok(r)
    }
    pub(crate) fn finish(self, db: &sled::Db) -> Result<(), ClientError> {
        let mut batch = sled::Batch::default();
        for (k, v) in self.writes {
            match v {
                Some(v) => batch.insert(k, v),
                None => batch.remove(k),
            }
        }
        self.tree.apply_batch(batch).map_err(ClientError::storage)?;
        // Fail point for the crash tests: applied, not yet flushed (nothing is
        // acknowledged before the flush below).
        crate::store::crash::crash_point("client-applied");
        db.flush().map_err(ClientError::storage)?;
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
    /// Opens (or creates) the store at `path`. Only one open store per path.
    pub fn open(path: impl AsRef<Path>) -> Result<ClientDb, ClientError> {
        Self::open_with(path, DEFAULT_CACHE_BYTES)
    }

    /// [`ClientDb::open`] with sled's page cache bounded to `cache_bytes` (the cache
    /// holds recently used pages; everything else is read from disk on demand).
    pub fn open_with(path: impl AsRef<Path>, cache_bytes: u64) -> Result<ClientDb, ClientError> {
        let db = open_db(path.as_ref(), cache_bytes)?;
        let tree = db.open_tree("client-v1").map_err(ClientError::storage)?;
        let store = ClientDb { db, tree, lock: Mutex::new(()) };
        // An older key layout is migrated before anything reads it (store.rs, "Format").
        store.upgrade_format()?;
        Ok(store)
    }

    /// Flushes and releases the path so it can be reopened.
    pub fn close(self) -> Result<(), ClientError> {
        self.db.flush().map_err(ClientError::storage)?;
        drop(self.tree);
        drop(self.db);
        Ok(())
    }

    /// Keys and bytes (key plus value) per key space, for diagnostics and for the tests
    /// and benches that count what a commit writes. A key space is the key's tag: one
    /// byte, two for the journal (`X?`), the text before `/` for `meta/...`. Scans the
    /// whole tree.
    pub fn space_usage(&self) -> Result<BTreeMap<String, (u64, u64)>, ClientError> {
        let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for kv in self.tree.iter() {
            let (k, v) = kv.map_err(ClientError::storage)?;
            let space = space_of(&k);
            let e = out.entry(space).or_default();
            e.0 += 1;
            e.1 += (k.len() + v.len()) as u64;
        }
        Ok(out)
    }

    pub(crate) fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        // A panic while holding the lock cannot leave a half-applied commit (writes
        // are applied only by `finish`), so a poisoned lock is safe to reuse.
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

}

/// 256 MiB: measured to receive as fast as sled's own default (1 GiB) at 100,000 outputs with
/// a verifier, with a lower peak; 64 MiB made that receipt 2.7 times slower
/// (bench/RESULTS.md section 16, docs/client.md "CheckpointStore").
pub const DEFAULT_CACHE_BYTES: u64 = 256 * 1024 * 1024;

fn open_db(path: &Path, cache_bytes: u64) -> Result<sled::Db, ClientError> {
    let started = std::time::Instant::now();
    loop {
        match sled::Config::new().path(path).cache_capacity(cache_bytes).open() {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(io))
                if (io.kind() == std::io::ErrorKind::WouldBlock || io.to_string().contains("could not acquire lock"))
                    && started.elapsed() < LOCK_WAIT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(sled::Error::Io(io)) if io.kind() == std::io::ErrorKind::WouldBlock || io.to_string().contains("could not acquire lock") => {
                return Err(ClientError::new(
                    ErrorCode::Unavailable,
                    format!("checkpoint store {} is open elsewhere (locked)", path.display()),
                ))
            }
            Err(e) => return Err(ClientError::storage(e)),
        }
    }
}
