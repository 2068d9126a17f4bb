//! A conversation's state as bytes: its history, the KV rows of every
//! cached token, the sampler's generator and, when a token waits to be
//! sampled, the last row's logits. Saved to caller memory and restored
//! into a [`Generator`] over the same model file, kernels-independent (the
//! rows are the cache's own bits), so an answer after a restore is the one
//! the saved conversation would have given. Restoring costs a copy of the
//! rows, not a prefill.
//!
//! Layout (little-endian), [`HEADER_BYTES`] of header then the body:
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic `KSTATE\0\0` |
//! | 8 | format version (u32, [`VERSION`]) |
//! | 12 | KV element: 0 f16, 1 f32 (u32) |
//! | 16 | the model file's fingerprint ([`fingerprint`], u64) |
//! | 24 | layers, KV width, vocabulary (u32 each) |
//! | 36 | tokens cached, `n` (u32) |
//! | 40 | rotary position offset (i64: Qwen3-VL after an image) |
//! | 48 | the sampler's generator state (u64) |
//! | 56 | 1 when the last row's logits wait to be sampled, else 0 (u32) |
//! | 60 | 0 (u32) |
//!
//! Body: the `n` token ids (u32); the keys, layer by layer, `n` rows of
//! the KV width each (f16 bits or f32); the values the same; with waiting
//! logits, the vocabulary's f32 logits.

use crate::error::Error;
use crate::generate::Generator;
use crate::model::weights::Weights;
use crate::parallel::Parallel;
use crate::state::{KvCache, KvType, State};

/// The first bytes of a saved state.
pub const MAGIC: [u8; 8] = *b"KSTATE\0\0";

/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

/// Bytes of the header.
pub const HEADER_BYTES: usize = 64;

/// A model file's identity for a saved state: FNV-1a over its length, its
/// first and last 64 KiB (header, configuration, tokenizer, entry table;
/// the last tensor's bytes) and 64 bytes at each of 1,024 places spread
/// over the whole file (the weights' own bytes), so a state is refused by
/// another model, another quantization or another conversion of one model.
pub fn fingerprint(file: &[u8]) -> u64 {
    const EDGE: usize = 64 * 1024;
    const SAMPLES: usize = 1024;
    const SAMPLE: usize = 64;
    let mut h = Fnv::new();
    h.eat(&(file.len() as u64).to_le_bytes());
    h.eat(&file[..file.len().min(EDGE)]);
    h.eat(&file[file.len().saturating_sub(EDGE)..]);
    let stride = (file.len() / SAMPLES).max(1);
    for i in 0..SAMPLES {
        let at = i.saturating_mul(stride).min(file.len());
        h.eat(&file[at..file.len().min(at + SAMPLE)]);
    }
    h.0
}

/// FNV-1a, 64 bits.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn eat(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// What a saved state holds besides its rows: its header's fields.
struct Header {
    kv: KvType,
    model: u64,
    layers: usize,
    kv_dim: usize,
    vocab: usize,
    tokens: usize,
    rope_delta: i64,
    rng: u64,
    logits: bool,
    /// Qwen3.5: f32s of the slot's Gated DeltaNet windows and states, after
    /// the KV rows (not in the header's bytes: the model, which the
    /// fingerprint names, fixes it).
    recurrent: usize,
}

impl Header {
    /// Bytes of the state this header describes, or `None` on overflow.
    fn total(&self) -> Option<usize> {
        let elem = match self.kv {
            KvType::F16 => 2,
            KvType::F32 => 4,
        };
        let rows = self
            .layers
            .checked_mul(self.tokens)?
            .checked_mul(self.kv_dim)?;
        let logits = if self.logits { self.vocab } else { 0 };
        HEADER_BYTES
            .checked_add(self.tokens.checked_mul(4)?)?
            .checked_add(rows.checked_mul(2 * elem)?)?
            .checked_add(self.recurrent.checked_mul(4)?)?
            .checked_add(logits.checked_mul(4)?)
    }

    fn write(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&MAGIC);
        let kv = match self.kv {
            KvType::F16 => 0u32,
            KvType::F32 => 1,
        };
        let words: [(usize, &[u8]); 11] = [
            (8, &VERSION.to_le_bytes()),
            (12, &kv.to_le_bytes()),
            (16, &self.model.to_le_bytes()),
            (24, &(self.layers as u32).to_le_bytes()),
            (28, &(self.kv_dim as u32).to_le_bytes()),
            (32, &(self.vocab as u32).to_le_bytes()),
            (36, &(self.tokens as u32).to_le_bytes()),
            (40, &self.rope_delta.to_le_bytes()),
            (48, &self.rng.to_le_bytes()),
            (56, &(self.logits as u32).to_le_bytes()),
            (60, &0u32.to_le_bytes()),
        ];
        for (at, bytes) in words {
            out[at..at + bytes.len()].copy_from_slice(bytes);
        }
    }

    /// The header at the front of `bytes`, its fields checked for form
    /// (not yet against a model).
    fn read(bytes: &[u8]) -> Result<Header, Error> {
        if bytes.len() < HEADER_BYTES {
            return Err(Error::Truncated {
                what: "saved state header",
                need: HEADER_BYTES as u64,
                have: bytes.len() as u64,
            });
        }
        if bytes[..8] != MAGIC {
            return Err(Error::BadMagic {
                what: "saved state",
            });
        }
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let u64_at = |at: usize| u64::from(u32_at(at)) | u64::from(u32_at(at + 4)) << 32;
        let version = u32_at(8);
        if version != VERSION {
            return Err(Error::NewerVersion {
                what: "saved state",
                found: version,
                supported: VERSION,
            });
        }
        let kv = match u32_at(12) {
            0 => KvType::F16,
            1 => KvType::F32,
            _ => {
                return Err(malformed(
                    "saved state: KV element is neither 0 (f16) nor 1 (f32)",
                    12,
                ))
            }
        };
        let logits = match u32_at(56) {
            0 => false,
            1 => true,
            _ => return Err(malformed("saved state: logits flag is neither 0 nor 1", 56)),
        };
        if u32_at(60) != 0 {
            return Err(malformed("saved state: reserved word is not 0", 60));
        }
        Ok(Header {
            kv,
            model: u64_at(16),
            layers: u32_at(24) as usize,
            kv_dim: u32_at(28) as usize,
            vocab: u32_at(32) as usize,
            tokens: u32_at(36) as usize,
            rope_delta: u64_at(40) as i64,
            rng: u64_at(48),
            logits,
            recurrent: 0,
        })
    }
}

fn malformed(what: &'static str, at: u64) -> Error {
    Error::Malformed { what, at }
}

/// The header of `tokens` cached tokens of one slot of `s` (`logits`: the
/// last row's logits wait to be sampled); `model`: the file's
/// [`fingerprint`] (read from the whole map: only where it is written or
/// checked).
fn header(
    w: &Weights,
    s: &State,
    slot: usize,
    tokens: usize,
    rng: u64,
    logits: bool,
    model: u64,
) -> Header {
    let cfg = &w.cfg;
    Header {
        kv: s.opts.kv,
        model,
        layers: cfg.kv_layers(),
        kv_dim: cfg.kv_dim(),
        vocab: cfg.vocab_size as usize,
        tokens,
        rope_delta: s.rope_delta.get(slot).copied().unwrap_or(0),
        rng,
        logits,
        recurrent: (s.conv_windows.len() + s.recurrent.len()) / s.opts.slots,
    }
}

/// Bytes [`save_slot`] writes for `tokens` cached tokens (`logits`: with
/// the waiting logits).
pub fn slot_size(w: &Weights, s: &State, tokens: usize, logits: bool) -> Result<usize, Error> {
    header(w, s, 0, tokens, 0, logits, 0)
        .total()
        .ok_or(Error::Overflow {
            what: "saved state size",
        })
}

/// Writes the state of sequence slot `slot` of `s` to the front of `out`
/// and returns its length: `history` its cached tokens (their KV rows are
/// the slot's first `history.len()`), `rng` the sampler's generator, and
/// `logits`, when a token waits to be sampled, the last row's logits. Too
/// small an `out` is an error naming the size needed (nothing written).
pub fn save_slot(
    w: &Weights,
    s: &State,
    slot: usize,
    history: &[u32],
    rng: u64,
    logits: Option<&[f32]>,
    out: &mut [u8],
) -> Result<usize, Error> {
    let fingerprint = fingerprint(w.vqf.bytes());
    let header = header(
        w,
        s,
        slot,
        history.len(),
        rng,
        logits.is_some(),
        fingerprint,
    );
    let total = slot_size(w, s, history.len(), logits.is_some())?;
    if out.len() < total {
        return Err(Error::BufferTooSmall {
            what: "saved state (bytes)",
            need: total,
            have: out.len(),
        });
    }
    if slot >= s.opts.slots {
        return Err(Error::OutOfRange {
            what: "saved state: slot",
            value: slot,
            max: s.opts.slots - 1,
        });
    }
    if history.len() > s.opts.max_seq {
        return Err(Error::ContextFull {
            need: history.len(),
            max: s.opts.max_seq,
        });
    }
    if w.cfg.linear.is_some() && s.recurrent_pos[slot] != history.len() {
        return Err(Error::RecurrentState {
            slot,
            pos: history.len(),
            holds: s.recurrent_pos[slot],
        });
    }
    header.write(out);
    let mut w = Cursor {
        bytes: &mut out[HEADER_BYTES..total],
    };
    for &id in history {
        w.put(&id.to_le_bytes());
    }
    let (n, width, seq) = (header.tokens, header.kv_dim, s.opts.max_seq);
    for cache in [&s.k_cache, &s.v_cache] {
        for layer in 0..header.layers {
            // The slot's rows of `layer`: (slot, layer, seq, kv_dim).
            let at = (slot * header.layers + layer) * seq;
            let rows = at * width..(at + n) * width;
            match cache {
                KvCache::F16(c) => c[rows].iter().for_each(|v| w.put(&v.to_le_bytes())),
                KvCache::F32(c) => c[rows].iter().for_each(|v| w.put(&v.to_le_bytes())),
            }
        }
    }
    let (wl, sl) = (
        s.conv_windows.len() / s.opts.slots,
        s.recurrent.len() / s.opts.slots,
    );
    let windows = &s.conv_windows[slot * wl..(slot + 1) * wl];
    let states = &s.recurrent[slot * sl..(slot + 1) * sl];
    for v in windows.iter().chain(states) {
        w.put(&v.to_le_bytes());
    }
    for v in logits.unwrap_or(&[]).iter().take(header.vocab) {
        w.put(&v.to_le_bytes());
    }
    Ok(total)
}

/// What [`restore_slot`] restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restored {
    /// Cached tokens (in `history[..tokens]`).
    pub tokens: usize,
    /// The sampler's generator state.
    pub rng: u64,
    /// The last row's logits wait to be sampled (they are in
    /// `s.logits[..vocab]`).
    pub logits: bool,
}

/// Replaces sequence slot `slot` of `s` with the state in `bytes` (as
/// [`save_slot`] wrote it): its KV rows, its rotary offset, its tokens into
/// `history`, and waiting logits into the front of `s.logits`. Refused,
/// nothing changed, when the state is malformed or truncated, was saved
/// from another model file, with another KV element type, or holds more
/// tokens than the slot (or `history`) has room for.
pub fn restore_slot(
    w: &Weights,
    s: &mut State,
    slot: usize,
    bytes: &[u8],
    history: &mut [u32],
) -> Result<Restored, Error> {
    let mut h = Header::read(bytes)?;
    let mine = header(w, s, slot, 0, 0, false, fingerprint(w.vqf.bytes()));
    h.recurrent = mine.recurrent;
    if h.model != mine.model
        || (h.layers, h.kv_dim, h.vocab) != (mine.layers, mine.kv_dim, mine.vocab)
    {
        return Err(malformed(
            "saved state: it was saved from another model file (its fingerprint differs)",
            16,
        ));
    }
    if h.kv != mine.kv {
        return Err(malformed(
            "saved state: its KV element type (f16 or f32) is not this engine's",
            12,
        ));
    }
    let max = s.opts.max_seq.min(history.len());
    if h.tokens > max {
        return Err(Error::ContextFull {
            need: h.tokens,
            max,
        });
    }
    if slot >= s.opts.slots {
        return Err(Error::OutOfRange {
            what: "saved state: slot",
            value: slot,
            max: s.opts.slots - 1,
        });
    }
    let total = h.total().ok_or(Error::Overflow {
        what: "saved state size",
    })?;
    if bytes.len() != total {
        return Err(Error::SizeMismatch {
            what: "saved state (bytes)",
            expected: total,
            actual: bytes.len(),
        });
    }
    let mut r = Reader {
        bytes: &bytes[HEADER_BYTES..],
    };
    let vocab = h.vocab as u32;
    let ids = r.take(h.tokens * 4);
    if let Some(id) = ids.chunks_exact(4).map(word).find(|&id| id >= vocab) {
        return Err(Error::BadToken { id, vocab });
    }
    // Checked: now the slot is replaced.
    for (dst, id) in history.iter_mut().zip(ids.chunks_exact(4)) {
        *dst = word(id);
    }
    let (n, width, seq) = (h.tokens, h.kv_dim, s.opts.max_seq);
    for cache in [&mut s.k_cache, &mut s.v_cache] {
        for layer in 0..h.layers {
            let at = (slot * h.layers + layer) * seq;
            let rows = at * width..(at + n) * width;
            match cache {
                KvCache::F16(c) => {
                    for (v, b) in c[rows]
                        .iter_mut()
                        .zip(r.take(n * width * 2).chunks_exact(2))
                    {
                        *v = u16::from_le_bytes([b[0], b[1]]);
                    }
                }
                KvCache::F32(c) => {
                    for (v, b) in c[rows]
                        .iter_mut()
                        .zip(r.take(n * width * 4).chunks_exact(4))
                    {
                        *v = f32::from_bits(word(b));
                    }
                }
            }
        }
    }
    for part in s.recurrent_of(slot) {
        let len = part.len();
        for (v, b) in part.iter_mut().zip(r.take(len * 4).chunks_exact(4)) {
            *v = f32::from_bits(word(b));
        }
    }
    s.recurrent_pos[slot] = n;
    s.snapshot_pos[slot] = 0;
    s.verify[slot] = (0, 0);
    if h.logits {
        let logits = r.take(h.vocab * 4);
        for (v, b) in s.logits.iter_mut().zip(logits.chunks_exact(4)) {
            *v = f32::from_bits(word(b));
        }
    }
    s.rope_delta[slot] = h.rope_delta;
    Ok(Restored {
        tokens: n,
        rng: h.rng,
        logits: h.logits,
    })
}

impl<P, H, C> Generator<'_, '_, '_, P, H, C>
where
    P: Parallel,
    H: AsMut<[u32]> + AsRef<[u32]>,
    C: AsMut<[u32]>,
{
    /// Bytes [`Generator::save_state`] writes now (`logits`: with the
    /// waiting logits).
    pub fn state_size(&self, logits: bool) -> Result<usize, Error> {
        slot_size(self.weights, &self.state, self.len, logits)
    }

    /// Writes the conversation's state (slot 0: [`save_slot`]) to the
    /// front of `out` and returns its length; `logits`: the last fed row's
    /// logits wait to be sampled and are saved with it.
    pub fn save_state(&self, logits: bool, out: &mut [u8]) -> Result<usize, Error> {
        let waiting = logits.then(|| self.last_logits());
        let rng = self.sampler.rng_state();
        save_slot(
            self.weights,
            &self.state,
            0,
            self.history(),
            rng,
            waiting,
            out,
        )
    }

    /// Replaces the conversation with the state in `bytes` ([`restore_slot`]
    /// into slot 0): returns whether its last row's logits wait to be
    /// sampled. Refused, the conversation unchanged, as `restore_slot`
    /// refuses.
    pub fn restore_state(&mut self, bytes: &[u8]) -> Result<bool, Error> {
        let (w, history) = (self.weights, self.history.as_mut());
        let r = restore_slot(w, &mut self.state, 0, bytes, history)?;
        if r.logits {
            self.logits_at = 0;
        }
        self.len = r.tokens;
        self.state.pos = r.tokens;
        self.sampler.set_rng_state(r.rng);
        Ok(r.logits)
    }

    /// Forgets every token after the first `tokens` (an earlier turn's
    /// end): their KV rows are left to be overwritten. More tokens than
    /// cached is an error. Qwen3.5: a Gated DeltaNet state is not cut back,
    /// so it goes back only to the end of the last prompt (its snapshot),
    /// or to 0; elsewhere [`Error::RecurrentState`], nothing changed.
    pub fn rollback(&mut self, tokens: usize) -> Result<(), Error> {
        if tokens > self.len {
            return Err(Error::OutOfRange {
                what: "rollback: tokens to keep (the cached tokens)",
                value: tokens,
                max: self.len,
            });
        }
        let s = &mut self.state;
        if self.weights.cfg.linear.is_some() && tokens != s.recurrent_pos[0] && tokens > 0 {
            if tokens != s.snapshot_pos[0] {
                return Err(Error::RecurrentState {
                    slot: 0,
                    pos: tokens,
                    holds: s.recurrent_pos[0],
                });
            }
            s.snapshot(0, false);
            s.recurrent_pos[0] = tokens;
        }
        self.len = tokens;
        self.state.pos = tokens;
        if tokens == 0 {
            self.state.rope_delta[0] = 0;
        }
        Ok(())
    }
}

/// A u32 from 4 little-endian bytes.
fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Writes bytes one after another (the sizes were checked).
struct Cursor<'a> {
    bytes: &'a mut [u8],
}

impl Cursor<'_> {
    fn put(&mut self, b: &[u8]) {
        let (head, tail) = core::mem::take(&mut self.bytes).split_at_mut(b.len());
        head.copy_from_slice(b);
        self.bytes = tail;
    }
}

/// Reads bytes one after another (the total was checked).
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        head
    }
}
