//! Uploading a store as one object while it is written: a single conditional PUT
//! when it fits in one part, else a multipart upload whose parts go up as soon as
//! they are written, several at a time, from bounded memory. Either way the object
//! appears complete or not at all: a multipart upload is only visible once
//! completed, and a failed or abandoned one is aborted.

use std::fs::File;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::retry::{RetryContext, RetryFailure, RetryPolicy};
use object_store::{
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, WriteMultipart,
};

use crate::error::{AllocFailure, Allocation, Error, InternalError, Result};

use super::object::Connector;
use super::options::RemoteOptions;
use super::runtime;

/// Bytes per part (S3's minimum part is 5 MiB, all but the last).
pub(crate) const PART_BYTES: usize = 8 << 20;
/// Parts uploading at once: the upload's memory is at most this many parts.
const PARTS_IN_FLIGHT: usize = 8;

/// Whether an object exists at `conn`'s location.
pub(crate) fn exists(conn: &Connector) -> Result<bool> {
    let store = conn.store()?;
    let (location, site) = (conn.location.clone(), conn.site());
    runtime::run(async move {
        match store.head(&location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(site.err("checking the destination", e)),
        }
    })?
}

/// Puts `bytes` as the object at `conn` in one request; without `overwrite`, only if
/// no object is there (create-if-absent): `Ok(false)` when one is, and nothing
/// changes.
pub(crate) fn put(conn: &Connector, bytes: Vec<u8>, overwrite: bool) -> Result<bool> {
    Ok(put_tagged(conn, bytes, overwrite)?.is_some())
}

/// [`put`], answering the new object's ETag (`Some(None)`: put, but the store gave
/// no ETag) or `None` when an object was there.
fn put_tagged(conn: &Connector, bytes: Vec<u8>, overwrite: bool) -> Result<Option<Option<String>>> {
    let store = conn.store()?;
    let location = conn.location.clone();
    let mode = if overwrite {
        PutMode::Overwrite
    } else {
        PutMode::Create
    };
    let put = runtime::run(async move {
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        store
            .put_opts(&location, PutPayload::from(bytes), opts)
            .await
    })?;
    match put {
        Ok(done) => Ok(Some(done.e_tag)),
        Err(object_store::Error::AlreadyExists { .. }) => Ok(None),
        Err(e) => Err(conn.site().err("uploading", e)),
    }
}

/// One store's upload, fed while the store is written: each part goes up as soon as
/// its bytes are final ([`PartUpload::send_ready`], from the writer after every
/// append), several at a time, and [`PartUpload::finish`] sends the rest of the
/// finished file and completes the upload. A store that ends up no larger than one
/// part is a single conditional PUT instead. The object appears complete or not at
/// all: a multipart upload is only visible once completed, and one that is dropped
/// unfinished (a failed or abandoned writer) is aborted.
///
/// Memory: at most [`PARTS_IN_FLIGHT`] parts; the writer waits while that many are
/// in flight, so a slow link slows the writer instead of growing its memory.
pub(crate) struct PartUpload {
    conn: Connector,
    overwrite: bool,
    retry: Arc<PartRetry>,
    /// The multipart upload, from the first part sent until finished or aborted.
    parts: Option<WriteMultipart>,
    /// Bytes of the file handed to `parts` (whole parts until `finish`).
    sent: u64,
}

impl PartUpload {
    /// An upload to `conn` that has sent nothing yet. Without `overwrite`, an object
    /// that exists when the upload would complete is an error (`AlreadyExists`):
    /// atomically for a single-part object (a create-if-absent PUT); for a multipart
    /// upload, by a check just before completion (object_store cannot make the
    /// completion conditional).
    pub(crate) fn new(conn: Connector, overwrite: bool, opts: &RemoteOptions) -> Self {
        Self {
            conn,
            overwrite,
            retry: Arc::new(PartRetry::new(opts)),
            parts: None,
            sent: 0,
        }
    }

    /// Sends every whole part of `file` (at `path`, for messages) that lies below
    /// `ready`, the end of the bytes that will not change, and was not sent yet. The
    /// first such part starts the multipart upload: the finished file will be larger
    /// than one part, since the store's metadata and footer follow `ready`.
    pub(crate) fn send_ready(&mut self, file: &File, path: &Path, ready: u64) -> Result<()> {
        while ready >= self.sent + PART_BYTES as u64 {
            let part = read_part(file, path, self.sent, PART_BYTES)?;
            self.send(part)?;
        }
        Ok(())
    }

    /// Sends what is left of the finished file at `local` and completes the upload;
    /// answers the object's ETag when the store gives one.
    pub(crate) fn finish(&mut self, local: &Path) -> Result<Option<String>> {
        let file =
            File::open(local).map_err(|e| Error::io(local, "reading the staged store", e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(local, "reading the staged store", e))?
            .len();
        if self.parts.is_none() && len <= PART_BYTES as u64 {
            let bytes = read_part(&file, local, 0, len as usize)?;
            return put_tagged(&self.conn, bytes, self.overwrite)?.ok_or_else(|| self.taken());
        }
        self.send_ready(&file, local, len)?;
        if self.sent < len {
            // The last part, shorter than the others.
            let part = read_part(&file, local, self.sent, (len - self.sent) as usize)?;
            self.send(part)?;
        }
        let parts = self
            .parts
            .take()
            .ok_or(Error::Internal(InternalError::Missing {
                what: "the multipart upload of a store larger than one part",
            }))?;
        if !self.overwrite {
            // Whatever the check answers, an upload not completed is aborted.
            let taken = exists(&self.conn);
            if !matches!(taken, Ok(false)) {
                let _ = runtime::run(parts.abort());
                return Err(taken.err().unwrap_or_else(|| self.taken()));
            }
        }
        match runtime::run(parts.finish())? {
            Ok(done) => Ok(done.e_tag),
            Err(e) => Err(self.conn.site().err("uploading the store", e)),
        }
    }

    /// Hands `part` to the multipart upload (starting it if this is the first),
    /// after waiting until fewer than [`PARTS_IN_FLIGHT`] parts are in flight.
    fn send(&mut self, part: Vec<u8>) -> Result<()> {
        let parts = match self.parts.take() {
            Some(parts) => parts,
            None => self.start()?,
        };
        let len = part.len() as u64;
        let (parts, waited) = runtime::run(async move {
            let mut parts = parts;
            let waited = parts.wait_for_capacity(PARTS_IN_FLIGHT).await;
            if waited.is_ok() {
                // Inside the runtime: `put` starts the part's request as a task.
                parts.put(Bytes::from(part));
            }
            (parts, waited)
        })?;
        if let Err(e) = waited {
            let _ = runtime::run(parts.abort());
            return Err(self.conn.site().err("uploading the store", e));
        }
        self.parts = Some(parts);
        self.sent += len;
        Ok(())
    }

    fn start(&self) -> Result<WriteMultipart> {
        let store = self.conn.store()?;
        let location = self.conn.location.clone();
        let opts = PutMultipartOptions::default().with_retry_policy(self.retry.clone());
        let upload = runtime::run(async move { store.put_multipart_opts(&location, opts).await })?
            .map_err(|e| self.conn.site().err("starting the store's upload", e))?;
        Ok(WriteMultipart::new_with_chunk_size(upload, PART_BYTES))
    }

    /// Aborts the upload now, if one was started (the writer failed: nothing it
    /// sent may stay behind, and the writer may live on until dropped).
    pub(crate) fn abandon(&mut self) {
        if let Some(parts) = self.parts.take() {
            let _ = runtime::run(parts.abort());
        }
    }

    fn taken(&self) -> Error {
        Error::AlreadyExists {
            path: self.conn.url.clone(),
        }
    }
}

impl Drop for PartUpload {
    /// An upload left unfinished (the writer failed or was dropped) is aborted, so
    /// the store keeps no parts of it.
    fn drop(&mut self) {
        self.abandon();
    }
}

/// Reads `len` bytes of `file` at `offset` into a new buffer (the writer's file was
/// just written, so this is a copy from the page cache).
fn read_part(file: &File, path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let io = |e| Error::io(path, "reading the staged store", e);
    let mut part = Vec::new();
    part.try_reserve_exact(len).map_err(|e| {
        Error::out_of_memory(
            Allocation::UploadPart,
            len as u64,
            Some(path),
            Some(AllocFailure::Reserve(e)),
        )
    })?;
    part.resize(len, 0);
    zring_platform::read_exact_at(file, &mut part, offset).map_err(io)?;
    Ok(part)
}

/// Restarts a part whose upload failed after the client's own retries: a connection
/// reset or a timeout while its body was being sent (which the client does not
/// retry, since a PUT's body may have been partly sent), or throttling and server
/// errors that outlasted them. Restarting a part is safe: a part number uploaded
/// again replaces the earlier one. `max_retries` restarts per part, with the
/// options' exponential backoff between them.
#[derive(Debug)]
struct PartRetry {
    max: usize,
    initial: Duration,
    max_backoff: Duration,
}

impl PartRetry {
    fn new(opts: &RemoteOptions) -> Self {
        Self {
            max: opts.max_retries,
            initial: opts.backoff_initial,
            max_backoff: opts.backoff_max,
        }
    }

    /// Whether a part that failed like `context` is worth another attempt.
    fn transient(context: &RetryContext) -> bool {
        match context.failure {
            RetryFailure::Transport(_) => true,
            RetryFailure::Status(status) => status.is_server_error() || status.as_u16() == 429,
            _ => false,
        }
    }
}

impl RetryPolicy for PartRetry {
    // The trait is declared with `async_trait`; this is the signature it expands to.
    fn retry<'life0, 'async_trait>(
        &'life0 self,
        context: RetryContext,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            if !Self::transient(&context) || context.attempt > self.max {
                return false;
            }
            let doublings = u32::try_from(context.attempt.saturating_sub(1)).unwrap_or(u32::MAX);
            let wait = self
                .initial
                .saturating_mul(2u32.saturating_pow(doublings.min(16)))
                .min(self.max_backoff);
            tokio::time::sleep(wait).await;
            true
        })
    }
}
