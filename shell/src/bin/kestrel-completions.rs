//! Writes `kestrel`'s shell completion scripts, generated from the same
//! definitions the binary parses with ([`kestrel::commands::command`]):
//!
//! ```text
//! cargo run -p kestrel --features completions --bin kestrel-completions -- DIR
//! ```
//!
//! writes `DIR/kestrel.bash`, `DIR/_kestrel` (zsh) and `DIR/kestrel.fish`.
//! Built only with the `completions` feature: not part of the shipped binary.

use clap_complete::{generate_to, Shell};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: kestrel-completions DIR");
        return ExitCode::from(2);
    };
    let mut cmd = kestrel::commands::command();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        match generate_to(shell, &mut cmd, "kestrel", &dir) {
            Ok(path) => println!("{}", path.display()),
            Err(e) => {
                eprintln!("kestrel-completions: {}: {e}", dir.to_string_lossy());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
