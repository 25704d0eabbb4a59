//! Access partitions and the access scope they give a session (BRC-193 §1, §5, §8; BRC-192 §1).
//!
//! The host's policy places each caller in an *access partition*: an opaque label of its own
//! choosing (a team, a tenant, or the principal itself). Sessions of one partition and query see
//! the same rows: the companion's visibility filter is a function of the partition alone. The
//! session's `scope.access` is derived here from the policy's identity, its version and the
//! partition, and the partition's generation:
//!
//! `access = hex(sha256("overlay-lookup-live/access/1" 0 | len policy | policy | version |
//! len partition | partition | generation))` (lengths u32 and numbers u64, big-endian).
//!
//! So it names the evaluated policy and partition and never carries a credential: a renewed
//! BRC-103 session (a new handshake of the same identity) in the same partition gets the same
//! access; another partition, or the same one after a policy change, another. Invariant,
//! enforced by `Provider`: a session whose recorded access differs from the one derived now is
//! never served again (its reads get `reset-required`).
//!
//! The version and the generations are durable (auxiliary records under `policy/`), so a
//! restart neither revives an old access nor invalidates a current one.
use std::collections::HashMap;
use std::sync::RwLock;

use sha2::{Digest as _, Sha256};

use super::record::POLICY_PREFIX;

/// Longest partition label accepted (BRC-192 §1 string bound).
pub const MAX_PARTITION_BYTES: usize = 1024;

const VERSION_KEY: &[u8] = b"version";
const PARTITION_KEY: &[u8] = b"p/";

/// The derived access of `partition` (see the module docs).
pub fn derive(policy: &str, version: u64, partition: &str, generation: u64) -> String {
    let mut h = Sha256::new();
    h.update(b"overlay-lookup-live/access/1\0");
    h.update((policy.len() as u32).to_be_bytes());
    h.update(policy.as_bytes());
    h.update(version.to_be_bytes());
    h.update((partition.len() as u32).to_be_bytes());
    h.update(partition.as_bytes());
    h.update(generation.to_be_bytes());
    hex::encode(h.finalize())
}

/// Whether `partition` is a usable label: 1..=1024 bytes.
pub fn valid_partition(partition: &str) -> bool {
    !partition.is_empty() && partition.len() <= MAX_PARTITION_BYTES
}

#[derive(Default)]
struct State {
    policy: String,
    version: u64,
    /// Partitions whose generation is not 0 (those a policy change named).
    generations: HashMap<String, u64>,
}

/// The policy's identity, version and partition generations, as loaded from the store.
#[derive(Default)]
pub struct AccessTable {
    state: RwLock<State>,
}

/// Auxiliary records to write for a policy change, and what it changes once they are durable.
pub struct PolicyChange {
    pub writes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    version: Option<u64>,
    generations: Vec<(String, u64)>,
}

pub fn version_key() -> Vec<u8> {
    [POLICY_PREFIX, VERSION_KEY].concat()
}

pub fn partition_key(partition: &str) -> Vec<u8> {
    [POLICY_PREFIX, PARTITION_KEY, partition.as_bytes()].concat()
}

/// A stored u64 (big-endian); malformed records read as 0.
fn u64_of(v: &[u8]) -> u64 {
    v.try_into().map(u64::from_be_bytes).unwrap_or(0)
}

impl AccessTable {
    /// Loads the version and generations from the auxiliary records `records` (keys without
    /// the `policy/` prefix removed).
    pub fn load(&self, records: impl Iterator<Item = (Vec<u8>, Vec<u8>)>) {
        let mut s = self.state.write().unwrap();
        for (k, v) in records {
            let Some(rest) = k.strip_prefix(POLICY_PREFIX) else { continue };
            if rest == VERSION_KEY {
                s.version = u64_of(&v);
            } else if let Some(p) = rest.strip_prefix(PARTITION_KEY) {
                if let Ok(p) = std::str::from_utf8(p) {
                    s.generations.insert(p.to_string(), u64_of(&v));
                }
            }
        }
    }

    /// Names the policy (the host's configuration; part of every derived access).
    pub fn set_policy(&self, policy: &str) {
        self.state.write().unwrap().policy = policy.to_string();
    }

    pub fn policy(&self) -> (String, u64) {
        let s = self.state.read().unwrap();
        (s.policy.clone(), s.version)
    }

    /// The access a session of `partition` gets now.
    pub fn access_of(&self, partition: &str) -> String {
        let s = self.state.read().unwrap();
        derive(&s.policy, s.version, partition, s.generations.get(partition).copied().unwrap_or(0))
    }

    /// A new version of the whole policy (`partitions` None) or new generations of some
    /// partitions; applied with [`AccessTable::apply`] once its writes are durable.
    pub fn change(&self, partitions: Option<&[String]>) -> PolicyChange {
        let s = self.state.read().unwrap();
        match partitions {
            None => {
                let version = s.version + 1;
                PolicyChange { writes: vec![(version_key(), Some(version.to_be_bytes().to_vec()))], version: Some(version), generations: vec![] }
            }
            Some(ps) => {
                let mut generations: Vec<(String, u64)> = Vec::new();
                for p in ps {
                    if generations.iter().any(|(q, _)| q == p) {
                        continue;
                    }
                    generations.push((p.clone(), s.generations.get(p).copied().unwrap_or(0) + 1));
                }
                let writes = generations.iter().map(|(p, g)| (partition_key(p), Some(g.to_be_bytes().to_vec()))).collect();
                PolicyChange { writes, version: None, generations }
            }
        }
    }

    pub fn apply(&self, change: PolicyChange) {
        let mut s = self.state.write().unwrap();
        if let Some(v) = change.version {
            s.version = v;
        }
        for (p, g) in change.generations {
            s.generations.insert(p, g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_names_policy_version_partition_and_generation() {
        let a = derive("urn:p", 0, "team-1", 0);
        assert_eq!(a.len(), 64);
        assert_eq!(a, derive("urn:p", 0, "team-1", 0));
        assert_ne!(a, derive("urn:p", 0, "team-2", 0));
        assert_ne!(a, derive("urn:p", 1, "team-1", 0));
        assert_ne!(a, derive("urn:p", 0, "team-1", 1));
        assert_ne!(a, derive("urn:q", 0, "team-1", 0));
        // Length prefixes: moving bytes between the policy and the partition changes it.
        assert_ne!(derive("ab", 0, "c", 0), derive("a", 0, "bc", 0));
    }

    #[test]
    fn changes_apply_only_once_durable_and_reload() {
        let t = AccessTable::default();
        t.set_policy("urn:p");
        let before = t.access_of("x");
        let ch = t.change(Some(&["x".to_string(), "x".to_string()]));
        assert_eq!(ch.writes.len(), 1);
        assert_eq!(t.access_of("x"), before, "not applied yet");
        let writes = ch.writes.clone();
        t.apply(ch);
        let after = t.access_of("x");
        assert_ne!(after, before);
        let reloaded = AccessTable::default();
        reloaded.set_policy("urn:p");
        reloaded.load(writes.into_iter().map(|(k, v)| (k, v.unwrap())));
        assert_eq!(reloaded.access_of("x"), after);
        assert_eq!(reloaded.access_of("y"), t.access_of("y"));
    }
}
