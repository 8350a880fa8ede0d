//! Skipping a test whose OS feature is missing here, never silently.
//!
//! io_uring can be blocked (a container's seccomp profile) and O_DIRECT refused (tmpfs).
//! A test that needs one skips with a message saying why; with `ZRING_REQUIRE_URING=1`
//! (which `scripts/test.sh` sets on Linux) the same situation fails the test instead,
//! so io_uring coverage cannot vanish from CI unnoticed.

/// Whether io_uring and O_DIRECT must work in this run (`ZRING_REQUIRE_URING=1`).
pub fn uring_required() -> bool {
    std::env::var("ZRING_REQUIRE_URING").is_ok_and(|v| v == "1")
}

/// `true` when `what` can be tested (`unavailable` is `None`); otherwise prints why
/// the caller skips and returns `false`, or panics when the feature is required.
pub fn require_uring(what: &str, unavailable: Option<&str>) -> bool {
    let Some(why) = unavailable else {
        return true;
    };
    if uring_required() {
        panic!("{what} is unavailable ({why}) but ZRING_REQUIRE_URING=1 requires it");
    }
    eprintln!(
        "skipped {what}: unavailable here ({why}); set ZRING_REQUIRE_URING=1 to fail instead"
    );
    false
}
