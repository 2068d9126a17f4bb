//! The byte layout of a VQF file (docs/vqf.md): constants, the header, the
//! directory entry, roles and flags, with encoders and checked decoders.

use crate::error::{mul, Error};
use crate::gguf::GgmlType;
use crate::quant::layout::{ActFormat, Gemm};
use crate::quant::repack::Layout;
use crate::tensors::Role;

/// `\x89VQF\r\n\x1a\n`.
pub const MAGIC: [u8; 8] = [0x89, b'V', b'Q', b'F', b'\r', b'\n', 0x1a, b'\n'];
/// The version this build writes and the newest it reads.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_SIZE: usize = 128;
/// Bytes of one directory entry.
pub const ENTRY_SIZE: usize = 96;
/// Alignment of the data section and of every tensor.
pub const ALIGN: u64 = 64;
/// Bytes of a tensor name field.
pub const NAME_SIZE: usize = 48;
/// Byte range of the checksum field (read as zeros when hashing).
pub const CHECKSUM_AT: usize = 40;
/// Most tensors a file may hold.
pub const MAX_TENSORS: u32 = 65_535;
/// Longest `max_seq` a file may declare.
pub const MAX_SEQ: u32 = 1 << 20;

/// Header flag bits.
pub mod flags {
    /// Text linear weights have a Q8_0 copy (Q8_0x8 layout).
    pub const Q8_8X8: u64 = 1 << 0;
    /// Text linear weights have a Q4_0 copy (Q4_0x4 layout).
    pub const Q4_4X4: u64 = 1 << 1;
    /// Text linear weights stored F32.
    pub const LINEAR_F32: u64 = 1 << 2;
    /// Text linear weights stored F16.
    pub const LINEAR_F16: u64 = 1 << 3;
    /// MoE expert tensors present.
    pub const MOE: u64 = 1 << 4;
    /// Token embedding stored F16 (else F32).
    pub const EMB_F16: u64 = 1 << 5;
    /// Vision tower present.
    pub const VISION: u64 = 1 << 6;
    /// Tokenizer section present.
    pub const TOKENIZER: u64 = 1 << 7;
    /// Each linear-weight entry says which copies it belongs to (entry byte
    /// 55: bit 0 the prefill copy, bit 1 the decode copy), so a copy may mix
    /// layouts tensor by tensor (the decode copy in the source file's own
    /// block types). Requires Q8_8X8: the prefill copy is Q8_0x8.
    pub const COPY_TAGS: u64 = 1 << 8;
    /// Token embedding stored as the source GGUF's own blocks, row-major
    /// (layout [`Layout::GgufRows`](crate::quant::layout::Layout::GgufRows),
    /// the entry's dtype code naming the type); excludes EMB_F16.
    pub const EMB_BLOCKS: u64 = 1 << 9;
    /// Every bit this version defines.
    pub const KNOWN: u64 = 0x3FF;
    /// The bits declaring copies of the linear weights.
    pub const COPIES: u64 = Q8_8X8 | Q4_4X4 | LINEAR_F32 | LINEAR_F16;
    /// Names of the bits, lowest first.
    pub const NAMES: [&str; 10] = [
        "Q8_8X8",
        "Q4_4X4",
        "LINEAR_F32",
        "LINEAR_F16",
        "MOE",
        "EMB_F16",
        "VISION",
        "TOKENIZER",
        "COPY_TAGS",
        "EMB_BLOCKS",
    ];
}

/// The flag bit declaring a linear-weight copy stored in `layout`.
pub fn copy_flag(layout: Layout) -> u64 {
    match layout {
        Layout::Q8_0x8 => flags::Q8_8X8,
        Layout::Q4_0x4 => flags::Q4_4X4,
        Layout::F32 => flags::LINEAR_F32,
        Layout::F16 => flags::LINEAR_F16,
        // Only in a COPY_TAGS file's decode copy, which no flag declares.
        _ => 0,
    }
}

/// The one layout a vision matrix of row width `cols` has in a file with
/// `file_flags`: Q8_0x8 when the text weights are quantized (and `cols` is
/// a multiple of 32; else F32), F16 or F32 in the accuracy modes.
pub fn vision_layout(file_flags: u64, cols: usize) -> Layout {
    if file_flags & (flags::Q8_8X8 | flags::Q4_4X4) != 0 {
        if cols.is_multiple_of(crate::quant::QK) {
            Layout::Q8_0x8
        } else {
            Layout::F32
        }
    } else if file_flags & flags::LINEAR_F16 != 0 {
        Layout::F16
    } else {
        Layout::F32
    }
}

/// The GGUF block type a layout stores (`F32`, `F16`, `Q4_0`, `Q8_0`, ...).
pub fn dtype_name(layout: Layout) -> &'static str {
    layout.spec().dtype
}

/// The stored dtype code of a layout (0 F32, 1 F16, 2 Q4_0, 3 Q8_0; the
/// block types kept from GGUF files by their ggml type id: 6 Q5_0, 7 Q5_1,
/// 10 Q2_K, 11 Q3_K, 12 Q4_K, 13 Q5_K, 14 Q6_K, 16 IQ2_XXS, 17 IQ2_XS, 18 IQ3_XXS, 20 IQ4_NL,
/// 21 IQ3_S, 22 IQ2_S, 23 IQ4_XS).
pub fn dtype_code(layout: Layout) -> u8 {
    layout.spec().dtype_code
}

/// The stored layout code of a layout (0 plain, 1 Q4_0x4, 2 Q8_0x8, 3
/// Q5_0x4, 4 Q5_1x4, 5 Q4_Kx4, 6 Q5_Kx4, 7 Q6_Kx8, 8 IQ4_NLx4, 10
/// IQ4_XSx8, 11 Q2_Kx8, 12 Q3_Kx8, 13 IQ3_XXSx8, 14 IQ3_Sx8, 15 IQ2_XXSx8, 16 IQ2_XSx8, 17 IQ2_Sx8; 9, the Q3_Kx8
/// of whole-byte scales, is retired).
pub fn layout_code(layout: Layout) -> u8 {
    layout.spec().layout_code
}

/// A short name for a layout (`F32`, `F16`, `Q4_0x4`, `Q8_0x8`, `Q6_Kx8`).
pub fn layout_name(layout: Layout) -> &'static str {
    layout.spec().name
}

/// The layout of stored codes `(dtype, layout)`: a layout's own pair, or
/// a plain (row-major, code 0) tensor of a GGUF block type with a
/// dequantizer, by ggml's id: [`Layout::GgufRows`].
fn layout_from_codes(dtype: u8, layout: u8) -> Option<Layout> {
    let blocks =
        GgmlType::from_id(dtype as u32).is_some_and(|t| t.block_size() > 1 && t.can_dequantize());
    Layout::from_codes(dtype, layout).or((layout == 0 && blocks).then_some(Layout::GgufRows))
}

/// Reads a little-endian u16/u32/u64 at `at` (the caller checked the bounds).
fn le(bytes: &[u8], at: usize, n: usize) -> u64 {
    let mut v = 0u64;
    for i in (0..n).rev() {
        v = (v << 8) | bytes[at + i] as u64;
    }
    v
}

/// The fixed 128-byte header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Header {
    /// Format version.
    pub version: u32,
    /// Flag bits ([`flags`]).
    pub flags: u64,
    /// Directory entries.
    pub tensor_count: u32,
    /// Longest context the file was converted for.
    pub max_seq: u32,
    /// Total file length.
    pub file_len: u64,
    /// FNV-1a 64 of the file with the checksum field as zeros.
    pub checksum: u64,
    /// Directory offset (128).
    pub dir_offset: u64,
    /// Directory bytes.
    pub dir_size: u64,
    /// Config section offset.
    pub config_offset: u64,
    /// Config section bytes.
    pub config_size: u64,
    /// Tokenizer section offset.
    pub tokenizer_offset: u64,
    /// Tokenizer section bytes (0: none).
    pub tokenizer_size: u64,
    /// Tensor data offset (64-aligned).
    pub data_offset: u64,
    /// Tensor data bytes.
    pub data_size: u64,
}

impl Header {
    /// The header's 128 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_SIZE as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.flags.to_le_bytes());
        b[24..28].copy_from_slice(&self.tensor_count.to_le_bytes());
        b[28..32].copy_from_slice(&self.max_seq.to_le_bytes());
        let words = [
            self.file_len,
            self.checksum,
            self.dir_offset,
            self.dir_size,
            self.config_offset,
            self.config_size,
            self.tokenizer_offset,
            self.tokenizer_size,
            self.data_offset,
            self.data_size,
        ];
        for (i, w) in words.iter().enumerate() {
            b[32 + 8 * i..40 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        b[112..116].copy_from_slice(&(ALIGN as u32).to_le_bytes());
        b
    }

    /// Decodes the header fields, checking only what needs no other
    /// knowledge: magic, version, header size, alignment, reserved bytes.
    pub fn read(bytes: &[u8]) -> Result<Header, Error> {
        let b = bytes.get(..HEADER_SIZE).ok_or(Error::Truncated {
            what: "VQF header (128 bytes)",
            need: HEADER_SIZE as u64,
            have: bytes.len() as u64,
        })?;
        if b[0..8] != MAGIC {
            return Err(Error::BadMagic { what: "VQF file" });
        }
        let version = le(b, 8, 4) as u32;
        if version > VERSION {
            return Err(Error::NewerVersion {
                what: "VQF",
                found: version,
                supported: VERSION,
            });
        }
        if version == 0 {
            return Err(Error::Malformed {
                what: "VQF version 0",
                at: 8,
            });
        }
        if le(b, 12, 4) != HEADER_SIZE as u64 {
            return Err(Error::Malformed {
                what: "VQF header_size (must be 128)",
                at: 12,
            });
        }
        if le(b, 112, 4) != ALIGN {
            return Err(Error::Malformed {
                what: "VQF alignment (must be 64)",
                at: 112,
            });
        }
        if b[116..128].iter().any(|&x| x != 0) {
            return Err(Error::Malformed {
                what: "VQF reserved header bytes (must be zero)",
                at: 116,
            });
        }
        let w = |i: usize| le(b, 32 + 8 * i, 8);
        Ok(Header {
            version,
            flags: le(b, 16, 8),
            tensor_count: le(b, 24, 4) as u32,
            max_seq: le(b, 28, 4) as u32,
            file_len: w(0),
            checksum: w(1),
            dir_offset: w(2),
            dir_size: w(3),
            config_offset: w(4),
            config_size: w(5),
            tokenizer_offset: w(6),
            tokenizer_size: w(7),
            data_offset: w(8),
            data_size: w(9),
        })
    }
}

/// One directory entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Name bytes, zero-padded.
    pub name: [u8; NAME_SIZE],
    /// Decoder layer, or [`NO_LAYER`](crate::tensors::NO_LAYER).
    pub layer: u16,
    /// What the tensor is.
    pub role: Role,
    /// Storage (dtype and layout).
    pub layout: Layout,
    /// The stored dtype code: the layout's own (`LayoutSpec::dtype_code`),
    /// or for a [`Layout::GgufRows`] entry ggml's id of its block type.
    pub dtype: u8,
    /// Dimensions used in `shape`.
    pub ndim: u8,
    /// Shape, outermost first.
    pub shape: [u32; 4],
    /// Absolute offset of the data.
    pub offset: u64,
    /// Bytes of data.
    pub nbytes: u64,
    /// In a file with flag COPY_TAGS, the weight copies a linear weight
    /// belongs to ([`copies::PREFILL`], [`copies::DECODE`] or both); 0
    /// otherwise (the copy follows from the layout and the file's flags).
    pub copies: u8,
}

/// The bits of [`Entry::copies`].
pub mod copies {
    /// The entry is (part of) the prefill copy.
    pub const PREFILL: u8 = 1;
    /// The entry is (part of) the decode copy.
    pub const DECODE: u8 = 2;
    /// Both copies read this entry.
    pub const BOTH: u8 = PREFILL | DECODE;
}

impl Entry {
    /// A placeholder entry (storage for [`crate::convert::directory`] to fill).
    pub const EMPTY: Entry = Entry {
        name: [0; NAME_SIZE],
        layer: 0,
        role: Role::TokenEmbd,
        layout: Layout::F32,
        dtype: 0,
        ndim: 1,
        shape: [1, 0, 0, 0],
        offset: 0,
        nbytes: 0,
        copies: 0,
    };

    /// The sort key of the directory.
    pub fn key(&self) -> (u16, u16, u8) {
        (self.layer, self.role as u16, layout_code(self.layout))
    }

    /// The name as text (the parser checked it is UTF-8).
    pub fn name_str(&self) -> &str {
        let len = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_SIZE);
        core::str::from_utf8(&self.name[..len]).unwrap_or("<invalid>")
    }

    /// `(experts, rows, cols)` of a matrix (experts 1 for 2-D), or of a
    /// vector as `(1, 1, len)`.
    pub fn matrix_dims(&self) -> (usize, usize, usize) {
        let s = |i: usize| self.shape[i] as usize;
        match self.ndim {
            1 => (1, 1, s(0)),
            2 => (1, s(0), s(1)),
            _ => (s(0), s(1), s(2)),
        }
    }

    /// The GGUF block type of a [`Layout::GgufRows`] entry.
    pub fn block_type(&self) -> Option<GgmlType> {
        (self.layout == Layout::GgufRows)
            .then(|| GgmlType::from_id(self.dtype as u32))
            .flatten()
    }

    /// The stored block type's name (`Q6_K`): the layout's, or for
    /// [`Layout::GgufRows`] the blocks'.
    pub fn dtype_name(&self) -> &'static str {
        match self.block_type() {
            Some(ty) => Layout::keeping(ty.id()).map_or(ty.name(), |l| l.spec().dtype),
            None => self.layout.spec().dtype,
        }
    }

    /// The storage's name (`Q6_Kx8`); GGUF rows by their block type
    /// (`Q6_K`).
    pub fn layout_name(&self) -> &'static str {
        match self.layout {
            Layout::GgufRows => self.dtype_name(),
            l => l.spec().name,
        }
    }

    /// The byte size the layout and shape require.
    pub fn expected_nbytes(&self) -> Result<u64, Error> {
        let (experts, rows, cols) = self.matrix_dims();
        let one = match self.block_type() {
            Some(ty) => {
                if !cols.is_multiple_of(ty.block_size()) {
                    return Err(Error::NotBlockAligned {
                        what: ty.name(),
                        len: cols,
                    });
                }
                mul(
                    "tensor bytes",
                    rows,
                    cols / ty.block_size() * ty.type_size(),
                )?
            }
            None => self.layout.matrix_bytes(rows, cols)?,
        };
        let total = one.checked_mul(experts).ok_or(Error::Overflow {
            what: "tensor bytes",
        })?;
        u64::try_from(total).map_err(|_| Error::Overflow {
            what: "tensor bytes",
        })
    }

    /// The entry's 96 bytes.
    pub fn to_bytes(&self) -> [u8; ENTRY_SIZE] {
        let mut b = [0u8; ENTRY_SIZE];
        b[..NAME_SIZE].copy_from_slice(&self.name);
        b[48..50].copy_from_slice(&self.layer.to_le_bytes());
        b[50..52].copy_from_slice(&(self.role as u16).to_le_bytes());
        b[52] = self.dtype;
        b[53] = layout_code(self.layout);
        b[54] = self.ndim;
        b[55] = self.copies;
        for (i, s) in self.shape.iter().enumerate() {
            b[56 + 4 * i..60 + 4 * i].copy_from_slice(&s.to_le_bytes());
        }
        b[72..80].copy_from_slice(&self.offset.to_le_bytes());
        b[80..88].copy_from_slice(&self.nbytes.to_le_bytes());
        b
    }

    /// Decodes and checks one entry in isolation (`at` is its file offset,
    /// for error messages).
    pub fn read(b: &[u8; ENTRY_SIZE], at: u64) -> Result<Entry, Error> {
        let mut name = [0u8; NAME_SIZE];
        name.copy_from_slice(&b[..NAME_SIZE]);
        let len = name.iter().position(|&x| x == 0).unwrap_or(NAME_SIZE);
        if len == 0
            || name[len..].iter().any(|&x| x != 0)
            || core::str::from_utf8(&name[..len]).is_err()
        {
            return Err(Error::Malformed {
                what: "tensor name (1..48 UTF-8 bytes, zero-padded)",
                at,
            });
        }
        let role = Role::from_id(le(b, 50, 2) as u16).ok_or(Error::Malformed {
            what: "tensor role",
            at: at + 50,
        })?;
        if (b[52], b[53]) == (11, 9) {
            return Err(Error::Unsupported {
                what: "tensor layout: Q3_Kx8 of whole-byte scales, retired on 2026-12-05 \
                       (convert the model again); layout code",
                value: 9,
            });
        }
        let layout = layout_from_codes(b[52], b[53]).ok_or(Error::Malformed {
            what: "tensor dtype/layout pair",
            at: at + 52,
        })?;
        // A matrix layout whose kernels this build leaves out (the layout
        // table's row has no GEMM: the codebook layouts without the feature).
        let spec = layout.spec();
        if spec.acts != ActFormat::Float && matches!(spec.gemm, Gemm::None) {
            return Err(Error::Unsupported {
                what: "tensor layout: one whose kernels this build of kestrel-core leaves out \
                       (IQ2_XXSx8, IQ2_XSx8, IQ2_Sx8, IQ3_XXSx8 and IQ3_Sx8 need the feature `codebook`); layout code",
                value: b[53] as u64,
            });
        }
        let ndim = b[54];
        if !(1..=3).contains(&ndim) {
            return Err(Error::Malformed {
                what: "tensor ndim (1..=3)",
                at: at + 54,
            });
        }
        if b[55] > copies::BOTH {
            return Err(Error::Malformed {
                what: "entry copies (0..=3)",
                at: at + 55,
            });
        }
        if b[88..96].iter().any(|&x| x != 0) {
            return Err(Error::Malformed {
                what: "reserved entry bytes (must be zero)",
                at,
            });
        }
        let mut shape = [0u32; 4];
        for (i, s) in shape.iter_mut().enumerate() {
            *s = le(b, 56 + 4 * i, 4) as u32;
            let used = i < ndim as usize;
            if used == (*s == 0) {
                return Err(Error::Malformed {
                    what: "tensor shape (used dims > 0, unused 0)",
                    at: at + 56,
                });
            }
        }
        Ok(Entry {
            name,
            layer: le(b, 48, 2) as u16,
            role,
            layout,
            dtype: b[52],
            ndim,
            shape,
            offset: le(b, 72, 8),
            nbytes: le(b, 80, 8),
            copies: b[55],
        })
    }
}

/// Makes a name field from text, or an error when it does not fit.
pub fn name_field(text: &str) -> Result<[u8; NAME_SIZE], Error> {
    let mut name = [0u8; NAME_SIZE];
    if text.is_empty() || text.len() > NAME_SIZE || text.as_bytes().contains(&0) {
        return Err(Error::OutOfRange {
            what: "tensor name length",
            value: text.len(),
            max: NAME_SIZE,
        });
    }
    name[..text.len()].copy_from_slice(text.as_bytes());
    Ok(name)
}

/// FNV-1a 64 offset basis.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64 prime.
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// An FNV-1a 64 hash being accumulated.
#[derive(Clone, Copy, Debug)]
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(FNV_OFFSET)
    }
}

impl Fnv {
    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(FNV_PRIME);
        }
        self.0 = h;
    }
}

/// The VQF checksum of a whole file: FNV-1a 64 with bytes 40..48 as zeros.
pub fn checksum(file: &[u8]) -> u64 {
    let mut h = Fnv::default();
    let split = CHECKSUM_AT.min(file.len());
    h.update(&file[..split]);
    if file.len() >= CHECKSUM_AT + 8 {
        h.update(&[0u8; 8]);
        h.update(&file[CHECKSUM_AT + 8..]);
    } else {
        // Too short to hold the field: hash what is there, zeros in its place.
        for _ in split..file.len() {
            h.update(&[0]);
        }
    }
    h.0
}
