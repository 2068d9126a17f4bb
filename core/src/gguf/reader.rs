//! A bounds-checked little-endian cursor over the file bytes. Every read
//! either returns the bytes it promised or a [`Error::Malformed`] naming the
//! field and the offset where it starts; nothing here can panic.

use crate::Error;

/// A read position in the file.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl core::fmt::Debug for Cursor<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Cursor {{ pos: {}, len: {} }}",
            self.pos,
            self.bytes.len()
        )
    }
}

impl<'a> Cursor<'a> {
    /// A cursor at byte `pos` of `bytes` (a position past the end makes every
    /// read fail).
    pub(crate) fn at(bytes: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { bytes, pos }
    }

    /// The current position.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes from `start` to the current position (empty if `start` is
    /// past it).
    pub(crate) fn since(&self, start: usize) -> &'a [u8] {
        self.bytes.get(start..self.pos).unwrap_or(&[])
    }

    /// Bytes left after the current position.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The error for a field named `what` that starts at `at`.
    pub(crate) fn err(what: &'static str, at: usize) -> Error {
        Error::Malformed {
            what,
            at: at as u64,
        }
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Error> {
        let at = self.pos;
        let end = at.checked_add(n).ok_or(Self::err(what, at))?;
        let s = self.bytes.get(at..end).ok_or(Self::err(what, at))?;
        self.pos = end;
        Ok(s)
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Error> {
        let at = self.pos;
        <[u8; N]>::try_from(self.take(N, what)?).map_err(|_| Self::err(what, at))
    }

    /// A `u8`.
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, Error> {
        Ok(self.array::<1>(what)?[0])
    }

    /// A little-endian `u32`.
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `u64`.
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: a `u64` byte length, then the bytes (not checked for UTF-8).
    pub(crate) fn string(&mut self, what: &'static str) -> Result<&'a [u8], Error> {
        let at = self.pos;
        let len = self.u64(what)?;
        let len = usize::try_from(len).map_err(|_| Self::err(what, at))?;
        if len > self.remaining() {
            return Err(Self::err(what, at));
        }
        self.take(len, what)
    }

    /// A GGUF string that must be UTF-8 (keys and tensor names).
    pub(crate) fn str(&mut self, what: &'static str) -> Result<&'a str, Error> {
        let at = self.pos;
        let s = self.string(what)?;
        core::str::from_utf8(s).map_err(|_| Self::err("string is not valid UTF-8", at))
    }
}
