//! The sessions known to this process, by id and by principal.
//!
//! The per-principal index of *active* sessions (neither closed, revoked nor expired)
//! keeps the session cap check of an open independent of how many ended sessions are
//! still retained: in public mode every anonymous caller is one principal, and its ended
//! sessions stay until their replay deadline.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::LiveSession;

/// A principal as sessions are owned: its key and whether it was authenticated.
type Owner = (String, bool);

#[derive(Default)]
pub(super) struct SessionTable {
    by_id: HashMap<[u8; 16], Arc<LiveSession>>,
    by_owner: HashMap<Owner, HashSet<[u8; 16]>>,
    /// Per principal, the sessions not closed or revoked, by (expiresAt, id). Expired
    /// ones are dropped when counted. Invariant: a session is here only if it is in
    /// `by_id`, and only while its record is neither closed nor revoked.
    active: HashMap<Owner, BTreeSet<(u64, [u8; 16])>>,
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
        let (owner, active) = {
            let r = s.rec.lock().unwrap();
            ((r.principal.clone(), r.authenticated), (!r.closed && !r.revoked).then_some(r.expires_at))
        };
        if let Some(expires_at) = active {
            self.active.entry(owner.clone()).or_default().insert((expires_at, s.id));
        }
        self.by_owner.entry(owner).or_default().insert(s.id);
        self.by_id.insert(s.id, s.clone());
        s
    }

    /// Takes a session out of the active index (it was closed or revoked).
    pub fn deactivate(&mut self, principal: &str, authenticated: bool, expires_at: u64, id: &[u8; 16]) {
        let owner = (principal.to_string(), authenticated);
        if let Some(set) = self.active.get_mut(&owner) {
            set.remove(&(expires_at, *id));
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
        while set.first().is_some_and(|(expires_at, _)| *expires_at <= now) {
            set.pop_first();
        }
        let n = set.len();
        if n == 0 {
            self.active.remove(&owner);
        }
        n
    }

    pub fn remove(&mut self, id: &[u8; 16]) {
        let Some(s) = self.by_id.remove(id) else { return };
        let r = s.rec.lock().unwrap();
        let owner = (r.principal.clone(), r.authenticated);
        self.deactivate(&owner.0, owner.1, r.expires_at, id);
        if let Some(ids) = self.by_owner.get_mut(&owner) {
            ids.remove(id);
            if ids.is_empty() {
                self.by_owner.remove(&owner);
            }
        }
    }

    /// The sessions of one principal (the principal of a session never changes).
    pub fn of_owner(&self, principal: &str, authenticated: bool) -> Vec<Arc<LiveSession>> {
        let owner = (principal.to_string(), authenticated);
        self.by_owner
            .get(&owner)
            .map(|ids| ids.iter().filter_map(|id| self.by_id.get(id).cloned()).collect())
            .unwrap_or_default()
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<LiveSession>> {
        self.by_id.values()
    }
}
