//! Generation sessions: stop tokens end an answer (and join the
//! conversation), the length limit and interrupts stop it too.

use kestrel::convert::convert;
use kestrel::engine::{self, EngineArgs};
use kestrel::generate::Session;
use kestrel_core::convert::WeightMode;
use kestrel_core::sampler::SamplerConfig;
use kestrel_tests::{fixtures, json_ids, temp_dir};
use std::sync::atomic::AtomicBool;

#[test]
fn stop_tokens_length_and_interrupts() {
    let dir = temp_dir("session");
    let vqf = dir.join("m.vqf");
    convert(
        &fixtures().join("dev_qwen3_dense_tied/hf"),
        &vqf,
        WeightMode::F32,
        Some(256),
        false,
    )
    .unwrap();
    let refj = std::fs::read(fixtures().join("dev_qwen3_dense_tied/ref/ref.json")).unwrap();
    let prompt = json_ids(&refj, "prompt_ids");
    let greedy = json_ids(&refj, "greedy_ids");
    let model = engine::Model::open(&vqf).unwrap();
    let mut layers = Vec::new();
    let w = model.weights(true, &mut layers).unwrap();
    let args = EngineArgs {
        kv_f32: true,
        ..EngineArgs::default()
    };
    let (k, pool, opts) = engine::setup(&w, &args, false, 32);
    let greedy_cfg = SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let no = AtomicBool::new(false);

    // The file's EOS ids and <|im_end|>/<|endoftext|> are stop tokens.
    let mut arena = engine::arena(&w, &opts).unwrap();
    let mut s = Session::new(
        &w,
        k,
        &pool,
        engine::state(&w, opts, &mut arena).unwrap(),
        greedy_cfg,
    )
    .unwrap();
    assert!(
        s.gen.stops.contains(472) && s.gen.stops.contains(470),
        "{:?}",
        s.gen.stops
    );
    // Length limit: exactly n tokens, the reference's.
    let st = s.generate(&prompt, 5, &no, &mut |_| {}).unwrap();
    assert_eq!((st.generated, st.stopped), (5, false));
    // Every generated token is in the cache, so a next turn continues from it.
    assert_eq!(&s.history()[prompt.len()..], &greedy[..5]);

    // Make the reference's 3rd greedy token a stop token: the answer ends
    // after 2 tokens and the stop token joins the KV cache.
    let mut arena = engine::arena(&w, &opts).unwrap();
    let mut s = Session::new(
        &w,
        k,
        &pool,
        engine::state(&w, opts, &mut arena).unwrap(),
        greedy_cfg,
    )
    .unwrap();
    assert!(s.gen.stops.insert(greedy[2]));
    let mut text = String::new();
    let st = s
        .generate(&prompt, 50, &no, &mut |t| text.push_str(t))
        .unwrap();
    assert_eq!((st.generated, st.stopped), (2, true));
    assert_eq!(s.history().last(), Some(&greedy[2]));
    assert_eq!(s.gen.state.pos, prompt.len() + 3);

    // An interrupt before the first token: nothing generated, no panic.
    s.reset();
    let st = s
        .generate(&prompt, 50, &AtomicBool::new(true), &mut |_| {})
        .unwrap();
    assert_eq!((st.generated, st.stopped), (0, false));
    let _ = std::fs::remove_dir_all(&dir);
}
