//! Re-running this test binary as a child process for one test: for tests that need
//! a fresh process (a setting read once per process, a seccomp filter, a resource
//! limit, a process to kill). The child test is usually `#[ignore]`d so that it runs
//! only when asked for; it finds what to do in the environment the parent sets.

use std::process::Command;

/// A command that runs exactly the test `name` of this test binary (ignored or not),
/// on one thread, with its output shown. The caller adds the environment, then runs
/// it (`output()`, or `spawn()` for a child to kill).
pub fn rerun_test(name: &str) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        name,
        "--nocapture",
        "--include-ignored",
        "--test-threads=1",
    ]);
    cmd
}
