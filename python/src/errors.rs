//! Engine and sampler errors as Python exceptions.
//!
//! The exception classes live in `zring/_internal/errors.py` (several of them have two bases,
//! e.g. `CorruptStoreError(ZringError, ValueError)`, which `create_exception!` cannot
//! express); this module looks them up once and raises them with the engine's message.

use std::io;

use pyo3::exceptions::{PyMemoryError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyType;
use zring_engine::{Error, ManifestProblem};

/// One exception class of `zring._internal.errors`, looked up each time an error is raised.
/// Not cached in a once cell: a child forked while another thread was filling one
/// (an import can release the GIL midway) would wait forever for a filler it does
/// not have, and errors are not a hot path.
pub struct Exc {
    name: &'static str,
}

impl Exc {
    const fn new(name: &'static str) -> Self {
        Self { name }
    }

    /// The class object.
    pub fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyType>> {
        Ok(py
            .import("zring._internal.errors")?
            .getattr(self.name)?
            .cast_into::<PyType>()?)
    }

    /// An error of this class with `msg`.
    pub fn err(&self, py: Python<'_>, msg: impl Into<String>) -> PyErr {
        let msg = msg.into();
        match self.get(py) {
            Ok(ty) => PyErr::from_type(ty, msg),
            // Only if the pure-Python half of the package is missing.
            Err(e) => {
                PyRuntimeError::new_err(format!("{msg} (and zring._internal.errors failed: {e})"))
            }
        }
    }
}

pub static CORRUPT: Exc = Exc::new("CorruptStoreError");
pub static UNSUPPORTED: Exc = Exc::new("UnsupportedFormatError");
pub static SCHEMA: Exc = Exc::new("SchemaError");
pub static INVALID: Exc = Exc::new("InvalidArgumentError");
pub static INDEX: Exc = Exc::new("ZringIndexError");
pub static CLOSED: Exc = Exc::new("ClosedError");
pub static CHANGED: Exc = Exc::new("StoreChangedError");
pub static POISONED: Exc = Exc::new("WriterPoisonedError");
pub static CONFLICT: Exc = Exc::new("VersionConflictError");
pub static CODEC: Exc = Exc::new("CodecError");
pub static OS: Exc = Exc::new("ZringOSError");
pub static NOT_FOUND: Exc = Exc::new("StoreNotFoundError");
pub static PERMISSION: Exc = Exc::new("StorePermissionError");
pub static EXISTS: Exc = Exc::new("StoreExistsError");
pub static IMAGE: Exc = Exc::new("ImageDecodeError");

/// The Python exception for an engine error, carrying the engine's message.
pub fn engine(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    engine_with(py, &e, msg)
}

/// The Python exception class for engine error `e`, raised with `msg` (the loader
/// prefixes the step and stream to the engine's message).
pub fn engine_with(py: Python<'_>, e: &Error, msg: String) -> PyErr {
    match e {
        Error::Io { source, .. } | Error::RecordIo { source, .. } => os_error(py, source, msg),
        Error::Manifest {
            problem: ManifestProblem::Conflict { .. },
            ..
        } => CONFLICT.err(py, msg),
        Error::Corrupt { .. }
        | Error::CorruptRecord { .. }
        | Error::CorruptEntry { .. }
        | Error::Manifest { .. } => CORRUPT.err(py, msg),
        Error::UnsupportedVersion { .. } => UNSUPPORTED.err(py, msg),
        Error::IndexOutOfRange { .. } => INDEX.err(py, msg),
        Error::InvalidArgument(_) => INVALID.err(py, msg),
        Error::Schema(_) => SCHEMA.err(py, msg),
        Error::AlreadyExists { .. } => with_errno(py, &EXISTS, Some(EEXIST), msg),
        Error::WriterPoisoned { .. } => POISONED.err(py, msg),
        Error::Codec(_) => CODEC.err(py, msg),
        Error::OutOfMemory { .. } | Error::RecordOutOfMemory { .. } => PyMemoryError::new_err(msg),
        Error::Remote { kind, .. } => {
            let class = match kind {
                io::ErrorKind::NotFound => &NOT_FOUND,
                io::ErrorKind::PermissionDenied => &PERMISSION,
                _ => &OS,
            };
            with_errno(py, class, None, msg)
        }
        Error::ObjectChanged { .. } => CHANGED.err(py, msg),
        // Refused by policy, as the operating system refuses a file: a PermissionError.
        Error::LinkOutOfDataset { .. } => with_errno(py, &PERMISSION, None, msg),
        // The engine's error enum is non-exhaustive: new variants stay ZringErrors.
        _ => OS.err(py, msg),
    }
}

/// An `OSError` subclass chosen by the error kind, with `errno` set when known.
pub fn os_error(py: Python<'_>, source: &io::Error, msg: String) -> PyErr {
    let class = match source.kind() {
        io::ErrorKind::NotFound => &NOT_FOUND,
        io::ErrorKind::PermissionDenied => &PERMISSION,
        io::ErrorKind::AlreadyExists => &EXISTS,
        _ => &OS,
    };
    with_errno(py, class, source.raw_os_error(), msg)
}

fn with_errno(py: Python<'_>, class: &Exc, errno: Option<i32>, msg: String) -> PyErr {
    let ty = match class.get(py) {
        Ok(ty) => ty,
        Err(e) => return e,
    };
    match errno {
        // OSError(errno, strerror) fills .errno and .strerror.
        Some(n) => PyErr::from_type(ty, (n, msg)),
        None => PyErr::from_type(ty, msg),
    }
}

/// EEXIST: 17 on Linux, macOS, the BSDs and the Windows C runtime.
const EEXIST: i32 = 17;

/// The Python exception for a sampler error (all are bad arguments).
pub fn sampler(py: Python<'_>, e: zring_sampler::SamplerError) -> PyErr {
    INVALID.err(py, e.to_string())
}

/// The error for using a closed object.
pub fn closed(py: Python<'_>, what: &str) -> PyErr {
    CLOSED.err(py, format!("{what} is closed"))
}
