//! What can be wrong with a `.npy` file, typed: callers match on what went wrong, and
//! the messages are written once, here.

use std::fmt;
use std::path::PathBuf;

use zring_engine::{DType, SchemaError};

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
    Format { path: PathBuf, problem: FormatError },
    /// A well-formed file that zring cannot take as it is (fortran order, big-endian,
    /// structured or object dtypes, wrong integer type for offsets).
    Unsupported { path: PathBuf, problem: Unsupported },
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpyError::Io { path, what, source } => {
                write!(f, "{}: {what} failed: {source}", path.display())
            }
            NpyError::Format { path, problem } => {
                write!(f, "{}: not a valid .npy file: {problem}", path.display())
            }
            NpyError::Unsupported { path, problem } => write!(f, "{}: {problem}", path.display()),
        }
    }
}

impl std::error::Error for NpyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NpyError::Io { source, .. } => Some(source),
            // The problem is part of this error's message, not a cause behind it.
            NpyError::Format { .. } | NpyError::Unsupported { .. } => None,
        }
    }
}

/// How a `.npy` file is malformed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    /// The preamble or the header dict.
    Header(HeaderError),
    /// The shape's element count or byte size overflows.
    ShapeTooLarge { shape: Vec<u64> },
    /// The file is shorter than the header and the data the shape needs.
    Truncated {
        shape: Vec<u64>,
        dtype: DType,
        data_bytes: usize,
        header_bytes: usize,
        file_bytes: u64,
    },
    /// The file got shorter between sizing it and mapping it.
    Shrank { file_bytes: usize },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Header(h) => h.fmt(f),
            FormatError::ShapeTooLarge { shape } => write!(f, "shape {shape:?} is too large"),
            FormatError::Truncated {
                shape,
                dtype,
                data_bytes,
                header_bytes,
                file_bytes,
            } => write!(
                f,
                "the data is truncated: shape {shape:?} of {dtype} needs {data_bytes} bytes \
                 after the {header_bytes}-byte header, but the file is {file_bytes} bytes"
            ),
            FormatError::Shrank { file_bytes } => {
                write!(
                    f,
                    "the file shrank to {file_bytes} bytes while it was opened"
                )
            }
        }
    }
}

impl std::error::Error for FormatError {}

/// What is wrong with a `.npy` preamble or header ([`super::NpyHeader::parse`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeaderError {
    /// The file does not start with the magic `\x93NUMPY`.
    BadMagic,
    /// The file ends before the header length.
    TruncatedPreamble,
    /// A format version other than 1.0, 2.0 and 3.0.
    UnsupportedVersion { major: u8, minor: u8 },
    /// A header length above the cap (NumPy's own headers stay near 10 KB).
    HeaderTooLong { len: usize },
    /// The file ends inside the header of `len` bytes.
    TruncatedHeader { len: usize },
    /// The header is not UTF-8 text.
    NotUtf8,
    /// A version 1.0/2.0 header with non-ASCII text.
    NotAscii,
    /// The header is not a Python dict literal of the kind `.npy` files hold.
    Syntax { at: usize, problem: Syntax },
    /// A key every header has is missing.
    MissingKey { key: HeaderKey },
    /// A key holds a value of the wrong kind.
    BadValue { key: HeaderKey },
    /// A structured dtype (a list `descr`).
    StructuredDescr,
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::BadMagic => {
                f.write_str("the file does not start with the .npy magic \\x93NUMPY")
            }
            HeaderError::TruncatedPreamble => f.write_str("the file ends inside the preamble"),
            HeaderError::UnsupportedVersion { major, minor } => write!(
                f,
                "format version {major}.{minor} is not one of 1.0, 2.0, 3.0"
            ),
            HeaderError::HeaderTooLong { len } => {
                write!(f, "header length {len} is implausibly large")
            }
            HeaderError::TruncatedHeader { len } => {
                write!(f, "the file ends inside the {len}-byte header")
            }
            HeaderError::NotUtf8 => f.write_str("the header is not UTF-8 text"),
            HeaderError::NotAscii => f.write_str("a version 1.0/2.0 header must be ASCII"),
            HeaderError::Syntax { at, problem } => {
                write!(f, "header dict: {problem} at byte {at}")
            }
            HeaderError::MissingKey { key } => write!(f, "the header has no {:?} key", key.name()),
            HeaderError::BadValue { key } => {
                let want = match key {
                    HeaderKey::Descr => "a string",
                    HeaderKey::FortranOrder => "True or False",
                    HeaderKey::Shape => "a tuple of integers",
                };
                write!(f, "'{}' is not {want}", key.name())
            }
            HeaderError::StructuredDescr => {
                f.write_str("structured dtypes (a list descr) are not supported")
            }
        }
    }
}

impl std::error::Error for HeaderError {}

/// The keys of a `.npy` header dict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderKey {
    Descr,
    FortranOrder,
    Shape,
}

impl HeaderKey {
    /// The key as written in the header.
    pub fn name(self) -> &'static str {
        match self {
            HeaderKey::Descr => "descr",
            HeaderKey::FortranOrder => "fortran_order",
            HeaderKey::Shape => "shape",
        }
    }
}

/// How a header dict literal fails to parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Syntax {
    /// This character was expected.
    Expected(char),
    ExpectedString,
    UnterminatedString,
    /// Shape dimensions are non-negative integers.
    ExpectedInteger,
    UnterminatedList,
    UnexpectedValue,
    /// Text after the closing brace.
    TrailingText,
}

impl fmt::Display for Syntax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Syntax::Expected(c) => write!(f, "expected {c:?}"),
            Syntax::ExpectedString => f.write_str("expected a string"),
            Syntax::UnterminatedString => f.write_str("unterminated string"),
            Syntax::ExpectedInteger => f.write_str("expected a non-negative integer"),
            Syntax::UnterminatedList => f.write_str("unterminated list"),
            Syntax::UnexpectedValue => f.write_str("unexpected value"),
            Syntax::TrailingText => f.write_str("text after the closing brace"),
        }
    }
}

/// How a well-formed `.npy` file is one zring cannot take as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unsupported {
    /// The array is in Fortran (column-major) order.
    FortranOrder,
    /// The header's dtype has no zring dtype (big-endian, object, ...).
    Dtype(SchemaError),
    /// A raw-bytes dtype (`|Vn`, how ml_dtypes arrays are saved) without `--dtype`.
    RawBytesNeedDtype(SchemaError),
    /// `--dtype` for a file whose dtype is not raw bytes.
    DtypeOverride { holds: DType, given: DType },
    /// `--dtype` of another width than the file's raw-bytes elements.
    DtypeWidth { given: DType, file_width: usize },
    /// An offsets or shapes array (`what`) that does not hold integers.
    NotIntegers { what: String, dtype: DType },
    /// An offsets or shapes array (`what`) with a negative value.
    Negative { what: String, position: usize },
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::FortranOrder => f.write_str(
                "the array is in Fortran (column-major) order, which zring does not take; \
                 save it with np.save(path, np.ascontiguousarray(arr))",
            ),
            Unsupported::Dtype(e) => e.fmt(f),
            Unsupported::RawBytesNeedDtype(e) => write!(
                f,
                "{e}: raw-bytes arrays (ml_dtypes such as bfloat16 save as |V2) need \
                 --dtype NAME"
            ),
            Unsupported::DtypeOverride { holds, given } => write!(
                f,
                "the file holds {holds}; --dtype {given} may only name the type of a \
                 raw-bytes (|V) array"
            ),
            Unsupported::DtypeWidth { given, file_width } => write!(
                f,
                "--dtype {given} is {} bytes per element but the file's elements are \
                 {file_width}",
                given.itemsize()
            ),
            Unsupported::NotIntegers { what, dtype } => {
                write!(f, "{what} must be an integer array, not {dtype}")
            }
            Unsupported::Negative { what, position } => {
                write!(f, "{what} holds a negative value at position {position}")
            }
        }
    }
}

impl std::error::Error for Unsupported {}
