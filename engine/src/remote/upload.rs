//! Uploading a finished local file as one object: a single conditional PUT when it
//! fits in one part, else a multipart upload whose parts go up several at a time
//! from a bounded buffer. Either way the object appears complete or not at all: a
//! multipart upload is only visible once completed, and a failed one is aborted.

use std::fs::File;
use std::future::Future;
use std::io::Read;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use object_store::retry::{RetryContext, RetryFailure, RetryPolicy};
use object_store::{
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, WriteMultipart,
};

use crate::error::{Error, Result};

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

/// Uploads the file at `local` as the object at `conn`; answers the object's ETag
/// when the store gives one. Without `overwrite`, an object that already exists is
/// an error (`AlreadyExists`): atomically for a single-part object (a
/// create-if-absent PUT); for a multipart upload, by a check just before the upload
/// starts (multipart completion cannot be conditional in object_store).
pub(crate) fn upload(
    conn: &Connector,
    local: &Path,
    overwrite: bool,
    opts: &RemoteOptions,
) -> Result<Option<String>> {
    let io = |what, e| Error::io(local, what, e);
    let mut file = File::open(local).map_err(|e| io("reading the staged store", e))?;
    let len = file
        .metadata()
        .map_err(|e| io("reading the staged store", e))?
        .len();
    let taken = || Error::AlreadyExists {
        path: conn.url.clone(),
    };
    if len <= PART_BYTES as u64 {
        let mut bytes = Vec::with_capacity(len as usize);
        file.read_to_end(&mut bytes)
            .map_err(|e| io("reading the staged store", e))?;
        return put_tagged(conn, bytes, overwrite)?.ok_or_else(taken);
    }
    if !overwrite && exists(conn)? {
        return Err(taken());
    }
    let store = conn.store()?;
    let location = conn.location.clone();
    let retry = PutMultipartOptions::default().with_retry_policy(Arc::new(PartRetry::new(opts)));
    let done = runtime::run(async move {
        let upload = match store.put_multipart_opts(&location, retry).await {
            Ok(u) => u,
            Err(e) => return Err(UploadError::Remote(e)),
        };
        let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut buf = vec![0u8; PART_BYTES];
        loop {
            // A blocking read on a runtime worker: the file was just written, so it
            // is in the page cache, and the other worker drives the parts meanwhile.
            let n = match read_full(&mut file, &mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    let _ = parts.abort().await;
                    return Err(UploadError::Local(e));
                }
            };
            if let Err(e) = parts.wait_for_capacity(PARTS_IN_FLIGHT).await {
                let _ = parts.abort().await;
                return Err(UploadError::Remote(e));
            }
            parts.write(&buf[..n]);
        }
        parts.finish().await.map_err(UploadError::Remote)
    })?;
    match done {
        Ok(done) => Ok(done.e_tag),
        Err(UploadError::Local(e)) => Err(io("reading the staged store", e)),
        Err(UploadError::Remote(e)) => Err(conn.site().err("uploading the store", e)),
    }
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

enum UploadError {
    Local(std::io::Error),
    Remote(object_store::Error),
}

/// Fills `buf` from `file` (short only at the end of the file).
fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
