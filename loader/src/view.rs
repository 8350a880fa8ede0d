//! Views (one store at one placement) and the checks that turn the caller's streams
//! into a validated plan.

use std::sync::Arc;

use crate::decode::ImageDecode;
use crate::error::{LoaderError, OptionsError, Result};
use crate::schedule::Schedule;
use zring_engine::dataset::DatasetField;
use zring_engine::{Concat, DType, Layout, Records, Store};

/// What a view reads: any [`Records`] (a store, or one field of a dataset), shared.
pub type Source = Arc<dyn Records>;

/// One placement's view of a store (or of a dataset's field): which source to gather
/// from, and into what kind of memory. A loader with `S` views per stream cuts every
/// global batch into `S` equal shards; shard `k` of every stream is gathered through
/// view `k`.
#[derive(Clone, Debug)]
pub struct View {
    store: Source,
    pinned: bool,
    /// Encoded images decoded on the way into the batch (see [`View::decoded`]).
    decode: Option<Arc<ImageDecode>>,
}

impl View {
    /// Gathers `records` (a [`Store`], a [`DatasetField`], any [`Records`]) into
    /// ordinary (pageable) aligned host buffers.
    pub fn new(records: impl Records + 'static) -> Self {
        Self::shared(Arc::new(records), false)
    }

    /// Gathers `records` into page-locked (`mlock`ed) buffers, ready for DMA to a
    /// device. Pinning needs `RLIMIT_MEMLOCK` room for (workers + prefetch + 1) shards;
    /// if it is lacking, the step that cannot pin fails with the OS error.
    pub fn pinned(records: impl Records + 'static) -> Self {
        Self::shared(Arc::new(records), true)
    }

    /// A view of records already shared, into pinned buffers or not.
    pub fn shared(records: Source, pinned: bool) -> Self {
        Self {
            store: records,
            pinned,
            decode: None,
        }
    }

    /// This view with its records (encoded images: ragged, one-dimensional `u8`
    /// records of JPEG or PNG bytes) decoded by `decode`: the stream's tensor is
    /// then a dense `u8` batch of pixels, `(shard_len, *decode.item_shape())`,
    /// decoded on the engine's pool straight into it with the step's epoch. Every
    /// view of a stream must decode alike. A bad record skipped or substituted
    /// ([`OnError`](crate::OnError)) is skipped or substituted in every stream of
    /// its shard.
    pub fn decoded(mut self, decode: ImageDecode) -> Self {
        self.decode = Some(Arc::new(decode));
        self
    }

    /// How this view's records are decoded, if they are.
    pub fn decode(&self) -> Option<&ImageDecode> {
        self.decode.as_deref()
    }

    /// The records read through this view.
    pub fn source(&self) -> &dyn Records {
        &*self.store
    }

    /// Whether this view's buffers are page-locked.
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }
}

impl From<Store> for View {
    fn from(store: Store) -> Self {
        View::new(store)
    }
}

impl From<&Store> for View {
    fn from(store: &Store) -> Self {
        View::new(store.clone())
    }
}

impl From<Concat> for View {
    fn from(records: Concat) -> Self {
        View::new(records)
    }
}

impl From<DatasetField> for View {
    fn from(field: DatasetField) -> Self {
        View::new(field)
    }
}

/// How one stream's shard is gathered.
#[derive(Debug)]
pub(crate) enum Kind {
    /// `shard_bytes` per full shard, delivered with `shape = (shard_len,
    /// *item_shape)`; a shorter shard (an epoch's last step) has `item_bytes` per
    /// record and its own shape.
    Dense {
        shard_bytes: usize,
        shape: Arc<[usize]>,
        item_bytes: usize,
    },
    Ragged {
        ndim: usize,
    },
    /// Encoded images decoded into `(shard_len, *item_shape)` `u8` pixels.
    Image {
        decode: Arc<ImageDecode>,
        /// `(shard_len, *item_shape)`, shared by every full shard.
        shape: Arc<[usize]>,
    },
}

#[derive(Debug)]
pub(crate) struct StreamPlan {
    pub(crate) name: Arc<str>,
    pub(crate) views: Vec<View>,
    pub(crate) kind: Kind,
    pub(crate) dtype: DType,
}

/// Validated streams and batch geometry.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) names: Arc<[Arc<str>]>,
    pub(crate) streams: Vec<StreamPlan>,
    /// Views per stream, i.e. shards per step.
    pub(crate) shards: usize,
    /// Indices per shard.
    pub(crate) shard_len: usize,
}

impl Plan {
    /// Checks the streams against each other and against the schedule.
    pub(crate) fn new(streams: Vec<(String, Vec<View>)>, schedule: &Schedule) -> Result<Self> {
        let (first_name, first_views) = match streams.first() {
            Some((n, v)) => (n.clone(), v),
            None => return Err(LoaderError::NoStreams),
        };
        let shards = first_views.len();
        let records = first_views.first().map_or(0, |v| v.store.len());
        let mut plans: Vec<StreamPlan> = Vec::with_capacity(streams.len());
        for (name, views) in streams {
            if plans.iter().any(|p| *p.name == *name) {
                return Err(LoaderError::DuplicateStream { name });
            }
            let Some(view0) = views.first() else {
                return Err(LoaderError::NoViews { stream: name });
            };
            if views.len() != shards {
                return Err(LoaderError::UnequalViews {
                    stream: name,
                    views: views.len(),
                    first_stream: first_name,
                    expected: shards,
                });
            }
            let schema = view0.store.schema().clone();
            for (k, v) in views.iter().enumerate() {
                if v.store.len() != records {
                    return Err(LoaderError::RecordCountMismatch {
                        stream: name,
                        view: k,
                        records: v.store.len(),
                        expected: records,
                    });
                }
                if v.store.schema().layout != schema.layout
                    || v.store.schema().dtype != schema.dtype
                {
                    return Err(LoaderError::SchemaMismatch {
                        stream: name,
                        view: k,
                    });
                }
            }
            let decode = view0.decode.clone();
            for (k, v) in views.iter().enumerate() {
                if v.decode.as_deref() != decode.as_deref() {
                    return Err(LoaderError::DecodeMismatch {
                        stream: name,
                        view: k,
                    });
                }
            }
            if let Some(decode) = &decode {
                decode
                    .check_source(&*view0.store, &name)
                    .map_err(|source| LoaderError::InvalidDecode {
                        stream: name.clone(),
                        source: Box::new(source),
                    })?;
            }
            let kind = match (&schema.layout, decode) {
                (_, Some(decode)) => Kind::Image {
                    shape: decode.item_shape().to_vec().into(),
                    decode,
                },
                (Layout::Ragged { ndim }, None) => Kind::Ragged { ndim: *ndim },
                // The batch axis is prepended once the shard length is known.
                (Layout::Dense { item_shape }, None) => Kind::Dense {
                    shard_bytes: 0,
                    item_bytes: 0,
                    shape: item_shape
                        .iter()
                        .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
                        .collect(),
                },
            };
            plans.push(StreamPlan {
                name: name.into(),
                views,
                kind,
                dtype: schema.dtype,
            });
        }
        if schedule.len() > records {
            return Err(LoaderError::SamplerTooLong {
                sampler_len: schedule.len(),
                records,
            });
        }
        let batch = schedule.batch_size();
        if batch % shards != 0 {
            return Err(LoaderError::BatchNotDivisible {
                batch,
                views: shards,
            });
        }
        // An epoch's last step may be shorter: it must split equally too.
        if let Some(&records) = schedule.batch_lens().iter().find(|&&n| n % shards != 0) {
            return Err(LoaderError::StepNotDivisible {
                records,
                views: shards,
            });
        }
        let shard_len = batch / shards;
        for p in &mut plans {
            if let Kind::Dense {
                shard_bytes,
                shape,
                item_bytes: record_bytes,
            } = &mut p.kind
            {
                let item_bytes = p.views[0].store.schema().item_bytes().unwrap_or(0);
                let width = usize::try_from(item_bytes).ok();
                let bytes = width
                    .and_then(|w| w.checked_mul(shard_len))
                    .ok_or_else(|| {
                        LoaderError::InvalidOptions(OptionsError::ShardTooLarge {
                            stream: p.name.to_string(),
                            records: shard_len,
                            record_bytes: item_bytes,
                        })
                    })?;
                *shard_bytes = bytes;
                *record_bytes = width.unwrap_or(0);
                *shape = std::iter::once(shard_len)
                    .chain(shape.iter().copied())
                    .collect();
            }
            if let Kind::Image { shape, .. } = &mut p.kind {
                *shape = std::iter::once(shard_len)
                    .chain(shape.iter().copied())
                    .collect();
            }
        }
        Ok(Self {
            names: plans.iter().map(|p| Arc::clone(&p.name)).collect(),
            streams: plans,
            shards,
            shard_len,
        })
    }

    /// Buffers (one per stream and shard) in one step.
    pub(crate) fn buffers_per_step(&self) -> usize {
        self.streams.len() * self.shards
    }

    /// Ragged tensors in one step (each has a `cu_seqlens` and a `shapes` vector).
    pub(crate) fn ragged_per_step(&self) -> usize {
        self.streams
            .iter()
            .filter(|p| matches!(p.kind, Kind::Ragged { .. }))
            .count()
            * self.shards
    }

    /// Whether any stream decodes images (its shards are decoded first, and the
    /// other streams read the records the decode kept).
    pub(crate) fn any_images(&self) -> bool {
        self.streams
            .iter()
            .any(|p| matches!(p.kind, Kind::Image { .. }))
    }

    /// Whether any view wants pinned buffers.
    pub(crate) fn any_pinned(&self) -> bool {
        self.streams
            .iter()
            .any(|p| p.views.iter().any(View::is_pinned))
    }
}
