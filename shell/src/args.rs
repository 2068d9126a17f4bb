//! The command line, parsed by hand (a parser crate cost ~90 KB of the
//! shipped binary: docs/size.md).
//!
//! Each command is a [`Command`]: a static table of its positional arguments
//! ([`Pos`]) and options ([`Opt`]). The table is both the grammar and the
//! `--help` text, so a flag cannot be parsed without being documented.
//! [`Command::parse`] turns the arguments after the command's name into
//! [`Matches`]; the command's `Args::parse` then reads typed values from them.
//!
//! The grammar (clap's, for the parts Kestrel uses):
//!
//! * `--name value`, `--name=value`, `-s value`, `-svalue`, `-s=value`; the
//!   value after a space is taken as is, even when it starts with `-`;
//! * a switch ([`Opt::switch`]) takes no value; a boolean *value* is spelled
//!   out (`--prefill-q8 false`);
//! * options may come before, between and after positionals; `--` ends the
//!   options; `-h`/`--help` prints the help;
//! * an option given twice is an error unless it is [`Opt::repeated`].
//!
//! Errors are one line naming the flag, and exit with code 2 ([`Stop`]).
//!
//! Adding an option: one row in the command's table, e.g.
//!
//! ```text
//! Opt::value("image", "PATH", "An image for the prompt (repeatable).").repeated(),
//! ```
//!
//! and one line in its `parse`: `images: m.all("image")?`. The accessors:
//! [`Matches::flag`] (a switch), [`Matches::get`] (a value, else the table's
//! default), [`Matches::opt`] (an optional value), [`Matches::all`] (every
//! occurrence of a repeated option) and [`Matches::list`] (the same, each
//! split at commas). Positionals are read by name with the same accessors.
//!
//! Adding a command: a struct with `pub const COMMAND: Command` and
//! `pub fn parse(argv: &[String]) -> Result<Self, Stop>` (see
//! `logits::LogitsArgs`), then one entry in `COMMANDS` and one arm in the
//! `match` of `main.rs`. Option groups shared by several commands
//! (`EngineArgs::OPTS`, `SampleArgs::OPTS`) are listed in `Command::opts`.

use std::fmt::Display;
use std::process::ExitCode;
use std::str::FromStr;

/// What an option takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Nothing: present or not.
    Switch,
    /// One value; the placeholder shown in the help (`N`, `PATH`).
    Value(&'static str),
    /// A value, and the option may be given several times.
    Repeated(&'static str),
}

/// One option: a row of a command's table.
#[derive(Clone, Copy, Debug)]
pub struct Opt {
    /// The long name, without `--`; also the key to read it by.
    pub long: &'static str,
    pub short: Option<char>,
    pub kind: Kind,
    /// Used when the option is absent; parsed like a given value and shown
    /// in the help.
    pub default: Option<&'static str>,
    pub required: bool,
    /// One line.
    pub help: &'static str,
}

impl Opt {
    /// An option without a value (`--raw`).
    pub const fn switch(long: &'static str, help: &'static str) -> Opt {
        Opt {
            long,
            short: None,
            kind: Kind::Switch,
            default: None,
            required: false,
            help,
        }
    }

    /// An option with a value (`--temp 0.8`); `placeholder` names the value
    /// in the help.
    pub const fn value(long: &'static str, placeholder: &'static str, help: &'static str) -> Opt {
        Opt {
            kind: Kind::Value(placeholder),
            ..Opt::switch(long, help)
        }
    }

    pub const fn short(self, c: char) -> Opt {
        Opt {
            short: Some(c),
            ..self
        }
    }

    pub const fn default(self, value: &'static str) -> Opt {
        Opt {
            default: Some(value),
            ..self
        }
    }

    pub const fn required(self) -> Opt {
        Opt {
            required: true,
            ..self
        }
    }

    /// May be given several times; read with [`Matches::all`] or
    /// [`Matches::list`].
    pub const fn repeated(self) -> Opt {
        let kind = match self.kind {
            Kind::Value(p) | Kind::Repeated(p) => Kind::Repeated(p),
            Kind::Switch => Kind::Switch,
        };
        Opt { kind, ..self }
    }

    /// `--name <P>` (or `--name`), as in errors.
    fn display(&self) -> String {
        match self.kind {
            Kind::Switch => format!("--{}", self.long),
            Kind::Value(p) | Kind::Repeated(p) => format!("--{} <{p}>", self.long),
        }
    }
}

/// How many values a positional argument takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    One,
    Optional,
    /// All the remaining ones (zero or more).
    Many,
}

/// A positional argument: `name` is its key and, upper-cased, its
/// placeholder.
#[derive(Clone, Copy, Debug)]
pub struct Pos {
    pub name: &'static str,
    pub count: Count,
    pub help: &'static str,
}

impl Pos {
    pub const fn one(name: &'static str, help: &'static str) -> Pos {
        Pos {
            name,
            count: Count::One,
            help,
        }
    }

    pub const fn optional(name: &'static str, help: &'static str) -> Pos {
        Pos {
            count: Count::Optional,
            ..Pos::one(name, help)
        }
    }

    pub const fn many(name: &'static str, help: &'static str) -> Pos {
        Pos {
            count: Count::Many,
            ..Pos::one(name, help)
        }
    }

    fn display(&self) -> String {
        let n = self.name.to_ascii_uppercase();
        match self.count {
            Count::One => format!("<{n}>"),
            Count::Optional => format!("[{n}]"),
            Count::Many => format!("[{n}]..."),
        }
    }
}

/// A subcommand: its name, one line about it, its positionals and its
/// option groups (its own, then shared ones).
#[derive(Clone, Copy, Debug)]
pub struct Command {
    pub name: &'static str,
    pub about: &'static str,
    pub positionals: &'static [Pos],
    pub opts: &'static [&'static [Opt]],
}

/// Why parsing stopped without arguments to run with.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// Text the user asked for (`--help`, `--version`): stdout, exit 0.
    Help(String),
    /// A usage error (one line, or the help when no command is given):
    /// stderr, exit 2.
    Error(String),
}

impl Stop {
    /// Prints the text where it belongs; the process's exit code.
    pub fn exit(self) -> ExitCode {
        match self {
            Stop::Help(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Stop::Error(msg) => {
                eprintln!("{}", msg.trim_end());
                ExitCode::from(2)
            }
        }
    }
}

/// The process's arguments after the program name. Not UTF-8: an error.
pub fn from_env() -> Result<Vec<String>, Stop> {
    std::env::args_os()
        .skip(1)
        .map(|a| {
            a.into_string().map_err(|a| {
                Stop::Error(format!(
                    "kestrel: argument {} is not valid UTF-8",
                    a.to_string_lossy()
                ))
            })
        })
        .collect()
}

impl Command {
    fn options(&self) -> impl Iterator<Item = &'static Opt> {
        self.opts.iter().flat_map(|g| g.iter())
    }

    fn error(&self, msg: impl Display) -> Stop {
        Stop::Error(format!(
            "kestrel {}: {msg} (see 'kestrel {} --help')",
            self.name, self.name
        ))
    }

    /// Parses `argv` (the arguments after the command's name).
    pub fn parse(&'static self, argv: &[String]) -> Result<Matches, Stop> {
        let mut found: Vec<(&'static str, String)> = Vec::new();
        let mut positional: Vec<&String> = Vec::new();
        let mut args = argv.iter();
        let mut options_ended = false;
        while let Some(arg) = args.next() {
            if options_ended || arg == "-" || !arg.starts_with('-') {
                positional.push(arg);
                continue;
            }
            if arg == "--" {
                options_ended = true;
                continue;
            }
            if arg == "-h" || arg == "--help" {
                return Err(Stop::Help(self.help()));
            }
            // The option and a value attached to it (`--n=v`, `-sv`, `-s=v`).
            let (opt, attached) = if let Some(long) = arg.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (long, None),
                };
                let opt = self.options().find(|o| o.long == name);
                (
                    opt.ok_or_else(|| self.error(format!("unknown flag --{name}")))?,
                    value,
                )
            } else {
                let mut chars = arg[1..].chars();
                let c = chars.next().unwrap_or('-');
                let rest = chars.as_str();
                let value = (!rest.is_empty()).then(|| rest.strip_prefix('=').unwrap_or(rest));
                let opt = self.options().find(|o| o.short == Some(c));
                (
                    opt.ok_or_else(|| self.error(format!("unknown flag -{c}")))?,
                    value,
                )
            };
            let value = match (opt.kind, attached) {
                (Kind::Switch, None) => String::new(),
                (Kind::Switch, Some(_)) => {
                    return Err(self.error(format!("--{} takes no value", opt.long)))
                }
                (_, Some(v)) => v.to_string(),
                (_, None) => match args.next() {
                    Some(v) => v.clone(),
                    None => return Err(self.error(format!("{} needs a value", opt.display()))),
                },
            };
            let repeatable = matches!(opt.kind, Kind::Repeated(_));
            if !repeatable && found.iter().any(|(k, _)| *k == opt.long) {
                return Err(self.error(format!("--{} given more than once", opt.long)));
            }
            found.push((opt.long, value));
        }
        let mut rest = positional.into_iter();
        for p in self.positionals {
            match p.count {
                Count::One => match rest.next() {
                    Some(v) => found.push((p.name, v.clone())),
                    None => return Err(self.error(format!("missing {}", p.display()))),
                },
                Count::Optional => found.extend(rest.next().map(|v| (p.name, v.clone()))),
                Count::Many => found.extend(rest.by_ref().map(|v| (p.name, v.clone()))),
            }
        }
        if let Some(extra) = rest.next() {
            return Err(self.error(format!("unexpected argument '{extra}'")));
        }
        if let Some(o) = self
            .options()
            .find(|o| o.required && !found.iter().any(|(k, _)| *k == o.long))
        {
            return Err(self.error(format!("missing {}", o.display())));
        }
        Ok(Matches { cmd: self, found })
    }

    /// `kestrel NAME --help`.
    pub fn help(&self) -> String {
        let mut usage = format!("kestrel {}", self.name);
        if self.options().any(|o| !o.required) {
            usage += " [OPTIONS]";
        }
        for o in self.options().filter(|o| o.required) {
            usage += &format!(" {}", o.display());
        }
        for p in self.positionals {
            usage += &format!(" {}", p.display());
        }
        let mut text = format!("{}\n\nUsage: {usage}\n", self.about);
        if !self.positionals.is_empty() {
            let rows: Vec<(String, String)> = self
                .positionals
                .iter()
                .map(|p| (p.display(), p.help.to_string()))
                .collect();
            text += &format!("\nArguments:\n{}", table(&rows));
        }
        let mut rows: Vec<(String, String)> = self
            .options()
            .map(|o| {
                let short = o.short.map_or("    ".into(), |c| format!("-{c}, "));
                let mut help = o.help.to_string();
                if o.required {
                    help += " (required)";
                }
                if matches!(o.kind, Kind::Repeated(_)) {
                    help += " (repeatable)";
                }
                if let Some(d) = o.default {
                    help += &format!(" [default: {d}]");
                }
                (format!("{short}{}", o.display()), help)
            })
            .collect();
        rows.push(("-h, --help".into(), "Print this help.".into()));
        text + &format!("\nOptions:\n{}", table(&rows))
    }
}

/// Two aligned columns.
fn table(rows: &[(String, String)]) -> String {
    let w = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(l, r)| format!("  {l:w$}  {r}\n"))
        .collect()
}

/// `kestrel --help`: the commands, one line each.
pub fn top_help(about: &str, commands: &[&Command]) -> String {
    let mut rows: Vec<(String, String)> = commands
        .iter()
        .map(|c| (c.name.to_string(), c.about.to_string()))
        .collect();
    rows.push(("help".into(), "Print this help, or a command's.".into()));
    let flags = [
        ("-h, --help".to_string(), "Print this help.".to_string()),
        (
            "-V, --version".to_string(),
            "Print the version.".to_string(),
        ),
    ];
    format!(
        "{about}\n\nUsage: kestrel <COMMAND> [ARGS]... (kestrel <COMMAND> --help for its flags)\n\nCommands:\n{}\nOptions:\n{}",
        table(&rows),
        table(&flags)
    )
}

/// What [`Command::parse`] found: `(key, value)` in the order given; the key
/// is an option's long name or a positional's name, a switch's value is "".
pub struct Matches {
    cmd: &'static Command,
    found: Vec<(&'static str, String)>,
}

impl Matches {
    fn values<'m>(&'m self, key: &'m str) -> impl Iterator<Item = &'m str> + 'm {
        self.found
            .iter()
            .filter(move |(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `--name <P>` or `<NAME>`, as in errors.
    fn display(&self, key: &str) -> String {
        match self.cmd.options().find(|o| o.long == key) {
            Some(o) => o.display(),
            None => format!("<{}>", key.to_ascii_uppercase()),
        }
    }

    fn parse_one<T: FromStr>(&self, key: &str, v: &str) -> Result<T, Stop>
    where
        T::Err: Display,
    {
        v.parse().map_err(|e| {
            self.cmd.error(format!(
                "invalid value '{v}' for {}: {e}",
                self.display(key)
            ))
        })
    }

    /// Whether the switch `key` was given.
    pub fn flag(&self, key: &str) -> bool {
        self.values(key).next().is_some()
    }

    /// The value of `key`, else its default (an option without either is a
    /// mistake in the table, reported as an error).
    pub fn get<T: FromStr>(&self, key: &str) -> Result<T, Stop>
    where
        T::Err: Display,
    {
        let default = self
            .cmd
            .options()
            .find(|o| o.long == key)
            .and_then(|o| o.default);
        match self.values(key).next().or(default) {
            Some(v) => self.parse_one(key, v),
            None => Err(self.cmd.error(format!("missing {}", self.display(key)))),
        }
    }

    /// The value of `key`, if given.
    pub fn opt<T: FromStr>(&self, key: &str) -> Result<Option<T>, Stop>
    where
        T::Err: Display,
    {
        self.values(key)
            .next()
            .map(|v| self.parse_one(key, v))
            .transpose()
    }

    /// Every value of a repeated option or a [`Count::Many`] positional.
    pub fn all<T: FromStr>(&self, key: &str) -> Result<Vec<T>, Stop>
    where
        T::Err: Display,
    {
        self.values(key).map(|v| self.parse_one(key, v)).collect()
    }

    /// As [`Matches::all`], each value split at commas (`--tokens 1,2,3`).
    pub fn list<T: FromStr>(&self, key: &str) -> Result<Vec<T>, Stop>
    where
        T::Err: Display,
    {
        self.values(key)
            .flat_map(|v| v.split(','))
            .map(|v| self.parse_one(key, v.trim()))
            .collect()
    }

    /// An error when both switches are given.
    pub fn conflict(&self, a: &str, b: &str) -> Result<(), Stop> {
        if self.flag(a) && self.flag(b) {
            return Err(self
                .cmd
                .error(format!("--{a} and --{b} cannot be used together")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: &[Opt] = &[
        Opt::value("count", "N", "How many.")
            .short('n')
            .default("3"),
        Opt::value("name", "TEXT", "A name."),
        Opt::value("must", "X", "Needed.").short('m').required(),
        Opt::switch("loud", "Shout."),
        Opt::switch("quiet", "Whisper."),
        Opt::value("on", "BOOL", "A boolean.").default("true"),
        Opt::value("image", "PATH", "An image.").repeated(),
        Opt::value("ids", "IDS", "Comma-separated ids.").repeated(),
    ];
    const CMD: Command = Command {
        name: "demo",
        about: "A demo.",
        positionals: &[Pos::one("model", "The model."), Pos::many("rest", "More.")],
        opts: &[OPTS],
    };

    fn parse(args: &[&str]) -> Result<Matches, Stop> {
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        CMD.parse(&argv)
    }

    fn error(args: &[&str]) -> String {
        match parse(args) {
            Err(Stop::Error(e)) => e,
            Err(Stop::Help(_)) => panic!("{args:?}: help"),
            Ok(_) => panic!("{args:?}: parsed"),
        }
    }

    #[test]
    fn values_in_every_spelling() {
        for args in [
            &["m", "-m", "x", "--count", "7"][..],
            &["m", "-m", "x", "--count=7"],
            &["-m", "x", "-n", "7", "m"],
            &["-mx", "-n7", "m"],
            &["-m=x", "-n=7", "m"],
        ] {
            let m = parse(args).unwrap();
            assert_eq!(m.get::<usize>("count").unwrap(), 7, "{args:?}");
            assert_eq!(m.get::<String>("must").unwrap(), "x", "{args:?}");
            assert_eq!(m.get::<String>("model").unwrap(), "m", "{args:?}");
        }
    }

    #[test]
    fn defaults_absent_options_and_positionals() {
        let m = parse(&["model", "-m", "x", "a", "b"]).unwrap();
        assert_eq!(m.get::<usize>("count").unwrap(), 3);
        assert_eq!(m.opt::<String>("name").unwrap(), None);
        assert!(!m.flag("loud"));
        assert!(m.get::<bool>("on").unwrap());
        assert_eq!(m.all::<String>("rest").unwrap(), ["a", "b"]);
        assert!(m.all::<String>("image").unwrap().is_empty());
    }

    #[test]
    fn a_value_may_start_with_a_dash() {
        let m = parse(&["m", "-m", "-x", "--name", "--loud"]).unwrap();
        assert_eq!(m.get::<String>("must").unwrap(), "-x");
        assert_eq!(m.get::<String>("name").unwrap(), "--loud");
        assert!(!m.flag("loud"));
        let m = parse(&["-m", "x", "--", "-m"]).unwrap();
        assert_eq!(m.get::<String>("model").unwrap(), "-m");
    }

    #[test]
    fn bool_with_an_explicit_value() {
        let m = parse(&["m", "-m", "x", "--on", "false"]).unwrap();
        assert!(!m.get::<bool>("on").unwrap());
        let m = parse(&["m", "-m", "x", "--on=true"]).unwrap();
        assert!(m.get::<bool>("on").unwrap());
        let m = parse(&["m", "-m", "x", "--on", "yes"]).unwrap();
        let e = match m.get::<bool>("on") {
            Err(Stop::Error(e)) => e,
            _ => panic!(),
        };
        assert!(e.contains("invalid value 'yes' for --on <BOOL>"), "{e}");
    }

    #[test]
    fn repeated_options_and_comma_lists() {
        let m = parse(&[
            "m",
            "-m",
            "x",
            "--image",
            "a.png",
            "--ids",
            "1,2",
            "--image=b,c.png",
            "--ids",
            "3",
        ])
        .unwrap();
        assert_eq!(m.all::<String>("image").unwrap(), ["a.png", "b,c.png"]);
        assert_eq!(m.list::<u32>("ids").unwrap(), [1, 2, 3]);
    }

    #[test]
    fn errors_name_the_flag() {
        let e = error(&["m", "-m", "x", "--colour", "red"]);
        assert!(e.starts_with("kestrel demo: unknown flag --colour"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        assert!(error(&["m", "-m", "x", "--colour=red"]).contains("unknown flag --colour ("));
        assert!(error(&["m", "-m", "x", "-z"]).contains("unknown flag -z"));
        assert!(error(&["m", "-m"]).contains("--must <X> needs a value"));
        assert!(error(&["m", "-m", "x", "--count"]).contains("--count <N> needs a value"));
        assert!(error(&["m"]).contains("missing --must <X>"));
        assert!(error(&["-m", "x"]).contains("missing <MODEL>"));
        assert!(error(&["m", "-m", "x", "--loud=yes"]).contains("--loud takes no value"));
        assert!(error(&["m", "-m", "x", "-n", "1", "-n", "2"]).contains("--count given more"));
        assert!(error(&["m", "-m", "x", "--loud", "--loud"]).contains("--loud given more"));
        let m = parse(&["m", "-m", "x", "-n", "many"]).unwrap();
        match m.get::<usize>("count") {
            Err(Stop::Error(e)) => assert!(
                e.contains("invalid value 'many' for --count <N>: invalid digit"),
                "{e}"
            ),
            _ => panic!(),
        }
        let m = parse(&["m", "-m", "x", "--loud", "--quiet"]).unwrap();
        assert_eq!(
            m.conflict("loud", "quiet"),
            Err(Stop::Error(
                "kestrel demo: --loud and --quiet cannot be used together (see 'kestrel demo --help')"
                    .into()
            ))
        );
        assert!(parse(&["m", "-m", "x", "--quiet"])
            .unwrap()
            .conflict("loud", "quiet")
            .is_ok());
    }

    #[test]
    fn help_lists_every_flag_with_its_default() {
        for args in [&["--help"][..], &["m", "-h"], &["-n", "x", "--help"]] {
            let Err(Stop::Help(text)) = parse(args) else {
                panic!("{args:?}")
            };
            assert!(
                text.starts_with(
                    "A demo.\n\nUsage: kestrel demo [OPTIONS] --must <X> <MODEL> [REST]...\n"
                ),
                "{text}"
            );
            for o in OPTS {
                let line = text
                    .lines()
                    .find(|l| l.starts_with("  ") && l.contains(&o.display()))
                    .unwrap();
                assert!(line.contains(o.help), "{line}");
                if let Some(d) = o.default {
                    assert!(line.ends_with(&format!("[default: {d}]")), "{line}");
                }
            }
            assert!(text.contains("  -n, --count <N>  "), "{text}");
            assert!(text.contains("\n  <MODEL>    The model.\n"), "{text}");
        }
    }

    #[test]
    fn the_commands_tables_and_defaults() {
        use crate::{bench, convert, generate, logits};
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let r = generate::RunArgs::parse(&argv(&["m", "-p", "hi"])).unwrap();
        assert_eq!((r.n_predict, r.sample.temp, r.sample.top_k), (256, 0.8, 40));
        assert_eq!((r.sample.top_p, r.sample.min_p), (0.95, 0.05));
        assert_eq!((r.sample.repeat_penalty, r.sample.seed), (1.0, 0x5eed));
        assert_eq!(
            (r.engine.threads, r.engine.ctx, r.engine.prefill_q8),
            (None, None, true)
        );
        assert!(!(r.raw || r.think || r.no_think || r.ids || r.engine.no_pin || r.engine.kv_f32));
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
        ]))
        .unwrap();
        assert_eq!((r.engine.threads, r.sample.seed), (Some(2), 7));
        assert!(!r.engine.prefill_q8 && r.engine.kv_f32 && r.think);
        let c = generate::ChatArgs::parse(&argv(&["m"])).unwrap();
        assert_eq!((c.n_predict, c.system), (1024, None));
        assert!(bench::BenchArgs::parse(&[]).is_ok());
        assert!(convert::ConvertArgs::parse(&argv(&["src", "-o", "out"])).is_ok());
        assert!(logits::LogitsArgs::parse(&argv(&["m", "--tokens", "1,2"])).is_ok());
        assert!(logits::LogitsArgs::parse(&argv(&["m"])).is_err());
    }
}
