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

pub mod header;

pub use header::NpyHeader;

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Headers longer than this are refused: NumPy itself caps them near 10 KB, and a
/// huge length is a sign of a damaged or hostile file.
const MAX_HEADER_BYTES: usize = 1 << 20;

/// Why a `.npy` file cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum NpyError {
    /// Opening, sizing or mapping the file failed.
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    /// The file is not a well-formed `.npy` file.
    Format { path: PathBuf, detail: String },
    /// A well-formed file that zring cannot take as it is (fortran order, big-endian,
    /// structured or object dtypes, wrong integer type for offsets).
    Unsupported { path: PathBuf, detail: String },
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpyError::Io { path, what, source } => {
                write!(f, "{}: {what} failed: {source}", path.display())
            }
            NpyError::Format { path, detail } => {
                write!(f, "{}: not a valid .npy file: {detail}", path.display())
            }
            NpyError::Unsupported { path, detail } => write!(f, "{}: {detail}", path.display()),
        }
    }
}

impl std::error::Error for NpyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NpyError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An opened, validated `.npy` file whose data is memory-mapped.
pub struct NpyFile {
    path: PathBuf,
    header: NpyHeader,
    dtype: DType,
    map: Option<memmap2::Mmap>,
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
        let bad = |detail: String| NpyError::Format {
            path: path.to_path_buf(),
            detail,
        };
        let unsupported = |detail: String| NpyError::Unsupported {
            path: path.to_path_buf(),
            detail,
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
        let header = NpyHeader::parse(&head).map_err(bad)?;
        if header.fortran_order {
            return Err(unsupported(
                "the array is in Fortran (column-major) order, which zring does not take; \
                 save it with np.save(path, np.ascontiguousarray(arr))"
                    .into(),
            ));
        }
        let dtype = resolve_dtype(&header.descr, dtype_override).map_err(unsupported)?;
        let data_len = header
            .elements()
            .and_then(|n| n.checked_mul(dtype.itemsize() as u64))
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| bad(format!("shape {:?} is too large", header.shape)))?;
        let need = (header.data_offset as u64).checked_add(data_len as u64);
        if need.is_none_or(|need| file_len < need) {
            return Err(bad(format!(
                "the data is truncated: shape {:?} of {} needs {data_len} bytes after the \
                 {}-byte header, but the file is {file_len} bytes",
                header.shape, dtype, header.data_offset
            )));
        }
        let map = if data_len == 0 {
            None
        } else {
            // SAFETY: the mapping is read-only and private to this process. Mapped
            // input changes only if another process rewrites the .npy file while we
            // pack it; truncation then raises SIGBUS, as with np.load(mmap_mode='r').
            // That is the documented cost of packing without a copy.
            let map =
                unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io("mapping the .npy file", e))?;
            #[cfg(unix)]
            {
                // Packing reads front to back: ask for aggressive readahead.
                let _ = map.advise(memmap2::Advice::Sequential);
            }
            Some(map)
        };
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
        match &self.map {
            Some(m) => &m[self.header.data_offset..self.header.data_offset + self.data_len],
            None => &[],
        }
    }

    /// Drops the pages of data bytes `range` (rounded inward to 1 MiB, a multiple of
    /// every common page size) from this process's resident set once they have been
    /// consumed, so packing a file larger than memory keeps a flat RSS. The pages stay
    /// in the page cache, and a later read of the range faults them back in with the
    /// same bytes. Best effort: failures are ignored.
    pub fn release(&self, range: std::ops::Range<usize>) {
        const GRAIN: usize = 1 << 20;
        let Some(map) = &self.map else { return };
        let start = (self.header.data_offset + range.start).next_multiple_of(GRAIN);
        let end = ((self.header.data_offset + range.end).min(map.len()) / GRAIN) * GRAIN;
        if start >= end {
            return;
        }
        #[cfg(unix)]
        {
            // SAFETY: the mapping is a read-only MAP_SHARED view of a file, so
            // MADV_DONTNEED only unmaps pages: any later access to the range (through
            // a slice still borrowed from `data()`, say) faults in the file's bytes
            // again, identical to before. Nothing reads different memory than it
            // would have; the range lies inside the mapping.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
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
                    detail: format!("{what} must be an integer array, not {other}"),
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
                    detail: format!("{what} holds a negative value at position {k}"),
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
fn resolve_dtype(descr: &str, dtype_override: Option<DType>) -> Result<DType, String> {
    let parsed = DType::from_numpy_descr(descr);
    match (parsed, dtype_override) {
        (Ok(d), None) => Ok(d),
        (Ok(d), Some(o)) if d == o => Ok(d),
        (Ok(d), Some(o)) => Err(format!(
            "the file holds {d}; --dtype {o} may only name the type of a raw-bytes (|V) array"
        )),
        (Err(e), None) => Err(match e {
            zring_engine::Error::Schema(
                detail @ zring_engine::SchemaError::UnsupportedDescr { .. },
            ) if descr.starts_with("|V") => format!(
                "{detail}: raw-bytes arrays (ml_dtypes such as bfloat16 save as |V2) need \
                 --dtype NAME"
            ),
            zring_engine::Error::Schema(detail) => detail.to_string(),
            e => e.to_string(),
        }),
        (Err(e), Some(o)) => {
            let width = descr
                .strip_prefix("|V")
                .and_then(|w| w.parse::<usize>().ok());
            match width {
                Some(w) if w == o.itemsize() => Ok(o),
                Some(w) => Err(format!(
                    "--dtype {o} is {} bytes per element but the file's elements are {w}",
                    o.itemsize()
                )),
                None => Err(e.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_override_applies_only_to_raw_byte_arrays_of_its_width() {
        assert_eq!(resolve_dtype("<f4", None), Ok(DType::F32));
        assert_eq!(resolve_dtype("|V2", Some(DType::BF16)), Ok(DType::BF16));
        assert!(resolve_dtype("|V2", None)
            .expect_err("needs name")
            .contains("--dtype"));
        assert!(resolve_dtype("|V2", Some(DType::F32)).is_err());
        assert!(resolve_dtype("<f4", Some(DType::I32)).is_err());
        assert!(resolve_dtype(">i4", None)
            .expect_err("big endian")
            .contains("big-endian"));
    }
}
