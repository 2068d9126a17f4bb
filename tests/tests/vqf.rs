//! VQF: write, parse, read back, and survive corruption without a panic.

use kestrel_core::config::{Arch, MoeConfig, MAX_LAYERS};
use kestrel_core::convert::{Part, WeightMode};
use kestrel_core::quant::repack::Layout;
use kestrel_core::quant::{q4_0, q8_0};
use kestrel_core::tensors::{Role, NO_LAYER};
use kestrel_core::vqf::format::flags;
use kestrel_core::vqf::{self, Vqf};
use kestrel_tests::{build_vqf, tiny_config, SyntheticSource};

const MODES: [WeightMode; 9] = [
    WeightMode::Dual,
    WeightMode::Source,
    WeightMode::Exact,
    WeightMode::Mix(kestrel_core::convert::Recipe::ALL_Q4),
    WeightMode::Small(kestrel_core::convert::Recipe::ALL_Q4),
    WeightMode::Q4,
    WeightMode::Q8,
    WeightMode::F16,
    WeightMode::F32,
];

#[test]
fn every_mode_round_trips() {
    for arch in [Arch::Qwen3, Arch::Qwen2] {
        let cfg = tiny_config(arch);
        let src = SyntheticSource { cfg };
        for mode in MODES {
            let bytes = build_vqf(&cfg, mode, &src);
            let v = Vqf::parse(&bytes).unwrap_or_else(|e| panic!("{arch:?} {mode:?}: {e}"));
            assert_eq!(v.config(), &cfg);
            assert_eq!(
                v.header().flags & flags::COPIES,
                mode.flags() & flags::COPIES
            );
            // The fused QKV rows: Q then K then V, quantized exactly as the
            // reference quantizers do.
            let layout = match mode {
                WeightMode::Dual | WeightMode::Q4 | WeightMode::Mix(_) | WeightMode::Small(_) => {
                    Layout::Q4_0x4
                }
                // A float source has no blocks to keep: one Q8_0x8 copy.
                WeightMode::Q8 | WeightMode::Source | WeightMode::Exact => Layout::Q8_0x8,
                WeightMode::F16 => Layout::F16,
                WeightMode::F32 => Layout::F32,
            };
            let e = v.find(1, Role::AttnQkv, layout).unwrap();
            let m = v.matrix(&e, 0).unwrap();
            assert_eq!((m.rows, m.cols), (cfg.qkv_rows(), 64));
            let row_of = |r: usize| -> Vec<f32> {
                let (part, pr) = if r < cfg.q_dim() {
                    (Part::Q, r)
                } else if r < cfg.q_dim() + cfg.kv_dim() {
                    (Part::K, r - cfg.q_dim())
                } else {
                    (Part::V, r - cfg.q_dim() - cfg.kv_dim())
                };
                (0..64)
                    .map(|c| SyntheticSource::value(part, 1, 0, pr, c))
                    .collect()
            };
            for r in [0, cfg.q_dim() - 1, cfg.q_dim(), cfg.qkv_rows() - 1] {
                let want = row_of(r);
                match layout {
                    Layout::Q4_0x4 => {
                        let mut gguf = vec![0u8; 2 * 18];
                        let mut rows = vec![0u8; 36 * 4];
                        kestrel_tests::unpack_q4_0(m.group(r / 4), 4, 64, &mut rows).unwrap();
                        q4_0::quantize_row_bytes(&want, &mut gguf).unwrap();
                        assert_eq!(&rows[36 * (r % 4)..36 * (r % 4 + 1)], &gguf[..]);
                    }
                    Layout::Q8_0x8 => {
                        let mut gguf = vec![0u8; 2 * 34];
                        let mut rows = vec![0u8; 68 * 8];
                        kestrel_tests::unpack_q8_0(m.group(r / 8), 8, 64, &mut rows).unwrap();
                        q8_0::quantize_row_bytes(&want, &mut gguf).unwrap();
                        assert_eq!(&rows[68 * (r % 8)..68 * (r % 8 + 1)], &gguf[..]);
                    }
                    Layout::F32 => {
                        let got: Vec<f32> = m
                            .group(r)
                            .chunks(4)
                            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                            .collect();
                        assert_eq!(got, want);
                    }
                    Layout::F16 => {
                        let got: Vec<u16> = m
                            .group(r)
                            .chunks(2)
                            .map(|b| u16::from_le_bytes(b.try_into().unwrap()))
                            .collect();
                        let w: Vec<u16> = want
                            .iter()
                            .map(|&x| kestrel_core::quant::f16::f32_to_f16(x))
                            .collect();
                        assert_eq!(got, w);
                    }
                    l => panic!("{l:?}: a synthetic source has no blocks to keep"),
                }
            }
            // Gate/up runs of 8: row 8 of the fused matrix is up row 0.
            let gu = v
                .find(0, Role::FfnGateUp, Layout::F32)
                .or(v.find(0, Role::FfnGateUp, layout))
                .unwrap();
            assert_eq!(gu.shape[0], 2 * cfg.ffn_size);
            if layout == Layout::F32 {
                let m = v.matrix(&gu, 0).unwrap();
                let row8: Vec<f32> = m
                    .group(8)
                    .chunks(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                    .collect();
                let up0: Vec<f32> = (0..64)
                    .map(|c| SyntheticSource::value(Part::Up, 0, 0, 0, c))
                    .collect();
                assert_eq!(row8, up0);
            }
            if arch == Arch::Qwen2 {
                assert!(v.find(0, Role::AttnQkvBias, Layout::F32).is_some());
                assert!(v.find(0, Role::AttnQNorm, Layout::F32).is_none());
            }
            assert!(v.find(NO_LAYER, Role::Output, layout).is_some());
        }
    }
}

#[test]
fn moe_experts_are_stored_per_expert() {
    let mut cfg = tiny_config(Arch::Qwen3Moe);
    cfg.moe = Some(MoeConfig {
        num_experts: 3,
        experts_per_token: 2,
        moe_ffn_size: 32,
        norm_topk_prob: true,
        decoder_sparse_step: 1,
        mlp_only_layers: {
            let mut m = [0u64; MAX_LAYERS / 64];
            m[0] = 0b10; // layer 1 dense
            m
        },
        shared_ffn_size: 0,
    });
    let src = SyntheticSource { cfg };
    let bytes = build_vqf(&cfg, WeightMode::Q8, &src);
    let v = Vqf::parse(&bytes).unwrap();
    assert_eq!(v.config(), &cfg);
    assert_ne!(v.header().flags & flags::MOE, 0);
    let e = v.find(0, Role::FfnGateUpExps, Layout::Q8_0x8).unwrap();
    assert_eq!(e.matrix_dims(), (3, 64, 64));
    assert!(v.find(1, Role::FfnGateUp, Layout::Q8_0x8).is_some());
    assert!(v.find(1, Role::FfnGateUpExps, Layout::Q8_0x8).is_none());
    let m2 = v.matrix(&e, 2).unwrap();
    assert_eq!(m2.bytes.len(), 8 * 2 * 272);
    assert!(v.matrix(&e, 3).is_err());
}

#[test]
fn conversion_is_deterministic() {
    let cfg = tiny_config(Arch::Qwen3);
    let src = SyntheticSource { cfg };
    assert_eq!(
        build_vqf(&cfg, WeightMode::Dual, &src),
        build_vqf(&cfg, WeightMode::Dual, &src)
    );
}

#[test]
fn truncation_at_every_offset_is_an_error() {
    let cfg = tiny_config(Arch::Qwen3);
    let bytes = build_vqf(&cfg, WeightMode::Q4, &SyntheticSource { cfg });
    for len in 0..bytes.len() {
        assert!(
            Vqf::parse(&bytes[..len]).is_err(),
            "truncated to {len} parsed"
        );
    }
}

#[test]
fn flipped_bytes_never_panic() {
    let cfg = tiny_config(Arch::Qwen2);
    let bytes = build_vqf(&cfg, WeightMode::Dual, &SyntheticSource { cfg });
    let data_offset = Vqf::parse(&bytes).unwrap().header().data_offset as usize;
    let mut rejected = 0;
    let mut copy = bytes.clone();
    // Every byte of the metadata, each with several values.
    for at in 0..data_offset {
        for x in [0x01u8, 0x80, 0xff] {
            copy[at] ^= x;
            if Vqf::parse(&copy).is_err() {
                rejected += 1;
            }
            copy[at] ^= x;
        }
    }
    assert!(
        rejected > data_offset,
        "most metadata flips must be rejected ({rejected})"
    );
    // Flipped tensor data parses (the parser does not hash) but fails the checksum.
    copy[data_offset + 5] ^= 1;
    let v = Vqf::parse(&copy).unwrap();
    assert_ne!(vqf::checksum(&copy), v.header().checksum);
}

#[test]
fn lies_in_headers_are_named() {
    let cfg = tiny_config(Arch::Qwen3);
    let good = build_vqf(&cfg, WeightMode::Q8, &SyntheticSource { cfg });
    let set = |at: usize, v: &[u8]| {
        let mut b = good.clone();
        b[at..at + v.len()].copy_from_slice(v);
        b
    };
    let err = |b: &[u8]| Vqf::parse(b).unwrap_err().to_string();
    assert!(err(&set(0, b"GGUF")).contains("magic"));
    assert!(err(&set(8, &2u32.to_le_bytes())).contains("newer"));
    assert!(err(&set(24, &u32::MAX.to_le_bytes())).contains("tensor_count"));
    assert!(err(&set(32, &u64::MAX.to_le_bytes())).contains("truncated"));
    assert!(err(&set(16, &0x100u64.to_le_bytes())).contains("flag"));
    // First entry: offset past the end, huge nbytes, unknown role, bad dtype.
    let e0 = 128;
    assert!(Vqf::parse(&set(e0 + 72, &(1u64 << 40).to_le_bytes())).is_err());
    assert!(Vqf::parse(&set(e0 + 80, &u64::MAX.to_le_bytes())).is_err());
    assert!(err(&set(e0 + 50, &999u16.to_le_bytes())).contains("role"));
    assert!(err(&set(e0 + 52, &[9])).contains("dtype"));
    // Overlap: second entry pointing at the first one's data.
    let first_offset = u64::from_le_bytes(good[e0 + 72..e0 + 80].try_into().unwrap());
    assert!(Vqf::parse(&set(e0 + 96 + 72, &first_offset.to_le_bytes())).is_err());
    // Wrong shape for the config.
    assert!(Vqf::parse(&set(e0 + 56, &65u32.to_le_bytes())).is_err());
}

/// A `small` file (flags COPY_TAGS and Q4_4X4) holds each linear weight
/// once, tagged for both phases, in the recipe's layout; a tag that leaves
/// a phase without its weight, or copy flags that disagree with the
/// entries, are refused.
#[test]
fn a_one_copy_tagged_file_holds_each_weight_once_for_both_phases() {
    use kestrel_core::convert::{Recipe, RecipePart};
    use kestrel_core::vqf::format::copies;
    for arch in [Arch::Qwen3, Arch::Qwen2] {
        let cfg = tiny_config(arch);
        let src = SyntheticSource { cfg };
        // K and V in Q8_0, Q in Q4_0: QKV stored as its three parts.
        let recipe = Recipe::ALL_Q4
            .with_q8(RecipePart::AttnK)
            .with_q8(RecipePart::AttnV);
        let good = build_vqf(&cfg, WeightMode::Small(recipe), &src);
        let v = Vqf::parse(&good).unwrap();
        assert_eq!(
            v.header().flags & (flags::COPIES | flags::COPY_TAGS),
            flags::Q4_4X4 | flags::COPY_TAGS
        );
        let mut linear = 0;
        for e in v.entries() {
            let want = match e.role {
                Role::AttnK | Role::AttnV => Some(Layout::Q8_0x8),
                Role::AttnQ | Role::AttnOutput | Role::FfnGateUp | Role::FfnDown | Role::Output => {
                    Some(Layout::Q4_0x4)
                }
                Role::AttnQkv => panic!("{arch:?}: a fused QKV beside split parts"),
                _ => None,
            };
            match want {
                Some(layout) => {
                    linear += 1;
                    assert_eq!(
                        (e.layout, e.copies),
                        (layout, copies::BOTH),
                        "{}",
                        e.name_str()
                    );
                }
                None => assert_eq!(e.copies, 0, "{}", e.name_str()),
            }
        }
        // Q, K, V, output, gate/up, down per layer; the lm_head unless tied.
        let lm_head = usize::from(!cfg.tied_embeddings);
        assert_eq!(linear, 6 * cfg.num_layers as usize + lm_head);
        // Smaller than the two-copy file of the same recipe.
        assert!(good.len() < build_vqf(&cfg, WeightMode::Mix(recipe), &src).len());

        let err = |b: &[u8]| Vqf::parse(b).unwrap_err().to_string();
        let entry_at = |name: &str| {
            let i = (0..v.header().tensor_count as usize)
                .find(|&i| v.entry(i).unwrap().name_str() == name)
                .unwrap();
            128 + 96 * i
        };
        // A weight tagged for decode only leaves prompts without it.
        let mut b = good.clone();
        b[entry_at("blk.0.attn_output.q4") + 55] = copies::DECODE;
        assert!(err(&b).contains("one-copy"), "{}", err(&b));
        // The two-copy flag on a file without a Q8 prefill copy.
        let mut b = good.clone();
        let f = v.header().flags & !flags::Q4_4X4 | flags::Q8_8X8;
        b[16..24].copy_from_slice(&f.to_le_bytes());
        assert!(Vqf::parse(&b).is_err());
        // Both copy flags at once.
        let mut b = good.clone();
        b[16..24].copy_from_slice(&(f | flags::Q4_4X4).to_le_bytes());
        assert!(err(&b).contains("COPY_TAGS"), "{}", err(&b));
    }
}

/// An entry of the retired Q3_Kx8 layout code (9, whole-byte scales, until
/// 2026-12-05) is refused with a message that says to convert again, not
/// read as today's Q3_Kx8 (code 12).
#[test]
fn the_retired_q3_k_layout_code_is_refused() {
    use kestrel_core::vqf::format::Entry;
    let bytes = kquant_file("model-q3_k_m.gguf", WeightMode::Source);
    let v = Vqf::parse(&bytes).unwrap();
    let e = v.entries().find(|e| e.layout == Layout::Q3Kx8).unwrap();
    let mut b = e.to_bytes();
    assert_eq!((b[52], b[53]), (11, 12));
    assert!(Entry::read(&b, 0).is_ok());
    b[53] = 9;
    let err = Entry::read(&b, 0).unwrap_err().to_string();
    assert!(err.contains("retired") && err.contains("convert"), "{err}");
}

/// The bytes of the k-quant fixture GGUF `file` converted in `mode`.
fn kquant_file(file: &str, mode: WeightMode) -> Vec<u8> {
    let dir = kestrel_tests::temp_dir(&format!("vqf-{file}-{}", mode.name()));
    let src = kestrel_tests::fixtures()
        .join("dev_qwen2_kquant")
        .join("gguf")
        .join(file);
    let out = dir.join("out.vqf");
    kestrel::convert::convert(&src, &out, mode, None, false).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    bytes
}

/// A file whose embedding is the GGUF's rows (flag EMB_BLOCKS) is refused
/// when its flags or its entry lie: EMB_F16 beside EMB_BLOCKS, an
/// embedding entry of another block type (its size no longer matches) or
/// an F16 entry where the flag declares blocks.
#[test]
fn lies_about_an_embedding_of_gguf_rows_are_named() {
    let good = kquant_file("model-kquant-mix.gguf", WeightMode::Exact);
    let v = Vqf::parse(&good).unwrap();
    let f = v.header().flags;
    assert_eq!(f & (flags::EMB_BLOCKS | flags::EMB_F16), flags::EMB_BLOCKS);
    let (i, e) = v
        .entries()
        .enumerate()
        .find(|(_, e)| e.role == Role::TokenEmbd)
        .unwrap();
    assert_eq!((e.layout, e.dtype), (Layout::GgufRows, 12)); // Q4_K
    let at = 128 + 96 * i;
    let set = |at: usize, v: &[u8]| {
        let mut b = good.clone();
        b[at..at + v.len()].copy_from_slice(v);
        b
    };
    let err = |b: &[u8]| Vqf::parse(b).unwrap_err().to_string();
    let both = (f | flags::EMB_F16).to_le_bytes();
    assert!(
        err(&set(16, &both)).contains("EMB_BLOCKS"),
        "{}",
        err(&set(16, &both))
    );
    assert!(err(&set(at + 52, &[14])).contains("nbytes")); // Q6_K's size differs
    assert!(err(&set(at + 52, &[9])).contains("dtype")); // Q8_1: no dequantizer
    let f16 = set(at + 52, &[1]);
    assert!(Vqf::parse(&f16).is_err());
}
