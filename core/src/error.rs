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
    /// A file is not well formed: a field runs past the end, holds an
    /// impossible value, or contradicts another field.
    Malformed {
        /// What is wrong.
        what: &'static str,
        /// The byte offset in the file where the offending field starts.
        at: u64,
    },
    /// A file uses something this build does not support (a GGUF version, a
    /// ggml type that cannot be dequantized).
    Unsupported {
        /// What is unsupported.
        what: &'static str,
        /// The value found.
        value: u64,
    },
    /// One tensor of a GGUF file is invalid. `at` is the byte offset of its
    /// info record, which starts with its name:
    /// [`crate::gguf::error_tensor_name`] reads the name back for a message.
    BadTensor {
        /// What is wrong.
        what: &'static str,
        /// The tensor's position in the file's tensor list.
        index: u64,
        /// The byte offset of the tensor's info record (its name).
        at: u64,
        /// The offending value (a type id, a dimension, an offset, ...).
        value: u64,
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
            Error::Malformed { what, at } => write!(f, "malformed file at byte {at}: {what}"),
            Error::Unsupported { what, value } => write!(f, "unsupported {what}: {value}"),
            Error::BadTensor {
                what,
                index,
                at,
                value,
            } => write!(
                f,
                "tensor #{index} (info at byte {at}): {what} (value {value})"
            ),
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
