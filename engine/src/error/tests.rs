//! The error types' unit tests: messages, and causes kept as `source()`.

use std::error::Error as _;
use std::io;

use super::*;

#[test]
fn details_read_as_sentences_with_their_context() {
    let e = Error::InvalidArgument(ArgumentError::DestinationSize {
        field: Some("tokens".into()),
        len: 7,
        records: 2,
        width: 4,
    });
    assert_eq!(
        e.to_string(),
        "invalid argument: field \"tokens\": destination is 7 bytes, expected 2 records x 4 bytes"
    );
    let e = Error::Schema(SchemaError::WrongLayout {
        operation: "gather",
        ragged: true,
        instead: "gather_ragged",
    });
    assert_eq!(
        e.to_string(),
        "schema: gather on a ragged store; use gather_ragged"
    );
    let e = Error::Schema(SchemaError::UnknownDType { name: "f5".into() });
    assert!(e.to_string().contains("expected one of bool, "), "{e}");
}

#[test]
fn a_codec_error_keeps_zstd_s_error_as_its_source() {
    let zstd = io::Error::other("Unknown frame descriptor");
    let e = Error::Codec(CodecError::Compressor {
        level: 99,
        source: zstd,
    });
    assert!(e.to_string().contains("level 99"), "{e}");
    assert!(e.to_string().contains("Unknown frame descriptor"), "{e}");
    let source = e.source().expect("zstd's error is the source");
    assert_eq!(source.to_string(), "Unknown frame descriptor");
    let nested = Error::Schema(SchemaError::Field {
        name: "x".into(),
        source: Box::new(SchemaError::RaggedNdim { ndim: 0 }),
    });
    assert!(matches!(
        nested
            .source()
            .and_then(|s| s.downcast_ref::<SchemaError>()),
        Some(SchemaError::RaggedNdim { ndim: 0 })
    ));
}

#[test]
fn an_object_change_says_what_changed_and_keeps_its_fields() {
    let e = Error::ObjectChanged {
        url: "s3://bucket/d.zr".into(),
        change: ObjectChange::Size {
            expected: 8192,
            found: 4096,
        },
    };
    assert_eq!(
        e.to_string(),
        "s3://bucket/d.zr: the object changed while the store was open: it is 4096 bytes now, 8192 when opened"
    );
    let e = Error::ObjectChanged {
        url: "s3://bucket/d.zr".into(),
        change: ObjectChange::Precondition {
            what: "reading a byte range",
            source: std::sync::Arc::new(io::Error::other("precondition failed")),
        },
    };
    let source = e.source().expect("the object store's error is the source");
    assert_eq!(
        source.downcast_ref::<io::Error>().map(|s| s.kind()),
        Some(io::ErrorKind::Other)
    );
}

#[test]
fn a_runtime_that_cannot_start_keeps_the_system_s_error_as_its_source() {
    let e = Error::Internal(InternalError::RemoteRuntime {
        source: std::sync::Arc::new(io::Error::from_raw_os_error(libc_eagain())),
    });
    assert!(e
        .to_string()
        .starts_with("internal error (a zring bug): cannot start the remote I/O runtime: "));
    let io = e
        .source()
        .and_then(|s| s.downcast_ref::<io::Error>())
        .expect("the system's error is the source");
    assert_eq!(io.raw_os_error(), Some(libc_eagain()));
}

/// EAGAIN, what a refused thread creation returns on Linux.
fn libc_eagain() -> i32 {
    11
}

#[test]
fn a_publish_failure_keeps_the_platform_s_error_as_its_source() {
    use zring_platform::PublishError;
    let publish = std::sync::Arc::new(PublishError::Io {
        step: "renaming the new file into place",
        path: "/d/x.zr".into(),
        source: io::Error::other("disk on fire"),
        in_place: false,
    });
    let e = Error::Internal(InternalError::Publish {
        source: std::sync::Arc::clone(&publish),
    });
    assert_eq!(
        e.to_string(),
        "internal error (a zring bug): publishing failed: /d/x.zr: renaming the new file into place failed: disk on fire"
    );
    let source = e.source().expect("the platform's error is the source");
    assert!(matches!(
        source.downcast_ref::<PublishError>(),
        Some(PublishError::Io {
            in_place: false,
            ..
        })
    ));
    let e = Error::manifest("/d", ManifestProblem::Publish { source: publish });
    assert!(e
        .source()
        .and_then(|s| s.downcast_ref::<PublishError>())
        .is_some());
    assert!(
        e.to_string()
            .contains("publishing the manifest failed: /d/x.zr"),
        "{e}"
    );
}
