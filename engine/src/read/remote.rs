//! Stores in object storage, on the read path: opening one from its object's bytes
//! (the same checks as a local file's open, sections kept in memory) and reading
//! its records through the remote source (`crate::remote`), each checked and
//! decoded by `decode.rs` as soon as its bytes arrive, the other GETs still in
//! flight.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use crate::entry::Entry;
use crate::error::{Error, InternalError, ObjectChange, Result, StoreProblem};
use crate::format::{Section, SectionKind, BLOCK};
use crate::remote::{fetch_tail, Connector, RemoteSource, TAIL};

use super::decode::DecodeCtx;
use super::layout::{check_schema, decode_footer, decode_superblock, TableScan};
use super::source::check_slot;
use super::{check_section, Backend, Meta, Opened, ReadSetup, Reader, Source};

impl Reader {
    /// Opens the store behind `conn` in a few ranged GETs: the object's tail
    /// (footer and, for most stores, every metadata section) first, which also gives
    /// its version; then the superblock and whatever metadata the tail missed,
    /// together. The sections are checked exactly as for a local file and kept in
    /// memory.
    pub(crate) fn open_remote(conn: Connector, opts: &ReadSetup) -> Result<Self> {
        let url = conn.url.clone();
        let path: &Path = &url;
        let (version, tail) = fetch_tail(&conn)?;
        let len = version.size;
        if len < 2 * BLOCK as u64 {
            return Err(Error::corrupt(
                path,
                StoreProblem::TooSmall { len, object: true },
            ));
        }
        if tail.len() < BLOCK || tail.len() as u64 > len {
            // The tail asked for: the last TAIL bytes, or all of a smaller object.
            return Err(Error::ObjectChanged {
                url: url.clone(),
                change: ObjectChange::RangeLength {
                    start: len.saturating_sub(TAIL),
                    end: len,
                    got: tail.len() as u64,
                },
            });
        }
        let tail_start = len - tail.len() as u64;
        let footer = decode_footer(path, &tail[tail.len() - BLOCK..])?;
        let source = RemoteSource::open(conn, version, &opts.remote)?;
        source.count_request(tail.len() as u64);
        // Metadata starts at the first non-empty section (the footer's claims are
        // only used to choose ranges inside the object here; they are checked below).
        let sections = [footer.dict, footer.shapes, footer.table, footer.schema];
        let meta_start = sections
            .iter()
            .filter(|s| s.len > 0)
            .map(|s| s.offset)
            .min()
            .unwrap_or(len)
            .min(len - BLOCK as u64);
        let mut wanted: Vec<Range<u64>> = Vec::new();
        if tail_start > 0 {
            wanted.push(0..BLOCK as u64);
        }
        if meta_start < tail_start {
            wanted.push(meta_start..tail_start);
        }
        let mut got: Vec<Vec<u8>> = vec![Vec::new(); wanted.len()];
        source.for_each_range(&wanted, |k, b| {
            got[k] = b.to_vec();
            Ok(())
        })?;
        let head: &[u8] = match tail_start {
            0 => &tail[..BLOCK],
            _ => &got[0],
        };
        let superblock = decode_superblock(path, head)?;
        super::layout::check_footer(&footer, &superblock, len)
            .map_err(|p| Error::corrupt(path, p))?;
        // The metadata: [from, len) of the object.
        let from = meta_start.min(tail_start);
        let mut metadata = match meta_start < tail_start {
            true => got.pop().unwrap_or_default(),
            false => Vec::new(),
        };
        metadata.extend_from_slice(&tail);
        let section = |s: Section, name: SectionKind| -> Result<Vec<u8>> {
            let body = s
                .offset
                .checked_sub(from)
                .and_then(|at| metadata.get(at as usize..(at + s.len) as usize))
                .ok_or_else(|| {
                    Error::corrupt(
                        path,
                        StoreProblem::SectionOutside {
                            section: name,
                            object: true,
                        },
                    )
                })?;
            check_section(path, s, name, body)?;
            Ok(body.to_vec())
        };
        let dict = section(footer.dict, SectionKind::Dictionary)?;
        let schema_json = section(footer.schema, SectionKind::Schema)?;
        let shapes = section(footer.shapes, SectionKind::Shapes)?.into_boxed_slice();
        let table = section(footer.table, SectionKind::Table)?.into_boxed_slice();
        // The scan a local open makes (`Opened::load`), here after the checksum: the
        // table is in memory, and fetching it costs far more than a second pass.
        let mut scan = TableScan::new(footer.data);
        scan.feed(&table);
        let meta = Meta::Memory { table, shapes };
        drop(metadata);
        let mut opened = Opened {
            source: Source::Remote(Arc::new(source)),
            backend: Backend::Pread,
            meta,
            dict,
            schema_json,
            table: scan.finish(path),
        };
        let stored = check_schema(path, &opened.schema_json, &footer)?;
        opened.check_table()?;
        Ok(Reader::new(
            url.clone(),
            opened,
            footer,
            superblock,
            stored,
            opts,
        ))
    }

    /// Fills each `(index, slot)` with its record from the remote object: one plan
    /// for the whole task (records sorted by offset, neighbours coalesced), every
    /// record checked and decoded into its slot as soon as its bytes arrive.
    pub(crate) fn read_remote<'d>(
        &self,
        src: &RemoteSource,
        items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        let mut indices = Vec::new();
        let mut entries = Vec::new();
        let mut slots = Vec::new();
        for (i, dst) in items {
            let e = self.entry(i)?;
            check_slot(i, &e, dst)?;
            indices.push(i);
            entries.push(e);
            slots.push(Some(dst));
        }
        let ranges = stored_ranges(&entries);
        let decoders = &mut ctx.decoders;
        src.for_each_range(&ranges, |k, stored| {
            let dst = slots[k]
                .take()
                .ok_or(Error::Internal(InternalError::Remote {
                    what: "a slot was filled twice",
                }))?;
            self.decode_into(indices[k], &entries[k], stored, dst, decoders)
        })
    }

    /// Runs `f(index, entry, stored bytes)` on each record of `items` (for
    /// `verify` and single-record reads), fetched as one plan.
    pub(crate) fn with_remote_stored(
        &self,
        src: &RemoteSource,
        items: &[(u64, Entry)],
        mut f: impl FnMut(u64, &Entry, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let entries: Vec<Entry> = items.iter().map(|(_, e)| *e).collect();
        let ranges = stored_ranges(&entries);
        src.for_each_range(&ranges, |k, stored| f(items[k].0, &items[k].1, stored))
    }
}

/// Each entry's stored bytes in the object.
fn stored_ranges(entries: &[Entry]) -> Vec<Range<u64>> {
    entries
        .iter()
        .map(|e| e.offset..e.offset + u64::from(e.stored_len))
        .collect()
}
