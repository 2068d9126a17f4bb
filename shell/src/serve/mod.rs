//! `kestrel serve`: an OpenAI-compatible HTTP server on std's networking.
//!
//! Threads (all scoped; nothing outlives [`serve`]):
//! * the caller accepts connections and starts one thread for each, up to
//!   `MAX_CONNECTIONS` open at once (beyond, the connection gets 503 at
//!   once), so idle or slow clients never delay another client's request;
//! * a connection thread reads requests (head and body before deadlines,
//!   size limits) and answers them in order: HTTP/1.1 connections persist
//!   (at most `MAX_REQUESTS_PER_CONNECTION` requests, `IDLE` between them,
//!   and none kept once `KEEP_ALIVE_BELOW` connections are open; beyond
//!   that each new connection closes the oldest idle one, so idle ones give
//!   way first); an error answer, an event stream, `Connection:
//!   close` or HTTP/1.0 ends the connection;
//!   generation requests become [`scheduler::Job`]s in a bounded queue
//!   (`--queue`; 429 when full) and their tokens come back on a channel;
//! * one engine thread ([`scheduler::Scheduler`]) owns the state, the pool and
//!   the kernels and steps up to `--parallel` sequences together.
//!
//! A client that disconnects (a failed write, or a zero-byte peek while its
//! answer is computed) cancels its job; the engine frees the slot before its
//! next step.

pub mod api;
pub mod channel;
pub mod http;
pub mod metrics;
pub mod scheduler;

use crate::cli::{get, in_range, model_arg, opt, switch, value, CommandArgs};
use crate::engine::{self, EngineArgs, Need};
use crate::error::{Context, Result};
use crate::generate;
use api::{error_body, push_json_str, Params, Prompt, ToolChoice};
use channel::{RecvError, SendError, Sender};
use clap::builder::{NonEmptyStringValueParser, ValueParser};
use clap::{value_parser, ArgMatches, Command};
use http::{Conn, HttpError};
use kestrel_core::chat::Role;
use kestrel_core::generate::DraftModel;
use kestrel_core::generate::{StopSet, PREFILL_CHUNK};
use kestrel_core::json;
use kestrel_core::model::weights::Weights;
use kestrel_core::state::{ArenaSizes, State, MAX_BATCH, MAX_SLOTS};
use kestrel_core::tokenizer::{StreamDecoder, Tokenizer};
use metrics::Metrics;
use scheduler::{CallConstraint, Event, Finish, Job};
use std::fmt::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Most connections open at once, each with its own thread (mostly asleep
/// in a read: a few KiB of touched stack). Beyond it a new connection gets
/// 503 at once.
const MAX_CONNECTIONS: usize = 512;
/// How long a blocked write may take before the client counts as gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a persistent connection waits for its next request.
const IDLE: Duration = Duration::from_secs(5);
/// Most requests one connection carries (then it is closed; the client opens another).
const MAX_REQUESTS_PER_CONNECTION: usize = 1000;
/// With this many connections open, answers close their connection: as
/// the cap (`MAX_CONNECTIONS`) nears, connections are not kept idle.
const KEEP_ALIVE_BELOW: usize = MAX_CONNECTIONS * 3 / 4;
/// How often a handler waiting for tokens checks that its client is still there.
const PEER_CHECK: Duration = Duration::from_millis(100);

/// `kestrel serve` settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeArgs {
    pub model: PathBuf,
    pub host: String,
    pub port: u16,
    /// Sequences decoded together (KV slots).
    pub parallel: usize,
    /// Requests that may wait for a slot (429 beyond).
    pub queue: usize,
    pub api_key: Option<String>,
    /// Deadline for reading a request's head, and again for its body.
    pub timeout: Duration,
    /// Largest request body.
    pub max_body: usize,
    /// Every request drafts by prompt lookup (speculative decoding).
    pub lookup: bool,
    /// Every request drafts with this model (its own arena, a slot per
    /// request slot).
    pub draft: Option<PathBuf>,
    /// Most tokens drafted per slot and step (lookup, `prediction`).
    pub draft_max: usize,
    /// Each slot's cache is kept in this directory (`slot-N.kstate`), saved
    /// whenever the slot goes idle and restored at start.
    pub slot_dir: Option<PathBuf>,
    /// Threads, pinning, context length per slot, KV type, prefill copy.
    pub engine: EngineArgs,
}

/// The address `--host` names: an IPv4 or IPv6 address (brackets
/// allowed), or `localhost` for 127.0.0.1. No name is looked up: the static
/// binary carries no DNS resolver (docs/size.md).
fn listen_ip(host: &str) -> std::result::Result<std::net::IpAddr, String> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse()
        .map_err(|_| "an IP address (127.0.0.1, 0.0.0.0, ::1) or localhost".to_string())
}

/// Most requests `--queue` may hold.
const MAX_QUEUE: usize = 4096;

impl CommandArgs for ServeArgs {
    fn command() -> Command {
        Command::new("serve")
            .about(
                "An OpenAI-compatible HTTP server (chat/completions, completions, models, health).",
            )
            .args([
                model_arg(),
                value(
                    "host",
                    "ADDR",
                    "IP address to listen on (loopback by default; 0.0.0.0 or :: for every interface; `localhost` is 127.0.0.1).",
                )
                .value_parser(ValueParser::new(|s: &str| {
                    listen_ip(s).map(|_| s.to_string())
                }))
                .default_value("127.0.0.1"),
                value("port", "N", "TCP port.")
                    .value_parser(in_range(0, u16::MAX as usize))
                    .default_value("8080"),
                value("parallel", "K", "Sequences decoded together (KV slots).")
                    .value_parser(in_range(1, MAX_SLOTS))
                    .default_value("1"),
                value(
                    "queue",
                    "N",
                    "Requests that may wait for a slot (429 beyond).",
                )
                .value_parser(in_range(0, MAX_QUEUE))
                .default_value("16"),
                value(
                    "api-key",
                    "KEY",
                    "Require 'Authorization: Bearer KEY' (also $KESTREL_API_KEY).",
                )
                .value_parser(NonEmptyStringValueParser::new()),
                value(
                    "timeout",
                    "SECS",
                    "Deadline for reading a request's head, and again for its body.",
                )
                .value_parser(ValueParser::new(|s: &str| {
                    match kestrel_core::decimal::parse_f64(s.trim()) {
                        Some(t) if (0.001..=3600.0).contains(&t) => Ok(Duration::from_secs_f64(t)),
                        Some(_) => Err("must be between 0.001 and 3600 seconds".to_string()),
                        None => Err("not a decimal number".to_string()),
                    }
                }))
                .default_value("10"),
                value("max-body", "BYTES", "Largest request body (413 beyond).")
                    .value_parser(value_parser!(usize))
                    .default_value("8388608"),
                switch(
                    "lookup",
                    "Speculative decoding by prompt lookup for every request.",
                ),
                value(
                    "draft",
                    "FILE",
                    "Speculative decoding with a draft model (same vocabulary) for every request.",
                )
                .value_parser(value_parser!(PathBuf))
                .conflicts_with("lookup"),
                value(
                    "draft-max",
                    "N",
                    "Most tokens drafted per slot and verify step (lookup, a draft model, `prediction`).",
                )
                .value_parser(in_range(1, kestrel_core::speculate::MAX_DRAFT))
                .default_value("8"),
                value(
                    "slot-dir",
                    "DIR",
                    "Keep each slot's cached conversation in DIR: saved when the slot goes idle, restored at start.",
                )
                .value_parser(value_parser!(PathBuf)),
            ])
            .args(EngineArgs::args())
    }

    fn from_matches(m: &ArgMatches) -> Self {
        ServeArgs {
            model: get(m, "model"),
            host: get(m, "host"),
            // A u16 by its parser (which spares the binary a u16 parser).
            port: get::<usize>(m, "port") as u16,
            parallel: get(m, "parallel"),
            queue: get(m, "queue"),
            api_key: opt(m, "api-key").or_else(|| {
                std::env::var("KESTREL_API_KEY")
                    .ok()
                    .filter(|k| !k.is_empty())
            }),
            timeout: get(m, "timeout"),
            max_body: get(m, "max-body"),
            lookup: m.get_flag("lookup"),
            draft: opt(m, "draft"),
            draft_max: get(m, "draft-max"),
            slot_dir: opt(m, "slot-dir"),
            engine: EngineArgs::from_matches(m),
        }
    }
}

/// What every handler reads.
struct Shared<'a> {
    w: &'a Weights<'a>,
    tok: Tokenizer<'a>,
    model_name: String,
    api_key: Option<String>,
    ctx: usize,
    queue: usize,
    timeout: Duration,
    max_body: usize,
    next_id: AtomicU64,
    metrics: &'a Metrics,
    idle: IdleConnections,
}

/// The persistent connections waiting for their next request, oldest
/// first: as the connection cap nears, new connections close these.
#[derive(Default)]
struct IdleConnections {
    next: AtomicU64,
    list: std::sync::Mutex<Vec<(u64, TcpStream)>>,
}

impl IdleConnections {
    /// Lists `stream` (a handle to it) as waiting; the ticket to leave with.
    fn enter(&self, stream: &TcpStream) -> Option<u64> {
        let handle = stream.try_clone().ok()?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.list.lock().ok()?.push((id, handle));
        Some(id)
    }

    /// Takes the connection with ticket `id` off the list.
    fn leave(&self, id: u64) {
        if let Ok(mut list) = self.list.lock() {
            list.retain(|(i, _)| *i != id);
        }
    }

    /// Closes the oldest connection that is still waiting with nothing
    /// sent (its thread then ends quietly, as after its idle time); whether
    /// there was one.
    fn close_oldest(&self) -> bool {
        let Ok(mut list) = self.list.lock() else {
            return false;
        };
        while !list.is_empty() {
            let (_, stream) = list.remove(0);
            if !has_bytes_waiting(&stream) {
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return true;
            }
        }
        false
    }
}

/// Whether the peer has sent bytes not read yet (a request on its way: the
/// connection is not idle), without blocking or changing the socket.
fn has_bytes_waiting(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = 0u8;
    // SAFETY: `recv` writes at most 1 byte into `byte`, which outlives the
    // call; MSG_PEEK leaves the byte in the socket and MSG_DONTWAIT makes
    // this one call non-blocking without touching the descriptor's flags
    // (which the connection's thread shares).
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n > 0
}

/// Most pixels an image of a request is resized to (at most the model's
/// max_pixels): bounds the vision tower's memory per request (4 Mpixel is
/// 4096 patches of 16 x 16, 1024 tokens).
const SERVE_MAX_IMAGE_PIXELS: u32 = 1 << 22;

/// Whether the model has a vision tower to take the request's images.
fn model_accepts_images(w: &Weights) -> bool {
    w.cfg.vision.is_some()
}

/// `kestrel serve` from the command line.
pub fn run(args: &ServeArgs) -> Result<()> {
    serve(
        args,
        &mut |addr| {
            eprintln!("[kestrel] listening on http://{addr}");
        },
        &AtomicBool::new(false),
    )
}

/// Loads the model, binds, calls `ready` with the bound address, and serves
/// until `stop` is set (checked after each accepted connection: connect once
/// to wake the listener).
pub fn serve(
    args: &ServeArgs,
    ready: &mut dyn FnMut(std::net::SocketAddr),
    stop: &AtomicBool,
) -> Result<()> {
    ignore_sigpipe();
    // Each slot's decode row and its drafted rows, every slot's in one step
    // of at most MAX_BATCH rows: --draft-max shrinks to fit --parallel
    // (the scheduler also shares out a step's rows).
    let draft_max = args
        .draft_max
        .min((MAX_BATCH / args.parallel).saturating_sub(1));
    let slot_rows = args.parallel * (1 + draft_max);
    let need = Need {
        // A whole prompt chunk and the other slots' rows riding along.
        max_batch: (PREFILL_CHUNK + slot_rows - 1).min(MAX_BATCH),
        slots: args.parallel,
        draft: draft_max,
        min_ctx: 2,
        ..Need::one(PREFILL_CHUNK)
    };
    engine::open(
        &args.model,
        &args.engine,
        need,
        args.draft.as_deref(),
        |e| {
            let (w, opts) = (e.weights, e.opts);
            let tables = *w.vqf.tokenizer().ok_or("this VQF file has no tokenizer")?;
            let tok = Tokenizer::new(tables);
            let ctx = opts.max_seq;
            let layout = ArenaSizes::new(&w.cfg, &opts)?;
            let ip = listen_ip(&args.host).map_err(|e| format!("--host {}: {e}", args.host))?;
            let listener = TcpListener::bind(std::net::SocketAddr::new(ip, args.port))
                .map_err(|e| format!("cannot listen on {}:{}: {e}", args.host, args.port))?;
            let addr = listener.local_addr()?;
            eprintln!(
        "[kestrel] serve {}: {} slots x {} tokens: KV cache {:.1} MiB ({:.1} MiB per slot), arena {:.1} MiB; queue {}, model {:.1} MiB; drafts up to {} per slot and step",
        args.model.display(),
        args.parallel,
        ctx,
        layout.kv_bytes() as f64 / 1048576.0,
        layout.kv_bytes() as f64 / 1048576.0 / args.parallel as f64,
        layout.total as f64 / 1048576.0,
        args.queue,
        w.vqf.bytes().len() as f64 / 1048576.0,
        opts.draft,
    );
            let metrics = Metrics::new(args.parallel, ctx);
            let shared = Shared {
                w,
                tok,
                model_name: args
                    .model
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "kestrel".into()),
                api_key: args.api_key.clone(),
                ctx,
                queue: args.queue,
                timeout: args.timeout,
                max_body: args.max_body,
                next_id: AtomicU64::new(1),
                metrics: &metrics,
                idle: IdleConnections::default(),
            };
            // At least one waiting job (a zero-capacity queue takes none).
            let (job_tx, job_rx) = channel::channel::<Job>(args.queue.max(1));
            let open_connections = AtomicUsize::new(0);
            let stops = StopSet::new(&w.cfg, Some(&tok));
            let (threads, no_pin) = (args.engine.threads, args.engine.no_pin);
            let lookup = args.lookup;
            let slot_dir = args.slot_dir.clone();
            if let Some(d) = &slot_dir {
                std::fs::create_dir_all(d).with_context(|| d.display())?;
            }
            let setup: Result<()> = std::thread::scope(|sc| {
                let state_w = w;
                let arena = e.arena;
                let draft = e.draft;
                let metrics = &metrics;
                let (init_tx, init_rx) = channel::channel::<Result<()>>(1);
                sc.spawn(move || {
                    let pool = engine::make_pool(threads, no_pin);
                    let kernels = crate::cpu::detect_kernels();
                    let state = match State::new(&state_w.cfg, opts, arena) {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = init_tx.send(Err(e.into()));
                            return;
                        }
                    };
                    // The draft model (--draft): a slot per request slot, the
                    // engine's threads.
                    let draft = match draft.map(|d| {
                        let state = State::new(&d.weights.cfg, d.opts, d.arena)?;
                        let cached = vec![0; d.opts.max_seq * d.opts.slots];
                        DraftModel::new(d.weights, kernels, &pool, state, stops, cached)
                    }) {
                        None => None,
                        Some(Ok(m)) => Some(m),
                        Some(Err(e)) => {
                            let _ = init_tx.send(Err(e.into()));
                            return;
                        }
                    };
                    let _ = init_tx.send(Ok(()));
                    scheduler::Scheduler {
                        w: state_w,
                        state,
                        kernels,
                        pool: &pool,
                        stops,
                        metrics,
                        vocab: None,
                        lookup,
                        draft,
                        slot_dir,
                    }
                    .run(job_rx);
                });
                if let Ok(Err(e)) = init_rx.recv(None) {
                    return Err(e);
                }
                ready(addr);
                for conn in listener.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    // Near the cap, an idle connection gives way to each new
                    // one; at the cap, the new one takes the place of the
                    // idle one it closes (whose thread ends at once: its
                    // socket is shut), one over the cap for that moment.
                    if open_connections.load(Ordering::Relaxed) >= KEEP_ALIVE_BELOW {
                        shared.idle.close_oldest();
                    }
                    let slot = ConnectionSlot::take(&open_connections).or_else(|| {
                        shared
                            .idle
                            .close_oldest()
                            .then(|| ConnectionSlot::take_over(&open_connections))
                    });
                    let Some(slot) = slot else {
                        let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
                        respond_error(
                            &mut Conn::new(conn),
                            &HttpError::new(503, "server busy: too many connections"),
                        );
                        continue;
                    };
                    metrics.connections.fetch_add(1, Ordering::Relaxed);
                    let (jobs, shared, open) = (job_tx.clone(), &shared, &open_connections);
                    // The connection and its slot move into the thread; if the thread
                    // cannot start, both are dropped: the slot is given back and the
                    // client sees the connection closed.
                    let _ = std::thread::Builder::new()
                        .name("kestrel-conn".into())
                        .spawn_scoped(sc, move || {
                            let _slot = slot;
                            handle(conn, shared, &jobs, open);
                        });
                }
                drop(job_tx);
                Ok(())
            });
            setup
        },
    )
}

/// One of the `MAX_CONNECTIONS` places for an open connection, given back
/// when dropped (when its thread ends, or when the thread cannot start).
struct ConnectionSlot<'a>(&'a AtomicUsize);

impl<'a> ConnectionSlot<'a> {
    /// A place, or `None` when all are taken.
    fn take(open: &'a AtomicUsize) -> Option<Self> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_CONNECTIONS).then_some(n + 1)
        })
        .ok()
        .map(|_| ConnectionSlot(open))
    }

    /// A place beyond the cap: the new connection that closed an idle one
    /// (whose thread is ending) takes its place at once.
    fn take_over(open: &'a AtomicUsize) -> Self {
        open.fetch_add(1, Ordering::AcqRel);
        ConnectionSlot(open)
    }
}

impl Drop for ConnectionSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Writes `SIGPIPE` off: a client closing its socket must give a write
/// error, not end the server (the shell restores the default for the CLI).
fn ignore_sigpipe() {
    // SAFETY: SIG_IGN installs no handler code; it only tells the kernel to
    // discard SIGPIPE, after which writes to a closed socket return EPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

fn json_response(conn: &mut Conn, status: u16, body: &str) {
    let _ = http::write_response(conn, status, "application/json", body.as_bytes());
}

/// Answers an error and closes gracefully: our side is shut for writing,
/// then unread request bytes are drained briefly (bounded) so the client
/// sees the answer instead of a reset.
fn respond_error(conn: &mut Conn, e: &HttpError) {
    conn.keep_alive = false;
    json_response(conn, e.status, &error_body(e.status, &e.message));
    http::linger_close(conn);
}

/// Answers the connection's requests in order and counts each in the
/// metrics (an error before its answer is written, so a client that has
/// read it finds it counted). The first request has `timeout` to arrive,
/// the next ones `IDLE` (then the connection ends quietly).
fn handle(stream: TcpStream, sh: &Shared, jobs: &Sender<Job>, open: &AtomicUsize) {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let mut conn = Conn::new(stream);
    for n in 0..MAX_REQUESTS_PER_CONNECTION {
        let idle = (n > 0).then_some(IDLE);
        // Waiting for a next request: listed, so it can give way.
        let ticket = match n > 0 && !conn.has_pending() {
            true => sh.idle.enter(&conn.stream),
            false => None,
        };
        let read = http::read_head(&mut conn, sh.timeout, idle);
        if let Some(t) = ticket {
            sh.idle.leave(t);
        }
        let read = match read {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                sh.metrics.request("other", e.status);
                return respond_error(&mut conn, &e);
            }
        };
        // Admitted from the head alone: a request without the key (or to no
        // route) is answered before its body is read.
        if let Err(e) = admit(sh, &read.head) {
            sh.metrics.request(&read.head.path, e.status);
            return respond_error(&mut conn, &e);
        }
        let (head, body) = match http::read_body(&mut conn, read, sh.timeout, sh.max_body) {
            Ok(r) => r,
            Err(e) => {
                sh.metrics.request("other", e.status);
                return respond_error(&mut conn, &e);
            }
        };
        conn.keep_alive = !head.close
            && n + 1 < MAX_REQUESTS_PER_CONNECTION
            && open.load(Ordering::Relaxed) < KEEP_ALIVE_BELOW;
        let path = head.path.clone();
        conn.count = Some(Box::new(move |status| sh.metrics.request(&path, status)));
        match answer(&mut conn, sh, jobs, &head, &body) {
            // Counted when its answer was written, or (an event stream) now.
            Ok(status) => conn.counted(status),
            // The client is gone: nothing to answer (counted as nginx does).
            Err(e) if e.status == 499 => return conn.counted(499),
            Err(e) => {
                conn.counted(e.status);
                return respond_error(&mut conn, &e);
            }
        }
        // An event stream, or an answer that said `Connection: close`.
        if !conn.keep_alive {
            return;
        }
    }
}

/// Whether a request may go on, from its head alone (before its body is
/// read): a known route; with `--api-key`, the key (but for `/health` and
/// `/metrics`); without one, a POST that says it is JSON.
fn admit(sh: &Shared, head: &http::Head) -> Result<(), HttpError> {
    let route = (head.method.as_str(), head.path.as_str());
    if !metrics::ENDPOINTS[..metrics::ENDPOINTS.len() - 1].contains(&route.1) {
        return Err(HttpError::new(404, format!("no route {}", route.1)));
    }
    if matches!(route, ("GET", "/health") | ("GET", "/metrics")) {
        return Ok(());
    }
    // Without a key, a page in a browser could POST `text/plain` (a
    // "simple" request, no preflight) to a local server: a request that
    // runs the model must say it is JSON, which a cross-origin page cannot
    // without the server's consent.
    if head.method == "POST"
        && sh.api_key.is_none()
        && head.content_type.as_deref() != Some("application/json")
    {
        return Err(HttpError::new(415, "Content-Type must be application/json"));
    }
    if let Some(key) = &sh.api_key {
        // `Bearer KEY`; auth schemes are case-insensitive (RFC 9110).
        let given = head
            .authorization
            .as_deref()
            .and_then(|a| a.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map_or("", |(_, key)| key);
        if !http::constant_time_eq(given.trim().as_bytes(), key.as_bytes()) {
            return Err(HttpError::new(401, "invalid or missing API key"));
        }
    }
    Ok(())
}

/// Writes the answer to a request; the status written, or the error to
/// answer.
fn answer(
    conn: &mut Conn,
    sh: &Shared,
    jobs: &Sender<Job>,
    head: &http::Head,
    body: &[u8],
) -> Result<u16, HttpError> {
    let route = (head.method.as_str(), head.path.as_str());
    match route {
        ("GET", "/health") => return Ok(health(conn, sh)),
        ("GET", "/metrics") => {
            let text = sh.metrics.render();
            let _ = http::write_response(conn, 200, "text/plain; version=0.0.4", text.as_bytes());
            return Ok(200);
        }
        _ => {}
    }
    match route {
        ("GET", "/v1/models") => {
            let mut s = String::from("{\"object\":\"list\",\"data\":[{\"id\":");
            push_json_str(&mut s, &sh.model_name);
            let _ = write!(
                s,
                ",\"object\":\"model\",\"created\":{},\"owned_by\":\"kestrel\"}}]}}",
                now()
            );
            json_response(conn, 200, &s);
        }
        ("POST", "/v1/chat/completions") => chat(conn, sh, jobs, body)?,
        ("POST", "/v1/completions") => completion(conn, sh, jobs, body)?,
        ("POST", "/v1/embeddings") => embeddings(conn, sh, jobs, body)?,
        _ => {
            return Err(HttpError::new(
                405,
                format!("{} does not take {}", route.1, route.0),
            ))
        }
    }
    Ok(200)
}

/// `GET /health`: 200 while a new request would be taken (the port opens
/// only once the model is loaded), 503 when the queue is full (a request
/// would get 429); with the slots' state either way.
fn health(conn: &mut Conn, sh: &Shared) -> u16 {
    let m = sh.metrics;
    let busy = m.slots_busy.load(Ordering::Relaxed).min(m.slots);
    let queued = m.queued.load(Ordering::Relaxed);
    let full = busy == m.slots && queued >= sh.queue.max(1);
    let status = if full { 503 } else { 200 };
    let body = format!(
        "{{\"status\":\"{}\",\"slots_idle\":{},\"slots_processing\":{busy},\"queued\":{queued}}}",
        if full { "busy" } else { "ok" },
        m.slots - busy,
    );
    json_response(conn, status, &body);
    status
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn chat(conn: &mut Conn, sh: &Shared, jobs: &Sender<Job>, body: &[u8]) -> Result<(), HttpError> {
    let req = api::parse_chat(body).map_err(|m| HttpError::new(400, m))?;
    if !req.images.is_empty() && !model_accepts_images(sh.w) {
        return Err(HttpError::new(400, "model does not accept images"));
    }
    let style = generate::chat_style(sh.w);
    let uses_tools = !req.tools.is_empty()
        || req
            .messages
            .iter()
            .any(|m| m.role == Role::Tool || !m.tool_calls.is_empty());
    if uses_tools && !style.tools {
        return Err(HttpError::new(
            400,
            "this model's chat template has no tool calls ('tools', tool messages)",
        ));
    }
    let mut text = req.prompt(&style).map_err(|e| HttpError::new(400, e))?;
    // `required` and a named function: the answer is a call. Its start is
    // written into the prompt and its JSON constrained to the call's schema.
    let call_schema = req.call_schema();
    let mut params_json = None;
    let forced = match call_schema {
        Some(_) => String::from("\n"),
        None => String::new(),
    };
    if !forced.is_empty() {
        text.text.push_str("<tool_call>");
        text.text.push_str(&forced);
    }
    let offered = !req.tools.is_empty() && req.tool_choice != ToolChoice::None;
    let tool_calls = match (
        sh.tok.token_id("<tool_call>"),
        sh.tok.token_id("</tool_call>"),
    ) {
        (Some(open), Some(close)) if offered => Some(ToolCalls {
            open,
            close,
            parallel: req.parallel_tool_calls,
            names: req.tools.iter().map(|(_, n)| n.clone()).collect(),
            from_prompt: forced.len(),
            capture: (!forced.is_empty()).then_some(forced),
            calls: Vec::new(),
        }),
        _ => None,
    };
    let mut ids = text.encode(&sh.tok).map_err(|e| HttpError::new(400, e))?;
    let mut images = Vec::with_capacity(req.images.len());
    if let Some(v) = sh.w.cfg.vision.filter(|_| !req.images.is_empty()) {
        for (i, bytes) in req.images.iter().enumerate() {
            let p = crate::vision::pixels_from_bytes(bytes, &v, Some(SERVE_MAX_IMAGE_PIXELS))
                .map_err(|e| HttpError::new(400, format!("image {}: {e}", i + 1)))?;
            images.push(p);
        }
        let merge = v.spatial_merge as usize;
        let grids: Vec<(usize, usize)> = images
            .iter()
            .map(|p| (p.grid_h / merge, p.grid_w / merge))
            .collect();
        ids = crate::vision::expand_placeholders(&ids, v.image_token_id, &grids)
            .map_err(|e| HttpError::new(400, e))?;
    }
    // Every call follows the functions' schema: under `required` or a
    // named function from the prompt's `<tool_call>` on (and each further
    // call), under `auto` from each `<tool_call>` the model writes.
    let (call, call_open) = match (&tool_calls, call_schema) {
        (Some(_), Some(f)) => (Some(f), true),
        (Some(_), None) => (req.auto_call_schema(), false),
        (None, f) => {
            // No call tokens: the forced call's JSON is the whole answer.
            params_json = f;
            (None, false)
        }
    };
    let prompt = Prompted {
        ids,
        images,
        tools: tool_calls,
        call,
        call_open,
    };
    let mut params = req.params.clone();
    if call_open || params_json.is_some() {
        // A forced call is the answer: `response_format` does not apply.
        params.json = params_json;
    }
    generate_answer(conn, sh, jobs, prompt, &params, Kind::Chat)
}

fn completion(
    conn: &mut Conn,
    sh: &Shared,
    jobs: &Sender<Job>,
    body: &[u8],
) -> Result<(), HttpError> {
    let req = api::parse_completion(body).map_err(|m| HttpError::new(400, m))?;
    let ids = prompt_ids(sh, req.prompt)?;
    let prompt = Prompted {
        ids,
        images: Vec::new(),
        tools: None,
        call: None,
        call_open: false,
    };
    generate_answer(conn, sh, jobs, prompt, &req.params, Kind::Completion)
}

/// A prompt's token ids: a text tokenized (special tokens read, as the
/// raw prompt of `/v1/completions`), or ids each below the vocabulary.
fn prompt_ids(sh: &Shared, prompt: Prompt) -> Result<Vec<u32>, HttpError> {
    match prompt {
        Prompt::Text(t) => generate::encode(&sh.tok, &t).map_err(|e| HttpError::new(400, e)),
        Prompt::Ids(ids) => {
            let vocab = sh.w.cfg.vocab_size;
            match ids.iter().find(|&&i| i >= vocab) {
                Some(bad) => Err(HttpError::new(
                    400,
                    format!("token id {bad} is not below the vocabulary size {vocab}"),
                )),
                None => Ok(ids),
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Completion,
}

pub use kestrel_core::generate::stop_scan;

/// Tokens of one answer: the prompt's, those of it reused from the cache,
/// and the generated ones.
#[derive(Clone, Copy)]
struct Usage {
    prompt: usize,
    cached: usize,
    completion: usize,
    /// Drafted tokens (a `prediction`'s or lookup's) accepted and rejected.
    accepted: usize,
    rejected: usize,
}

impl Usage {
    /// `usage`, with the prompt tokens reused from the cache as OpenAI's
    /// `prompt_tokens_details.cached_tokens`.
    fn json(&self) -> String {
        format!(
            "{{\"prompt_tokens\":{},\"completion_tokens\":{},\"total_tokens\":{},\"prompt_tokens_details\":{{\"cached_tokens\":{}}},\"completion_tokens_details\":{{\"accepted_prediction_tokens\":{},\"rejected_prediction_tokens\":{}}}}}",
            self.prompt,
            self.completion,
            self.prompt + self.completion,
            self.cached,
            self.accepted,
            self.rejected
        )
    }
}

/// One chunk of a stream, or the whole answer.
struct Answer<'a> {
    kind: Kind,
    id: &'a str,
    created: u64,
    model: &'a str,
    /// The keywords a best-effort schema left out (`Params::dropped`),
    /// said in every chunk and answer as `dropped_keywords`.
    dropped: &'a [String],
}

impl Answer<'_> {
    fn start(&self, object: &str) -> String {
        let mut s = String::from("{\"id\":");
        push_json_str(&mut s, self.id);
        let _ = write!(
            s,
            ",\"object\":\"{object}\",\"created\":{},\"model\":",
            self.created
        );
        push_json_str(&mut s, self.model);
        if !self.dropped.is_empty() {
            s.push_str(",\"dropped_keywords\":[");
            for (i, k) in self.dropped.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                push_json_str(&mut s, k);
            }
            s.push(']');
        }
        s
    }

    /// A streamed chunk: `text` (None: the role-only first chat chunk, or
    /// the empty final delta) and the finish reason.
    /// `logprobs`: the choice's rendered `logprobs` value (`null` when not asked).
    fn chunk(
        &self,
        text: Option<&str>,
        first: bool,
        finish: Option<&str>,
        logprobs: &str,
    ) -> String {
        let mut s = match self.kind {
            Kind::Chat => self.start("chat.completion.chunk"),
            Kind::Completion => self.start("text_completion"),
        };
        s.push_str(",\"choices\":[{\"index\":0,");
        match self.kind {
            Kind::Chat => {
                s.push_str("\"delta\":{");
                if first {
                    s.push_str("\"role\":\"assistant\",\"content\":\"\"");
                } else if let Some(t) = text {
                    s.push_str("\"content\":");
                    push_json_str(&mut s, t);
                }
                s.push('}');
            }
            Kind::Completion => {
                s.push_str("\"text\":");
                push_json_str(&mut s, text.unwrap_or(""));
            }
        }
        let _ = write!(s, ",\"logprobs\":{logprobs},\"finish_reason\":");
        match finish {
            Some(f) => {
                let _ = write!(s, "\"{f}\"");
            }
            None => s.push_str("null"),
        }
        s.push_str("}]}");
        s
    }

    fn usage_chunk(&self, usage: Usage) -> String {
        let mut s = match self.kind {
            Kind::Chat => self.start("chat.completion.chunk"),
            Kind::Completion => self.start("text_completion"),
        };
        let _ = write!(s, ",\"choices\":[],\"usage\":{}}}", usage.json());
        s
    }

    /// A streamed chat chunk with the model's `i`-th call.
    fn tool_call_chunk(&self, i: usize, call: &(String, String)) -> String {
        let mut s = self.start("chat.completion.chunk");
        s.push_str(",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[");
        self.push_tool_call(&mut s, i, call, true);
        s.push_str("]},\"logprobs\":null,\"finish_reason\":null}]}");
        s
    }

    /// One entry of `tool_calls` (with its `index` in a streamed delta).
    fn push_tool_call(&self, s: &mut String, i: usize, call: &(String, String), index: bool) {
        if index {
            let _ = write!(s, "{{\"index\":{i},");
        } else {
            s.push('{');
        }
        let _ = write!(
            s,
            "\"id\":\"call_{}_{i}\",\"type\":\"function\",\"function\":{{\"name\":",
            self.id
        );
        push_json_str(s, &call.0);
        s.push_str(",\"arguments\":");
        push_json_str(s, &call.1);
        s.push_str("}}");
    }

    fn whole(
        &self,
        text: &str,
        tool_calls: &[(String, String)],
        finish: &str,
        usage: Usage,
        logprobs: &str,
    ) -> String {
        let mut s = match self.kind {
            Kind::Chat => self.start("chat.completion"),
            Kind::Completion => self.start("text_completion"),
        };
        s.push_str(",\"choices\":[{\"index\":0,");
        match self.kind {
            Kind::Chat => {
                s.push_str("\"message\":{\"role\":\"assistant\",\"content\":");
                // Beside calls, text of only whitespace (the newline
                // around a `<tool_call>`) is no content.
                if text.trim().is_empty() && !tool_calls.is_empty() {
                    s.push_str("null");
                } else {
                    push_json_str(&mut s, text);
                }
                if !tool_calls.is_empty() {
                    s.push_str(",\"tool_calls\":[");
                    for (i, call) in tool_calls.iter().enumerate() {
                        if i > 0 {
                            s.push(',');
                        }
                        self.push_tool_call(&mut s, i, call, false);
                    }
                    s.push(']');
                }
                s.push('}');
            }
            Kind::Completion => {
                s.push_str("\"text\":");
                push_json_str(&mut s, text);
            }
        }
        let _ = write!(
            s,
            ",\"logprobs\":{logprobs},\"finish_reason\":\"{finish}\"}}],\"usage\":{}}}",
            usage.json()
        );
        s
    }
}

/// A request turned into the model's input.
struct Prompted {
    /// The prompt's ids, each image's placeholder expanded.
    ids: Vec<u32>,
    images: Vec<crate::vision::Pixels>,
    /// The tool calls to recognise (chat with tools).
    tools: Option<ToolCalls>,
    /// The schema every tool call follows (see [`CallConstraint`]), and
    /// whether the prompt opened the first call (`required`, a named
    /// function).
    call: Option<api::JsonFormat>,
    call_open: bool,
}

/// Queues the job and writes its answer, streamed or whole.
fn generate_answer(
    conn: &mut Conn,
    sh: &Shared,
    jobs: &Sender<Job>,
    prompt: Prompted,
    p: &Params,
    kind: Kind,
) -> Result<(), HttpError> {
    let Prompted {
        ids,
        images,
        mut tools,
        call,
        call_open,
    } = prompt;
    let n = ids.len();
    if n == 0 {
        return Err(HttpError::new(400, "the prompt is empty"));
    }
    if n >= sh.ctx {
        return Err(HttpError::new(
            400,
            format!(
                "the prompt is {n} tokens; the context is {} (--ctx)",
                sh.ctx
            ),
        ));
    }
    let max_tokens = p.max_tokens.unwrap_or(usize::MAX);
    if max_tokens == 0 {
        return Err(HttpError::new(400, "'max_tokens' must be at least 1"));
    }
    let vocab = sh.w.cfg.vocab_size;
    if let Some((id, _)) = p.logit_bias.iter().find(|(id, _)| *id >= vocab) {
        return Err(HttpError::new(
            400,
            format!("'logit_bias.{id}': no such token (the vocabulary has {vocab})"),
        ));
    }
    let mut logit_bias = kestrel_core::sampler::LogitBias::default();
    logit_bias
        .set(&p.logit_bias, vocab as usize)
        .map_err(|e| HttpError::new(400, e))?;
    let cancel = Arc::new(AtomicBool::new(false));
    let (tx, rx) = channel::channel(usize::MAX);
    let job = Job {
        prompt: ids,
        images,
        max_tokens,
        sampler: p.sampler,
        logit_bias,
        logprobs: p.logprobs,
        json: match &p.json {
            Some(f) => Some(crate::json_output::JsonOutput::new(
                f.schema().map_err(|e| HttpError::new(400, e))?,
                sh.w.cfg.vocab_size as usize,
            )),
            None => None,
        },
        call: match (call, &tools) {
            (Some(f), Some(t)) => match f.schema() {
                Ok(schema) => Some(CallConstraint {
                    out: crate::json_output::JsonOutput::new(schema, sh.w.cfg.vocab_size as usize),
                    open: t.open,
                    close: kestrel_core::generate::StopSet::only(t.close),
                    inside: call_open,
                }),
                // Every call follows its schema: a request whose tools the
                // constraint cannot hold together is refused, forced or
                // `auto` alike.
                Err(e) => return Err(HttpError::new(400, e)),
            },
            _ => None,
        },
        embed: None,
        prediction: match p.prediction.is_empty() {
            true => Vec::new(),
            false => {
                let mut ids = crate::generate::encode(&sh.tok, &p.prediction)
                    .map_err(|e| HttpError::new(400, format!("'prediction': {e}")))?;
                // Drafts are looked up in it each step: no longer than the
                // context it could fill.
                ids.truncate(sh.ctx);
                ids
            }
        },
        cancel: cancel.clone(),
        events: tx,
    };
    let queued_at = Instant::now();
    let _guard = submit(sh, jobs, job)?;
    let id_num = sh.next_id.fetch_add(1, Ordering::Relaxed);
    let id = match kind {
        Kind::Chat => format!("chatcmpl-{id_num}"),
        Kind::Completion => format!("cmpl-{id_num}"),
    };
    let ans = Answer {
        kind,
        id: &id,
        created: now(),
        model: &sh.model_name,
        dropped: &p.dropped,
    };
    if p.stream {
        http::write_sse_head(conn).map_err(|_| gone())?;
        if kind == Kind::Chat {
            http::write_sse_data(conn, &ans.chunk(None, true, None, "null")).map_err(|_| gone())?;
        }
    }
    let mut dec = StreamDecoder::new(true);
    let mut pending = String::new();
    let mut whole = String::new();
    let mut generated = 0usize;
    let mut cached = 0usize;
    // Speculative decoding: (drafted, accepted) tokens.
    let mut drafts = (0usize, 0usize);
    // Log-probabilities not yet sent (streams send them with the next
    // chunk), and the text offset of the first.
    let mut logprobs = Logprobs::new(kind);
    let mut last_token = queued_at;
    let finish = loop {
        let ev = match rx.recv(Some(PEER_CHECK)) {
            Ok(ev) => ev,
            Err(RecvError::Empty) => {
                if http::peer_closed(conn) {
                    return Ok(());
                }
                continue;
            }
            Err(RecvError::Disconnected) => Event::Error("the engine dropped the request".into()),
        };
        let mut finish = None;
        let mut new_call = None;
        match ev {
            Event::Prefilled { cached: c } => cached = c,
            // Only embedding jobs get one.
            Event::Embedding(_) => {}
            Event::Drafted { drafted, accepted } => drafts = (drafted, accepted),
            Event::Token(t, lp) => {
                generated += 1;
                let now = Instant::now();
                let since = if generated == 1 {
                    queued_at
                } else {
                    last_token
                };
                let histogram = if generated == 1 {
                    &sh.metrics.time_to_first_token
                } else {
                    &sh.metrics.time_between_tokens
                };
                histogram.observe(now - since);
                last_token = now;
                sh.metrics.generated_tokens.fetch_add(1, Ordering::Relaxed);
                if let Some(lp) = lp {
                    logprobs.push(&sh.tok, t, &lp);
                }
                match tools.as_mut() {
                    Some(tc) if t == tc.open && tc.capture.is_none() => {
                        tc.capture = Some(String::new());
                        tc.from_prompt = 0;
                    }
                    Some(tc) if t == tc.close && tc.capture.is_some() => match tc.end_call(true) {
                        Ok(i) => new_call = Some(i),
                        Err(raw) => pending.push_str(&raw),
                    },
                    Some(ToolCalls {
                        capture: Some(c), ..
                    }) => {
                        let _ = dec.step_with(&sh.tok, t, &mut |s| c.push_str(s));
                    }
                    _ => {
                        let _ = dec.step_with(&sh.tok, t, &mut |s| pending.push_str(s));
                    }
                }
            }
            Event::Done(f) => {
                match tools.as_mut().filter(|tc| tc.capture.is_some()) {
                    // The answer ended inside a call.
                    Some(tc) => {
                        if let Some(c) = tc.capture.as_mut() {
                            dec.finish_with(&mut |s| c.push_str(s));
                        }
                        // Cut by the length limit: not a call, the text
                        // the model wrote.
                        let call = match f {
                            Finish::Stop => tc.end_call(false),
                            Finish::Length => Err(tc.raw_text(false)),
                        };
                        match call {
                            Ok(i) => new_call = Some(i),
                            Err(raw) => pending.push_str(&raw),
                        }
                    }
                    None => dec.finish_with(&mut |s| pending.push_str(s)),
                }
                finish = Some(f);
            }
            Event::Error(m) => {
                if p.stream {
                    let _ = http::write_sse_data(conn, &error_body(500, &m));
                    return Ok(());
                }
                return Err(HttpError::new(500, m));
            }
        }
        // `parallel_tool_calls: false`: the first call ends the answer.
        if new_call.is_some() && tools.as_ref().is_some_and(|tc| !tc.parallel) {
            finish = finish.or(Some(Finish::Stop));
        }
        let (send, stopped) = stop_scan(&pending, &p.stop);
        let (send, finish) = if stopped {
            (send, Some(Finish::Stop))
        } else if finish.is_some() || new_call.is_some() {
            // The end, or a call: the text before it is complete.
            (pending.len(), finish)
        } else {
            (send, None)
        };
        if send > 0 {
            if p.stream {
                let lp = logprobs.take(p.logprobs.is_some());
                http::write_sse_data(conn, &ans.chunk(Some(&pending[..send]), false, None, &lp))
                    .map_err(|_| gone())?;
            } else {
                whole.push_str(&pending[..send]);
            }
            pending.drain(..send);
        }
        if let (Some(i), Some(tc), true) = (new_call, &tools, p.stream) {
            http::write_sse_data(conn, &ans.tool_call_chunk(i, &tc.calls[i]))
                .map_err(|_| gone())?;
        }
        if let Some(f) = finish {
            break f;
        }
    };
    let calls = tools.map(|tc| tc.calls).unwrap_or_default();
    // An answer that ends after calls asks for their results.
    let finish = match finish {
        Finish::Stop if !calls.is_empty() => "tool_calls",
        f => f.name(),
    };
    let usage = Usage {
        prompt: n,
        cached,
        completion: generated,
        accepted: drafts.1,
        rejected: drafts.0 - drafts.1.min(drafts.0),
    };
    if p.stream {
        let lp = logprobs.take(p.logprobs.is_some());
        let mut tail = ans.chunk(None, false, Some(finish), &lp);
        if p.include_usage {
            tail.push_str("\n\ndata: ");
            tail.push_str(&ans.usage_chunk(usage));
        }
        tail.push_str("\n\ndata: [DONE]");
        let _ = http::write_sse_data(conn, &tail);
    } else {
        let lp = logprobs.take(p.logprobs.is_some());
        let body = ans.whole(&whole, &calls, finish, usage, &lp);
        json_response(conn, 200, &body);
    }
    Ok(())
}

/// The model's tool calls, recognised by the template's added tokens (ids,
/// not text): the text between `<tool_call>` and `</tool_call>` must be
/// `{"name": <one of the tools>, "arguments": {...}}`; anything else is
/// answered as text.
struct ToolCalls {
    open: u32,
    close: u32,
    /// Several calls may follow one another (`parallel_tool_calls`); else
    /// the answer ends with its first call.
    parallel: bool,
    /// The request's functions.
    names: Vec<String>,
    /// Inside a call: its text so far.
    capture: Option<String>,
    /// Bytes at the start of `capture` that the prompt wrote (a forced
    /// call's `\n` after the prompt's `<tool_call>`); 0 when the model
    /// opened the call.
    from_prompt: usize,
    /// (name, arguments as JSON text) of each call made.
    calls: Vec<(String, String)>,
}

impl ToolCalls {
    /// Ends the call being captured (at `</tool_call>`, or at the end of
    /// the answer: a complete call the model did not close counts too): its
    /// index in `calls`, or, when it is not a call of a known function, its
    /// text to answer as content.
    fn end_call(&mut self, closed: bool) -> Result<usize, String> {
        let text = self.capture.clone().unwrap_or_default();
        let call = json::parse(text.trim().as_bytes()).ok().and_then(|v| {
            let name = v.get("name")?.as_str()?.as_plain()?;
            let args = match v.get("arguments")? {
                json::Value::Object(o) => o.raw(),
                _ => return None,
            };
            self.names
                .iter()
                .any(|n| n == name)
                .then(|| (name.to_string(), args.to_string()))
        });
        match call {
            Some(c) => {
                self.capture = None;
                self.calls.push(c);
                Ok(self.calls.len() - 1)
            }
            None => Err(self.raw_text(closed)),
        }
    }

    /// Ends the call being captured as text: what the model wrote of it
    /// (`<tool_call>` too when the model opened it; never the prompt's part).
    fn raw_text(&mut self, closed: bool) -> String {
        let text = self.capture.take().unwrap_or_default();
        let close = if closed { "</tool_call>" } else { "" };
        match text.get(self.from_prompt..) {
            Some(own) if self.from_prompt > 0 => format!("{own}{close}"),
            _ => format!("<tool_call>{text}{close}"),
        }
    }
}

/// Tokens' log-probabilities in OpenAI's two shapes: chat's
/// `{"content": [{token, logprob, bytes, top_logprobs}]}` and completions'
/// `{tokens, token_logprobs, top_logprobs, text_offset}`.
struct Logprobs {
    kind: Kind,
    /// Rendered entries not yet sent (chat: the `content` items; completions:
    /// the four lists' items).
    content: String,
    tokens: String,
    token_logprobs: String,
    top: String,
    offsets: String,
    /// Characters of answer text before the next token.
    offset: usize,
}

/// A log-probability as JSON: OpenAI's -9999.0 for "no probability".
fn push_logprob(s: &mut String, lp: f32) {
    let lp = if lp.is_finite() { lp } else { -9999.0 };
    let _ = write!(s, "{lp}");
}

/// A token's text: its bytes, invalid UTF-8 replaced.
fn token_bytes(tok: &Tokenizer, id: u32) -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = tok.token_decode_bytes(id, &mut |b| bytes.extend_from_slice(b));
    bytes
}

impl Logprobs {
    fn new(kind: Kind) -> Self {
        Logprobs {
            kind,
            content: String::new(),
            tokens: String::new(),
            token_logprobs: String::new(),
            top: String::new(),
            offsets: String::new(),
            offset: 0,
        }
    }

    /// Chat's `{"token","logprob","bytes"` for `id` (the caller closes it).
    fn push_chat_item(s: &mut String, tok: &Tokenizer, id: u32, lp: f32) {
        let bytes = token_bytes(tok, id);
        s.push_str("{\"token\":");
        push_json_str(s, &String::from_utf8_lossy(&bytes));
        s.push_str(",\"logprob\":");
        push_logprob(s, lp);
        s.push_str(",\"bytes\":[");
        for (i, b) in bytes.iter().enumerate() {
            let _ = write!(s, "{}{b}", if i > 0 { "," } else { "" });
        }
        s.push(']');
    }

    fn push(&mut self, tok: &Tokenizer, id: u32, lp: &scheduler::TokenLogprobs) {
        let comma = |s: &mut String| {
            if !s.is_empty() {
                s.push(',');
            }
        };
        match self.kind {
            Kind::Chat => {
                comma(&mut self.content);
                Self::push_chat_item(&mut self.content, tok, id, lp.logprob);
                self.content.push_str(",\"top_logprobs\":[");
                for (i, &(alt, alt_lp)) in lp.top.iter().enumerate() {
                    if i > 0 {
                        self.content.push(',');
                    }
                    Self::push_chat_item(&mut self.content, tok, alt, alt_lp);
                    self.content.push('}');
                }
                self.content.push_str("]}");
            }
            Kind::Completion => {
                let text = String::from_utf8_lossy(&token_bytes(tok, id)).into_owned();
                comma(&mut self.tokens);
                push_json_str(&mut self.tokens, &text);
                comma(&mut self.token_logprobs);
                push_logprob(&mut self.token_logprobs, lp.logprob);
                comma(&mut self.top);
                self.top.push('{');
                for (i, &(alt, alt_lp)) in lp.top.iter().enumerate() {
                    if i > 0 {
                        self.top.push(',');
                    }
                    let alt = String::from_utf8_lossy(&token_bytes(tok, alt)).into_owned();
                    push_json_str(&mut self.top, &alt);
                    self.top.push(':');
                    push_logprob(&mut self.top, alt_lp);
                }
                self.top.push('}');
                comma(&mut self.offsets);
                let _ = write!(self.offsets, "{}", self.offset);
                self.offset += text.chars().count();
            }
        }
    }

    /// The `logprobs` value of the entries so far (`null` when not `asked`),
    /// which are then cleared.
    fn take(&mut self, asked: bool) -> String {
        if !asked {
            return "null".into();
        }
        let s = match self.kind {
            Kind::Chat => format!("{{\"content\":[{}],\"refusal\":null}}", self.content),
            Kind::Completion => format!(
                "{{\"tokens\":[{}],\"token_logprobs\":[{}],\"top_logprobs\":[{}],\"text_offset\":[{}]}}",
                self.tokens, self.token_logprobs, self.top, self.offsets
            ),
        };
        for part in [
            &mut self.content,
            &mut self.tokens,
            &mut self.token_logprobs,
            &mut self.top,
            &mut self.offsets,
        ] {
            part.clear();
        }
        s
    }
}

/// The client went away: nothing more to write.
/// Stops its job when the handler leaves, whatever happened.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Queues `job` for the engine (429 when the queue is full), counting its
/// prompt tokens; the guard cancels it when dropped.
fn submit(sh: &Shared, jobs: &Sender<Job>, job: Job) -> Result<CancelOnDrop, HttpError> {
    let (n, guard) = (job.prompt.len(), CancelOnDrop(job.cancel.clone()));
    // Counted before the engine can take it (which counts it out).
    sh.metrics.queued.fetch_add(1, Ordering::Relaxed);
    let sent = jobs.send(job);
    if sent.is_err() {
        sh.metrics.queued.fetch_sub(1, Ordering::Relaxed);
    }
    match sent {
        Ok(()) => {
            sh.metrics
                .prompt_tokens
                .fetch_add(n as u64, Ordering::Relaxed);
            Ok(guard)
        }
        Err(SendError::Full) => Err(HttpError::new(
            429,
            format!("server busy: {} requests are already waiting", sh.queue),
        )),
        Err(SendError::Disconnected) => Err(HttpError::new(503, "the engine has stopped")),
    }
}

/// `POST /v1/embeddings`: each input embedded in turn (a job of its own,
/// run at once in a free slot), answered in OpenAI's shape.
fn embeddings(
    conn: &mut Conn,
    sh: &Shared,
    jobs: &Sender<Job>,
    body: &[u8],
) -> Result<(), HttpError> {
    let req = api::parse_embeddings(body).map_err(|m| HttpError::new(400, m))?;
    let mut out = String::from("{\"object\":\"list\",\"data\":[");
    let mut tokens = 0;
    for (i, input) in req.inputs.into_iter().enumerate() {
        let ids = prompt_ids(sh, input)?;
        if ids.len() > sh.ctx {
            return Err(HttpError::new(
                400,
                format!(
                    "input {i} is {} tokens; the context is {} (--ctx)",
                    ids.len(),
                    sh.ctx
                ),
            ));
        }
        tokens += ids.len();
        let (tx, rx) = channel::channel(usize::MAX);
        let job = Job {
            prompt: ids,
            images: Vec::new(),
            max_tokens: 1,
            sampler: kestrel_core::sampler::SamplerConfig::default(),
            logit_bias: Default::default(),
            logprobs: None,
            json: None,
            call: None,
            prediction: Vec::new(),
            embed: Some(req.pooling),
            cancel: Arc::new(AtomicBool::new(false)),
            events: tx,
        };
        let _guard = submit(sh, jobs, job)?;
        let v = loop {
            match rx.recv(Some(PEER_CHECK)) {
                Ok(Event::Embedding(v)) => break v,
                Err(RecvError::Empty) if !http::peer_closed(conn) => continue,
                Err(RecvError::Empty) => return Err(gone()),
                Ok(Event::Error(m)) => return Err(HttpError::new(500, m)),
                _ => return Err(HttpError::new(500, "the engine dropped the request")),
            }
        };
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(
            out,
            "{sep}{{\"object\":\"embedding\",\"index\":{i},\"embedding\":["
        );
        for (j, x) in v.iter().enumerate() {
            let _ = write!(out, "{}{x}", if j > 0 { "," } else { "" });
        }
        out.push_str("]}");
    }
    out.push_str("],\"model\":");
    push_json_str(&mut out, &sh.model_name);
    let _ = write!(
        out,
        ",\"usage\":{{\"prompt_tokens\":{tokens},\"total_tokens\":{tokens}}}}}"
    );
    json_response(conn, 200, &out);
    Ok(())
}

fn gone() -> HttpError {
    HttpError::new(499, "client closed the connection")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chat answer of calls alone has `content: null`, also when the
    /// text around them is a newline (a forced call's); other text stays.
    #[test]
    fn content_beside_calls_is_null_unless_it_says_something() {
        let ans = Answer {
            kind: Kind::Chat,
            id: "x",
            created: 0,
            model: "m",
            dropped: &[],
        };
        let usage = Usage {
            prompt: 1,
            cached: 0,
            completion: 1,
            accepted: 0,
            rejected: 0,
        };
        let calls = [("f".to_string(), "{}".to_string())];
        for text in ["", "\n", " \n\n"] {
            let body = ans.whole(text, &calls, "tool_calls", usage, "null");
            assert!(body.contains("\"content\":null,\"tool_calls\""), "{body}");
        }
        let body = ans.whole("Sure.\n", &calls, "tool_calls", usage, "null");
        assert!(body.contains("\"content\":\"Sure.\\n\""), "{body}");
        let body = ans.whole("\n", &[], "stop", usage, "null");
        assert!(body.contains("\"content\":\"\\n\""), "{body}");
        // Left-out keywords are said in the answer.
        let dropped = ["response_format.schema.properties.s.pattern".to_string()];
        let ans = Answer {
            dropped: &dropped,
            ..ans
        };
        let body = ans.whole("{}", &[], "stop", usage, "null");
        assert!(
            body.contains(r#""dropped_keywords":["response_format.schema.properties.s.pattern"]"#),
            "{body}"
        );
    }

    #[test]
    fn tool_calls_are_known_functions_with_object_arguments() {
        let mut tc = ToolCalls {
            open: 1,
            close: 2,
            parallel: true,
            names: vec!["get_weather".into(), "now".into()],
            capture: None,
            from_prompt: 0,
            calls: Vec::new(),
        };
        let mut end = |text: &str, closed: bool| {
            tc.capture = Some(text.to_string());
            tc.end_call(closed)
        };
        assert_eq!(
            end(
                "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n",
                true
            ),
            Ok(0)
        );
        assert_eq!(end("{\"name\":\"now\",\"arguments\":{}}", false), Ok(1));
        // Not a call: answered as the text the model wrote.
        for (text, closed) in [
            ("{\"name\": \"rain\", \"arguments\": {}}", true),
            ("{\"name\": \"now\", \"arguments\": \"{}\"}", true),
            ("{\"name\": \"now\"}", false),
            ("{\"name\": \"now\", \"arguments\": {", true),
            ("not json", true),
        ] {
            let want = format!(
                "<tool_call>{text}{}",
                if closed { "</tool_call>" } else { "" }
            );
            assert_eq!(end(text, closed), Err(want));
        }
        assert_eq!(
            tc.calls,
            vec![
                (
                    "get_weather".to_string(),
                    "{\"city\": \"Oslo\"}".to_string()
                ),
                ("now".to_string(), "{}".to_string())
            ]
        );
        // A forced call (the prompt wrote `<tool_call>\n`) cut short: only
        // the text the model wrote.
        tc.capture = Some("\n{\"name\": \"now\", \"argu".into());
        tc.from_prompt = 1;
        assert_eq!(tc.raw_text(false), "{\"name\": \"now\", \"argu");
        assert_eq!(tc.capture, None);
    }
}
