//! The stored weight layouts, each declared once: [`LAYOUTS`] binds a
//! layout's geometry, its names and codes in a VQF file, the GGUF block type
//! it keeps, its repacker, the activation format it multiplies and its GEMM
//! (the generic kernel and this architecture's, which `kernels` picks
//! between). Every other module asks [`Layout::spec`];
//! docs/architecture/kernels.md ("Adding a layout") lists what a new one
//! needs.

use super::{QK, QK_K};
use crate::error::{mul, Error};
#[cfg(target_arch = "aarch64")]
use kestrel_kernels::aarch64 as arch;
use kestrel_kernels::layout as kl;
use kestrel_kernels::layouts::{
    iq2s, iq2xs, iq2xxs, iq3s, iq3xxs, iq4nl, iq4xs, q2k, q3k, q4_0, q4k, q5, q5k, q6k, q8_0,
};
#[cfg(target_arch = "x86_64")]
use kestrel_kernels::x86_64 as arch;
use kestrel_kernels::ShapeError;

/// How a weight matrix is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Row-major little-endian f32.
    F32,
    /// Row-major little-endian f16.
    F16,
    /// Q4_0 blocks interleaved 4 rows x 4-byte chunks.
    Q4_0x4,
    /// Q8_0 blocks interleaved 8 rows x 4-byte chunks.
    Q8_0x8,
    /// GGUF Q5_0 blocks interleaved 4 rows, every value exact
    /// (docs/kernels.md "Q5_0x4"; `super::q5`).
    Q5_0x4,
    /// GGUF Q5_1 blocks interleaved 4 rows, every value exact (`super::q5`).
    Q5_1x4,
    /// GGUF Q4_K super-blocks (256 weights) interleaved 4 rows, every
    /// value exact (docs/kernels.md "Q4_Kx4"; `super::q4k`).
    Q4Kx4,
    /// GGUF Q5_K super-blocks interleaved 4 rows, every value exact
    /// (`super::q5k`).
    Q5Kx4,
    /// GGUF Q6_K super-blocks (256 weights) interleaved 8 rows, every
    /// value exact (docs/kernels.md "Q6_Kx8"; `super::q6k`).
    Q6Kx8,
    /// GGUF IQ4_NL blocks interleaved as Q4_0x4, nibbles unchanged, every
    /// value exact (docs/kernels.md "IQ4_NLx4"; `kestrel_kernels::layouts::iq4nl`).
    Iq4Nlx4,
    /// GGUF Q3_K super-blocks interleaved 8 rows, every value exact
    /// (docs/kernels.md "Q3_Kx8"; `kestrel_kernels::layouts::q3k`).
    Q3Kx8,
    /// GGUF IQ4_XS super-blocks interleaved 8 rows in the GGUF bytes' size,
    /// every value exact (docs/kernels.md "IQ4_XSx8";
    /// `kestrel_kernels::layouts::iq4xs`).
    Iq4Xsx8,
    /// GGUF Q2_K super-blocks interleaved 8 rows in the GGUF bytes' size,
    /// every value exact (docs/kernels.md "Q2_Kx8";
    /// `kestrel_kernels::layouts::q2k`).
    Q2Kx8,
    /// GGUF IQ3_XXS super-blocks interleaved 8 rows in the GGUF bytes'
    /// size, every value exact (docs/kernels.md "IQ3_XXSx8 and IQ3_Sx8";
    /// `kestrel_kernels::layouts::iq3xxs`).
    Iq3Xxsx8,
    /// GGUF IQ2_XXS super-blocks interleaved 8 rows in the GGUF bytes'
    /// size, every value exact (docs/kernels.md "IQ2_XXSx8";
    /// `kestrel_kernels::layouts::iq2xxs`).
    Iq2Xxsx8,
    /// GGUF IQ2_XS super-blocks interleaved 8 rows in the GGUF bytes'
    /// size, every value exact (docs/kernels.md "IQ2_XSx8";
    /// `kestrel_kernels::layouts::iq2xs`).
    Iq2Xsx8,
    /// GGUF IQ2_S super-blocks interleaved 8 rows in the GGUF bytes' size,
    /// every value exact (docs/kernels.md "IQ2_Sx8";
    /// `kestrel_kernels::layouts::iq2s`).
    Iq2Sx8,
    /// GGUF IQ3_S super-blocks interleaved 8 rows in the GGUF bytes' size,
    /// every value exact (`kestrel_kernels::layouts::iq3s`).
    Iq3Sx8,
    /// Row-major GGUF blocks of the type the entry's dtype code names
    /// (ggml's id), as downloaded: the token embedding of a file converted
    /// from a quantized GGUF, one row dequantized per token
    /// ([`crate::gguf::dequantize_row`]). No kernel multiplies it.
    GgufRows,
}

impl Kept {
    /// Repacks `rows` GGUF rows of `cols` weights (at most one row group)
    /// into `out`; without the feature `repack` an error (the build has no
    /// repackers).
    pub fn repack_into(
        &self,
        src: &[u8],
        rows: usize,
        cols: usize,
        out: &mut [u8],
    ) -> Result<(), Error> {
        #[cfg(feature = "repack")]
        return Ok((self.repack)(src, rows, cols, out)?);
        #[cfg(not(feature = "repack"))]
        {
            let _ = (src, rows, cols, out);
            Err(Error::Unsupported {
                what: "repacking into a kept layout (kestrel-core without its feature `repack`); ggml type",
                value: self.ggml_id as u64,
            })
        }
    }
}

/// The activation format a layout multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActFormat {
    /// f32 values (the plain layouts).
    Float,
    /// Q8_0 content: a scale per 32 values (Q4_0x4, Q8_0x8, Q5_0x4, ...).
    Q8_0,
    /// Q8_K: an f32 scale per 256 values and each 32 quants' sum (the
    /// k-quant layouts).
    Q8K,
}

/// A layout's repacker, `(src, rows, cols, out)`: GGUF rows to the
/// layout's bytes (`kestrel_kernels::layouts`, each layout's module), its
/// shape error made the core's where it is called.
pub type RepackFn = fn(&[u8], usize, usize, &mut [u8]) -> Result<(), ShapeError>;

/// One block's values and what weighs them, for a [`QuantizeFn`].
#[derive(Clone, Copy, Debug)]
pub struct BlockValues<'a> {
    /// The block's values (one block of the layout's GGUF type).
    pub values: &'a [f32],
    /// The mean square of the whole row the block belongs to.
    pub row_mean_square: f32,
    /// The importance of the block's columns, if any.
    pub importance: Option<&'a [f32]>,
    /// How Q4_0 blocks are made.
    pub quantizer: super::Quantizer,
}

/// Quantizes one block of values into the GGUF bytes of the layout's type.
pub type QuantizeFn = fn(&BlockValues, &mut [u8]) -> Result<(), Error>;

/// A Q4_0 block with the chosen quantizer and importance.
fn quantize_q4_0(b: &BlockValues, out: &mut [u8]) -> Result<(), Error> {
    let mut a = [0f32; QK];
    a.copy_from_slice(b.values);
    let q = super::q4_0::quantize_block_with(b.quantizer, &a, b.row_mean_square, b.importance)?;
    out.copy_from_slice(&q.to_bytes());
    Ok(())
}

/// A Q8_0 block (ggml's rounding).
fn quantize_q8_0(b: &BlockValues, out: &mut [u8]) -> Result<(), Error> {
    super::q8_0::quantize_row_bytes(b.values, out)
}

/// A generic GEMM with Q8_0 activations: `(w, rows, cols, qs, d, m, out)`.
pub type GenericQ8_0 = fn(&[u8], usize, usize, &[i8], &[f32], usize, &mut [f32]) -> Kernel;
/// A generic GEMM with Q8_K activations: `(w, rows, cols, qs, d, sums, m,
/// out)`.
pub type GenericQ8K = fn(&[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> Kernel;
/// This architecture's GEMM with Q8_0 activations (its token first).
#[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
pub type ArchQ8_0 = fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], usize, &mut [f32]) -> Kernel;
/// This architecture's GEMM with Q8_K activations (its token first).
#[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
pub type ArchQ8K =
    fn(arch::Cpu, &[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> Kernel;
/// What a kernel returns.
pub type Kernel = Result<(), ShapeError>;

/// A layout's GEMM: the generic kernel and this architecture's twin.
#[derive(Clone, Copy, Debug)]
pub struct GemmFns<G, A> {
    /// The scalar specification.
    pub generic: G,
    /// This architecture's kernel (`()` where there is none).
    pub arch: A,
}

/// No architecture kernels in this build.
#[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
pub type ArchQ8_0 = ();
/// No architecture kernels in this build.
#[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
pub type ArchQ8K = ();

/// A layout's GEMM by the activations it multiplies.
#[derive(Clone, Copy, Debug)]
pub enum Gemm {
    /// The plain layouts: `matvec_float`.
    None,
    /// Q8_0 activations.
    Q8_0(GemmFns<GenericQ8_0, ArchQ8_0>),
    /// Q8_K activations (scales per 256, sums per 32).
    Q8K(GemmFns<GenericQ8K, ArchQ8K>),
}

/// A layout that keeps the blocks of one GGUF type exactly.
#[derive(Clone, Copy, Debug)]
pub struct Kept {
    /// ggml's id of the GGUF block type it holds (`GgmlType::from_id`).
    pub ggml_id: u32,
    /// GGUF rows (at most one row group) to one row group: the converter's
    /// (feature `repack`; a build that only runs models leaves the
    /// repackers out).
    #[cfg(feature = "repack")]
    pub repack: RepackFn,
}

/// Everything about one layout.
#[derive(Debug)]
pub struct LayoutSpec {
    /// The layout.
    pub layout: Layout,
    /// Its name (`Q4_0x4`).
    pub name: &'static str,
    /// The block type it stores (`Q4_0`), as `inspect` shows it.
    pub dtype: &'static str,
    /// The suffix of its tensors' names in a VQF file (`q4`).
    pub suffix: &'static str,
    /// The stored dtype code (ggml's type id for the kept GGUF types).
    pub dtype_code: u8,
    /// The stored layout code.
    pub layout_code: u8,
    /// Rows per stored row group.
    pub group_rows: usize,
    /// Bytes of one row group's super-block (a block column of
    /// `group_rows` rows); for the plain layouts, of one value.
    pub block_bytes: usize,
    /// The activations the kernels multiply it with.
    pub acts: ActFormat,
    /// The GGUF blocks it keeps, if it is made from them.
    pub kept: Option<Kept>,
    /// How one block of its GGUF type is made from values, for a layout the
    /// converter also quantizes (the `q4`, `q8` and `dual` modes) rather
    /// than only keeping a source's blocks.
    pub quantize: Option<QuantizeFn>,
    /// Its quantized GEMM.
    pub gemm: Gemm,
}

/// The GEMM `$op` of the generic kernels and this architecture's, of
/// activation format `$acts` (`Q8_0` or `Q8K`).
macro_rules! gemm {
    ($acts:ident, $layout:ident :: $op:ident) => {
        Gemm::$acts(GemmFns {
            generic: $layout::generic::$op,
            #[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
            arch: $layout::arch::$op,
            #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
            arch: (),
        })
    };
}

/// A kept layout of GGUF type `ggml_id` and its repacker (kept with the
/// feature `repack` only). (The inverses, `unpack_*`, serve the tests
/// only, so the shipped binary leaves them out.)
const fn kept(ggml_id: u32, repack: RepackFn) -> Option<Kept> {
    #[cfg(not(feature = "repack"))]
    let _ = repack;
    Some(Kept {
        ggml_id,
        #[cfg(feature = "repack")]
        repack,
    })
}

/// Every layout, in [`Layout`] order.
pub static LAYOUTS: [LayoutSpec; 19] = [
    LayoutSpec {
        layout: Layout::F32,
        name: "F32",
        dtype: "F32",
        suffix: "f32",
        dtype_code: 0,
        layout_code: 0,
        group_rows: 1,
        block_bytes: 4,
        acts: ActFormat::Float,
        kept: None,
        quantize: None,
        gemm: Gemm::None,
    },
    LayoutSpec {
        layout: Layout::F16,
        name: "F16",
        dtype: "F16",
        suffix: "f16",
        dtype_code: 1,
        layout_code: 0,
        group_rows: 1,
        block_bytes: 2,
        acts: ActFormat::Float,
        kept: None,
        quantize: None,
        gemm: Gemm::None,
    },
    LayoutSpec {
        layout: Layout::Q4_0x4,
        name: "Q4_0x4",
        dtype: "Q4_0",
        suffix: "q4",
        dtype_code: 2,
        layout_code: 1,
        group_rows: kl::Q4X4_ROWS,
        block_bytes: kl::Q4X4_BLOCK_BYTES,
        acts: ActFormat::Q8_0,
        kept: kept(2, q4_0::repack_q4_0), // Q4_0
        quantize: Some(quantize_q4_0),
        gemm: gemm!(Q8_0, q4_0::gemm_q4_0x4_q8_0),
    },
    LayoutSpec {
        layout: Layout::Q8_0x8,
        name: "Q8_0x8",
        dtype: "Q8_0",
        suffix: "q8",
        dtype_code: 3,
        layout_code: 2,
        group_rows: kl::Q8X8_ROWS,
        block_bytes: kl::Q8X8_BLOCK_BYTES,
        acts: ActFormat::Q8_0,
        kept: kept(8, q8_0::repack_q8_0), // Q8_0
        quantize: Some(quantize_q8_0),
        gemm: gemm!(Q8_0, q8_0::gemm_q8_0x8_q8_0),
    },
    LayoutSpec {
        layout: Layout::Q5_0x4,
        name: "Q5_0x4",
        dtype: "Q5_0",
        suffix: "q5_0",
        dtype_code: 6,
        layout_code: 3,
        group_rows: kl::Q5X4_ROWS,
        block_bytes: kl::Q5_0X4_BLOCK_BYTES,
        acts: ActFormat::Q8_0,
        kept: kept(6, q5::repack_q5_0), // Q5_0
        quantize: None,
        gemm: gemm!(Q8_0, q5::gemm_q5_0x4_q8_0),
    },
    LayoutSpec {
        layout: Layout::Q5_1x4,
        name: "Q5_1x4",
        dtype: "Q5_1",
        suffix: "q5_1",
        dtype_code: 7,
        layout_code: 4,
        group_rows: kl::Q5X4_ROWS,
        block_bytes: kl::Q5_1X4_BLOCK_BYTES,
        acts: ActFormat::Q8_0,
        kept: kept(7, q5::repack_q5_1), // Q5_1
        quantize: None,
        gemm: gemm!(Q8_0, q5::gemm_q5_1x4_q8_0),
    },
    LayoutSpec {
        layout: Layout::Q4Kx4,
        name: "Q4_Kx4",
        dtype: "Q4_K",
        suffix: "q4_k",
        dtype_code: 12,
        layout_code: 5,
        group_rows: q4k::Q4KX4_ROWS,
        block_bytes: q4k::Q4KX4_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        kept: kept(12, q4k::repack_q4_k), // Q4_K
        quantize: None,
        gemm: gemm!(Q8K, q4k::gemm_q4_kx4_q8_k),
    },
    LayoutSpec {
        layout: Layout::Q5Kx4,
        name: "Q5_Kx4",
        dtype: "Q5_K",
        suffix: "q5_k",
        dtype_code: 13,
        layout_code: 6,
        group_rows: q5k::Q5KX4_ROWS,
        block_bytes: q5k::Q5KX4_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        kept: kept(13, q5k::repack_q5_k), // Q5_K
        quantize: None,
        gemm: gemm!(Q8K, q5k::gemm_q5_kx4_q8_k),
    },
    LayoutSpec {
        layout: Layout::Q6Kx8,
        name: "Q6_Kx8",
        dtype: "Q6_K",
        suffix: "q6_k",
        dtype_code: 14,
        layout_code: 7,
        group_rows: q6k::Q6KX8_ROWS,
        block_bytes: q6k::Q6KX8_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        kept: kept(14, q6k::repack_q6_k), // Q6_K
        quantize: None,
        gemm: gemm!(Q8K, q6k::gemm_q6_kx8_q8_k),
    },
    LayoutSpec {
        layout: Layout::Iq4Nlx4,
        name: "IQ4_NLx4",
        dtype: "IQ4_NL",
        suffix: "iq4_nl",
        dtype_code: 20,
        layout_code: 8,
        group_rows: kl::Q4X4_ROWS,
        block_bytes: kl::Q4X4_BLOCK_BYTES,
        acts: ActFormat::Q8_0,
        kept: kept(20, iq4nl::repack_iq4_nl), // IQ4_NL
        quantize: None,
        gemm: gemm!(Q8_0, iq4nl::gemm_iq4_nlx4_q8_0),
    },
    LayoutSpec {
        layout: Layout::Q3Kx8,
        name: "Q3_Kx8",
        dtype: "Q3_K",
        suffix: "q3_k",
        dtype_code: 11,
        layout_code: 12,
        group_rows: q3k::Q3KX8_ROWS,
        block_bytes: q3k::Q3KX8_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        kept: kept(11, q3k::repack_q3_k), // Q3_K
        quantize: None,
        gemm: gemm!(Q8K, q3k::gemm_q3_kx8_q8_k),
    },
    LayoutSpec {
        layout: Layout::Iq4Xsx8,
        name: "IQ4_XSx8",
        dtype: "IQ4_XS",
        suffix: "iq4_xs",
        dtype_code: 23,
        layout_code: 10,
        group_rows: iq4xs::IQ4XSX8_ROWS,
        block_bytes: iq4xs::IQ4XSX8_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        kept: kept(23, iq4xs::repack_iq4_xs), // IQ4_XS
        quantize: None,
        gemm: gemm!(Q8K, iq4xs::gemm_iq4_xsx8_q8_k),
    },
    LayoutSpec {
        layout: Layout::Q2Kx8,
        name: "Q2_Kx8",
        dtype: "Q2_K",
        suffix: "q2_k",
        dtype_code: 10,
        layout_code: 11,
        group_rows: q2k::Q2KX8_ROWS,
        block_bytes: q2k::Q2KX8_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        kept: kept(10, q2k::repack_q2_k), // Q2_K
        quantize: None,
        gemm: gemm!(Q8K, q2k::gemm_q2_kx8_q8_k),
    },
    LayoutSpec {
        layout: Layout::Iq3Xxsx8,
        name: "IQ3_XXSx8",
        dtype: "IQ3_XXS",
        suffix: "iq3_xxs",
        dtype_code: 18,
        layout_code: 13,
        group_rows: iq3xxs::IQ3XXSX8_ROWS,
        block_bytes: iq3xxs::IQ3XXSX8_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        #[cfg(feature = "codebook")]
        kept: kept(18, iq3xxs::repack_iq3_xxs), // IQ3_XXS
        #[cfg(not(feature = "codebook"))]
        kept: None,
        quantize: None,
        #[cfg(feature = "codebook")]
        gemm: gemm!(Q8K, iq3xxs::gemm_iq3_xxsx8_q8_k),
        #[cfg(not(feature = "codebook"))]
        gemm: Gemm::None,
    },
    LayoutSpec {
        layout: Layout::Iq2Xxsx8,
        name: "IQ2_XXSx8",
        dtype: "IQ2_XXS",
        suffix: "iq2_xxs",
        dtype_code: 16,
        layout_code: 15,
        group_rows: iq2xxs::IQ2XXSX8_ROWS,
        block_bytes: iq2xxs::IQ2XXSX8_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        #[cfg(feature = "codebook")]
        kept: kept(16, iq2xxs::repack_iq2_xxs), // IQ2_XXS
        #[cfg(not(feature = "codebook"))]
        kept: None,
        quantize: None,
        #[cfg(feature = "codebook")]
        gemm: gemm!(Q8K, iq2xxs::gemm_iq2_xxsx8_q8_k),
        #[cfg(not(feature = "codebook"))]
        gemm: Gemm::None,
    },
    LayoutSpec {
        layout: Layout::Iq2Xsx8,
        name: "IQ2_XSx8",
        dtype: "IQ2_XS",
        suffix: "iq2_xs",
        dtype_code: 17,
        layout_code: 16,
        group_rows: iq2xs::IQ2XSX8_ROWS,
        block_bytes: iq2xs::IQ2XSX8_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        #[cfg(feature = "codebook")]
        kept: kept(17, iq2xs::repack_iq2_xs), // IQ2_XS
        #[cfg(not(feature = "codebook"))]
        kept: None,
        quantize: None,
        #[cfg(feature = "codebook")]
        gemm: gemm!(Q8K, iq2xs::gemm_iq2_xsx8_q8_k),
        #[cfg(not(feature = "codebook"))]
        gemm: Gemm::None,
    },
    LayoutSpec {
        layout: Layout::Iq2Sx8,
        name: "IQ2_Sx8",
        dtype: "IQ2_S",
        suffix: "iq2_s",
        dtype_code: 22,
        layout_code: 17,
        group_rows: iq2s::IQ2SX8_ROWS,
        block_bytes: iq2s::IQ2SX8_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        #[cfg(feature = "codebook")]
        kept: kept(22, iq2s::repack_iq2_s), // IQ2_S
        #[cfg(not(feature = "codebook"))]
        kept: None,
        quantize: None,
        #[cfg(feature = "codebook")]
        gemm: gemm!(Q8K, iq2s::gemm_iq2_sx8_q8_k),
        #[cfg(not(feature = "codebook"))]
        gemm: Gemm::None,
    },
    LayoutSpec {
        layout: Layout::Iq3Sx8,
        name: "IQ3_Sx8",
        dtype: "IQ3_S",
        suffix: "iq3_s",
        dtype_code: 21,
        layout_code: 14,
        group_rows: iq3s::IQ3SX8_ROWS,
        block_bytes: iq3s::IQ3SX8_BLOCK_BYTES,
        acts: ActFormat::Q8K,
        #[cfg(feature = "codebook")]
        kept: kept(21, iq3s::repack_iq3_s), // IQ3_S
        #[cfg(not(feature = "codebook"))]
        kept: None,
        quantize: None,
        #[cfg(feature = "codebook")]
        gemm: gemm!(Q8K, iq3s::gemm_iq3_sx8_q8_k),
        #[cfg(not(feature = "codebook"))]
        gemm: Gemm::None,
    },
    LayoutSpec {
        layout: Layout::GgufRows,
        name: "GGUF rows",
        dtype: "GGUF",
        suffix: "rows",
        // The entry's own: ggml's id of its block type (`Entry::dtype`).
        dtype_code: u8::MAX,
        layout_code: 0,
        group_rows: 1,
        // Per block type: `Entry::expected_nbytes` sizes it.
        block_bytes: 0,
        acts: ActFormat::Float,
        kept: None,
        quantize: None,
        gemm: Gemm::None,
    },
];

const _: () = {
    let mut i = 0;
    while i < LAYOUTS.len() {
        assert!(LAYOUTS[i].layout as usize == i);
        i += 1;
    }
};

impl Layout {
    /// Every layout.
    pub const ALL: [Layout; LAYOUTS.len()] = {
        let mut all = [Layout::F32; LAYOUTS.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = LAYOUTS[i].layout;
            i += 1;
        }
        all
    };

    /// The layout's descriptor.
    pub fn spec(self) -> &'static LayoutSpec {
        &LAYOUTS[self as usize]
    }

    /// Rows per stored row group (1 for the plain layouts).
    pub fn group_rows(self) -> usize {
        self.spec().group_rows
    }

    /// The activations the kernels multiply this layout with.
    pub fn acts(self) -> ActFormat {
        self.spec().acts
    }

    /// Columns of one stored block column: 32, or 256 for the k-quant
    /// layouts (1 for the plain ones).
    pub fn block_cols(self) -> usize {
        match self.acts() {
            ActFormat::Float => 1,
            ActFormat::Q8_0 => QK,
            ActFormat::Q8K => QK_K,
        }
    }

    /// Bytes of one row group: `cols` weights of `group_rows()` rows
    /// (an error for [`Layout::GgufRows`], whose size is its block type's).
    pub fn group_bytes(self, cols: usize) -> Result<usize, Error> {
        let what = self.spec().name;
        if self == Layout::GgufRows {
            return Err(Error::Unsupported {
                what: "the size of GGUF rows without their block type",
                value: cols as u64,
            });
        }
        if !cols.is_multiple_of(self.block_cols()) {
            return Err(Error::NotBlockAligned { what, len: cols });
        }
        mul(what, cols / self.block_cols(), self.spec().block_bytes)
    }

    /// Bytes of a whole `rows x cols` matrix, padding rows included.
    pub fn matrix_bytes(self, rows: usize, cols: usize) -> Result<usize, Error> {
        let groups = rows.div_ceil(self.group_rows());
        mul("matrix bytes", groups, self.group_bytes(cols)?)
    }

    /// The layout with stored codes `(dtype, layout)`, if any (not
    /// [`Layout::GgufRows`], whose dtype is the entry's: the VQF reader
    /// recognises it).
    pub fn from_codes(dtype: u8, layout: u8) -> Option<Layout> {
        let s = LAYOUTS
            .iter()
            .find(|s| s.dtype_code == dtype && s.layout_code == layout)?;
        Some(s.layout)
    }

    /// The layout that keeps GGUF blocks of ggml type id `id`, if any.
    pub fn keeping(id: u32) -> Option<Layout> {
        let s = LAYOUTS
            .iter()
            .find(|s| s.kept.is_some_and(|k| k.ggml_id == id))?;
        Some(s.layout)
    }
}
