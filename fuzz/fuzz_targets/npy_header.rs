//! The `.npy` reader of `zring pack`: any bytes as the header, and as a whole file.
//! A header that parses is self-consistent, and a file that opens holds exactly the
//! data its header describes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zring_cli::npy::header::NpyHeader;
use zring_cli::npy::NpyFile;
use zring_fuzz::scratch;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = NpyHeader::parse(data) {
        assert!(
            h.data_offset <= data.len(),
            "data offset past the bytes parsed"
        );
        assert!(matches!(h.version.0, 1..=3));
    }
    let path = scratch("header.npy");
    std::fs::write(&path, data).expect("writing the input file");
    if let Ok(file) = NpyFile::open(&path, None) {
        let h = file.header();
        let want = h
            .elements()
            .and_then(|n| n.checked_mul(file.dtype().itemsize() as u64));
        assert_eq!(
            want,
            Some(file.data().len() as u64),
            "data length != header"
        );
        assert_eq!(file.shape(), &h.shape[..]);
        if file.data().len() <= 1 << 20 {
            let _ = file.to_u64_vec("the input");
        }
    }
});
