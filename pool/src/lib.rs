//! A persistent thread pool implementing the core's `Parallel` trait.
//!
//! `threads - 1` workers wait for jobs; the calling thread works too. A job
//! is a slice of items and a function; threads claim item indices from an
//! atomic counter, so each item is handed to exactly one thread, and the call
//! returns only when every worker has finished the job.
//!
//! Decode runs hundreds of small matmuls back to back, so an idle worker
//! first spins on an atomic generation counter for up to [`SPIN`] and only
//! then parks on a condvar; the caller takes the futex path (a notify) only
//! when some worker is actually parked, and likewise waits for the workers
//! by spinning before it parks.
//!
//! On big.LITTLE boards the pool runs on the biggest cores only (see
//! [`big_cores`]) and pins each thread, the caller included, to one of them.

use kestrel_core::parallel::Parallel;
use std::cell::UnsafeCell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle thread spins before it parks. Prefill has serial gaps
/// of a few hundred microseconds between jobs (a batch's RoPE and cache
/// stores, activation quantization, norms): at 100 µs the worker parked in
/// them ~1,000 times a second (10% of the CPU idle, `vmstat`) and each job
/// after one paid a wake-up; at 2 ms it does not (pp512 of the 0.5B q4 file
/// 356 -> 416 tok/s, medians of 10 alternated runs, AMD EPYC, 2 threads;
/// the same bits, so the file's quality: docs/benchmarks.md).
pub const SPIN: Duration = Duration::from_micros(2000);

/// A type-erased job: `run(ctx, i)` processes item `i`.
#[derive(Clone, Copy)]
struct Job {
    run: unsafe fn(*const (), usize),
    ctx: *const (),
    n: usize,
}

/// Who is parked; only touched under the mutex, so that a notify cannot be
/// lost between a thread's last check and its wait.
struct Control {
    /// Workers parked (or about to park) on `start`.
    sleeping: usize,
    /// The caller is parked (or about to park) on `done`.
    caller_waiting: bool,
}

struct Shared {
    control: Mutex<Control>,
    start: Condvar,
    done: Condvar,
    /// Bumped (Release) once per job after `job` is written; workers read
    /// `job` only after observing a new value (Acquire).
    generation: AtomicU64,
    shutdown: AtomicBool,
    /// The job of the current generation. Written only by the caller, only
    /// while no worker can read it (see `for_each_mut`).
    job: UnsafeCell<Option<Job>>,
    /// Next item index to hand out.
    next: AtomicUsize,
    /// Workers that have not finished the current generation.
    pending: AtomicUsize,
    /// A worker's call of the job function panicked (re-raised by the caller).
    panicked: AtomicBool,
}

// SAFETY: `job` (the only non-Sync field, an UnsafeCell holding raw
// pointers) follows a single-writer protocol: the caller writes it only when
// `pending == 0`, i.e. after every worker has finished the previous
// generation (Acquire on `pending` pairs with the workers' AcqRel decrement)
// and before bumping `generation` (Release); a worker reads it only after
// observing the new generation (Acquire), and then decrements `pending`
// only after its last use. Reads and writes therefore never overlap. The
// pointers inside point to a `Ctx` that is `Sync` and outlives the job.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointers are only used under that protocol.
unsafe impl Send for Shared {}

/// The pool.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    threads: usize,
    pinned: bool,
    /// The caller's affinity before pinning, restored on drop (if dropped
    /// on the same thread).
    saved: Option<(std::thread::ThreadId, Affinity)>,
}

struct Ctx<'f, T> {
    items: *mut T,
    f: &'f (dyn Fn(usize, &mut T) + Sync),
}

/// Processes item `i` of the job whose context is `ctx`.
///
/// # Safety
/// `ctx` points to a live `Ctx<T>` whose `items` has more than `i` elements,
/// and no other thread is given the same `i`.
unsafe fn trampoline<T>(ctx: *const (), i: usize) {
    // SAFETY: guaranteed by the caller (see above).
    unsafe {
        let c = &*(ctx as *const Ctx<'_, T>);
        (c.f)(i, &mut *c.items.add(i));
    }
}

fn claim_and_run(shared: &Shared, job: Job) {
    loop {
        let i = shared.next.fetch_add(1, Ordering::AcqRel);
        if i >= job.n {
            break;
        }
        // SAFETY: `i < n` and `fetch_add` hands each index out once; the
        // context lives until every worker has decremented `pending`
        // (for_each_mut waits for that).
        unsafe { (job.run)(job.ctx, i) };
    }
}

/// Spins until `done()` or until [`SPIN`] has passed; true if `done()`.
fn spin_until(mut done: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    loop {
        for _ in 0..64 {
            if done() {
                return true;
            }
            std::hint::spin_loop();
        }
        if t.elapsed() >= SPIN {
            return done();
        }
    }
}

fn lock(m: &Mutex<Control>) -> std::sync::MutexGuard<'_, Control> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn worker(shared: Arc<Shared>, core: Option<usize>) {
    if let Some(c) = core {
        pin_current(c);
    }
    let mut seen = 0u64;
    loop {
        let fresh = || shared.generation.load(Ordering::Acquire) != seen;
        if !spin_until(fresh) {
            let mut c = lock(&shared.control);
            c.sleeping += 1;
            while shared.generation.load(Ordering::Acquire) == seen {
                c = shared.start.wait(c).unwrap_or_else(|e| e.into_inner());
            }
            c.sleeping -= 1;
        }
        // Generations advance only after every worker has finished the
        // previous one, so this is exactly `seen + 1`.
        seen = shared.generation.load(Ordering::Acquire);
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: we observed the new generation with Acquire, and the
        // caller will not write `job` again until we decrement `pending`
        // (see `impl Sync for Shared`).
        let job = unsafe { *shared.job.get() };
        if let Some(job) = job {
            // A panic must not kill the worker before it decrements
            // `pending` (the caller would wait forever): catch it here and
            // let the caller re-raise it.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                claim_and_run(&shared, job)
            }));
            if r.is_err() {
                shared.panicked.store(true, Ordering::Relaxed);
            }
        }
        if shared.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Last one out: wake the caller if it stopped spinning. The
            // mutex orders this check against the caller's flag-then-wait.
            let c = lock(&shared.control);
            if c.caller_waiting {
                shared.done.notify_one();
            }
        }
    }
}

impl Pool {
    /// A pool running `threads` tasks at once (the caller plus
    /// `threads - 1` workers), unpinned.
    pub fn new(threads: usize) -> Pool {
        Pool::with_cores(threads, &[])
    }

    /// A pool of `threads` tasks; when `cores` has at least `threads`
    /// entries, the caller is pinned to `cores[0]` and worker `i` to
    /// `cores[i]`. Otherwise (including `cores` empty) nothing is pinned.
    pub fn with_cores(threads: usize, cores: &[usize]) -> Pool {
        let threads = threads.max(1);
        let pin = !cores.is_empty() && cores.len() >= threads;
        let saved = if pin {
            let old = current_affinity().map(|a| (std::thread::current().id(), a));
            pin_current(cores[0]);
            old
        } else {
            None
        };
        let shared = Arc::new(Shared {
            control: Mutex::new(Control {
                sleeping: 0,
                caller_waiting: false,
            }),
            start: Condvar::new(),
            done: Condvar::new(),
            generation: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            job: UnsafeCell::new(None),
            next: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
        });
        let workers = (1..threads)
            .map(|i| {
                let s = Arc::clone(&shared);
                let core = pin.then(|| cores[i]);
                std::thread::Builder::new()
                    .name(format!("kestrel-{i}"))
                    .spawn(move || worker(s, core))
                    .expect("spawning a worker thread")
            })
            .collect();
        Pool {
            shared,
            workers,
            threads,
            pinned: pin,
            saved,
        }
    }

    /// Whether the threads were pinned to cores.
    pub fn pinned(&self) -> bool {
        self.pinned
    }

    /// Publishes `job` (or shutdown when `None`) as a new generation and
    /// wakes parked workers. Requires `pending == 0` (no worker is between
    /// reading `job` and finishing).
    fn publish(&self, job: Option<Job>) {
        let s = &*self.shared;
        // SAFETY: every worker has finished the previous generation
        // (`pending == 0`, loaded with Acquire by `wait_workers` or never
        // raised), so no one reads `job` now; see `impl Sync for Shared`.
        unsafe { *s.job.get() = job };
        s.next.store(0, Ordering::Relaxed);
        // A flag left by a job whose caller itself unwound is stale.
        s.panicked.store(false, Ordering::Relaxed);
        s.pending.store(self.workers.len(), Ordering::Relaxed);
        // Release: the job, `next` and `pending` are visible to whoever
        // observes the new generation.
        let c = lock(&s.control);
        s.generation.fetch_add(1, Ordering::Release);
        if c.sleeping > 0 {
            s.start.notify_all();
        }
    }

    /// Returns once every worker has finished the current generation.
    fn wait_workers(&self) {
        let s = &*self.shared;
        if spin_until(|| s.pending.load(Ordering::Acquire) == 0) {
            return;
        }
        let mut c = lock(&s.control);
        c.caller_waiting = true;
        while s.pending.load(Ordering::Acquire) > 0 {
            c = s.done.wait(c).unwrap_or_else(|e| e.into_inner());
        }
        c.caller_waiting = false;
    }
}

impl Parallel for Pool {
    fn threads(&self) -> usize {
        self.threads
    }

    fn for_each_mut<T: Send>(&self, items: &mut [T], f: &(dyn Fn(usize, &mut T) + Sync)) {
        if self.workers.is_empty() || items.len() <= 1 {
            for (i, item) in items.iter_mut().enumerate() {
                f(i, item);
            }
            return;
        }
        let ctx = Ctx {
            items: items.as_mut_ptr(),
            f,
        };
        let job = Job {
            run: trampoline::<T>,
            ctx: &ctx as *const Ctx<'_, T> as *const (),
            n: items.len(),
        };
        self.publish(Some(job));
        {
            // Every worker must be done with this job before `ctx` and
            // `items` go out of scope (and before the next `publish`), even
            // if `f` panics on this thread: the guard waits on unwinding too.
            let _wait = WaitGuard(self);
            claim_and_run(&self.shared, job);
        }
        // `pending == 0` was observed with Acquire, so a worker's flag is
        // visible here.
        if self.shared.panicked.swap(false, Ordering::Relaxed) {
            panic!("a pool worker panicked in for_each_mut");
        }
    }
}

struct WaitGuard<'p>(&'p Pool);

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.wait_workers();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some((id, a)) = self.saved.take() {
            if id == std::thread::current().id() {
                set_affinity(&a);
            }
        }
        if self.workers.is_empty() {
            return;
        }
        self.shared.shutdown.store(true, Ordering::Release);
        self.publish(None);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(target_os = "linux")]
type Affinity = libc::cpu_set_t;
#[cfg(not(target_os = "linux"))]
type Affinity = ();

/// Pins the calling thread to CPU `core` (best effort: an error, e.g. a
/// core outside the process's allowed set, leaves the thread unpinned).
#[cfg(target_os = "linux")]
fn pin_current(core: usize) {
    if core >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: `cpu_set_t` is a plain bitmask, valid when zeroed; `CPU_SET`
    // sets bit `core` < CPU_SETSIZE (checked above), inside `set`.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        set
    };
    set_affinity(&set);
}

/// Sets the calling thread's affinity mask (best effort).
#[cfg(target_os = "linux")]
fn set_affinity(set: &libc::cpu_set_t) {
    // SAFETY: `sched_setaffinity(0, size, set)` only reads `size` bytes from
    // `set`, a live `cpu_set_t` of exactly that size, and affects only the
    // calling thread; failure is reported by the return value (ignored:
    // the thread then keeps its mask).
    unsafe {
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
    }
}

/// The calling thread's affinity mask.
#[cfg(target_os = "linux")]
fn current_affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: a zeroed `cpu_set_t` is valid; `sched_getaffinity(0, size,
    // &mut set)` writes at most `size` bytes into it, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
            .then_some(set)
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_current(_core: usize) {}
#[cfg(not(target_os = "linux"))]
fn set_affinity(_set: &Affinity) {}
#[cfg(not(target_os = "linux"))]
fn current_affinity() -> Option<Affinity> {
    None
}

/// Parses a sysfs CPU list such as `0-3,6,8-9`.
fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                v.extend(a..=b);
            }
            None => v.push(part.parse().ok()?),
        }
    }
    (!v.is_empty()).then_some(v)
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The CPUs a pool should run on, from a sysfs CPU directory `root`
/// (normally `/sys/devices/system/cpu`): the online CPUs (`root/online`, or
/// the `cpuN` directories) with the largest `cpuN/cpu_capacity`, or, when
/// any capacity is missing, the largest `cpuN/cpufreq/cpuinfo_max_freq`;
/// all online CPUs when neither is readable for every CPU or all are equal.
/// Empty when the CPU list itself cannot be read.
pub fn big_cores(root: &Path) -> Vec<usize> {
    let online = std::fs::read_to_string(root.join("online"))
        .ok()
        .and_then(|s| parse_cpu_list(&s))
        .unwrap_or_else(|| {
            let mut v: Vec<usize> = std::fs::read_dir(root)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
                .collect();
            kestrel_core::sort::sort_by(&mut v, |a, b| a.cmp(b));
            v
        });
    for file in ["cpu_capacity", "cpufreq/cpuinfo_max_freq"] {
        let sizes: Option<Vec<u64>> = online
            .iter()
            .map(|c| read_number(&root.join(format!("cpu{c}")).join(file)))
            .collect();
        if let Some(sizes) = sizes {
            let max = sizes.iter().copied().max().unwrap_or(0);
            return online
                .iter()
                .zip(&sizes)
                .filter(|&(_, &s)| s == max)
                .map(|(&c, _)| c)
                .collect();
        }
    }
    online
}

/// The CPUs of this machine to run on (see [`big_cores`]).
pub fn system_big_cores() -> Vec<usize> {
    big_cores(Path::new("/sys/devices/system/cpu"))
}

/// The default thread count: the biggest cores on big.LITTLE (4 on an
/// RK3588), else all online CPUs (see [`big_cores`]). The command line's
/// default and the hosted C library's built-in pool.
pub fn default_threads() -> usize {
    let big = system_big_cores().len();
    if big > 0 {
        big
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn every_item_once_across_many_jobs() {
        let pool = Pool::new(3);
        for round in 0..200usize {
            let mut items: Vec<usize> = vec![0; round % 17];
            pool.for_each_mut(&mut items, &|i, v| *v += i + 1);
            assert!(items.iter().enumerate().all(|(i, &v)| v == i + 1));
        }
    }

    #[test]
    fn many_tiny_jobs() {
        let pool = Pool::new(4);
        let total = AtomicU32::new(0);
        for round in 0..4_000usize {
            let mut items = [0u32; 4];
            pool.for_each_mut(&mut items, &|i, v| {
                *v = i as u32 + 1;
                total.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(items, [1, 2, 3, 4], "round {round}");
            // Every so often let the workers fall asleep, to exercise the
            // park/notify path as well as the spinning one.
            if round % 1000 == 999 {
                std::thread::sleep(SPIN * 3);
            }
        }
        assert_eq!(total.load(Ordering::Relaxed), 16_000);
    }

    #[test]
    fn uneven_work() {
        let pool = Pool::new(3);
        for round in 0..20usize {
            let mut items: Vec<u64> = vec![0; 7];
            pool.for_each_mut(&mut items, &|i, v| {
                // Item (round % 7) is much slower than the rest.
                if i == round % 7 {
                    std::thread::sleep(Duration::from_millis(2));
                }
                *v = (0..=i as u64 * 1000).sum();
            });
            for (i, &v) in items.iter().enumerate() {
                assert_eq!(v, (0..=i as u64 * 1000).sum::<u64>());
            }
        }
    }

    #[test]
    fn a_panicking_item_reaches_the_caller_and_the_pool_survives() {
        let pool = Pool::new(3);
        for _ in 0..20 {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut items = vec![0u32; 12];
                pool.for_each_mut(&mut items, &|i, v| {
                    if i % 4 == 3 {
                        panic!("item {i}");
                    }
                    *v = 1;
                });
            }));
            assert!(r.is_err());
        }
        let mut items = vec![0u32; 12];
        pool.for_each_mut(&mut items, &|_, v| *v = 1);
        assert!(items.iter().all(|&v| v == 1));
    }

    #[test]
    fn pinned_pool_works() {
        let cores = system_big_cores();
        let pool = Pool::with_cores(cores.len().min(2), &cores);
        let mut items = vec![0u8; 9];
        pool.for_each_mut(&mut items, &|_, v| *v = 1);
        assert!(items.iter().all(|&v| v == 1));
    }

    fn fake_root(
        name: &str,
        online: Option<&str>,
        files: &[(usize, &str, u64)],
    ) -> std::path::PathBuf {
        let root =
            std::env::temp_dir().join(format!("kestrel-sysfs-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        if let Some(o) = online {
            std::fs::write(root.join("online"), o).unwrap();
        }
        for &(cpu, file, v) in files {
            let p = root.join(format!("cpu{cpu}")).join(file);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{v}\n")).unwrap();
        }
        root
    }

    #[test]
    fn detects_rk3588_big_cores() {
        let caps = [446u64, 446, 446, 446, 1024, 1024, 1024, 1024];
        let files: Vec<_> = caps
            .iter()
            .enumerate()
            .map(|(c, &v)| (c, "cpu_capacity", v))
            .collect();
        let root = fake_root("rk3588", Some("0-7\n"), &files);
        assert_eq!(big_cores(&root), vec![4, 5, 6, 7]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn equal_cores_mean_all() {
        let files: Vec<_> = (0..4).map(|c| (c, "cpu_capacity", 1024)).collect();
        let root = fake_root("equal", Some("0-3"), &files);
        assert_eq!(big_cores(&root), vec![0, 1, 2, 3]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn falls_back_to_max_freq_then_online() {
        // One capacity missing: use cpuinfo_max_freq.
        let mut files: Vec<_> = (0..3).map(|c| (c, "cpu_capacity", 512)).collect();
        files.extend([
            (0, "cpufreq/cpuinfo_max_freq", 1_800_000),
            (1, "cpufreq/cpuinfo_max_freq", 2_400_000),
        ]);
        files.extend([
            (2, "cpufreq/cpuinfo_max_freq", 2_400_000),
            (3, "cpufreq/cpuinfo_max_freq", 1_800_000),
        ]);
        let root = fake_root("freq", Some("0-3"), &files);
        assert_eq!(big_cores(&root), vec![1, 2]);
        std::fs::remove_dir_all(root).unwrap();
        // Nothing but the online list: all online CPUs.
        let root = fake_root("bare", Some("0-1,4-5"), &[]);
        assert_eq!(big_cores(&root), vec![0, 1, 4, 5]);
        std::fs::remove_dir_all(root).unwrap();
        // No online list: the cpuN directories.
        let root = fake_root("dirs", None, &[(0, "x", 0), (2, "x", 0), (1, "x", 0)]);
        assert_eq!(big_cores(&root), vec![0, 1, 2]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,6,8-9\n"),
            Some(vec![0, 1, 2, 3, 6, 8, 9])
        );
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
    }
}
