//! What a poisoned writer keeps of its first error. After a failure the writer
//! refuses every further call with `Error::WriterPoisoned`, which carries a copy of
//! that first error while the caller got the original. Errors are not `Clone`
//! (`io::Error` is not), so the copy is made here, variant by variant.

use crate::error::{AllocFailure, CodecError, Error, RecordProblem, SharedError};

/// A copy of `e` for the writer to keep while the caller gets `e` (errors are not
/// `Clone` because `io::Error` is not): the same variant with the same fields, every
/// problem and detail cloned, and the first error a poisoned writer reports shared.
/// An OS error is copied by its error number; an `io::Error` made in process (and a
/// remote error's source) is moved into a [`SharedError`] that `e` and the copy both
/// hold, so the copy's `source()` chain reaches the original error object.
pub(super) fn share(e: &mut Error) -> Error {
    let io = share_io;
    match e {
        Error::Io { path, what, source } => Error::io(path.clone(), what, io(source)),
        Error::Corrupt { path, problem } => Error::corrupt(path.clone(), problem.clone()),
        Error::CorruptRecord {
            path,
            index,
            problem,
        } => Error::record(path.clone(), *index, share_record_problem(problem)),
        Error::CorruptEntry {
            path,
            index,
            source,
        } => Error::CorruptEntry {
            path: path.clone(),
            index: *index,
            source: source.clone(),
        },
        Error::FileChanged {
            path,
            len,
            expected,
        } => Error::FileChanged {
            path: path.clone(),
            len: *len,
            expected: *expected,
        },
        Error::WorkerStopped => Error::WorkerStopped,
        Error::Interrupted => Error::Interrupted,
        Error::UnsupportedVersion {
            path,
            found_major,
            found_minor,
        } => Error::UnsupportedVersion {
            path: path.clone(),
            found_major: *found_major,
            found_minor: *found_minor,
        },
        Error::Manifest { path, problem } => Error::manifest(path.clone(), problem.clone()),
        Error::IndexOutOfRange { path, index, len } => Error::IndexOutOfRange {
            path: path.clone(),
            index: *index,
            len: *len,
        },
        Error::AlreadyExists { path } => Error::AlreadyExists { path: path.clone() },
        Error::InvalidArgument(d) => Error::InvalidArgument(d.clone()),
        Error::Schema(d) => Error::Schema(d.clone()),
        Error::Codec(d) => Error::Codec(match d {
            CodecError::Compressor { level, source } => CodecError::Compressor {
                level: *level,
                source: io(source),
            },
            CodecError::Decompressor { dict, source } => CodecError::Decompressor {
                dict: *dict,
                source: io(source),
            },
            CodecError::DictTraining {
                samples,
                bytes,
                source,
            } => CodecError::DictTraining {
                samples: *samples,
                bytes: *bytes,
                source: io(source),
            },
        }),
        Error::Internal(d) => Error::Internal(d.clone()),
        Error::OutOfMemory {
            what,
            bytes,
            path,
            source,
        } => Error::OutOfMemory {
            what: what.clone(),
            bytes: *bytes,
            path: path.clone(),
            source: source.as_mut().map(|s| match s {
                AllocFailure::Reserve(r) => AllocFailure::Reserve(r.clone()),
                AllocFailure::Os(err) => AllocFailure::Os(io(err)),
            }),
        },
        Error::WriterPoisoned { path, first_error } => Error::WriterPoisoned {
            path: path.clone(),
            first_error: first_error.clone(),
        },
        Error::Remote {
            url,
            what,
            kind,
            source,
        } => Error::Remote {
            url: url.clone(),
            what,
            kind: *kind,
            source: share_boxed(source),
        },
        Error::ObjectChanged { url, change } => Error::ObjectChanged {
            url: url.clone(),
            change: change.clone(),
        },
        Error::RecordIo {
            path,
            index,
            source,
        } => Error::RecordIo {
            path: path.clone(),
            index: *index,
            source: io(source),
        },
        Error::RecordOutOfMemory { path, index, bytes } => Error::RecordOutOfMemory {
            path: path.clone(),
            index: *index,
            bytes: *bytes,
        },
        Error::LinkOutOfDataset {
            path,
            target,
            dataset,
        } => Error::LinkOutOfDataset {
            path: path.clone(),
            target: target.clone(),
            dataset: dataset.clone(),
        },
    }
}

/// An OS error with the same number; any other `io::Error` moved into a
/// [`SharedError`] that `s` (same kind, same text) and the returned error both hold.
fn share_io(s: &mut std::io::Error) -> std::io::Error {
    if let Some(code) = s.raw_os_error() {
        return std::io::Error::from_raw_os_error(code);
    }
    let kind = s.kind();
    let shared = match s.get_ref().and_then(|e| e.downcast_ref::<SharedError>()) {
        Some(shared) => shared.clone(),
        None => {
            let mut slot: Box<dyn std::error::Error + Send + Sync> =
                Box::new(std::mem::replace(s, std::io::Error::from(kind)));
            let shared = share_slot(&mut slot);
            *s = std::io::Error::new(kind, slot);
            shared
        }
    };
    std::io::Error::new(kind, shared)
}

/// A remote error's source moved into a [`SharedError`] that `s` and the returned
/// source both hold.
fn share_boxed(
    s: &mut Box<dyn std::error::Error + Send + Sync>,
) -> Box<dyn std::error::Error + Send + Sync> {
    Box::new(share_slot(s))
}

/// The [`SharedError`] in `slot`: the one it already holds, or one its error is
/// moved into (and that `slot` then holds).
fn share_slot(slot: &mut Box<dyn std::error::Error + Send + Sync>) -> SharedError {
    if let Some(shared) = slot.downcast_ref::<SharedError>() {
        return shared.clone();
    }
    let placeholder = std::io::Error::from(std::io::ErrorKind::Other);
    let shared = SharedError::new(std::mem::replace(slot, Box::new(placeholder)));
    *slot = Box::new(shared.clone());
    shared
}

fn share_record_problem(p: &mut RecordProblem) -> RecordProblem {
    match *p {
        RecordProblem::ChecksumMismatch { expected, actual } => {
            RecordProblem::ChecksumMismatch { expected, actual }
        }
        RecordProblem::EndsInsideRecord => RecordProblem::EndsInsideRecord,
        RecordProblem::OutsideFile => RecordProblem::OutsideFile,
        RecordProblem::OutsideDataRegion {
            offset,
            stored_len,
            data_start,
            data_end,
        } => RecordProblem::OutsideDataRegion {
            offset,
            stored_len,
            data_start,
            data_end,
        },
        RecordProblem::OutOfOrder {
            offset,
            stored_len,
            previous,
            previous_start,
            previous_end,
        } => RecordProblem::OutOfOrder {
            offset,
            stored_len,
            previous,
            previous_start,
            previous_end,
        },
        RecordProblem::NoDictionary => RecordProblem::NoDictionary,
        RecordProblem::LogicalLength {
            logical,
            record_bytes,
        } => RecordProblem::LogicalLength {
            logical,
            record_bytes,
        },
        RecordProblem::ShapeBytes {
            shape_bytes,
            logical,
        } => RecordProblem::ShapeBytes {
            shape_bytes,
            logical,
        },
        RecordProblem::FrameSize { declared, logical } => {
            RecordProblem::FrameSize { declared, logical }
        }
        RecordProblem::DecompressedSize { got, expected } => {
            RecordProblem::DecompressedSize { got, expected }
        }
        RecordProblem::Zstd(ref mut err) => RecordProblem::Zstd(share_io(err)),
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[derive(Debug)]
    struct Original;

    impl std::fmt::Display for Original {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the original")
        }
    }

    impl std::error::Error for Original {}

    /// The `Original` in `e`'s source chain.
    fn original_in(e: &Error) -> Option<*const Original> {
        let mut next = e.source();
        while let Some(s) = next {
            if let Some(o) = s.downcast_ref::<Original>() {
                return Some(o);
            }
            next = s.source();
        }
        None
    }

    #[test]
    fn a_remote_error_s_source_is_shared_with_the_kept_copy() {
        let mut e = Error::Remote {
            url: "mem://b/x.zr".into(),
            what: "reading a byte range",
            kind: std::io::ErrorKind::TimedOut,
            source: Box::new(Original),
        };
        let kept = share(&mut e);
        let (a, b) = (original_in(&e), original_in(&kept));
        assert!(a.is_some() && a == b, "{a:?} {b:?}");
        assert_eq!(e.to_string(), kept.to_string());
        assert!(e.to_string().ends_with("failed: the original"), "{e}");
        // Sharing again shares the same original, not a wrapper of the wrapper.
        let again = share(&mut e);
        assert_eq!(original_in(&again), a);
        let Error::Remote { source, .. } = &again else {
            panic!("{again:?}");
        };
        let shared = source.downcast_ref::<SharedError>().expect("shared");
        assert!(shared.original().downcast_ref::<Original>().is_some());
    }

    #[test]
    fn an_os_error_is_copied_by_its_number() {
        let mut e = Error::io("x.zr", "writing", std::io::Error::from_raw_os_error(28));
        let kept = share(&mut e);
        for err in [&e, &kept] {
            let Error::Io { source, .. } = err else {
                panic!("{err:?}");
            };
            assert_eq!(source.raw_os_error(), Some(28));
        }
    }
}
