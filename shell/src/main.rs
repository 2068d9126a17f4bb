//! `kestrel`: the thin std shell around `kestrel-core`.

use kestrel::bench::BenchArgs;
use kestrel::cli::{get, token_ids, CommandArgs};
use kestrel::commands;
use kestrel::convert::ConvertArgs;
use kestrel::generate::{ChatArgs, RunArgs};
use kestrel::imatrix::ImatrixArgs;
use kestrel::logits::LogitsArgs;
use kestrel::perplexity::PerplexityArgs;
use kestrel::schema::SchemaArgs;
use kestrel::serve::ServeArgs;
use kestrel::{bench, convert, cpu, generate, imatrix, inspect, logits, perplexity};
use std::path::PathBuf;
use std::process::ExitCode;

#[cfg(feature = "shipped")]
mod no_printf;
#[cfg(feature = "shipped")]
mod no_unwinder;

/// Runs the command clap parsed.
fn dispatch(name: &str, m: &clap::ArgMatches) -> kestrel::error::Result<()> {
    match name {
        "cpu" => {
            let k = cpu::detect_kernels();
            println!("kernels: {}", k.name());
            println!(
                "pool cores: {} (default threads: {})",
                kestrel::error::listed(&kestrel::pool::system_big_cores()),
                kestrel::engine::default_threads()
            );
            Ok(())
        }
        "bench" => bench::run(&BenchArgs::from_matches(m)),
        "convert" => convert::run(&ConvertArgs::from_matches(m)),
        "run" => generate::run(&RunArgs::from_matches(m)),
        "chat" => generate::chat(&ChatArgs::from_matches(m)),
        "tokenize" => generate::tokenize(&get::<PathBuf>(m, "model"), &get::<String>(m, "text")),
        "detokenize" => generate::detokenize(&get::<PathBuf>(m, "model"), &token_ids(m, "ids")),
        "inspect" => {
            let file = get::<PathBuf>(m, "file");
            if m.get_flag("memory") {
                inspect::memory(&file, kestrel::cli::opt::<u64>(m, "board"))
            } else {
                inspect::inspect(&file, m.get_flag("json"))
            }
        }
        "verify" => inspect::verify(&get::<PathBuf>(m, "file")),
        "logits" => logits::run(&LogitsArgs::from_matches(m)),
        "perplexity" => perplexity::run(&PerplexityArgs::from_matches(m)),
        "imatrix" => imatrix::run(&ImatrixArgs::from_matches(m)),
        "serve" => kestrel::serve::run(&ServeArgs::from_matches(m)),
        "schema" => kestrel::schema::run(&SchemaArgs::from_matches(m)),
        other => unreachable!("'{other}' is in commands::command() without an arm here"),
    }
}

fn main() -> ExitCode {
    kestrel::restore_sigpipe();
    // Help and version go to stdout (exit 0); usage errors to stderr (exit 2).
    let matches = commands::command().get_matches();
    let Some((name, m)) = matches.subcommand() else {
        unreachable!("commands::command() requires a subcommand")
    };
    match dispatch(name, m) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("kestrel: {msg}");
            ExitCode::FAILURE
        }
    }
}
