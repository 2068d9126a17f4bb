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
    /// The input ends before a structure it declares.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        need: u64,
        /// Bytes there are.
        have: u64,
    },
    /// The input does not start with the expected magic bytes.
    BadMagic {
        /// What kind of file was expected.
        what: &'static str,
    },
    /// The file is of a newer format version than this build reads.
    NewerVersion {
        /// The format.
        what: &'static str,
        /// The file's version.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A field holds a value the format does not allow.
    Malformed {
        /// Which field, and the rule it breaks.
        what: &'static str,
        /// Byte offset of the field in the input.
        at: u64,
    },
    /// A valid feature this build does not implement.
    Unsupported {
        /// What.
        what: &'static str,
        /// The value met (a type id, a version).
        value: u64,
    },
    /// The model configuration is missing something or is not sane.
    BadConfig {
        /// What is wrong.
        what: &'static str,
    },
    /// The tokenizer data is not valid.
    BadTokenizer {
        /// What is wrong.
        what: &'static str,
    },
    /// A tensor the model needs is not in the file.
    MissingTensor {
        /// Its role.
        role: &'static str,
        /// Its layer (0xFFFF: none).
        layer: u16,
    },
    /// A tensor has the wrong shape for the model config.
    BadShape {
        /// Its role.
        role: &'static str,
        /// Its layer (0xFFFF: none).
        layer: u16,
    },
    /// The caller's arena is smaller than the state needs.
    ArenaTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// The context (KV cache) has no room for more tokens.
    ContextFull {
        /// Positions the request needs.
        need: usize,
        /// Positions the cache holds.
        max: usize,
    },
    /// A Qwen3.5 step's row does not continue its slot's Gated DeltaNet
    /// state (which holds positions `0..holds`, and cannot be cut back as
    /// a KV cache can), nor start it at position 0.
    RecurrentState {
        /// The sequence slot.
        slot: usize,
        /// The row's position.
        pos: usize,
        /// Tokens the state holds ([`crate::state::RECURRENT_LOST`]: left
        /// part-way by a failed or cancelled step).
        holds: usize,
    },
    /// A token id outside the vocabulary.
    BadToken {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab: u32,
    },
    /// The host failed to read or write (the host reports the details).
    Io {
        /// What was being done.
        what: &'static str,
    },
    /// A caller-provided buffer is too small for the result or the work.
    BufferTooSmall {
        /// Which buffer.
        what: &'static str,
        /// Entries needed (at least; for some work buffers the first size
        /// that was found short).
        need: usize,
        /// Entries it has.
        have: usize,
    },
    /// The caller's cancel flag stopped the operation.
    Cancelled,
    /// The caller's cancel flag stopped a prompt part-way: `fed` of its
    /// `of` tokens ran and stay cached.
    FeedCancelled {
        /// Tokens that ran (whole chunks).
        fed: usize,
        /// The prompt's tokens.
        of: usize,
    },
    /// A call came in the wrong order (e.g. a token pulled before a prompt
    /// was fed).
    NotReady {
        /// What is missing.
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
}

/// (Variants for files and formats.)
impl Error {
    /// A short category name, for tests and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::NotBlockAligned { .. } => "not-block-aligned",
            Error::SizeMismatch { .. } => "size-mismatch",
            Error::Overflow { .. } => "overflow",
            Error::OutOfRange { .. } => "out-of-range",
            Error::BufferTooSmall { .. } => "buffer-too-small",
            Error::Truncated { .. } => "truncated",
            Error::BadMagic { .. } => "bad-magic",
            Error::NewerVersion { .. } => "newer-version",
            Error::Malformed { .. } => "malformed",
            Error::Unsupported { .. } => "unsupported",
            Error::BadConfig { .. } => "bad-config",
            Error::BadTokenizer { .. } => "bad-tokenizer",
            Error::MissingTensor { .. } => "missing-tensor",
            Error::BadShape { .. } => "bad-shape",
            Error::Io { .. } => "io",
            Error::ArenaTooSmall { .. } => "arena-too-small",
            Error::ContextFull { .. } => "context-full",
            Error::RecurrentState { .. } => "recurrent-state",
            Error::BadToken { .. } => "bad-token",
            Error::Cancelled | Error::FeedCancelled { .. } => "cancelled",
            Error::NotReady { .. } => "not-ready",
            Error::BadTensor { .. } => "bad-tensor",
            Error::Json { .. } => "json",
            Error::Safetensors { .. } => "safetensors",
        }
    }
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
            Error::Truncated { what, need, have } => {
                write!(f, "{what}: truncated (needs {need} bytes, has {have})")
            }
            Error::BadMagic { what } => {
                write!(f, "{what}: wrong magic bytes (not this kind of file)")
            }
            Error::NewerVersion {
                what,
                found,
                supported,
            } => write!(
                f,
                "{what} version {found} is newer than this build supports ({supported})"
            ),
            Error::Malformed { what, at } => write!(f, "malformed {what} (at byte {at})"),
            Error::Unsupported { what, value } => write!(f, "unsupported {what} ({value})"),
            Error::BadConfig { what } => write!(f, "bad model config: {what}"),
            Error::BadTokenizer { what } => write!(f, "bad tokenizer: {what}"),
            Error::MissingTensor { role, layer } => {
                if layer == 0xFFFF {
                    write!(f, "missing tensor {role}")
                } else {
                    write!(f, "missing tensor blk.{layer}.{role}")
                }
            }
            Error::BadShape { role, layer } => {
                write!(f, "tensor {role} (layer {layer}) has the wrong shape")
            }
            Error::Io { what } => write!(f, "I/O error while {what}"),
            Error::ArenaTooSmall { need, have } => {
                write!(f, "arena too small: the state needs {need} bytes, got {have}")
            }
            Error::RecurrentState { slot, pos, holds } => write!(
                f,
                "slot {slot}: position {pos} does not follow the Gated DeltaNet state's \
                 {holds} tokens (2^64 - 1: left part-way by a failed step); feed from the start"
            ),
            Error::ContextFull { need, max } => write!(
                f,
                "context full: {need} positions needed, the KV cache holds {max} (open with a longer context, or start a new conversation)"
            ),
            Error::BadToken { id, vocab } => write!(f, "token id {id} is outside the vocabulary ({vocab})"),
            Error::BufferTooSmall { what, need, have } => {
                write!(f, "{what}: buffer too small (needs {need}, has {have})")
            }
            Error::OutOfRange { what, value, max } => {
                write!(f, "{what}: {value} is out of range (at most {max})")
            }
            Error::Cancelled => f.write_str("cancelled"),
            Error::FeedCancelled { fed, of } => write!(
                f,
                "cancelled after {fed} of {of} prompt tokens (cached)"
            ),
            Error::NotReady { what } => write!(f, "called out of order: {what}"),
            Error::BadTensor {
                what,
                index,
                at,
                value,
            } => write!(
                f,
                "tensor #{index} (info at byte {at}): {what} (value {value})"
            ),
            Error::Json { what, offset } => write!(f, "{what} (at byte {offset})"),
            Error::Safetensors { what, offset } => write!(f, "{what} (at byte {offset})"),
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
