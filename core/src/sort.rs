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

/// Moves the `k` smallest elements of `v` by `cmp` (a total order) to
/// `v[..k]`, in no particular order: a max-heap of the first `k`, then each
/// later element that beats the heap's largest replaces it. O(n log k)
/// comparisons, no allocation; with a total order the set is the same as any
/// selection's (`select_nth_unstable_by`'s included).
pub fn select_smallest<T, F: FnMut(&T, &T) -> Ordering>(v: &mut [T], k: usize, mut cmp: F) {
    let k = k.min(v.len());
    if k == 0 {
        return;
    }
    for start in (0..k / 2).rev() {
        sift_down(v, start, k, &mut cmp);
    }
    for i in k..v.len() {
        if cmp(&v[i], &v[0]) == Ordering::Less {
            v.swap(0, i);
            sift_down(v, 0, k, &mut cmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_smallest_keeps_the_same_set_as_a_full_sort() {
        let mut state = 0x853C_49E6_748F_EA9Bu64;
        for n in 0..200usize {
            let v: [u32; 200] = core::array::from_fn(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 50) as u32
            });
            let mut all = v;
            sort_by(&mut all[..n], |a, b| a.cmp(b));
            for k in [0, 1, 2, n / 3, n.saturating_sub(1), n, n + 5] {
                let mut picked = v;
                select_smallest(&mut picked[..n], k, |a, b| a.cmp(b));
                let k = k.min(n);
                sort_by(&mut picked[..k], |a, b| a.cmp(b));
                assert_eq!(picked[..k], all[..k], "n {n} k {k}");
            }
        }
    }
}
