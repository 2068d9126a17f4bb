//! A persistent thread pool implementing the core's `Parallel` trait.
//!
//! `threads - 1` workers wait for jobs; the calling thread works too. A job
//! is a slice of items and a function; threads claim item indices from an
//! atomic counter, so each item is handed to exactly one thread, and the call
//! returns only when every claimed item is finished.

use kestrel_core::parallel::Parallel;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// A type-erased job: `run(ctx, i)` processes item `i`.
#[derive(Clone, Copy)]
struct Job {
    run: unsafe fn(*const (), usize),
    ctx: *const (),
    n: usize,
}

// SAFETY: a Job is only dereferenced while `for_each_mut` is blocked waiting
// for it, and the context it points to is `Sync` (see `for_each_mut`).
unsafe impl Send for Job {}

struct Control {
    generation: u64,
    job: Option<Job>,
    /// Workers that have not finished the current generation.
    active: usize,
    shutdown: bool,
}

struct Shared {
    control: Mutex<Control>,
    start: Condvar,
    done: Condvar,
    next: AtomicUsize,
}

/// The pool.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    threads: usize,
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
        // context lives until every thread has finished (for_each_mut waits).
        unsafe { (job.run)(job.ctx, i) };
    }
}

fn worker(shared: Arc<Shared>) {
    let mut seen = 0u64;
    loop {
        let job = {
            let mut c = shared.control.lock().unwrap_or_else(|e| e.into_inner());
            while c.generation == seen && !c.shutdown {
                c = shared.start.wait(c).unwrap_or_else(|e| e.into_inner());
            }
            if c.shutdown {
                return;
            }
            seen = c.generation;
            c.job
        };
        if let Some(job) = job {
            claim_and_run(&shared, job);
        }
        let mut c = shared.control.lock().unwrap_or_else(|e| e.into_inner());
        c.active -= 1;
        if c.active == 0 {
            shared.done.notify_all();
        }
    }
}

impl Pool {
    /// A pool running `threads` tasks at once (the caller plus
    /// `threads - 1` workers).
    pub fn new(threads: usize) -> Pool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            control: Mutex::new(Control {
                generation: 0,
                job: None,
                active: 0,
                shutdown: false,
            }),
            start: Condvar::new(),
            done: Condvar::new(),
            next: AtomicUsize::new(0),
        });
        let workers = (1..threads)
            .map(|i| {
                let s = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("kestrel-{i}"))
                    .spawn(move || worker(s))
                    .expect("spawning a worker thread")
            })
            .collect();
        Pool {
            shared,
            workers,
            threads,
        }
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
        {
            let mut c = self
                .shared
                .control
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.shared.next.store(0, Ordering::Release);
            c.job = Some(job);
            c.active = self.workers.len();
            c.generation += 1;
            self.shared.start.notify_all();
        }
        claim_and_run(&self.shared, job);
        // Every worker must be done with this job before `ctx` and `items`
        // go out of scope.
        let mut c = self
            .shared
            .control
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while c.active > 0 {
            c = self.shared.done.wait(c).unwrap_or_else(|e| e.into_inner());
        }
        c.job = None;
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        {
            let mut c = self
                .shared
                .control
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            c.shutdown = true;
            self.shared.start.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_once_across_many_jobs() {
        let pool = Pool::new(3);
        for round in 0..200usize {
            let mut items: Vec<usize> = vec![0; round % 17];
            pool.for_each_mut(&mut items, &|i, v| *v += i + 1);
            assert!(items.iter().enumerate().all(|(i, &v)| v == i + 1));
        }
    }
}
