//! The shell's one error type: what went wrong, with the context it
//! happened in (which file, which tensor, which request), printed as one
//! line: `model.vqf: tensor blk.3.attn_qkv: truncated ...`.

use std::fmt;

/// An error of a command, with its context.
#[derive(Debug)]
pub struct Error {
    /// What the shell was working on, outermost first.
    context: Vec<String>,
    cause: Cause,
}

/// What went wrong.
#[derive(Debug)]
enum Cause {
    /// The core refused (a malformed file, a shape, a full context).
    Core(kestrel_core::Error),
    /// The operating system refused (open, read, write, bind).
    Io(std::io::Error),
    /// An image could not be decoded.
    Image(kestrel_core::image::ImageError),
    /// Anything else, already worded.
    Message(String),
}

/// A shell result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error worded by the shell.
    pub fn msg(message: impl Into<String>) -> Error {
        Error {
            context: Vec::new(),
            cause: Cause::Message(message.into()),
        }
    }

    /// The error with `what` (a file, a tensor, a request) as its
    /// outermost context.
    pub fn context(mut self, what: impl fmt::Display) -> Error {
        self.context.insert(0, what.to_string());
        self
    }

    /// The core's error underneath, if the core refused.
    pub fn core(&self) -> Option<&kestrel_core::Error> {
        match &self.cause {
            Cause::Core(e) => Some(e),
            _ => None,
        }
    }

    /// The I/O error underneath, if the operating system refused.
    pub fn io(&self) -> Option<&std::io::Error> {
        match &self.cause {
            Cause::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// `s` in double quotes, escaped as Rust's `{:?}` writes a string (the
/// shipped binary prints no `Debug` output: `-Z fmt-debug=none`).
pub fn quoted(s: &str) -> String {
    format!("\"{}\"", s.escape_debug())
}

/// Numbers as `[a, b, c]` (likewise).
pub fn listed<T: fmt::Display>(items: &[T]) -> String {
    let parts: Vec<String> = items.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.context {
            write!(f, "{c}: ")?;
        }
        match &self.cause {
            // The command line's name for the longer context.
            Cause::Core(e @ kestrel_core::Error::ContextFull { .. }) => {
                write!(f, "{e}; --ctx sets it")
            }
            Cause::Core(e) => write!(f, "{e}"),
            Cause::Io(e) => write!(f, "{e}"),
            Cause::Image(e) => write!(f, "{e}"),
            Cause::Message(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

fn from_cause(cause: Cause) -> Error {
    Error {
        context: Vec::new(),
        cause,
    }
}

impl From<kestrel_core::Error> for Error {
    fn from(e: kestrel_core::Error) -> Error {
        from_cause(Cause::Core(e))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        from_cause(Cause::Io(e))
    }
}

impl From<kestrel_core::image::ImageError> for Error {
    fn from(e: kestrel_core::image::ImageError) -> Error {
        from_cause(Cause::Image(e))
    }
}

impl From<String> for Error {
    fn from(m: String) -> Error {
        Error::msg(m)
    }
}

impl From<&str> for Error {
    fn from(m: &str) -> Error {
        Error::msg(m)
    }
}

/// Adds context to a failing result: `std::fs::read(p).context(p.display())?`.
pub trait Context<T> {
    /// The error with `what` as its outermost context.
    fn context(self, what: impl fmt::Display) -> Result<T>;
    /// As [`Context::context`], the context computed only on failure.
    fn with_context<D: fmt::Display>(self, what: impl FnOnce() -> D) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.into().context(what))
    }

    fn with_context<D: fmt::Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.map_err(|e| e.into().context(what()))
    }
}
