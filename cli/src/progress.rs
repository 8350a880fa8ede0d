//! Progress bars on stderr, drawn only when stderr is a terminal so that pipes,
//! logs and tests see clean output.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What a bar counts.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    Bytes,
    Records,
    Millis,
}

/// A bar of `len` units labelled `msg`; hidden unless stderr is a terminal.
pub fn bar(len: u64, msg: &'static str, unit: Unit) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let template = match unit {
        Unit::Bytes => "{msg:>8} [{bar:32}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
        Unit::Records => "{msg:>8} [{bar:32}] {human_pos}/{human_len} records eta {eta}",
        Unit::Millis => "{msg:>8} [{bar:32}] {elapsed}",
    };
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr())
        .with_style(style)
        .with_message(msg)
}
