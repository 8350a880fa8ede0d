//! Hostile schemas: garbage or lying schema JSON in a store whose checksums are all
//! correct (recomputed after the edit) is refused at open, naming the field, or, for
//! a schema that passes but disagrees with the records, by the read that notices.

mod common;

use common::*;
use zring_engine::{Codec, Error, RecordProblem, SchemaError, SchemaJsonError as Sj, StoreProblem};

const N: usize = 24;

/// A check on the typed problem a damaged store gives.
type ProblemCheck = fn(&StoreProblem) -> bool;

#[test]
fn garbage_or_lying_schema_json_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let good = schema_json(&fx.bytes);
    assert!(good.contains("\"item_shape\":[256]"), "{good}");
    let path = dir.path().join("schema.zr");
    let edited = |from: &str, to: &str| {
        assert!(good.contains(from), "{good} lacks {from}");
        good.replacen(from, to, 1).into_bytes()
    };
    let cases: Vec<(Vec<u8>, ProblemCheck)> = vec![
        (b"not json at all".to_vec(), |p| {
            matches!(p, StoreProblem::Schema(Sj::Json(_)))
        }),
        (vec![0xFF, 0xFE, b'{'], |p| {
            matches!(p, StoreProblem::Schema(Sj::Json(_)))
        }),
        (b"[1,2,3]".to_vec(), |p| {
            matches!(p, StoreProblem::Schema(Sj::NotAnObject))
        }),
        (b"{}".to_vec(), |p| {
            matches!(p, StoreProblem::Schema(Sj::Missing { .. }))
        }),
        (
            edited("\"format\":\"zring\"", "\"format\":\"other\""),
            |p| matches!(p, StoreProblem::Schema(Sj::NotZring)),
        ),
        (
            edited("\"dtype\":\"uint8\"", "\"dtype\":\"float128\""),
            |p| {
                matches!(
                    p,
                    StoreProblem::Schema(Sj::Invalid(SchemaError::UnknownDType { .. }))
                )
            },
        ),
        (
            edited("\"layout\":\"dense\"", "\"layout\":\"sparse\""),
            |p| matches!(p, StoreProblem::Schema(Sj::UnknownLayout { .. })),
        ),
        (edited("\"codec\":\"zstd\"", "\"codec\":\"lz4\""), |p| {
            matches!(
                p,
                StoreProblem::Schema(Sj::Invalid(SchemaError::UnknownCodec { .. }))
            )
        }),
        (edited("\"item_shape\":[256]", "\"item_shape\":[-1]"), |p| {
            matches!(
                p,
                StoreProblem::Schema(Sj::WrongType {
                    key: "item_shape",
                    ..
                })
            )
        }),
        (
            edited("\"item_shape\":[256]", "\"item_shape\":\"256\""),
            |p| {
                matches!(
                    p,
                    StoreProblem::Schema(Sj::WrongType {
                        key: "item_shape",
                        ..
                    })
                )
            },
        ),
        (
            edited(
                "\"item_shape\":[256]",
                "\"item_shape\":[4294967296,4294967296]",
            ),
            |p| {
                matches!(
                    p,
                    StoreProblem::Schema(Sj::Invalid(SchemaError::RecordTooLarge { .. }))
                )
            },
        ),
        (
            edited(&format!("\"record_count\":{N}"), "\"record_count\":-3"),
            |p| {
                matches!(
                    p,
                    StoreProblem::Schema(Sj::WrongType {
                        key: "record_count",
                        ..
                    })
                )
            },
        ),
        (
            edited(&format!("\"record_count\":{N}"), "\"record_count\":999"),
            |p| matches!(p, StoreProblem::RecordCount { schema: 999, .. }),
        ),
        (edited("\"metadata\":{}", "\"metadata\":{\"k\":1}"), |p| {
            matches!(p, StoreProblem::Schema(Sj::MetadataValue { .. }))
        }),
        (edited("\"metadata\":{}", "\"metadata\":[]"), |p| {
            matches!(
                p,
                StoreProblem::Schema(Sj::WrongType {
                    key: "metadata",
                    ..
                })
            )
        }),
        (edited("\"dict_id\":null", "\"dict_id\":-1"), |p| {
            matches!(
                p,
                StoreProblem::Schema(Sj::WrongType { key: "dict_id", .. })
            )
        }),
        (
            edited("\"codec\":\"zstd\"", "\"codec\":\"zstd-dict\""),
            |p| {
                matches!(
                    p,
                    StoreProblem::Dictionary {
                        codec: Codec::ZstdDict,
                        dict_len: 0
                    }
                )
            },
        ),
        (
            edited(
                "\"item_shape\":[256],\"layout\":\"dense\"",
                "\"layout\":\"ragged\",\"ndim\":1",
            ),
            |p| matches!(p, StoreProblem::ShapesLen { len: 0, .. }),
        ),
        (
            edited(
                "\"item_shape\":[256],\"layout\":\"dense\"",
                "\"layout\":\"ragged\",\"ndim\":0",
            ),
            |p| {
                matches!(
                    p,
                    StoreProblem::Schema(Sj::Invalid(SchemaError::RaggedNdim { ndim: 0 }))
                )
            },
        ),
    ];
    for (json, want) in cases {
        put(&path, &replace_schema(&fx.bytes, &json));
        let text = String::from_utf8_lossy(&json).into_owned();
        match open(&path) {
            Err(Error::Corrupt { problem, .. }) => {
                assert!(
                    want(&problem),
                    "{text}: not the wanted problem: {problem:?}"
                )
            }
            Err(e) => panic!("{text}: expected Corrupt, got {e:?}"),
            Ok(_) => panic!("{text}: opened"),
        }
    }

    // Well-formed schemas that lie about the record size open (the schema is
    // consistent on its own) but every record is then refused by name.
    put(&path, &replace_schema(&fx.bytes, &edited("[256]", "[0]")));
    expect_corrupt(open(&path), |p| matches!(p, StoreProblem::ZeroSizeRecords));
    for shape in ["[128]", "[16,32]"] {
        put(&path, &replace_schema(&fx.bytes, &edited("[256]", shape)));
        let store = open(&path).expect("a consistent schema opens");
        let size = |b: Bad<'_>| matches!(b, Bad::Record(RecordProblem::LogicalLength { .. }));
        expect_record(store.verify(), 0, size);
        expect_record(store.gather_vec(&[0]), 0, size);
        expect_record(store.get(3), 3, size);
    }
}
