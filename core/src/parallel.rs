//! The small parallel-for the core runs its loops on. The shell implements
//! it with a pinned thread pool; a firmware host can use [`Serial`].

/// Runs independent tasks, possibly at the same time.
pub trait Parallel: Sync {
    /// How many tasks run at once (1 for a serial host). Work is split into
    /// this many parts.
    fn threads(&self) -> usize;

    /// Calls `f(i, &mut items[i])` for every `i` and returns when all calls
    /// have returned. Calls may run concurrently, in any order.
    fn for_each_mut<T: Send>(&self, items: &mut [T], f: &(dyn Fn(usize, &mut T) + Sync));
}

/// Runs every task on the calling thread, in order.
#[derive(Clone, Copy, Debug, Default)]
pub struct Serial;

impl Parallel for Serial {
    fn threads(&self) -> usize {
        1
    }

    fn for_each_mut<T: Send>(&self, items: &mut [T], f: &(dyn Fn(usize, &mut T) + Sync)) {
        for (i, item) in items.iter_mut().enumerate() {
            f(i, item);
        }
    }
}
