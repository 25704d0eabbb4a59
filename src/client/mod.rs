//! Durable client side of lookup-live-v1: a checkpoint store that commits each
//! received batch with its cursor, and per-source membership (BRC-193 §4, §8, §9;
//! BRC-192 §2, §10.5).
//!
//! - [`parse`]: the batch from its exact bytes (parsed by `wire`), reduced to what the store needs.
//! - [`checks`]: pure invariant checks of a batch against the committed position.
//! - [`membership`]: applying an accepted group to a source generation's rows.
//! - [`codec`]: the compact binary encoding of the store's records.
//! - [`db`]: [`ClientDb`], the client's whole database (one redb table), and its commits ([`db::Tx`]).
//! - [`group`]: a received group's record and its membership rule.
//! - [`store`]: checkpoints, batch commits and per-source membership on it.
//!
//! Spend reconciliation (BRC-192 §10), one module per concept, on the same store:
//! Raw transactions and BEEF bundles are read with [`crate::bitcoin`].
//! - [`chain`]: headers, chain views, exact finality and the replacement relation.
//! - [`evidence`]: a group's evidence from its BEEF bytes to the graph, published whole.
//! - [`journal`]: the durable ingress journal and the records it keeps.
//! - [`order`]: readiness, candidate order and the verification barrier.
//! - [`select`]: chain overrides, historical replay and current-view rebuild.
//! - [`incremental`]: a step computed from the one leaf it changed.
//! - [`reconcile`]: the durable steps (receive, context, verification port).
//! - [`current`]: currentness and the reported `ReconciledState`.

pub mod chain;
pub mod checks;
pub mod codec;
pub mod current;
pub mod db;
pub mod evidence;
pub mod group;
pub mod incremental;
pub mod journal;
pub mod membership;
pub mod order;
pub mod parse;
pub mod reconcile;
pub mod select;
pub mod store;

use serde::{Deserialize, Serialize};

pub use parse::{parse_batch, Phase, Scope};
pub use db::ClientDb;
pub use group::Membership;
pub use store::{CommitOptions, CommitOutcome, MemberView, Renewal, SourceCheckpoint, SourceState};

/// Error codes are the package's one set (BRC-192 §6 plus `not-found`, [`crate::wire::ErrorCode`]).
pub use crate::wire::ErrorCode;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientError {
    pub code: ErrorCode,
    pub message: String,
}

impl ClientError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ClientError { code, message: message.into() }
    }
    pub fn invalid(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::Invalid, m)
    }
    pub fn unsupported(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unsupported, m)
    }
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, m)
    }
    pub fn storage(e: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::Unavailable, format!("checkpoint store: {e}"))
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for ClientError {}

impl From<crate::wire::WireError> for ClientError {
    fn from(e: crate::wire::WireError) -> Self {
        ClientError::new(e.code, e.message)
    }
}

impl From<crate::bitcoin::Error> for ClientError {
    fn from(e: crate::bitcoin::Error) -> Self {
        match e {
            crate::bitcoin::Error::Invalid(m) => ClientError::invalid(m),
            crate::bitcoin::Error::Limited(m) => ClientError::new(ErrorCode::Limited, m),
        }
    }
}

/// A source (one session branch): who serves it and which query. Access, epoch, rules
/// digest and session belong to a generation of the source (its scope): a provider that
/// changes a client's access partition serves the same source under a new generation,
/// which replaces the old one as a reset does (BRC-193 §5, §9).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceKey {
    pub provider: String,
    pub service: String,
    #[serde(rename = "queryDigest")]
    pub query_digest: String,
}

impl SourceKey {
    pub fn validate(&self) -> Result<(), ClientError> {
        parse::check_text("provider", &self.provider)?;
        parse::check_text("service", &self.service)?;
        parse::check_hex32("queryDigest", &self.query_digest)
    }

    pub fn of_scope(s: &Scope) -> SourceKey {
        SourceKey { provider: s.provider.clone(), service: s.service.clone(), query_digest: s.query_digest.clone() }
    }

    /// Fixed-length key prefix: sha256 of the length-prefixed fields. A store written
    /// before access left the source (format 1) keeps its records under the prefix it
    /// had then, found through an alias (`store.rs`, "Format").
    pub fn id(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for f in [&self.provider, &self.service, &self.query_digest] {
            h.update((f.len() as u64).to_be_bytes());
            h.update(f.as_bytes());
        }
        h.finalize().into()
    }
}
