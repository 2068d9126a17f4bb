//! The pieces of a model opened by hand, for tests that build several
//! states over one set of weights or look inside the steps (the commands
//! open models with `kestrel::engine::open`, the one loader).

use kestrel::engine::{make_pool, EngineArgs};
use kestrel::error::{Context, Result};
use kestrel::files::Mapped;
use kestrel::pool::Pool;
use kestrel_core::kernels::Kernels;
use kestrel_core::model::weights::{LayerWeights, Weights};
use kestrel_core::state::{KvType, Options, State};
use kestrel_core::vqf::Vqf;
use std::path::Path;
use std::time::Instant;

pub use kestrel::engine::arena;

/// A mapped, validated model.
pub struct Model {
    pub map: Mapped,
    pub load_ms: f64,
}

impl Model {
    pub fn open(path: &Path) -> Result<Model> {
        let t = Instant::now();
        let map = Mapped::open(path)?;
        Vqf::parse(map.bytes()).with_context(|| path.display())?;
        Ok(Model {
            map,
            load_ms: t.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The weights, every tensor resolved once into `layers` (sized here
    /// from the config).
    pub fn weights<'a>(
        &'a self,
        prefill_q8: bool,
        layers: &'a mut Vec<LayerWeights<'a>>,
    ) -> Result<Weights<'a>> {
        let v = Vqf::parse(self.map.bytes())?;
        layers.clear();
        layers.resize(Weights::layer_slots(v.config()), LayerWeights::EMPTY);
        Ok(Weights::new(v, prefill_q8, layers)?)
    }
}

/// Kernels, pool and state options for `args`.
pub fn setup(
    w: &Weights,
    args: &EngineArgs,
    all_logits: bool,
    max_batch: usize,
) -> (Kernels, Pool, Options) {
    let kernels = kestrel::cpu::detect_kernels();
    let pool = make_pool(args.threads, args.no_pin);
    let file_max = w.vqf.header().max_seq as usize;
    let max_seq = args.ctx.unwrap_or(4096).min(file_max).max(1);
    let opts = Options {
        max_seq,
        max_batch,
        kv: if args.kv_f32 {
            KvType::F32
        } else {
            KvType::F16
        },
        all_logits,
        slots: 1,
        draft: 0,
    };
    (kernels, pool, opts)
}

/// A state over `arena`.
pub fn state<'a>(w: &Weights, opts: Options, arena: &'a mut [u8]) -> Result<State<'a>> {
    Ok(State::new(&w.cfg, opts, arena)?)
}
