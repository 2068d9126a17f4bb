//! `kestrel`: the thin std shell around `kestrel-core`.

mod bench;
mod cpu;

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
    /// Time the quantized kernels on synthetic weights.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Cpu => {
            let k = cpu::detect_kernels();
            println!("kernels: {}", k.name());
            Ok(())
        }
        Command::Bench(args) => bench::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("kestrel: {msg}");
            ExitCode::FAILURE
        }
    }
}
