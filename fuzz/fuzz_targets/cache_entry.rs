//! The remote chunk cache's entry format (a chunk's bytes, its block hashes, a
//! checked trailer) on damaged and hostile entries: a read of any ranges either
//! fails or returns exactly the chunk's bytes, and an entry nobody damaged always
//! reads. Three kinds of entry file:
//!
//! - a valid entry of the input's chunk, with up to 8 byte flips, cut short or grown
//!   (a torn write, damage on disk, another length's entry at the path);
//! - a valid entry resealed over damaged chunk bytes (the trailer's checksum right,
//!   a block hash stale), read with and without the block table kept in memory;
//! - any bytes, claiming any chunk length.
#![no_main]

use std::fs::File;
use std::io::Write;
use std::ops::Range;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use zring_engine::remote::cache_entry::{
    block_table, check_ranges, parse_trailer, read_ranges, trailer, trailer_len, BLOCK,
};

/// The largest chunk tried: a few blocks, so the short last block and ranges that
/// cross block edges are common.
const MAX_CHUNK: usize = 3 * BLOCK + 100;

enum Kind {
    /// A valid entry damaged: flips (position, xor) and a new file length.
    Damaged {
        flips: Vec<(usize, u8)>,
        cut: Option<usize>,
    },
    /// Chunk bytes flipped after the trailer was made (the trailer stays valid).
    Stale { flips: Vec<(usize, u8)> },
    /// Any bytes as the file.
    Raw(Vec<u8>),
}

struct Input {
    chunk: Vec<u8>,
    kind: Kind,
    ranges: Vec<Range<usize>>,
    /// Read with the true block table in memory, a table of the wrong length, or none.
    known: u8,
}

fn read(data: &[u8]) -> Result<Input> {
    let mut u = Unstructured::new(data);
    let len = usize::from(u.arbitrary::<u16>()?) % (MAX_CHUNK + 1);
    let fill: u8 = u.arbitrary()?;
    // Chunk bytes: a pattern (cheap for libFuzzer to reach any length) with a few
    // of the input's bytes in front.
    let mut chunk: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ fill)
        .collect();
    let head = u.int_in_range(0..=len.min(64))?;
    for b in chunk.iter_mut().take(head) {
        *b = u.arbitrary()?;
    }
    let flips = |u: &mut Unstructured, within: usize| -> Result<Vec<(usize, u8)>> {
        let n = u.int_in_range(0..=8)?;
        (0..n)
            .map(|_| {
                Ok((
                    usize::from(u.arbitrary::<u16>()?) % within.max(1),
                    u.arbitrary()?,
                ))
            })
            .collect()
    };
    let kind = match u.int_in_range(0u8..=2)? {
        0 => {
            let flips = flips(&mut u, len + trailer_len(len))?;
            let cut = if u.arbitrary()? {
                Some(usize::from(u.arbitrary::<u16>()?))
            } else {
                None
            };
            Kind::Damaged { flips, cut }
        }
        1 => Kind::Stale {
            flips: flips(&mut u, len)?,
        },
        _ => {
            let n = u.int_in_range(0..=MAX_CHUNK + 4 * 8 + 24)?;
            Kind::Raw(u.bytes(n.min(u.len()))?.to_vec())
        }
    };
    let known = u.int_in_range(0u8..=2)?;
    let mut ranges = Vec::new();
    while !u.is_empty() && ranges.len() < 8 {
        // Mostly inside the chunk, sometimes past it (the cache refuses those first).
        let start = usize::from(u.arbitrary::<u16>()?) % (len + 2);
        let end = start + usize::from(u.arbitrary::<u16>()?) % (2 * BLOCK);
        ranges.push(start..end);
    }
    Ok(Input {
        chunk,
        kind,
        ranges,
        known,
    })
}

fn write(bytes: &[u8]) -> File {
    let path = zring_fuzz::scratch("entry");
    let mut f = File::create(&path).expect("creating the entry file");
    f.write_all(bytes).expect("writing the entry file");
    File::open(&path).expect("opening the entry file")
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = read(data) else { return };
    let len = input.chunk.len();
    let table = block_table(&input.chunk);
    let mut entry = input.chunk.clone();
    entry.extend_from_slice(&trailer(&table, len));
    // The bytes a successful read must return (the chunk the entry was made of, or
    // for raw bytes the file's own bytes), and whether the file is intact.
    let (file, len, intact) = match &input.kind {
        Kind::Damaged { flips, cut } => {
            let mut f = entry.clone();
            for &(at, x) in flips {
                f[at % entry.len()] ^= x;
            }
            if let Some(cut) = cut {
                f.resize(*cut % (entry.len() + 64), 0xA5);
            }
            let intact = f == entry;
            (f, len, intact)
        }
        Kind::Stale { flips } => {
            let mut f = entry.clone();
            for &(at, x) in flips {
                if len > 0 {
                    f[at % len] ^= x;
                }
            }
            let intact = f == entry;
            (f, len, intact)
        }
        Kind::Raw(bytes) => {
            // Claim the length whose trailer would end the file, when there is one.
            let claim = (0..=bytes.len())
                .rev()
                .find(|&l| l + trailer_len(l) == bytes.len())
                .unwrap_or(len);
            (bytes.clone(), claim, false)
        }
    };
    let expected: &[u8] = match &input.kind {
        Kind::Raw(_) => &file[..len.min(file.len())],
        _ => &input.chunk,
    };
    if check_ranges(len, &input.ranges).is_err() {
        assert!(
            input.ranges.iter().any(|r| r.start > r.end || r.end > len),
            "check_ranges refused ranges inside the chunk"
        );
        return;
    }
    let wrong_len: Vec<u64> = vec![0; table.len() + 1];
    let known = match input.known {
        0 => None,
        1 if !matches!(input.kind, Kind::Raw(_)) => Some(&*table),
        _ => Some(wrong_len.as_slice()),
    };
    let f = write(&file);
    match read_ranges(&f, len, &input.ranges, known) {
        Some((out, read_table)) => {
            assert_eq!(out.len(), input.ranges.len());
            for (r, got) in input.ranges.iter().zip(&out) {
                assert_eq!(
                    &got[..],
                    &expected[r.clone()],
                    "range {r:?} read wrong bytes"
                );
            }
            if let Some(t) = read_table {
                // A table read from the file is the file's own, valid trailer.
                assert_eq!(Some(t), parse_trailer(&file[len..], len));
            }
        }
        None => assert!(
            !intact,
            "an intact entry of {len} bytes failed its read of {:?}",
            input.ranges
        ),
    }
});
