//! Views (one store at one placement) and the checks that turn the caller's streams
//! into a validated plan.

use std::sync::Arc;

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
        }
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
            let kind = match &schema.layout {
                Layout::Ragged { ndim } => Kind::Ragged { ndim: *ndim },
                // The batch axis is prepended once the shard length is known.
                Layout::Dense { item_shape } => Kind::Dense {
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

    /// Whether any view wants pinned buffers.
    pub(crate) fn any_pinned(&self) -> bool {
        self.streams
            .iter()
            .any(|p| p.views.iter().any(View::is_pinned))
    }
}
