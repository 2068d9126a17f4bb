//! Forward pass on synthetic models: batch prefill and token-by-token decode
//! agree bit for bit when they read the same weight copy; the KV cache
//! refuses to overflow; bad tokens are errors.

use kestrel_core::config::Arch;
use kestrel_core::convert::WeightMode;
use kestrel_core::kernels::Kernels;
use kestrel_core::model::forward::forward;
use kestrel_core::parallel::{Parallel, Serial};
use kestrel_core::state::{ArenaSizes, KvType, Options, State};
use kestrel_core::vqf::Vqf;
use kestrel_core::Error;
use kestrel_tests::{build_vqf, detected_kernels, tiny_config, SyntheticSource};

fn run(bytes: &[u8], tokens: &[u32], batch: usize, kv: KvType) -> Vec<Vec<f32>> {
    run_with(&detected_kernels(), bytes, tokens, batch, kv)
}

fn run_with(k: &Kernels, bytes: &[u8], tokens: &[u32], batch: usize, kv: KvType) -> Vec<Vec<f32>> {
    run_on(k, &Serial, bytes, tokens, batch, kv)
}

fn run_on<P: Parallel>(
    k: &Kernels,
    pool: &P,
    bytes: &[u8],
    tokens: &[u32],
    batch: usize,
    kv: KvType,
) -> Vec<Vec<f32>> {
    let v = Vqf::parse(bytes).unwrap();
    let w = kestrel_tests::weights(v, true).unwrap();
    let opts = Options {
        max_seq: 16,
        max_batch: batch,
        kv,
        all_logits: true,
        slots: 1,
        draft: 0,
    };
    let mut arena = vec![0u8; ArenaSizes::new(&w.cfg, &opts).unwrap().total];
    let mut s = State::new(&w.cfg, opts, &mut arena).unwrap();
    let mut rows = Vec::new();
    for chunk in tokens.chunks(batch) {
        let logits = forward(&w, &mut s, k, pool, chunk).unwrap();
        rows.extend(logits.chunks(w.cfg.vocab_size as usize).map(|r| r.to_vec()));
    }
    rows
}

#[test]
fn prefill_equals_decode_on_the_same_copy() {
    let tokens = [1u32, 5, 9, 2, 33, 7, 0, 39];
    for arch in [Arch::Qwen3, Arch::Qwen2] {
        let cfg = tiny_config(arch);
        for mode in [
            WeightMode::F32,
            WeightMode::Q8,
            WeightMode::Q4,
            WeightMode::F16,
        ] {
            let bytes = build_vqf(&cfg, mode, &SyntheticSource { cfg });
            for kv in [KvType::F32, KvType::F16] {
                let batched = run(&bytes, &tokens, 8, kv);
                let stepped = run(&bytes, &tokens, 1, kv);
                assert_eq!(batched.len(), tokens.len());
                for (t, (a, b)) in batched.iter().zip(&stepped).enumerate() {
                    assert!(a.iter().all(|x| x.is_finite()));
                    let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(
                        same,
                        "{arch:?} {mode:?} {kv:?} row {t}: batch and step differ"
                    );
                }
            }
        }
    }
}

#[test]
fn detected_kernels_give_the_scalar_logits_bit_for_bit() {
    let k = detected_kernels();
    let tokens = [3u32, 8, 1, 30, 12, 4, 39, 0, 17];
    for arch in [Arch::Qwen3, Arch::Qwen2] {
        let cfg = tiny_config(arch);
        for mode in [
            WeightMode::F32,
            WeightMode::F16,
            WeightMode::Q8,
            WeightMode::Q4,
        ] {
            let bytes = build_vqf(&cfg, mode, &SyntheticSource { cfg });
            for batch in [1, 4, 9] {
                let fast = run_with(&k, &bytes, &tokens, batch, KvType::F16);
                let scalar = run_with(&Kernels::Scalar, &bytes, &tokens, batch, KvType::F16);
                for (t, (a, b)) in fast.iter().zip(&scalar).enumerate() {
                    let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(
                        same,
                        "{} {arch:?} {mode:?} batch {batch} row {t}: differs from scalar",
                        k.name()
                    );
                }
            }
        }
    }
}

/// Grouped-query attention with 2 to 12 query heads per kv head (each kv
/// group's heads computed together) gives the scalar kernels' bits, on 1 to
/// 4 threads (the heads split in whole kv groups, or head by head when the
/// threads outnumber the groups), batched and stepped, f16 and f32 caches.
#[test]
fn grouped_heads_give_the_scalar_logits_on_any_thread_count() {
    let k = detected_kernels();
    let tokens = [3u32, 8, 1, 30, 12, 4, 39, 0, 17, 5, 22];
    let pools: Vec<kestrel::pool::Pool> = (1..=4).map(kestrel::pool::Pool::new).collect();
    for (heads, kv_heads, head_dim) in [(8u32, 2u32, 8u32), (12, 3, 16), (12, 1, 8), (4, 2, 16)] {
        let mut cfg = tiny_config(Arch::Qwen3);
        cfg.num_heads = heads;
        cfg.num_kv_heads = kv_heads;
        cfg.head_dim = head_dim;
        cfg.rotary_dim = head_dim;
        let bytes = build_vqf(&cfg, WeightMode::Q8, &SyntheticSource { cfg });
        for kv in [KvType::F16, KvType::F32] {
            for batch in [1, 4, 11] {
                let want = run_with(&Kernels::Scalar, &bytes, &tokens, batch, kv);
                for pool in &pools {
                    let got = run_on(&k, pool, &bytes, &tokens, batch, kv);
                    let same = got
                        .iter()
                        .flatten()
                        .zip(want.iter().flatten())
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(
                        same,
                        "{} heads {heads}/{kv_heads} x {head_dim} {kv:?} batch {batch} {} threads",
                        k.name(),
                        pool.threads()
                    );
                }
            }
        }
    }
}

#[test]
fn context_full_and_bad_tokens_are_errors() {
    let cfg = tiny_config(Arch::Qwen3);
    let bytes = build_vqf(&cfg, WeightMode::Q8, &SyntheticSource { cfg });
    let w = kestrel_tests::weights(Vqf::parse(&bytes).unwrap(), true).unwrap();
    let opts = Options {
        max_seq: 4,
        max_batch: 4,
        kv: KvType::F16,
        all_logits: false,
        slots: 1,
        draft: 0,
    };
    let mut arena = vec![0u8; ArenaSizes::new(&w.cfg, &opts).unwrap().total];
    let need = arena.len();
    assert!(matches!(
        State::new(&w.cfg, opts, &mut arena[..need - 100]),
        Err(Error::ArenaTooSmall { .. })
    ));
    let mut s = State::new(&w.cfg, opts, &mut arena).unwrap();
    let k = detected_kernels();
    assert!(matches!(
        forward(&w, &mut s, &k, &Serial, &[40]),
        Err(Error::BadToken { id: 40, .. })
    ));
    forward(&w, &mut s, &k, &Serial, &[1, 2, 3]).unwrap();
    forward(&w, &mut s, &k, &Serial, &[4]).unwrap();
    let e = forward(&w, &mut s, &k, &Serial, &[5]).unwrap_err();
    assert!(matches!(e, Error::ContextFull { need: 5, max: 4 }), "{e}");
}

/// A decode step of as many sequences as there are slots, on a model whose
/// vocabulary is larger than every other matrix's rows (as Qwen's is): the
/// lm_head's rows of logits fit the scratch (they once did not for more
/// than 8 slots on the 0.5B model), and each equals the sequence's
/// single-sequence logits.
#[test]
fn a_step_of_every_slot_fits_a_large_vocabulary() {
    use kestrel_core::model::forward::{forward_rows, Row};
    let k = detected_kernels();
    let mut cfg = tiny_config(Arch::Qwen2);
    // Larger than 2 * ffn_size (the largest other row count).
    cfg.vocab_size = 1000;
    let bytes = build_vqf(&cfg, WeightMode::Dual, &SyntheticSource { cfg });
    let w = kestrel_tests::weights(Vqf::parse(&bytes).unwrap(), true).unwrap();
    let vocab = w.cfg.vocab_size as usize;
    let slots = 6;
    let tokens: Vec<u32> = (0..slots as u32).map(|i| 3 + 97 * i).collect();
    let want: Vec<Vec<f32>> = tokens
        .iter()
        .map(|&t| {
            let opts = Options {
                max_seq: 4,
                max_batch: 1,
                kv: KvType::F16,
                all_logits: false,
                slots: 1,
                draft: 0,
            };
            let mut arena = vec![0u8; ArenaSizes::new(&w.cfg, &opts).unwrap().total];
            let mut s = State::new(&w.cfg, opts, &mut arena).unwrap();
            forward(&w, &mut s, &k, &Serial, &[t]).unwrap().to_vec()
        })
        .collect();
    let opts = Options {
        max_seq: 4,
        max_batch: slots,
        kv: KvType::F16,
        all_logits: false,
        slots,
        draft: 0,
    };
    let mut arena = vec![0u8; ArenaSizes::new(&w.cfg, &opts).unwrap().total];
    let mut s = State::new(&w.cfg, opts, &mut arena).unwrap();
    let rows: Vec<Row> = (0..slots)
        .map(|slot| Row {
            slot,
            pos: 0,
            token: tokens[slot],
            logits: true,
        })
        .collect();
    let l = forward_rows(&w, &mut s, &k, &Serial, &rows, w.routing.decode, None).unwrap();
    for (slot, want) in want.iter().enumerate() {
        let got = &l[slot * vocab..(slot + 1) * vocab];
        assert!(
            got.iter()
                .zip(want)
                .all(|(g, w)| g.to_bits() == w.to_bits()),
            "slot {slot}"
        );
    }
}

/// Three sequences stepped together by `forward_rows` (one slot's prompt,
/// then two slots' prompts in one step, then decode steps of all three)
/// give each sequence the logits of its own single-sequence `forward` run,
/// bit for bit, on a dual file (Q8 prefill copy, Q4 decode copy).
#[test]
fn forward_rows_equal_single_sequence_forward() {
    use kestrel_core::model::forward::{forward_rows, Row};
    let prompts: [&[u32]; 3] = [&[1, 5, 9, 2, 33], &[4, 4, 7], &[12, 30, 3, 3, 8, 21]];
    let decoded: [&[u32]; 3] = [&[6, 2, 2], &[0, 39, 5], &[17, 1, 9]];
    let k = detected_kernels();
    for arch in [Arch::Qwen3, Arch::Qwen2] {
        let cfg = tiny_config(arch);
        let bytes = build_vqf(&cfg, WeightMode::Dual, &SyntheticSource { cfg });
        let w = kestrel_tests::weights(Vqf::parse(&bytes).unwrap(), true).unwrap();
        assert_ne!(w.routing.prefill, w.routing.decode);
        let vocab = w.cfg.vocab_size as usize;
        // Reference: each sequence alone, prompt in one batch, then one token at a time.
        let mut want: Vec<Vec<Vec<f32>>> = Vec::new();
        for (p, d) in prompts.iter().zip(decoded) {
            let opts = Options {
                max_seq: 16,
                max_batch: 8,
                kv: KvType::F16,
                all_logits: false,
                slots: 1,
                draft: 0,
            };
            let mut arena = vec![0u8; ArenaSizes::new(&w.cfg, &opts).unwrap().total];
            let mut s = State::new(&w.cfg, opts, &mut arena).unwrap();
            let mut rows = vec![forward(&w, &mut s, &k, &Serial, p).unwrap().to_vec()];
            for &t in d {
                rows.push(forward(&w, &mut s, &k, &Serial, &[t]).unwrap().to_vec());
            }
            want.push(rows);
        }
        let opts = Options {
            max_seq: 16,
            max_batch: 16,
            kv: KvType::F16,
            all_logits: false,
            slots: 3,
            draft: 0,
        };
        let mut arena = vec![0u8; ArenaSizes::new(&w.cfg, &opts).unwrap().total];
        let mut s = State::new(&w.cfg, opts, &mut arena).unwrap();
        let prompt_rows = |slot: usize| -> Vec<Row> {
            let p = prompts[slot];
            (0..p.len())
                .map(|i| Row {
                    slot,
                    pos: i,
                    token: p[i],
                    logits: i + 1 == p.len(),
                })
                .collect()
        };
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        let l = forward_rows(
            &w,
            &mut s,
            &k,
            &Serial,
            &prompt_rows(0),
            w.routing.prefill,
            None,
        )
        .unwrap();
        assert!(same(l, &want[0][0]), "{arch:?}: slot 0 prompt");
        let mut both = prompt_rows(1);
        both.extend(prompt_rows(2));
        let l = forward_rows(&w, &mut s, &k, &Serial, &both, w.routing.prefill, None).unwrap();
        assert_eq!(l.len(), 2 * vocab);
        assert!(same(&l[..vocab], &want[1][0]), "{arch:?}: slot 1 prompt");
        assert!(same(&l[vocab..], &want[2][0]), "{arch:?}: slot 2 prompt");
        for step in 0..3 {
            let rows: Vec<Row> = (0..3)
                .map(|slot| Row {
                    slot,
                    pos: prompts[slot].len() + step,
                    token: decoded[slot][step],
                    logits: true,
                })
                .collect();
            let l = forward_rows(&w, &mut s, &k, &Serial, &rows, w.routing.decode, None).unwrap();
            for slot in 0..3 {
                let got = &l[slot * vocab..(slot + 1) * vocab];
                assert!(
                    same(got, &want[slot][step + 1]),
                    "{arch:?}: slot {slot} step {step}"
                );
            }
        }
        // Bad slots, positions past the context and too many logit rows are errors.
        let row = |slot, pos| Row {
            slot,
            pos,
            token: 1,
            logits: true,
        };
        let d = w.routing.decode;
        assert!(forward_rows(&w, &mut s, &k, &Serial, &[row(3, 0)], d, None).is_err());
        assert!(matches!(
            forward_rows(&w, &mut s, &k, &Serial, &[row(0, 16)], d, None),
            Err(Error::ContextFull { need: 17, max: 16 })
        ));
        let four = [row(0, 9), row(1, 9), row(2, 9), row(0, 10)];
        assert!(forward_rows(&w, &mut s, &k, &Serial, &four, d, None).is_err());
    }
}
