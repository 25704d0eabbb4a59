//! The per-principal session cap (BRC-193 §8 "Providers SHOULD rate-limit open
//! sessions"): only active sessions count. A close, a revocation or an expiry frees a
//! slot at once, however many ended sessions of the principal are still retained.

mod session_common;

use overlay_lookup_live::session::Caps;
use serde_json::{json, Value};

use session_common::{error_code, world_with, World};

/// Opens a session of `who`; the parsed first batch, or the error code.
fn open(w: &World, who: &str, n: u32) -> Result<Value, String> {
    let caller = overlay_lookup_live::session::Caller { principal: who.to_string(), authenticated: true };
    let body = serde_json::to_vec(&json!({
        "version": 1, "requestId": format!("cap-request-{who}-{n:08}"), "service": "svc", "query": {},
        "limits": {"maxBytes": 65536, "maxObservations": 10, "waitMs": 0}
    }))
    .unwrap();
    let r = w.provider.open(&body, &caller, "public", &json!({"where": {"all": true}}));
    if r.status == 200 {
        Ok(serde_json::from_slice(&r.body).unwrap())
    } else {
        Err(error_code(&r))
    }
}

fn close(w: &World, who: &str, session: &Value) {
    let caller = overlay_lookup_live::session::Caller { principal: who.to_string(), authenticated: true };
    let body = serde_json::to_vec(&json!({"version": 1, "session": session["session"]})).unwrap();
    assert_eq!(w.provider.close(&body, &caller).status, 200);
}

#[test]
fn only_active_sessions_count_against_the_cap() {
    let w = world_with(Caps { max_sessions_per_principal: 2, ..Caps::default() });
    let mut n = 0;
    let mut next = |who: &str| {
        n += 1;
        open(&w, who, n)
    };
    // Many ended sessions stay retained (until their replay deadline) and do not count.
    for _ in 0..300 {
        let s = next("p").unwrap();
        close(&w, "p", &s);
    }
    let a = next("p").unwrap();
    let b = next("p").unwrap();
    assert_eq!(next("p").unwrap_err(), "unavailable", "a third active session is over the cap");
    assert!(next("q").is_ok(), "another principal has slots of its own");

    close(&w, "p", &a);
    let _c = next("p").expect("a close frees a slot");
    assert_eq!(next("p").unwrap_err(), "unavailable");

    assert!(w.provider.revoke_session(b["session"].as_str().unwrap()).unwrap());
    let _d = next("p").expect("a revocation frees a slot");
    assert_eq!(next("p").unwrap_err(), "unavailable");

    // Past expiresAt (sessionSeconds is 600 here) both remaining sessions have expired.
    w.provider.advance_clock_ms(601_000);
    assert!(next("p").is_ok(), "expiry frees slots");
    assert!(next("p").is_ok());
    assert_eq!(next("p").unwrap_err(), "unavailable");
}
