//! VQF, the single-file weight format (docs/vqf.md): parsing over `&[u8]`
//! with zero copies, and writing through a [`write::Sink`].
//!
//! [`Vqf::parse`] validates everything once (header, section bounds, every
//! directory entry, sort order, overlaps, sizes against shapes, flags
//! against contents, the config, the tokenizer tables). It never panics for
//! any input. Afterwards tensors are views into the caller's bytes.

pub mod config_section;
pub mod format;
#[cfg(feature = "alloc")]
pub mod tokenizer_build;
pub mod tokenizer_section;
pub mod write;

use crate::config::Config;
use crate::error::Error;
use crate::quant::repack::{Layout, PackedMatrix};
use crate::tensors::{self, Kind};
use crate::tensors::{split_parts, split_rows, Role, NO_LAYER};
pub use format::checksum;
use format::{
    copies, copy_flag, flags, Entry, Header, ENTRY_SIZE, HEADER_SIZE, MAX_SEQ, MAX_TENSORS,
};
use tokenizer_section::TokenizerTables;

/// A validated VQF file.
#[derive(Clone, Copy, Debug)]
pub struct Vqf<'a> {
    bytes: &'a [u8],
    header: Header,
    config: Config,
    tokenizer: Option<TokenizerTables<'a>>,
}

fn section(bytes: &[u8], offset: u64, size: u64, what: &'static str) -> Result<(), Error> {
    match offset.checked_add(size) {
        Some(end) if end <= bytes.len() as u64 => Ok(()),
        _ => Err(Error::Truncated {
            what,
            need: offset.saturating_add(size),
            have: bytes.len() as u64,
        }),
    }
}

impl<'a> Vqf<'a> {
    /// Validates a whole VQF file.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, Error> {
        let h = Header::read(bytes)?;
        let mal = |what: &'static str, at: u64| Error::Malformed { what, at };
        if h.file_len != bytes.len() as u64 {
            return Err(Error::Truncated {
                what: "VQF file (header file_len)",
                need: h.file_len,
                have: bytes.len() as u64,
            });
        }
        if h.tensor_count == 0 || h.tensor_count > MAX_TENSORS {
            return Err(mal("tensor_count (1..=65535)", 24));
        }
        if h.max_seq == 0 || h.max_seq > MAX_SEQ {
            return Err(mal("max_seq (1..=1048576)", 28));
        }
        if h.flags & !flags::KNOWN != 0 {
            return Err(mal("unknown flag bits", 16));
        }
        if h.flags & flags::COPIES == 0 {
            return Err(mal("flags declare no copy of the linear weights", 16));
        }
        let dir_size = h.tensor_count as u64 * ENTRY_SIZE as u64;
        if h.dir_offset != HEADER_SIZE as u64 || h.dir_size != dir_size {
            return Err(mal("directory offset/size", 48));
        }
        if h.config_offset != h.dir_offset + h.dir_size
            || h.config_size < 8
            || h.config_size % 8 != 0
        {
            return Err(mal("config offset/size", 64));
        }
        let tok_offset = h
            .config_offset
            .checked_add(h.config_size)
            .ok_or(mal("config size", 72))?;
        if h.tokenizer_offset != tok_offset {
            return Err(mal("tokenizer offset", 80));
        }
        if (h.tokenizer_size > 0) != (h.flags & flags::TOKENIZER != 0) {
            return Err(mal("TOKENIZER flag disagrees with the tokenizer size", 16));
        }
        let tok_end = tok_offset
            .checked_add(h.tokenizer_size)
            .ok_or(mal("tokenizer size", 88))?;
        if h.data_offset != write::align_up(tok_end)? {
            return Err(mal(
                "data offset (first 64-aligned offset after the tokenizer)",
                96,
            ));
        }
        if h.data_offset > h.file_len || h.data_size != h.file_len - h.data_offset {
            return Err(mal("data size", 104));
        }
        section(bytes, h.dir_offset, h.dir_size, "VQF directory")?;
        section(bytes, h.config_offset, h.config_size, "VQF config section")?;
        section(
            bytes,
            h.tokenizer_offset,
            h.tokenizer_size,
            "VQF tokenizer section",
        )?;
        if bytes[tok_end as usize..h.data_offset as usize]
            .iter()
            .any(|&b| b != 0)
        {
            return Err(mal("padding before the data section must be zero", tok_end));
        }
        let config = config_section::decode(
            &bytes[h.config_offset as usize..(h.config_offset + h.config_size) as usize],
        )?;
        let tokenizer = if h.tokenizer_size > 0 {
            let s = &bytes[h.tokenizer_offset as usize..tok_end as usize];
            Some(TokenizerTables::parse(s)?)
        } else {
            None
        };
        let vqf = Vqf {
            bytes,
            header: h,
            config,
            tokenizer,
        };
        vqf.check_directory()?;
        vqf.check_contents()?;
        Ok(vqf)
    }

    fn entry_at(&self, i: usize) -> Result<Entry, Error> {
        let at = HEADER_SIZE + i * ENTRY_SIZE;
        let b = self
            .bytes
            .get(at..at + ENTRY_SIZE)
            .and_then(|s| <&[u8; ENTRY_SIZE]>::try_from(s).ok())
            .ok_or(Error::Malformed {
                what: "directory entry",
                at: at as u64,
            })?;
        Entry::read(b, at as u64)
    }

    /// Every entry valid, sorted, in bounds, non-overlapping, sized right.
    fn check_directory(&self) -> Result<(), Error> {
        let mut prev: Option<Entry> = None;
        for i in 0..self.header.tensor_count as usize {
            let e = self.entry_at(i)?;
            let at = (HEADER_SIZE + i * ENTRY_SIZE) as u64;
            let mal = |what: &'static str| Error::Malformed { what, at };
            if let Some(p) = prev {
                if p.key() >= e.key() {
                    return Err(mal(
                        "directory not strictly sorted by (layer, role, layout)",
                    ));
                }
            }
            let depth = self.config.vision.map_or(0, |v| v.depth);
            if e.layer != NO_LAYER && e.layer as u32 >= self.config.num_layers.max(depth) {
                return Err(mal("tensor layer beyond num_layers"));
            }
            if e.offset % format::ALIGN != 0 || e.offset < self.header.data_offset {
                return Err(mal("tensor offset not 64-aligned inside the data section"));
            }
            let end = e
                .offset
                .checked_add(e.nbytes)
                .ok_or(mal("tensor size overflows"))?;
            if end > self.header.file_len {
                return Err(Error::Truncated {
                    what: "tensor data past the end of the file",
                    need: end,
                    have: self.header.file_len,
                });
            }
            if let Some(p) = prev {
                if e.offset < p.offset + p.nbytes {
                    return Err(mal("tensors overlap (or are out of offset order)"));
                }
            }
            if e.nbytes != e.expected_nbytes()? {
                return Err(mal("tensor nbytes does not match its shape and layout"));
            }
            prev = Some(e);
        }
        Ok(())
    }

    /// The directory holds exactly what the config and flags require.
    fn check_contents(&self) -> Result<(), Error> {
        let f = self.header.flags;
        if (f & flags::MOE != 0) != self.config.moe.is_some() {
            return Err(Error::BadConfig {
                what: "MOE flag disagrees with the config",
            });
        }
        if (f & flags::VISION != 0) != self.config.vision.is_some() {
            return Err(Error::BadConfig {
                what: "VISION flag disagrees with the config",
            });
        }
        let emb = embedding_layout(f)?;
        let tagged = f & flags::COPY_TAGS != 0;
        // COPY_TAGS with Q8_8X8: a Q8_0x8 prefill copy and a decode copy;
        // with Q4_4X4: one copy (`small`, `exact`), every linear weight
        // tagged for both.
        let one_copy = tagged && f & flags::COPIES == flags::Q4_4X4;
        if tagged && !one_copy && f & flags::COPIES != flags::Q8_8X8 {
            return Err(Error::BadConfig {
                what: "COPY_TAGS needs either the Q8_8X8 or the Q4_4X4 copy flag, and no other",
            });
        }
        let layouts: [Layout; 4] = [Layout::Q8_0x8, Layout::Q4_0x4, Layout::F32, Layout::F16];
        let expected = core::cell::Cell::new(0u64);
        tensors::for_each(&self.config, &mut |spec| {
            let shape_ok = |e: &Entry, shape: [u32; 4]| -> Result<(), Error> {
                if e.ndim != spec.ndim || e.shape != shape {
                    return Err(Error::BadShape {
                        role: e.role.stem(),
                        layer: spec.layer,
                    });
                }
                Ok(())
            };
            let untagged = |e: Entry| -> Result<Entry, Error> {
                if e.copies != 0 {
                    return Err(Error::BadConfig {
                        what: "entry copies set on a tensor that is not a tagged linear weight",
                    });
                }
                Ok(e)
            };
            let need = |layout: Layout| -> Result<Entry, Error> {
                expected.set(expected.get() + 1);
                let e = self
                    .find(spec.layer, spec.role, layout)
                    .ok_or(Error::MissingTensor {
                        role: spec.role.stem(),
                        layer: spec.layer,
                    })?;
                shape_ok(&e, spec.shape)?;
                Ok(e)
            };
            match spec.kind {
                Kind::Embedding => need(emb).and_then(untagged).map(|_| ()),
                Kind::F32 => need(Layout::F32).and_then(untagged).map(|_| ()),
                Kind::VisionLinear => need(format::vision_layout(f, spec.shape[1] as usize))
                    .and_then(untagged)
                    .map(|_| ()),
                Kind::Linear if !tagged => {
                    for l in layouts {
                        if f & copy_flag(l) != 0 {
                            untagged(need(l)?)?;
                        }
                    }
                    Ok(())
                }
                Kind::Linear if one_copy => {
                    // One entry tagged for both copies, in a block
                    // layout (Q4_0x4 or Q8_0x8 in a `small` file, the
                    // source's own in an `exact` one); a fused weight
                    // whole or as its parts (`tensors::split_parts`).
                    let one = |role: Role, shape: [u32; 4]| -> Result<(), Error> {
                        expected.set(expected.get() + 1);
                        let e = self.find_copy(spec.layer, role, copies::DECODE).ok_or(
                            Error::MissingTensor {
                                role: role.stem(),
                                layer: spec.layer,
                            },
                        )?;
                        if e.copies != copies::BOTH || matches!(e.layout, Layout::F32 | Layout::F16)
                        {
                            return Err(Error::BadConfig {
                                what: "a linear weight of a one-copy COPY_TAGS file is not a block-layout entry in both copies",
                            });
                        }
                        shape_ok(&e, shape)
                    };
                    let fused = self
                        .find_copy(spec.layer, spec.role, copies::DECODE)
                        .is_some();
                    let parts = split_parts(&self.config, spec.role);
                    if parts.is_empty() || fused {
                        return one(spec.role, spec.shape);
                    }
                    let h = self.config.hidden_size;
                    for &(role, rows) in parts {
                        one(role, [split_rows(&self.config, rows), h, 0, 0])?;
                    }
                    Ok(())
                }
                Kind::Linear => {
                    // The prefill copy is Q8_0x8; the decode copy is the
                    // same entry, another entry of the role, or (a QKV or
                    // a Gated DeltaNet layer's projections) its parts
                    // apart.
                    let p = need(Layout::Q8_0x8)?;
                    if p.copies & copies::PREFILL == 0 {
                        return Err(Error::BadConfig {
                            what: "a Q8_0x8 linear weight of a COPY_TAGS file is not in the prefill copy",
                        });
                    }
                    if p.copies & copies::DECODE != 0 {
                        return Ok(());
                    }
                    if let Some(d) = self.find_copy(spec.layer, spec.role, copies::DECODE) {
                        expected.set(expected.get() + 1);
                        if d.copies != copies::DECODE {
                            return Err(Error::BadConfig {
                                what: "two entries of one tensor in the prefill copy",
                            });
                        }
                        return shape_ok(&d, spec.shape);
                    }
                    let parts = split_parts(&self.config, spec.role);
                    if parts.is_empty() {
                        return Err(Error::MissingTensor {
                            role: spec.role.stem(),
                            layer: spec.layer,
                        });
                    }
                    let h = self.config.hidden_size;
                    for &(role, rows) in parts {
                        let rows = split_rows(&self.config, rows);
                        expected.set(expected.get() + 1);
                        let e = self
                            .find_copy(spec.layer, role, copies::DECODE)
                            .filter(|e| e.copies == copies::DECODE)
                            .ok_or(Error::MissingTensor {
                                role: role.stem(),
                                layer: spec.layer,
                            })?;
                        shape_ok(&e, [rows, h, 0, 0])?;
                    }
                    Ok(())
                }
            }
        })?;
        if expected.get() != self.header.tensor_count as u64 {
            return Err(Error::Malformed {
                what: "directory holds tensors the config and flags do not call for",
                at: 24,
            });
        }
        Ok(())
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The model config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The tokenizer tables, if the file has them.
    pub fn tokenizer(&self) -> Option<&TokenizerTables<'a>> {
        self.tokenizer.as_ref()
    }

    /// The whole file.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Directory entry `i` (validated at parse).
    pub fn entry(&self, i: usize) -> Option<Entry> {
        if i < self.header.tensor_count as usize {
            self.entry_at(i).ok()
        } else {
            None
        }
    }

    /// All directory entries, in order.
    pub fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        (0..self.header.tensor_count as usize).filter_map(|i| self.entry(i))
    }

    /// The entry for `(layer, role, layout)`, by binary search.
    pub fn find(&self, layer: u16, role: Role, layout: Layout) -> Option<Entry> {
        let key = (layer, role as u16, format::layout_code(layout));
        let (mut lo, mut hi) = (0usize, self.header.tensor_count as usize);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let e = self.entry(mid)?;
            match e.key().cmp(&key) {
                core::cmp::Ordering::Equal => return (e.layout == layout).then_some(e),
                core::cmp::Ordering::Less => lo = mid + 1,
                core::cmp::Ordering::Greater => hi = mid,
            }
        }
        None
    }

    /// The entry of `(layer, role)` that belongs to weight copy `copy`
    /// ([`copies::PREFILL`] or [`copies::DECODE`]) by its tag (files with
    /// flag COPY_TAGS; the first in layout order when several are tagged).
    pub fn find_copy(&self, layer: u16, role: Role, copy: u8) -> Option<Entry> {
        // Lower bound of (layer, role, 0), then the few layouts of the role.
        let key = (layer, role as u16, 0u8);
        let (mut lo, mut hi) = (0usize, self.header.tensor_count as usize);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid)?.key() < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo..self.header.tensor_count as usize)
            .map_while(|i| self.entry(i).filter(|e| e.layer == layer && e.role == role))
            .find(|e| e.copies & copy != 0)
    }

    /// The data of an entry (bounds validated at parse).
    pub fn data(&self, e: &Entry) -> &'a [u8] {
        let (a, b) = (e.offset as usize, (e.offset + e.nbytes) as usize);
        self.bytes.get(a..b).unwrap_or(&[])
    }

    /// A 2-D tensor (or expert `expert` of a 3-D one) as a matrix view.
    pub fn matrix(&self, e: &Entry, expert: usize) -> Result<PackedMatrix<'a>, Error> {
        let (experts, rows, cols) = e.matrix_dims();
        if expert >= experts {
            return Err(Error::OutOfRange {
                what: "expert index",
                value: expert,
                max: experts.saturating_sub(1),
            });
        }
        let one = e.layout.matrix_bytes(rows, cols)?;
        let data = self.data(e);
        let start = one * expert;
        PackedMatrix::new(
            e.layout,
            rows,
            cols,
            data.get(start..start + one).unwrap_or(&[]),
        )
    }
}

/// The token embedding's layout the header flags declare: F16 (EMB_F16),
/// the source GGUF's blocks (EMB_BLOCKS) or F32.
pub fn embedding_layout(f: u64) -> Result<Layout, Error> {
    match (f & flags::EMB_F16 != 0, f & flags::EMB_BLOCKS != 0) {
        (true, true) => Err(Error::BadConfig {
            what: "flags EMB_F16 and EMB_BLOCKS together",
        }),
        (true, false) => Ok(Layout::F16),
        (false, true) => Ok(Layout::GgufRows),
        (false, false) => Ok(Layout::F32),
    }
}
