//! Writing a VQF file: plan the offsets, then stream header, directory,
//! sections and tensor data into a [`Sink`], hashing every byte (memsum).

use super::format::{
    Entry, Fnv, Header, ALIGN, ENTRY_SIZE, HEADER_SIZE, MAX_SEQ, MAX_TENSORS, VERSION,
};
use crate::error::Error;

/// Where written bytes go (a file, a buffer, a counter).
pub trait Sink {
    /// Appends `bytes`.
    fn write(&mut self, bytes: &[u8]) -> Result<(), Error>;
}

/// A sink that only counts bytes.
#[derive(Default, Debug)]
pub struct Counter(pub u64);

impl Sink for Counter {
    fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.0 += bytes.len() as u64;
        Ok(())
    }
}

/// Forwards to a sink and counts the bytes.
pub struct Tally<'s> {
    sink: &'s mut dyn Sink,
    /// Bytes forwarded so far.
    pub written: u64,
}

impl<'s> Tally<'s> {
    /// Wraps `sink`.
    pub fn new(sink: &'s mut dyn Sink) -> Self {
        Tally { sink, written: 0 }
    }
}

impl Sink for Tally<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.written += bytes.len() as u64;
        self.sink.write(bytes)
    }
}

/// `x` rounded up to a multiple of 64.
pub fn align_up(x: u64) -> Result<u64, Error> {
    x.checked_add(ALIGN - 1)
        .map(|v| v / ALIGN * ALIGN)
        .ok_or(Error::Overflow {
            what: "aligned offset",
        })
}

/// Assigns every entry its offset (in directory order, each 64-aligned) and
/// returns the header (checksum 0, to be patched after writing). Checks that
/// the entries are strictly sorted by key and that each `nbytes` matches its
/// shape and layout.
pub fn plan(
    flags: u64,
    max_seq: u32,
    entries: &mut [Entry],
    config_size: u64,
    tokenizer_size: u64,
) -> Result<Header, Error> {
    let count = u32::try_from(entries.len())
        .ok()
        .filter(|&n| (1..=MAX_TENSORS).contains(&n))
        .ok_or(Error::OutOfRange {
            what: "tensor count",
            value: entries.len(),
            max: MAX_TENSORS as usize,
        })?;
    if max_seq == 0 || max_seq > MAX_SEQ {
        return Err(Error::OutOfRange {
            what: "max_seq",
            value: max_seq as usize,
            max: MAX_SEQ as usize,
        });
    }
    for pair in entries.windows(2) {
        if pair[0].key() >= pair[1].key() {
            return Err(Error::Malformed {
                what: "directory entries not strictly sorted",
                at: 0,
            });
        }
    }
    let dir_offset = HEADER_SIZE as u64;
    let dir_size = entries.len() as u64 * ENTRY_SIZE as u64;
    let config_offset = dir_offset + dir_size;
    let tokenizer_offset = config_offset
        .checked_add(config_size)
        .ok_or(Error::Overflow {
            what: "tokenizer offset",
        })?;
    let tok_end = tokenizer_offset
        .checked_add(tokenizer_size)
        .ok_or(Error::Overflow {
            what: "tokenizer end",
        })?;
    let data_offset = align_up(tok_end)?;
    let mut end = data_offset;
    for e in entries.iter_mut() {
        if e.nbytes != e.expected_nbytes()? {
            return Err(Error::SizeMismatch {
                what: "tensor nbytes vs shape",
                expected: e.expected_nbytes()? as usize,
                actual: e.nbytes as usize,
            });
        }
        e.offset = align_up(end)?;
        end = e.offset.checked_add(e.nbytes).ok_or(Error::Overflow {
            what: "file length",
        })?;
    }
    Ok(Header {
        version: VERSION,
        flags,
        tensor_count: count,
        max_seq,
        file_len: end,
        checksum: 0,
        dir_offset,
        dir_size,
        config_offset,
        config_size,
        tokenizer_offset,
        tokenizer_size,
        data_offset,
        data_size: end - data_offset,
    })
}

/// Streams bytes into a sink while hashing them and counting the position.
pub struct Writer<'s> {
    sink: &'s mut dyn Sink,
    hash: Fnv,
    pos: u64,
}

impl<'s> Writer<'s> {
    /// A writer at position 0.
    pub fn new(sink: &'s mut dyn Sink) -> Self {
        Writer {
            sink,
            hash: Fnv::default(),
            pos: 0,
        }
    }

    /// Bytes written so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// FNV-1a 64 of everything written so far (the memsum).
    pub fn memsum(&self) -> u64 {
        self.hash.0
    }

    /// Writes zeros up to absolute offset `to`.
    pub fn pad_to(&mut self, to: u64) -> Result<(), Error> {
        if to < self.pos {
            return Err(Error::Malformed {
                what: "writer position past the planned offset",
                at: self.pos,
            });
        }
        let zeros = [0u8; 64];
        while self.pos < to {
            let n = ((to - self.pos) as usize).min(zeros.len());
            self.write(&zeros[..n])?;
        }
        Ok(())
    }
}

impl Sink for Writer<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.hash.update(bytes);
        self.pos += bytes.len() as u64;
        self.sink.write(bytes)
    }
}
