//! Capability selection headers (BRC-194 §1).
//!
//! Every packet-endpoint request except discovery carries the digest of the
//! manifest it selected and the exact profile IRI; responses echo both.
//! The server checks them before admitting, charging or disclosing anything.
use super::{is_hex32, ErrorCode, ManifestError};

pub const CAPABILITY_HEADER: &str = "x-bsv-overlay-capability";
pub const PROFILE_HEADER: &str = "x-bsv-overlay-profile";
/// BRC-193 §1 profile IRI.
pub use crate::wire::limits::PROFILE as LOOKUP_LIVE_PROFILE;

/// Checks the two selection header values of one request.
///
/// * `accepted_digests`: capability digests this request may name. For an open
///   that is the currently published manifest; for a request on an established
///   session it is the digest recorded at open (BRC-194 §1 lets a session keep
///   its opening manifest even after discovery changes).
/// * `offered_profiles`: profile IRIs the selected service (or session) offers.
///
/// Outcomes, checked in this order (our decision where the spec leaves one):
/// 1. a header absent, or a capability value that is not Hex32 -> `invalid`
///    (the request is malformed: both headers are mandatory);
/// 2. a well-formed digest of some other manifest -> `context-changed`
///    (stale or incompatible selection; the client must rediscover);
/// 3. the current manifest but a profile it does not offer for this service
///    -> `unsupported`.
pub fn selection_check(
    accepted_digests: &[&str],
    offered_profiles: &[&str],
    capability: Option<&str>,
    profile: Option<&str>,
) -> Result<(), ManifestError> {
    let capability = match capability {
        Some(c) if is_hex32(c) => c,
        Some(_) => return Err(invalid(format!("{CAPABILITY_HEADER} must be a lowercase Hex32 digest"))),
        None => return Err(invalid(format!("missing {CAPABILITY_HEADER}"))),
    };
    let profile = match profile {
        Some(p) if !p.is_empty() => p,
        _ => return Err(invalid(format!("missing {PROFILE_HEADER}"))),
    };
    if !accepted_digests.contains(&capability) {
        return Err(ManifestError::new(
            ErrorCode::ContextChanged,
            "the selected capability manifest is not current; fetch the capabilities again",
        ));
    }
    if !offered_profiles.contains(&profile) {
        return Err(ManifestError::new(
            ErrorCode::Unsupported,
            "the selected profile is not offered by this service",
        ));
    }
    Ok(())
}

/// Response headers echoing the selection (BRC-194 §1).
pub fn selection_echo(capability: &str, profile: &str) -> [(&'static str, String); 2] {
    [(CAPABILITY_HEADER, capability.to_string()), (PROFILE_HEADER, profile.to_string())]
}

fn invalid(message: String) -> ManifestError {
    ManifestError::new(ErrorCode::Invalid, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CURRENT: &str = "abababababababababababababababababababababababababababababababab";
    const OLD: &str = "2222222222222222222222222222222222222222222222222222222222222222";

    fn code(r: Result<(), ManifestError>) -> Option<&'static str> {
        r.err().map(|e| e.code.as_str())
    }

    #[test]
    fn outcomes() {
        let ok = selection_check(&[CURRENT], &[LOOKUP_LIVE_PROFILE], Some(CURRENT), Some(LOOKUP_LIVE_PROFILE));
        assert_eq!(ok, Ok(()));
        let c = |cap: Option<&str>, prof: Option<&str>| code(selection_check(&[CURRENT], &[LOOKUP_LIVE_PROFILE], cap, prof));
        assert_eq!(c(Some(OLD), Some(LOOKUP_LIVE_PROFILE)), Some("context-changed"));
        assert_eq!(c(Some(CURRENT), Some("https://bsv.brc.dev/overlays/0195#paid-lookup-v1")), Some("unsupported"));
        assert_eq!(c(Some(CURRENT), Some("overlays/0193#lookup-live-v1")), Some("unsupported"));
        assert_eq!(c(None, Some(LOOKUP_LIVE_PROFILE)), Some("invalid"));
        assert_eq!(c(Some(CURRENT), None), Some("invalid"));
        assert_eq!(c(Some(&CURRENT.to_uppercase()), Some(LOOKUP_LIVE_PROFILE)), Some("invalid"));
        assert_eq!(c(Some("abc"), Some(LOOKUP_LIVE_PROFILE)), Some("invalid"));
        // A stale digest wins over an unknown profile: the client must rediscover first.
        assert_eq!(c(Some(OLD), Some("x")), Some("context-changed"));
        // A session keeps the digest it was opened with.
        assert_eq!(selection_check(&[OLD], &[LOOKUP_LIVE_PROFILE], Some(OLD), Some(LOOKUP_LIVE_PROFILE)), Ok(()));
    }
}
