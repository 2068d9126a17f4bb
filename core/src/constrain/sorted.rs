//! The sorted vocabulary and one constrained answer's state, for hosts with an allocator
//! (the shell's `kestrel run --json-schema` and server, the hosted C
//! library): the vocabulary sorted by bytes (built once per model) and an
//! answer's schema, progress and scratch.

use super::{byte_set, classify_token, Matcher, Schema, Vocab, MAX_TOKEN_BYTES, PLAIN_COUNTS};
use crate::generate::{Constraint, MaskCache, Progress, MASK_CACHE};
use crate::tokenizer::Tokenizer;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

/// The tokens an answer may hold, sorted by their bytes (the added tokens,
/// `<|im_end|>` and the like, are left out: the end tokens are the
/// constraint's own decision).
pub struct SortedVocab {
    order: Vec<u32>,
    offsets: Vec<u32>,
    bytes: Vec<u8>,
    skip: Vec<u32>,
    skip2: Vec<u32>,
    position: Vec<u32>,
    unplain: Vec<u32>,
    plain_ids: Vec<u64>,
    plain_ascii_ids: Vec<u64>,
    not_plain_ascii: Vec<u32>,
    plain_upto: Vec<u64>,
    longest_plain: u16,
    not_short_plain: Vec<u32>,
    byte_sets: Vec<u128>,
}

impl SortedVocab {
    /// Sorts the first `vocab` ids of `tok`.
    pub fn new(tok: &Tokenizer, vocab: usize) -> SortedVocab {
        let mut pieces: Vec<(Vec<u8>, u32)> = Vec::with_capacity(vocab);
        for id in 0..vocab as u32 {
            if tok.added_flags(id).is_some() {
                continue;
            }
            let mut b = Vec::new();
            if tok
                .token_decode_bytes(id, &mut |x| b.extend_from_slice(x))
                .is_ok()
                && !b.is_empty()
            {
                pieces.push((b, id));
            }
        }
        crate::sort::sort_by(&mut pieces, |a, b| a.cmp(b));
        let mut v = SortedVocab {
            order: Vec::with_capacity(pieces.len()),
            offsets: Vec::with_capacity(pieces.len() + 1),
            bytes: Vec::new(),
            skip: vec![0; pieces.len()],
            skip2: vec![0; pieces.len()],
            position: vec![u32::MAX; vocab],
            unplain: Vec::new(),
            plain_ids: vec![0; vocab.div_ceil(64)],
            plain_ascii_ids: vec![0; vocab.div_ceil(64)],
            not_plain_ascii: Vec::new(),
            plain_upto: vec![0; vocab.div_ceil(64) * PLAIN_COUNTS],
            longest_plain: 0,
            not_short_plain: Vec::new(),
            byte_sets: Vec::with_capacity(pieces.len()),
        };
        v.offsets.push(0);
        for (i, (b, id)) in pieces.iter().enumerate() {
            v.order.push(*id);
            v.bytes.extend_from_slice(b);
            v.offsets.push(v.bytes.len() as u32);
            v.byte_sets.push(byte_set(b));
            classify_token(
                *id,
                i as u32,
                b,
                &mut v.plain_ids,
                &mut v.plain_ascii_ids,
                &mut v.plain_upto,
                &mut v.longest_plain,
                [
                    &mut v.unplain,
                    &mut v.not_plain_ascii,
                    &mut v.not_short_plain,
                ],
            );
            v.position[*id as usize] = i as u32;
        }
        // From the end: the next position whose first byte (first two
        // bytes) differ.
        let (mut next, mut next2) = (pieces.len() as u32, pieces.len() as u32);
        for i in (0..pieces.len()).rev() {
            if let Some((after, _)) = pieces.get(i + 1) {
                let this = &pieces[i].0;
                if after[0] != this[0] {
                    next = i as u32 + 1;
                }
                if this.len() < 2 || after.len() < 2 || after[..2] != this[..2] {
                    next2 = i as u32 + 1;
                }
            }
            v.skip[i] = next;
            v.skip2[i] = next2;
        }
        v
    }

    /// The tables as the mask reads them.
    pub fn view(&self) -> Vocab<'_> {
        Vocab {
            order: &self.order,
            offsets: &self.offsets,
            bytes: &self.bytes,
            skip: &self.skip,
            skip2: &self.skip2,
            position: &self.position,
            unplain: &self.unplain,
            plain_ids: &self.plain_ids,
            plain_ascii_ids: &self.plain_ascii_ids,
            not_plain_ascii: &self.not_plain_ascii,
            plain_upto: &self.plain_upto,
            longest_plain: self.longest_plain,
            not_short_plain: &self.not_short_plain,
            byte_sets: &self.byte_sets,
        }
    }
}

/// One constrained answer: its schema, where it stands, its scratch.
pub struct JsonOutput {
    /// The schema.
    pub schema: Box<Schema>,
    /// Where the answer stands.
    pub progress: Progress,
    states: Vec<Matcher>,
    bits: Vec<u64>,
    cache: Box<MaskCache>,
}

impl JsonOutput {
    /// A new answer under `schema`, over a vocabulary of `vocab` ids.
    pub fn new(schema: Schema, vocab: usize) -> JsonOutput {
        let schema = Box::new(schema);
        let progress = Progress::new(&schema);
        JsonOutput {
            states: vec![progress.matcher.clone(); MAX_TOKEN_BYTES + 1],
            bits: vec![0; vocab.div_ceil(64) * (MASK_CACHE + 1)],
            cache: Box::new(MaskCache::new(&schema)),
            schema,
            progress,
        }
    }

    /// Starts a new answer: the output so far is empty again (the cached
    /// masks stay: they belong to the schema).
    pub fn restart(&mut self) {
        self.progress = Progress::new(&self.schema);
    }

    /// The constraint for one step (or one answer) over `vocab`.
    pub fn constraint<'a>(&'a mut self, vocab: &'a Vocab<'a>) -> Constraint<'a> {
        Constraint {
            schema: &self.schema,
            vocab,
            progress: &mut self.progress,
            states: &mut self.states,
            bits: &mut self.bits,
            cache: &mut self.cache,
        }
    }
}
