//! The sessions known to this process, by id and by principal.
//!
//! The per-principal index keeps the session cap check of an open proportional to
//! the caller's own sessions rather than to every session the provider holds.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::LiveSession;

/// A principal as sessions are owned: its key and whether it was authenticated.
type Owner = (String, bool);

#[derive(Default)]
pub(super) struct SessionTable {
    by_id: HashMap<[u8; 16], Arc<LiveSession>>,
    by_owner: HashMap<Owner, HashSet<[u8; 16]>>,
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
        let owner = {
            let r = s.rec.lock().unwrap();
            (r.principal.clone(), r.authenticated)
        };
        self.by_owner.entry(owner).or_default().insert(s.id);
        self.by_id.insert(s.id, s.clone());
        s
    }

    pub fn remove(&mut self, id: &[u8; 16]) {
        let Some(s) = self.by_id.remove(id) else { return };
        let r = s.rec.lock().unwrap();
        let owner = (r.principal.clone(), r.authenticated);
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
