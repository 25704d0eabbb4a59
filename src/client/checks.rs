//! Batch invariant checks before a commit (BRC-193 §2, §3, §8). Pure functions over
//! a parsed batch and the generation's committed position; the store runs them all
//! before anything is written, so a batch failing any of them is never committed.

use std::collections::BTreeSet;

use super::parse::{ParsedBatch, Phase, Scope};
use super::{ClientError, SourceKey};

/// Profile hard maximum for a complete response body (BRC-193 §2).
pub const PROFILE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Profile hard maximum for observations per batch (BRC-193 §2).
pub const PROFILE_MAX_OBSERVATIONS: usize = 1024;

/// The committed position of one generation, as far as the checks need it.
#[derive(Clone, Debug, Default)]
pub struct Position {
    pub session: Option<String>,
    pub scope: Option<Scope>,
    pub phase: Option<Phase>,
    pub snapshot_complete: bool,
    pub through: u64,
    pub expires_at: u64,
    pub replay_until: u64,
}

/// The limits the client requested; the actual body is held to them, not to the
/// limits the provider echoes (BRC-193 §8).
#[derive(Clone, Copy, Debug)]
pub struct BatchLimits {
    pub max_bytes: usize,
    pub max_observations: usize,
}

impl BatchLimits {
    pub fn new(max_bytes: usize, max_observations: usize) -> BatchLimits {
        BatchLimits {
            max_bytes: max_bytes.min(PROFILE_MAX_BYTES),
            max_observations: max_observations.min(PROFILE_MAX_OBSERVATIONS),
        }
    }
}

/// Runs before parsing: the complete body counts.
pub fn check_size(body_len: usize, limits: &BatchLimits) -> Result<(), ClientError> {
    if body_len > limits.max_bytes {
        return Err(ClientError::new(
            super::ErrorCode::Limited,
            format!("batch body is {body_len} bytes, over the {} byte limit", limits.max_bytes),
        ));
    }
    Ok(())
}

/// Every check of a parsed batch against the position it is meant to follow.
pub fn check_batch(prev: &Position, source: &SourceKey, b: &ParsedBatch, limits: &BatchLimits) -> Result<(), ClientError> {
    check_identity(prev, source, b)?;
    check_counts(b, limits)?;
    check_watermarks(prev, b)?;
    check_boundary(prev, b)?;
    match b.phase {
        Phase::Snapshot => check_snapshot_groups(b),
        Phase::Live => check_live_groups(prev, b),
    }
}

/// Scope and session are fixed for a generation; the scope names this source.
fn check_identity(prev: &Position, source: &SourceKey, b: &ParsedBatch) -> Result<(), ClientError> {
    if &SourceKey::of_scope(&b.scope) != source {
        return Err(ClientError::invalid("batch scope names another source"));
    }
    if let Some(s) = &prev.session {
        if s != &b.session {
            return Err(ClientError::invalid("batch session differs from the committed session"));
        }
    }
    if let Some(s) = &prev.scope {
        if s != &b.scope {
            return Err(ClientError::invalid("batch scope differs from the session scope"));
        }
    }
    if prev.session.is_some() && (prev.expires_at != b.expires_at || prev.replay_until != b.replay_until) {
        // BRC-193 §4: version 1 deadlines are fixed at open.
        return Err(ClientError::invalid("session deadlines changed"));
    }
    if b.replay_until < b.expires_at {
        return Err(ClientError::invalid("replayUntil is before expiresAt"));
    }
    Ok(())
}

/// Observation count against the requested limit; ids unique within the batch
/// (an observation id maps to exactly one group, BRC-193 §8).
fn check_counts(b: &ParsedBatch, limits: &BatchLimits) -> Result<(), ClientError> {
    if b.observation_count() > limits.max_observations {
        return Err(ClientError::new(super::ErrorCode::Limited, "batch has more observations than the limit"));
    }
    let mut groups = BTreeSet::new();
    let mut observations = BTreeSet::new();
    for g in &b.groups {
        if !groups.insert(g.id.as_str()) {
            return Err(ClientError::invalid(format!("group id {} repeated in one batch", g.id)));
        }
        for o in &g.observations {
            if !observations.insert(o.id.as_str()) {
                return Err(ClientError::invalid(format!("observation id {} repeated in one batch", o.id)));
            }
        }
    }
    Ok(())
}

/// through <= highWater; through never decreases (BRC-193 §3).
fn check_watermarks(prev: &Position, b: &ParsedBatch) -> Result<(), ClientError> {
    if b.through > b.high_water {
        return Err(ClientError::invalid("through is above highWater"));
    }
    if prev.session.is_some() && b.through < prev.through {
        return Err(ClientError::invalid("through decreased"));
    }
    Ok(())
}

/// The snapshot/live boundary (BRC-193 §3): an open starts in the snapshot; every
/// snapshot batch keeps through = W; the last one says snapshotComplete and is still
/// a snapshot batch; everything after it is live.
fn check_boundary(prev: &Position, b: &ParsedBatch) -> Result<(), ClientError> {
    let in_snapshot = match prev.phase {
        None => true,
        Some(Phase::Snapshot) => !prev.snapshot_complete,
        Some(Phase::Live) => false,
    };
    match (in_snapshot, b.phase) {
        (true, Phase::Snapshot) => {
            if prev.session.is_some() && b.through != prev.through {
                return Err(ClientError::invalid("snapshot through changed within the snapshot"));
            }
            Ok(())
        }
        (true, Phase::Live) => Err(ClientError::invalid("live batch before the snapshot completed")),
        (false, Phase::Snapshot) => Err(ClientError::invalid("snapshot batch after the snapshot completed")),
        (false, Phase::Live) => {
            if !b.snapshot_complete {
                return Err(ClientError::invalid("live batch must report snapshotComplete"));
            }
            Ok(())
        }
    }
}

/// Snapshot groups all carry sequence W (= through).
fn check_snapshot_groups(b: &ParsedBatch) -> Result<(), ClientError> {
    for g in &b.groups {
        if g.sequence != b.through {
            return Err(ClientError::invalid(format!("snapshot group {} has sequence other than W", g.id)));
        }
    }
    Ok(())
}

/// Live groups: strictly increasing, above the previous through, at most through.
fn check_live_groups(prev: &Position, b: &ParsedBatch) -> Result<(), ClientError> {
    let mut last = prev.through;
    for g in &b.groups {
        if g.sequence <= last {
            return Err(ClientError::invalid(format!(
                "live group {} sequence {} does not increase past {last}",
                g.id, g.sequence
            )));
        }
        if g.sequence > b.through {
            return Err(ClientError::invalid(format!("live group {} sequence is above through", g.id)));
        }
        last = g.sequence;
    }
    Ok(())
}
