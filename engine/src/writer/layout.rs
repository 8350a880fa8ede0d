//! The metadata that `close` writes after the data region: dictionary, shapes, table,
//! schema and footer, placed by [`format::place_metadata`]. Each section is written
//! straight from where the writer kept it (its buffer, or for the table and shapes
//! their [`Spill`]): nothing is assembled in memory.

use zring_platform::PendingFile;

use crate::error::{ArgumentError, Error, Result};
use crate::format::{self, Footer, Section, BLOCK};

use super::spill::Spill;

/// The metadata sections' bytes.
pub(super) struct Metadata<'a> {
    pub(super) dict: &'a [u8],
    pub(super) shapes: &'a Spill,
    pub(super) table: &'a Spill,
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
    let lens = [
        meta.dict.len() as u64,
        meta.shapes.len(),
        meta.table.len(),
        meta.schema.len() as u64,
    ];
    let (offsets, footer_at) = format::place_metadata(data_end, lens)
        .ok_or(Error::InvalidArgument(ArgumentError::StoreTooLarge))?;
    let write_slice = |bytes: &[u8], offset: u64| -> Result<u64> {
        file.write_all_at(bytes, offset)
            .map_err(|e| Error::io(file.path(), "writing the metadata", e))?;
        Ok(format::checksum(bytes))
    };
    let checksums = [
        write_slice(meta.dict, offsets[0])?,
        meta.shapes.write_to(file, offsets[1])?,
        meta.table.write_to(file, offsets[2])?,
        write_slice(meta.schema, offsets[3])?,
    ];
    let mut sections = [Section::default(); 4];
    for (((section, len), offset), checksum) in
        sections.iter_mut().zip(lens).zip(offsets).zip(checksums)
    {
        *section = Section {
            offset,
            len,
            checksum,
        };
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
