//! Speculative decoding's drafting policy: read the weights once for
//! several tokens. The verify step and the draft model are
//! [`crate::generate`]'s ([`Generator::decode`](crate::generate::Generator::decode),
//! [`DraftModel`](crate::generate::DraftModel)).
//!
//! A [`Drafter`] proposes tokens likely to follow the text; one forward
//! step of `1 + n` rows through the **decode copy** (the sampled token and
//! `n` drafted ones, every row with logits) verifies them; the sampler then
//! takes the rows in order, exactly as plain decoding would take the logits
//! of one step after another, and each drafted token the sampler picks
//! again is accepted without a new step. At the first token it picks
//! differently the remaining drafts are dropped: the KV cache is rolled
//! back by moving the sequence's position (what lies past it is never read
//! and is overwritten by the next step).
//!
//! Why the output is plain decoding's: every row of a multi-row step of
//! the decode copy equals a single-row decode step bit for bit (each
//! kernel computes each activation row alone, in a fixed order; the
//! attention's result for a row does not depend on its block), so the
//! sampler sees the same logits, the same history and the same generator
//! state as in plain decoding, at every temperature. A drafted token is
//! accepted iff it is the token sampled from the target's distribution
//! `p`. For a deterministic draft (lookup, a prediction, a draft model
//! read greedily: `q` a point mass) this *is* the standard acceptance rule
//! (accept with min(1, p/q) = p(d), else sample from max(0, p - q)
//! normalized = `p` without `d`), so the output distribution is the
//! target's; with the same seed it is even the same text.
//!
//! Draft sources: [`Lookup`] (n-grams of the prompt and the text so far,
//! and optionally a prediction: OpenAI's predicted outputs) and
//! [`DraftModel`](crate::generate::DraftModel) (a smaller model of the same vocabulary, with its own
//! weights, arena and KV cache, read greedily). [`Adaptive`] moves the
//! draft length: longer after a block accepted whole, shorter after a
//! rejection. Nothing here allocates.

use crate::error::Error;
use crate::tokenizer::Tokenizer;

/// Most tokens drafted for one verify step (the step has one row more).
pub const MAX_DRAFT: usize = 32;

/// A source of drafted tokens.
pub trait Drafter {
    /// Writes up to `out.len()` tokens likely to follow `history` (every
    /// token of the sequence so far, the one just sampled last) to `out`
    /// and returns how many (0: no guess, the step is a plain one).
    fn draft(&mut self, history: &[u32], out: &mut [u32]) -> Result<usize, Error>;
}

/// Prompt lookup: the tokens that followed the latest earlier occurrence
/// of the sequence's last `n` tokens (`n` from `max_ngram` down to
/// `min_ngram`), looked up first in `prediction` (the text the answer is
/// expected to resemble: OpenAI's predicted outputs), then in the
/// sequence itself (the prompt and the answer so far).
#[derive(Clone, Copy, Debug)]
pub struct Lookup<'a> {
    /// Expected text of the answer, as tokens (empty: none).
    pub prediction: &'a [u32],
    /// Shortest n-gram matched.
    pub min_ngram: usize,
    /// Longest n-gram matched (tried first).
    pub max_ngram: usize,
}

impl<'a> Lookup<'a> {
    /// Lookup over the sequence only, n-grams of 1 to 3 tokens (as
    /// prompt-lookup decoding usually takes them; not tuned here: the draft
    /// length is what docs/benchmarks.md measures).
    pub fn new() -> Lookup<'static> {
        Lookup {
            prediction: &[],
            min_ngram: 1,
            max_ngram: 3,
        }
    }

    /// Lookup in `prediction` first, then in the sequence.
    pub fn with_prediction(prediction: &'a [u32]) -> Lookup<'a> {
        Lookup {
            prediction,
            ..Lookup::new()
        }
    }
}

impl Default for Lookup<'static> {
    fn default() -> Self {
        Lookup::new()
    }
}

/// Where the n-gram `key` starts in `corpus[..end]` with the most tokens
/// after it up to `want`: the latest occurrence followed by at least
/// `want` tokens of `corpus`, else the earliest (the longest follow-up).
/// `None` when it does not occur.
fn best_occurrence(corpus: &[u32], end: usize, key: &[u32], want: usize) -> Option<usize> {
    let n = key.len();
    if n == 0 || end < n {
        return None;
    }
    let mut best = None;
    for i in (0..=end - n).rev() {
        if corpus[i..i + n] == *key {
            best = Some(i);
            if corpus.len() - (i + n) >= want {
                break;
            }
        }
    }
    best
}

/// The drafted tokens after an occurrence of `history`'s last n-gram (the
/// longest of `max_ngram` down to `min_ngram` tokens that occurs): in
/// `prediction`, else earlier in `history` (an occurrence that is not the
/// suffix itself); the latest occurrence with a follow-up of `out.len()`
/// tokens, else the one with the longest. Writes at most `out.len()`;
/// returns how many.
pub fn lookup_draft(
    prediction: &[u32],
    history: &[u32],
    min_ngram: usize,
    max_ngram: usize,
    out: &mut [u32],
) -> usize {
    let want = out.len();
    if want == 0 {
        return 0;
    }
    let len = history.len();
    for n in (min_ngram.max(1)..=max_ngram.min(len)).rev() {
        let key = &history[len - n..];
        let found = best_occurrence(prediction, prediction.len().saturating_sub(1), key, want)
            .map(|i| &prediction[i + n..])
            // In the sequence the occurrence must end before the last token.
            .or_else(|| best_occurrence(history, len - 1, key, want).map(|i| &history[i + n..]));
        if let Some(next) = found {
            let k = next.len().min(want);
            out[..k].copy_from_slice(&next[..k]);
            return k;
        }
    }
    0
}

impl Drafter for Lookup<'_> {
    fn draft(&mut self, history: &[u32], out: &mut [u32]) -> Result<usize, Error> {
        Ok(lookup_draft(
            self.prediction,
            history,
            self.min_ngram,
            self.max_ngram,
            out,
        ))
    }
}

/// Whether two tokenizers have the same vocabulary (a draft model must
/// share the target's): `Err(id)` names the first token whose bytes
/// differ, or the first id one of them lacks.
pub fn same_vocabulary(a: &Tokenizer, b: &Tokenizer) -> Result<(), u32> {
    let (ta, tb) = (a.tables(), b.tables());
    let n = ta.n_tokens.max(tb.n_tokens);
    for id in 0..n {
        if ta.token_bytes(id) != tb.token_bytes(id) {
            return Err(id);
        }
    }
    Ok(())
}

/// The draft length of the next step: `max` at first, two more after a
/// block accepted whole (up to `max`), one less after a rejection (down
/// to 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adaptive {
    /// The next step's draft length.
    pub n: usize,
    /// The longest draft.
    pub max: usize,
}

impl Adaptive {
    /// Starts at `max` (clamped to 1..=[`MAX_DRAFT`]).
    pub fn new(max: usize) -> Adaptive {
        let max = max.clamp(1, MAX_DRAFT);
        Adaptive { n: max, max }
    }

    /// After a verify step of `drafted` tokens of which `accepted` were
    /// accepted.
    pub fn update(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        if accepted >= drafted {
            self.n = (self.n + 2).min(self.max);
        } else {
            self.n = self.n.saturating_sub(1).max(1);
        }
    }
}

/// No drafts: plain decoding.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoDraft;

impl Drafter for NoDraft {
    fn draft(&mut self, _: &[u32], _: &mut [u32]) -> Result<usize, Error> {
        Ok(0)
    }
}

/// The draft source of one answer, as every host chooses it
/// ([`DraftSource::choose`]: the embedding API, `kestrel run`/`chat`, the
/// server's slots).
pub enum DraftSource<'a> {
    /// Plain decoding.
    None,
    /// Prompt lookup (over a prediction, then the sequence).
    Lookup(Lookup<'a>),
    /// A draft model (the host's: it owns its weights and cache).
    Model(&'a mut dyn Drafter),
}

impl<'a> DraftSource<'a> {
    /// The one policy: a `prediction` (OpenAI's predicted outputs: text
    /// the answer is expected to resemble) is looked up first, then the
    /// sequence; else the draft `model`, when the host has one; else
    /// prompt lookup when `lookup`; else none.
    pub fn choose(
        prediction: &'a [u32],
        model: Option<&'a mut dyn Drafter>,
        lookup: bool,
    ) -> DraftSource<'a> {
        match model {
            _ if !prediction.is_empty() => DraftSource::Lookup(Lookup::with_prediction(prediction)),
            Some(m) => DraftSource::Model(m),
            None if lookup => DraftSource::Lookup(Lookup::new()),
            None => DraftSource::None,
        }
    }

    /// Whether [`DraftSource::choose`] drafts at all with these (a host
    /// that decides before it has the model at hand: the server's slots).
    pub fn drafts(prediction: &[u32], model: bool, lookup: bool) -> bool {
        !prediction.is_empty() || model || lookup
    }
}

impl Drafter for DraftSource<'_> {
    fn draft(&mut self, history: &[u32], out: &mut [u32]) -> Result<usize, Error> {
        match self {
            DraftSource::None => Ok(0),
            DraftSource::Lookup(l) => l.draft(history, out),
            DraftSource::Model(m) => m.draft(history, out),
        }
    }
}

/// Speculation settings for one answer: where drafts come from and the
/// longest draft (also bounded by the state's `opts.draft`).
pub struct Speculation<'d> {
    /// The draft source.
    pub drafter: &'d mut dyn Drafter,
    /// The draft length, adapted step by step.
    pub length: Adaptive,
}

/// Drafting counts of one answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecStats {
    /// Verify steps run (forward steps with at least one drafted row).
    pub steps: usize,
    /// Tokens drafted.
    pub drafted: usize,
    /// Drafted tokens accepted.
    pub accepted: usize,
}

impl SpecStats {
    /// Accepted / drafted (0 without drafts).
    pub fn rate(&self) -> f64 {
        if self.drafted == 0 {
            0.0
        } else {
            self.accepted as f64 / self.drafted as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_takes_the_latest_longest_match() {
        let mut out = [0u32; 4];
        // "1 2 3 9 9 1 2 3 7 | 2 3": the 2-gram "2 3" last occurred before
        // 7, but only 3 tokens follow; the earlier one has 4 and more.
        let h = [1, 2, 3, 9, 9, 1, 2, 3, 7, 2, 3];
        assert_eq!(lookup_draft(&[], &h, 1, 3, &mut out), 4);
        assert_eq!(out, [9, 9, 1, 2]);
        assert_eq!(lookup_draft(&[], &h, 1, 3, &mut out[..3]), 3);
        assert_eq!(out[..3], [7, 2, 3]);
        // A run of one token drafts more of it.
        let run = [4, 5, 5, 5, 5, 5, 5];
        assert_eq!(lookup_draft(&[], &run, 1, 3, &mut out), 3);
        assert_eq!(out[..3], [5, 5, 5]);
        // No earlier occurrence of any n-gram: nothing.
        assert_eq!(lookup_draft(&[], &[1, 2, 3], 1, 3, &mut out), 0);
        // The prediction comes first, and its follow-up runs to its end.
        let pred = [5, 2, 3, 4, 4];
        assert_eq!(lookup_draft(&pred, &h, 1, 3, &mut out), 2);
        assert_eq!(out[..2], [4, 4]);
        // A 3-gram beats a 1-gram.
        let h = [3, 8, 1, 2, 3, 6, 1, 2, 3];
        assert_eq!(lookup_draft(&[], &h, 1, 3, &mut out), 4);
        assert_eq!(out, [6, 1, 2, 3]);
        // out's length bounds the draft.
        assert_eq!(lookup_draft(&[], &h, 1, 3, &mut out[..1]), 1);
        assert_eq!(lookup_draft(&[], &h, 1, 3, &mut []), 0);
    }

    #[test]
    fn the_draft_length_grows_on_full_blocks_and_shrinks_on_rejections() {
        let mut a = Adaptive::new(6);
        assert_eq!(a.n, 6);
        a.update(6, 2);
        assert_eq!(a.n, 5);
        a.update(5, 5);
        assert_eq!(a.n, 6);
        for _ in 0..10 {
            a.update(3, 0);
        }
        assert_eq!(a.n, 1);
        a.update(0, 0);
        assert_eq!(a.n, 1);
        assert_eq!(Adaptive::new(1000).max, MAX_DRAFT);
    }
}
