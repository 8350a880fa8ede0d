//! Writing results to stdout and formatting figures with their units.

use std::io::{ErrorKind, Write};

/// Writes `text` to stdout. A closed pipe (`zring info x | head -1`) is not an error
/// worth a message, so it is ignored; other failures are returned.
pub fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// Bytes per MiB, for throughput figures (`MiB/s` is binary, like fio's).
pub const MIB: f64 = (1u64 << 20) as f64;

/// `1234567` as `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (k, c) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte size in the largest binary unit that keeps it at least 1 (`147.0 KiB`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A rate with thousands separators and one decimal (`7,580.2`).
pub fn rate(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    let whole = x.trunc() as u64;
    let tenth = ((x - x.trunc()) * 10.0).round() as u64;
    let (whole, tenth) = if tenth == 10 {
        (whole + 1, 0)
    } else {
        (whole, tenth)
    };
    format!("{}.{tenth}", count(whole))
}

/// A shape as `[3, 224, 224]` (`[]` for scalars).
pub fn shape(dims: &[u64]) -> String {
    let parts: Vec<String> = dims.iter().map(u64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_carry_separators_and_units() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(150_528), "147.0 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(rate(7580.24), "7,580.2");
        assert_eq!(rate(9.96), "10.0");
        assert_eq!(shape(&[]), "[]");
        assert_eq!(shape(&[3, 224, 224]), "[3, 224, 224]");
    }
}
