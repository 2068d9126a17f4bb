//! One small in-place sort for every caller (heapsort: O(n log n) worst
//! case, no allocation, not stable). The standard library's sorts are
//! faster on large inputs but each instantiation costs 10-15 KB of code;
//! every caller here sorts by a total order, so stability does not matter.

use core::cmp::Ordering;

/// Sorts `v` ascending by `cmp` (a total order).
pub fn sort_by<T, F: FnMut(&T, &T) -> Ordering>(v: &mut [T], mut cmp: F) {
    let n = v.len();
    // Build a max-heap, then move the maximum to the end, n - 1 times.
    for start in (0..n / 2).rev() {
        sift_down(v, start, n, &mut cmp);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift_down(v, 0, end, &mut cmp);
    }
}

fn sift_down<T, F: FnMut(&T, &T) -> Ordering>(
    v: &mut [T],
    mut root: usize,
    end: usize,
    cmp: &mut F,
) {
    loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && cmp(&v[child], &v[child + 1]) == Ordering::Less {
            child += 1;
        }
        if cmp(&v[root], &v[child]) != Ordering::Less {
            return;
        }
        v.swap(root, child);
        root = child;
    }
}
