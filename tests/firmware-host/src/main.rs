//! Kestrel's firmware host: the core and the kernels alone, with no operating
//! system library, no libc and no allocator.
//!
//! A static aarch64 ELF (`aarch64-unknown-none`, linked by rust-lld with
//! `link.ld`) with its own entry point. It embeds a VQF with `include_bytes!`
//! (the path comes from `KESTREL_FW_VQF` at build time), carves its memory
//! from a static 64-byte aligned arena, runs every loop on
//! [`Serial`], and takes the dotprod kernels when the build targets them
//! (`+dotprod`, set in `.cargo/config.toml`), else the scalar ones. It does
//! what `kestrel run FILE -p PROMPT -n N --temp 0 --ids` does: the prompt in
//! the chat format the shell applies by default, prefill in batches of 128,
//! greedy decoding of up to [`N_PREDICT`] tokens (stopping at an end token)
//! with speculative decoding by prompt lookup (`--lookup`: up to
//! [`DRAFT_MAX`] drafted tokens verified per step; the same tokens),
//! and prints the text, a newline, then the generated ids as `[a, b, c]`
//! on stdout, and a summary line (tokens, kernels, arena use) on stderr.
//! Output goes through the raw Linux `write` syscall, so the program runs
//! directly under `qemu-aarch64 -cpu cortex-a76` (user mode) and on any
//! aarch64 Linux; on real firmware only the `sys` module would change.
//! Exit status: 0, 1 on an error (printed on stderr), 101 on a panic.
//!
//! Build and run (`scripts/firmware-host.sh` does all of it and compares the
//! output with `kestrel run`):
//!
//! ```text
//! kestrel convert tests/fixtures/dev_qwen3_dense_tied/hf -o /tmp/fw.vqf --wmode dual
//! cd tests/firmware-host
//! KESTREL_FW_VQF=/tmp/fw.vqf cargo build --release
//! qemu-aarch64 -cpu cortex-a76 target/aarch64-unknown-none/release/kestrel-firmware-host
//! ```
//!
//! # Why this program has `unsafe` while the core has none
//!
//! `kestrel-core` is `#![forbid(unsafe_code)]`: it only computes on slices it
//! is given. Someone has to give them, and talk to the outside world; here
//! that is this file, and each block says why it is sound (`// SAFETY:`):
//!
//! * the entry point: `#[no_mangle] extern "C" fn _start` (no runtime calls
//!   `main` for us);
//! * the two syscalls, `write` (64) and `exit_group` (94), as `svc #0`;
//! * the static arena: one `&'static mut` handed out at most once, guarded
//!   by an atomic flag (a `static` cannot be mutable safely otherwise);
//! * the panic handler itself is safe code, but calls the syscalls.
#![no_std]
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use core::cell::UnsafeCell;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, Ordering};
use kestrel_core::chat::{self, BufWriter, ChatStyle, Message, Role};
use kestrel_core::generate::{Generator, PREFILL_CHUNK};
use kestrel_core::kernels::Kernels;
use kestrel_core::model::weights::{LayerWeights, Weights};
use kestrel_core::parallel::Serial;
use kestrel_core::sampler::SamplerConfig;
use kestrel_core::speculate::{Adaptive, Lookup, SpecStats, Speculation};
use kestrel_core::state::{ArenaSizes, KvType, Options, State};
use kestrel_core::tokenizer::EncodeScratch;
use kestrel_core::vqf::Vqf;
use kestrel_core::Error;

/// The prompt (the user's turn; the chat format is applied as `kestrel run`
/// applies it without `--raw`).
pub const PROMPT: &str = "The capital of France";
/// Most tokens generated.
pub const N_PREDICT: usize = 24;
/// `kestrel run`'s defaults: context 4096 (capped by the file), prefill
/// chunks of the core's `PREFILL_CHUNK` (as the shell), f16 KV cache.
const CTX: usize = 4096;
const MAX_BATCH: usize = PREFILL_CHUNK;
/// Most tokens drafted per verify step (prompt lookup).
pub const DRAFT_MAX: usize = 8;
/// Static memory: the arena for the KV cache and activations, and limits of
/// the fixed buffers below.
const ARENA_BYTES: usize = 4 << 20;
const MAX_VOCAB: usize = 4096;
/// Most decoder layers of the embedded model.
const MAX_LAYERS: usize = 16;
const MAX_PROMPT_BYTES: usize = 1024;
const MAX_TOKENS: usize = 512;
/// Longest context: the token history holds one id per cached position.
const MAX_SEQ: usize = CTX;

/// 64-byte aligned bytes: the VQF's tensors are 64-aligned in the file, and
/// views of f32/f16 data need the file's start aligned too.
#[repr(C, align(64))]
struct Aligned<B: ?Sized>(B);

static MODEL: &Aligned<[u8]> = &Aligned(*include_bytes!(env!("KESTREL_FW_VQF")));

/// The arena, zero-filled by the loader (.bss): no file bytes.
#[repr(C, align(64))]
struct Arena(UnsafeCell<[u8; ARENA_BYTES]>);

// SAFETY: the bytes are only reached through `take_arena`, which creates
// the one reference to them at most once (guarded by `ARENA_TAKEN`), so no
// two threads can ever touch them through this static.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; ARENA_BYTES]));
static ARENA_TAKEN: AtomicBool = AtomicBool::new(false);

/// The arena, the first time; `None` after.
fn take_arena() -> Option<&'static mut [u8]> {
    if ARENA_TAKEN.swap(true, Ordering::AcqRel) {
        return None;
    }
    // SAFETY: the swap above returned false exactly once in the program's
    // life, so this is the only reference to the arena's bytes ever made.
    Some(unsafe { &mut *ARENA.0.get() })
}

/// The Linux syscalls this program uses (aarch64: number in x8, `svc #0`).
mod sys {
    use core::arch::asm;

    const WRITE: usize = 64;
    const EXIT_GROUP: usize = 94;
    const EINTR: isize = -4;

    /// Writes all of `bytes` to `fd`.
    pub fn write_all(fd: usize, mut bytes: &[u8]) -> Result<(), ()> {
        while !bytes.is_empty() {
            let ret: isize;
            // SAFETY: write(2) only reads `bytes.len()` bytes at
            // `bytes.as_ptr()`, a live slice; the kernel changes no register
            // but x0 (the result) and no memory of ours.
            unsafe {
                asm!(
                    "svc #0",
                    inlateout("x0") fd => ret,
                    in("x1") bytes.as_ptr(),
                    in("x2") bytes.len(),
                    in("x8") WRITE,
                    options(nostack, readonly),
                );
            }
            if ret == EINTR {
                continue;
            }
            if ret <= 0 {
                return Err(());
            }
            bytes = bytes.get(ret as usize..).unwrap_or(&[]);
        }
        Ok(())
    }

    /// Ends the process with `code`.
    pub fn exit(code: i32) -> ! {
        // SAFETY: exit_group(2) ends every thread of the process and never
        // returns; it reads no memory.
        unsafe {
            asm!(
                "svc #0",
                in("x0") code as isize,
                in("x8") EXIT_GROUP,
                options(noreturn, nostack, nomem),
            )
        }
    }
}

/// A file descriptor as a `fmt::Write`.
struct Fd(usize);

impl Write for Fd {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        sys::write_all(self.0, s.as_bytes()).map_err(|_| fmt::Error)
    }
}

/// Why the run failed.
enum Failure {
    Core(Error),
    Host(&'static str),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Core(e) => write!(f, "{e}"),
            Failure::Host(s) => f.write_str(s),
        }
    }
}

/// The entry point: the loader jumps here once, with a 16-byte aligned
/// stack (qemu's default: 8 MiB) and no runtime set up; nothing returns.
#[no_mangle]
pub extern "C" fn _start() -> ! {
    let code = match run() {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(Fd(2), "kestrel-firmware-host: {e}");
            1
        }
    };
    sys::exit(code)
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    let _ = sys::write_all(2, b"panic\n");
    sys::exit(101)
}

/// Everything `kestrel run -p PROMPT -n N_PREDICT --temp 0 --ids` does.
fn run() -> Result<(), Failure> {
    let arena = take_arena().ok_or(Failure::Host("the arena was taken twice"))?;
    let vqf = Vqf::parse(&MODEL.0)?;
    // The layers' tensor views, resolved once (both weight copies).
    let mut layers = [LayerWeights::EMPTY; 2 * MAX_LAYERS];
    if Weights::layer_slots(vqf.config()) > layers.len() {
        return Err(Failure::Host("the model has more layers than MAX_LAYERS"));
    }
    let w = Weights::new(vqf, true, &mut layers)?;
    let kernels = match kestrel_kernels::aarch64::Dotprod::new() {
        Some(cpu) => Kernels::Dotprod(cpu),
        None => Kernels::Scalar,
    };
    let opts = Options {
        max_seq: (w.vqf.header().max_seq as usize).clamp(1, CTX),
        max_batch: MAX_BATCH,
        kv: KvType::F16,
        all_logits: false,
        slots: 1,
        draft: DRAFT_MAX,
    };
    let arena_need = ArenaSizes::new(&w.cfg, &opts)?.total;
    let state = State::new(&w.cfg, opts, arena)?;
    // The core's generation path, as `kestrel run` drives it: the prompt
    // in chunks of MAX_BATCH, then greedy tokens until an end token.
    let vocab = w.cfg.vocab_size as usize;
    if vocab > MAX_VOCAB || opts.max_seq > MAX_SEQ {
        return Err(Failure::Host(
            "vocabulary or context larger than the buffers",
        ));
    }
    let mut history = [0u32; MAX_SEQ];
    let mut candidates = [0u32; MAX_VOCAB];
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..SamplerConfig::default()
    };
    let mut gen = Generator::new(
        &w,
        kernels,
        &Serial,
        state,
        greedy,
        &mut history[..],
        &mut candidates[..vocab],
    )?;
    let tok = &gen.tokenizer;
    let tables = w
        .vqf
        .tokenizer()
        .ok_or(Failure::Host("this VQF file has no tokenizer"))?;

    // The prompt in the chat format, as the shell writes it.
    let style = ChatStyle::from_template(tables.chat_template());
    let mut text_buf = [0u8; MAX_PROMPT_BYTES];
    // The message's byte ranges: data, never control tokens.
    let mut data: [core::ops::Range<usize>; 4] = core::array::from_fn(|_| 0..0);
    let mut text = BufWriter::new(&mut text_buf, &mut data);
    let turn = [Message::text(Role::User, PROMPT)];
    chat::format(&style, &turn, &[], true, None, &mut text)
        .map_err(|_| Failure::Host("the prompt is too long"))?;
    let (data, text) = (text.data_ranges(), text.as_str());

    // The prompt's token ids.
    let mut prompt = [0u32; MAX_TOKENS];
    let mut n = 0;
    let mut norm = [0u8; 3 * MAX_PROMPT_BYTES + 16];
    let mut work = [0u32; EncodeScratch::work_len_for(MAX_PROMPT_BYTES + 16)];
    let mut scratch = EncodeScratch::new(&mut norm, &mut work);
    let mut overflow = false;
    tok.encode_each_data(text, data, Default::default(), &mut scratch, &mut |id| {
        match prompt.get_mut(n) {
            Some(slot) => *slot = id,
            None => overflow = true,
        }
        n += 1;
    })?;
    if overflow {
        return Err(Failure::Host("the prompt has too many tokens"));
    }
    let prompt = &prompt[..n];

    gen.feed(prompt, None)?;
    let mut out = Fd(1);
    let mut lookup = Lookup::new();
    let mut spec = Speculation {
        drafter: &mut lookup,
        length: Adaptive::new(DRAFT_MAX),
    };
    let mut drafts = SpecStats::default();
    let answer = gen.decode_speculative(
        N_PREDICT,
        &AtomicBool::new(false),
        &mut |s: &str| {
            let _ = out.write_str(s);
        },
        None,
        &mut spec,
        &mut drafts,
    )?;
    let prompt_len = prompt.len();
    let generated = answer.generated;

    let mut out = Fd(1);
    let ids = gen.history();
    let ids = &ids[prompt_len.min(ids.len())..(prompt_len + generated).min(ids.len())];
    let _ = out.write_str("\n[");
    for (i, id) in ids.iter().enumerate() {
        let _ = write!(out, "{}{id}", if i > 0 { ", " } else { "" });
    }
    let _ = out.write_str("]\n");
    let _ = writeln!(
        Fd(2),
        "kestrel-firmware-host: {prompt_len} prompt tokens, {generated} generated ({} drafted by lookup, {} accepted), {} kernels, serial, arena {} of {ARENA_BYTES} bytes",
        drafts.drafted,
        drafts.accepted,
        kernels.name(),
        arena_need,
    );
    Ok(())
}
