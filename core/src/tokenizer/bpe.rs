//! Byte-level BPE over one pre-token, with Hugging Face's semantics: keep a
//! min-heap of adjacent pairs keyed by (merge rank, position), pop the lowest,
//! skip it if the pair at that position has changed since it was pushed,
//! merge, and push the two new pairs. O(n log n) in the pre-token's length,
//! in caller memory: [`WORK_PER_BYTE`] u32 per byte.

use crate::error::Error;
use crate::vqf::tokenizer_section::TokenizerTables;

/// u32 entries of work memory per byte of a pre-token: symbol id, previous,
/// next (3), and a heap of at most 3 pairs per byte, 2 u32 each (6).
pub const WORK_PER_BYTE: usize = 9;

const NONE: u32 = u32::MAX;

struct Heap<'h> {
    h: &'h mut [u32],
    len: usize,
}

impl Heap<'_> {
    fn key(&self, i: usize) -> u64 {
        let a = self.h.get(2 * i).copied().unwrap_or(NONE) as u64;
        let b = self.h.get(2 * i + 1).copied().unwrap_or(NONE) as u64;
        (a << 32) | b
    }
    fn set(&mut self, i: usize, k: u64) {
        if let Some(s) = self.h.get_mut(2 * i..2 * i + 2) {
            s[0] = (k >> 32) as u32;
            s[1] = k as u32;
        }
    }
    fn push(&mut self, rank: u32, pos: u32) -> bool {
        if 2 * self.len + 2 > self.h.len() {
            return false;
        }
        let k = ((rank as u64) << 32) | pos as u64;
        let mut i = self.len;
        self.len += 1;
        while i > 0 {
            let p = (i - 1) / 2;
            let kp = self.key(p);
            if kp <= k {
                break;
            }
            self.set(i, kp);
            i = p;
        }
        self.set(i, k);
        true
    }
    fn pop(&mut self) -> Option<(u32, u32)> {
        if self.len == 0 {
            return None;
        }
        let top = self.key(0);
        self.len -= 1;
        let last = self.key(self.len);
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            if l >= self.len {
                break;
            }
            let r = l + 1;
            let mut c = l;
            if r < self.len && self.key(r) < self.key(l) {
                c = r;
            }
            let kc = self.key(c);
            if kc >= last {
                break;
            }
            self.set(i, kc);
            i = c;
        }
        if self.len > 0 {
            self.set(i, last);
        }
        Some(((top >> 32) as u32, top as u32))
    }
}

/// Runs BPE over `bytes` and hands each resulting id to `sink`.
pub fn bpe(
    t: &TokenizerTables<'_>,
    bytes: &[u8],
    work: &mut [u32],
    sink: &mut dyn FnMut(u32),
) -> Result<(), Error> {
    let n = bytes.len();
    match bytes {
        [] => return Ok(()),
        [b] => {
            sink(t.byte_id(*b));
            return Ok(());
        }
        _ => {}
    }
    let too_small = Error::BufferTooSmall {
        what: "tokenizer work scratch (BPE of one pre-token)",
        need: n.saturating_mul(WORK_PER_BYTE),
        have: work.len(),
    };
    if n > u32::MAX as usize / 4 || work.len() < n.saturating_mul(WORK_PER_BYTE) {
        return Err(too_small);
    }
    let (ids, rest) = work.split_at_mut(n);
    let (prev, rest) = rest.split_at_mut(n);
    let (next, heap) = rest.split_at_mut(n);
    let mut heap = Heap { h: heap, len: 0 };
    for (i, &b) in bytes.iter().enumerate() {
        ids[i] = t.byte_id(b);
        prev[i] = if i == 0 { NONE } else { (i - 1) as u32 };
        next[i] = if i + 1 == n { NONE } else { (i + 1) as u32 };
    }
    for i in 0..n - 1 {
        if let Some((rank, _)) = t.merge(ids[i], ids[i + 1]) {
            if !heap.push(rank, i as u32) {
                return Err(too_small);
            }
        }
    }
    while let Some((rank, pos)) = heap.pop() {
        let p = pos as usize;
        let (Some(&left), Some(&nx)) = (ids.get(p), next.get(p)) else {
            continue;
        };
        if left == NONE || nx == NONE {
            continue;
        }
        let nx = nx as usize;
        let Some(&right) = ids.get(nx) else { continue };
        let merged = match t.merge(left, right) {
            Some((r, m)) if r == rank => m,
            _ => continue,
        };
        ids[p] = merged;
        ids[nx] = NONE;
        let after = next[nx];
        next[p] = after;
        if let Some(a) = prev.get_mut(after as usize) {
            *a = pos;
        }
        let before = prev[p];
        if let Some(&lb) = ids.get(before as usize) {
            if let Some((r, _)) = t.merge(lb, merged) {
                if !heap.push(r, before) {
                    return Err(too_small);
                }
            }
        }
        if let Some(&ra) = ids.get(after as usize) {
            if let Some((r, _)) = t.merge(merged, ra) {
                if !heap.push(r, pos) {
                    return Err(too_small);
                }
            }
        }
    }
    let mut i = 0usize;
    while let Some(&id) = ids.get(i) {
        sink(id);
        match next.get(i) {
            Some(&nx) if nx != NONE => i = nx as usize,
            _ => break,
        }
    }
    Ok(())
}
