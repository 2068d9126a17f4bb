//! The config section: key/value records and a u32 pool (docs/vqf.md).

use super::write::{Sink, Tally};
use crate::config::{
    key, Arch, Config, LinearConfig, MoeConfig, VisionConfig, MAX_DEEPSTACK, MAX_EOS, MAX_LAYERS,
};
use crate::error::Error;

const KIND_INT: u32 = 1;
const KIND_FLOAT: u32 = 2;
const KIND_ARRAY: u32 = 3;

/// Most records a config section may hold.
const MAX_RECORDS: usize = 256;
/// Most u32 values in the pool.
const MAX_POOL: usize = 4096;

enum Val<'c> {
    Int(u64),
    Float(f64),
    Array(&'c [u32]),
}

/// Calls `f` with every record of `cfg`, in key order.
fn records(
    cfg: &Config,
    f: &mut dyn FnMut(u32, Val<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    let b = |v: bool| Val::Int(v as u64);
    f(key::ARCH, Val::Int(cfg.arch as u64))?;
    f(key::VOCAB_SIZE, Val::Int(cfg.vocab_size as u64))?;
    f(key::HIDDEN_SIZE, Val::Int(cfg.hidden_size as u64))?;
    f(key::NUM_LAYERS, Val::Int(cfg.num_layers as u64))?;
    f(key::NUM_HEADS, Val::Int(cfg.num_heads as u64))?;
    f(key::NUM_KV_HEADS, Val::Int(cfg.num_kv_heads as u64))?;
    f(key::HEAD_DIM, Val::Int(cfg.head_dim as u64))?;
    f(key::FFN_SIZE, Val::Int(cfg.ffn_size as u64))?;
    f(key::ROPE_THETA, Val::Float(cfg.rope_theta))?;
    f(key::RMS_NORM_EPS, Val::Float(cfg.rms_norm_eps))?;
    f(key::MAX_POSITION, Val::Int(cfg.max_position as u64))?;
    f(key::TIED_EMBEDDINGS, b(cfg.tied_embeddings))?;
    f(key::QKV_BIAS, b(cfg.qkv_bias))?;
    f(key::QK_NORM, b(cfg.qk_norm))?;
    // Absent: the whole head turns (files from before partial rotary).
    if cfg.rotary_dim != cfg.head_dim {
        f(key::ROTARY_DIM, Val::Int(cfg.rotary_dim as u64))?;
    }
    if let Some(m) = &cfg.moe {
        f(key::NUM_EXPERTS, Val::Int(m.num_experts as u64))?;
        f(key::EXPERTS_PER_TOKEN, Val::Int(m.experts_per_token as u64))?;
        f(key::MOE_FFN_SIZE, Val::Int(m.moe_ffn_size as u64))?;
        f(key::NORM_TOPK_PROB, b(m.norm_topk_prob))?;
        f(
            key::DECODER_SPARSE_STEP,
            Val::Int(m.decoder_sparse_step as u64),
        )?;
        let mut dense = [0u32; MAX_LAYERS];
        let mut n = 0;
        for l in 0..(cfg.num_layers as usize).min(MAX_LAYERS) {
            if (m.mlp_only_layers[l / 64] >> (l % 64)) & 1 == 1 {
                dense[n] = l as u32;
                n += 1;
            }
        }
        f(key::MLP_ONLY_LAYERS, Val::Array(&dense[..n]))?;
        if m.shared_ffn_size > 0 {
            f(key::SHARED_FFN_SIZE, Val::Int(m.shared_ffn_size as u64))?;
        }
    }
    if cfg.arch == Arch::Qwen3Vl || cfg.mrope_section != [0; 3] {
        f(key::MROPE_SECTION, Val::Array(&cfg.mrope_section))?;
    }
    if let Some(c) = &cfg.linear {
        let int = |x: u32| Val::Int(x as u64);
        f(key::LINEAR_INTERVAL, int(c.interval))?;
        f(key::LINEAR_KEY_HEADS, int(c.key_heads))?;
        f(key::LINEAR_VALUE_HEADS, int(c.value_heads))?;
        f(key::LINEAR_KEY_DIM, int(c.key_dim))?;
        f(key::LINEAR_VALUE_DIM, int(c.value_dim))?;
        f(key::LINEAR_CONV_KERNEL, int(c.conv_kernel))?;
        if c.tiled {
            f(key::LINEAR_TILED, Val::Int(1))?;
        }
    }
    if let Some(bos) = cfg.bos_token_id {
        f(key::BOS_TOKEN_ID, Val::Int(bos as u64))?;
    }
    if cfg.eos_count > 0 {
        f(key::EOS_TOKEN_IDS, Val::Array(cfg.eos()))?;
    }
    if let Some(v) = &cfg.vision {
        let int = |x: u32| Val::Int(x as u64);
        f(key::VISION_DEPTH, int(v.depth))?;
        f(key::VISION_HIDDEN, int(v.hidden_size))?;
        f(key::VISION_HEADS, int(v.num_heads))?;
        f(key::VISION_FFN, int(v.ffn_size))?;
        f(key::PATCH_SIZE, int(v.patch_size))?;
        f(key::TEMPORAL_PATCH, int(v.temporal_patch))?;
        f(key::SPATIAL_MERGE, int(v.spatial_merge))?;
        f(key::VISION_OUT_HIDDEN, int(v.out_hidden))?;
        f(key::NUM_POSITION_EMBEDDINGS, int(v.num_position_embeddings))?;
        f(key::DEEPSTACK_LAYERS, Val::Array(v.deepstack()))?;
        f(key::IMAGE_TOKEN_ID, int(v.image_token_id))?;
        f(key::VISION_START_TOKEN_ID, int(v.vision_start_token_id))?;
        f(key::VISION_END_TOKEN_ID, int(v.vision_end_token_id))?;
        f(key::MIN_PIXELS, int(v.min_pixels))?;
        f(key::MAX_PIXELS, int(v.max_pixels))?;
        f(key::IMAGE_MEAN, Val::Array(&v.image_mean.map(f32::to_bits)))?;
        f(key::IMAGE_STD, Val::Array(&v.image_std.map(f32::to_bits)))?;
        f(key::RESCALE_FACTOR, Val::Float(v.rescale_factor as f64))?;
    }
    Ok(())
}

/// Writes the config section of `cfg` to `sink`; returns its size in bytes.
pub fn encode(cfg: &Config, sink: &mut dyn Sink) -> Result<u64, Error> {
    cfg.validate()?;
    let (mut count, mut pool) = (0u32, 0u32);
    records(cfg, &mut |_, v| {
        count += 1;
        if let Val::Array(a) = v {
            pool += a.len() as u32;
        }
        Ok(())
    })?;
    let mut out = Tally::new(sink);
    out.write(&count.to_le_bytes())?;
    out.write(&pool.to_le_bytes())?;
    let mut next = 0u32;
    records(cfg, &mut |k, v| {
        let (kind, value) = match v {
            Val::Int(i) => (KIND_INT, i),
            Val::Float(x) => (KIND_FLOAT, x.to_bits()),
            Val::Array(a) => {
                let start = next;
                next += a.len() as u32;
                (KIND_ARRAY, start as u64 | (a.len() as u64) << 32)
            }
        };
        let mut rec = [0u8; 16];
        rec[..4].copy_from_slice(&k.to_le_bytes());
        rec[4..8].copy_from_slice(&kind.to_le_bytes());
        rec[8..].copy_from_slice(&value.to_le_bytes());
        out.write(&rec)
    })?;
    records(cfg, &mut |_, v| {
        if let Val::Array(a) = v {
            for x in a {
                out.write(&x.to_le_bytes())?;
            }
        }
        Ok(())
    })?;
    let pad = (8 - out.written % 8) % 8;
    out.write(&[0u8; 8][..pad as usize])?;
    Ok(out.written)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Decodes and validates a config section.
pub fn decode(section: &[u8]) -> Result<Config, Error> {
    let bad = |what: &'static str| Error::BadConfig { what };
    let count = u32_at(section, 0).ok_or(bad("config section too short"))? as usize;
    let pool_count = u32_at(section, 4).ok_or(bad("config section too short"))? as usize;
    if count > MAX_RECORDS || pool_count > MAX_POOL {
        return Err(bad("config record or pool count too large"));
    }
    let pool_at = 8 + 16 * count;
    let end = pool_at + 4 * pool_count;
    if section.len() < end || section.len() - end >= 8 || section[end..].iter().any(|&b| b != 0) {
        return Err(bad("config section size does not match its counts"));
    }
    let pool = |start: usize, n: usize, out: &mut [u32]| -> Result<usize, Error> {
        if start.checked_add(n).is_none_or(|e| e > pool_count) || n > out.len() {
            return Err(bad("config array outside the pool or too long"));
        }
        for (i, o) in out.iter_mut().take(n).enumerate() {
            *o = u32_at(section, pool_at + 4 * (start + i)).ok_or(bad("config pool"))?;
        }
        Ok(n)
    };

    let mut cfg = Config {
        arch: Arch::Qwen3,
        vocab_size: 0,
        hidden_size: 0,
        num_layers: 0,
        num_heads: 0,
        num_kv_heads: 0,
        head_dim: 0,
        ffn_size: 0,
        rope_theta: 0.0,
        rms_norm_eps: 0.0,
        max_position: 0,
        tied_embeddings: false,
        qkv_bias: false,
        qk_norm: false,
        moe: None,
        mrope_section: [0; 3],
        rotary_dim: 0,
        linear: None,
        vision: None,
        bos_token_id: None,
        eos_token_ids: [0; MAX_EOS],
        eos_count: 0,
    };
    let mut moe = MoeConfig {
        num_experts: 0,
        experts_per_token: 0,
        moe_ffn_size: 0,
        norm_topk_prob: false,
        decoder_sparse_step: 1,
        mlp_only_layers: [0; MAX_LAYERS / 64],
        shared_ffn_size: 0,
    };
    let mut linear = LinearConfig {
        interval: 0,
        key_heads: 0,
        value_heads: 0,
        key_dim: 0,
        value_dim: 0,
        conv_kernel: 0,
        tiled: false,
    };
    let mut seen_linear = 0u32;
    let mut vision = VisionConfig {
        depth: 0,
        hidden_size: 0,
        num_heads: 0,
        ffn_size: 0,
        patch_size: 0,
        temporal_patch: 0,
        spatial_merge: 0,
        out_hidden: 0,
        num_position_embeddings: 0,
        deepstack_layers: [0; MAX_DEEPSTACK],
        deepstack_count: 0,
        image_token_id: 0,
        vision_start_token_id: 0,
        vision_end_token_id: 0,
        min_pixels: 0,
        max_pixels: 0,
        image_mean: [0.0; 3],
        image_std: [0.0; 3],
        rescale_factor: 0.0,
    };
    let mut seen_vision = 0u32;
    let mut seen_required = 0u32;
    let mut has_moe = false;
    let mut seen_moe = 0u32;
    let mut last_key = 0u32;
    for i in 0..count {
        let at = 8 + 16 * i;
        let k = u32_at(section, at).ok_or(bad("config record"))?;
        let kind = u32_at(section, at + 4).ok_or(bad("config record"))?;
        let lo = u32_at(section, at + 8).ok_or(bad("config record"))? as u64;
        let hi = u32_at(section, at + 12).ok_or(bad("config record"))? as u64;
        let value = lo | hi << 32;
        if k <= last_key {
            return Err(bad("config keys must be strictly increasing"));
        }
        last_key = k;
        let int = || -> Result<u32, Error> {
            if kind != KIND_INT {
                return Err(bad("config value kind (integer expected)"));
            }
            u32::try_from(value).map_err(|_| bad("config integer too large"))
        };
        let flag = || -> Result<bool, Error> {
            match int()? {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(bad("config boolean must be 0 or 1")),
            }
        };
        let float = || -> Result<f64, Error> {
            if kind != KIND_FLOAT {
                return Err(bad("config value kind (float expected)"));
            }
            Ok(f64::from_bits(value))
        };
        let array = |out: &mut [u32]| -> Result<usize, Error> {
            if kind != KIND_ARRAY {
                return Err(bad("config value kind (array expected)"));
            }
            pool(lo as usize, hi as usize, out)
        };
        if k <= key::QK_NORM {
            seen_required |= 1 << k;
        }
        if (key::NUM_EXPERTS..=key::MLP_ONLY_LAYERS).contains(&k) {
            seen_moe |= 1 << (k - key::NUM_EXPERTS);
        }
        if (key::LINEAR_INTERVAL..=key::LINEAR_CONV_KERNEL).contains(&k) {
            seen_linear |= 1 << (k - key::LINEAR_INTERVAL);
        }
        if (key::VISION_DEPTH..=key::RESCALE_FACTOR).contains(&k) {
            seen_vision |= 1 << (k - key::VISION_DEPTH);
        }
        let floats3 = |out: &mut [f32; 3]| -> Result<(), Error> {
            let mut bits = [0u32; 3];
            if array(&mut bits)? != 3 {
                return Err(bad("image mean and std must have 3 entries"));
            }
            *out = bits.map(f32::from_bits);
            Ok(())
        };
        match k {
            key::ARCH => cfg.arch = Arch::from_id(int()? as u64).ok_or(bad("unknown arch"))?,
            key::VOCAB_SIZE => cfg.vocab_size = int()?,
            key::HIDDEN_SIZE => cfg.hidden_size = int()?,
            key::NUM_LAYERS => cfg.num_layers = int()?,
            key::NUM_HEADS => cfg.num_heads = int()?,
            key::NUM_KV_HEADS => cfg.num_kv_heads = int()?,
            key::HEAD_DIM => cfg.head_dim = int()?,
            key::FFN_SIZE => cfg.ffn_size = int()?,
            key::ROPE_THETA => cfg.rope_theta = float()?,
            key::RMS_NORM_EPS => cfg.rms_norm_eps = float()?,
            key::MAX_POSITION => cfg.max_position = int()?,
            key::TIED_EMBEDDINGS => cfg.tied_embeddings = flag()?,
            key::QKV_BIAS => cfg.qkv_bias = flag()?,
            key::QK_NORM => cfg.qk_norm = flag()?,
            key::ROTARY_DIM => cfg.rotary_dim = int()?,
            key::NUM_EXPERTS => {
                has_moe = true;
                moe.num_experts = int()?
            }
            key::EXPERTS_PER_TOKEN => moe.experts_per_token = int()?,
            key::MOE_FFN_SIZE => moe.moe_ffn_size = int()?,
            key::NORM_TOPK_PROB => moe.norm_topk_prob = flag()?,
            key::DECODER_SPARSE_STEP => moe.decoder_sparse_step = int()?,
            key::MLP_ONLY_LAYERS => {
                let mut layers = [0u32; MAX_LAYERS];
                let n = array(&mut layers)?;
                for &l in &layers[..n] {
                    let l = l as usize;
                    if l >= MAX_LAYERS {
                        return Err(bad("mlp_only_layers index out of range"));
                    }
                    moe.mlp_only_layers[l / 64] |= 1 << (l % 64);
                }
            }
            key::SHARED_FFN_SIZE => moe.shared_ffn_size = int()?,
            key::LINEAR_INTERVAL => linear.interval = int()?,
            key::LINEAR_KEY_HEADS => linear.key_heads = int()?,
            key::LINEAR_VALUE_HEADS => linear.value_heads = int()?,
            key::LINEAR_KEY_DIM => linear.key_dim = int()?,
            key::LINEAR_VALUE_DIM => linear.value_dim = int()?,
            key::LINEAR_CONV_KERNEL => linear.conv_kernel = int()?,
            key::LINEAR_TILED => linear.tiled = flag()?,
            key::MROPE_SECTION => {
                if array(&mut cfg.mrope_section)? != 3 {
                    return Err(bad("mrope_section must have 3 entries"));
                }
            }
            key::VISION_DEPTH => vision.depth = int()?,
            key::VISION_HIDDEN => vision.hidden_size = int()?,
            key::VISION_HEADS => vision.num_heads = int()?,
            key::VISION_FFN => vision.ffn_size = int()?,
            key::PATCH_SIZE => vision.patch_size = int()?,
            key::TEMPORAL_PATCH => vision.temporal_patch = int()?,
            key::SPATIAL_MERGE => vision.spatial_merge = int()?,
            key::VISION_OUT_HIDDEN => vision.out_hidden = int()?,
            key::NUM_POSITION_EMBEDDINGS => vision.num_position_embeddings = int()?,
            key::DEEPSTACK_LAYERS => {
                vision.deepstack_count = array(&mut vision.deepstack_layers)? as u32
            }
            key::IMAGE_TOKEN_ID => vision.image_token_id = int()?,
            key::VISION_START_TOKEN_ID => vision.vision_start_token_id = int()?,
            key::VISION_END_TOKEN_ID => vision.vision_end_token_id = int()?,
            key::MIN_PIXELS => vision.min_pixels = int()?,
            key::MAX_PIXELS => vision.max_pixels = int()?,
            key::IMAGE_MEAN => floats3(&mut vision.image_mean)?,
            key::IMAGE_STD => floats3(&mut vision.image_std)?,
            key::RESCALE_FACTOR => vision.rescale_factor = float()? as f32,
            key::BOS_TOKEN_ID => cfg.bos_token_id = Some(int()?),
            key::EOS_TOKEN_IDS => cfg.eos_count = array(&mut cfg.eos_token_ids)? as u32,
            _ => return Err(bad("unknown config key (file from a newer converter?)")),
        }
    }
    let required = (1u32 << (key::QK_NORM + 1)) - 2; // keys 1..=14
    if seen_required & required != required {
        return Err(bad("a required config key is missing"));
    }
    // Keys 20..=25 come all together (an MoE file) or not at all.
    let all_moe = (1u32 << (key::MLP_ONLY_LAYERS - key::NUM_EXPERTS + 1)) - 1;
    if seen_moe != 0 && seen_moe != all_moe {
        return Err(bad("MoE config keys 20-25 must all be present, or none"));
    }
    if has_moe {
        cfg.moe = Some(moe);
    }
    if cfg.rotary_dim == 0 {
        cfg.rotary_dim = cfg.head_dim;
    }
    // Keys 40..=45 come all together (a Qwen3.5 file) or not at all; 46
    // only with them.
    match seen_linear {
        0 if linear.tiled => return Err(bad("linear_tiled without the linear attention keys")),
        0 => {}
        0b11_1111 => cfg.linear = Some(linear),
        _ => {
            return Err(bad(
                "linear attention config keys 40-45 must all be present, or none",
            ))
        }
    }
    // Keys 60..=77 come all together (a file with a vision tower) or not at all.
    let all_vision = (1u32 << (key::RESCALE_FACTOR - key::VISION_DEPTH + 1)) - 1;
    match seen_vision {
        0 => {}
        s if s == all_vision => cfg.vision = Some(vision),
        _ => return Err(bad("vision config keys 60-77 must all be present, or none")),
    }
    cfg.validate()?;
    Ok(cfg)
}
