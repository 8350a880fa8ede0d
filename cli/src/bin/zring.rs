//! The `zring` command-line tool; see `zring --help`. The command itself lives in the
//! library (`zring_cli::run_cli`) so that the Python package's `zring` command runs
//! the same code.
#![deny(unsafe_code)]

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(zring_cli::run_cli(std::env::args_os()))
}
