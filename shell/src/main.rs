//! `kestrel`: the thin std shell around `kestrel-core`.

use kestrel::args::{self, Command, Opt, Pos, Stop};
use kestrel::bench::BenchArgs;
use kestrel::convert::ConvertArgs;
use kestrel::generate::{ChatArgs, RunArgs};
use kestrel::logits::LogitsArgs;
use kestrel::serve::ServeArgs;
use kestrel::{bench, convert, cpu, generate, inspect, logits};
use std::path::PathBuf;
use std::process::ExitCode;

const ABOUT: &str = "Qwen inference for small ARM boards";

const CPU: Command = Command {
    name: "cpu",
    about: "Print the CPU features detected and the kernel set chosen.",
    positionals: &[],
    opts: &[],
};

const TOKENIZE: Command = Command {
    name: "tokenize",
    about: "Print the token ids of a text.",
    positionals: &[
        Pos::one("model", "The VQF model."),
        Pos::one("text", "The text."),
    ],
    opts: &[],
};

const DETOKENIZE: Command = Command {
    name: "detokenize",
    about: "Print the text of token ids.",
    positionals: &[
        Pos::one("model", "The VQF model."),
        Pos::many("ids", "Comma-separated ids."),
    ],
    opts: &[],
};

const INSPECT: Command = Command {
    name: "inspect",
    about: "Show a VQF file: header, flags bit by bit, config, directory, bytes by type.",
    positionals: &[Pos::one("file", "The VQF file.")],
    opts: &[&[
        Opt::switch("json", "Print one JSON object instead of text."),
        Opt::switch(
            "memory",
            "Print the memory the model needs instead: weights and the arena (KV cache, activations) at a few --ctx values. FILE may also be a Hugging Face directory or a config.json.",
        ),
    ]],
};

const VERIFY: Command = Command {
    name: "verify",
    about: "Recompute a VQF file's checksum; exit 0 when it matches.",
    positionals: &[Pos::one("file", "The VQF file.")],
    opts: &[],
};

/// Every command, in the order of `kestrel --help`.
const COMMANDS: &[&Command] = &[
    &CPU,
    &BenchArgs::COMMAND,
    &RunArgs::COMMAND,
    &ChatArgs::COMMAND,
    &TOKENIZE,
    &DETOKENIZE,
    &ConvertArgs::COMMAND,
    &INSPECT,
    &LogitsArgs::COMMAND,
    &ServeArgs::COMMAND,
    &VERIFY,
];

/// Parses the command line and runs the command: `Err` when the arguments
/// were not a command to run (help, version, usage errors).
fn dispatch(argv: &[String]) -> Result<kestrel::error::Result<()>, Stop> {
    let top_help = || args::top_help(ABOUT, COMMANDS);
    let Some((name, rest)) = argv.split_first() else {
        return Err(Stop::Error(top_help()));
    };
    Ok(match name.as_str() {
        "-h" | "--help" => return Err(Stop::Help(top_help())),
        "-V" | "--version" => {
            return Err(Stop::Help(format!(
                "kestrel {}\n",
                env!("CARGO_PKG_VERSION")
            )))
        }
        "help" => {
            return match rest.first() {
                None => Err(Stop::Help(top_help())),
                Some(sub) => match COMMANDS.iter().find(|c| c.name == sub) {
                    Some(c) => Err(Stop::Help(c.help())),
                    None => Err(Stop::Error(format!(
                        "kestrel: unknown command '{sub}' (see 'kestrel --help')"
                    ))),
                },
            }
        }
        "cpu" => {
            CPU.parse(rest)?;
            let k = cpu::detect_kernels();
            println!("kernels: {}", k.name());
            println!(
                "pool cores: {:?} (default threads: {})",
                kestrel::pool::system_big_cores(),
                kestrel::engine::default_threads()
            );
            Ok(())
        }
        "bench" => bench::run(&BenchArgs::parse(rest)?),
        "convert" => convert::run(&ConvertArgs::parse(rest)?),
        "run" => generate::run(&RunArgs::parse(rest)?),
        "chat" => generate::chat(&ChatArgs::parse(rest)?),
        "tokenize" => {
            let m = TOKENIZE.parse(rest)?;
            generate::tokenize(&m.get::<PathBuf>("model")?, &m.get::<String>("text")?)
        }
        "detokenize" => {
            let m = DETOKENIZE.parse(rest)?;
            generate::detokenize(&m.get::<PathBuf>("model")?, &m.list::<u32>("ids")?)
        }
        "inspect" => {
            let m = INSPECT.parse(rest)?;
            let file = m.get::<PathBuf>("file")?;
            if m.flag("memory") {
                inspect::memory(&file)
            } else {
                inspect::inspect(&file, m.flag("json"))
            }
        }
        "verify" => inspect::verify(&VERIFY.parse(rest)?.get::<PathBuf>("file")?),
        "logits" => logits::run(&LogitsArgs::parse(rest)?),
        "serve" => kestrel::serve::run(&ServeArgs::parse(rest)?),
        other => {
            return Err(Stop::Error(format!(
                "kestrel: unknown command '{other}' (see 'kestrel --help')"
            )))
        }
    })
}

fn main() -> ExitCode {
    kestrel::restore_sigpipe();
    let result = match args::from_env() {
        Ok(argv) => dispatch(&argv),
        Err(stop) => Err(stop),
    };
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(msg)) => {
            eprintln!("kestrel: {msg}");
            ExitCode::FAILURE
        }
        Err(stop) => stop.exit(),
    }
}
