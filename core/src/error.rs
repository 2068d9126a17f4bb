//! One error type for the whole core. Every variant names what is wrong with a
//! `&'static str` label, so a caller can print one clear line.

use core::fmt;

/// Everything that can go wrong in the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// A length is not a whole number of 32-weight blocks.
    NotBlockAligned {
        /// What was being measured.
        what: &'static str,
        /// The offending length (in weights).
        len: usize,
    },
    /// Two sizes that must agree do not.
    SizeMismatch {
        /// What was being compared.
        what: &'static str,
        /// The size the operation needs.
        expected: usize,
        /// The size it was given.
        actual: usize,
    },
    /// A size computation overflowed `usize`.
    Overflow {
        /// What was being computed.
        what: &'static str,
    },
    /// A parameter is outside the range the operation supports.
    OutOfRange {
        /// Which parameter.
        what: &'static str,
        /// Its value.
        value: usize,
        /// The largest value allowed.
        max: usize,
    },
    /// A JSON document breaks RFC 8259 (or a limit of this reader).
    Json {
        /// What is wrong.
        what: &'static str,
        /// Byte offset in the input where the problem was found.
        offset: usize,
    },
    /// A safetensors file breaks the format.
    Safetensors {
        /// What is wrong.
        what: &'static str,
        /// Byte offset in the file of the offending item (0 when it concerns
        /// the whole file).
        offset: usize,
    },
    /// An output buffer is too small for the result.
    BufferTooSmall {
        /// What was being written.
        what: &'static str,
        /// The length needed.
        needed: usize,
        /// The length given.
        len: usize,
    },
    /// An operation does not support this kind of input.
    Unsupported {
        /// What is not supported.
        what: &'static str,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::NotBlockAligned { what, len } => {
                write!(f, "{what}: length {len} is not a multiple of 32")
            }
            Error::SizeMismatch {
                what,
                expected,
                actual,
            } => write!(f, "{what}: expected {expected}, got {actual}"),
            Error::Overflow { what } => write!(f, "{what}: size overflows"),
            Error::OutOfRange { what, value, max } => {
                write!(f, "{what}: {value} is out of range (at most {max})")
            }
            Error::Json { what, offset } => write!(f, "{what} (at byte {offset})"),
            Error::Safetensors { what, offset } => write!(f, "{what} (at byte {offset})"),
            Error::BufferTooSmall { what, needed, len } => {
                write!(f, "{what}: buffer of {len} bytes, {needed} needed")
            }
            Error::Unsupported { what } => write!(f, "{what}: not supported"),
        }
    }
}

/// Checks that `actual == expected`, naming `what` otherwise.
pub(crate) fn check_len(what: &'static str, expected: usize, actual: usize) -> Result<(), Error> {
    if expected == actual {
        Ok(())
    } else {
        Err(Error::SizeMismatch {
            what,
            expected,
            actual,
        })
    }
}

/// `a * b`, or an overflow error naming `what`.
pub(crate) fn mul(what: &'static str, a: usize, b: usize) -> Result<usize, Error> {
    a.checked_mul(b).ok_or(Error::Overflow { what })
}
