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
use kestrel_core::embed::{Config, Conversation, Model, Sizes};
use kestrel_core::kernels::Kernels;
use kestrel_core::model::weights::LayerWeights;
use kestrel_core::parallel::Serial;
use kestrel_core::sampler::SamplerConfig;
use kestrel_core::Error;

/// The prompt (the user's turn; the chat format is applied as `kestrel run`
/// applies it without `--raw`).
pub const PROMPT: &str = "The capital of France";
/// Most tokens generated.
pub const N_PREDICT: usize = 24;
/// Most tokens drafted per verify step (prompt lookup).
pub const DRAFT_MAX: usize = 8;
/// Static memory: the engine's block (KV cache, activations, token history,
/// sampler and tokenizer scratch; `Sizes::memory` says how much of it the
/// model needs), and limits of the fixed buffers below.
const ARENA_BYTES: usize = 6 << 20;
/// Most decoder layers of the embedded model.
const MAX_LAYERS: usize = 16;
const MAX_PROMPT_BYTES: usize = 1024;
const MAX_TOKENS: usize = 512;

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

/// Everything `kestrel run -p PROMPT -n N_PREDICT --temp 0 --ids --lookup` does.
fn run() -> Result<(), Failure> {
    let arena = take_arena().ok_or(Failure::Host("the arena was taken twice"))?;
    let config = Config {
        draft: DRAFT_MAX,
        text_bytes: MAX_PROMPT_BYTES,
        ..Config::default()
    };
    let arena_need = Sizes::new(&MODEL.0, &config)?.memory;
    let mut layers = [LayerWeights::EMPTY; 2 * MAX_LAYERS];
    let model = Model::open(&MODEL.0, &mut layers)?;
    let kernels =
        kestrel_kernels::aarch64::Dotprod::new().map_or(Kernels::Scalar, Kernels::Dotprod);
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..SamplerConfig::default()
    };
    let mut engine = Conversation::new(&model, kernels, &Serial, &config, greedy, arena)?;
    let mut prompt = [0u32; MAX_TOKENS];
    let n = engine.chat_turn(None, PROMPT, &mut prompt)?;
    let cancel = AtomicBool::new(false);
    engine.feed(&prompt[..n], &cancel)?;
    let mut out = Fd(1);
    let answer = engine.generate(
        N_PREDICT,
        &cancel,
        &mut |s| {
            let _ = out.write_str(s);
        },
        None,
    )?;
    let ids = &engine.history()[n..n + answer.tokens];
    let _ = writeln!(out, "\n{ids:?}");
    let _ = writeln!(
        Fd(2),
        "kestrel-firmware-host: {n} prompt tokens, {} generated ({} drafted by lookup, {} accepted), {} kernels, serial, arena {arena_need} of {ARENA_BYTES} bytes",
        answer.tokens, answer.drafted, answer.accepted, kernels.name(),
    );
    Ok(())
}
