//! Durable session and fence records (BRC-193 §8).
//!
//! Both live in the store's auxiliary key space and are written in one atomic, flushed
//! write before the open is answered. The session record pins the exact first batch by
//! its SHA-256 and the inputs that reproduce it (see [`FirstBatch`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire::Limits;

/// Key prefixes inside the store's auxiliary space.
pub const SESSION_PREFIX: &[u8] = b"sess/";
pub const FENCE_PREFIX: &[u8] = b"fence/";
/// Stores written before [`FirstBatch`] existed kept the first batch's bytes here;
/// they are still answered from it and deleted with their session.
pub const FIRST_BATCH_PREFIX: &[u8] = b"first/";
/// Prohibitions (`prohibit.rs`), by number; never deleted.
pub const PROHIBIT_PREFIX: &[u8] = b"prohibit/";
/// The access policy's version and the partitions' generations (`access.rs`).
pub const POLICY_PREFIX: &[u8] = b"policy/";

pub fn session_key(id: &[u8; 16]) -> Vec<u8> {
    [SESSION_PREFIX, &id[..]].concat()
}

pub fn fence_key(keyed_digest: &[u8; 32]) -> Vec<u8> {
    [FENCE_PREFIX, &keyed_digest[..]].concat()
}

pub fn first_batch_key(id: &[u8; 16]) -> Vec<u8> {
    [FIRST_BATCH_PREFIX, &id[..]].concat()
}

/// Everything a read needs to continue a session, frozen at open.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub service: String,
    pub principal: String,
    pub authenticated: bool,
    /// `scope.access`: derived from the policy and the partition, never a credential
    /// (see `access.rs`).
    pub access: String,
    /// The access partition the host's policy placed the principal in at open (empty in
    /// records of older stores, whose `access` then never matches a derived one).
    #[serde(default)]
    pub partition: String,
    pub query: Value,
    /// Shared with the session's view and with every session of that view (see
    /// `Provider::new_view`).
    pub selection: Arc<Value>,
    pub query_digest: String,
    pub rules_digest: String,
    pub epoch: String,
    /// Snapshot evaluation time (seconds) and watermark.
    pub t: u64,
    pub w: u64,
    pub expires_at: u64,
    pub replay_until: u64,
    /// Effective limits of the open, kept for diagnostics.
    pub limits: Limits,
    /// Set by close; a read after it is `expired`.
    pub closed: bool,
    /// Set by revocation or a changed access scope; a read after it is `unauthorized`.
    pub revoked: bool,
    /// Set when a policy change or a prohibition ended the session; a read after it is
    /// `reset-required` (the client opens a new snapshot under the current policy).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    /// The first batch as answered (absent in records of older stores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<FirstBatch>,
}

impl SessionRecord {
    /// Closed, revoked or reset: no read of it is answered with a batch again.
    pub fn ended(&self) -> bool {
        self.closed || self.revoked || self.reset
    }
}

/// What pins the first batch so that an identical retry gets it byte for byte
/// (BRC-193 §8) without storing its bytes, which may be up to 4 MiB per open.
///
/// The first batch is a pure function of the session record, the store secret, the
/// row versions visible at `w` (immutable once committed; their BEEF is addressed by
/// its SHA-256) and the watermark echoed in its envelope. Those row versions stay
/// retained while a retry can be answered: a retry needs the session open and
/// unexpired, and such a session holds the compaction horizon at or below `w`
/// (`Provider::compaction_horizon`). A retry re-renders the page and answers only if it
/// holds the same rows in the same order; otherwise it fails cleanly.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FirstBatch {
    /// `highWater` as echoed in the first batch.
    pub high_water: u64,
    /// SHA-256 over the row keys of the first batch, in order (each length-prefixed).
    pub rows_sha256: String,
}

/// The permanent opening fence: a compact record keyed by a keyed digest of
/// (service, principal, requestId), never deleted.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FenceRecord {
    /// Digest of the normalized Open; an unequal retry is `conflict`.
    pub open_digest: String,
    pub session: String,
}
