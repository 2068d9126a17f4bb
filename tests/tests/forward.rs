//! Forward pass on synthetic models: batch prefill and token-by-token decode
//! agree bit for bit when they read the same weight copy; the KV cache
//! refuses to overflow; bad tokens are errors.

use kestrel_core::convert::WeightMode;
use kestrel_core::kernels::Kernels;
use kestrel_core::model::config::Arch;
use kestrel_core::model::forward::forward;
use kestrel_core::model::weights::Weights;
use kestrel_core::parallel::Serial;
use kestrel_core::state::{ArenaLayout, KvType, Options, State};
use kestrel_core::vqf::Vqf;
use kestrel_core::Error;
use kestrel_tests::{build_vqf, detected_kernels, tiny_config, SyntheticSource};

fn run(bytes: &[u8], tokens: &[u32], batch: usize, kv: KvType) -> Vec<Vec<f32>> {
    run_with(&detected_kernels(), bytes, tokens, batch, kv)
}

fn run_with(k: &Kernels, bytes: &[u8], tokens: &[u32], batch: usize, kv: KvType) -> Vec<Vec<f32>> {
    let v = Vqf::parse(bytes).unwrap();
    let w = Weights::new(v, true).unwrap();
    let opts = Options {
        max_seq: 16,
        max_batch: batch,
        kv,
        all_logits: true,
    };
    let mut arena = vec![0u8; ArenaLayout::new(&w.cfg, &opts).unwrap().total];
    let mut s = State::new(&w.cfg, opts, &mut arena).unwrap();
    let mut rows = Vec::new();
    for chunk in tokens.chunks(batch) {
        let logits = forward(&w, &mut s, k, &Serial, chunk).unwrap();
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

#[test]
fn context_full_and_bad_tokens_are_errors() {
    let cfg = tiny_config(Arch::Qwen3);
    let bytes = build_vqf(&cfg, WeightMode::Q8, &SyntheticSource { cfg });
    let w = Weights::new(Vqf::parse(&bytes).unwrap(), true).unwrap();
    let opts = Options {
        max_seq: 4,
        max_batch: 4,
        kv: KvType::F16,
        all_logits: false,
    };
    let mut arena = vec![0u8; ArenaLayout::new(&w.cfg, &opts).unwrap().total];
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
