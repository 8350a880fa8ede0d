//! Hostile files: every checksum is correct (recomputed after the edit), but table
//! entries, shapes, footer fields or the schema lie. Each lie must be caught by the
//! bounds and consistency checks and reported as a typed error naming the record or
//! the field, whichever backend reads it. Where an entry puts its record (inside the
//! data region, in table order, overlapping no other) is checked at open; its other
//! fields when it is used.

mod common;

use std::path::Path;

use common::*;
use zring_engine::format::{Footer, Section, BLOCK};
use zring_engine::{Backend, Codec, Error, RecordProblem, StoreProblem};
use zring_engine::{Entry, EntryError, RecordCodec};

const N: usize = 24;

/// Where a record is damaged, which decides what notices it: the table entry
/// (everything that touches the record), its shape (layout, reads, verify) or its
/// payload (only reads and verify).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Damage {
    Entry,
    Shape,
    Payload,
}

/// Every way of reading record `index` of the store at `path` that can notice
/// `damage` must name the record with a problem `want` accepts, on every backend, with and without
/// checksums on read; the other ways, and other records, still work.
/// A check on the typed problem a damaged record gives.
type BadCheck = fn(Bad<'_>) -> bool;

fn reads_name_record(
    path: &Path,
    fx: &Fixture,
    index: u64,
    want: fn(Bad<'_>) -> bool,
    damage: Damage,
) {
    for backend in Backend::CONCRETE {
        for checked in [false, true] {
            let store =
                open_with(path, backend, checked).expect("other entry fields are checked on use");
            if damage == Damage::Entry {
                expect_record(store.entry(index), index, want);
                expect_record(store.stats(), index, want);
            } else {
                store.entry(index).expect("the entry itself is valid");
                store.stats().expect("the table itself is valid");
            }
            expect_record(store.get(index), index, want);
            expect_record(store.verify(), index, want);
            let other = if index == 0 { 1 } else { 0 };
            if fx.ragged {
                expect_record(store.gather_ragged(&[other, index]), index, want);
                match damage {
                    Damage::Payload => drop(store.ragged_layout(&[index]).expect("layout")),
                    _ => expect_record(store.ragged_layout(&[index]), index, want),
                }
                let ok = store.gather_ragged(&[other]).expect("another record");
                assert_eq!(ok.record(0, 4), Some(&fx.records[other as usize][..]));
            } else {
                expect_record(store.gather_vec(&[other, index, other]), index, want);
                let ok = store.gather_vec(&[other]).expect("another record");
                assert_eq!(ok, fx.records[other as usize]);
            }
        }
    }
}

fn with_entry(
    fx: &Fixture,
    index: u64,
    name: &str,
    edit: impl FnOnce(&mut Entry),
) -> std::path::PathBuf {
    let path = fx.path.with_extension(format!("{name}.zr"));
    let mut b = fx.bytes.clone();
    patch_entry(&mut b, index, edit);
    put(&path, &b);
    path
}

/// Open refuses the store at `path`, naming record `index` with a problem `want`
/// accepts, on every backend with and without checksums on read, so nothing (not
/// `verify`, which `zring verify` runs on a store it opens) reads its records; with
/// the `remote` feature, also as an object at a `file://` URL, read by ranges and
/// cached whole. (Tables too large to copy, read on demand, are scanned in the pass
/// that checksums them: `read::tests` in the engine lowers the size limit for that.)
fn open_names_record(path: &Path, index: u64, want: BadCheck) {
    for backend in Backend::CONCRETE {
        for checked in [false, true] {
            expect_record(open_with(path, backend, checked), index, want);
        }
    }
    #[cfg(feature = "remote")]
    {
        use zring_engine::remote::{CacheOptions, RemoteOptions, WholeObjects};
        let url = format!("file://{}", path.display());
        let cache = tempfile::tempdir().expect("cache dir");
        let whole = CacheOptions::new(cache.path(), 1 << 30).whole(WholeObjects::Always);
        let ranged = RemoteOptions::default().no_cache(true);
        let cached = RemoteOptions::default().cache(whole);
        for remote in [ranged, cached] {
            let opts = zring_engine::ReadOptions::default().remote(remote);
            expect_record(zring_engine::Store::open(&url, opts), index, want);
        }
    }
}

fn out_of_order(b: Bad<'_>) -> bool {
    matches!(b, Bad::Record(RecordProblem::OutOfOrder { .. }))
}

#[test]
fn an_entry_pointing_outside_the_data_region_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let data = footer_of(&fx.bytes).data;
    let data_end = data.end().expect("end");
    let want: fn(Bad<'_>) -> bool =
        |b| matches!(b, Bad::Record(RecordProblem::OutsideDataRegion { .. }));
    // (record, case name, edit); record 5 is raw (noise), 6 zstd.
    type Case<'a> = (u64, &'a str, Box<dyn Fn(&mut Entry)>);
    assert_eq!(entry_of(&fx.bytes, 5).codec, RecordCodec::Raw);
    assert_eq!(entry_of(&fx.bytes, 6).codec, RecordCodec::Zstd);
    let cases: [Case; 6] = [
        (
            5,
            "past-end",
            Box::new(move |e| e.offset = data_end - u64::from(e.stored_len) + 1),
        ),
        (6, "at-end", Box::new(move |e| e.offset = data_end)),
        (5, "in-superblock", Box::new(|e| e.offset = 8)),
        (6, "offset-max", Box::new(|e| e.offset = u64::MAX - 4)),
        (6, "stored-max", Box::new(|e| e.stored_len = u32::MAX)),
        (5, "beyond-file", Box::new(|e| e.offset = 1 << 40)),
    ];
    for (index, name, edit) in cases {
        let path = with_entry(&fx, index, name, |e| edit(e));
        open_names_record(&path, index, want);
    }
}

/// The last silent case: record 1's entry a copy of record 0's (offset, lengths,
/// checksum), the table and footer checksums recomputed. Every check on the entry
/// and its bytes alone passes, and reading record 1 would return record 0.
#[test]
fn an_entry_copied_from_the_previous_one_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    for fx in [dense_mixed(dir.path(), N), ragged_zstd(dir.path(), N)] {
        let first = entry_of(&fx.bytes, 0);
        let mut b = fx.bytes.clone();
        patch_entry(&mut b, 1, |e| *e = first);
        if fx.ragged {
            // Record 1's shape becomes record 0's too, so the shape agrees.
            let f = footer_of(&b);
            let at = f.shapes.offset as usize;
            let shape = b[at..at + 8].to_vec();
            b[at + 8..at + 16].copy_from_slice(&shape);
            reseal(&mut b);
        }
        let path = fx.path.with_extension("copied.zr");
        put(&path, &b);
        open_names_record(&path, 1, |b| {
            matches!(
                b,
                Bad::Record(RecordProblem::OutOfOrder { previous: 0, .. })
            )
        });
        let err = open(&path).expect_err("a copied entry");
        let (start, end) = (first.offset, first.offset + u64::from(first.stored_len));
        match &err {
            Error::CorruptRecord {
                index: 1,
                problem:
                    RecordProblem::OutOfOrder {
                        offset,
                        stored_len,
                        previous: 0,
                        previous_start,
                        previous_end,
                    },
                ..
            } => assert_eq!(
                (*offset, *stored_len, *previous_start, *previous_end),
                (start, first.stored_len, start, end)
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(err.record_index(), Some(1));
        assert_eq!(err.path(), Some(path.as_path()));
        println!("{err}");
    }
}

#[test]
fn entries_overlapping_or_going_backwards_are_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let e = |i| entry_of(&fx.bytes, i);
    let end = |i| e(i).offset + u64::from(e(i).stored_len);
    // Records are back to back up to padding, so moving one back by a byte
    // overlaps its predecessor by exactly one.
    let overlap = end(4) - 1;
    let path = with_entry(&fx, 5, "overlap-one", |x| x.offset = overlap);
    open_names_record(&path, 5, |b| {
        matches!(
            b,
            Bad::Record(RecordProblem::OutOfOrder { offset, previous: 4, previous_start, .. })
                if *offset > *previous_start
        )
    });
    // Moved backwards, to record 2's bytes (the checksum too: a copy of 2's entry
    // would also be refused, as `previous` is 5 either way).
    let two = e(2);
    let path = with_entry(&fx, 6, "backwards", |x| *x = two);
    open_names_record(&path, 6, |b| {
        matches!(
            b,
            Bad::Record(RecordProblem::OutOfOrder { offset, previous: 5, previous_start, .. })
                if *offset < *previous_start
        )
    });
    let err = open(&path).expect_err("backwards");
    assert!(err.to_string().contains("before record 5"), "{err}");
    // The last record moved onto the first: every later check passes for it.
    let last = N as u64 - 1;
    let path = with_entry(&fx, last, "last-to-first", |x| x.offset = e(0).offset);
    open_names_record(&path, last, out_of_order);
    // Two records swapping places.
    let mut b = fx.bytes.clone();
    let (seven, eight) = (e(7), e(8));
    patch_entry(&mut b, 7, |x| *x = eight);
    patch_entry(&mut b, 8, |x| *x = seven);
    let path = dir.path().join("swapped.zr");
    put(&path, &b);
    open_names_record(&path, 8, out_of_order);
}

/// What the writer produces is never refused: empty ragged records share the offset
/// of the record after them (several in a row, and at the very end of the data
/// region), and records are padded to a large alignment.
#[test]
fn empty_records_and_padding_as_the_writer_puts_them_open_and_verify() {
    use zring_engine::{DType, WriteOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let dims: [u32; 9] = [0, 3, 0, 0, 5, 0, 1, 0, 0];
    let mut r = Ragged {
        values: Vec::new(),
        cu_seqlens: vec![0],
        shapes: dims.to_vec(),
        ndim: 1,
        itemsize: 4,
    };
    for (i, &d) in dims.iter().enumerate() {
        r.values.extend((0..d * 4).map(|k| (k + i as u32) as u8));
        let last = r.cu_seqlens[i];
        r.cu_seqlens.push(last + u64::from(d));
    }
    for (align, batches) in [(8, 1), (4096, 3), (1, 9)] {
        let path = dir.path().join(format!("empty-{align}-{batches}.zr"));
        let opts = WriteOptions::default().align(align);
        write_ragged(&path, DType::I32, opts, &r, batches).expect("write");
        for backend in Backend::CONCRETE {
            let store = open_with(&path, backend, true).expect("the writer's store opens");
            store.verify().expect("and verifies");
            for i in 0..dims.len() {
                assert_eq!(store.get(i as u64).expect("get"), r.record(i));
            }
        }
    }
}

#[test]
fn bad_entry_fields_are_corrupt_records_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let mut b = fx.bytes.clone();
    let path = dir.path().join("tag.zr");
    patch_entry_raw(&mut b, 4, |e| e[24] = 7);
    put(&path, &b);
    reads_name_record(
        &path,
        &fx,
        4,
        |b| matches!(b, Bad::Entry(EntryError::CodecTag(7))),
        Damage::Entry,
    );

    let mut b = fx.bytes.clone();
    patch_entry_raw(&mut b, 4, |e| e[30] = 1);
    put(&path, &b);
    reads_name_record(
        &path,
        &fx,
        4,
        |b| matches!(b, Bad::Entry(EntryError::Reserved)),
        Damage::Entry,
    );

    // A raw entry (record 3 is noise) that claims more logical than stored bytes.
    let mut b = fx.bytes.clone();
    patch_entry_raw(&mut b, 3, |e| {
        e[12..16].copy_from_slice(&255u32.to_le_bytes())
    });
    put(&path, &b);
    reads_name_record(
        &path,
        &fx,
        3,
        |b| matches!(b, Bad::Entry(EntryError::RawLengths { stored: 256, .. })),
        Damage::Entry,
    );

    // A zstd entry whose logical length is not the dense record size.
    let path = with_entry(&fx, 2, "logical", |e| e.logical_len = 512);
    reads_name_record(
        &path,
        &fx,
        2,
        |b| {
            matches!(
                b,
                Bad::Record(RecordProblem::LogicalLength {
                    logical: 512,
                    record_bytes: 256
                })
            )
        },
        Damage::Entry,
    );

    // A dictionary record in a store without a dictionary.
    let path = with_entry(&fx, 2, "dict-tag", |e| e.codec = RecordCodec::ZstdDict);
    reads_name_record(
        &path,
        &fx,
        2,
        |b| matches!(b, Bad::Record(RecordProblem::NoDictionary)),
        Damage::Entry,
    );

    // Raw bytes tagged as zstd: decoding fails, naming the record.
    let mut b = fx.bytes.clone();
    patch_entry_raw(&mut b, 3, |e| e[24] = RecordCodec::Zstd as u8);
    let path = dir.path().join("zstd-tag.zr");
    put(&path, &b);
    reads_name_record(
        &path,
        &fx,
        3,
        // Reads that look at the frame header first find it declares no size; the
        // others get zstd's refusal of the bytes.
        |b| {
            matches!(
                b,
                Bad::Record(
                    RecordProblem::FrameSize { declared: None, .. } | RecordProblem::Zstd(_)
                )
            )
        },
        Damage::Payload,
    );
}

#[test]
fn a_zstd_record_that_decodes_to_another_length_is_a_corrupt_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = ragged_zstd(dir.path(), N);
    // Take a zstd record; claim one more row, in both the table and the shapes
    // section, so only the decoded size disagrees.
    let index = (0..N as u64)
        .find(|&i| entry_of(&fx.bytes, i).codec == RecordCodec::Zstd)
        .expect("a zstd record");
    let shape = fx.shapes[index as usize].clone();
    let mut b = fx.bytes.clone();
    let f = footer_of(&b);
    let at = f.shapes.offset as usize + index as usize * 8;
    b[at..at + 4].copy_from_slice(&(shape[0] + 1).to_le_bytes());
    patch_entry(&mut b, index, |e| e.logical_len += shape[1] * 4);
    let path = dir.path().join("longer.zr");
    put(&path, &b);
    reads_name_record(
        &path,
        &fx,
        index,
        // Reads that look at the frame header first find it declares the true
        // (shorter) size; the others decompress to it.
        |b| {
            matches!(
                b,
                Bad::Record(
                    RecordProblem::FrameSize {
                        declared: Some(_),
                        ..
                    } | RecordProblem::DecompressedSize { .. }
                )
            )
        },
        Damage::Payload,
    );
}

#[test]
fn a_ragged_shape_disagreeing_with_the_table_is_a_corrupt_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = ragged_zstd(dir.path(), N);
    let f = footer_of(&fx.bytes);
    let ndim = 2usize;
    let cases: [(u64, Option<[u32; 2]>, BadCheck); 3] = [
        (7, None, |b| {
            matches!(
                b,
                Bad::Record(RecordProblem::ShapeBytes {
                    shape_bytes: Some(_),
                    ..
                })
            )
        }),
        (8, Some([u32::MAX, u32::MAX]), |b| {
            matches!(
                b,
                Bad::Record(RecordProblem::ShapeBytes {
                    shape_bytes: None,
                    ..
                })
            )
        }),
        (9, Some([0, 5]), |b| {
            matches!(
                b,
                Bad::Record(RecordProblem::ShapeBytes {
                    shape_bytes: Some(0),
                    ..
                })
            )
        }),
    ];
    for (index, dims, want) in cases {
        let mut b = fx.bytes.clone();
        let at = f.shapes.offset as usize + index as usize * ndim * 4;
        let dims = dims.unwrap_or([
            fx.shapes[index as usize][0] + 1,
            fx.shapes[index as usize][1],
        ]);
        b[at..at + 4].copy_from_slice(&dims[0].to_le_bytes());
        b[at + 4..at + 8].copy_from_slice(&dims[1].to_le_bytes());
        reseal(&mut b);
        let path = dir.path().join(format!("shape-{index}.zr"));
        put(&path, &b);
        reads_name_record(&path, &fx, index, want, Damage::Shape);
        let store = open(&path).expect("open");
        expect_record(store.shape(index), index, want);
        assert_eq!(
            store.shape(index + 1).expect("neighbour shape"),
            fx.shapes[index as usize + 1]
                .iter()
                .map(|&d| u64::from(d))
                .collect::<Vec<_>>()
        );
    }
}

/// Writes the fixture with footer fields `edit`ed (section checksums recomputed for
/// whatever the new fields cover) and expects open to fail with a problem `want`
/// accepts.
fn hostile_footer(
    fx: &Fixture,
    name: &str,
    want: fn(&StoreProblem) -> bool,
    edit: impl FnOnce(&mut Footer),
) {
    let mut b = fx.bytes.clone();
    let mut f = footer_of(&b);
    edit(&mut f);
    reseal_with(&mut b, &mut f);
    let path = fx.path.with_extension(format!("{name}.zr"));
    put(&path, &b);
    for backend in Backend::CONCRETE {
        let err = open_with(&path, backend, false).expect_err(name);
        match &err {
            Error::Corrupt { problem, .. } => {
                assert!(want(problem), "{name}: not the wanted problem: {problem:?}")
            }
            other => panic!("{name}: expected Corrupt, got {other:?}"),
        }
    }
}

#[test]
fn hostile_footer_sections_are_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = ragged_zstd(dir.path(), N);
    let len = fx.bytes.len() as u64;
    let place: fn(&StoreProblem) -> bool = |p| matches!(p, StoreProblem::SectionOutOfPlace { .. });
    hostile_footer(&fx, "overlap", place, |f| {
        f.schema.offset = f.table.offset + 8
    });
    hostile_footer(&fx, "backwards", place, |f| f.shapes.offset = f.data.offset);
    hostile_footer(&fx, "past-eof", place, |f| f.schema.offset = len + 100);
    hostile_footer(&fx, "into-footer", place, |f| f.schema.len += 1);
    hostile_footer(&fx, "len-max", place, |f| f.table.len = u64::MAX);
    hostile_footer(&fx, "offset-max", place, |f| {
        f.schema = Section {
            offset: u64::MAX,
            len: 1,
            checksum: 0,
        }
    });
    hostile_footer(&fx, "data-max", place, |f| f.data.len = u64::MAX - 100);
    hostile_footer(
        &fx,
        "data-start",
        |p| matches!(p, StoreProblem::DataOffset { offset: 0 }),
        |f| f.data.offset = 0,
    );
    hostile_footer(
        &fx,
        "file-len",
        |p| matches!(p, StoreProblem::FileLength { .. }),
        |f| f.file_len = len + 1,
    );
    hostile_footer(
        &fx,
        "align",
        |p| matches!(p, StoreProblem::AlignmentMismatch { footer: 4096, .. }),
        |f| f.align = 4096,
    );
    hostile_footer(
        &fx,
        "count",
        |p| matches!(p, StoreProblem::RecordCount { .. }),
        |f| f.record_count += 1,
    );
    hostile_footer(
        &fx,
        "table-len",
        |p| matches!(p, StoreProblem::TableLen { .. }),
        |f| f.table.len -= 32,
    );
    hostile_footer(
        &fx,
        "shapes-len",
        |p| matches!(p, StoreProblem::ShapesLen { .. }),
        |f| f.shapes.len -= 8,
    );

    // A dictionary in a store whose codec is zstd: take 8 bytes from the data region.
    let dense = dense_mixed(dir.path(), N);
    hostile_footer(
        &dense,
        "dict",
        |p| {
            matches!(
                p,
                StoreProblem::Dictionary {
                    codec: Codec::Zstd,
                    dict_len: 8
                }
            )
        },
        |f| {
            f.data.len -= 8;
            f.dict = Section {
                offset: f.data.offset + f.data.len,
                len: 8,
                checksum: 0,
            };
        },
    );

    // A table moved one byte off its 8-byte alignment (the file rebuilt around it).
    let mut f = footer_of(&fx.bytes);
    let at = f.table.offset as usize;
    let mut b = fx.bytes[..at].to_vec();
    b.push(0);
    b.extend_from_slice(&fx.bytes[at..]);
    f.table.offset += 1;
    f.schema.offset += 1;
    f.file_len += 1;
    reseal_with(&mut b, &mut f);
    let path = dir.path().join("misaligned.zr");
    put(&path, &b);
    expect_corrupt(open(&path), |p| matches!(p, StoreProblem::Misaligned));

    // The entry size the footer declares must be the format's.
    let mut b = fx.bytes.clone();
    patch_footer_raw(&mut b, |blk| {
        blk[28..32].copy_from_slice(&16u32.to_le_bytes())
    });
    let path = dir.path().join("entry-size.zr");
    put(&path, &b);
    expect_corrupt(open(&path), |p| {
        matches!(p, StoreProblem::EntrySize { size: 16 })
    });
}

#[test]
fn a_hostile_file_never_maps_beyond_its_own_bytes() {
    // A tiny file whose footer is valid but describes a huge store.
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), 2);
    let mut b = fx.bytes.clone();
    let mut f = footer_of(&b);
    f.record_count = u64::MAX / 16;
    reseal_with(&mut b, &mut f);
    let path: std::path::PathBuf = dir.path().join("huge.zr");
    put(&path, &b);
    let err = open(&path).expect_err("huge count");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(b.len() < 4 * BLOCK);
}

/// A large ragged layout is looked up on several threads. It must equal the layout
/// one thread computes, and a damaged shape must be reported as one thread reports
/// it: the damaged record that comes first in the batch, whichever thread's share
/// finds its damage first.
#[test]
fn a_ragged_layout_on_several_threads_equals_one_threads_and_names_the_first_bad_record() {
    use std::sync::Arc;
    use zring_platform::Pool;

    let dir = tempfile::tempdir().expect("tempdir");
    let n = 600usize;
    let fx = ragged_zstd(dir.path(), n);
    let pool = Arc::new(Pool::new(3, false).expect("a 3-worker pool"));
    let open = |path: &Path, threads: usize| {
        let opts = zring_engine::ReadOptions::default()
            .threads(threads)
            .with_pool(Arc::clone(&pool));
        zring_engine::Store::open(path, opts).expect("open")
    };
    let (d1, d2) = (5u64, 500u64);
    let good: Vec<u64> = (0..n as u64).filter(|&i| i != d1 && i != d2).collect();
    // 2,000 records: eight tasks of 250 on four threads.
    let batch: Vec<u64> = (0..2000u64)
        .map(|k| good[(k * 7919 % good.len() as u64) as usize])
        .collect();
    let one = open(&fx.path, 1).ragged_layout(&batch).expect("one thread");
    let four = open(&fx.path, 4)
        .ragged_layout(&batch)
        .expect("four threads");
    assert_eq!(one, four);
    for (k, &i) in batch.iter().enumerate() {
        assert_eq!(
            &four.shapes[k * 2..k * 2 + 2],
            &fx.shapes[i as usize][..],
            "record {i}"
        );
        let len = (four.cu_seqlens[k + 1] - four.cu_seqlens[k]) as usize * 4;
        assert_eq!(len, fx.records[i as usize].len(), "record {i}");
    }
    // Two damaged shapes, in the batch at 1,249 (the last of the fifth task) and
    // 1,500 (the first of the seventh, usually found first), in both orders: the
    // first in the batch is the one named.
    let f = footer_of(&fx.bytes);
    let mut b = fx.bytes.clone();
    for d in [d1, d2] {
        let at = f.shapes.offset as usize + d as usize * 8;
        let dim = fx.shapes[d as usize][0] + 1;
        b[at..at + 4].copy_from_slice(&dim.to_le_bytes());
    }
    reseal(&mut b);
    let path = dir.path().join("two-bad-shapes.zr");
    put(&path, &b);
    let shape_bytes = |b: Bad<'_>| matches!(b, Bad::Record(RecordProblem::ShapeBytes { .. }));
    for (first, second) in [(d1, d2), (d2, d1)] {
        let mut batch = batch.clone();
        batch[1249] = first;
        batch[1500] = second;
        for threads in [1, 4] {
            let store = open(&path, threads);
            for _ in 0..20 {
                expect_record(store.ragged_layout(&batch), first, shape_bytes);
            }
        }
    }
}
