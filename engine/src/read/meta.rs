//! Where a store's table entries and shapes are looked up.
//!
//! With the `mmap` backend they are read from the mapping of the whole file, like
//! the records. Every other backend never touches a mapping of the store file (a
//! mapping turns a file truncated under the reader into SIGBUS): the table and shapes
//! are copied into memory at open, or, for tables too large to copy
//! ([`IN_MEMORY_MAX`]), each entry is read with `pread` when it is needed.

use std::fs::File;
use std::io;
use std::sync::Arc;

use zring_platform::{read_exact_at, Mapping};

use crate::format::{self, Section, ENTRY_BYTES};
use crate::schema::MAX_NDIM;

/// Table and shapes up to this size are copied into memory at open (256 MiB: 8 M
/// dense records); larger ones are read entry by entry.
pub(crate) const IN_MEMORY_MAX: u64 = 256 << 20;

/// The table and shapes of an open store.
pub(crate) enum Meta {
    /// In the mapping of the whole file (the `mmap` backend).
    Mapped {
        map: Arc<Mapping>,
        table: Section,
        shapes: Section,
    },
    /// Copied at open; indexed from 0.
    Memory { table: Box<[u8]>, shapes: Box<[u8]> },
    /// Read per lookup (a table too large to copy).
    OnDemand {
        file: File,
        table: Section,
        shapes: Section,
    },
}

/// A lookup outside the section (only a table that lies about itself gets here: the
/// section bounds are checked at open).
fn outside() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "outside the section")
}

impl Meta {
    /// The raw bytes of record `index`'s table entry.
    pub(crate) fn entry(&self, index: u64) -> io::Result<[u8; ENTRY_BYTES]> {
        let mut raw = [0u8; ENTRY_BYTES];
        match self {
            Meta::Mapped { map, table, .. } => {
                let r = format::entry_range(*table, index);
                raw.copy_from_slice(
                    map.bytes()
                        .get(r.start as usize..r.end as usize)
                        .ok_or_else(outside)?,
                );
            }
            Meta::Memory { table, .. } => {
                let at = index as usize * ENTRY_BYTES;
                raw.copy_from_slice(table.get(at..at + ENTRY_BYTES).ok_or_else(outside)?);
            }
            Meta::OnDemand { file, table, .. } => {
                let r = format::entry_range(*table, index);
                read_exact_at(file, &mut raw, r.start)?;
            }
        }
        Ok(raw)
    }

    /// Runs `f` on record `index`'s shape bytes (`ndim` little-endian u32).
    pub(crate) fn with_shape<T>(
        &self,
        index: u64,
        ndim: usize,
        f: impl FnOnce(&[u8]) -> T,
    ) -> io::Result<T> {
        match self {
            Meta::Mapped { map, shapes, .. } => {
                let r = format::shape_range(*shapes, ndim, index);
                let b = map.bytes().get(r.start as usize..r.end as usize);
                Ok(f(b.ok_or_else(outside)?))
            }
            Meta::Memory { shapes, .. } => {
                let at = index as usize * ndim * 4;
                Ok(f(shapes.get(at..at + ndim * 4).ok_or_else(outside)?))
            }
            Meta::OnDemand { file, shapes, .. } => {
                let mut buf = [0u8; MAX_NDIM * 4];
                let b = buf.get_mut(..ndim * 4).ok_or_else(outside)?;
                let r = format::shape_range(*shapes, ndim, index);
                read_exact_at(file, b, r.start)?;
                Ok(f(b))
            }
        }
    }

    /// Starts loading record `index`'s table entry into the cache (a hint; only mapped
    /// metadata needs it).
    pub(crate) fn prefetch_entry(&self, index: u64) {
        if let Meta::Mapped { map, table, .. } = self {
            let r = format::entry_range(*table, index);
            map.prefetch(r.start as usize, (r.end - r.start) as usize);
        }
    }

    /// Starts loading record `index`'s entry and shape into the cache (a hint; only
    /// mapped metadata needs it, memory is prefetched by the hardware well enough).
    pub(crate) fn prefetch(&self, index: u64, ndim: usize) {
        if let Meta::Mapped { map, table, shapes } = self {
            for r in [
                format::entry_range(*table, index),
                format::shape_range(*shapes, ndim, index),
            ] {
                map.prefetch(r.start as usize, (r.end - r.start) as usize);
            }
        }
    }
}
