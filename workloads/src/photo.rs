//! W13's synthetic photographs: 500x375 RGB scenes of gradients, a few flat objects
//! and pixel noise, which keep a JPEG of one near a real photograph's size. Pixels
//! only: the caller encodes them (this crate depends on nothing).

/// A W13 photograph's width.
pub const PHOTO_WIDTH: u32 = 500;
/// A W13 photograph's height.
pub const PHOTO_HEIGHT: u32 = 375;

/// The RGB pixels (row-major, 3 bytes each) of photograph `i`, a pure function of `i`.
pub fn photo_pixels(i: u32) -> Vec<u8> {
    let mut state = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    // xorshift64: cheap noise, different per image.
    let mut noise = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 48) as i32 - 24
    };
    let (w, h) = (PHOTO_WIDTH, PHOTO_HEIGHT);
    let mut out = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            let object = ((x / 60 + y / 45 + i) % 5 == 0) as i32 * 60;
            let base = [
                (x * 200 / w) as i32 + object,
                (y * 200 / h) as i32,
                ((x + y + i * 7) % 256) as i32 / 2 + object,
            ];
            out.extend(base.map(|c| (c + noise()).clamp(0, 255) as u8));
        }
    }
    out
}
