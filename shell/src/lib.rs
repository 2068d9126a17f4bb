//! The `kestrel` shell as a library: everything the binary does, callable
//! from tests. The binary (`main.rs`) only dispatches the command line
//! ([`commands::command`]).

pub mod bench;
pub mod cli;
pub mod commands;
pub mod convert;
pub mod cpu;
pub mod engine;
pub mod error;
pub mod files;
pub mod generate;
pub mod gguf_names;
pub mod image;
pub mod imatrix;
pub mod inspect;
pub mod json_output;
pub mod logits;
pub mod perplexity;
pub use kestrel_pool as pool;
pub mod schema;
pub mod serve;
pub mod vision;

/// Lets a closed pipe end the program quietly (`kestrel inspect | head`), as
/// command-line tools do, instead of failing every later write.
pub fn restore_sigpipe() {
    // SAFETY: signal() with SIG_DFL installs no handler code; it only asks the
    // kernel to apply the default action (terminate) on SIGPIPE. Called once
    // at start-up before any thread is spawned.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
