//! Reading NumPy `.npy` files: the header is parsed here ([`header`], no Python),
//! the data is memory-mapped and handed out as little-endian bytes in C order.
//!
//! Format (numpy.lib.format): the magic `\x93NUMPY`, a major and minor version byte,
//! the header length (u16 LE for 1.0, u32 LE for 2.0 and 3.0), then the header: a
//! Python dict literal such as `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`
//! (ASCII for 1.0/2.0, UTF-8 for 3.0), padded with spaces and a newline. The data
//! follows immediately.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use zring_engine::DType;
use zring_platform::Mapping;

mod error;
pub mod header;

pub use error::{FormatError, HeaderError, HeaderKey, NpyError, Syntax, Unsupported};
pub use header::NpyHeader;

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Headers longer than this are refused: NumPy itself caps them near 10 KB, and a
/// huge length is a sign of a damaged or hostile file.
const MAX_HEADER_BYTES: usize = 1 << 20;

/// An opened, validated `.npy` file whose data is memory-mapped.
pub struct NpyFile {
    path: PathBuf,
    header: NpyHeader,
    dtype: DType,
    map: Mapping,
    data_len: usize,
}

impl NpyFile {
    /// Opens `path`, parses and checks its header, and maps its data. The dtype comes
    /// from the header's descr unless `dtype_override` names one of the same width
    /// (for ml_dtypes types, which NumPy writes as `|V1`/`|V2`).
    pub fn open(path: &Path, dtype_override: Option<DType>) -> Result<Self, NpyError> {
        let io = |what, source| NpyError::Io {
            path: path.to_path_buf(),
            what,
            source,
        };
        let bad = |problem: FormatError| NpyError::Format {
            path: path.to_path_buf(),
            problem,
        };
        let unsupported = |problem: Unsupported| NpyError::Unsupported {
            path: path.to_path_buf(),
            problem,
        };
        // Not File::open: a FIFO would block it forever.
        let mut file =
            zring_platform::open_regular(path).map_err(|e| io("opening the .npy file", e))?;
        let file_len = file
            .metadata()
            .map_err(|e| io("reading the .npy file's size", e))?
            .len();
        let mut head = Vec::new();
        (&mut file)
            .take(MAX_HEADER_BYTES as u64 + 12)
            .read_to_end(&mut head)
            .map_err(|e| io("reading the .npy header", e))?;
        let header = NpyHeader::parse(&head).map_err(|h| bad(FormatError::Header(h)))?;
        if header.fortran_order {
            return Err(unsupported(Unsupported::FortranOrder));
        }
        let dtype = resolve_dtype(&header.descr, dtype_override).map_err(unsupported)?;
        let data_len = header
            .elements()
            .and_then(|n| n.checked_mul(dtype.itemsize() as u64))
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| {
                bad(FormatError::ShapeTooLarge {
                    shape: header.shape.clone(),
                })
            })?;
        let need = (header.data_offset as u64).checked_add(data_len as u64);
        if need.is_none_or(|need| file_len < need) {
            return Err(bad(FormatError::Truncated {
                shape: header.shape.clone(),
                dtype,
                data_bytes: data_len,
                header_bytes: header.data_offset,
                file_bytes: file_len,
            }));
        }
        // Mapped, not copied: the data is read in place (see `Mapping` for what that
        // relies on, a file nobody rewrites while it is packed).
        let map = Mapping::new(&file).map_err(|e| io("mapping the .npy file", e))?;
        // Packing reads front to back: ask for aggressive readahead.
        map.advise_streaming();
        if need.is_none_or(|need| (map.bytes().len() as u64) < need) {
            return Err(bad(FormatError::Shrank {
                file_bytes: map.bytes().len(),
            }));
        }
        Ok(Self {
            path: path.to_path_buf(),
            header,
            dtype,
            map,
            data_len,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The parsed header.
    pub fn header(&self) -> &NpyHeader {
        &self.header
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The array's shape.
    pub fn shape(&self) -> &[u64] {
        &self.header.shape
    }

    /// The array data, C order, little-endian.
    pub fn data(&self) -> &[u8] {
        let start = self.header.data_offset;
        // The file was checked to hold the header and all the data when it was opened.
        self.map
            .bytes()
            .get(start..start + self.data_len)
            .unwrap_or(&[])
    }

    /// Drops the pages of data bytes `range` (rounded inward to 1 MiB, a multiple of
    /// every common page size) from this process's resident set once they have been
    /// consumed, so packing a file larger than memory keeps a flat RSS. The pages stay
    /// in the page cache, and a later read of the range faults them back in with the
    /// same bytes (see [`Mapping::release`]). Best effort.
    pub fn release(&self, range: std::ops::Range<usize>) {
        const GRAIN: usize = 1 << 20;
        let start = (self.header.data_offset + range.start).next_multiple_of(GRAIN);
        let end = (self.header.data_offset + range.end) / GRAIN * GRAIN;
        if start < end {
            self.map.release(start..end);
        }
    }

    /// The elements of an integer array as u64 (negative values are an error naming
    /// the position), for offsets and shapes arrays.
    pub fn to_u64_vec(&self, what: &str) -> Result<Vec<u64>, NpyError> {
        let d = self.data();
        let signed = matches!(self.dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
        let width = match self.dtype {
            DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::U32 | DType::I32 => 4,
            DType::U64 | DType::I64 => 8,
            other => {
                return Err(NpyError::Unsupported {
                    path: self.path.clone(),
                    problem: Unsupported::NotIntegers {
                        what: what.to_string(),
                        dtype: other,
                    },
                })
            }
        };
        let mut out = Vec::with_capacity(d.len() / width);
        for (k, c) in d.chunks_exact(width).enumerate() {
            let mut b = [0u8; 8];
            b[..width].copy_from_slice(c);
            let negative = signed && c[width - 1] & 0x80 != 0;
            if negative {
                return Err(NpyError::Unsupported {
                    path: self.path.clone(),
                    problem: Unsupported::Negative {
                        what: what.to_string(),
                        position: k,
                    },
                });
            }
            out.push(u64::from_le_bytes(b));
        }
        Ok(out)
    }
}

impl fmt::Debug for NpyFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NpyFile")
            .field("path", &self.path)
            .field("header", &self.header)
            .field("dtype", &self.dtype)
            .finish()
    }
}

/// The dtype of a descr, or the override where the descr allows it.
fn resolve_dtype(descr: &str, dtype_override: Option<DType>) -> Result<DType, Unsupported> {
    let parsed = DType::from_numpy_descr(descr).map_err(|e| match e {
        zring_engine::Error::Schema(s) => s,
        // from_numpy_descr reports nothing else; should it ever, the descr is what
        // zring cannot take.
        _ => zring_engine::SchemaError::UnsupportedDescr {
            descr: descr.to_string(),
        },
    });
    let raw_width = descr
        .strip_prefix("|V")
        .and_then(|w| w.parse::<usize>().ok());
    match (parsed, dtype_override) {
        (Ok(d), None) => Ok(d),
        (Ok(d), Some(o)) if d == o => Ok(d),
        (Ok(holds), Some(given)) => Err(Unsupported::DtypeOverride { holds, given }),
        (Err(e), None) if raw_width.is_some() => Err(Unsupported::RawBytesNeedDtype(e)),
        (Err(e), None) => Err(Unsupported::Dtype(e)),
        (Err(e), Some(given)) => match raw_width {
            Some(w) if w == given.itemsize() => Ok(given),
            Some(file_width) => Err(Unsupported::DtypeWidth { given, file_width }),
            None => Err(Unsupported::Dtype(e)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zring_engine::SchemaError;

    #[test]
    fn dtype_override_applies_only_to_raw_byte_arrays_of_its_width() {
        assert_eq!(resolve_dtype("<f4", None), Ok(DType::F32));
        assert_eq!(resolve_dtype("|V2", Some(DType::BF16)), Ok(DType::BF16));
        let v2 = SchemaError::UnsupportedDescr {
            descr: "|V2".into(),
        };
        assert_eq!(
            resolve_dtype("|V2", None),
            Err(Unsupported::RawBytesNeedDtype(v2))
        );
        assert!(resolve_dtype("|V2", None)
            .expect_err("needs a name")
            .to_string()
            .contains("--dtype NAME"));
        assert_eq!(
            resolve_dtype("|V2", Some(DType::F32)),
            Err(Unsupported::DtypeWidth {
                given: DType::F32,
                file_width: 2
            })
        );
        assert_eq!(
            resolve_dtype("<f4", Some(DType::I32)),
            Err(Unsupported::DtypeOverride {
                holds: DType::F32,
                given: DType::I32
            })
        );
        let big = SchemaError::BigEndian {
            descr: ">i4".into(),
        };
        assert_eq!(
            resolve_dtype(">i4", None),
            Err(Unsupported::Dtype(big.clone()))
        );
        assert_eq!(
            resolve_dtype(">i4", Some(DType::I32)),
            Err(Unsupported::Dtype(big))
        );
    }
}
