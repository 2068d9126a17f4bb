#![no_main]
//! config.json (hub and transformers-5 formats) through the converter's
//! reader (`kestrel::convert::hf::config_from_json`), the input also read as
//! generation_config.json and (Qwen3-VL) as preprocessor_config.json;
//! then everything a valid config drives: the
//! config section round trip, the tensor list, the VQF plan and the arena
//! layout at a few context lengths.
use kestrel::convert::hf::{config_from_json, config_from_json_vl};
use kestrel_core::config::MAX_LAYERS;
use kestrel_core::tensors;
use kestrel_core::state::{ArenaSizes, KvType, Options};
use kestrel_core::vqf::config_section;
use kestrel_core::vqf::write::Sink;
use libfuzzer_sys::fuzz_target;

struct VecSink(Vec<u8>);

impl Sink for VecSink {
    fn write(&mut self, bytes: &[u8]) -> Result<(), kestrel_core::Error> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    // The input as config.json; as its generation_config.json too; and (a
    // Qwen3-VL config) with the fixture's preprocessor_config.json, then the
    // input as that file.
    const PRE: &[u8] = include_bytes!("../../tests/fixtures/dev_qwen3_vl/hf/preprocessor_config.json");
    let configs = [
        config_from_json(data, None),
        config_from_json(data, Some(data)),
        config_from_json_vl(data, None, Some(PRE)),
        config_from_json_vl(data, None, Some(data)),
    ];
    for cfg in configs {
        let Ok(cfg) = cfg else {
            continue;
        };
        // What the converter writes, the parser reads back unchanged.
        let mut sink = VecSink(Vec::new());
        config_section::encode(&cfg, &mut sink).expect("encode a validated config");
        let back = config_section::decode(&sink.0).expect("decode what encode wrote");
        // mlp_only_layers entries past the last layer have no effect and
        // are not written (docs/vqf.md).
        let mut want = cfg;
        if let Some(m) = want.moe.as_mut() {
            for l in cfg.num_layers as usize..MAX_LAYERS {
                m.mlp_only_layers[l / 64] &= !(1 << (l % 64));
            }
        }
        assert_eq!(back, want, "config section round trip");
        let _ = tensors::for_each(&cfg, &mut |_spec| Ok(()));
        for (max_seq, max_batch, kv) in [
            (1, 1, KvType::F16),
            (4096, 256, KvType::F32),
            (1 << 20, 128, KvType::F16),
        ] {
            let _ = ArenaSizes::new(
                &cfg,
                &Options {
                    max_seq,
                    max_batch,
                    kv,
                    all_logits: max_batch == 1,
                    slots: 1,
                },
            );
        }
    }
});
