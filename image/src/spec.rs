//! What an image decode produces: size, crop, flip, layout, limits.

/// The default bound on a source image's pixels: 64 megapixels (an 8K photograph
/// is 33), far above any training image and far below what would exhaust memory.
pub const DEFAULT_MAX_PIXELS: u64 = 64 << 20;

/// Which part of the source image is resized to the output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Crop {
    /// The whole image, resized to the output size (aspect ratio not kept).
    Full,
    /// The largest centred region with the output's aspect ratio.
    Center,
    /// torchvision's `RandomResizedCrop`: a region whose area is a uniform fraction
    /// in `scale` of the image and whose aspect ratio (width / height) is
    /// log-uniform in `ratio`; after ten draws that do not fit, a centre crop with
    /// the ratio clamped to `ratio`.
    RandomResized {
        /// Area fraction bounds, `0 < lo <= hi <= 1` (torchvision: `(0.08, 1.0)`).
        scale: (f64, f64),
        /// Aspect ratio bounds, `0 < lo <= hi` (torchvision: `(3/4, 4/3)`).
        ratio: (f64, f64),
    },
}

impl Crop {
    /// `RandomResized` with torchvision's defaults.
    pub fn random_resized() -> Self {
        Self::RandomResized {
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
        }
    }
}

/// The order of the output's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PixelLayout {
    /// `[height, width, 3]` (NumPy's and PIL's order).
    #[default]
    Hwc,
    /// `[3, height, width]` (torch's channels-first).
    Chw,
}

/// One field's decode: the output and how to get there.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSpec {
    /// Output height in pixels.
    pub height: u32,
    /// Output width in pixels.
    pub width: u32,
    /// The region of the source that is resized to the output.
    pub crop: Crop,
    /// Whether to flip horizontally with probability 1/2 (per record and epoch).
    pub flip: bool,
    /// The output's byte order.
    pub layout: PixelLayout,
    /// Source images with more pixels are refused before they are decoded.
    pub max_pixels: u64,
    /// The seed of every random choice.
    pub seed: u64,
}

impl ImageSpec {
    /// `height x width`, centre crop, no flip, HWC, the default pixel limit, seed 0.
    pub fn new(height: u32, width: u32) -> Self {
        Self {
            height,
            width,
            crop: Crop::Center,
            flip: false,
            layout: PixelLayout::Hwc,
            max_pixels: DEFAULT_MAX_PIXELS,
            seed: 0,
        }
    }

    /// Bytes of one decoded output: `height * width * 3`.
    pub fn out_bytes(&self) -> usize {
        self.height as usize * self.width as usize * 3
    }
}
