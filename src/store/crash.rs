//! Fail points for crash tests. `OLL_CRASH_POINT=<name>:<n>` makes the process abort the n-th
//! time (1-based) execution reaches `crash_point(name)` (killed with SIGKILL). Always compiled in; when the variable
//! is unset the cost is one initialized `OnceLock` read. Names used by the store:
//! `before-write`, `after-write` (applied, not flushed), `after-flush` (durable, not published),
//! `compaction` (a compaction batch applied, not flushed), `open` (after creation/recovery).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub const ENV: &str = "OLL_CRASH_POINT";

struct Target {
    name: String,
    nth: u64,
    hits: AtomicU64,
}

fn target() -> &'static Option<Target> {
    static T: OnceLock<Option<Target>> = OnceLock::new();
    T.get_or_init(|| {
        let v = std::env::var(ENV).ok()?;
        let (name, n) = v.rsplit_once(':')?;
        Some(Target { name: name.to_string(), nth: n.parse().ok()?, hits: AtomicU64::new(0) })
    })
}

/// Abort the process here if the configured fail point and hit count match.
#[inline]
pub fn crash_point(name: &str) {
    if let Some(t) = target() {
        if t.name == name && t.hits.fetch_add(1, Ordering::SeqCst) + 1 == t.nth {
            // SIGKILL ourselves (as an operator's kill -9 would); abort() if that is unavailable.
            // Either way no destructor or flush runs.
            let pid = std::process::id().to_string();
            let _ = std::process::Command::new("kill").args(["-KILL", &pid]).status();
            std::process::abort();
        }
    }
}
