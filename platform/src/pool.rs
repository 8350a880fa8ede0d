//! A fixed pool of worker threads that help the calling thread run a batch of tasks.
//!
//! A gather is cut into `tasks` independent pieces; [`Pool::run`] lets up to `helpers`
//! pooled workers claim pieces alongside the caller, which works too instead of
//! sleeping, and returns once every piece has finished. Pieces are claimed with one
//! atomic increment; completion is an atomic count; idle workers park. There is no
//! mutex anywhere on this path, and many callers may run batches at once.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, Thread};
use std::time::Duration;

use crossbeam_queue::SegQueue;

use crate::config::Config;
use crate::once::{ForkOnce, InChild};
use crate::sync;
use crate::topology::{Basis, Placement};

/// How long an idle worker polls for new work before it parks: long enough to catch
/// the next batch of a tight gather loop, short enough not to burn a core for nothing.
const IDLE_SPIN: Duration = Duration::from_micros(50);
/// How many times a waiting caller polls completion before it parks.
const WAIT_SPINS: u32 = 2_000;

/// The task function of one batch, with its borrow lifetime erased (see `Job`).
type TaskFn = dyn Fn(usize) + Sync;

/// The atomics of `Job` come from `crate::sync` (loom-checked with `--cfg loom`).
struct Job {
    /// Points at the caller's closure. SAFETY (of the erasure): it is dereferenced only
    /// by a thread that claimed a task index below `tasks`, and the caller does not
    /// return from `run` (so the closure stays alive) until every claimed task has
    /// finished (`done == tasks`). Threads that claim later never dereference it.
    task: *const TaskFn,
    tasks: usize,
    next: sync::AtomicUsize,
    done: sync::AtomicUsize,
    panicked: sync::AtomicBool,
    /// The first panic payload, re-raised on the caller with its own message.
    payload: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    owner: Thread,
}

// SAFETY: the raw pointer is only dereferenced under the protocol described on `task`;
// the closure itself is Sync, so calling it from several threads is allowed.
unsafe impl Send for Job {}
// SAFETY: see Send.
unsafe impl Sync for Job {}

impl Job {
    /// Claims and runs tasks until none are left. Returns after the last claim.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.tasks {
                return;
            }
            // SAFETY: i < tasks was claimed by this thread, so the caller is still
            // inside `run` waiting for it (see the field's docs).
            let task = unsafe { &*self.task };
            if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| task(i))) {
                // Only on a panic: the lock is never taken on the normal path.
                if !self.panicked.swap(true, Ordering::Relaxed) {
                    if let Ok(mut slot) = self.payload.lock() {
                        *slot = Some(p);
                    }
                }
            }
            if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.tasks {
                self.owner.unpark();
            }
        }
    }
}

struct Worker {
    thread: OnceLock<Thread>,
    sleeping: AtomicBool,
}

/// A detached task (the async API's reads).
type Detached = Box<dyn FnOnce() + Send>;

struct Shared {
    queue: SegQueue<Arc<Job>>,
    detached: SegQueue<Detached>,
    workers: Vec<Worker>,
    shutdown: AtomicBool,
    /// The fork generation of the process that started the workers.
    fork_gen: u64,
    /// Batches given to `run` (see [`Pool::runs`]).
    runs: std::sync::atomic::AtomicU64,
}

/// A pool of `workers` threads. Dropping the pool stops them.
pub struct Pool {
    shared: Arc<Shared>,
}

thread_local! {
    static IS_WORKER: Cell<bool> = const { Cell::new(false) };
}

impl Pool {
    /// Starts `workers` threads; with `pin`, worker k is pinned to core k + 1 of
    /// [`Placement::default`] so the caller's usual first core stays free for the
    /// caller.
    pub fn new(workers: usize, pin: bool) -> std::io::Result<Self> {
        let placement = pin.then(Placement::default);
        Self::start(workers, placement.as_ref())
    }

    /// Starts `workers` threads, worker k pinned to `placement.core(k + 1)` (the
    /// placement's first core is left to the caller).
    pub fn pinned(workers: usize, placement: &Placement) -> std::io::Result<Self> {
        Self::start(workers, Some(placement))
    }

    fn start(workers: usize, placement: Option<&Placement>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            queue: SegQueue::new(),
            detached: SegQueue::new(),
            workers: (0..workers)
                .map(|_| Worker {
                    thread: OnceLock::new(),
                    sleeping: AtomicBool::new(false),
                })
                .collect(),
            shutdown: AtomicBool::new(false),
            fork_gen: crate::process::generation(),
            runs: std::sync::atomic::AtomicU64::new(0),
        });
        for k in 0..workers {
            let shared2 = Arc::clone(&shared);
            let core = placement.map(|p| p.core(k + 1));
            let spawned = thread::Builder::new()
                .name(format!("zring-worker-{k}"))
                .spawn(move || worker_loop(&shared2, k, core));
            let handle = match spawned {
                Ok(h) => h,
                Err(e) => {
                    // Stop the workers already started (Drop of the partial pool).
                    drop(Self { shared });
                    return Err(e);
                }
            };
            let _ = shared.workers[k].thread.set(handle.thread().clone());
        }
        Ok(Self { shared })
    }

    /// A pool as `config` describes: `config.threads` threads counting the caller
    /// (else the default below), workers pinned to `config.placement()` when pinning
    /// is on.
    pub fn with_config(config: &Config) -> std::io::Result<Self> {
        let placement = config.placement();
        let threads = config
            .threads
            .unwrap_or_else(|| default_threads(placement.as_ref()));
        Self::start(threads.max(1) - 1, placement.as_ref())
    }

    /// The process-wide pool, built from [`Config::global`] at first use (the `ZRING_*`
    /// environment unless the program installed a configuration). Workers are pinned
    /// only when the configuration says so (`ZRING_PIN=1` or `ZRING_CORES`). Pinning is
    /// opt-in because a machine often runs several zring processes (one per training
    /// rank or data-loader worker) that know nothing of each other: pinned by default,
    /// they would all crowd onto the same cores. Threads (workers + the caller):
    /// `threads` when set; else one per chosen core when the placement was chosen by
    /// NUMA node or listed explicitly (capped by `available_cores()`); else
    /// `available_cores()`.
    ///
    /// A forked child gets a pool of its own at its first use (the parent's threads do
    /// not exist there), also when the fork happened while the parent was starting its
    /// pool.
    ///
    /// [`Pool::share_global`] caps it for a process that is one of several doing
    /// the same work.
    pub fn global() -> &'static Pool {
        GLOBAL.get_or_init(|| {
            let mut config = Config::global().clone();
            let share = GLOBAL_SHARE.load(Ordering::Acquire);
            if config.threads.is_none() && share > 0 {
                let own = default_threads(config.placement().as_ref());
                config.threads = Some(own.min(share));
            }
            Pool::with_config(&config).unwrap_or_else(|_| Pool::inline())
        })
    }

    /// Caps the global pool at `threads` (the caller counted) in this process, for
    /// a process that shares the machine with siblings doing the same work: each of
    /// a data loader's W worker processes takes its 1/W of the cores, so that W
    /// pools of one thread per core do not crowd W times as many threads onto them
    /// (PyTorch caps its own intra-op threads in its workers for the same reason).
    ///
    /// Takes effect where this process has not built its global pool yet (a forked
    /// child builds its own at its first use) and no thread count was configured
    /// (`ZRING_THREADS`, [`Config::set_global`]): returns whether it will.
    pub fn share_global(threads: usize) -> bool {
        GLOBAL_SHARE.store(threads.max(1), Ordering::Release);
        GLOBAL.get().is_none() && Config::global().threads.is_none()
    }

    /// A pool with no workers: `run` executes everything on the caller.
    pub fn inline() -> Self {
        Self {
            shared: Arc::new(Shared {
                queue: SegQueue::new(),
                detached: SegQueue::new(),
                workers: Vec::new(),
                shutdown: AtomicBool::new(false),
                fork_gen: crate::process::generation(),
                runs: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// How many batches [`Pool::run`] has been given (whether or not workers helped):
    /// shows which pool a piece of work went to.
    pub fn runs(&self) -> u64 {
        self.shared.runs.load(Ordering::Relaxed)
    }

    /// The number of pooled worker threads (the caller is not counted).
    pub fn workers(&self) -> usize {
        self.shared.workers.len()
    }

    /// Runs `task(0) .. task(tasks - 1)` on the caller and up to `helpers` workers, and
    /// returns when all have finished. A panic in a task is re-raised here after every
    /// other task has finished.
    pub fn run<F: Fn(usize) + Sync>(&self, tasks: usize, helpers: usize, task: F) {
        self.shared.runs.fetch_add(1, Ordering::Relaxed);
        let helpers = helpers.min(self.workers()).min(tasks.saturating_sub(1));
        // A worker that runs a nested batch must not wait on its own pool, and a
        // forked child has none of the parent's threads.
        if helpers == 0 || IS_WORKER.with(|w| w.get()) || self.forked() {
            (0..tasks).for_each(task);
            return;
        }
        let task_ref: &(dyn Fn(usize) + Sync + '_) = &task;
        // SAFETY: only the lifetime is erased, to store the pointer in a 'static Job;
        // `run` does not return before `done == tasks` (see Job::task).
        let task_ptr: *const TaskFn = unsafe { std::mem::transmute(task_ref) };
        let job = Arc::new(Job {
            task: task_ptr,
            tasks,
            next: sync::AtomicUsize::new(0),
            done: sync::AtomicUsize::new(0),
            panicked: sync::AtomicBool::new(false),
            payload: Mutex::new(None),
            owner: thread::current(),
        });
        for _ in 0..helpers {
            self.shared.queue.push(Arc::clone(&job));
        }
        self.wake(helpers);
        job.work();
        let mut spins = 0u32;
        while job.done.load(Ordering::Acquire) < tasks {
            if spins < WAIT_SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                // A stale unpark token only causes one extra loop round.
                thread::park_timeout(Duration::from_millis(1));
            }
        }
        if job.panicked.load(Ordering::Relaxed) {
            if let Some(p) = job.payload.lock().ok().and_then(|mut slot| slot.take()) {
                panic::resume_unwind(p);
            }
            panic!("a zring pool task panicked");
        }
    }

    /// Runs `task` on a pool worker, detached from the caller (who typically waits on
    /// a `oneshot` future). With no workers it runs on the caller before returning.
    pub fn spawn(&self, task: impl FnOnce() + Send + 'static) {
        if self.workers() == 0 || self.forked() {
            // No worker can take it: a thread of its own keeps the caller (an async
            // runtime's thread) from blocking.
            let _ = thread::Builder::new()
                .name("zring-detached".into())
                .spawn(task);
            return;
        }
        self.shared.detached.push(Box::new(task));
        self.wake(1);
    }

    /// Whether this process is a fork of the one that started the workers (which do
    /// not exist here).
    fn forked(&self) -> bool {
        self.shared.fork_gen != crate::process::generation()
    }

    fn wake(&self, mut wanted: usize) {
        // Pairs with the worker's fence between announcing sleep and re-checking the
        // queues: either the worker sees the push, or this sees `sleeping`.
        std::sync::atomic::fence(Ordering::SeqCst);
        for worker in &self.shared.workers {
            if wanted == 0 {
                break;
            }
            if worker.sleeping.swap(false, Ordering::SeqCst) {
                if let Some(t) = worker.thread.get() {
                    t.unpark();
                }
                wanted -= 1;
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        for worker in &self.shared.workers {
            if let Some(t) = worker.thread.get() {
                t.unpark();
            }
        }
    }
}

/// The pool a piece of work runs on: the process-wide [`Pool::global`] (the default)
/// or a pool of the caller's own, so a loader or an embedding service can size the
/// threads its reads use without touching everyone else's.
#[derive(Clone, Default)]
pub struct PoolHandle(Option<Arc<Pool>>);

impl PoolHandle {
    /// The process-wide pool.
    pub fn global() -> Self {
        Self(None)
    }

    /// The pool `pool`.
    pub fn own(pool: Arc<Pool>) -> Self {
        Self(Some(pool))
    }

    /// The pool to run on.
    pub fn get(&self) -> &Pool {
        match &self.0 {
            Some(pool) => pool,
            None => Pool::global(),
        }
    }

    /// Whether this is the process-wide pool.
    pub fn is_global(&self) -> bool {
        self.0.is_none()
    }
}

impl From<Arc<Pool>> for PoolHandle {
    fn from(pool: Arc<Pool>) -> Self {
        Self::own(pool)
    }
}

impl std::fmt::Debug for PoolHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("PoolHandle::global()"),
            Some(pool) => write!(f, "PoolHandle::own({} workers)", pool.workers()),
        }
    }
}

/// The process-wide pool ([`Pool::global`]), rebuilt in a forked child at its first
/// use there.
static GLOBAL: ForkOnce<Pool> = ForkOnce::new(InChild::Recreate);

/// [`Pool::share_global`]'s cap on the global pool's threads; 0 for none.
static GLOBAL_SHARE: AtomicUsize = AtomicUsize::new(0);

/// The global pool's thread count without `ZRING_THREADS`: one per core the
/// placement chose by locality or by list (a NUMA node's cores, `ZRING_CORES`), so
/// every worker has a core of its own; otherwise one per available core, as before
/// placements existed.
fn default_threads(placement: Option<&Placement>) -> usize {
    let cores = crate::cpu::available_cores();
    match placement {
        Some(p) if *p.basis() != Basis::AllCores => cores.min(p.len()).max(1),
        _ => cores,
    }
}

static IDLE_HOOK: ForkOnce<fn()> = ForkOnce::new(InChild::Inherit);

/// Registers `hook`, which every pool worker calls before it parks (the io_uring
/// module releases registrations of closed files there). Only the first registration
/// counts.
pub fn on_idle(hook: fn()) {
    IDLE_HOOK.get_or_init(|| hook);
}

fn worker_loop(shared: &Shared, k: usize, core: Option<usize>) {
    IS_WORKER.with(|w| w.set(true));
    if let Some(core) = core {
        crate::cpu::pin_current_thread_to_core(core);
    }
    let me = &shared.workers[k];
    loop {
        if let Some(job) = shared.queue.pop() {
            job.work();
            continue;
        }
        if let Some(task) = shared.detached.pop() {
            // A panicking detached task drops its oneshot sender, which closes the
            // caller's future; the worker itself carries on.
            let _ = panic::catch_unwind(AssertUnwindSafe(task));
            continue;
        }
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        let start = std::time::Instant::now();
        let mut found = false;
        while start.elapsed() < IDLE_SPIN {
            if !shared.queue.is_empty() || !shared.detached.is_empty() {
                found = true;
                break;
            }
            std::hint::spin_loop();
        }
        if found {
            continue;
        }
        // Before sleeping (and after each timed-out park), let go of what the thread
        // holds for files closed meanwhile (io_uring registrations), so an idle worker
        // does not keep a deleted store's space for long.
        if let Some(hook) = IDLE_HOOK.get() {
            hook();
        }
        me.sleeping.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        // Re-check after announcing sleep: a push that missed the flag is seen here.
        if shared.queue.is_empty()
            && shared.detached.is_empty()
            && !shared.shutdown.load(Ordering::Acquire)
        {
            thread::park_timeout(Duration::from_millis(100));
        }
        me.sleeping.store(false, Ordering::Release);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// One task's output. SAFETY (of Sync): each cell is written by the one thread
    /// that claimed its task; loom itself checks that claim.
    struct Cell(loom::cell::UnsafeCell<usize>);
    // SAFETY: see the type's docs; loom reports any concurrent access.
    unsafe impl Sync for Cell {}

    /// Two helpers and the owner claim two tasks: each runs exactly once, and once
    /// the owner sees `done == tasks` every task's writes are visible to it (loom
    /// reports a data race on the cells otherwise).
    #[test]
    fn loom_pool_claiming_and_completion() {
        loom::model(|| {
            const TASKS: usize = 2;
            let cells: Arc<Vec<Cell>> = Arc::new(
                (0..TASKS)
                    .map(|_| Cell(loom::cell::UnsafeCell::new(0)))
                    .collect(),
            );
            let c = Arc::clone(&cells);
            // SAFETY: task i has the only access to cell i (see Cell).
            let task: Box<TaskFn> = Box::new(move |i| c[i].0.with_mut(|p| unsafe { *p += 1 }));
            let task: &'static TaskFn = Box::leak(task);
            let job = Arc::new(Job {
                task,
                tasks: TASKS,
                next: sync::AtomicUsize::new(0),
                done: sync::AtomicUsize::new(0),
                panicked: sync::AtomicBool::new(false),
                payload: Mutex::new(None),
                owner: thread::current(),
            });
            let helpers: Vec<_> = (0..2)
                .map(|_| {
                    let job = Arc::clone(&job);
                    loom::thread::spawn(move || job.work())
                })
                .collect();
            job.work();
            while job.done.load(Ordering::Acquire) < TASKS {
                loom::thread::yield_now();
            }
            for cell in cells.iter() {
                // SAFETY: every task has finished (done == TASKS, read with Acquire).
                assert_eq!(cell.0.with(|p| unsafe { *p }), 1);
            }
            for h in helpers {
                h.join().expect("helper");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_task_runs_exactly_once() {
        let pool = Pool::new(3, false).expect("pool");
        for tasks in [0usize, 1, 2, 7, 100, 1000] {
            let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
            pool.run(tasks, 3, |i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn a_helper_joins_every_batch_promptly() {
        // The caller's tasks wait until the worker has run one of the batch's tasks:
        // a worker that is not woken for a batch leaves the caller waiting, and the
        // batch fails after the outer timeout. An event, not a share of a time slice,
        // so a busy machine cannot fail it.
        let pool = Pool::new(1, false).expect("pool");
        let me = thread::current().id();
        for _ in 0..5 {
            let helped = AtomicUsize::new(0);
            pool.run(40, 1, |_| {
                if thread::current().id() != me {
                    helped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                let give_up = std::time::Instant::now() + Duration::from_secs(60);
                while helped.load(Ordering::Relaxed) == 0 && std::time::Instant::now() < give_up {
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            assert!(
                helped.load(Ordering::Relaxed) >= 1,
                "the worker ran none of the 40 tasks within 60 s"
            );
            // The worker sleeps between batches (parked past its idle spin), so the
            // next batch also proves the wake-up.
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn many_callers_share_one_pool() {
        let pool = Pool::new(2, false).expect("pool");
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200 {
                        pool.run(16, 2, |i| {
                            total.fetch_add(i, Ordering::Relaxed);
                        });
                    }
                });
            }
        });
        assert_eq!(
            total.load(Ordering::Relaxed),
            8 * 200 * (0..16).sum::<usize>()
        );
    }

    #[test]
    fn a_panicking_task_is_reraised_after_the_others_finish() {
        let pool = Pool::new(2, false).expect("pool");
        let finished = AtomicUsize::new(0);
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            pool.run(50, 2, |i| {
                if i == 10 {
                    panic!("boom");
                }
                finished.fetch_add(1, Ordering::Relaxed);
            })
        }));
        let payload = result.expect_err("re-raised");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"boom"),
            "the task's own message"
        );
        assert_eq!(finished.load(Ordering::Relaxed), 49);
    }

    #[test]
    fn a_forked_child_runs_batches_inline_and_spawns_threads() {
        let pool = Pool::new(2, false).expect("pool");
        pool.run(8, 2, |_| {});
        // The child only uses the pool (threads, atomics, malloc, which glibc makes
        // fork-safe).
        let end = zring_testkit::run_forked(Duration::from_secs(60), || {
            let hits = AtomicUsize::new(0);
            pool.run(100, 2, |_| {
                hits.fetch_add(1, Ordering::Relaxed);
            });
            let (tx, rx) = crate::oneshot::channel();
            pool.spawn(move || tx.send(7u8));
            let ok = hits.load(Ordering::Relaxed) == 100 && rx.wait() == Some(7);
            i32::from(!ok)
        });
        assert_eq!(end, zring_testkit::ChildEnd::Exited(0), "child failed");
    }

    #[test]
    fn with_no_workers_spawn_does_not_run_on_the_caller() {
        let pool = Pool::inline();
        let me = thread::current().id();
        let (tx, rx) = crate::oneshot::channel();
        pool.spawn(move || tx.send(thread::current().id()));
        assert_ne!(rx.wait(), Some(me));
    }

    #[test]
    fn spawned_tasks_run_on_workers_and_survive_panics() {
        let pool = Pool::new(2, false).expect("pool");
        let (tx, rx) = crate::oneshot::channel::<()>();
        pool.spawn(move || {
            let _tx = tx;
            panic!("detached boom");
        });
        assert_eq!(rx.wait(), None);
        let mut rxs = Vec::new();
        for i in 0..100u32 {
            let (tx, rx) = crate::oneshot::channel();
            pool.spawn(move || tx.send(i * 2));
            rxs.push(rx);
        }
        let sum: u32 = rxs.into_iter().map(|rx| rx.wait().expect("value")).sum();
        assert_eq!(sum, (0..100).map(|i| i * 2).sum());
    }

    #[test]
    fn pinned_workers_run_on_the_placements_cores_after_the_first() {
        let allowed = crate::topology::allowed_cores();
        let list: Vec<String> = allowed.iter().rev().map(usize::to_string).collect();
        let placement = Placement::explicit(&list.join(",")).expect("allowed cores");
        let pool = Pool::pinned(2, &placement).expect("pool");
        // Both workers are parked; each detached task wakes one and stays there long
        // enough that the other task finds the other worker.
        let (tx0, rx0) = crate::oneshot::channel();
        let (tx1, rx1) = crate::oneshot::channel();
        for tx in [tx0, tx1] {
            pool.spawn(move || {
                let mask = core_affinity::get_core_ids().unwrap_or_default();
                let name = thread::current().name().map(str::to_owned);
                std::thread::sleep(Duration::from_millis(50));
                tx.send((name, mask.into_iter().map(|c| c.id).collect::<Vec<_>>()));
            });
        }
        for rx in [rx0, rx1] {
            let (name, mask) = rx.wait().expect("task ran");
            let k: usize = name
                .and_then(|n| n.strip_prefix("zring-worker-").map(str::to_owned))
                .and_then(|k| k.parse().ok())
                .expect("ran on a pool worker");
            assert_eq!(mask, vec![placement.core(k + 1)], "worker {k}");
        }
    }

    #[test]
    fn inline_pool_runs_on_the_caller() {
        let pool = Pool::inline();
        let me = thread::current().id();
        pool.run(5, 4, |_| assert_eq!(thread::current().id(), me));
    }
}
