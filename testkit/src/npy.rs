//! Writing `.npy` files (format 1.0): inputs for the CLI tests and the records the
//! benchmarks hand to the NumPy baseline.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// The bytes of a `.npy` v1.0 file of `shape` whose element type is the NumPy
/// `descr` (e.g. `"|u1"`, `"<i4"`), in C order unless `fortran`.
pub fn npy_bytes(descr: &str, shape: &[u64], fortran: bool, data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let tuple = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let order = if fortran { "True" } else { "False" };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {tuple}, }}");
    npy_with_header(dict, data)
}

/// A `.npy` v1.0 file with the header dict `dict` as given (tests of malformed
/// headers): magic, version, u16 header length, the dict padded with spaces so the
/// data starts at a multiple of 64 bytes and ended by a newline, then `data`.
pub fn npy_with_header(mut dict: String, data: &[u8]) -> Vec<u8> {
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out.extend(data);
    out
}

/// Writes a C-order `.npy` file (data streamed, not copied) and syncs it.
pub fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) -> io::Result<()> {
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let header = npy_bytes(descr, &shape, false, &[]);
    if header.len() > 10 + usize::from(u16::MAX) {
        return Err(io::Error::other("npy header longer than 65535 bytes"));
    }
    let mut f = BufWriter::new(File::create(path)?);
    f.write_all(&header)?;
    f.write_all(data)?;
    f.into_inner().map_err(|e| e.into_error())?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_padded_to_64_bytes_and_data_follows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("a.npy");
        write_npy(&p, "<i4", &[2, 3], &[7u8; 24]).expect("write");
        let b = std::fs::read(&p).expect("read");
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&b[10..10 + hlen]).expect("ascii");
        assert!(header.contains("'shape': (2, 3)"), "{header}");
        assert!(header.ends_with('\n'));
        assert_eq!(&b[10 + hlen..], &[7u8; 24]);
    }
}
