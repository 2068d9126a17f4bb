//! Choosing the next token from logits: greedy at temperature 0, otherwise
//! repetition penalty, top-k, top-p, min-p, temperature, then a draw from a
//! seedable generator (the same seed gives the same tokens). The chain and
//! its defaults follow llama.cpp's.

/// Sampling settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerConfig {
    /// 0 means greedy (finite, at least 0: [`SamplerConfig::check`]).
    pub temperature: f32,
    /// Keep the k most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches p (1: all).
    pub top_p: f32,
    /// Drop tokens below `min_p` times the top probability (0: none).
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of recent tokens (1: off).
    pub repeat_penalty: f32,
    /// How many recent tokens the penalty looks at.
    pub repeat_last_n: usize,
    /// Generator seed.
    pub seed: u64,
}

impl SamplerConfig {
    /// The settings' one range check, for every host (the CLI's flags, the
    /// C ABI's config; the server's API ranges are narrower): the first
    /// setting out of range, named, or `Ok`. NaN is out of every range.
    pub fn check(&self) -> Result<(), &'static str> {
        let within = |x: f32, lo: f32, hi: f32| x >= lo && x <= hi;
        if !within(self.temperature, 0.0, f32::MAX) {
            return Err("temperature must be a finite number, at least 0");
        }
        if !within(self.top_p, 0.0, 1.0) {
            return Err("top_p must be between 0 and 1");
        }
        if !within(self.min_p, 0.0, 1.0) {
            return Err("min_p must be between 0 and 1");
        }
        if !(self.repeat_penalty > 0.0 && self.repeat_penalty <= f32::MAX) {
            return Err("repeat_penalty must be a finite number above 0 (1: off)");
        }
        Ok(())
    }
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: 0x5eed,
        }
    }
}

/// Largest top-k taken by one insertion pass over the logits instead of a
/// selection over all of them.
const TOP_K_BY_INSERTION: usize = 64;

/// A seeded sampler.
#[derive(Clone, Debug)]
pub struct Sampler {
    /// Its settings.
    pub cfg: SamplerConfig,
    /// Added to the logits before anything else ([`LogitBias::apply`]).
    pub bias: LogitBias,
    state: u64,
}

/// Most entries a [`LogitBias`] holds (OpenAI's `logit_bias` limit).
pub const MAX_LOGIT_BIAS: usize = 300;

/// Per-token values added to the logits before sampling, the penalties
/// and a constraint's mask (OpenAI's `logit_bias`: -100 bans a token, 100
/// all but forces it): at most [`MAX_LOGIT_BIAS`] (token id, bias) pairs.
#[derive(Clone, Debug, Default)]
pub struct LogitBias {
    entries: heapless::Vec<(u32, f32), MAX_LOGIT_BIAS>,
}

impl LogitBias {
    /// The entries for a vocabulary of `vocab` ids, checked once for every
    /// host (the server's `logit_bias`, the C ABI, Python): each id below
    /// `vocab`, each bias a number in -100 ..= 100, at most
    /// [`MAX_LOGIT_BIAS`] entries; the first that is not is refused by
    /// name and nothing changes. An id given twice: the last value.
    pub fn set(&mut self, entries: &[(u32, f32)], vocab: usize) -> Result<(), &'static str> {
        if entries.len() > MAX_LOGIT_BIAS {
            return Err("logit_bias: at most 300 entries");
        }
        let mut all = heapless::Vec::new();
        for &(id, bias) in entries {
            if id as usize >= vocab {
                return Err("logit_bias: a token id past the vocabulary");
            }
            if !LogitBias::in_range(bias) {
                return Err("logit_bias: a bias outside -100 ..= 100 (or NaN)");
            }
            match all.iter_mut().find(|(seen, _)| *seen == id) {
                Some(e) => *e = (id, bias),
                None => all.push((id, bias)).map_err(|_| "logit_bias: too many")?,
            }
        }
        self.entries = all;
        Ok(())
    }

    /// A bias the entries may hold: a number in -100 ..= 100 (not NaN).
    pub fn in_range(bias: f32) -> bool {
        (-100.0..=100.0).contains(&bias)
    }

    /// Adds each entry's bias to its token's logit.
    pub fn apply(&self, logits: &mut [f32]) {
        for &(id, bias) in &self.entries {
            if let Some(l) = logits.get_mut(id as usize) {
                *l += bias;
            }
        }
    }
}

/// Lanes of [`argmax`]'s pass: two vector registers of f32 on every
/// target (independent chains for the compiler to interleave).
const ARGMAX_LANES: usize = 16;

/// Index of the largest value (the lowest index on ties, `0.0` and `-0.0`
/// equal; NaN never wins; the first `-inf` when nothing is larger; 0 when
/// every value is NaN). One pass over `x` in blocks of
/// `ARGMAX_LANES`: each lane keeps its largest value and the first
/// block that held it (strictly larger values replace it, so the first
/// occurrence stays), which the compiler keeps in registers as compares
/// and selects; the lanes then give the lowest index among equal maxima.
/// Greedy sampling reads 151,936 logits per token with it, once instead of
/// twice (a maximum, then its first position).
#[cfg_attr(kestrel_shipped, optimize(speed))]
pub fn argmax(x: &[f32]) -> usize {
    let blocks = x.chunks_exact(ARGMAX_LANES);
    let tail = blocks.remainder();
    if blocks.len() > u32::MAX as usize {
        // Block numbers are u32 (any vocabulary is far shorter).
        return argmax_in_order(x);
    }
    let mut best = [f32::NEG_INFINITY; ARGMAX_LANES];
    let mut first_block = [u32::MAX; ARGMAX_LANES];
    for (b, block) in (0u32..).zip(blocks) {
        for ((m, at), &v) in best.iter_mut().zip(first_block.iter_mut()).zip(block) {
            // NaN compares false and never replaces a lane.
            let larger = v > *m;
            *m = if larger { v } else { *m };
            *at = if larger { b } else { *at };
        }
    }
    let mut max = f32::NEG_INFINITY;
    let mut index = usize::MAX;
    for (lane, (&m, &at)) in best.iter().zip(&first_block).enumerate() {
        if at == u32::MAX {
            continue;
        }
        let i = at as usize * ARGMAX_LANES + lane;
        if m > max || (m == max && i < index) {
            max = m;
            index = i;
        }
    }
    let tail_start = x.len() - tail.len();
    for (i, &v) in (tail_start..).zip(tail) {
        // Past every block: only a strictly larger value wins.
        if v > max {
            max = v;
            index = i;
        }
    }
    if index == usize::MAX {
        // Nothing above -inf: the first -inf, or 0 when all are NaN.
        return x.iter().position(|&v| v == f32::NEG_INFINITY).unwrap_or(0);
    }
    index
}

/// [`argmax`] by its definition, one value at a time: the reference its
/// test compares with, and the path for a slice of more than 2^32 blocks.
pub fn argmax_in_order(x: &[f32]) -> usize {
    let mut index = None;
    let mut max = f32::NEG_INFINITY;
    for (i, &v) in x.iter().enumerate() {
        if v > max || (index.is_none() && v == f32::NEG_INFINITY) {
            max = v;
            index = Some(i);
        }
    }
    index.unwrap_or(0)
}

/// `ln(sum(exp(x)))` in f64, from the largest value: the log of the
/// softmax's denominator, so `x[i] - log_sum_exp(x)` is token `i`'s
/// log-probability under the model (before any sampling setting).
pub fn log_sum_exp(x: &[f32]) -> f64 {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return max as f64;
    }
    let mut sum = 0.0f64;
    for &v in x {
        sum += libm::exp((v - max) as f64);
    }
    max as f64 + libm::log(sum)
}

/// Fills the front of `out` with the ids of the largest values of `x`,
/// largest first (on ties the lower id first; NaN never), and returns how
/// many: `out.len()`, or fewer when `x` is shorter.
pub fn top_ids(x: &[f32], out: &mut [u32]) -> usize {
    let mut n = 0;
    for (i, &v) in x.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        // Where `v` goes: after every kept value at least as large.
        let mut at = n;
        while at > 0 && v > x[out[at - 1] as usize] {
            at -= 1;
        }
        if at >= out.len() {
            continue;
        }
        n = (n + 1).min(out.len());
        out.copy_within(at..n - 1, at + 1);
        out[at] = i as u32;
    }
    n
}

impl Sampler {
    /// The generator's state (a saved conversation keeps it).
    pub(crate) fn rng_state(&self) -> u64 {
        self.state
    }

    /// Sets the generator's state (a restored conversation's).
    pub(crate) fn set_rng_state(&mut self, state: u64) {
        self.state = state;
    }

    /// A sampler with its generator seeded from `cfg.seed`.
    pub fn new(cfg: SamplerConfig) -> Sampler {
        let mut s = Sampler {
            cfg,
            bias: LogitBias::default(),
            state: 0,
        };
        s.reseed();
        s
    }

    /// Restarts the generator from `cfg.seed`, as a new sampler's.
    pub fn reseed(&mut self) {
        self.state = self.cfg.seed ^ 0x9e37_79b9_7f4a_7c15;
    }

    /// The next value of the generator (SplitMix64).
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform value in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Picks a token. `logits` (vocab) is modified (penalties); `recent`
    /// are the previous tokens; `scratch` holds at least `logits.len()`
    /// candidate slots.
    pub fn sample(&mut self, logits: &mut [f32], recent: &[u32], scratch: &mut [u32]) -> u32 {
        let c = self.cfg;
        if c.repeat_penalty != 1.0 && c.repeat_penalty > 0.0 {
            let window = &recent[recent.len().saturating_sub(c.repeat_last_n)..];
            for (j, &id) in window.iter().enumerate() {
                // Once per distinct token, as llama.cpp does.
                if window[..j].contains(&id) {
                    continue;
                }
                if let Some(l) = logits.get_mut(id as usize) {
                    *l = if *l > 0.0 {
                        *l / c.repeat_penalty
                    } else {
                        *l * c.repeat_penalty
                    };
                }
            }
        }
        if c.temperature <= 0.0 || c.top_k == 1 {
            return argmax(logits) as u32;
        }
        let n = logits.len().min(scratch.len());
        // Order: logit descending, index ascending (deterministic ties).
        let order = |a: &u32, b: &u32| {
            let (x, y) = (logits[*a as usize], logits[*b as usize]);
            y.partial_cmp(&x)
                .unwrap_or(core::cmp::Ordering::Equal)
                .then(a.cmp(b))
        };
        let k = if c.top_k == 0 || c.top_k > n {
            n
        } else {
            c.top_k
        };
        let cand: &mut [u32] = if k <= TOP_K_BY_INSERTION && k < n {
            // One pass keeping the k best in that order (the same k
            // tokens, in the same order, as selecting and sorting all).
            let found = top_ids(&logits[..n], &mut scratch[..k]);
            if found == 0 {
                return argmax(logits) as u32;
            }
            &mut scratch[..found]
        } else {
            let cand = &mut scratch[..n];
            for (i, s) in cand.iter_mut().enumerate() {
                *s = i as u32;
            }
            if k < n {
                crate::sort::select_smallest(cand, k, order);
            }
            let cand = &mut cand[..k];
            crate::sort::sort_by(cand, order);
            cand
        };
        let k = cand.len();
        // Probabilities over the candidates at temperature 1 for top-p/min-p
        // (llama.cpp applies temperature last).
        let max = logits[cand[0] as usize];
        let mut sum = 0.0f64;
        for &i in cand.iter() {
            sum += libm::exp((logits[i as usize] - max) as f64);
        }
        let mut keep = k;
        if c.top_p < 1.0 {
            let mut acc = 0.0f64;
            for (j, &i) in cand.iter().enumerate() {
                acc += libm::exp((logits[i as usize] - max) as f64) / sum;
                if acc >= c.top_p as f64 {
                    keep = j + 1;
                    break;
                }
            }
        }
        if c.min_p > 0.0 {
            // p_i / p_max = exp(l_i - max)
            let floor = libm::log(c.min_p as f64);
            let above = cand[..keep]
                .iter()
                .take_while(|&&i| ((logits[i as usize] - max) as f64) >= floor)
                .count();
            keep = above.max(1);
        }
        let cand = &cand[..keep];
        let t = c.temperature as f64;
        let mut total = 0.0f64;
        for &i in cand {
            total += libm::exp((logits[i as usize] - max) as f64 / t);
        }
        let mut r = self.uniform() * total;
        for &i in cand {
            r -= libm::exp((logits[i as usize] - max) as f64 / t);
            if r < 0.0 {
                return i;
            }
        }
        cand[cand.len() - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_ids_and_log_probabilities() {
        let x = [1.0f32, 3.0, f32::NAN, 3.0, -2.0, 0.5];
        let mut out = [0u32; 4];
        assert_eq!(top_ids(&x, &mut out), 4);
        assert_eq!(out, [1, 3, 0, 5]);
        let mut two = [9u32; 8];
        assert_eq!(top_ids(&[2.0, 7.0], &mut two), 2);
        assert_eq!(&two[..2], &[1, 0]);
        assert_eq!(top_ids(&x, &mut []), 0);
        // Log-probabilities sum to one in probability.
        let y = [0.25f32, -1.0, 2.0, 0.0];
        let lse = log_sum_exp(&y);
        let total: f64 = y.iter().map(|&v| libm::exp(v as f64 - lse)).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert_eq!(log_sum_exp(&[f32::NEG_INFINITY]), f64::NEG_INFINITY);
    }

    /// Top-k by insertion draws what selecting and sorting every token
    /// draws (the old path, kept for larger k): same tokens for the same
    /// seeds over random rows with ties and -inf.
    #[test]
    fn top_k_by_insertion_equals_the_full_selection() {
        extern crate std;
        use std::vec::Vec;
        let mut rng = 7u64;
        let mut next = || {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 40) as u32
        };
        for round in 0..200 {
            let n = 50 + (next() % 400) as usize;
            let row: Vec<f32> = (0..n)
                .map(|_| match next() % 10 {
                    0 => f32::NEG_INFINITY,
                    1 => 1.0,
                    _ => (next() % 1000) as f32 / 100.0 - 5.0,
                })
                .collect();
            // Odd rounds: more than TOP_K_BY_INSERTION, the selection path.
            let k = if round % 2 == 0 {
                1 + (next() % 64) as usize
            } else {
                65 + (next() % 300) as usize
            };
            let cfg = SamplerConfig {
                temperature: 0.9,
                top_k: k,
                seed: round,
                ..SamplerConfig::default()
            };
            // The reference: every id, selected and sorted.
            let mut ids: Vec<u32> = (0..n as u32).collect();
            ids.sort_by(|&a, &b| {
                row[b as usize]
                    .partial_cmp(&row[a as usize])
                    .unwrap()
                    .then(a.cmp(&b))
            });
            if k <= TOP_K_BY_INSERTION {
                let mut top = std::vec![0u32; k.min(n)];
                assert_eq!(top_ids(&row, &mut top), k.min(n));
                assert_eq!(&top[..], &ids[..k.min(n)], "round {round}");
            }
            let mut a = Sampler::new(cfg);
            let mut b = Sampler::new(SamplerConfig { top_k: 0, ..cfg });
            // With top_k 0 the same k best are reached by masking the rest.
            let mut masked = row.clone();
            for &id in &ids[k.min(n)..] {
                masked[id as usize] = f32::NEG_INFINITY;
            }
            let mut scratch = std::vec![0u32; n];
            for _ in 0..5 {
                let x = a.sample(&mut row.clone(), &[], &mut scratch);
                let y = b.sample(&mut masked.clone(), &[], &mut scratch);
                if row[x as usize] != f32::NEG_INFINITY {
                    assert_eq!(x, y, "round {round}");
                }
            }
        }
    }

    #[test]
    fn argmax_matches_the_in_order_definition() {
        extern crate std;
        // Lengths around the 16-lane blocks, values drawn from a small set
        // so ties, NaN, infinities and both zeros meet in every position.
        let palette = [
            0.0,
            -0.0,
            1.5,
            -2.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            3.25,
            -f32::NAN,
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in (0..70).chain([151_936, 151_937]) {
            for round in 0..200 {
                // Some rounds use a narrow palette (all NaN, all -inf, ties).
                let width = [1, 2, 3, 5, 7, 9][round % 6];
                let offset = (next() % palette.len() as u64) as usize;
                let x: std::vec::Vec<f32> = (0..len)
                    .map(|_| palette[(offset + (next() % width) as usize) % palette.len()])
                    .collect();
                assert_eq!(
                    argmax(&x),
                    argmax_in_order(&x),
                    "len {len} round {round}: {x:?}"
                );
                if len > 1000 && round >= 12 {
                    break;
                }
            }
        }
        // The largest value past the last whole block, and before it.
        let mut x = std::vec![1.0f32; 37];
        x[36] = 2.0;
        assert_eq!(argmax(&x), 36);
        x[3] = 2.0;
        assert_eq!(argmax(&x), 3);
        assert_eq!(argmax(&[f32::NAN, f32::NAN]), 0);
        assert_eq!(argmax(&[f32::NAN, f32::NEG_INFINITY, f32::NEG_INFINITY]), 1);
        assert_eq!(argmax(&[-0.0, 0.0]), 0);
        assert_eq!(argmax(&[]), 0);
    }

    #[test]
    fn greedy_is_argmax_with_lowest_index_on_ties() {
        let mut s = Sampler::new(SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        });
        let mut l = [0.5, 2.0, 2.0, -1.0];
        assert_eq!(s.sample(&mut l, &[], &mut [0; 4]), 1);
    }

    #[test]
    fn same_seed_same_tokens() {
        let cfg = SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Default::default()
        };
        let logits: [f32; 8] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
        let draw = |seed| {
            let mut s = Sampler::new(SamplerConfig { seed, ..cfg });
            (0..32)
                .map(|_| s.sample(&mut logits.clone(), &[], &mut [0; 8]))
                .collect::<heapless::Vec<u32, 32>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn filters_restrict_the_candidates() {
        let logits: [f32; 6] = [5.0, 4.0, 0.0, -1.0, -2.0, -3.0];
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 2,
            top_p: 1.0,
            min_p: 0.0,
            ..Default::default()
        });
        for _ in 0..200 {
            assert!(s.sample(&mut logits.clone(), &[], &mut [0; 6]) < 2);
        }
        // min_p 0.5: only tokens with p >= 0.5 p_max: exp(-1) < 0.5, so only token 0.
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.5,
            ..Default::default()
        });
        for _ in 0..50 {
            assert_eq!(s.sample(&mut logits.clone(), &[], &mut [0; 6]), 0);
        }
        // Penalty flips the winner.
        let mut s = Sampler::new(SamplerConfig {
            temperature: 0.0,
            repeat_penalty: 2.0,
            ..Default::default()
        });
        assert_eq!(s.sample(&mut logits.clone(), &[0], &mut [0; 6]), 1);
    }

    #[test]
    fn settings_out_of_range_are_named() {
        let d = SamplerConfig::default();
        assert_eq!(d.check(), Ok(()));
        let greedy = SamplerConfig {
            temperature: 0.0,
            top_p: 1.0,
            min_p: 0.0,
            ..d
        };
        assert_eq!(greedy.check(), Ok(()));
        for (bad, name) in [
            (
                SamplerConfig {
                    temperature: f32::NAN,
                    ..d
                },
                "temperature",
            ),
            (
                SamplerConfig {
                    temperature: -1.0,
                    ..d
                },
                "temperature",
            ),
            (
                SamplerConfig {
                    temperature: f32::INFINITY,
                    ..d
                },
                "temperature",
            ),
            (SamplerConfig { top_p: 7.0, ..d }, "top_p"),
            (
                SamplerConfig {
                    top_p: f32::NAN,
                    ..d
                },
                "top_p",
            ),
            (SamplerConfig { min_p: -3.0, ..d }, "min_p"),
            (
                SamplerConfig {
                    repeat_penalty: 0.0,
                    ..d
                },
                "repeat_penalty",
            ),
            (
                SamplerConfig {
                    repeat_penalty: f32::NAN,
                    ..d
                },
                "repeat_penalty",
            ),
        ] {
            let e = bad.check().unwrap_err();
            assert!(e.starts_with(name), "{e}");
        }
    }
}
