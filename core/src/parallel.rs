//! The small parallel-for the core runs its loops on. The shell implements
//! it with a pinned thread pool; a firmware host can use [`Serial`].

use crate::error::Error;

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

/// Most parts a job (a matrix multiply, a row-wise step, the attention's
/// heads or queries) is split into.
pub const MAX_PARTS: usize = 64;

/// The fewest rows a part of [`rows_parallel`] takes: fewer (a decode
/// step's one to four rows) stay on the calling thread, where they cost
/// less than waking a worker.
pub const MIN_ROWS_PER_PART: usize = 4;

/// A fallible step over a part of the rows: `(first row, the part's values)`.
pub type RowsStep<'f> = dyn Fn(usize, &mut [f32]) -> Result<(), Error> + Sync + 'f;

/// Calls `f(first, part)` for parts of the (rows, width) values `x` split
/// in whole rows over the pool (at least [`MIN_ROWS_PER_PART`] rows a part),
/// `first` the index of the part's first row, and returns the first part's
/// error, if any. The one place the forward passes' row-wise steps (norms,
/// rotary, GELU, bias) are spread over the threads; each row's result must
/// not depend on the split.
pub fn try_rows_parallel<P: Parallel>(
    pool: &P,
    x: &mut [f32],
    width: usize,
    f: &RowsStep<'_>,
) -> Result<(), Error> {
    let rows = x.len() / width.max(1);
    let parts = pool
        .threads()
        .clamp(1, MAX_PARTS)
        .min(rows / MIN_ROWS_PER_PART)
        .max(1);
    if parts == 1 {
        return f(0, x);
    }
    type Part<'a> = (usize, &'a mut [f32], Result<(), Error>);
    let mut items: heapless::Vec<Part<'_>, MAX_PARTS> = heapless::Vec::new();
    let mut rest = x;
    for p in 0..parts {
        let first = rows * p / parts;
        let take = (rows * (p + 1) / parts - first) * width;
        let (part, r) = core::mem::take(&mut rest).split_at_mut(take);
        rest = r;
        let _ = items.push((first, part, Ok(())));
    }
    pool.for_each_mut(&mut items, &|_, (first, part, result)| {
        *result = f(*first, part);
    });
    items.into_iter().try_for_each(|item| item.2)
}

/// [`try_rows_parallel`] for a step that cannot fail.
pub fn rows_parallel<P: Parallel>(
    pool: &P,
    x: &mut [f32],
    width: usize,
    f: &(dyn Fn(usize, &mut [f32]) + Sync),
) {
    let _ = try_rows_parallel(pool, x, width, &|first, part| {
        f(first, part);
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Claims `n` threads but runs the parts in reverse order on the
    /// calling thread (any order is allowed).
    struct Reversed(usize);

    impl Parallel for Reversed {
        fn threads(&self) -> usize {
            self.0
        }

        fn for_each_mut<T: Send>(&self, items: &mut [T], f: &(dyn Fn(usize, &mut T) + Sync)) {
            for (i, item) in items.iter_mut().enumerate().rev() {
                f(i, item);
            }
        }
    }

    /// Every row is visited once with its own index, in whole rows, for
    /// any thread count; fewer than 4 rows a part stay in one part.
    #[test]
    fn rows_are_split_whole_and_indexed() {
        for threads in 1..=5 {
            for rows in [0usize, 1, 3, 4, 7, 8, 11, 23] {
                let width = 3;
                let mut x = [0.0f32; 23 * 3];
                let x = &mut x[..rows * width];
                let parts = core::sync::atomic::AtomicUsize::new(0);
                rows_parallel(&Reversed(threads), x, width, &|first, part| {
                    assert_eq!(part.len() % width, 0);
                    assert!(part.len() >= width * MIN_ROWS_PER_PART || first == 0);
                    parts.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                    for (i, row) in part.chunks_exact_mut(width).enumerate() {
                        row.fill((first + i) as f32 + row[0] + 1.0);
                    }
                });
                for (r, row) in x.chunks_exact(width).enumerate() {
                    assert!(row.iter().all(|&v| v == r as f32 + 1.0), "{threads} {rows}");
                }
                let want = threads.min(rows / MIN_ROWS_PER_PART).max(1);
                assert_eq!(parts.into_inner(), want, "{threads} threads, {rows} rows");
            }
        }
    }

    /// An error of any part is returned, whichever part runs first.
    #[test]
    fn a_part_error_is_returned() {
        let mut x = [0.0f32; 16];
        let bad = Error::OutOfRange {
            what: "rotary position",
            value: 9,
            max: 8,
        };
        for threads in 1..=4 {
            let r = try_rows_parallel(&Reversed(threads), &mut x, 1, &|first, part| {
                if (first..first + part.len()).contains(&9) {
                    Err(bad)
                } else {
                    Ok(())
                }
            });
            assert_eq!(r, Err(bad), "{threads} threads");
        }
    }
}
