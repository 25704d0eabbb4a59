//! The sessions known to this process, by id and by principal.
//!
//! The per-principal index of *active* sessions (neither closed, revoked nor expired)
//! keeps the session cap check of an open independent of how many ended sessions are
//! still retained: in public mode every anonymous caller is one principal, and its ended
//! sessions stay until their replay deadline.

use std::collections::HashMap;
use std::sync::Arc;

use super::LiveSession;

/// A principal as sessions are owned: its key and whether it was authenticated.
type Owner = (String, bool);

#[derive(Default)]
pub(super) struct SessionTable {
    by_id: HashMap<[u8; 16], Arc<LiveSession>>,
    /// Per principal, the sessions not closed or revoked, as (expiresAt, id), in no
    /// order. Expired ones are dropped when counted. Invariant: a session is here only if
    /// it is in `by_id`, and only while its record is neither closed nor revoked.
    ///
    /// A plain vector, not a tree or a set: opens keep it at most
    /// `maxSessionsPerPrincipal` long (64 by default), so a scan is cheap, and a tree's
    /// first node alone is larger than a whole vector of a principal's usual one to
    /// three sessions. Sessions loaded after a restart are appended without a search.
    active: HashMap<Owner, Vec<(u64, [u8; 16])>>,
}

impl SessionTable {
    pub fn get(&self, id: &[u8; 16]) -> Option<Arc<LiveSession>> {
        self.by_id.get(id).cloned()
    }

    /// Inserts `s` unless its id is already known; returns the session now held.
    pub fn insert(&mut self, s: Arc<LiveSession>) -> Arc<LiveSession> {
        if let Some(existing) = self.by_id.get(&s.id) {
            return existing.clone();
        }
        let active = {
            let r = s.rec.lock().unwrap();
            (!r.ended()).then(|| ((r.principal.clone(), r.authenticated), r.expires_at))
        };
        if let Some((owner, expires_at)) = active {
            self.active.entry(owner).or_insert_with(|| Vec::with_capacity(1)).push((expires_at, s.id));
        }
        self.by_id.insert(s.id, s.clone());
        s
    }

    /// Takes a session out of the active index (it was closed or revoked).
    pub fn deactivate(&mut self, principal: &str, authenticated: bool, expires_at: u64, id: &[u8; 16]) {
        let owner = (principal.to_string(), authenticated);
        if let Some(set) = self.active.get_mut(&owner) {
            if let Some(at) = set.iter().position(|e| *e == (expires_at, *id)) {
                set.swap_remove(at);
            }
            if set.is_empty() {
                self.active.remove(&owner);
            }
        }
    }

    /// How many sessions of a principal are active at `now` (seconds); drops the
    /// expired ones from the index on the way.
    pub fn active_count(&mut self, principal: &str, authenticated: bool, now: u64) -> usize {
        let owner = (principal.to_string(), authenticated);
        let Some(set) = self.active.get_mut(&owner) else { return 0 };
        set.retain(|(expires_at, _)| *expires_at > now);
        let n = set.len();
        if n == 0 {
            self.active.remove(&owner);
        }
        n
    }

    pub fn remove(&mut self, id: &[u8; 16]) {
        let Some(s) = self.by_id.remove(id) else { return };
        let r = s.rec.lock().unwrap();
        self.deactivate(&r.principal, r.authenticated, r.expires_at, id);
    }

    /// The sessions of one principal key, authenticated or not (the principal of a
    /// session never changes). Scans every session: only revocation asks, and it reads
    /// every stored session first anyway.
    pub fn of_principal(&self, principal: &str) -> Vec<Arc<LiveSession>> {
        self.by_id.values().filter(|s| s.rec.lock().unwrap().principal == principal).cloned().collect()
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<LiveSession>> {
        self.by_id.values()
    }
}
