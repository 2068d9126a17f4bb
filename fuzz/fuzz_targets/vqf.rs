#![no_main]
//! VQF parsing plus building the model views over whatever parses.
use kestrel_core::model::weights::{LayerWeights, Weights};
use kestrel_core::vqf::Vqf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = Vqf::parse(data) {
        for e in v.entries() {
            let _ = v.data(&e);
            let _ = v.matrix(&e, 0);
        }
        let mut layers = vec![LayerWeights::EMPTY; Weights::layer_slots(v.config())];
        if let Ok(w) = Weights::new(v, true, &mut layers) {
            for l in 0..w.cfg.num_layers as usize {
                let _ = w.layer(l, w.routing.decode);
                let _ = w.layer(l, w.routing.prefill);
            }
            let _ = w.embedding();
            let _ = w.decode_bytes();
        }
        if let Some(t) = v.tokenizer() {
            for id in 0..t.n_tokens.min(1000) {
                let _ = t.token_bytes(id);
            }
            let _ = t.merge(t.byte_id(b'a'), t.byte_id(b'b'));
        }
    }
});
