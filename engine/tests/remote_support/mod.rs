//! What the remote tests share: an object store wrapper that counts and fails
//! GETs, in-memory buckets, stores to read (with their local copies) and a small
//! HTTP/1.1 range server on 127.0.0.1 (object_store's real HTTP client, its retries
//! and timeouts) that can answer 503, drop or reset connections or answer slowly.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use zring_engine::remote::object_store::memory::InMemory;
use zring_engine::remote::object_store::path::Path as ObjectPath;
use zring_engine::remote::object_store::{
    self as os, CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload,
    PutResult,
};
use zring_engine::remote::{Connector, RemoteOptions};
use zring_engine::{Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};

use crate::common;

// ---------------------------------------------------------------------------------
// The wrapper: counts GETs (and their ranges) and fails the next N of them.

#[derive(Debug, Default)]
pub struct Faults {
    /// GETs of bytes (HEADs, which object_store sends as `GetOptions::head`, apart).
    pub gets: AtomicUsize,
    pub heads: AtomicUsize,
    pub ranges: Mutex<Vec<Range<u64>>>,
    pub fail_next: AtomicUsize,
}

#[derive(Debug)]
pub struct Counting {
    pub inner: Arc<dyn ObjectStore>,
    pub faults: Arc<Faults>,
}

impl std::fmt::Display for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> os::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> os::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &ObjectPath, options: GetOptions) -> os::Result<GetResult> {
        if options.head {
            self.faults.heads.fetch_add(1, Ordering::SeqCst);
            return self.inner.get_opts(location, options).await;
        }
        self.faults.gets.fetch_add(1, Ordering::SeqCst);
        if let Some(GetRange::Bounded(r)) = &options.range {
            self.faults.ranges.lock().expect("lock").push(r.clone());
        }
        let fail = self
            .faults
            .fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            return Err(os::Error::Generic {
                store: "Counting",
                source: "injected failure".into(),
            });
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, os::Result<ObjectPath>>,
    ) -> BoxStream<'static, os::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, os::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&ObjectPath>) -> os::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> os::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Runs a future on a small runtime of the test's own (uploads).
pub fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// An in-memory bucket holding `objects` (name, bytes), behind a counting wrapper.
pub fn bucket(objects: &[(&str, &[u8])]) -> (Arc<dyn ObjectStore>, Arc<Faults>) {
    let mem = Arc::new(InMemory::new());
    for (name, bytes) in objects {
        block(mem.put(&ObjectPath::from(*name), PutPayload::from(bytes.to_vec()))).expect("put");
    }
    let faults = Arc::new(Faults::default());
    let store: Arc<dyn ObjectStore> = Arc::new(Counting {
        inner: mem,
        faults: faults.clone(),
    });
    (store, faults)
}

pub fn open_in(
    store: &Arc<dyn ObjectStore>,
    name: &str,
    opts: &ReadOptions,
) -> zring_engine::Result<Store> {
    let conn = Connector::from_store(
        &format!("mem://bucket/{name}"),
        store.clone(),
        ObjectPath::from(name),
    );
    Store::open_at(conn, opts)
}

// ---------------------------------------------------------------------------------
// Stores to read.

pub struct Fixture {
    pub bytes: Vec<u8>,
    pub local: Store,
    pub _dir: tempfile::TempDir,
}

pub fn fixture_dense(codec: Codec, n: usize, width: usize) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("d.zr");
    let data = common::dense_records(n, width, 7, |i| i % 5 == 0);
    let opts = WriteOptions::with_codec(codec)
        .dictionary((codec == Codec::ZstdDict).then(common::test_dictionary));
    let mut w =
        Writer::create(&path, Schema::dense(DType::U8, &[width as u64]), opts).expect("create");
    w.append_dense(&data).expect("append");
    w.close().expect("close");
    finish(dir, &path)
}

pub fn fixture_ragged(codec: Codec, n: usize) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("r.zr");
    let r = common::ragged_records(n, 1, DType::I32, 700, 3);
    let opts = WriteOptions::with_codec(codec)
        .dictionary((codec == Codec::ZstdDict).then(common::test_dictionary));
    let mut w = Writer::create(&path, Schema::ragged(DType::I32, 1), opts).expect("create");
    w.append_ragged(&r.values, &r.cu_seqlens, &r.shapes)
        .expect("append");
    w.close().expect("close");
    finish(dir, &path)
}

pub fn finish(dir: tempfile::TempDir, path: &Path) -> Fixture {
    let bytes = std::fs::read(path).expect("read");
    let local = Store::open(path, ReadOptions::default()).expect("open local");
    Fixture {
        bytes,
        local,
        _dir: dir,
    }
}

pub fn batch(n: u64, len: usize, seed: u64) -> Vec<u64> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// A real HTTP server (object_store's HTTP client, retries and timeouts).

#[derive(Default)]
pub struct Server {
    /// Requests seen, as (method, range header).
    pub seen: Mutex<Vec<(String, String)>>,
    /// Answer the next N GETs with 503.
    pub fail_503: AtomicUsize,
    /// Close the connection without answering the next N GETs.
    pub drop_next: AtomicUsize,
    pub stop: AtomicBool,
    /// Wait this many milliseconds before answering each GET.
    pub delay_ms: AtomicU64,
    /// Answer the next GETs with these statuses, one each, in order (with S3's XML
    /// error body: `SlowDown` for 503, `InternalError` for 500, `AccessDenied` for 403).
    pub fail_with: Mutex<Vec<u16>>,
    /// Answer every GET with this status while it is not 0.
    pub fail_always: AtomicU64,
    /// For the next N GETs, promise the whole range (Content-Length) but send only
    /// half of it, then close the connection.
    pub short_next: AtomicUsize,
    /// For the next N GETs, send the headers and half of the body, then reset the
    /// connection (a TCP RST, not an orderly close).
    pub reset_mid_body: AtomicUsize,
    /// Reset the next N connections as soon as they are accepted, before a byte is
    /// read or sent.
    pub reset_on_accept: AtomicUsize,
    /// Connections accepted (those reset on accept included).
    pub accepted: AtomicUsize,
}

/// Closes `conn` with a TCP RST: with a zero linger time, closing a socket aborts
/// the connection instead of ending it with a FIN after the data sent.
fn reset(conn: TcpStream) {
    let _ = socket2::SockRef::from(&conn).set_linger(Some(Duration::ZERO));
    drop(conn);
}

/// An S3-style error response for `code`.
fn s3_error(code: u16) -> String {
    let (reason, s3) = match code {
        403 => ("Forbidden", "AccessDenied"),
        500 => ("Internal Server Error", "InternalError"),
        503 => ("Service Unavailable", "SlowDown"),
        _ => ("Error", "InternalError"),
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{s3}</Code><Message>{reason}</Message></Error>"
    );
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Serves the files of `root` on 127.0.0.1 (GET and HEAD, byte ranges, ETags).
pub fn serve(root: PathBuf) -> (String, Arc<Server>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = Arc::new(Server::default());
    let s = server.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            if s.stop.load(Ordering::SeqCst) {
                return;
            }
            let Ok(conn) = conn else { continue };
            s.accepted.fetch_add(1, Ordering::SeqCst);
            if take_one(&s.reset_on_accept) {
                reset(conn);
                continue;
            }
            let s = s.clone();
            let root = root.clone();
            std::thread::spawn(move || handle(conn, &root, &s));
        }
    });
    (format!("http://{addr}"), server)
}

pub fn handle(conn: TcpStream, root: &Path, s: &Server) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(20)));
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("/").to_string();
        let mut range = String::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("range") {
                    range = v.trim().to_string();
                }
            }
        }
        s.seen
            .lock()
            .expect("lock")
            .push((method.clone(), range.clone()));
        if method == "GET" {
            let delay = s.delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                std::thread::sleep(Duration::from_millis(delay));
            }
            let take = |n: &AtomicUsize| {
                n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |x| x.checked_sub(1))
                    .is_ok()
            };
            if take(&s.drop_next) {
                return;
            }
            if take(&s.fail_503) {
                let _ =
                    out.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
                continue;
            }
            let queued = {
                let mut q = s.fail_with.lock().expect("lock");
                (!q.is_empty()).then(|| q.remove(0))
            };
            let always = s.fail_always.load(Ordering::SeqCst) as u16;
            if let Some(code) = queued.or((always != 0).then_some(always)) {
                let _ = out.write_all(s3_error(code).as_bytes());
                continue;
            }
        }
        let short = method == "GET" && take_one(&s.short_next);
        let reset_mid = method == "GET" && !short && take_one(&s.reset_mid_body);
        let path = root.join(target.trim_start_matches('/'));
        let Ok(body) = std::fs::read(&path) else {
            let _ = out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
            continue;
        };
        let total = body.len() as u64;
        let etag = format!(
            "\"{:x}-{}\"",
            total,
            body.iter().take(64).map(|&b| u64::from(b)).sum::<u64>()
        );
        let (status, lo, hi) = match range.strip_prefix("bytes=") {
            Some(spec) => {
                let (a, b) = spec.split_once('-').unwrap_or(("", ""));
                let (lo, hi) = if a.is_empty() {
                    let n: u64 = b.parse().unwrap_or(0);
                    (total.saturating_sub(n), total)
                } else {
                    let lo: u64 = a.parse().unwrap_or(0);
                    let hi = b
                        .parse::<u64>()
                        .map(|h| (h + 1).min(total))
                        .unwrap_or(total);
                    (lo, hi)
                };
                ("206 Partial Content", lo, hi)
            }
            None => ("200 OK", 0, total),
        };
        let mut head = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nETag: {etag}\r\nLast-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\nAccept-Ranges: bytes\r\n",
            hi - lo
        );
        if status.starts_with("206") {
            head.push_str(&format!(
                "Content-Range: bytes {lo}-{}/{total}\r\n",
                hi.saturating_sub(1)
            ));
        }
        head.push_str("\r\n");
        if out.write_all(head.as_bytes()).is_err() {
            return;
        }
        if short || reset_mid {
            let half = lo as usize + (hi - lo) as usize / 2;
            let _ = out.write_all(&body[lo as usize..half]);
            if reset_mid {
                // Let the client take the headers and start on the body first, so
                // the reset meets a response under way.
                let _ = out.flush();
                std::thread::sleep(Duration::from_millis(20));
                reset(out);
            }
            return;
        }
        if method == "GET" && out.write_all(&body[lo as usize..hi as usize]).is_err() {
            return;
        }
    }
}

/// Takes one from a countdown; false once it is 0.
fn take_one(n: &AtomicUsize) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |x| x.checked_sub(1))
        .is_ok()
}

pub fn quick_retries() -> RemoteOptions {
    RemoteOptions::default()
        .backoff_initial(Duration::from_millis(5))
        .backoff_max(Duration::from_millis(50))
}

// ---------------------------------------------------------------------------------
// A small dataset on disk.

/// A dataset at `dir/ds`: one field, `label` (int64), in 3 shards of 5 records, record
/// `i` holding `i` (`common::label_dataset_of`).
pub fn label_dataset(dir: &Path) -> PathBuf {
    crate::common::label_dataset_of(dir, 3)
}
