//! The command line's building blocks, defined with clap's builder API: the
//! [`CommandArgs`] trait, shared arguments and value parsers, and the typed
//! getters. Every command module imports these; the table of commands
//! (`crate::commands::command`) sits above the commands and only lists them,
//! so imports go one way.
//!
//! Each command that takes more than a file has an args struct implementing
//! [`CommandArgs`]: its `command()` is the definition, its `from_matches`
//! reads the typed values clap parsed (every value is checked by its
//! `value_parser` while parsing, so reading cannot fail). Option groups
//! shared by several commands are functions returning their `Arg`s:
//! `EngineArgs::args` (run, chat, logits, serve; bench takes its threads and
//! no-pin flags), `SampleArgs::args` (run, chat), `vision::image_args` (run,
//! logits).
//!
//! Adding an option: one `Arg` in the command's definition and one field
//! read in its `from_matches`. Adding a command: a struct implementing
//! [`CommandArgs`], one entry in `crate::commands::command` and one arm in `main.rs`.
//!
//! clap's default features are off: no colour, no terminal-width wrapping,
//! no derive macros (their cost in bytes: docs/size.md).

use clap::builder::ValueParser;
use clap::{value_parser, Arg, ArgAction, ArgMatches, Command};
use std::path::PathBuf;

/// A command with its own args struct.
pub trait CommandArgs: Sized {
    /// The subcommand's definition (name, help, arguments).
    fn command() -> Command;

    /// The values of a successful parse of [`CommandArgs::command`].
    fn from_matches(m: &ArgMatches) -> Self;

    /// Parses the arguments after the command's name (for tests and callers
    /// that hold an argument list).
    fn parse(argv: &[String]) -> Result<Self, clap::Error> {
        let m = Self::command()
            .no_binary_name(true)
            .try_get_matches_from(argv)?;
        Ok(Self::from_matches(&m))
    }
}

/// `<MODEL>`: the VQF model, required.
pub fn model_arg() -> Arg {
    Arg::new("model")
        .value_name("MODEL")
        .required(true)
        .value_parser(value_parser!(PathBuf))
        .help("The VQF model.")
}

/// `--name`: present or not.
pub fn switch(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .action(ArgAction::SetTrue)
        .help(help)
}

/// `--name <VALUE>`: one value, `placeholder` naming it in the help.
pub fn value(name: &'static str, placeholder: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name(placeholder)
        .action(ArgAction::Set)
        .help(help)
}

/// A token id (read with [`token_ids`]).
pub fn token_id() -> ValueParser {
    in_range(0, u32::MAX as usize)
}

/// A size in bytes: a whole number, or a number (decimals allowed) with a
/// unit: `K`, `M`, `G`, `T` (with or without a final `B`) are powers of
/// 1000, `KiB`, `MiB`, `GiB`, `TiB` of 1024 (`16GB`, `11.5GiB`, `900000`).
pub fn byte_size() -> ValueParser {
    ValueParser::new(|s: &str| parse_byte_size(s))
}

/// [`byte_size`]'s rule.
pub fn parse_byte_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "K" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "T" | "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        u => {
            return Err(format!(
                "unknown unit '{u}' (K, M, G, T, KiB, MiB, GiB, TiB)"
            ))
        }
    };
    // The core's decimal parser (std's would link its tables: docs/size.md).
    let n = kestrel_core::decimal::parse_f64(num)
        .ok_or_else(|| format!("'{s}' is not a size (for example 16GB or 11.5GiB)"))?;
    let bytes = (n * scale).round();
    if !(1.0..=1e18).contains(&bytes) {
        return Err(format!("'{s}' is out of range (1 byte to 1 EB)"));
    }
    Ok(bytes as u64)
}

/// Every token id given to `name` (parsed by [`token_id`], so each fits).
pub fn token_ids(m: &ArgMatches, name: &str) -> Vec<u32> {
    all::<usize>(m, name)
        .into_iter()
        .map(|t| t as u32)
        .collect()
}

/// A whole number from `lo` to `hi` (`usize::MAX`: no upper bound); spaces
/// around it are allowed (`--tokens "1, 2"`).
pub fn in_range(lo: usize, hi: usize) -> ValueParser {
    ValueParser::new(move |s: &str| match s.trim().parse::<usize>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        Ok(_) if hi == usize::MAX => Err(format!("must be at least {lo}")),
        Ok(_) => Err(format!("must be {lo} to {hi}")),
        Err(e) => Err(e.to_string()),
    })
}

/// A finite decimal number (`0.7`, `.5`, `1e-3`), rounded once to the
/// nearest f32 by the core's parser (std's would link a 10 KB table).
pub fn float32() -> ValueParser {
    ValueParser::new(|s: &str| {
        kestrel_core::decimal::parse_f32(s.trim())
            .filter(|x| x.is_finite())
            .ok_or_else(|| "not a finite decimal number".to_string())
    })
}

/// A count that must be at least 1.
pub fn at_least_one() -> ValueParser {
    in_range(1, usize::MAX)
}

/// The value of an option with a default or that is required (clap
/// guarantees it is there).
pub fn get<T: Clone + Send + Sync + 'static>(m: &ArgMatches, name: &str) -> T {
    m.get_one::<T>(name)
        .cloned()
        .unwrap_or_else(|| unreachable!("--{name} has a default or is required"))
}

/// The value of an option, if given.
pub fn opt<T: Clone + Send + Sync + 'static>(m: &ArgMatches, name: &str) -> Option<T> {
    m.get_one::<T>(name).cloned()
}

/// Every value of a repeated option or a many-valued positional.
pub fn all<T: Clone + Send + Sync + 'static>(m: &ArgMatches, name: &str) -> Vec<T> {
    m.get_many::<T>(name)
        .map(|v| v.cloned().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::parse_byte_size;

    #[test]
    fn byte_sizes_take_decimal_and_binary_units() {
        assert_eq!(parse_byte_size("900000"), Ok(900_000));
        assert_eq!(parse_byte_size("16GB"), Ok(16_000_000_000));
        assert_eq!(parse_byte_size("16G"), Ok(16_000_000_000));
        assert_eq!(parse_byte_size("11.5GiB"), Ok(12_348_030_976));
        assert_eq!(parse_byte_size(" 4 MiB "), Ok(4 << 20));
        assert_eq!(parse_byte_size("1KiB"), Ok(1024));
        for bad in [
            "",
            "GB",
            "1.2.3GB",
            "12XB",
            "0",
            "-1GB",
            "1e30",
            "2000000TB",
        ] {
            assert!(parse_byte_size(bad).is_err(), "{bad}");
        }
    }
}
