//! From a URL to an object_store client: the scheme picks the service, credentials,
//! region and endpoint come from that service's standard environment variables
//! (`AWS_*`, `GOOGLE_*`, `AZURE_*`, through object_store's `from_env` builders),
//! then zring's retry and timeout settings and the caller's config keys apply.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreScheme, RetryConfig};
use url::Url;

use crate::error::{ArgumentError, Error, NoCredentials, ObjectChange, Result, UrlProblem};

use super::options::RemoteOptions;

/// Builds the object_store client of a store (and again in a forked child, whose
/// inherited connection pool belongs to the parent's runtime).
type Make = dyn Fn() -> Result<Arc<dyn ObjectStore>> + Send + Sync;

/// The client built in process `pid` (`None` before the first use).
type Current = Mutex<Option<(u32, Arc<dyn ObjectStore>)>>;

/// The client of one object, rebuilt after a fork.
#[derive(Clone)]
pub struct Connector {
    make: Arc<Make>,
    current: Arc<Current>,
    /// The object's path inside the store.
    pub(crate) location: ObjectPath,
    /// The URL, for messages.
    pub(crate) url: PathBuf,
    credentials: Credentials,
}

/// Where a client's credentials come from, as far as its errors need to say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Credentials {
    /// Configured (keys, a token file, a container endpoint), unsigned requests, or a
    /// service whose errors already name what is missing.
    Set,
    /// None configured for S3: object_store asks the instance metadata service, whose
    /// failure off the cloud names its endpoint, not the missing credentials.
    InstanceMetadata,
}

/// The S3 settings that give credentials, as an error that found none lists them.
const S3_CREDENTIALS: &str = "AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY, \
    AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";

/// Whether the S3 client of `url` has credentials configured (the environment, then
/// the caller's config keys), by object_store's own order of credential sources
/// (`AmazonS3Builder::build`): static keys, web identity, container credentials,
/// else the instance metadata service.
fn s3_credentials(url: &str, opts: &RemoteOptions) -> Credentials {
    let Ok(b) = configure(
        url,
        AmazonS3Builder::from_env(),
        &opts.config,
        AmazonS3Builder::with_config,
    ) else {
        // A bad key: building the client reports it.
        return Credentials::Set;
    };
    let has = |k: AmazonS3ConfigKey| b.get_config_value(&k).is_some_and(|v| !v.is_empty());
    let unsigned = b
        .get_config_value(&AmazonS3ConfigKey::SkipSignature)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let set = unsigned
        || has(AmazonS3ConfigKey::AccessKeyId)
        || has(AmazonS3ConfigKey::SecretAccessKey)
        || (has(AmazonS3ConfigKey::WebIdentityTokenFile) && has(AmazonS3ConfigKey::RoleArn))
        || has(AmazonS3ConfigKey::ContainerCredentialsRelativeUri)
        || (has(AmazonS3ConfigKey::ContainerCredentialsFullUri)
            && has(AmazonS3ConfigKey::ContainerAuthorizationTokenFile));
    if set {
        Credentials::Set
    } else {
        Credentials::InstanceMetadata
    }
}

/// What names a failed request of one object in its error: the URL, and where
/// credentials were to come from.
#[derive(Clone, Debug)]
pub(crate) struct ErrorSite {
    pub(crate) url: PathBuf,
    credentials: Credentials,
}

impl ErrorSite {
    /// `e`, from doing `what`, as the engine's error ([`remote_err`]); when no
    /// credentials were configured, its source says so first ([`NoCredentials`]).
    pub(crate) fn err(&self, what: &'static str, e: object_store::Error) -> Error {
        match (self.credentials, remote_err(&self.url, what, e)) {
            (
                Credentials::InstanceMetadata,
                Error::Remote {
                    url,
                    what,
                    kind: io::ErrorKind::Other,
                    source,
                },
            ) => Error::Remote {
                url,
                what,
                kind: io::ErrorKind::Other,
                source: Box::new(NoCredentials {
                    looked_for: S3_CREDENTIALS,
                    source,
                }),
            },
            (_, err) => err,
        }
    }
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// The client of the object at `url` (credentials from the environment).
    pub fn from_url(url: &str, opts: &RemoteOptions) -> Result<Self> {
        let (scheme, location) = parse(url)?;
        let credentials = match scheme {
            ObjectStoreScheme::AmazonS3 => s3_credentials(url, opts),
            _ => Credentials::Set,
        };
        let owned = url.to_string();
        let opts = opts.clone();
        let make = move || build(&owned, &opts);
        Ok(Self {
            credentials,
            ..Self::with(url, location, Arc::new(make))
        })
    }

    /// A client over an existing object store (tests wrap one to count or fail
    /// requests; embedders bring a configured one): `url` names it in messages.
    pub fn from_store(url: &str, store: Arc<dyn ObjectStore>, location: ObjectPath) -> Self {
        Self::with(url, location, Arc::new(move || Ok(store.clone())))
    }

    fn with(url: &str, location: ObjectPath, make: Arc<Make>) -> Self {
        Self {
            make,
            current: Arc::new(Mutex::new(None)),
            location,
            url: PathBuf::from(url),
            credentials: Credentials::Set,
        }
    }

    /// What names this object's failed requests.
    pub(crate) fn site(&self) -> ErrorSite {
        ErrorSite {
            url: self.url.clone(),
            credentials: self.credentials,
        }
    }

    /// The same client for another object of the same store (a dataset's shards).
    pub(crate) fn sibling(&self, url: &str, location: ObjectPath) -> Self {
        Self {
            make: self.make.clone(),
            current: self.current.clone(),
            location,
            url: PathBuf::from(url),
            credentials: self.credentials,
        }
    }

    /// The client for this process.
    pub(crate) fn store(&self) -> Result<Arc<dyn ObjectStore>> {
        let pid = std::process::id();
        let mut slot = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_ref() {
            Some((owner, s)) if *owner == pid => Ok(s.clone()),
            _ => {
                if let Some(inherited) = slot.take() {
                    // Its pooled connections' tasks lived on the parent's runtime.
                    std::mem::forget(inherited);
                }
                let s = (self.make)()?;
                *slot = Some((pid, s.clone()));
                Ok(s)
            }
        }
    }
}

/// The scheme and object path of `url`.
pub(crate) fn parse(url: &str) -> Result<(ObjectStoreScheme, ObjectPath)> {
    let parsed = Url::parse(url).map_err(|e| {
        url_err(
            url,
            UrlProblem::NotAUrl {
                reason: e.to_string(),
            },
        )
    })?;
    let (scheme, path) = ObjectStoreScheme::parse(&parsed).map_err(|e| {
        url_err(
            url,
            UrlProblem::NotAnObjectStore {
                reason: e.to_string(),
            },
        )
    })?;
    if path.as_ref().is_empty() {
        return Err(url_err(url, UrlProblem::NoObject));
    }
    Ok((scheme, path))
}

fn millis(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// An argument error about `url`.
pub(crate) fn url_err(url: &str, problem: UrlProblem) -> Error {
    Error::InvalidArgument(ArgumentError::Url {
        url: url.to_string(),
        problem,
    })
}

/// Applies the configuration `keys` (case-insensitive names of the builder's own
/// config keys `K`) to `builder` with `set`; an unknown key is an error naming it.
fn configure<B, K>(
    url: &str,
    mut builder: B,
    keys: &[(String, String)],
    set: impl Fn(B, K, String) -> B,
) -> Result<B>
where
    K: std::str::FromStr,
    K::Err: fmt::Display,
{
    for (k, v) in keys {
        let key = k.to_ascii_lowercase().parse::<K>().map_err(|e| {
            url_err(
                url,
                UrlProblem::ConfigKey {
                    key: k.clone(),
                    reason: e.to_string(),
                },
            )
        })?;
        builder = set(builder, key, v.clone());
    }
    Ok(builder)
}

/// Builds the client of `url` from the environment, `opts` and its config keys.
fn build(url: &str, opts: &RemoteOptions) -> Result<Arc<dyn ObjectStore>> {
    let (scheme, _) = parse(url)?;
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: opts.backoff_initial,
            max_backoff: opts.backoff_max,
            base: 2.0,
        },
        max_retries: opts.max_retries,
        retry_timeout: opts.retry_timeout,
    };
    let client_keys = [
        ("timeout", millis(opts.timeout)),
        ("connect_timeout", millis(opts.connect_timeout)),
    ];
    let keys: Vec<(String, String)> = client_keys
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .chain(opts.config.iter().cloned())
        .collect();
    let built_err = |e: object_store::Error| remote_err(url, "configuring the client", e);
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::Local => Arc::new(LocalFileSystem::new()),
        ObjectStoreScheme::AmazonS3 => {
            let b = AmazonS3Builder::from_env().with_url(url).with_retry(retry);
            let b = configure(url, b, &keys, AmazonS3Builder::with_config)?;
            Arc::new(b.build().map_err(built_err)?)
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            let b = GoogleCloudStorageBuilder::from_env()
                .with_url(url)
                .with_retry(retry);
            let b = configure(url, b, &keys, GoogleCloudStorageBuilder::with_config)?;
            Arc::new(b.build().map_err(built_err)?)
        }
        ObjectStoreScheme::MicrosoftAzure => {
            let b = MicrosoftAzureBuilder::from_env()
                .with_url(url)
                .with_retry(retry);
            let b = configure(url, b, &keys, MicrosoftAzureBuilder::with_config)?;
            Arc::new(b.build().map_err(built_err)?)
        }
        ObjectStoreScheme::Http => {
            let parsed = Url::parse(url).map_err(|e| {
                url_err(
                    url,
                    UrlProblem::NotAUrl {
                        reason: e.to_string(),
                    },
                )
            })?;
            let base = &parsed[..url::Position::BeforePath];
            let mut b = HttpBuilder::new().with_url(base).with_retry(retry);
            if parsed.scheme() == "http" {
                // An http:// URL asks for plain HTTP: allow it for this store.
                b = b.with_config(ClientConfigKey::AllowHttp, "true");
            }
            let b = configure(url, b, &keys, |b: HttpBuilder, k: ClientConfigKey, v| {
                b.with_config(k, v)
            })?;
            Arc::new(b.build().map_err(built_err)?)
        }
        other => {
            return Err(url_err(
                url,
                UrlProblem::UnsupportedScheme {
                    scheme: format!("{other:?}"),
                },
            ))
        }
    };
    Ok(store)
}

/// An object_store error as the engine's: not found and permission errors keep
/// their kind (Python raises `FileNotFoundError` / `PermissionError` for them).
pub(crate) fn remote_err(
    url: impl Into<PathBuf>,
    what: &'static str,
    e: object_store::Error,
) -> Error {
    let url = url.into();
    let kind = match &e {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        object_store::Error::Precondition { .. } | object_store::Error::NotModified { .. } => {
            return Error::ObjectChanged {
                url,
                change: ObjectChange::Precondition {
                    what,
                    source: std::sync::Arc::new(e),
                },
            }
        }
        _ => io::ErrorKind::Other,
    };
    Error::Remote {
        url,
        what,
        kind,
        source: Box::new(e),
    }
}

/// What the remote reads of one store have cost since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteStats {
    /// Ranged GETs sent (retries inside object_store count once).
    pub requests: u64,
    /// Bytes those GETs returned.
    pub bytes: u64,
    /// Cache chunks served from the local cache.
    pub cache_hits: u64,
    /// Cache chunks fetched (and written to the cache).
    pub cache_misses: u64,
    /// 1 when opening the store downloaded the whole object into the cache (its
    /// GETs are in `requests` and `bytes`), else 0.
    pub whole_fetches: u64,
    /// 1 when the store was opened on a whole-object entry already in the cache
    /// (no GET: only the HEAD that names the object's version), else 0.
    pub whole_hits: u64,
}

/// The counters behind [`RemoteStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) requests: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
    pub(crate) cache_misses: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> RemoteStats {
        RemoteStats {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            cache_misses: self.cache_misses.load(Ordering::Relaxed),
            whole_fetches: 0,
            whole_hits: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic() -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: "error sending request for url (http://169.254.169.254/latest/api/token)"
                .into(),
        }
    }

    #[test]
    fn keys_in_the_options_are_credentials() {
        let opts = RemoteOptions::default()
            .config([("aws_access_key_id", "k"), ("aws_secret_access_key", "s")]);
        assert_eq!(s3_credentials("s3://b/k", &opts), Credentials::Set);
        let unsigned = RemoteOptions::default().config([("aws_skip_signature", "true")]);
        assert_eq!(s3_credentials("s3://b/k", &unsigned), Credentials::Set);
    }

    #[test]
    fn a_request_without_credentials_says_none_were_set() {
        let site = ErrorSite {
            url: PathBuf::from("s3://b/k.zr"),
            credentials: Credentials::InstanceMetadata,
        };
        let err = site.err("opening the store", generic());
        let text = err.to_string();
        assert!(text.starts_with("s3://b/k.zr: opening the store failed: no credentials are set (none of AWS_ACCESS_KEY_ID"), "{text}");
        assert!(text.contains("169.254.169.254"), "{text}");
        let inner = std::error::Error::source(&err).expect("a source");
        assert!(inner.downcast_ref::<NoCredentials>().is_some());
        // Not found and refused keep their kind and say nothing of credentials.
        let missing = site.err(
            "opening the store",
            object_store::Error::NotFound {
                path: "k.zr".into(),
                source: "404".into(),
            },
        );
        assert!(matches!(
            missing,
            Error::Remote {
                kind: io::ErrorKind::NotFound,
                ..
            }
        ));
        assert!(!missing.to_string().contains("no credentials"));
        let configured = ErrorSite {
            credentials: Credentials::Set,
            ..site
        };
        assert!(!configured
            .err("opening the store", generic())
            .to_string()
            .contains("no credentials"));
    }
}
