//! `Mode::Sequential`: position `p` reads record `p mod N`.

/// Writes `(p0 + i) mod n` for each slot.
///
/// One `u128` remainder per call keeps it exact for every step; after that a
/// compare-and-reset (a conditional move) replaces the per-index division.
pub(crate) fn fill(n: u64, p0: u128, out: &mut [u64]) {
    // `cur < n <= u64::MAX`, so `cur + 1` cannot overflow.
    let mut cur = (p0 % u128::from(n)) as u64;
    for slot in out {
        *slot = cur;
        cur += 1;
        if cur == n {
            cur = 0;
        }
    }
}
