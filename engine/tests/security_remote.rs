//! The remote promises of docs/security.md: cache keys for hostile URLs stay inside
//! the cache directory; a manifest at a URL names objects under its prefix only; a
//! server that claims a huge manifest, never answers, or answers garbage ends in a
//! typed error naming the URL, never a hang. (Needs the `remote` feature:
//! `cargo test -p zring-engine --features remote --test security_remote`.)
#![cfg(feature = "remote")]

mod common;
mod security_support;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;

use zring_engine::remote::object_store::memory::InMemory;
use zring_engine::remote::object_store::path::Path as ObjectPath;
use zring_engine::remote::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use zring_engine::remote::{CacheOptions, Connector, RemoteOptions, WholeObjects};

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use security_support::*;
use zring_engine::dataset::Dataset;
use zring_engine::{DType, Error, ManifestProblem, ReadOptions, Schema, Store, WriteOptions};

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

#[test]
fn cache_entries_for_hostile_urls_stay_inside_the_cache_directory() {
    let root = tempfile::tempdir().expect("tempdir");
    let src = root.path().join("src.zr");
    let data = common::dense_records(64, 32, 3, |_| false);
    common::write_dense(
        &src,
        &Schema::dense(DType::U8, &[32]),
        WriteOptions::default(),
        &data,
        1,
    )
    .expect("write");
    let bytes = fs::read(&src).expect("read");
    let mem = Arc::new(InMemory::new());
    block(mem.put(&ObjectPath::from("x.zr"), PutPayload::from(bytes))).expect("put");
    let store: Arc<dyn ObjectStore> = mem;
    let long = format!("mem://b/{}", "a/".repeat(4000));
    let long_name = format!("mem://b/{}", "n".repeat(70_000));
    let urls = [
        "mem://bucket/../../../../../../tmp/evil",
        "mem://bucket/..%2f..%2f..%2fevil",
        "../../../evil",
        "/etc/passwd",
        "mem://b/\u{2025}\u{ff0f}..\u{ff0f}\u{202e}evil\u{fffd}",
        "mem://b/ﬁ/../\u{1f600}/\u{0301}..",
        long.as_str(),
        long_name.as_str(),
    ];
    let cache = root.path().join("cache");
    for whole in [WholeObjects::Never, WholeObjects::Always] {
        let cached = CacheOptions::new(&cache, 64 << 20).whole(whole);
        let opts = ReadOptions::default().remote(RemoteOptions::default().cache(cached));
        for url in urls {
            let conn = Connector::from_store(url, store.clone(), ObjectPath::from("x.zr"));
            let s = Store::open_at(conn, &opts).expect("open");
            assert_eq!(s.gather_vec(&[0, 63]).expect("gather").len(), 64);
        }
    }
    let files = tree(root.path());
    assert!(files.len() > 3, "the cache was used: {files:?}");
    for p in files {
        assert!(
            p == src || p.starts_with(&cache),
            "{} is outside the cache",
            p.display()
        );
        let name = p.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(name.len() < 200, "a short name: {name}");
    }
}

/// A server on 127.0.0.1 that answers every request with `answer` (none: it
/// accepts and never answers).
fn scripted_server(answer: Option<&'static str>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let Some(answer) = answer else {
                held.push(conn);
                continue;
            };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().expect("clone"));
                let mut out = conn;
                loop {
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line.trim_end().is_empty() {
                            break;
                        }
                    }
                    if out.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

fn impatient() -> ReadOptions {
    ReadOptions::default().remote(
        RemoteOptions::default()
            .max_retries(1)
            .retry_timeout(Duration::from_secs(2))
            .backoff_initial(Duration::from_millis(5))
            .backoff_max(Duration::from_millis(20))
            .timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(2))
            .no_cache(true),
    )
}

#[test]
fn a_server_that_never_answers_is_a_timeout_error_not_a_hang() {
    let base = scripted_server(None);
    let t = Instant::now();
    let url = format!("{base}/x.zr");
    let err = expect_err(Store::open(&url, impatient()), "store");
    assert!(
        matches!(&err, Error::Remote { url: u, .. } if u == Path::new(&url)),
        "{err:?}"
    );
    let err = expect_err(Dataset::open(format!("{base}/ds"), impatient()), "dataset");
    assert!(matches!(err, Error::Remote { .. }), "{err:?}");
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
}

#[test]
fn a_server_claiming_a_huge_manifest_is_refused_before_the_body() {
    let base = scripted_server(Some(
        "HTTP/1.1 200 OK\r\nContent-Length: 5000000000000\r\nETag: \"e\"\r\n\
         Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\n",
    ));
    let t = Instant::now();
    let err = expect_err(Dataset::open(format!("{base}/ds"), impatient()), "dataset");
    assert!(
        matches!(
            &err,
            Error::Manifest {
                problem: ManifestProblem::TooLarge {
                    bytes: 5_000_000_000_000
                },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn a_server_answering_garbage_is_a_typed_error() {
    for answer in [
        "garbage\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nzz",
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-99999999999/100000000000\r\n\
         Content-Length: 100000000000\r\nETag: \"e\"\r\n\
         Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\nshort",
    ] {
        let base = scripted_server(Some(answer));
        let t = Instant::now();
        let url = format!("{base}/x.zr");
        let err = expect_err(Store::open(&url, impatient()), answer);
        println!("{answer:?}: {err}");
        assert_eq!(err.path(), Some(Path::new(&url)), "{err:?}");
        assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    }
}

#[test]
fn a_manifest_at_a_url_names_objects_under_its_prefix_only() {
    // A manifest under a URL prefix naming another bucket or a full URL: the
    // object is looked up under the prefix (or refused), never elsewhere.
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let good = manifest_of(&ds);
    let outside = root.path().join("x.zr");
    fs::copy(ds.join(&good.shards[0].files[0]), &outside).expect("copy");
    let base = format!("file://{}", ds.display());
    for name in [
        "s3://other-bucket/x.zr".to_string(),
        format!("file://{}", outside.display()),
        "s3:/other-bucket/x.zr".to_string(),
    ] {
        let mut m = good.clone();
        m.shards[0].files[0] = name.clone();
        write_manifest(&ds, &m);
        let err = expect_err(Dataset::open(&base, ReadOptions::default()), &name);
        println!("{name}: {err}");
        // Refused as an object path, or not found under the prefix.
        let under = match &err {
            Error::Remote { url, .. } => url.to_string_lossy().starts_with(&base),
            Error::InvalidArgument(_) => err.to_string().contains(&format!("{name:?}")),
            _ => false,
        };
        assert!(under, "{name}: {err:?}");
    }
}
