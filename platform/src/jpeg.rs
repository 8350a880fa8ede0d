//! JPEG decoding through libjpeg-turbo's TurboJPEG 3 API (built from source with its
//! SIMD code by turbojpeg-sys): the header, then a decode of just the region a crop
//! needs, optionally downscaled in the DCT domain.
//!
//! libjpeg-turbo was measured 1.3x as fast as the fastest pure-Rust decoder on W13's
//! images, and it alone offers the two savings a crop allows: partial decoding (the
//! IDCT, upsampling and colour conversion of the region only; the rest is only
//! entropy-decoded, as the stream is sequential) and scaled IDCTs (1/2, 1/4, 1/8). The `turbojpeg` crate's safe API
//! has no partial decoding, so this module calls the C functions itself; it is the
//! only place that does.

use std::ffi::CStr;
use std::fmt;

use turbojpeg_sys as tj;

/// Why libjpeg-turbo refused an image: its own message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JpegError {
    /// libjpeg-turbo's message (the first warning, too: warnings are errors here, so
    /// a truncated or corrupt image is never filled in with grey).
    pub message: String,
}

impl fmt::Display for JpegError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message.trim_end())
    }
}

impl std::error::Error for JpegError {}

/// A JPEG's header: what a caller needs to choose the region and the scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegHeader {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The iMCU width at full scale (8, 16 or 32), which a partial decode's left
    /// edge must be a multiple of (scaled); `None` when the image cannot be decoded
    /// partially (lossless, 16-bit or an unknown subsampling).
    pub mcu_width: Option<u32>,
    /// CMYK or YCCK: decoded as CMYK, which the caller converts.
    pub cmyk: bool,
}

/// The region of a (scaled) image to decode: `x` a multiple of the scaled iMCU width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegRegion {
    /// Left edge.
    pub x: u32,
    /// Top edge.
    pub y: u32,
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

/// A DCT-domain downscale: the output is `ceil(side / denom)` (1, 2, 4 or 8), the
/// factors libjpeg-turbo has SIMD IDCTs for.
pub type JpegScale = u32;

/// The largest number of progressive scans decoded: a hostile progressive JPEG of
/// thousands of tiny scans would otherwise take minutes (libjpeg-turbo's own fuzzers
/// use the same limit).
const SCAN_LIMIT: i32 = 500;

/// One thread's libjpeg-turbo decompressor, reused image to image.
pub struct JpegDecoder {
    handle: tj::tjhandle,
}

// SAFETY: a TurboJPEG handle is an allocation private to this value, used by one
// thread at a time (every method takes `&mut self`); libjpeg-turbo keeps no
// thread-bound state in it.
unsafe impl Send for JpegDecoder {}

impl fmt::Debug for JpegDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JpegDecoder").finish_non_exhaustive()
    }
}

impl Drop for JpegDecoder {
    fn drop(&mut self) {
        // SAFETY: `handle` came from tj3Init and is destroyed once, here.
        unsafe { tj::tj3Destroy(self.handle) }
    }
}

impl JpegDecoder {
    /// A decompressor that treats warnings (a truncated or corrupt stream) as errors.
    pub fn new() -> Result<Self, JpegError> {
        Ok(Self {
            handle: Self::init()?,
        })
    }

    fn init() -> Result<tj::tjhandle, JpegError> {
        // SAFETY: tj3Init has no preconditions; a null return is handled below.
        let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as libc::c_int) };
        if handle.is_null() {
            return Err(JpegError {
                message: "libjpeg-turbo could not allocate a decompressor".into(),
            });
        }
        for (param, value) in [
            (tj::TJPARAM_TJPARAM_STOPONWARNING, 1),
            (tj::TJPARAM_TJPARAM_SCANLIMIT, SCAN_LIMIT),
        ] {
            // SAFETY: a live handle; tj3Set validates the parameter and value.
            if unsafe { tj::tj3Set(handle, param as libc::c_int, value) } != 0 {
                // SAFETY: the handle is not used again.
                unsafe { tj::tj3Destroy(handle) };
                return Err(JpegError {
                    message: "libjpeg-turbo refused a decompressor setting".into(),
                });
            }
        }
        Ok(handle)
    }

    fn get(&mut self, param: tj::TJPARAM) -> i32 {
        // SAFETY: a live handle; an unknown parameter returns -1.
        unsafe { tj::tj3Get(self.handle, param as libc::c_int) }
    }

    /// `Ok` for a return code of 0; otherwise the handle's message, and a fresh
    /// handle: one that failed inside the header is left mid-read, and its next
    /// header would go on from there (from the previous image's bytes).
    fn check(&mut self, rc: libc::c_int) -> Result<(), JpegError> {
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: tj3GetErrorStr returns a NUL-terminated string owned by the handle,
        // valid until the next call on it; it is copied at once.
        let message = unsafe { CStr::from_ptr(tj::tj3GetErrorStr(self.handle)) }
            .to_string_lossy()
            .into_owned();
        if let Ok(fresh) = Self::init() {
            // SAFETY: the old handle is not used again; `fresh` replaces it.
            unsafe { tj::tj3Destroy(self.handle) };
            self.handle = fresh;
        }
        Err(JpegError { message })
    }

    /// Reads `bytes`' header.
    pub fn header(&mut self, bytes: &[u8]) -> Result<JpegHeader, JpegError> {
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes, only read.
        let rc = unsafe {
            tj::tj3DecompressHeader(self.handle, bytes.as_ptr(), bytes.len() as tj::size_t)
        };
        self.check(rc)?;
        let width = self.get(tj::TJPARAM_TJPARAM_JPEGWIDTH);
        let height = self.get(tj::TJPARAM_TJPARAM_JPEGHEIGHT);
        let subsamp = self.get(tj::TJPARAM_TJPARAM_SUBSAMP);
        let precision = self.get(tj::TJPARAM_TJPARAM_PRECISION);
        let lossless = self.get(tj::TJPARAM_TJPARAM_LOSSLESS);
        let colorspace = self.get(tj::TJPARAM_TJPARAM_COLORSPACE);
        if precision != 8 {
            return Err(JpegError {
                message: format!("{precision}-bit samples (only 8-bit JPEG is decoded)"),
            });
        }
        // tjMCUWidth in turbojpeg.h (a static array, so not in the bindings), indexed
        // by TJSAMP: 444, 422, 420, GRAY, 440, 411, 441.
        const MCU_WIDTH: [u32; 7] = [8, 16, 16, 8, 8, 32, 8];
        let mcu_width = usize::try_from(subsamp)
            .ok()
            .and_then(|s| MCU_WIDTH.get(s).copied())
            .filter(|_| lossless == 0);
        Ok(JpegHeader {
            width: u32::try_from(width).unwrap_or(0),
            height: u32::try_from(height).unwrap_or(0),
            mcu_width,
            cmyk: colorspace == tj::TJCS_TJCS_CMYK as i32
                || colorspace == tj::TJCS_TJCS_YCCK as i32,
        })
    }

    /// Decodes `bytes` into `out` as packed RGB (or CMYK where the header says so).
    /// `plan` is shown the header and chooses the scale and the region of the scaled
    /// image to decode (`x` a multiple of the scaled iMCU width); `out` is resized to
    /// the region's `width * height * channels` bytes, rows packed. Returns the header
    /// and the scale and region decoded: where a partial decode of a valid image is
    /// refused (a sampling layout libjpeg-turbo cannot crop), the whole image at full
    /// scale is decoded instead, so a caller must use what is returned.
    pub fn decode<E: From<JpegError>>(
        &mut self,
        bytes: &[u8],
        plan: impl FnOnce(&JpegHeader) -> Result<(JpegScale, JpegRegion), E>,
        out: &mut Vec<u8>,
    ) -> Result<(JpegHeader, JpegScale, JpegRegion), E> {
        let header = self.header(bytes)?;
        let (scale, region) = plan(&header)?;
        let whole = JpegRegion {
            x: 0,
            y: 0,
            width: header.width,
            height: header.height,
        };
        if (scale, region) == (1, whole) || header.mcu_width.is_none() {
            self.decode_region(bytes, &header, 1, whole, out)?;
            return Ok((header, 1, whole));
        }
        match self.decode_region(bytes, &header, scale, region, out) {
            Ok(()) => Ok((header, scale, region)),
            Err(partial) => {
                // A damaged image fails the same way whole; a valid one decodes.
                self.header(bytes)?;
                self.decode_region(bytes, &header, 1, whole, out)
                    .map_err(|_| partial)?;
                Ok((header, 1, whole))
            }
        }
    }

    /// Decodes `region` of the image scaled by `1/scale` into `out`. The header of
    /// `bytes` must be the last one this handle read: tj3SetCroppingRegion checks the
    /// region against it. tj3Decompress8 then reads `bytes` itself, header included.
    fn decode_region(
        &mut self,
        bytes: &[u8],
        header: &JpegHeader,
        scale: JpegScale,
        region: JpegRegion,
        out: &mut Vec<u8>,
    ) -> Result<(), JpegError> {
        let fail = |message: String| Err(JpegError { message });
        let channels: u64 = if header.cmyk { 4 } else { 3 };
        let scaled = |side: u32| side.div_ceil(scale);
        let inside = region.width > 0
            && region.height > 0
            && u64::from(region.x) + u64::from(region.width) <= u64::from(scaled(header.width))
            && u64::from(region.y) + u64::from(region.height) <= u64::from(scaled(header.height));
        let (true, true, Ok(pitch)) = (
            inside,
            matches!(scale, 1 | 2 | 4 | 8),
            i32::try_from(u64::from(region.width) * channels),
        ) else {
            return fail(format!(
                "cannot decode {region:?} of a {}x{} image at 1/{scale}",
                header.width, header.height
            ));
        };
        let len = u64::from(region.width) * u64::from(region.height) * channels;
        let Ok(len) = usize::try_from(len) else {
            return fail(format!("{region:?} does not fit in memory"));
        };
        out.resize(len, 0);
        let factor = tj::tjscalingfactor {
            num: 1,
            denom: scale as libc::c_int,
        };
        // SAFETY: a live handle and a plain struct passed by value.
        let rc = unsafe { tj::tj3SetScalingFactor(self.handle, factor) };
        self.check(rc)?;
        let all = region.x == 0
            && region.y == 0
            && region.width == scaled(header.width)
            && region.height == scaled(header.height);
        // All zeros: the whole (scaled) image. The sides fit in i32 (checked above).
        let crop = if all {
            tj::tjregion {
                x: 0,
                y: 0,
                w: 0,
                h: 0,
            }
        } else {
            tj::tjregion {
                x: region.x as libc::c_int,
                y: region.y as libc::c_int,
                w: region.width as libc::c_int,
                h: region.height as libc::c_int,
            }
        };
        // SAFETY: a live handle; tj3SetCroppingRegion checks the region against the
        // header read last and the scale, and refuses one outside the image.
        let rc = unsafe { tj::tj3SetCroppingRegion(self.handle, crop) };
        self.check(rc)?;
        let format = if header.cmyk {
            tj::TJPF_TJPF_CMYK
        } else {
            tj::TJPF_TJPF_RGB
        };
        // SAFETY: `out` holds exactly `region.height` rows of `pitch` bytes, which is
        // what tj3Decompress8 writes for this scale and region: the cropping region's
        // rows (or every row of the scaled image when it is the whole image), each
        // `region.width` pixels of `channels` bytes, `pitch` apart. It reads only
        // `bytes`, borrowed for the call.
        let rc = unsafe {
            tj::tj3Decompress8(
                self.handle,
                bytes.as_ptr(),
                bytes.len() as tj::size_t,
                out.as_mut_ptr(),
                pitch,
                format as libc::c_int,
            )
        };
        self.check(rc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Plan = Result<(JpegScale, JpegRegion), JpegError>;

    /// A plan for the whole image at full scale.
    fn whole(h: &JpegHeader) -> Plan {
        at(1, 0, 0, h.width, h.height)(h)
    }

    /// A plan for `width` x `height` at (`x`, `y`) of the image scaled by 1/`scale`.
    fn at(
        scale: JpegScale,
        x: u32,
        y: u32,
        width: u32,
        height: u32,
    ) -> impl Fn(&JpegHeader) -> Plan {
        move |_| {
            let region = JpegRegion {
                x,
                y,
                width,
                height,
            };
            Ok((scale, region))
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_crash() {
        let mut d = JpegDecoder::new().expect("a decompressor");
        let err = d
            .header(b"\xff\xd8\xff not a jpeg")
            .expect_err("garbage is refused");
        assert!(!err.message.is_empty());
        let mut out = Vec::new();
        assert!(d.decode(b"\xff\xd8", whole, &mut out).is_err());
        assert!(d.decode(b"", whole, &mut out).is_err());
    }

    /// A 32x8 baseline JPEG (4:2:0, quality 75): black, and light grey on the right.
    fn tiny_jpeg() -> Vec<u8> {
        // Made once with Pillow: Image.new("RGB", (32, 8)) with (16, 0, 32, 8)
        // pasted (200, 200, 200), saved as JPEG.
        include_bytes!("../tests/data/tiny.jpg").to_vec()
    }

    #[test]
    fn a_failed_header_does_not_spoil_the_next_image() {
        let good = tiny_jpeg();
        let mut d = JpegDecoder::new().expect("a decompressor");
        let mut first = Vec::new();
        d.decode(&good, whole, &mut first)
            .expect("a good image decodes");
        assert_eq!(first.len(), 32 * 8 * 3);
        // Cut inside the header: the decoder stops mid-read.
        assert!(d.decode(&good[..40], whole, &mut Vec::new()).is_err());
        let mut again = Vec::new();
        d.decode(&good, whole, &mut again)
            .expect("and again after a failure");
        assert_eq!(first, again);
        // The right half only, at 1/2 (the scaled iMCU is 8 wide): 8x4 pixels of
        // the light grey.
        let (_, scale, region) = d
            .decode(&good, at(2, 8, 0, 8, 4), &mut again)
            .expect("a region decodes");
        assert_eq!((scale, region.width, region.height), (2, 8, 4));
        assert_eq!(again.len(), 8 * 4 * 3);
        assert!(again.iter().all(|&v| v.abs_diff(200) <= 8), "{again:?}");
        // A left edge off the iMCU grid is refused by libjpeg-turbo: the whole image
        // is decoded instead, and said so.
        let (_, scale, region) = d
            .decode(&good, at(2, 4, 0, 4, 4), &mut again)
            .expect("falls back to the whole image");
        assert_eq!((scale, region.width, region.height), (1, 32, 8));
        assert_eq!(again, first);
    }
}
