//! The metadata that `close` writes after the data region: dictionary, shapes, table,
//! schema and footer, placed by [`format::place_metadata`]. Each section is written
//! straight from the buffer the writer kept it in (nothing is assembled in memory).

use zring_platform::PendingFile;

use crate::error::{ArgumentError, Error, Result};
use crate::format::{self, Footer, Section, BLOCK};

/// The metadata sections' bytes.
pub(super) struct Metadata<'a> {
    pub(super) dict: &'a [u8],
    pub(super) shapes: &'a [u8],
    pub(super) table: &'a [u8],
    pub(super) schema: &'a [u8],
}

/// Writes `meta` and the footer after the data region that ends at `data_end`.
pub(super) fn write(
    file: &PendingFile,
    data_end: u64,
    record_count: u64,
    align: u32,
    meta: &Metadata<'_>,
) -> Result<()> {
    let parts = [meta.dict, meta.shapes, meta.table, meta.schema];
    let lens = parts.map(|p| p.len() as u64);
    let (offsets, footer_at) = format::place_metadata(data_end, lens)
        .ok_or(Error::InvalidArgument(ArgumentError::StoreTooLarge))?;
    let mut sections = [Section::default(); 4];
    for ((section, bytes), offset) in sections.iter_mut().zip(parts).zip(offsets) {
        *section = Section {
            offset,
            len: bytes.len() as u64,
            checksum: format::checksum(bytes),
        };
        file.write_all_at(bytes, offset)
            .map_err(|e| Error::io(file.path(), "writing the metadata", e))?;
    }
    let [dict, shapes, table, schema] = sections;
    let footer = Footer {
        major: format::FORMAT_MAJOR,
        minor: format::FORMAT_MINOR,
        record_count,
        align,
        data: Section {
            offset: BLOCK as u64,
            len: data_end - BLOCK as u64,
            checksum: 0,
        },
        dict,
        shapes,
        table,
        schema,
        file_len: footer_at + BLOCK as u64,
    };
    file.write_all_at(&footer.encode(), footer_at)
        .map_err(|e| Error::io(file.path(), "writing the footer", e))
}
