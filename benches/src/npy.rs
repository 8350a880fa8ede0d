//! Writing `.npy` files (format 1.0) so the NumPy baseline reads the very records the
//! Rust benchmarks use.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Writes a C-order array of `shape` whose element type is the NumPy `descr`
/// (e.g. `"|u1"`, `"<i4"`, `"<i8"`) and whose bytes are `data`.
pub fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) -> io::Result<()> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    // Magic (6) + version (2) + length (2) + header, padded to 64 bytes, ending in \n.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let header_len = u16::try_from(header.len())
        .map_err(|_| io::Error::other("npy header longer than 65535 bytes"))?;
    let mut f = BufWriter::new(File::create(path)?);
    f.write_all(b"\x93NUMPY\x01\x00")?;
    f.write_all(&header_len.to_le_bytes())?;
    f.write_all(header.as_bytes())?;
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
