//! Generation sessions: stop tokens end an answer (and join the
//! conversation), the length limit and interrupts stop it too.

use kestrel::engine::EngineArgs;
use kestrel::generate::Session;
use kestrel_core::convert::WeightMode;
use kestrel_core::sampler::SamplerConfig;
use kestrel_tests::loader;
use kestrel_tests::{fixtures, json_ids, temp_dir, tied_fixture};
use std::sync::atomic::AtomicBool;

#[test]
fn stop_tokens_length_and_interrupts() {
    let dir = temp_dir("session");
    let vqf = tied_fixture(&dir, WeightMode::F32);
    let refj = std::fs::read(fixtures().join("dev_qwen3_dense_tied/ref/ref.json")).unwrap();
    let prompt = json_ids(&refj, "prompt_ids");
    let greedy = json_ids(&refj, "greedy_ids");
    let model = loader::Model::open(&vqf).unwrap();
    let mut layers = Vec::new();
    let w = model.weights(true, &mut layers).unwrap();
    let args = EngineArgs {
        kv_f32: true,
        ..EngineArgs::default()
    };
    let (k, pool, opts) = loader::setup(&w, &args, false, 32);
    let greedy_cfg = SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let no = AtomicBool::new(false);

    // The file's EOS ids and <|im_end|>/<|endoftext|> are stop tokens.
    let mut arena = loader::arena(&w, &opts).unwrap();
    let mut s = Session::new(
        &w,
        k,
        &pool,
        loader::state(&w, opts, &mut arena).unwrap(),
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
    let mut arena = loader::arena(&w, &opts).unwrap();
    let mut s = Session::new(
        &w,
        k,
        &pool,
        loader::state(&w, opts, &mut arena).unwrap(),
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

/// A prompt prefilled a chunk at a time (`prefill_some`, as the server
/// interleaves it with decode steps) computes the same logits, bit for bit,
/// as one `prefill` call, from a fresh cache and after a kept prefix that
/// ends inside a chunk; the dual file, so the chunks' weight copies differ.
#[test]
fn prefill_a_chunk_at_a_time_equals_one_call() {
    use kestrel_core::generate::{prefill, prefill_some, Prefill};
    let dir = temp_dir("prefill-some");
    let vqf = tied_fixture(&dir, WeightMode::Dual);
    let model = loader::Model::open(&vqf).unwrap();
    let mut layers = Vec::new();
    let w = model.weights(true, &mut layers).unwrap();
    let (k, pool, opts) = loader::setup(&w, &EngineArgs::default(), false, 32);
    let vocab = w.cfg.vocab_size as usize;
    let prompt: Vec<u32> = (0..100u32).map(|i| (i * 37 + 11) % 400).collect();
    for keep in [0usize, 50] {
        let mut arenas = [
            loader::arena(&w, &opts).unwrap(),
            loader::arena(&w, &opts).unwrap(),
        ];
        let [a0, a1] = &mut arenas;
        let mut whole = loader::state(&w, opts, a0).unwrap();
        let mut stepped = loader::state(&w, opts, a1).unwrap();
        let plan = |keep| Prefill {
            slot: 0,
            base: 0,
            prompt: &prompt,
            keep,
            chunk: 32,
            images: None,
            interrupt: None,
        };
        // The kept prefix: the same tokens, run the same way in both.
        if keep > 0 {
            for s in [&mut whole, &mut stepped] {
                let mut p = Prefill {
                    prompt: &prompt[..keep + 1],
                    ..plan(0)
                };
                prefill(&w, s, &k, &pool, &mut p, &mut |_, _| {}).unwrap();
            }
        }
        let mut p = plan(keep);
        let at = prefill(&w, &mut whole, &k, &pool, &mut p, &mut |_, _| {}).unwrap();
        let want = whole.logits[at..at + vocab].to_vec();
        let mut p = plan(keep);
        let mut calls = 0;
        let at = loop {
            calls += 1;
            if let Some(at) =
                prefill_some(&w, &mut stepped, &k, &pool, &mut p, 1, &mut |_, _| {}).unwrap()
            {
                break at;
            }
        };
        assert_eq!(calls, 4 - keep / 32, "keep {keep}");
        let got = &stepped.logits[at..at + vocab];
        assert!(
            got.iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "keep {keep}: logits differ"
        );
    }
}

/// Decode rows riding along a prompt chunk (`prefill_turn`, as the
/// server steps its streams beside an admitted prompt) get the logits of a
/// decode step of their own, and the prompt those of one `prefill` call,
/// bit for bit: with one weight copy (q8) they ride every chunk, the
/// chunk's logits first when it is the prompt's last; with two (dual) only
/// a one-token chunk (the decode copy) takes them.
#[test]
fn decode_rows_riding_a_prompt_chunk_equal_their_own_steps() {
    use kestrel_core::generate::{prefill, prefill_some, prefill_turn, Prefill};
    use kestrel_core::model::forward::{forward_rows, Row};
    let dir = temp_dir("riders");
    // With every row's logits too (the chunk's rows, then the riders').
    for (mode, all_logits) in [
        (WeightMode::Q8, false),
        (WeightMode::Q8, true),
        (WeightMode::Dual, false),
    ] {
        let vqf = tied_fixture(&dir, mode);
        let model = loader::Model::open(&vqf).unwrap();
        let mut layers = Vec::new();
        let w = model.weights(true, &mut layers).unwrap();
        let (k, pool, mut opts) = loader::setup(&w, &EngineArgs::default(), all_logits, 34);
        opts.slots = 3;
        let vocab = w.cfg.vocab_size as usize;
        let one_copy = w.routing.for_batch(32) == w.routing.decode;
        assert_eq!(one_copy, mode == WeightMode::Q8);
        let streams: [Vec<u32>; 2] = [
            (0..9u32).map(|i| (i * 53 + 7) % 400).collect(),
            (0..14u32).map(|i| (i * 29 + 3) % 400).collect(),
        ];
        // Slots 1 and 2 hold a stream each; their next rows ride.
        let riders = [
            Row {
                slot: 1,
                pos: 9,
                token: 17,
                logits: true,
            },
            Row {
                slot: 2,
                pos: 14,
                token: 230,
                logits: true,
            },
        ];
        // Prompts of one chunk (the last), of three (a one-token last), of two.
        for n in [20usize, 65, 50] {
            let prompt: Vec<u32> = (0..n as u32).map(|i| (i * 37 + 11) % 400).collect();
            let plan = || Prefill {
                slot: 0,
                base: 0,
                prompt: &prompt,
                keep: 0,
                chunk: 32,
                images: None,
                interrupt: None,
            };
            let mut arenas = [
                loader::arena(&w, &opts).unwrap(),
                loader::arena(&w, &opts).unwrap(),
            ];
            let [a0, a1] = &mut arenas;
            let mut alone = loader::state(&w, opts, a0).unwrap();
            let mut riding = loader::state(&w, opts, a1).unwrap();
            for s in [&mut alone, &mut riding] {
                for (i, stream) in streams.iter().enumerate() {
                    let mut p = Prefill {
                        slot: i + 1,
                        prompt: stream,
                        ..plan()
                    };
                    prefill(&w, s, &k, &pool, &mut p, &mut |_, _| {}).unwrap();
                }
            }
            // Each on its own: the decode step, then the whole prompt.
            let logits =
                forward_rows(&w, &mut alone, &k, &pool, &riders, w.routing.decode, None).unwrap();
            let want_riders = logits.to_vec();
            let at = prefill(&w, &mut alone, &k, &pool, &mut plan(), &mut |_, _| {}).unwrap();
            let want_prompt = alone.logits[at..at + vocab].to_vec();
            // The riders offered to every chunk until one takes them.
            let mut p = plan();
            let (mut got_riders, mut got_prompt) = (None, None);
            let (mut chunks, mut rode_on) = (0, None);
            while got_prompt.is_none() {
                chunks += 1;
                let step = if got_riders.is_none() {
                    let step =
                        prefill_turn(&w, &mut riding, &k, &pool, &mut p, &riders, &mut |_, _| {})
                            .unwrap();
                    if let Some(r) = step.rider_logits {
                        got_riders = Some(riding.logits[r..r + 2 * vocab].to_vec());
                        rode_on = Some(chunks);
                    }
                    step.prompt_logits
                } else {
                    prefill_some(&w, &mut riding, &k, &pool, &mut p, 1, &mut |_, _| {}).unwrap()
                };
                if let Some(at) = step {
                    got_prompt = Some(riding.logits[at..at + vocab].to_vec());
                }
            }
            let case = format!("{mode:?}, all logits {all_logits}, n {n}");
            assert_eq!(chunks, n.div_ceil(32), "{case}");
            // Dual: a chunk of 32 multiplies the Q8 copy, so the riders wait
            // for the one-token chunk, and a prompt without one never takes them.
            let want_rode_on = match (one_copy, n) {
                (true, _) => Some(1),
                (false, 65) => Some(3),
                (false, _) => None,
            };
            assert_eq!(rode_on, want_rode_on, "{case}: the chunk the riders rode");
            let same =
                |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            if let Some(r) = got_riders {
                assert!(same(&r, &want_riders), "{case}: the riders' logits differ");
            }
            assert!(
                same(got_prompt.as_ref().unwrap(), &want_prompt),
                "{case}: the prompt's logits differ"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
