//! Loading a model for inference: map the file, validate it once, size the
//! arena, and set up kernels and threads.

use crate::files::Mapped;
use crate::pool::Pool;
use kestrel_core::kernels::Kernels;
use kestrel_core::model::weights::Weights;
use kestrel_core::state::{ArenaLayout, KvType, Options, State};
use kestrel_core::vqf::Vqf;
use std::path::Path;
use std::time::Instant;

/// Settings shared by the commands that run the model.
#[derive(clap::Args, Clone, Debug)]
pub struct EngineArgs {
    /// Worker threads (default: the big cores on big.LITTLE, else all cores).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Context length (default 4096, capped by the file's max_seq).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// KV cache in f32 instead of f16.
    #[arg(long)]
    pub kv_f32: bool,
    /// Prefill reads the Q8 copy of a dual file (on by default; `--prefill-q8 false` reads Q4).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub prefill_q8: bool,
}

impl Default for EngineArgs {
    fn default() -> Self {
        EngineArgs {
            threads: None,
            ctx: None,
            kv_f32: false,
            prefill_q8: true,
        }
    }
}

/// A mapped, validated model.
pub struct Model {
    pub map: Mapped,
    pub load_ms: f64,
}

impl Model {
    pub fn open(path: &Path) -> Result<Model, String> {
        let t = Instant::now();
        let map = Mapped::open(path)?;
        Vqf::parse(map.bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Model {
            map,
            load_ms: t.elapsed().as_secs_f64() * 1e3,
        })
    }

    pub fn weights(&self, prefill_q8: bool) -> Result<Weights<'_>, String> {
        let v = Vqf::parse(self.map.bytes()).map_err(|e| e.to_string())?;
        Weights::new(v, prefill_q8).map_err(|e| e.to_string())
    }
}

/// The default thread count: online CPUs (big-core pinning comes with the
/// tuned pool).
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Kernels, pool and state options for `args`.
pub fn setup(
    w: &Weights,
    args: &EngineArgs,
    all_logits: bool,
    max_batch: usize,
) -> (Kernels, Pool, Options) {
    let kernels = crate::cpu::detect_kernels();
    let pool = Pool::new(args.threads.unwrap_or_else(default_threads));
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
    };
    (kernels, pool, opts)
}

/// An arena sized for `opts`.
pub fn arena(w: &Weights, opts: &Options) -> Result<Vec<u8>, String> {
    let need = ArenaLayout::new(&w.cfg, opts)
        .map_err(|e| e.to_string())?
        .total;
    let mut v = Vec::new();
    v.try_reserve_exact(need).map_err(|_| {
        format!(
            "cannot allocate {} MB for the KV cache and activations (try a smaller --ctx)",
            need >> 20
        )
    })?;
    v.resize(need, 0);
    Ok(v)
}

/// A state over `arena`.
pub fn state<'a>(w: &Weights, opts: Options, arena: &'a mut [u8]) -> Result<State<'a>, String> {
    State::new(&w.cfg, opts, arena).map_err(|e| e.to_string())
}
