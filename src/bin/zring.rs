//! The `zring` command-line tool; see `zring --help` and `zring::cli`.

fn main() -> std::process::ExitCode {
    zring::cli::main()
}
