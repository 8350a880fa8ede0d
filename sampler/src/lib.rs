//! Stateless, counter-based batch index generation for zring.
//!
//! A [`Sampler`] turns `(seed, step)` into the record indices of one batch
//! with pure arithmetic: no I/O, no shuffled array, no state to replay.
//! Any step of any epoch is computed in O(1), so training can resume,
//! skip or be split over ranks without coordination.
//!
//! # Contents
//!
//! - [`Sampler`]: build with [`Sampler::new`], read with [`Sampler::fill`]
//!   (or [`Sampler::batch`]), walk with [`Sampler::next_into`],
//!   [`Sampler::next_batch`], [`Sampler::seek`] or as an endless
//!   [`Iterator`], split with [`Sampler::shard`].
//! - [`EpochPlan`]: the same stream cut into epochs (a last partial step per
//!   epoch, split across ranks or dropped), finite or endless, with a worker
//!   stride; what the framework adapters iterate.
//! - [`Mode`]: [`Sequential`](Mode::Sequential), [`Iid`](Mode::Iid),
//!   [`Cyclic`](Mode::Cyclic); parses from `"sequential"`, `"iid"`,
//!   `"cyclic"`.
//! - [`Mixture`]: several sources in fixed proportions, one stateless stream
//!   of `(source, record)` picks (its rule is on the type).
//! - [`SamplerError`]: every rejected input, with the offending values.
//! - Below: [the stream](#the-stream), [modes](#modes),
//!   [the remainder rule](#the-remainder-rule),
//!   [datasets smaller than a batch](#datasets-smaller-than-a-batch),
//!   [sharding](#sharding), [performance](#performance).
//!
//! ```
//! use zring_sampler::{Mode, Sampler};
//!
//! // 10 records, global batches of 4, without replacement.
//! let sampler = Sampler::new(10, 4, Mode::Cyclic, 7)?;
//!
//! // Batches are a pure function of (seed, step): recomputing one is free.
//! assert_eq!(sampler.batch(1_000_000), sampler.batch(1_000_000));
//!
//! // The first cycle (positions 0..10) holds every record exactly once.
//! let mut cycle: Vec<u64> = (0..3).flat_map(|t| sampler.batch(t)).take(10).collect();
//! cycle.sort_unstable();
//! assert_eq!(cycle, (0..10).collect::<Vec<u64>>());
//!
//! // Rank 1 of 2 gets the second half of every global batch.
//! let rank1 = sampler.clone().shard(1, 2)?;
//! assert_eq!(rank1.batch(5), sampler.batch(5)[2..]);
//!
//! // Resume anywhere: seek, then keep stepping.
//! let mut it = sampler.clone();
//! it.seek(41);
//! assert_eq!(it.next_batch(), sampler.batch(41));
//! assert_eq!(it.step(), 42);
//! # Ok::<(), zring_sampler::SamplerError>(())
//! ```
//!
//! # The stream
//!
//! With `N` records and global batch size `B`, the sampler defines one
//! infinite stream of positions `p = 0, 1, 2, ...`; global batch `t` is
//! positions `[t*B, (t+1)*B)`. Positions are computed in `u128`, so every
//! step up to `2^64 - 1` is exact. [`Sampler::next_batch`] and friends keep
//! a step counter that wraps to 0 after `2^64 - 1`.
//!
//! # Modes
//!
//! - **Sequential**: position `p` is record `p mod N`. The seed is ignored.
//! - **Iid**: each position is an independent, exactly uniform draw from
//!   `[0, N)`, with replacement. The value is a counter hash of
//!   `(seed, p, round)` (a seeded Weyl sequence through wyrand's output
//!   function) reduced by Lemire's multiply-shift; draws that would bias the
//!   result are rejected and redrawn with the next `round`, so every `N` up
//!   to `2^64 - 1` is unbiased. For `N < 2^32` one 64-bit hash word serves
//!   two neighbouring positions, 32 bits each.
//! - **Cyclic**: without replacement. Positions are grouped into cycles of
//!   `N`: position `p` lies in cycle `c = p / N` at offset `o = p mod N` and
//!   reads record `perm_c(o)`, where `perm_c` is a bijection of `[0, N)`
//!   keyed by `(seed, c)`: an unbalanced Feistel network (6 multiply-shift
//!   rounds; 12 for `N <= 256`) on the next power of two, restricted to
//!   `[0, N)` by cycle walking. No `N`-sized array exists. Every cycle
//!   visits every record exactly once, each cycle uses a fresh permutation,
//!   and any `k` consecutive whole cycles visit each record exactly `k`
//!   times.
//!
//! In every mode the stream depends only on `(N, mode, seed)`: `B` just cuts
//! it into batches, so position `p` reads the same record for every batch
//! size.
//!
//! # The remainder rule
//!
//! Cyclic batches are always full: there is no `drop_last` and no short
//! batch. When `B` divides `N`, every cycle is exactly `N / B` batches and
//! those batches cover each record once. Otherwise cycles and batches are
//! out of phase: cycle `c` starts at offset `(c*N) mod B` inside batch
//! `floor(c*N / B)`, so a batch that straddles a boundary holds the tail of
//! cycle `c` followed by the head of cycle `c+1`. Two consequences:
//!
//! - Within such a straddling batch a record can appear twice, once from
//!   each cycle (never more often when `B <= N`).
//! - The boundary moves by `N mod B` positions every cycle and each cycle
//!   has its own permutation, so the records that share a batch with the
//!   next cycle (the "leftover" of a drop-last loader) change from cycle to
//!   cycle. Nothing is ever dropped.
//!
//! # Datasets smaller than a batch
//!
//! `N < B` is allowed in every mode. A cyclic batch then spans several
//! cycles, so each record appears in it between `floor(B/N) - 1` and
//! `ceil(B/N) + 1` times (about `B/N`). Sequential batches wrap around the
//! same way; iid batches are unaffected.
//!
//! # Sharding
//!
//! [`Sampler::shard`]`(rank, world)` gives `rank` the contiguous slice
//! `[rank*B/world, (rank+1)*B/world)` of every global batch; `B` must be
//! divisible by `world`. The ranks' batches concatenated in rank order are
//! exactly the global batch, and the global stream does not depend on
//! `world`. A sharded `fill` computes only its own positions.
//!
//! # Performance
//!
//! `fill` does one `u128` division per call (plus one key derivation per
//! cycle it touches in cyclic mode) and then allocation-free loops with no
//! data-dependent branches in the common path. On x86-64 CPUs with AVX2 the
//! vectorizable loops run in an AVX2 build, chosen at run time; the output
//! does not depend on it. Measured numbers are in
//! `docs/benchmarks/sampler.md`.

// The AVX2 builds are run through `zring_platform::with_avx2`, where the one
// `unsafe` call (to a `#[target_feature]` function, after the CPU check) lives.
#![forbid(unsafe_code)]

mod cyclic;
mod epochs;
mod error;
mod feistel;
mod hash;
mod iid;
mod mixture;
mod mode;
mod sampler;
mod sequential;

pub use epochs::EpochPlan;
pub use error::{BadValue, SamplerError};
pub use mixture::{Mixture, MixturePlan, MixtureSampler, Pick, MAX_PERIOD};
pub use mode::Mode;
pub use sampler::Sampler;
