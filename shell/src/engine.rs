//! Loading a model for inference: map the file, validate it once, size the
//! arena, and set up kernels and threads.

use crate::cli::{at_least_one, get, opt, switch, value};
use crate::error::{Context, Result};
use crate::files::Mapped;
use crate::pool::Pool;
use clap::{value_parser, Arg, ArgMatches};
use kestrel_core::kernels::Kernels;
use kestrel_core::model::weights::{LayerWeights, Weights};
use kestrel_core::state::{ArenaSizes, KvType, Options, State};
use kestrel_core::vqf::Vqf;
use std::path::Path;
use std::time::Instant;

/// Settings shared by the commands that run the model.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineArgs {
    /// Worker threads (default: the big cores on big.LITTLE, else all cores).
    pub threads: Option<usize>,
    /// Do not pin threads to cores.
    pub no_pin: bool,
    /// Context length (default 4096, capped by the file's max_seq).
    pub ctx: Option<usize>,
    /// KV cache in f32 instead of f16.
    pub kv_f32: bool,
    /// Prefill reads the Q8 copy of a dual file (on by default).
    pub prefill_q8: bool,
}

impl EngineArgs {
    /// `-t/--threads N`.
    pub fn threads_arg() -> Arg {
        value(
            "threads",
            "N",
            "Worker threads (default: the big cores on big.LITTLE, else all cores).",
        )
        .short('t')
        .value_parser(at_least_one())
    }

    /// `--no-pin`.
    pub fn no_pin_arg() -> Arg {
        switch("no-pin", "Do not pin threads to cores.")
    }

    /// The flags, for the commands that run the model.
    pub fn args() -> [Arg; 5] {
        [
            Self::threads_arg(),
            Self::no_pin_arg(),
            value(
                "ctx",
                "N",
                "Context length (default 4096, capped by the file's max_seq).",
            )
            .value_parser(at_least_one()),
            switch("kv-f32", "KV cache in f32 instead of f16."),
            value(
                "prefill-q8",
                "BOOL",
                "Prefill reads the Q8 copy of a dual file (`--prefill-q8 false` reads Q4).",
            )
            .value_parser(value_parser!(bool))
            .default_value("true"),
        ]
    }

    pub fn from_matches(m: &ArgMatches) -> Self {
        EngineArgs {
            threads: opt(m, "threads"),
            no_pin: m.get_flag("no-pin"),
            ctx: opt(m, "ctx"),
            kv_f32: m.get_flag("kv-f32"),
            prefill_q8: get(m, "prefill-q8"),
        }
    }
}

impl Default for EngineArgs {
    fn default() -> Self {
        EngineArgs {
            threads: None,
            no_pin: false,
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

/// The default thread count: the biggest cores on big.LITTLE (4 on an
/// RK3588), else all online CPUs (see [`crate::pool::big_cores`]).
pub fn default_threads() -> usize {
    let big = crate::pool::system_big_cores().len();
    if big > 0 {
        big
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    }
}

/// The pool for `threads` (None: [`default_threads`]), pinned to the
/// biggest cores unless `no_pin`.
pub fn make_pool(threads: Option<usize>, no_pin: bool) -> Pool {
    let cores = crate::pool::system_big_cores();
    let n = threads.unwrap_or(if cores.is_empty() {
        default_threads()
    } else {
        cores.len()
    });
    if no_pin {
        Pool::new(n)
    } else {
        Pool::with_cores(n, &cores)
    }
}

/// Kernels, pool and state options for `args`.
pub fn setup(
    w: &Weights,
    args: &EngineArgs,
    all_logits: bool,
    max_batch: usize,
) -> (Kernels, Pool, Options) {
    let kernels = crate::cpu::detect_kernels();
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
    };
    (kernels, pool, opts)
}

/// An arena sized for `opts`.
pub fn arena(w: &Weights, opts: &Options) -> Result<Vec<u8>> {
    let need = ArenaSizes::new(&w.cfg, opts)?.total;
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
pub fn state<'a>(w: &Weights, opts: Options, arena: &'a mut [u8]) -> Result<State<'a>> {
    Ok(State::new(&w.cfg, opts, arena)?)
}
