//! Kestrel's C ABI: the core's embedding facade ([`kestrel_core::embed`])
//! behind `extern "C"` functions, declared in `include/kestrel.h` (which
//! documents each one's ownership and thread-safety; docs/embedding.md is
//! the guide).
//!
//! Everything lives in memory the host gives: [`kestrel_memory_size`] says
//! how many bytes a model and a configuration need, [`kestrel_open`] lays
//! the engine out in them (the handle, the thread callback's state, the
//! model's tensor views, the KV cache, activations and scratch) and returns
//! a handle into that block. No global state but the abort callback of the
//! panic handler ([`kestrel_set_abort_handler`]).
//!
//! # Why this crate has `unsafe` while the core has none
//!
//! C hands in raw pointers and lengths; someone has to promise that they are
//! what they say. Every function checks what can be checked (NULL, lengths,
//! alignment, the handle's magic number, UTF-8, the model's every byte) and
//! takes the rest from the header's contract: a pointer with its length is
//! readable (writable) for that length, the model's bytes and the memory
//! block stay put and untouched until the host stops using the handle, and
//! a handle is used by one thread at a time (but [`kestrel_cancel`]). Each
//! `unsafe` block says which part of the contract makes it sound. The one
//! other promise is the CPU features the host states: the kernels' capability
//! tokens are made with `new_unchecked` from them.
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "hosted")]
extern crate std;

#[cfg(feature = "constrain")]
extern crate alloc;

#[cfg(all(feature = "hosted", feature = "panic-handler"))]
compile_error!("the hosted library uses std's panic handler: build it without panic-handler");

use core::ffi::{c_char, c_int, c_void};
use core::fmt::{self, Write};
use core::mem::{align_of, size_of};
use core::ptr::{self, addr_of, addr_of_mut};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use kestrel_core::embed::{Config, Conversation, Model, Next, Pooling, Sizes};
use kestrel_core::kernels::Kernels;
use kestrel_core::model::weights::LayerWeights;
use kestrel_core::parallel::Parallel;
use kestrel_core::sampler::SamplerConfig;
use kestrel_core::state::KvType;
use kestrel_core::vqf::Vqf;
use kestrel_core::Error;

/// The ABI's major number (the SONAME's): bumped only when a function, a
/// type or a constant of `kestrel.h` changes incompatibly. Hosts check
/// `kestrel_abi_version() == KESTREL_ABI_VERSION`.
pub const ABI_VERSION: u32 = 1;

/// The ABI's minor number: bumped when `kestrel.h` gains functions, types
/// or constants (a library serves every host of its major number whose
/// minor is at most its own: they check `kestrel_abi_minor() >=
/// KESTREL_ABI_MINOR`). 1 (2026-12-07): stop strings, logits, embeddings,
/// the context policy, logit bias, JSON schemas, drafting per call, chat
/// messages.
pub const ABI_MINOR: u32 = 1;

/// What a call did (`kestrel_status` in C).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done.
    Ok = 0,
    /// [`kestrel_next`]: the token is an end token; the answer is over.
    End = 1,
    /// A NULL pointer, a length that does not match, a setting out of range,
    /// text that is not UTF-8, an invalid (NULL, closed) handle.
    Argument = -1,
    /// The memory block is too small or not 64-byte aligned.
    Memory = -2,
    /// The model's bytes are damaged, truncated, misaligned or unsupported.
    Model = -3,
    /// A token id outside the vocabulary.
    Token = -4,
    /// A call out of order (a token pulled before a prompt was fed; a call
    /// from inside a callback of a running call on the same handle).
    Order = -5,
    /// The context (KV cache) is full.
    Context = -6,
    /// An output buffer is too small; the length out-parameter says how
    /// much it needs.
    Buffer = -7,
    /// [`kestrel_cancel`] stopped the call.
    Cancelled = -8,
    /// Anything else (a bug: please report the message).
    Internal = -9,
    /// A saved state is damaged or truncated, or was saved from another
    /// model file or with another KV element type.
    State = -10,
}

/// CPU feature bits of [`KestrelConfig::cpu_features`].
pub mod cpu {
    /// aarch64: FEAT_DotProd (`sdot`).
    pub const DOTPROD: u32 = 1;
    /// x86_64: AVX2, FMA and F16C (all three).
    pub const AVX2: u32 = 2;
    /// x86_64: AVX512-VNNI with AVX512 F, BW and VL (with [`AVX2`]).
    pub const AVX512_VNNI: u32 = 4;
    /// x86_64: AVX-VNNI (with [`AVX2`]).
    pub const AVX_VNNI: u32 = 8;
    /// Every bit this version knows.
    pub const ALL: u32 = DOTPROD | AVX2 | AVX512_VNNI | AVX_VNNI;
}

/// A task of the parallel-for callback: runs item `index`.
pub type TaskFn = unsafe extern "C" fn(task: *mut c_void, index: usize);

/// The host's parallel for: calls `task_fn(task, i)` once for every `i` in
/// `0..n`, on any of its threads, in any order, and returns when all calls
/// have returned.
pub type ParallelFn =
    unsafe extern "C" fn(pool: *mut c_void, n: usize, task_fn: TaskFn, task: *mut c_void);

/// Where a panic is reported before the library traps (the message,
/// NUL-terminated).
pub type AbortFn = unsafe extern "C" fn(message: *const c_char);

/// Text streamed by [`kestrel_generate`]: `len` bytes of UTF-8 at `text`
/// (not NUL-terminated), valid during the call.
pub type TextFn = unsafe extern "C" fn(user: *mut c_void, text: *const c_char, len: usize);

/// An engine's settings (`kestrel_config`); [`kestrel_config_init`] fills
/// `kestrel run`'s defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KestrelConfig {
    /// `sizeof(kestrel_config)` as the host compiled it.
    pub struct_size: u32,
    /// Most tokens in the KV cache (capped by the model file's own limit).
    pub context: u32,
    /// Prompt tokens per forward step.
    pub batch: u32,
    /// 0: f16 KV cache, 1: f32.
    pub kv_f32: u32,
    /// Longest text [`kestrel_tokenize`] and [`kestrel_chat_turn`] take.
    pub text_bytes: u32,
    /// [`kestrel_generate`]: tokens drafted by prompt lookup per verify
    /// step (0: none).
    pub draft: u32,
    /// The `KESTREL_CPU_*` bits the host detected (0: scalar kernels).
    pub cpu_features: u32,
    /// Threads behind `parallel` (1 without it).
    pub threads: u32,
    /// The parallel-for callback (NULL: every loop on the calling thread).
    pub parallel: Option<ParallelFn>,
    /// Its first argument.
    pub parallel_ctx: *mut c_void,
    /// Sampling temperature (0: greedy).
    pub temperature: f32,
    /// Nucleus sampling (1: off).
    pub top_p: f32,
    /// Min-p sampling (0: off).
    pub min_p: f32,
    /// Repetition penalty (1: off).
    pub repeat_penalty: f32,
    /// Top-k sampling (0: off).
    pub top_k: u32,
    /// Tokens the repetition penalty looks at.
    pub repeat_last_n: u32,
    /// The sampler's seed.
    pub seed: u64,
}

/// Sampling settings a handle can change between calls
/// ([`kestrel_sampling_get`], [`kestrel_sampling_set`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KestrelSampling {
    /// `sizeof(kestrel_sampling)` as the host compiled it (set by the
    /// host before either call).
    pub struct_size: u32,
    /// Sampling temperature (0: greedy).
    pub temperature: f32,
    /// Nucleus sampling (1: off).
    pub top_p: f32,
    /// Min-p sampling (0: off).
    pub min_p: f32,
    /// Repetition penalty (1: off).
    pub repeat_penalty: f32,
    /// Top-k sampling (0: off).
    pub top_k: u32,
    /// Tokens the repetition penalty looks at.
    pub repeat_last_n: u32,
    /// [`kestrel_sampling_set`]: 1 restarts the generator from `seed`, 0
    /// keeps its state (`seed` is then only recorded).
    pub reseed: u32,
    /// The sampler's seed.
    pub seed: u64,
}

/// Bytes of a handle's message (NUL included).
const MESSAGE_BYTES: usize = 256;
/// Alignment the memory block must have.
const BLOCK_ALIGN: usize = 64;
/// A live handle's first word ("KEST"; fits every target's `usize`).
const MAGIC: usize = 0x4b45_5354;

/// The host's parallel-for callback as the core's [`Parallel`].
struct HostPool {
    parallel: Option<ParallelFn>,
    ctx: *mut c_void,
    threads: usize,
}

// SAFETY: the pool is only used by the thread that owns the handle (the
// header's contract); the callback itself may run tasks on other threads,
// which only touch the items and the `Sync` closure `for_each_mut` gives.
unsafe impl Sync for HostPool {}

/// One `for_each_mut` call, type-erased for the C task callback.
struct Job<'a, T> {
    items: *mut T,
    n: usize,
    f: &'a (dyn Fn(usize, &mut T) + Sync),
}

/// Runs item `index` of the [`Job`] at `task`.
///
/// # Safety
/// `task` points at a live `Job<T>` whose `items` are `n` valid items, and
/// each index is run at most once while the job lives (the callback's
/// contract).
unsafe extern "C" fn run_task<T>(task: *mut c_void, index: usize) {
    // SAFETY: the caller's contract: `task` is the `Job<T>` that
    // `for_each_mut` passed, alive until the callback returns.
    let job = unsafe { &*(task as *const Job<T>) };
    if index < job.n {
        // SAFETY: `index < n` items; each index runs once, so this is the
        // only reference to that item.
        let item = unsafe { &mut *job.items.add(index) };
        (job.f)(index, item);
    }
}

impl Parallel for HostPool {
    fn threads(&self) -> usize {
        self.threads
    }

    fn for_each_mut<T: Send>(&self, items: &mut [T], f: &(dyn Fn(usize, &mut T) + Sync)) {
        let Some(parallel) = self.parallel.filter(|_| items.len() > 1) else {
            for (i, item) in items.iter_mut().enumerate() {
                f(i, item);
            }
            return;
        };
        let job = Job {
            items: items.as_mut_ptr(),
            n: items.len(),
            f,
        };
        // SAFETY: the host's callback runs `run_task::<T>(job, i)` once for
        // each `i < n` and returns after all of them (the header's
        // contract), so `job` and the items outlive every task.
        unsafe {
            parallel(
                self.ctx,
                job.n,
                run_task::<T>,
                &job as *const Job<T> as *mut c_void,
            )
        };
    }
}

/// The engine type a handle holds.
type Eng = Conversation<'static, 'static, 'static, HostPool>;

/// The engine behind a handle (`kestrel_engine`); the thread pool and the
/// model's views sit beside it in the same block, which never moves.
#[repr(C)]
pub struct Handle {
    /// [`MAGIC`] while open (Release on open and close, Acquire in [`live`]).
    magic: AtomicUsize,
    cancel: AtomicBool,
    /// A call is running on the handle: a call from inside one of its
    /// callbacks (`on_text`, a parallel task) is refused.
    busy: AtomicBool,
    message: [u8; MESSAGE_BYTES],
    /// The built-in pool this handle made (hosted library, `threads` 0),
    /// dropped by [`kestrel_close`]; NULL otherwise.
    owned_pool: *mut c_void,
    /// The JSON schema answers keep to ([`kestrel_json_schema_set`]).
    json: Json,
    engine: Eng,
}

/// A handle's JSON-schema constraint (feature `constrain`, the hosted
/// library): the schema's answer state, the vocabulary sorted once, and
/// whether the next sampled token begins an answer. Without the feature,
/// nothing.
#[derive(Default)]
struct Json {
    #[cfg(feature = "constrain")]
    output: Option<alloc::boxed::Box<kestrel_core::constrain::sorted::JsonOutput>>,
    #[cfg(feature = "constrain")]
    vocab: Option<alloc::boxed::Box<kestrel_core::constrain::sorted::SortedVocab>>,
    #[cfg(feature = "constrain")]
    restart: bool,
}

impl Json {
    /// Frees the schema's tables (the handle closes).
    fn free(&mut self) {
        *self = Json::default();
    }

    /// The next sampled token begins an answer (after a feed or a restore).
    fn answer_begins(&mut self) {
        #[cfg(feature = "constrain")]
        {
            self.restart = true;
        }
    }

    /// `f` with the constraint of the answer, if a schema is set.
    #[cfg(feature = "constrain")]
    fn with<R>(
        &mut self,
        f: impl FnOnce(Option<&mut kestrel_core::generate::Constraint>) -> R,
    ) -> R {
        match (self.output.as_mut(), self.vocab.as_ref()) {
            (Some(out), Some(vocab)) => {
                if core::mem::take(&mut self.restart) {
                    out.restart();
                }
                let view = vocab.view();
                let mut c = out.constraint(&view);
                f(Some(&mut c))
            }
            _ => f(None),
        }
    }

    /// `f` with no constraint (a build without the feature).
    #[cfg(not(feature = "constrain"))]
    fn with<R>(
        &mut self,
        f: impl FnOnce(Option<&mut kestrel_core::generate::Constraint>) -> R,
    ) -> R {
        f(None)
    }
}

/// Where each part of a handle's block starts, and its size.
struct BlockLayout {
    pool: usize,
    model: usize,
    layers: usize,
    handle: usize,
    memory: usize,
    total: usize,
}

// Every part of the block is aligned within the block's own alignment.
const _: () = assert!(
    align_of::<HostPool>() <= BLOCK_ALIGN
        && align_of::<Model>() <= BLOCK_ALIGN
        && align_of::<LayerWeights>() <= BLOCK_ALIGN
        && align_of::<Handle>() <= BLOCK_ALIGN
);

fn align_up(x: usize, a: usize) -> Option<usize> {
    Some(x.checked_add(a - 1)? / a * a)
}

impl BlockLayout {
    fn new(sizes: &Sizes) -> Option<BlockLayout> {
        let pool = 0;
        let model = align_up(pool + size_of::<HostPool>(), align_of::<Model>())?;
        let layers = align_up(model + size_of::<Model>(), align_of::<LayerWeights>())?;
        let layers_end =
            layers.checked_add(sizes.layers.checked_mul(size_of::<LayerWeights>())?)?;
        let handle = align_up(layers_end, align_of::<Handle>())?;
        let memory = align_up(handle.checked_add(size_of::<Handle>())?, BLOCK_ALIGN)?;
        let total = memory.checked_add(sizes.memory)?;
        Some(BlockLayout {
            pool,
            model,
            layers,
            handle,
            memory,
            total,
        })
    }
}

/// A message in a fixed buffer, cut at its end, NUL-terminated.
struct MessageWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl Write for MessageWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len().saturating_sub(self.len + 1);
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

/// Writes `what` into `buf` (NUL-terminated, cut to fit).
fn write_message(buf: &mut [u8], what: &dyn fmt::Display) {
    if buf.is_empty() {
        return;
    }
    let mut w = MessageWriter { buf, len: 0 };
    let _ = write!(w, "{what}");
    let end = w.len;
    w.buf[end] = 0;
}

/// Whether a buffer the core found too small is the caller's output
/// buffer (ids, text), whose size the call reports.
fn is_output(what: &str) -> bool {
    matches!(
        what,
        "token ids"
            | "decoded text"
            | "decoded text chunk"
            | "saved state (bytes)"
            | "logits (floats)"
            | "embedding (floats)"
    )
}

/// The status of a core error.
fn status_of(e: &Error) -> Status {
    match e {
        Error::BufferTooSmall { what, .. } if is_output(what) => Status::Buffer,
        Error::ArenaTooSmall { .. } => Status::Memory,
        Error::ContextFull { .. } => Status::Context,
        // Qwen3.5: a rollback or a dropped turn its recurrent state cannot
        // go back to.
        Error::RecurrentState { .. } => Status::Argument,
        Error::BadToken { .. } => Status::Token,
        Error::Cancelled | Error::FeedCancelled { .. } => Status::Cancelled,
        Error::NotReady { .. } => Status::Order,
        Error::OutOfRange { .. } => Status::Argument,
        Error::Truncated { .. }
        | Error::BadMagic { .. }
        | Error::NewerVersion { .. }
        | Error::Malformed { .. }
        | Error::Unsupported { .. }
        | Error::BadConfig { .. }
        | Error::BadTokenizer { .. }
        | Error::MissingTensor { .. }
        | Error::BadShape { .. }
        | Error::BadTensor { .. }
        | Error::Overflow { .. } => Status::Model,
        _ => Status::Internal,
    }
}

/// A failed call: its status and message.
struct Failure {
    status: Status,
    message: Reason,
}

enum Reason {
    Core(Error),
    Text(&'static str),
    /// A message made for the call (the hosted library's: it allocates).
    #[cfg(feature = "constrain")]
    Owned(alloc::string::String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Core(e) => write!(f, "{e}"),
            Reason::Text(s) => f.write_str(s),
            #[cfg(feature = "constrain")]
            Reason::Owned(s) => f.write_str(s),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure {
            status: status_of(&e),
            message: Reason::Core(e),
        }
    }
}

fn fail(status: Status, what: &'static str) -> Failure {
    Failure {
        status,
        message: Reason::Text(what),
    }
}

fn argument(what: &'static str) -> Failure {
    fail(Status::Argument, what)
}

/// The core's settings from the C struct.
fn settings(c: &KestrelConfig) -> Result<(Config, SamplerConfig), Failure> {
    if c.cpu_features & !cpu::ALL != 0 {
        return Err(argument(
            "config: cpu_features has bits this library does not know",
        ));
    }
    let kv = match c.kv_f32 {
        0 => KvType::F16,
        1 => KvType::F32,
        _ => return Err(argument("config: kv_f32 must be 0 or 1")),
    };
    match (c.threads, c.parallel.is_some()) {
        (0, false) if cfg!(feature = "hosted") => {}
        (0, false) => {
            return Err(argument(
                "config: threads 0 (the built-in pool) needs the hosted library; give 1 or a parallel callback",
            ))
        }
        (0, true) => return Err(argument("config: threads must be at least 1 with a parallel callback")),
        (1, false) | (_, true) => {}
        (_, false) => {
            return Err(argument(
                "config: threads above 1 need a parallel callback (or 0: the hosted library's built-in pool)",
            ))
        }
    }
    let config = Config {
        context: c.context as usize,
        batch: c.batch as usize,
        kv,
        text_bytes: c.text_bytes as usize,
        draft: c.draft as usize,
    };
    let sampler = SamplerConfig {
        temperature: c.temperature,
        top_k: c.top_k as usize,
        top_p: c.top_p,
        min_p: c.min_p,
        repeat_penalty: c.repeat_penalty,
        repeat_last_n: c.repeat_last_n as usize,
        seed: c.seed,
    };
    sampler.check().map_err(argument)?;
    Ok((config, sampler))
}

/// The kernels for the host's feature bits.
fn kernels_for(features: u32) -> Kernels {
    #[cfg(target_arch = "aarch64")]
    if features & cpu::DOTPROD != 0 {
        // SAFETY: the host states that this CPU implements FEAT_DotProd
        // (the header's one promise about the CPU).
        return Kernels::Dotprod(unsafe { kestrel_kernels::aarch64::Dotprod::new_unchecked() });
    }
    #[cfg(target_arch = "x86_64")]
    if features & cpu::AVX2 != 0 {
        use kestrel_kernels::x86_64::{Avx2, Vnni};
        let vnni = if features & cpu::AVX512_VNNI != 0 {
            Vnni::Avx512
        } else if features & cpu::AVX_VNNI != 0 {
            Vnni::Avx
        } else {
            Vnni::No
        };
        // SAFETY: the host states that this CPU implements AVX2, FMA and
        // F16C, and the VNNI form its bits name.
        return Kernels::Avx2(unsafe { Avx2::new_unchecked().with_vnni_unchecked(vnni) });
    }
    let _ = features;
    Kernels::Scalar
}

/// `len` bytes at `p` (NULL only when `len` is 0).
///
/// # Safety
/// A non-NULL `p` is readable for `len` bytes for `'a`.
unsafe fn bytes<'a>(p: *const c_void, len: usize, what: &'static str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() || len > isize::MAX as usize {
        return Err(argument(what));
    }
    // SAFETY: the caller's contract: readable for `len` bytes.
    Ok(unsafe { core::slice::from_raw_parts(p as *const u8, len) })
}

/// `len` bytes of UTF-8 at `p`.
///
/// # Safety
/// As [`bytes`].
unsafe fn text<'a>(p: *const c_char, len: usize, what: &'static str) -> Result<&'a str, Failure> {
    // SAFETY: the caller's contract, passed on.
    let b = unsafe { bytes(p as *const c_void, len, what) }?;
    core::str::from_utf8(b).map_err(|_| argument("text is not valid UTF-8"))
}

/// `len` values at `p`, writable (NULL only when `len` is 0).
///
/// # Safety
/// A non-NULL `p` is writable for `len` values for `'a` and aligned.
unsafe fn out_slice<'a, T>(
    p: *mut T,
    len: usize,
    what: &'static str,
) -> Result<&'a mut [T], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() || !p.is_aligned() || len > isize::MAX as usize / size_of::<T>().max(1) {
        return Err(argument(what));
    }
    // SAFETY: the caller's contract: writable for `len` values.
    Ok(unsafe { core::slice::from_raw_parts_mut(p, len) })
}

/// An out-parameter checked before a call does its work: aligned, and not
/// NULL unless `optional`.
fn out_param<T>(p: *mut T, optional: bool, what: &'static str) -> Result<(), Failure> {
    match (p.is_null(), p.is_aligned()) {
        (true, _) if optional => Ok(()),
        (false, true) => Ok(()),
        _ => Err(argument(what)),
    }
}

/// Writes `v` to `p` when it is not NULL (checked by [`out_param`]).
///
/// # Safety
/// A non-NULL `p` is writable and aligned.
unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() && p.is_aligned() {
        // SAFETY: the caller's contract: writable.
        unsafe { p.write(v) };
    }
}

/// The handle `h` checked: not NULL, aligned, alive (its magic number).
///
/// # Safety
/// A non-NULL `h` points at readable memory (a handle of
/// [`kestrel_open`], or a block the host still owns).
unsafe fn live(h: *mut Handle) -> Option<*mut Handle> {
    if h.is_null() || !h.is_aligned() {
        return None;
    }
    // SAFETY: readable (the contract); an atomic, so a `kestrel_close` on
    // another thread (a contract breach) is no data race.
    let magic = unsafe { (*addr_of!((*h).magic)).load(Ordering::Acquire) };
    (magic == MAGIC).then_some(h)
}

/// Runs `f` on the engine of a live handle; a failure becomes its status
/// and the handle's message.
///
/// # Safety
/// `h` is NULL or a handle of [`kestrel_open`] whose block is still the
/// host's, used by no other thread during the call.
unsafe fn with_engine(
    h: *mut Handle,
    f: impl FnOnce(&mut Eng, &AtomicBool) -> Result<Status, Failure>,
) -> Status {
    // SAFETY: the caller's contract, passed on.
    unsafe { with_parts(h, |e, _, cancel| f(e, cancel)) }
}

/// [`with_engine`], `f` also given the handle's JSON-schema constraint.
///
/// # Safety
/// As [`with_engine`].
unsafe fn with_parts(
    h: *mut Handle,
    f: impl FnOnce(&mut Eng, &mut Json, &AtomicBool) -> Result<Status, Failure>,
) -> Status {
    // SAFETY: the caller's contract, passed on.
    let Some(h) = (unsafe { live(h) }) else {
        return Status::Argument;
    };
    // SAFETY: live; a shared reference to an atomic field.
    let busy = unsafe { &*addr_of!((*h).busy) };
    if busy.swap(true, Ordering::Acquire) {
        // A callback of this handle's running call called back in: the
        // engine is borrowed. Its message is the running call's to write.
        return Status::Order;
    }
    // SAFETY: `h` is a live handle used by this thread only, and no other
    // call on it is running (`busy`); the engine and the flag are distinct
    // fields, and `kestrel_cancel` on other threads only ever makes a
    // shared reference to the atomic flag.
    let (engine, json, cancel) = unsafe {
        (
            &mut *addr_of_mut!((*h).engine),
            &mut *addr_of_mut!((*h).json),
            &*addr_of!((*h).cancel),
        )
    };
    let result = f(engine, json, cancel);
    busy.store(false, Ordering::Release);
    // SAFETY: as above: the message is this thread's to write.
    let message = unsafe { &mut *addr_of_mut!((*h).message) };
    match result {
        Ok(status) => {
            message[0] = 0;
            status
        }
        Err(e) => {
            write_message(message, &e.message);
            e.status
        }
    }
}

/// The library's version, NUL-terminated (static).
#[no_mangle]
pub extern "C" fn kestrel_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0")
        .as_ptr()
        .cast::<c_char>()
}

/// The ABI's minor number ([`ABI_MINOR`]).
#[no_mangle]
pub extern "C" fn kestrel_abi_minor() -> u32 {
    ABI_MINOR
}

/// The ABI's major number ([`ABI_VERSION`]).
#[no_mangle]
pub extern "C" fn kestrel_abi_version() -> u32 {
    ABI_VERSION
}

/// Fills `config` with `kestrel run`'s defaults.
///
/// # Safety
/// `config` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_config_init(config: *mut KestrelConfig) -> Status {
    if config.is_null() || !config.is_aligned() {
        return Status::Argument;
    }
    let d = Config::default();
    let s = SamplerConfig::default();
    let c = KestrelConfig {
        struct_size: size_of::<KestrelConfig>() as u32,
        context: d.context as u32,
        batch: d.batch as u32,
        kv_f32: 0,
        text_bytes: d.text_bytes as u32,
        draft: d.draft as u32,
        cpu_features: hosted::detected_features(),
        threads: if cfg!(feature = "hosted") { 0 } else { 1 },
        parallel: None,
        parallel_ctx: ptr::null_mut(),
        temperature: s.temperature,
        top_p: s.top_p,
        min_p: s.min_p,
        repeat_penalty: s.repeat_penalty,
        top_k: s.top_k as u32,
        repeat_last_n: s.repeat_last_n as u32,
        seed: s.seed,
    };
    // SAFETY: checked non-NULL and aligned; writable by the contract.
    unsafe { config.write(c) };
    Status::Ok
}

/// Reads the config at `config` and sizes the block for `model`.
///
/// # Safety
/// As [`kestrel_memory_size`].
unsafe fn plan(
    model: *const c_void,
    model_len: usize,
    config: *const KestrelConfig,
) -> Result<(Vqf<'static>, Config, SamplerConfig, Sizes, BlockLayout), Failure> {
    if config.is_null() || !config.is_aligned() {
        return Err(argument("config is NULL"));
    }
    // SAFETY: checked; its first field is readable whatever version of the
    // struct the host compiled; the rest only once the size matches.
    let size = unsafe { ptr::read(addr_of!((*config).struct_size)) };
    if size as usize != size_of::<KestrelConfig>() {
        return Err(argument(
            "config: struct_size is not this library's sizeof(kestrel_config) (call kestrel_config_init; header and library differ?)",
        ));
    }
    // SAFETY: checked: a whole struct of this version.
    let c = unsafe { &*config };
    let (cfg, sampler) = settings(c)?;
    if model.is_null() || model_len == 0 {
        return Err(fail(Status::Model, "model: NULL or empty"));
    }
    // SAFETY: the contract: the model's bytes are readable for `model_len`
    // and stay unchanged while any handle over them is in use.
    let bytes = unsafe { bytes(model, model_len, "model is NULL") }?;
    let vqf = Vqf::parse(bytes)?;
    let sizes = Sizes::of(&vqf, &cfg)?;
    let layout = BlockLayout::new(&sizes).ok_or(fail(Status::Memory, "memory size overflows"))?;
    Ok((vqf, cfg, sampler, sizes, layout))
}

/// Writes a failure into the caller's error buffer.
///
/// # Safety
/// `err` is NULL or writable for `err_len` bytes.
unsafe fn report(err: *mut c_char, err_len: usize, e: &Failure) -> Status {
    // SAFETY: the caller's contract.
    if let Ok(buf) = unsafe { out_slice(err.cast::<u8>(), err_len, "") } {
        write_message(buf, &e.message);
    }
    e.status
}

/// The bytes of memory [`kestrel_open`] needs for `model` and `config`.
///
/// # Safety
/// `model` is readable for `model_len` bytes; `config` and `bytes` are NULL
/// or valid; `err` is NULL or writable for `err_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn kestrel_memory_size(
    model: *const c_void,
    model_len: usize,
    config: *const KestrelConfig,
    bytes: *mut usize,
    err: *mut c_char,
    err_len: usize,
) -> Status {
    // SAFETY: the caller's contract, passed on.
    let planned = out_param(bytes, false, "bytes is NULL or misaligned")
        .and_then(|()| unsafe { plan(model, model_len, config) });
    match planned {
        Ok((.., layout)) => {
            // SAFETY: checked above; writable by the contract.
            unsafe { put(bytes, layout.total) };
            // SAFETY: the caller's contract: `err` NULL or writable.
            if let Ok([first, ..]) = unsafe { out_slice(err.cast::<u8>(), err_len.min(1), "") } {
                *first = 0;
            }
            Status::Ok
        }
        // SAFETY: the caller's contract.
        Err(e) => unsafe { report(err, err_len, &e) },
    }
}

/// Opens an engine for `model` in `memory`.
///
/// # Safety
/// As [`kestrel_memory_size`]; `memory` is writable for `memory_len` bytes,
/// and it and the model's bytes stay the engine's, unchanged by the host,
/// until it stops using the handle; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_open(
    model: *const c_void,
    model_len: usize,
    config: *const KestrelConfig,
    memory: *mut c_void,
    memory_len: usize,
    out: *mut *mut Handle,
    err: *mut c_char,
    err_len: usize,
) -> Status {
    // SAFETY: the caller's contract, passed on.
    match unsafe { open(model, model_len, config, memory, memory_len, out) } {
        Ok(()) => {
            // SAFETY: the caller's contract: `err` NULL or writable.
            if let Ok([first, ..]) = unsafe { out_slice(err.cast::<u8>(), err_len.min(1), "") } {
                *first = 0;
            }
            Status::Ok
        }
        // SAFETY: the caller's contract.
        Err(e) => unsafe { report(err, err_len, &e) },
    }
}

/// [`kestrel_open`]'s work.
///
/// # Safety
/// As [`kestrel_open`].
unsafe fn open(
    model: *const c_void,
    model_len: usize,
    config: *const KestrelConfig,
    memory: *mut c_void,
    memory_len: usize,
    out: *mut *mut Handle,
) -> Result<(), Failure> {
    if out.is_null() || !out.is_aligned() {
        return Err(argument("out is NULL"));
    }
    // SAFETY: checked; writable by the contract.
    unsafe { out.write(ptr::null_mut()) };
    // SAFETY: the caller's contract, passed on.
    let (vqf, cfg, sampler, sizes, layout) = unsafe { plan(model, model_len, config) }?;
    // SAFETY: `plan` checked `config`.
    let c = unsafe { &*config };
    if memory.is_null() {
        return Err(fail(Status::Memory, "memory is NULL"));
    }
    if !(memory as usize).is_multiple_of(BLOCK_ALIGN) {
        return Err(fail(Status::Memory, "memory is not 64-byte aligned"));
    }
    if memory_len < layout.total {
        return Err(fail(
            Status::Memory,
            "memory is smaller than kestrel_memory_size says",
        ));
    }
    let base = memory as *mut u8;
    // SAFETY: every offset below is within `layout.total <= memory_len`
    // bytes of the block (writable by the contract) and aligned for its type
    // (the block is 64-byte aligned; BlockLayout aligns each part). The
    // parts do not overlap. The references made live as long as the host
    // keeps the block ('static to the compiler: the contract).
    unsafe {
        // `threads` 0 without a callback: the hosted library's own pool
        // (`settings` refused it in other builds).
        let (host, owned_pool) = match (c.threads, c.parallel) {
            (0, None) => hosted::builtin_pool(),
            _ => (
                HostPool {
                    parallel: c.parallel,
                    ctx: c.parallel_ctx,
                    threads: c.threads as usize,
                },
                ptr::null_mut(),
            ),
        };
        let pool = base.add(layout.pool) as *mut HostPool;
        pool.write(host);
        let pool: &'static HostPool = &*pool;
        let layers = base.add(layout.layers) as *mut LayerWeights<'static>;
        for i in 0..sizes.layers {
            layers.add(i).write(LayerWeights::EMPTY);
        }
        let layers = core::slice::from_raw_parts_mut(layers, sizes.layers);
        let model = base.add(layout.model) as *mut Model<'static>;
        model.write(Model::of(vqf, layers)?);
        let model: &'static Model<'static> = &*model;
        let arena = base.add(layout.memory);
        ptr::write_bytes(arena, 0, sizes.memory);
        let arena = core::slice::from_raw_parts_mut(arena, sizes.memory);
        let kernels = kernels_for(c.cpu_features);
        let engine = Conversation::new(model, kernels, pool, &cfg, sampler, arena)?;
        let h = base.add(layout.handle) as *mut Handle;
        addr_of_mut!((*h).magic).write(AtomicUsize::new(0));
        addr_of_mut!((*h).engine).write(engine);
        addr_of_mut!((*h).cancel).write(AtomicBool::new(false));
        addr_of_mut!((*h).busy).write(AtomicBool::new(false));
        addr_of_mut!((*h).message).write([0; MESSAGE_BYTES]);
        addr_of_mut!((*h).owned_pool).write(owned_pool);
        addr_of_mut!((*h).json).write(Json::default());
        // Last: every field above is written before a thread can see it live.
        (*addr_of!((*h).magic)).store(MAGIC, Ordering::Release);
        out.write(h);
    }
    Ok(())
}

/// Ends a handle: its block is the host's again.
///
/// # Safety
/// `h` is NULL or a handle of [`kestrel_open`] no other thread is using
/// (no `kestrel_cancel` in flight either).
#[no_mangle]
pub unsafe extern "C" fn kestrel_close(h: *mut Handle) -> Status {
    // SAFETY: the caller's contract.
    let Some(h) = (unsafe { live(h) }) else {
        return Status::Argument;
    };
    // SAFETY: live; shared references to its atomic fields.
    let (busy, magic) = unsafe { (&*addr_of!((*h).busy), &*addr_of!((*h).magic)) };
    if busy.load(Ordering::Acquire) {
        // From inside a callback of a running call.
        return Status::Order;
    }
    // The magic goes, so later calls with this pointer fail while the host
    // leaves the block alone (best effort: after close the pointer is
    // dead). Nothing in the engine needs dropping (it owns no resources)
    // but the hosted library's built-in pool, whose threads end here, and
    // a JSON schema's tables (hosted library), freed here.
    magic.store(0, Ordering::Release);
    // SAFETY: live, and no call runs (checked above): the pool is unused.
    let owned = unsafe { ptr::replace(addr_of_mut!((*h).owned_pool), ptr::null_mut()) };
    // SAFETY: `owned` is NULL or the pool `hosted::builtin_pool` made for
    // this handle, dropped once (the field was cleared above).
    unsafe { hosted::drop_pool(owned) };
    // SAFETY: live, no call runs: the constraint's memory is freed once
    // (the field left empty).
    unsafe { (*addr_of_mut!((*h).json)).free() };
    Status::Ok
}

/// The message of the handle's last failed call (empty after a success),
/// NUL-terminated; valid until the next call with the handle.
///
/// # Safety
/// `h` is NULL or a handle of [`kestrel_open`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_error(h: *const Handle) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { live(h as *mut Handle) } {
        // SAFETY: live: its message is NUL-terminated.
        Some(h) => unsafe { addr_of!((*h).message) as *const c_char },
        None => c"invalid handle (NULL, closed, or not from kestrel_open)".as_ptr(),
    }
}

/// What a status means, one line, NUL-terminated (static; any value:
/// "unknown status" for one the library never returns). The message of a
/// `KESTREL_E_ORDER` from a call made while another ran on the handle: the
/// handle's own message ([`kestrel_error`]) is the running call's. Any
/// thread.
#[no_mangle]
pub extern "C" fn kestrel_status_string(status: c_int) -> *const c_char {
    match status {
        0 => c"done",
        1 => c"the answer ended on an end token",
        -1 => c"invalid argument: a NULL pointer, a length that does not match, a setting out of range, text that is not UTF-8, or an invalid handle",
        -2 => c"the memory block is too small or not 64-byte aligned",
        -3 => c"the model's bytes are damaged, truncated, misaligned or unsupported",
        -4 => c"a token id outside the vocabulary",
        -5 => c"a call out of order: no prompt fed, or another call is running on the handle",
        -6 => c"the context (KV cache) is full",
        -7 => c"the output buffer is too small (the length out-parameter has the size needed)",
        -8 => c"cancelled by kestrel_cancel",
        -9 => c"internal error (a bug)",
        -10 => c"the saved state is damaged, or was saved from another model file or KV type",
        _ => c"unknown status",
    }
    .as_ptr()
}

/// The kernels the engine uses, NUL-terminated (static).
///
/// # Safety
/// `h` is NULL or a handle of [`kestrel_open`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_kernels(h: *const Handle) -> *const c_char {
    // SAFETY: the caller's contract.
    let Some(h) = (unsafe { live(h as *mut Handle) }) else {
        return c"".as_ptr();
    };
    // SAFETY: live; a shared look at the engine's kernels.
    let name = unsafe { (*addr_of!((*h).engine)).kernels().name() };
    match name {
        "scalar" => c"scalar",
        "aarch64-dotprod" => c"aarch64-dotprod",
        "x86_64-avx512vnni" => c"x86_64-avx512vnni",
        "x86_64-avxvnni" => c"x86_64-avxvnni",
        "x86_64-avx2" => c"x86_64-avx2",
        _ => c"other",
    }
    .as_ptr()
}

/// The vocabulary size (0 for an invalid handle).
///
/// # Safety
/// `h` is NULL or a handle of [`kestrel_open`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_vocab(h: *const Handle) -> u32 {
    // SAFETY: the caller's contract.
    match unsafe { live(h as *mut Handle) } {
        // SAFETY: live; a shared look.
        Some(h) => unsafe { (*addr_of!((*h).engine)).vocab() as u32 },
        None => 0,
    }
}

/// The tokens in the KV cache: `*ids` points at them (valid until the next
/// call with the handle), `*n` their count.
///
/// # Safety
/// `h` is NULL or a handle of [`kestrel_open`]; `ids`, `n` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_history(
    h: *mut Handle,
    ids: *mut *const u32,
    n: *mut usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        out_param(ids, false, "ids is NULL or misaligned")?;
        out_param(n, false, "n is NULL or misaligned")?;
        let hist = e.history();
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { put(ids, hist.as_ptr()) };
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { put(n, hist.len()) };
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// Token ids of `text` into `ids` (room for `cap`); `*n` their count, or the
/// count needed with [`Status::Buffer`]. `special` 0: all of the text is
/// data (never a control token); 1: special tokens' text becomes them.
///
/// # Safety
/// `h` is NULL or a handle of [`kestrel_open`]; `text` readable for `len`
/// bytes; `ids` writable for `cap`; `n` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_tokenize(
    h: *mut Handle,
    text_ptr: *const c_char,
    len: usize,
    special: c_int,
    ids: *mut u32,
    cap: usize,
    n: *mut usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        out_param(n, false, "n is NULL or misaligned")?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let s = unsafe { text(text_ptr, len, "text is NULL") }?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let out = unsafe { out_slice(ids, cap, "ids is NULL") }?;
        let special = match special {
            0 => false,
            1 => true,
            _ => return Err(argument("special must be 0 or 1")),
        };
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { counted(n, e.tokenize(s, special, out)) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// A count's result: `*n` is the count, or the size needed when a buffer
/// is too small.
///
/// # Safety
/// `n` is NULL or writable.
unsafe fn counted(n: *mut usize, r: Result<usize, Error>) -> Result<Status, Failure> {
    match r {
        Ok(count) => {
            // SAFETY: the caller's contract.
            unsafe { put(n, count) };
            Ok(Status::Ok)
        }
        Err(e) => {
            if let Error::BufferTooSmall { what, need, .. } = e {
                if is_output(what) {
                    // SAFETY: the caller's contract.
                    unsafe { put(n, need) };
                }
            }
            Err(e.into())
        }
    }
}

/// Token ids of a user turn in the model's chat format (as `kestrel run`;
/// after cached turns, as `kestrel chat`'s next turn); `system` may be NULL
/// (the template's default). The texts are data, never control tokens.
///
/// # Safety
/// As [`kestrel_tokenize`]; `system` NULL or readable for `system_len`.
#[no_mangle]
pub unsafe extern "C" fn kestrel_chat_turn(
    h: *mut Handle,
    system: *const c_char,
    system_len: usize,
    user: *const c_char,
    user_len: usize,
    ids: *mut u32,
    cap: usize,
    n: *mut usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        let system = match system.is_null() {
            true if system_len == 0 => None,
            true => return Err(argument("system is NULL with a length")),
            // SAFETY: the pointers' contract (this function's Safety section).
            false => Some(unsafe { text(system, system_len, "system is NULL") }?),
        };
        // SAFETY: the pointers' contract (this function's Safety section).
        let user = unsafe { text(user, user_len, "user is NULL") }?;
        out_param(n, false, "n is NULL or misaligned")?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let out = unsafe { out_slice(ids, cap, "ids is NULL") }?;
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { counted(n, e.chat_turn(system, user, out)) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// One message of [`kestrel_chat_messages`] (`kestrel_message` in C).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KestrelMessage {
    /// `KESTREL_ROLE_*`.
    pub role: c_int,
    /// Its text, `len` bytes of UTF-8 (data, never control tokens).
    pub text: *const c_char,
    /// Bytes of `text`.
    pub len: usize,
}

/// [`KestrelMessage::role`]: instructions.
pub const KESTREL_ROLE_SYSTEM: c_int = 0;
/// [`KestrelMessage::role`]: the user.
pub const KESTREL_ROLE_USER: c_int = 1;
/// [`KestrelMessage::role`]: the model's answer.
pub const KESTREL_ROLE_ASSISTANT: c_int = 2;
/// [`KestrelMessage::role`]: a tool's answer to the model's call.
pub const KESTREL_ROLE_TOOL: c_int = 3;

/// Token ids of `messages[n]` (at most 32; system, user, assistant and
/// tool turns) in the model's chat format and the opened assistant turn,
/// as the server formats a request's messages (without tools' schemas):
/// on an empty cache from the start, after cached turns following them
/// (an open answer closed first). The texts are data, never control
/// tokens, and fit `text_bytes` together, with 64 bytes for each message
/// past two.
///
/// # Safety
/// As [`kestrel_tokenize`]; `messages` readable for `n`, each one's text
/// readable for its `len`.
#[no_mangle]
pub unsafe extern "C" fn kestrel_chat_messages(
    h: *mut Handle,
    messages: *const KestrelMessage,
    count: usize,
    ids: *mut u32,
    cap: usize,
    n: *mut usize,
) -> Status {
    use kestrel_core::chat::{Message, Role};
    use kestrel_core::embed::MAX_MESSAGES;
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        if count > MAX_MESSAGES {
            return Err(argument("messages: at most 32"));
        }
        if count > 0 && (messages.is_null() || !messages.is_aligned()) {
            return Err(argument("messages is NULL or misaligned"));
        }
        let mut parsed = [Message::text(Role::User, ""); MAX_MESSAGES];
        for (i, m) in parsed.iter_mut().enumerate().take(count) {
            // SAFETY: `messages` is readable for `count` (the contract).
            let given = unsafe { *messages.add(i) };
            let role = match given.role {
                KESTREL_ROLE_SYSTEM => Role::System,
                KESTREL_ROLE_USER => Role::User,
                KESTREL_ROLE_ASSISTANT => Role::Assistant,
                KESTREL_ROLE_TOOL => Role::Tool,
                _ => return Err(argument("messages: a role that is not KESTREL_ROLE_*")),
            };
            // SAFETY: each text is readable for its `len` (the contract).
            let content = unsafe { text(given.text, given.len, "a message's text is NULL") }?;
            *m = Message::text(role, content);
        }
        out_param(n, false, "n is NULL or misaligned")?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let out = unsafe { out_slice(ids, cap, "ids is NULL") }?;
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { counted(n, e.chat_messages(&parsed[..count], out)) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// The text of `ids` (special tokens included) into `out` (room for `cap`
/// bytes, not NUL-terminated); `*len` its length, or the size needed.
///
/// # Safety
/// As [`kestrel_tokenize`], with `ids` readable for `n` and `out` writable
/// for `cap`.
#[no_mangle]
pub unsafe extern "C" fn kestrel_detokenize(
    h: *mut Handle,
    ids: *const u32,
    n: usize,
    out: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        // SAFETY: the pointers' contract (this function's Safety section).
        let ids = unsafe { ids_in(ids, n) }?;
        out_param(len, false, "len is NULL or misaligned")?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let out = unsafe { out_slice(out.cast::<u8>(), cap, "out is NULL") }?;
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { counted(len, e.detokenize(ids, out)) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// `n` token ids at `p`.
///
/// # Safety
/// A non-NULL `p` is readable for `n` ids.
unsafe fn ids_in<'a>(p: *const u32, n: usize) -> Result<&'a [u32], Failure> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() || !p.is_aligned() {
        return Err(argument("ids is NULL or misaligned"));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(p, n) })
}

/// Runs `ids` through the model after the cached tokens (the cache is
/// kept across turns).
///
/// # Safety
/// As [`kestrel_tokenize`], with `ids` readable for `n`.
#[no_mangle]
pub unsafe extern "C" fn kestrel_feed(h: *mut Handle, ids: *const u32, n: usize) -> Status {
    let call = |e: &mut Eng, json: &mut Json, cancel: &AtomicBool| -> Result<Status, Failure> {
        // SAFETY: the pointers' contract (this function's Safety section).
        let ids = unsafe { ids_in(ids, n) }?;
        e.feed(ids, cancel)?;
        if !ids.is_empty() {
            json.answer_begins();
        }
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_parts(h, call) }
}

/// Samples the next token into `*id` and runs it through the model:
/// [`Status::Ok`] for a token of the answer, [`Status::End`] for an end
/// token (the answer is over).
///
/// # Safety
/// As [`kestrel_tokenize`]; `id` writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_next(h: *mut Handle, id: *mut u32) -> Status {
    let call = |e: &mut Eng, json: &mut Json, cancel: &AtomicBool| -> Result<Status, Failure> {
        out_param(id, false, "id is NULL or misaligned")?;
        let (status, token) = match json.with(|c| e.next(cancel, c))? {
            Next::Token(t) => (Status::Ok, t),
            Next::End(t) => (Status::End, t),
        };
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { put(id, token) };
        Ok(status)
    };
    // SAFETY: the caller's contract.
    unsafe { with_parts(h, call) }
}

/// The text `id` completes in the answer's stream into `out` (`*len`
/// bytes, not NUL-terminated; a character split across tokens comes whole
/// with its last token); with [`Status::Buffer`] nothing changed and
/// `*len` is the size needed.
///
/// # Safety
/// As [`kestrel_detokenize`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_piece(
    h: *mut Handle,
    id: u32,
    out: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        out_param(len, false, "len is NULL or misaligned")?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let out = unsafe { out_slice(out.cast::<u8>(), cap, "out is NULL") }?;
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { counted(len, e.piece(id, out).map(str::len)) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// Ends the answer's text stream: an unfinished character becomes U+FFFD
/// (at most 3 bytes into `out`).
///
/// # Safety
/// As [`kestrel_detokenize`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_piece_end(
    h: *mut Handle,
    out: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        out_param(len, false, "len is NULL or misaligned")?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let out = unsafe { out_slice(out.cast::<u8>(), cap, "out is NULL") }?;
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { counted(len, e.piece_end(out).map(str::len)) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// How [`kestrel_generate`] drafts from now on (speculative decoding: the
/// same tokens, fewer steps): up to `max_draft` tokens per verify step (0:
/// plain decoding; at most the config's `draft`, which sized the verify
/// rows), looked up first in `prediction[n]` (the ids of the text the
/// answer is expected to resemble, copied; `n` 0: none; at most the
/// context), then in the conversation. Otherwise [`Status::Argument`]
/// (an id past the vocabulary: [`Status::Token`]), nothing changed.
///
/// # Safety
/// As [`kestrel_tokenize`], with `prediction` readable for `n` ids.
#[no_mangle]
pub unsafe extern "C" fn kestrel_drafting_set(
    h: *mut Handle,
    max_draft: u32,
    prediction: *const u32,
    n: usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        // SAFETY: the pointers' contract (this function's Safety section).
        let ids = unsafe { ids_in(prediction, n) }?;
        e.set_drafting(max_draft as usize, ids)
            .map_err(|err| Failure {
                status: match err {
                    Error::BadToken { .. } => Status::Token,
                    _ => Status::Argument,
                },
                message: Reason::Core(err),
            })?;
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// The tokens the last [`kestrel_generate`] drafted into `*drafted` and
/// how many of them it kept into `*accepted` (0 before any).
///
/// # Safety
/// As [`kestrel_tokenize`], with `drafted` and `accepted` writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_draft_stats(
    h: *mut Handle,
    drafted: *mut u32,
    accepted: *mut u32,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        out_param(drafted, false, "drafted is NULL or misaligned")?;
        out_param(accepted, false, "accepted is NULL or misaligned")?;
        let (d, a) = e.drafts();
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe {
            put(drafted, d as u32);
            put(accepted, a as u32);
        }
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// Samples up to `max_tokens` tokens as `kestrel run` does (drafting by
/// prompt lookup when the config's `draft` is set: [`kestrel_drafting_set`]), streaming text to
/// `on_text` (may be NULL); `*generated` the answer's tokens. Ends at an
/// end token ([`Status::End`]), at `max_tokens` ([`Status::Ok`]), or
/// cancelled ([`Status::Cancelled`]).
///
/// # Safety
/// As [`kestrel_tokenize`]; `on_text` NULL or callable with `user`;
/// `generated` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_generate(
    h: *mut Handle,
    max_tokens: u32,
    on_text: Option<TextFn>,
    user: *mut c_void,
    generated: *mut u32,
) -> Status {
    let call = |e: &mut Eng, json: &mut Json, cancel: &AtomicBool| -> Result<Status, Failure> {
        let mut emit = |s: &str| {
            if let Some(f) = on_text {
                // SAFETY: the host's callback, with its pointer and the
                // text's bytes, valid during the call.
                unsafe { f(user, s.as_ptr().cast::<c_char>(), s.len()) };
            }
        };
        out_param(generated, true, "generated is misaligned")?;
        let g = json.with(|c| e.generate(max_tokens as usize, cancel, &mut emit, c))?;
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { put(generated, g.tokens as u32) };
        if g.cancelled {
            return Err(Error::Cancelled.into());
        }
        if g.full {
            return Err(fail(
                Status::Context,
                "the context filled up during the answer (its last token is not cached)",
            ));
        }
        Ok(if g.stopped { Status::End } else { Status::Ok })
    };
    // SAFETY: the caller's contract.
    unsafe { with_parts(h, call) }
}

/// Asks the call running on the handle (or its next one) to stop with
/// [`Status::Cancelled`]. Any thread, any time while the handle is open.
///
/// # Safety
/// `h` is NULL or a handle of [`kestrel_open`] whose block is still the
/// host's.
#[no_mangle]
pub unsafe extern "C" fn kestrel_cancel(h: *mut Handle) -> Status {
    // SAFETY: the caller's contract.
    match unsafe { live(h) } {
        Some(h) => {
            // SAFETY: a shared reference to the atomic flag only; every other
            // access to it is atomic too.
            unsafe { (*addr_of!((*h).cancel)).store(true, Ordering::Relaxed) };
            Status::Ok
        }
        None => Status::Argument,
    }
}

/// Takes back a cancel no call has seen yet (one made while no call ran
/// would stop the next call): returns [`Status::Ok`]. Any thread, as
/// [`kestrel_cancel`].
///
/// # Safety
/// As [`kestrel_cancel`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_cancel_clear(h: *mut Handle) -> Status {
    // SAFETY: the caller's contract.
    match unsafe { live(h) } {
        Some(h) => {
            // SAFETY: a shared reference to the atomic flag only.
            unsafe { (*addr_of!((*h).cancel)).store(false, Ordering::Relaxed) };
            Status::Ok
        }
        None => Status::Argument,
    }
}

/// 1 while a call runs on the handle (a `feed`, `next`, `generate`, ...:
/// asked from another thread, or from the call's own callback), 0 when
/// none does or the handle is not live. Any thread, as [`kestrel_cancel`].
///
/// # Safety
/// As [`kestrel_cancel`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_is_running(h: *const Handle) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { live(h as *mut Handle) } {
        // SAFETY: a shared reference to the atomic flag only.
        Some(h) => unsafe { (*addr_of!((*h).busy)).load(Ordering::Acquire) as c_int },
        None => 0,
    }
}

/// Forgets the conversation (the cache is empty; the settings stay).
///
/// # Safety
/// As [`kestrel_tokenize`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_reset(h: *mut Handle) -> Status {
    let call = |e: &mut Eng, cancel: &AtomicBool| -> Result<Status, Failure> {
        cancel.store(false, Ordering::Relaxed);
        e.reset();
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// The `kestrel_sampling` at `p` as this library reads it: non-NULL,
/// aligned, and of this library's size.
///
/// # Safety
/// A non-NULL `p` is readable for its `struct_size` field.
unsafe fn sampling_at(p: *const KestrelSampling) -> Result<(), Failure> {
    if p.is_null() || !p.is_aligned() {
        return Err(argument("sampling is NULL or misaligned"));
    }
    // SAFETY: checked; its first field is readable whatever version of the
    // struct the host compiled.
    let size = unsafe { ptr::read(addr_of!((*p).struct_size)) };
    if size as usize != size_of::<KestrelSampling>() {
        return Err(argument(
            "sampling: struct_size is not this library's sizeof(kestrel_sampling) (header and library differ?)",
        ));
    }
    Ok(())
}

/// The handle's sampling settings now into `*sampling` (whose
/// `struct_size` the host set; `reseed` comes back 0).
///
/// # Safety
/// As [`kestrel_tokenize`], with `sampling` writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_sampling_get(
    h: *mut Handle,
    sampling: *mut KestrelSampling,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        // SAFETY: the pointer's contract (this function's Safety section).
        unsafe { sampling_at(sampling) }?;
        let c = e.sampler();
        let out = KestrelSampling {
            struct_size: size_of::<KestrelSampling>() as u32,
            temperature: c.temperature,
            top_p: c.top_p,
            min_p: c.min_p,
            repeat_penalty: c.repeat_penalty,
            top_k: c.top_k as u32,
            repeat_last_n: c.repeat_last_n as u32,
            reseed: 0,
            seed: c.seed,
        };
        // SAFETY: checked non-NULL, aligned and of this size; writable by
        // the contract.
        unsafe { sampling.write(out) };
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// New sampling settings from the next sampled token on; the conversation
/// and its cache are kept. A setting out of range (NaN included) is
/// [`Status::Argument`] naming it, and nothing changes.
///
/// # Safety
/// As [`kestrel_tokenize`], with `sampling` readable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_sampling_set(
    h: *mut Handle,
    sampling: *const KestrelSampling,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        // SAFETY: the pointer's contract (this function's Safety section).
        unsafe { sampling_at(sampling) }?;
        // SAFETY: checked: a whole struct of this version.
        let s = unsafe { ptr::read(sampling) };
        let reseed = match s.reseed {
            0 => false,
            1 => true,
            _ => return Err(argument("sampling: reseed must be 0 or 1")),
        };
        let cfg = SamplerConfig {
            temperature: s.temperature,
            top_k: s.top_k as usize,
            top_p: s.top_p,
            min_p: s.min_p,
            repeat_penalty: s.repeat_penalty,
            repeat_last_n: s.repeat_last_n as usize,
            seed: s.seed,
        };
        e.set_sampler(cfg, reseed).map_err(argument)?;
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// `*size`: the bytes [`kestrel_state_save`] writes now (the history, the
/// KV rows, the sampler's state and, when a token waits to be sampled, the
/// last row's logits).
///
/// # Safety
/// As [`kestrel_tokenize`], with `size` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_state_size(h: *mut Handle, size: *mut usize) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        out_param(size, false, "size is NULL or misaligned")?;
        // SAFETY: the pointer's contract (this function's Safety section).
        unsafe { counted(size, e.state_size()) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// Saves the conversation into `out` (room for `cap` bytes): `*len` its
/// length, or the size needed with [`Status::Buffer`].
///
/// # Safety
/// As [`kestrel_tokenize`], with `out` writable for `cap` bytes and `len`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_state_save(
    h: *mut Handle,
    out: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        out_param(len, false, "len is NULL or misaligned")?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let out = unsafe { out_slice(out.cast::<u8>(), cap, "out is NULL") }?;
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { counted(len, e.save_state(out)) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// Replaces the conversation with a saved one (the bytes of
/// [`kestrel_state_save`] from an engine over the same model file with the
/// same `kv_f32`): [`Status::State`] for a damaged one or one of another
/// model or KV type, [`Status::Context`] for one longer than this context;
/// nothing changes then.
///
/// # Safety
/// As [`kestrel_tokenize`], with `state` readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn kestrel_state_load(
    h: *mut Handle,
    state: *const c_void,
    len: usize,
) -> Status {
    let call = |e: &mut Eng, json: &mut Json, _: &AtomicBool| -> Result<Status, Failure> {
        // SAFETY: the pointer's contract (this function's Safety section).
        let saved = unsafe { bytes(state, len, "state is NULL") }?;
        e.load_state(saved).map_err(|err| {
            let status = match err {
                Error::ContextFull { .. } => Status::Context,
                _ => Status::State,
            };
            Failure {
                status,
                message: Reason::Core(err),
            }
        })?;
        json.answer_begins();
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_parts(h, call) }
}

/// Keeps the first `tokens` tokens of the conversation ([`kestrel_history`]'s
/// count at an earlier turn's end) and forgets the rest; the next call is a
/// feed. More than the cached tokens is [`Status::Argument`].
///
/// # Safety
/// As [`kestrel_tokenize`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_rollback(h: *mut Handle, tokens: usize) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        e.rollback(tokens)?;
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// [`kestrel_context_policy`]: a feed that does not fit the context is
/// [`Status::Context`] (the default).
pub const KESTREL_CONTEXT_REFUSE: c_int = 0;
/// [`kestrel_context_policy`]: a feed that does not fit makes room by
/// keeping the first `keep` tokens and dropping the oldest turns.
pub const KESTREL_CONTEXT_DROP_OLDEST: c_int = 1;

/// The context policy of the feeds from now on: [`KESTREL_CONTEXT_REFUSE`],
/// or [`KESTREL_CONTEXT_DROP_OLDEST`] keeping the first `keep` tokens (a
/// system prompt, say): the oldest turns after them are dropped, whole
/// (a turn begins at `<|im_start|>`) until the feed and an answer of a
/// quarter of the context after `keep` fit (or at least the feed), and the
/// turns kept are run again at their new positions. A feed that still cannot fit is
/// [`Status::Context`], nothing changed. Another policy: [`Status::Argument`].
///
/// # Safety
/// As [`kestrel_tokenize`].
#[no_mangle]
pub unsafe extern "C" fn kestrel_context_policy(
    h: *mut Handle,
    policy: c_int,
    keep: usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        match policy {
            KESTREL_CONTEXT_REFUSE => e.set_context_keep(None),
            KESTREL_CONTEXT_DROP_OLDEST => e.set_context_keep(Some(keep)),
            _ => {
                return Err(argument(
                    "policy is neither KESTREL_CONTEXT_REFUSE nor _DROP_OLDEST",
                ))
            }
        }
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// Texts that end [`kestrel_generate`]'s answers from now on: `n` (at most
/// 4) NUL-terminated UTF-8 strings of 1 to 64 bytes each at `stops` (`n`
/// 0: none). The answer's text stops before the first one found within
/// the call, and the call returns [`Status::End`]; the tokens of the step
/// that found it stay cached (the next [`kestrel_chat_turn`] closes the
/// answer). [`kestrel_next`] does not look for them; while they are set, a
/// cancel is seen with the next piece of text. Too many, empty, too long or not UTF-8:
/// [`Status::Argument`], nothing changed.
///
/// # Safety
/// As [`kestrel_tokenize`], with `stops` NULL (`n` 0) or readable for `n`
/// pointers, each to a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn kestrel_stop_strings_set(
    h: *mut Handle,
    stops: *const *const c_char,
    n: usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        const LIMIT: &str = "stop strings: at most 4, each 1 to 64 bytes of UTF-8";
        if n > kestrel_core::embed::MAX_STOP_STRINGS || (n > 0 && stops.is_null()) {
            return Err(argument(LIMIT));
        }
        let mut texts = [""; kestrel_core::embed::MAX_STOP_STRINGS];
        for (i, text) in texts.iter_mut().enumerate().take(n) {
            // SAFETY: `stops` is readable for `n` pointers (the contract).
            let p = unsafe { *stops.add(i) };
            if p.is_null() {
                return Err(argument(LIMIT));
            }
            // SAFETY: a NUL-terminated string (the contract).
            let bytes = unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes();
            *text = core::str::from_utf8(bytes).map_err(|_| argument(LIMIT))?;
        }
        e.set_stop_strings(&texts[..n])
            .map_err(|_| argument(LIMIT))?;
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// The JSON schema every answer keeps to from the next sampled token on,
/// until set again: `len` bytes of a JSON Schema at `schema` (`len` 0:
/// none). Each answer (from the first token after a feed, or after a
/// restored state: the saved format does not keep where a constrained
/// value stands, so a state saved mid-answer starts a new value there) is
/// a JSON value the schema accepts: a token that cannot
/// continue one is never sampled, and an end token only once the value is
/// complete (an answer cut by `max_tokens` goes on with the next call).
/// The schema is compiled strictly, as the server's `strict: true`: a
/// keyword the compiler does not enforce is [`Status::Argument`] naming
/// it and its path (`kestrel schema check --strict` says the same);
/// nothing changed then. The first schema set sorts the vocabulary (once
/// per handle). Only in the hosted library (feature `constrain`); the
/// freestanding one refuses any schema with [`Status::Argument`].
///
/// # Safety
/// As [`kestrel_tokenize`], with `schema` readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn kestrel_json_schema_set(
    h: *mut Handle,
    schema: *const c_char,
    len: usize,
) -> Status {
    let call = |e: &mut Eng, json: &mut Json, _: &AtomicBool| -> Result<Status, Failure> {
        // SAFETY: the pointer's contract (this function's Safety section).
        let text = unsafe { bytes(schema.cast(), len, "schema is NULL") }?;
        json_schema_set(e, json, text)
    };
    // SAFETY: the caller's contract.
    unsafe { with_parts(h, call) }
}

/// [`kestrel_json_schema_set`] of the hosted library.
#[cfg(feature = "constrain")]
fn json_schema_set(e: &Eng, json: &mut Json, text: &[u8]) -> Result<Status, Failure> {
    use alloc::boxed::Box;
    use kestrel_core::constrain::{sorted, Schema};
    if text.is_empty() {
        json.output = None;
        return Ok(Status::Ok);
    }
    let value = kestrel_core::json::parse(text).map_err(|err| Failure {
        status: Status::Argument,
        message: Reason::Core(err),
    })?;
    let compiled = Schema::compile(&value).map_err(|err| Failure {
        status: Status::Argument,
        message: Reason::Owned(alloc::string::ToString::to_string(
            &err.at("schema", &value),
        )),
    })?;
    let vocab = e.vocab();
    if json.vocab.is_none() {
        json.vocab = Some(Box::new(sorted::SortedVocab::new(e.tokenizer(), vocab)));
    }
    json.output = Some(Box::new(sorted::JsonOutput::new(compiled, vocab)));
    json.restart = true;
    Ok(Status::Ok)
}

/// [`kestrel_json_schema_set`] of the freestanding library: no schema.
#[cfg(not(feature = "constrain"))]
fn json_schema_set(_: &Eng, _: &mut Json, text: &[u8]) -> Result<Status, Failure> {
    match text.is_empty() {
        true => Ok(Status::Ok),
        false => Err(argument(
            "JSON schemas need the hosted library (this one was built without them)",
        )),
    }
}

/// Values added to the logits of the tokens named, from the next sampled
/// token on, until set again: `n` (at most 300) pairs of `ids[i]` (below
/// the vocabulary) and `bias[i]` (-100 to 100; -100 bans a token), the
/// last of an id given twice counting (`n` 0: none). Applied before the
/// penalties and the sampling settings; [`kestrel_logits`] stays the
/// model's. Otherwise [`Status::Argument`] naming the fault, nothing
/// changed.
///
/// # Safety
/// As [`kestrel_tokenize`], with `ids` and `bias` NULL (`n` 0) or readable
/// for `n` values each.
#[no_mangle]
pub unsafe extern "C" fn kestrel_logit_bias_set(
    h: *mut Handle,
    ids: *const u32,
    bias: *const f32,
    n: usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        use kestrel_core::sampler::MAX_LOGIT_BIAS;
        if n > MAX_LOGIT_BIAS {
            return Err(argument("logit_bias: at most 300 entries"));
        }
        if n > 0 && (bias.is_null() || !bias.is_aligned()) {
            return Err(argument("logit_bias: bias is NULL or misaligned"));
        }
        // SAFETY: the pointers' contract (this function's Safety section);
        // `ids_in` checks NULL and alignment.
        let ids = unsafe { ids_in(ids, n) }?;
        let mut entries = [(0u32, 0f32); MAX_LOGIT_BIAS];
        for (i, (entry, &id)) in entries.iter_mut().zip(ids).enumerate() {
            // SAFETY: `bias` is non-NULL, aligned (checked above) and
            // readable for `n` floats (the contract), and `i < n`.
            *entry = (id, unsafe { *bias.add(i) });
        }
        e.set_logit_bias(&entries[..n]).map_err(argument)?;
        Ok(Status::Ok)
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// The last fed row's logits (after a feed, or the token [`kestrel_next`]
/// pulled last): what the next token is sampled from, before any sampling
/// setting applies; one float per vocabulary id into `out` (room for
/// `cap`), `*n` the count, or the count needed with [`Status::Buffer`].
/// Nothing fed since the last answer ended is [`Status::Order`].
///
/// # Safety
/// As [`kestrel_tokenize`], with `out` writable for `cap` floats and `n`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_logits(
    h: *mut Handle,
    out: *mut f32,
    cap: usize,
    n: *mut usize,
) -> Status {
    let call = |e: &mut Eng, _: &AtomicBool| -> Result<Status, Failure> {
        out_param(n, false, "n is NULL or misaligned")?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let out = unsafe { out_slice(out, cap, "out is NULL or misaligned") }?;
        let copied = e.logits().and_then(|l| match out.get_mut(..l.len()) {
            Some(dst) => {
                dst.copy_from_slice(l);
                Ok(l.len())
            }
            None => Err(Error::BufferTooSmall {
                what: "logits (floats)",
                need: l.len(),
                have: cap,
            }),
        });
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { counted(n, copied) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// The embedding of the tokens `ids` (at least 1, at most the context)
/// into `out` (room for `cap` floats; `*n` the model's hidden size, or the
/// size needed with [`Status::Buffer`]): the final norm's rows (what the
/// lm_head reads) pooled by `pooling` ([`KESTREL_POOLING_MEAN`]: the mean of
/// every token's; [`KESTREL_POOLING_LAST`]: the last token's, as
/// Qwen3-Embedding does with its texts ending in `<|endoftext|>`), scaled
/// to unit length. The text runs as a conversation of its own: the
/// handle's conversation is forgotten (as [`kestrel_reset`]); use a second
/// handle over the same model to keep one. Cancellable within a layer.
///
/// # Safety
/// As [`kestrel_tokenize`], with `ids` readable for `len` ids, `out`
/// writable for `cap` floats and `n` writable.
#[no_mangle]
pub unsafe extern "C" fn kestrel_embed(
    h: *mut Handle,
    ids: *const u32,
    len: usize,
    pooling: c_int,
    out: *mut f32,
    cap: usize,
    n: *mut usize,
) -> Status {
    let call = |e: &mut Eng, cancel: &AtomicBool| -> Result<Status, Failure> {
        out_param(n, false, "n is NULL or misaligned")?;
        let pooling = match pooling {
            KESTREL_POOLING_MEAN => Pooling::Mean,
            KESTREL_POOLING_LAST => Pooling::Last,
            _ => {
                return Err(argument(
                    "pooling is neither KESTREL_POOLING_MEAN nor _LAST",
                ))
            }
        };
        // SAFETY: the pointers' contract (this function's Safety section).
        let ids = unsafe { ids_in(ids, len) }?;
        // SAFETY: the pointers' contract (this function's Safety section).
        let out = unsafe { out_slice(out, cap, "out is NULL or misaligned") }?;
        let r = e.embed(ids, pooling, out, cancel);
        // SAFETY: the pointers' contract (this function's Safety section).
        unsafe { counted(n, r) }
    };
    // SAFETY: the caller's contract.
    unsafe { with_engine(h, call) }
}

/// [`kestrel_embed`]'s pooling: the mean of every token's row.
pub const KESTREL_POOLING_MEAN: c_int = 0;
/// [`kestrel_embed`]'s pooling: the last token's row.
pub const KESTREL_POOLING_LAST: c_int = 1;

/// What the hosted library adds (feature `hosted`): the CPU's features as
/// detected, and the built-in pool; in other builds, none of either.
mod hosted {
    use super::HostPool;
    use core::ffi::c_void;

    /// The `KESTREL_CPU_*` bits of this CPU (hosted: the kernels crate's
    /// own detection, the command line's), else 0.
    pub(super) fn detected_features() -> u32 {
        #[cfg(all(feature = "hosted", target_arch = "x86_64"))]
        {
            use kestrel_kernels::x86_64::{Avx2, Vnni};
            match Avx2::detect().map(|cpu| cpu.vnni()) {
                None => 0,
                Some(Vnni::No) => super::cpu::AVX2,
                Some(Vnni::Avx) => super::cpu::AVX2 | super::cpu::AVX_VNNI,
                Some(Vnni::Avx512) => super::cpu::AVX2 | super::cpu::AVX512_VNNI,
            }
        }
        #[cfg(all(feature = "hosted", target_arch = "aarch64"))]
        {
            match kestrel_kernels::aarch64::Dotprod::detect() {
                Some(_) => super::cpu::DOTPROD,
                None => 0,
            }
        }
        #[cfg(not(all(
            feature = "hosted",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )))]
        {
            0
        }
    }

    /// A new built-in pool (the command line's, unpinned: the host's
    /// threads keep their affinity) of one thread per big core, as the
    /// handle's [`HostPool`], and the pointer to drop at close.
    #[cfg(feature = "hosted")]
    pub(super) fn builtin_pool() -> (HostPool, *mut c_void) {
        use std::boxed::Box;
        let threads = kestrel_pool::default_threads();
        let pool = Box::into_raw(Box::new(kestrel_pool::Pool::new(threads))) as *mut c_void;
        let host = HostPool {
            parallel: Some(run_on_pool),
            ctx: pool,
            threads,
        };
        (host, pool)
    }

    /// Never called: `settings` refuses `threads` 0 without the hosted
    /// library.
    #[cfg(not(feature = "hosted"))]
    pub(super) fn builtin_pool() -> (HostPool, *mut c_void) {
        let host = HostPool {
            parallel: None,
            ctx: core::ptr::null_mut(),
            threads: 1,
        };
        (host, core::ptr::null_mut())
    }

    /// The parallel-for over the built-in pool at `pool`.
    ///
    /// # Safety
    /// `pool` is a live pool of [`builtin_pool`], used by one thread at a
    /// time (its handle's owner); `task_fn(task, i)` may run on any thread
    /// for each `i < n` (the library's own tasks).
    #[cfg(feature = "hosted")]
    unsafe extern "C" fn run_on_pool(
        pool: *mut c_void,
        n: usize,
        task_fn: super::TaskFn,
        task: *mut c_void,
    ) {
        use kestrel_core::parallel::Parallel;
        // SAFETY: the contract: a live pool.
        let pool = unsafe { &*(pool as *const kestrel_pool::Pool) };
        let mut items = std::vec![(); n];
        let task = task as usize;
        pool.for_each_mut(&mut items, &|i, _| {
            // SAFETY: the task's contract; the pool runs each index once.
            unsafe { task_fn(task as *mut c_void, i) }
        });
    }

    /// Drops the built-in pool at `pool` (NULL: nothing), joining its
    /// threads.
    ///
    /// # Safety
    /// `pool` is NULL or a pool of [`builtin_pool`] no call uses, dropped
    /// once.
    pub(super) unsafe fn drop_pool(pool: *mut c_void) {
        #[cfg(feature = "hosted")]
        if !pool.is_null() {
            // SAFETY: the contract: made by `Box::into_raw` in
            // `builtin_pool`, dropped once.
            drop(unsafe { std::boxed::Box::from_raw(pool as *mut kestrel_pool::Pool) });
        }
        #[cfg(not(feature = "hosted"))]
        let _ = pool;
    }
}

/// The abort callback of the panic handler (NULL: none).
static ABORT: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());

/// Sets where a panic is reported before the library traps (process-wide:
/// the library's one global; NULL: trap without a report).
#[no_mangle]
pub extern "C" fn kestrel_set_abort_handler(f: Option<AbortFn>) {
    let p = f.map_or(ptr::null_mut(), |f| f as *mut c_void);
    ABORT.store(p, Ordering::Release);
    // The hosted library panics through std: its hook reports to the same
    // callback (then the panic aborts at the extern "C" boundary).
    #[cfg(feature = "hosted")]
    std::panic::set_hook(std::boxed::Box::new(|info| {
        let mut buf = [0u8; MESSAGE_BYTES];
        write_message(&mut buf, &info.payload_as_str().unwrap_or("panic"));
        report_abort(&buf);
    }));
}

/// Hands a NUL-terminated panic message to the host's abort callback, if
/// one is set.
#[cfg(any(feature = "hosted", feature = "panic-handler"))]
fn report_abort(message: &[u8; MESSAGE_BYTES]) {
    let f = ABORT.load(Ordering::Acquire);
    if !f.is_null() {
        // SAFETY: only `kestrel_set_abort_handler` stores here, and it
        // stores an `AbortFn`.
        let f: AbortFn = unsafe { core::mem::transmute::<*mut c_void, AbortFn>(f) };
        // SAFETY: the host's callback with a NUL-terminated message.
        unsafe { f(message.as_ptr().cast::<c_char>()) };
    }
}

/// A panic (a bug): the message to the host's abort callback, then a trap.
#[cfg(feature = "panic-handler")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let mut buf = [0u8; MESSAGE_BYTES];
    write_message(&mut buf, &info.message());
    report_abort(&buf);
    trap()
}

#[cfg(feature = "panic-handler")]
fn trap() -> ! {
    // SAFETY: an undefined instruction: the CPU raises an exception and the
    // program stops here; nothing after it runs.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!("udf #0", options(noreturn, nomem, nostack))
    }
    // SAFETY: as above (`ud2`).
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!("ud2", options(noreturn, nomem, nostack))
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
    loop {
        core::hint::spin_loop();
    }
}
