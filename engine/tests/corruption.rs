//! Damaged files: truncation, flipped bytes in every section, bad magic and version
//! numbers. Each must surface as the right typed error naming what is damaged —
//! never a panic, never an out-of-bounds read, never silently wrong data when
//! checksums are asked for.

mod common;

use std::fs::{self, OpenOptions};
use std::path::Path;

use common::*;
use zring_engine::format::{Superblock, BLOCK};
use zring_engine::{Backend, BlockKind, Error, SectionKind, StoreProblem};

const N: usize = 40;

/// Opens a truncated store: it must be refused as corrupt (a file that somehow
/// opened would have to fail verification).
fn check_truncated(path: &Path, len: u64) {
    match open(path) {
        Err(Error::Corrupt { problem, .. }) => {
            let footer = BlockKind::Footer;
            let expected = if len < 2 * BLOCK as u64 {
                matches!(problem, StoreProblem::TooSmall { len: l, object: false } if l == len)
            } else {
                matches!(
                    problem,
                    StoreProblem::BadMagic { block } | StoreProblem::BlockChecksum { block }
                        if block == footer
                ) || matches!(problem, StoreProblem::FileLength { actual, .. } if actual == len)
            };
            assert!(expected, "length {len}: {problem:?} ({problem})");
        }
        Err(e) => panic!("length {len}: expected Corrupt, got {e:?}"),
        Ok(store) => assert!(store.verify().is_err(), "length {len} opened and verified"),
    }
}

/// Truncates the fixture, in place and shorter each time, to every length in
/// `lengths` (descending) and checks each.
fn truncate_through(fx: &Fixture, lengths: impl Iterator<Item = u64>) -> usize {
    let path = fx.path.with_extension("trunc");
    fs::write(&path, &fx.bytes).expect("write the copy");
    let file = OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open the copy");
    let mut checked = 0;
    for len in lengths {
        file.set_len(len).expect("truncate");
        check_truncated(&path, len);
        checked += 1;
    }
    checked
}

#[test]
fn truncation_at_every_length_through_the_metadata_and_footer_is_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    for fx in [
        dense_mixed(dir.path(), N),
        ragged_zstd(dir.path(), N),
        dense_dict(dir.path(), N),
    ] {
        let full = fx.bytes.len() as u64;
        let f = footer_of(&fx.bytes);
        // From a little inside the last records, through dictionary, shapes, table,
        // schema and footer, to one byte short of the whole file.
        let lo = f.data.end().expect("data end") - 64;
        let checked = truncate_through(&fx, (lo..full).rev());
        assert_eq!(checked as u64, full - lo);
    }
}

#[test]
fn truncation_at_lengths_spread_over_the_whole_file_is_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    for fx in [dense_mixed(dir.path(), N), ragged_zstd(dir.path(), N)] {
        let full = fx.bytes.len() as u64;
        let mut lengths: Vec<u64> = (0..200).map(|k| k * full / 200).collect();
        lengths.extend([
            0,
            1,
            8,
            BLOCK as u64 - 1,
            BLOCK as u64,
            2 * BLOCK as u64 - 1,
        ]);
        lengths.extend([2 * BLOCK as u64, full - BLOCK as u64, full - 1]);
        lengths.sort_unstable();
        lengths.dedup();
        truncate_through(&fx, lengths.into_iter().rev());
    }
}

#[test]
fn bytes_appended_after_the_footer_are_detected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let path = dir.path().join("appended.zr");
    let mut grown = fx.bytes.clone();
    grown.extend_from_slice(b"trailing garbage");
    put(&path, &grown);
    expect_corrupt(open(&path), |p| {
        matches!(
            p,
            StoreProblem::BadMagic {
                block: BlockKind::Footer
            }
        )
    });
    // A second copy of the footer at the end decodes, but its file length is wrong.
    let mut twice = fx.bytes.clone();
    twice.extend_from_slice(&fx.bytes[fx.bytes.len() - BLOCK..]);
    put(&path, &twice);
    expect_corrupt(open(&path), |p| {
        matches!(p, StoreProblem::FileLength { .. })
    });
}

#[test]
fn a_flipped_superblock_byte_fails_open_naming_the_superblock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let path = dir.path().join("sb.zr");
    // alignment field, writer version text, the checksum itself
    for at in [17usize, 30, 60] {
        let mut b = fx.bytes.clone();
        b[at] ^= 0x10;
        put(&path, &b);
        expect_corrupt(open(&path), |p| {
            matches!(
                p,
                StoreProblem::BlockChecksum {
                    block: BlockKind::Superblock
                }
            )
        });
    }
    let mut b = fx.bytes.clone();
    b[3] ^= 0x20;
    put(&path, &b);
    expect_corrupt(open(&path), |p| {
        matches!(
            p,
            StoreProblem::BadMagic {
                block: BlockKind::Superblock
            }
        )
    });
}

#[test]
fn a_flipped_payload_byte_names_that_record_in_verify_and_checked_gathers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let path = dir.path().join("payload.zr");
    // Record 7 is noise (stored raw), record 8 compressible (stored zstd).
    for (index, raw) in [(7u64, true), (8u64, false)] {
        let e = entry_of(&fx.bytes, index);
        assert_eq!(e.codec == zring_engine::RecordCodec::Raw, raw);
        let at = (e.offset + u64::from(e.stored_len) / 2) as usize;
        let mut b = fx.bytes.clone();
        b[at] ^= 0x5A;
        put(&path, &b);
        let store = open(&path).expect("a payload flip does not stop open");
        expect_record(store.verify(), index, checksum_mismatch);
        expect_record(store.verify_range(0..index + 1), index, checksum_mismatch);
        store
            .verify_range(0..index)
            .expect("records before are intact");
        store
            .verify_range(index + 1..N as u64)
            .expect("records after are intact");
        for backend in Backend::CONCRETE {
            let checked = open_with(&path, backend, true).expect("open");
            expect_record(checked.gather_vec(&[0, index, 1]), index, checksum_mismatch);
            expect_record(checked.get(index), index, checksum_mismatch);
            let others = checked.gather_vec(&[index + 1, 0]).expect("others read");
            assert_eq!(&others[..256], &fx.records[index as usize + 1][..]);
            assert_eq!(&others[256..], &fx.records[0][..]);

            // Without checksums a raw record comes back with the one flipped byte; a
            // zstd record fails to decode (naming it) or decodes to other bytes.
            let unchecked = open_with(&path, backend, false).expect("open");
            let got = unchecked.gather_vec(&[index]);
            if raw {
                let got = got.expect("raw record reads without checks");
                let diff: Vec<usize> = (0..256)
                    .filter(|&k| got[k] != fx.records[index as usize][k])
                    .collect();
                assert_eq!(diff, vec![at - e.offset as usize]);
            } else {
                // What the damaged frame decodes to is decided by zstd, not by luck:
                // the engine must return exactly that, or name the record when zstd
                // refuses the frame (or yields another length).
                let frame = &b[e.offset as usize..(e.offset + u64::from(e.stored_len)) as usize];
                match zstd::bulk::decompress(frame, 256) {
                    Ok(want) if want.len() == 256 => {
                        assert_eq!(got.expect("zstd decodes the damaged frame"), want);
                    }
                    _ => match got {
                        Err(Error::CorruptRecord { index: i, .. }) => assert_eq!(i, index),
                        other => panic!("zstd refuses the frame, the engine gave {other:?}"),
                    },
                }
            }
        }
    }
}

#[test]
fn a_flipped_ragged_payload_byte_names_that_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = ragged_zstd(dir.path(), N);
    let path = dir.path().join("ragged-payload.zr");
    for index in [4u64, 5] {
        let e = entry_of(&fx.bytes, index);
        let mut b = fx.bytes.clone();
        b[(e.offset + u64::from(e.stored_len) - 1) as usize] ^= 0x01;
        put(&path, &b);
        for backend in Backend::CONCRETE {
            let store = open_with(&path, backend, true).expect("open");
            expect_record(store.verify(), index, checksum_mismatch);
            expect_record(store.gather_ragged(&[0, index]), index, checksum_mismatch);
            let fine = store.gather_ragged(&[index + 1]).expect("neighbour");
            assert_eq!(fine.record(0, 4), Some(&fx.records[index as usize + 1][..]));
        }
    }
}

#[test]
fn a_flipped_dictionary_record_byte_names_that_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_dict(dir.path(), N);
    let path = dir.path().join("dict-payload.zr");
    let index = 11u64;
    let e = entry_of(&fx.bytes, index);
    assert_eq!(e.codec, zring_engine::RecordCodec::ZstdDict);
    let mut b = fx.bytes.clone();
    b[e.offset as usize + 2] ^= 0xFF;
    put(&path, &b);
    let store = open_with(&path, Backend::Pread, true).expect("open");
    expect_record(store.verify(), index, checksum_mismatch);
    expect_record(store.gather_vec(&[index]), index, checksum_mismatch);
}

/// Flips one byte in the middle of section `s` (of kind `want`) and expects open to
/// fail with that section's checksum mismatch.
fn flip_section(fx: &Fixture, name: &str, s: zring_engine::format::Section, want: SectionKind) {
    assert!(s.len > 0, "{name} section is empty in this fixture");
    let path = fx.path.with_extension(format!("{name}.zr"));
    let mut b = fx.bytes.clone();
    b[(s.offset + s.len / 2) as usize] ^= 0x04;
    put(&path, &b);
    let problem = expect_corrupt(
        open(&path),
        |p| matches!(p, StoreProblem::SectionChecksum { section, .. } if *section == want),
    );
    assert!(
        problem.to_string().contains(name),
        "{problem} does not name {name}"
    );
}

#[test]
fn a_flipped_metadata_byte_fails_open_naming_the_section() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dict = dense_dict(dir.path(), N);
    let f = footer_of(&dict.bytes);
    flip_section(&dict, "dictionary", f.dict, SectionKind::Dictionary);
    flip_section(&dict, "table", f.table, SectionKind::Table);
    flip_section(&dict, "schema", f.schema, SectionKind::Schema);
    let ragged = ragged_zstd(dir.path(), N);
    let f = footer_of(&ragged.bytes);
    flip_section(&ragged, "shapes", f.shapes, SectionKind::Shapes);

    let path = dir.path().join("footer.zr");
    let footer_at = dict.bytes.len() - BLOCK;
    // record count, a section offset, a reserved byte, the checksum itself
    for at in [16usize, 32 + 24 * 3, 2000, BLOCK - 1] {
        let mut b = dict.bytes.clone();
        b[footer_at + at] ^= 0x02;
        put(&path, &b);
        expect_corrupt(open(&path), |p| {
            matches!(
                p,
                StoreProblem::BlockChecksum {
                    block: BlockKind::Footer
                }
            )
        });
    }
}

#[test]
fn bad_magic_or_a_foreign_file_is_not_a_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let path = dir.path().join("magic.zr");
    let mut b = fx.bytes.clone();
    let n = b.len();
    b[n - BLOCK + 1] = b'X';
    put(&path, &b);
    expect_corrupt(open(&path), |p| {
        matches!(
            p,
            StoreProblem::BadMagic {
                block: BlockKind::Footer
            }
        )
    });

    put(&path, &noise(3 * BLOCK, 9));
    let err = open(&path).expect_err("noise is not a store");
    let msg = err.to_string();
    expect_corrupt(Err::<(), _>(err), |p| {
        matches!(
            p,
            StoreProblem::BadMagic {
                block: BlockKind::Superblock
            }
        )
    });
    // How the problem reads.
    assert!(msg.contains("not a valid zring store"), "{msg}");
    assert!(msg.contains("bad superblock magic"), "{msg}");
    put(&path, b"");
    expect_corrupt(open(&path), |p| {
        matches!(
            p,
            StoreProblem::TooSmall {
                len: 0,
                object: false
            }
        )
    });
    // A directory is not a store either (whatever size the file system reports).
    assert!(open(dir.path()).is_err());
    let missing = open(&dir.path().join("missing.zr")).expect_err("missing");
    assert!(matches!(missing, Error::Io { .. }), "{missing:?}");
    assert!(missing.to_string().contains("missing.zr"), "{missing}");
}

#[test]
fn a_future_major_version_is_refused_as_newer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let path = dir.path().join("v2.zr");

    // Superblock says 2.3 (correctly checksummed).
    let mut b = fx.bytes.clone();
    let sb = Superblock {
        major: 2,
        minor: 3,
        ..Superblock::decode(&b[..BLOCK]).expect("superblock")
    };
    b[..BLOCK].copy_from_slice(&sb.encode());
    put(&path, &b);
    let err = open(&path).expect_err("v2 superblock");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error::UnsupportedVersion {
                found_major: 2,
                found_minor: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(msg.contains("newer") && msg.contains("v2.3"), "{msg}");
    assert!(msg.contains("v2.3") && msg.contains("v1"), "{msg}");

    // Footer alone says 2.0 (with its checksum recomputed).
    let mut b = fx.bytes.clone();
    let mut f = footer_of(&b);
    f.major = 2;
    set_footer(&mut b, &f);
    put(&path, &b);
    let err = open(&path).expect_err("v2 footer");
    assert!(
        matches!(err, Error::UnsupportedVersion { found_major: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("newer"), "{err}");
}

#[test]
fn a_newer_minor_version_still_opens_and_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let path = dir.path().join("v1.7.zr");
    let mut b = fx.bytes.clone();
    patch_superblock_raw(&mut b, |sb| sb[10..12].copy_from_slice(&7u16.to_le_bytes()));
    let mut f = footer_of(&b);
    f.minor = 7;
    set_footer(&mut b, &f);
    put(&path, &b);
    let store = open(&path).expect("a newer minor version opens");
    assert_eq!(store.format_version(), (1, 7));
    store.verify().expect("verify");
    assert_eq!(read_all(&store).expect("read"), fx.records);
}

#[test]
fn a_major_version_below_1_is_damage_not_a_newer_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let path = dir.path().join("v0.zr");
    // A flipped bit turns major 1 into 0: the checksum catches it.
    let mut b = fx.bytes.clone();
    b[8] ^= 0x01;
    put(&path, &b);
    expect_corrupt(open(&path), |p| {
        matches!(
            p,
            StoreProblem::BlockChecksum {
                block: BlockKind::Superblock
            }
        )
    });
    // Even with checksums recomputed, v0 is not "newer": it never existed.
    for footer in [false, true] {
        let mut b = fx.bytes.clone();
        if footer {
            patch_footer_raw(&mut b, |f| f[8..10].copy_from_slice(&0u16.to_le_bytes()));
        } else {
            patch_superblock_raw(&mut b, |s| s[8..10].copy_from_slice(&0u16.to_le_bytes()));
        }
        put(&path, &b);
        let which = if footer {
            BlockKind::Footer
        } else {
            BlockKind::Superblock
        };
        let problem = expect_corrupt(
            open(&path),
            |p| matches!(p, StoreProblem::NoSuchMajor { block, major: 0 } if *block == which),
        );
        assert!(
            problem
                .to_string()
                .contains("major version 0 does not exist"),
            "{problem}"
        );
    }
}
