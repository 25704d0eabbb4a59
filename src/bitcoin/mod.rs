//! Bitcoin formats both halves of the package read: raw transactions, BEEF bundles
//! (BRC-62 V1, BRC-96 V2, BRC-95 Atomic) and the BUMP Merkle paths inside them (BRC-74).
//!
//! Nothing here trusts a name: a txid is always computed from the bytes it names.
//! Parsers are complete and bounded (every length is checked against what is left
//! before anything is allocated) and fail with [`Error`], never a panic.
//!
//! - [`tx`]: raw transactions (txid, ordered inputs, outputs, locktime).
//! - [`beef`]: BEEF bundles and the transactions, txid-only references and BUMPs they carry.
//! - [`merkle`]: the root a BUMP computes for a txid.
//! - [`script`]: the script interpreter and signature digests.
//! - [`verify`]: native evidence verification (the verdict of `@bsv/sdk`'s `Transaction.verify`).

pub mod beef;
pub mod merkle;
pub mod script;
pub mod tx;
pub mod verify;

/// Why bytes are not the format they claim to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// Malformed, truncated or inconsistent bytes.
    Invalid(String),
    /// Well formed so far, but over a size bound (BRC-192 §6: never reported as invalid).
    Limited(String),
}

impl Error {
    pub fn invalid(m: impl Into<String>) -> Error {
        Error::Invalid(m.into())
    }
    pub fn message(&self) -> &str {
        match self {
            Error::Invalid(m) | Error::Limited(m) => m,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}
