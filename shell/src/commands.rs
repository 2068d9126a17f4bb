//! The command table: [`command`] lists every command, each defined by its
//! own module (its args struct's `CommandArgs::command`) or here when it
//! takes only a file. The binary parses with it, the completion scripts are
//! generated from it (`src/bin/kestrel-completions.rs`, feature
//! `completions`), and the tests read it. It imports the commands; they
//! import only `crate::cli`, never this module.

use crate::bench::BenchArgs;
use crate::cli::{model_arg, switch, token_id, CommandArgs};
use crate::convert::ConvertArgs;
use crate::generate::{ChatArgs, RunArgs};
use crate::imatrix::ImatrixArgs;
use crate::logits::LogitsArgs;
use crate::perplexity::PerplexityArgs;
use crate::schema::SchemaArgs;
use crate::serve::ServeArgs;
use clap::{value_parser, Arg, Command};
use std::path::PathBuf;

/// `kestrel --help`'s first line.
pub const ABOUT: &str = "Qwen inference for small ARM boards";

/// The whole command line: `kestrel <COMMAND> ...`.
pub fn command() -> Command {
    Command::new("kestrel")
        .about(ABOUT)
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommands([
            Command::new("cpu")
                .about("Print the CPU features detected and the kernel set chosen."),
            BenchArgs::command(),
            RunArgs::command(),
            ChatArgs::command(),
            Command::new("tokenize")
                .about("Print the token ids of a text.")
                .args([model_arg(), Arg::new("text").value_name("TEXT").required(true).help("The text.")]),
            Command::new("detokenize")
                .about("Print the text of token ids.")
                .args([
                    model_arg(),
                    Arg::new("ids")
                        .value_name("IDS")
                        .num_args(0..)
                        .value_delimiter(',')
                        .value_parser(token_id())
                        .help("Comma-separated ids."),
                ]),
            ConvertArgs::command(),
            Command::new("inspect")
                .about("Show a VQF file: header, flags bit by bit, config, directory, bytes by type.")
                .args([
                    file_arg(),
                    switch("json", "Print one JSON object instead of text."),
                    switch(
                        "memory",
                        "Print the memory needed (weights, KV cache, activations) at a few --ctx values instead; FILE may be an HF directory or config.json.",
                    ),
                    crate::cli::value(
                        "board",
                        "SIZE",
                        "With --memory: a board's memory (16GB, 11.5GiB, or bytes): the longest --ctx whose arena fits beside the weights.",
                    )
                    .value_parser(crate::cli::byte_size())
                    .requires("memory"),
                ]),
            LogitsArgs::command(),
            PerplexityArgs::command(),
            ImatrixArgs::command(),
            ServeArgs::command(),
            SchemaArgs::command(),
            Command::new("verify")
                .about("Recompute a VQF file's checksum; exit 0 when it matches.")
                .arg(file_arg()),
        ])
}

/// `<FILE>`: a VQF file, required.
fn file_arg() -> Arg {
    Arg::new("file")
        .value_name("FILE")
        .required(true)
        .value_parser(value_parser!(PathBuf))
        .help("The VQF file.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bench, convert, generate, logits, serve};

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn values_in_every_spelling() {
        for args in [
            &["m", "-p", "x", "--n-predict", "7"][..],
            &["m", "-p", "x", "--n-predict=7"],
            &["-p", "x", "-n", "7", "m"],
            &["-px", "-n7", "m"],
            &["-p=x", "-n=7", "m"],
        ] {
            let r = generate::RunArgs::parse(&argv(args)).unwrap();
            assert_eq!(r.n_predict, 7, "{args:?}");
            assert_eq!(r.prompt, "x", "{args:?}");
            assert_eq!(r.model, PathBuf::from("m"), "{args:?}");
        }
        // A prompt or a system prompt may start with a dash.
        let r = generate::RunArgs::parse(&argv(&["m", "-p", "-x", "--system", "--raw"])).unwrap();
        assert_eq!(
            (r.prompt.as_str(), r.system.as_deref()),
            ("-x", Some("--raw"))
        );
        assert!(!r.raw);
    }

    #[test]
    fn the_commands_defaults() {
        let r = generate::RunArgs::parse(&argv(&["m", "-p", "hi"])).unwrap();
        assert_eq!((r.n_predict, r.sample.temp, r.sample.top_k), (256, 0.8, 40));
        assert_eq!((r.sample.top_p, r.sample.min_p), (0.95, 0.05));
        assert_eq!((r.sample.repeat_penalty, r.sample.seed), (1.0, 0x5eed));
        assert_eq!(
            (r.engine.threads, r.engine.ctx, r.engine.prefill_q8),
            (None, None, true)
        );
        assert!(!(r.raw || r.think || r.no_think || r.ids || r.engine.no_pin || r.engine.kv_f32));
        assert!(r.images.is_empty() && r.image_max_pixels.is_none());
        let r = generate::RunArgs::parse(&argv(&[
            "--prefill-q8",
            "false",
            "-t2",
            "--seed=7",
            "--kv-f32",
            "m",
            "-p",
            "hi",
            "--think",
            "--image",
            "a.png",
            "--image=b,c.png",
        ]))
        .unwrap();
        assert_eq!((r.engine.threads, r.sample.seed), (Some(2), 7));
        assert!(!r.engine.prefill_q8 && r.engine.kv_f32 && r.think);
        assert_eq!(r.images, [PathBuf::from("a.png"), PathBuf::from("b,c.png")]);
        let c = generate::ChatArgs::parse(&argv(&["m"])).unwrap();
        assert_eq!((c.n_predict, c.system), (1024, None));
        assert!(bench::BenchArgs::parse(&[]).is_ok());
        assert!(convert::ConvertArgs::parse(&argv(&["src", "-o", "out"])).is_ok());
        let l = logits::LogitsArgs::parse(&argv(&["m", "--tokens", "1, 2", "--tokens", "3"]));
        assert_eq!(l.unwrap().tokens, [1, 2, 3]);
        assert!(logits::LogitsArgs::parse(&argv(&["m"])).is_err());
        let s = serve::ServeArgs::parse(&argv(&["m", "--prefill-q8", "false"])).unwrap();
        assert!(!s.engine.prefill_q8);
        assert_eq!((s.port, s.parallel, s.queue), (8080, 1, 16));
    }

    #[test]
    fn the_sampling_defaults_are_the_samplers() {
        let d = kestrel_core::sampler::SamplerConfig::default();
        let r = generate::RunArgs::parse(&argv(&["m", "-p", "hi"])).unwrap();
        assert_eq!(
            format!("{:?}", r.sample.config().unwrap()),
            format!("{d:?}")
        );
        let help = generate::RunArgs::command().render_help().to_string();
        for (flag, default) in [
            ("--temp <F>", d.temperature.to_string()),
            ("--top-k <N>", d.top_k.to_string()),
            ("--top-p <F>", d.top_p.to_string()),
            ("--min-p <F>", d.min_p.to_string()),
            ("--repeat-penalty <F>", d.repeat_penalty.to_string()),
            ("--seed <N>", d.seed.to_string()),
        ] {
            let line = help.lines().find(|l| l.contains(flag)).unwrap();
            assert!(line.ends_with(&format!("[default: {default}]")), "{line}");
        }
    }

    #[test]
    fn errors_name_the_flag() {
        use clap::error::ErrorKind;
        let error = |args: &[&str]| match generate::RunArgs::parse(&argv(args)) {
            Err(e) => (e.kind(), e.to_string()),
            Ok(_) => panic!("{args:?}: parsed"),
        };
        let (kind, text) = error(&["m", "-p", "x", "--thinkk"]);
        assert_eq!(kind, ErrorKind::UnknownArgument);
        assert!(
            text.contains("'--thinkk'") && text.contains("'--think'"),
            "{text}"
        );
        let (kind, text) = error(&["m", "-p", "x", "-t", "0"]);
        assert_eq!(kind, ErrorKind::ValueValidation);
        assert!(
            text.contains("'--threads <N>': must be at least 1"),
            "{text}"
        );
        let (kind, text) = error(&["m", "-p", "x", "-n", "1", "-n", "2"]);
        assert_eq!(kind, ErrorKind::ArgumentConflict);
        assert!(text.contains("--n-predict"), "{text}");
        let (kind, text) = error(&["m", "--prompt"]);
        assert_eq!(kind, ErrorKind::InvalidValue);
        assert!(text.contains("--prompt <TEXT>"), "{text}");
        let (kind, _) = error(&["m", "-p", "x", "--raw=yes"]);
        assert_eq!(kind, ErrorKind::TooManyValues);
    }
}
