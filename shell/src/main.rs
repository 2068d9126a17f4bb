//! `kestrel`: the thin std shell around `kestrel-core`.

use kestrel::{bench, convert, cpu, generate, inspect, logits};

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "kestrel",
    version,
    about = "Qwen inference for small ARM boards"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CPU features detected and the kernel set chosen.
    Cpu,
    /// Time the kernels, the Q8/Q4 mixed-precision table and the DRAM wall on synthetic data.
    Bench(bench::BenchArgs),
    /// Answer one prompt, streaming the text (chat format unless --raw).
    Run(generate::RunArgs),
    /// Interactive multi-turn chat on the terminal.
    Chat(generate::ChatArgs),
    /// Print the token ids of a text.
    Tokenize {
        /// The VQF model.
        model: std::path::PathBuf,
        /// The text.
        text: String,
    },
    /// Print the text of token ids.
    Detokenize {
        /// The VQF model.
        model: std::path::PathBuf,
        /// Comma-separated ids.
        #[arg(value_delimiter = ',')]
        ids: Vec<u32>,
    },
    /// Convert a Hugging Face model directory or a GGUF file to VQF.
    Convert(convert::ConvertArgs),
    /// Show a VQF file: header, flags bit by bit, config, directory, bytes by type.
    Inspect {
        /// The VQF file.
        file: std::path::PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Print the memory the model needs instead: weights and the arena
        /// (KV cache, activations) at a few --ctx values. FILE may also be a
        /// Hugging Face directory or a config.json.
        #[arg(long)]
        memory: bool,
    },
    /// Run token ids through the model and write every position's logits (f32 LE rows).
    Logits(logits::LogitsArgs),
    /// Recompute a VQF file's checksum; exit 0 when it matches.
    Verify {
        /// The VQF file.
        file: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    kestrel::restore_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Cpu => {
            let k = cpu::detect_kernels();
            println!("kernels: {}", k.name());
            println!(
                "pool cores: {:?} (default threads: {})",
                kestrel::pool::system_big_cores(),
                kestrel::engine::default_threads()
            );
            Ok(())
        }
        Command::Bench(args) => bench::run(&args),
        Command::Convert(args) => convert::run(&args),
        Command::Run(args) => generate::run(&args),
        Command::Chat(args) => generate::chat(&args),
        Command::Tokenize { model, text } => generate::tokenize(&model, &text),
        Command::Detokenize { model, ids } => generate::detokenize(&model, &ids),
        Command::Inspect {
            file, memory: true, ..
        } => inspect::memory(&file),
        Command::Inspect { file, json, .. } => inspect::inspect(&file, json),
        Command::Verify { file } => inspect::verify(&file),
        Command::Logits(args) => logits::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("kestrel: {msg}");
            ExitCode::FAILURE
        }
    }
}
