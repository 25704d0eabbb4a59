//! Hard limits (BRC-192 §9, BRC-193 §8) and effective session limits (BRC-193 §2).

use serde::Serialize;

/// Maximum JSON nesting depth; the root container counts as one (BRC-192 §9).
/// Scalars do not add a level: 32 nested arrays are accepted, 33 are not.
pub const MAX_DEPTH: usize = 32;
/// Maximum elements of one JSON array (BRC-192 §9).
pub const MAX_ARRAY_ELEMENTS: usize = 4096;
/// Maximum members of one JSON object (BRC-192 §9).
pub const MAX_OBJECT_KEYS: usize = 256;
/// Maximum entries of `extensions` and of `critical` (BRC-192 §9).
pub const MAX_EXTENSIONS: usize = 32;
/// Maximum request body (BRC-193 §8).
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// Maximum encoded bytes of a string without a narrower constraint (BRC-192 §1).
pub const MAX_TEXT_BYTES: usize = 1024;

/// The lookup-live profile identifier (BRC-193 §1).
pub const PROFILE: &str = "https://bsv.brc.dev/overlays/0193#lookup-live-v1";
/// Total HTTP header field bytes of a request or response (BRC-193 §8).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Profile maximum of a complete response body: 4 MiB (BRC-193 §2).
pub const PROFILE_MAX_BYTES: u32 = 4 * 1024 * 1024;
/// Profile maximum observations per batch (BRC-193 §2).
pub const PROFILE_MAX_OBSERVATIONS: u32 = 1024;
/// Profile maximum long-poll wait (BRC-193 §2).
pub const PROFILE_MAX_WAIT_MS: u32 = 25_000;
/// Smallest response allowance a provider must support: 64 KiB (BRC-193 §2).
pub const PROVIDER_MIN_BYTES: u32 = 64 * 1024;
/// Smallest observation allowance a provider must support (BRC-193 §2).
pub const PROVIDER_MIN_OBSERVATIONS: u32 = 1;

/// `{maxBytes, maxObservations, waitMs}` as in Open, Read and Batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub max_bytes: u32,
    pub max_observations: u32,
    pub wait_ms: u32,
}

impl Limits {
    /// The profile maxima (BRC-193 §2).
    pub const PROFILE_MAX: Limits = Limits {
        max_bytes: PROFILE_MAX_BYTES,
        max_observations: PROFILE_MAX_OBSERVATIONS,
        wait_ms: PROFILE_MAX_WAIT_MS,
    };

    /// Componentwise minimum.
    pub fn min(self, other: Limits) -> Limits {
        Limits {
            max_bytes: self.max_bytes.min(other.max_bytes),
            max_observations: self.max_observations.min(other.max_observations),
            wait_ms: self.wait_ms.min(other.wait_ms),
        }
    }

    /// Request limits clamped to the profile maxima; requests above them are
    /// clamped, not refused (BRC-193 §2).
    pub fn clamped(self) -> Limits {
        self.min(Limits::PROFILE_MAX)
    }

    /// Effective limits: componentwise minimum of request, provider and profile
    /// limits (BRC-193 §2). `request` comes from a parsed Open/Read (positive
    /// bytes and observations), `provider` from [`Limits::provider`], so the result
    /// keeps both positive.
    pub fn effective(request: Limits, provider: Limits) -> Limits {
        request.min(provider).clamped()
    }

    /// Validates provider configuration: within the profile maxima and at least
    /// the minimum allowance every provider must support (64 KiB, 1 observation;
    /// any wait including 0).
    pub fn provider(max_bytes: u32, max_observations: u32, wait_ms: u32) -> Result<Limits, String> {
        if max_bytes < PROVIDER_MIN_BYTES {
            return Err(format!(
                "provider maxBytes {max_bytes} is below the required minimum allowance of {PROVIDER_MIN_BYTES} bytes"
            ));
        }
        if max_bytes > PROFILE_MAX_BYTES {
            return Err(format!(
                "provider maxBytes {max_bytes} exceeds the profile maximum of {PROFILE_MAX_BYTES} bytes"
            ));
        }
        if max_observations < PROVIDER_MIN_OBSERVATIONS {
            return Err("provider maxObservations must be at least 1".to_string());
        }
        if max_observations > PROFILE_MAX_OBSERVATIONS {
            return Err(format!(
                "provider maxObservations {max_observations} exceeds the profile maximum of {PROFILE_MAX_OBSERVATIONS}"
            ));
        }
        if wait_ms > PROFILE_MAX_WAIT_MS {
            return Err(format!(
                "provider waitMs {wait_ms} exceeds the profile maximum of {PROFILE_MAX_WAIT_MS} ms"
            ));
        }
        Ok(Limits { max_bytes, max_observations, wait_ms })
    }
}
