//! Per-record metadata that grows with the record count (table entries, ragged
//! shapes), kept in bounded memory.
//!
//! Up to [`MEMORY_BYTES`] of each section stays in memory; past that the bytes go to a
//! temporary file beside the store, named like the store's own temporary file so that
//! the clean-up of a killed writer's leftovers removes it too. `close` copies the
//! section into place in [`COPY_BYTES`] pieces and checksums it on the way, so a
//! writer's memory does not grow with the number of records it has written (10 M
//! records would otherwise hold 320 MB of table entries until `close`).

use std::path::Path;

use xxhash_rust::xxh3::Xxh3;
use zring_platform::PendingFile;

use crate::error::{AllocFailure, Allocation, Error, Result};

/// The bytes of one section kept in memory before they go to the spill file.
pub(super) const MEMORY_BYTES: usize = 4 << 20;

/// The piece `write_to` copies at a time from the spill file.
const COPY_BYTES: usize = 1 << 20;

/// An append-only section: its first bytes in a temporary file, the rest in memory.
pub(super) struct Spill {
    /// What the section holds, for errors ("table entries").
    what: &'static str,
    mem: Vec<u8>,
    /// Created at the first spill; removed by [`Spill::discard`] or on drop.
    file: Option<PendingFile>,
    /// Bytes in `file` (all before `mem`).
    on_disk: u64,
}

impl Spill {
    pub(super) fn new(what: &'static str) -> Self {
        Self {
            what,
            mem: Vec::new(),
            file: None,
            on_disk: 0,
        }
    }

    /// The section's length in bytes.
    pub(super) fn len(&self) -> u64 {
        self.on_disk + self.mem.len() as u64
    }

    /// Whether any of the section went to a spill file.
    #[cfg(test)]
    pub(super) fn spilled(&self) -> bool {
        self.file.is_some()
    }

    /// Makes room for `more` bytes, first moving what memory holds to the spill file
    /// when `more` would take it past [`MEMORY_BYTES`]. `temp` names the spill file
    /// if one is created. Memory then holds at most the bound or one batch's bytes.
    pub(super) fn reserve(
        &mut self,
        more: usize,
        store: &Path,
        temp: impl FnOnce() -> Result<std::path::PathBuf>,
    ) -> Result<()> {
        if !self.mem.is_empty() && self.mem.len().saturating_add(more) > MEMORY_BYTES {
            self.flush(temp)?;
        }
        self.mem.try_reserve(more).map_err(|e| {
            Error::out_of_memory(
                Allocation::WriterMetadata { what: self.what },
                more as u64,
                Some(store),
                Some(AllocFailure::Reserve(e)),
            )
        })
    }

    /// Appends `bytes` (room was made by [`Spill::reserve`]).
    pub(super) fn extend(&mut self, bytes: &[u8]) {
        self.mem.extend_from_slice(bytes);
    }

    fn flush(&mut self, temp: impl FnOnce() -> Result<std::path::PathBuf>) -> Result<()> {
        let file = match &mut self.file {
            Some(f) => f,
            slot => {
                let path = temp()?;
                let f = PendingFile::create(&path)
                    .map_err(|e| Error::io(&path, "creating the writer's metadata file", e))?;
                slot.insert(f)
            }
        };
        file.write_all_at(&self.mem, self.on_disk)
            .map_err(|e| Error::io(file.path(), "writing the writer's metadata file", e))?;
        self.on_disk += self.mem.len() as u64;
        self.mem.clear();
        if self.mem.capacity() > MEMORY_BYTES {
            // One large batch grew it past the bound: give that back.
            self.mem.shrink_to(MEMORY_BYTES);
        }
        Ok(())
    }

    /// Writes the section at `offset` of `out` and returns its checksum (the format's
    /// XXH3-64 of the whole section).
    pub(super) fn write_to(&self, out: &PendingFile, offset: u64) -> Result<u64> {
        let mut hasher = Xxh3::new();
        if let Some(file) = &self.file {
            let mut piece = Vec::new();
            piece.try_reserve_exact(COPY_BYTES).map_err(|e| {
                Error::out_of_memory(
                    Allocation::WriterMetadata { what: self.what },
                    COPY_BYTES as u64,
                    Some(out.path()),
                    Some(AllocFailure::Reserve(e)),
                )
            })?;
            let mut at = 0;
            while at < self.on_disk {
                let n = (self.on_disk - at).min(COPY_BYTES as u64) as usize;
                piece.resize(n, 0);
                std::os::unix::fs::FileExt::read_exact_at(file.file(), &mut piece, at)
                    .map_err(|e| Error::io(file.path(), "reading the writer's metadata file", e))?;
                hasher.update(&piece);
                out.write_all_at(&piece, offset + at)
                    .map_err(|e| Error::io(out.path(), "writing the metadata", e))?;
                at += n as u64;
            }
        }
        hasher.update(&self.mem);
        out.write_all_at(&self.mem, offset + self.on_disk)
            .map_err(|e| Error::io(out.path(), "writing the metadata", e))?;
        Ok(hasher.digest())
    }

    /// Removes the spill file, if there is one.
    pub(super) fn discard(&mut self) {
        if let Some(f) = self.file.take() {
            f.discard();
        }
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        self.discard();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_in(dir: &Path) -> impl FnMut() -> Result<std::path::PathBuf> + '_ {
        let mut n = 0;
        move || {
            n += 1;
            Ok(dir.join(format!(".s.zr.{n}.zr-tmp")))
        }
    }

    #[test]
    fn a_spilled_section_is_written_whole_with_the_one_shot_checksum() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("s.zr");
        let mut temp = temp_in(dir.path());
        let mut s = Spill::new("table entries");
        let mut want = Vec::new();
        // Batches of varied sizes, one larger than the bound.
        for (k, len) in [
            1000,
            MEMORY_BYTES / 2,
            MEMORY_BYTES + 17,
            3,
            MEMORY_BYTES - 5,
        ]
        .into_iter()
        .enumerate()
        {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 + k) as u8).collect();
            s.reserve(bytes.len(), &store, &mut temp).expect("reserve");
            s.extend(&bytes);
            want.extend_from_slice(&bytes);
            assert!(s.mem.len() <= MEMORY_BYTES.max(bytes.len()));
        }
        assert!(s.spilled());
        assert_eq!(s.len(), want.len() as u64);
        let out = PendingFile::create(&dir.path().join("out")).expect("out");
        let sum = s.write_to(&out, 4096).expect("write");
        assert_eq!(sum, zring_platform::xxh3_64(&want));
        let got = std::fs::read(out.path()).expect("read");
        assert_eq!(&got[4096..], &want[..]);
        s.discard();
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().ends_with(".zr-tmp"))
            .collect();
        assert!(left.is_empty(), "spill files left: {left:?}");
    }

    #[test]
    fn a_small_section_never_touches_the_disk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("s.zr");
        let mut s = Spill::new("record shapes");
        s.reserve(8, &store, || panic!("no spill file for 8 bytes"))
            .expect("reserve");
        s.extend(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let out = PendingFile::create(&dir.path().join("out")).expect("out");
        assert_eq!(
            s.write_to(&out, 0).expect("write"),
            zring_platform::xxh3_64(&[1, 2, 3, 4, 5, 6, 7, 8])
        );
        assert!(!s.spilled());
    }
}
