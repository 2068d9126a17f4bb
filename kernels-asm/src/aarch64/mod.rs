//! aarch64 kernels: hand-written `asm!` using `sdot` (Armv8.2 dotprod).

use core::arch::asm;

/// Proof that the CPU executing this program implements the dotprod
/// extension (`sdot`/`udot`). Kernels that use `sdot` take one by value.
#[derive(Clone, Copy, Debug)]
pub struct Dotprod(());

impl Dotprod {
    /// `Some` when the build itself targets dotprod (`-C target-feature=+dotprod`
    /// or a target CPU that has it), so every CPU able to run this binary has it.
    pub fn new() -> Option<Self> {
        if cfg!(target_feature = "dotprod") {
            Some(Dotprod(()))
        } else {
            None
        }
    }

    /// Detects dotprod at run time through the operating system.
    #[cfg(feature = "std")]
    pub fn detect() -> Option<Self> {
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            Some(Dotprod(()))
        } else {
            None
        }
    }

    /// A token without checking.
    ///
    /// # Safety
    /// The caller guarantees that the CPU implements FEAT_DotProd; calling a
    /// kernel with this token on a CPU without it executes an undefined
    /// instruction.
    pub unsafe fn new_unchecked() -> Self {
        Dotprod(())
    }
}

const Q4X4_ROWS: usize = 4;
const Q4X4_BLOCK_BYTES: usize = 72;

/// GEMV, Q4_0x4 weights x one Q8_0 activation row.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 72-byte super-blocks;
/// * `act_qs`: `cols` activation quants; `act_d`: `cols / 32` scales;
/// * `out`: `rows` results.
///
/// Returns `false` (and writes nothing) when a length does not fit.
pub fn gemv_q4_0x4_q8_0(
    _cpu: Dotprod,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    out: &mut [f32],
) -> bool {
    if !cols.is_multiple_of(32) || cols == 0 {
        return false;
    }
    let nb = cols / 32;
    let groups = rows.div_ceil(Q4X4_ROWS);
    let group_bytes = nb * Q4X4_BLOCK_BYTES;
    if !(crate::len_ok(groups.checked_mul(group_bytes), w.len())
        && act_qs.len() == cols
        && act_d.len() == nb
        && out.len() == rows)
    {
        return false;
    }
    let full = rows / Q4X4_ROWS;
    if full > 0 {
        // SAFETY: `w` holds `full` groups of `nb` super-blocks (checked above:
        // w.len() = groups * nb * 72 >= full * nb * 72), `act_qs` holds nb * 32
        // bytes and `act_d` nb floats, `out` holds at least full * 4 floats; the
        // token proves dotprod.
        unsafe {
            gemv_q4x4_groups(
                w.as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                out.as_mut_ptr(),
                full,
            )
        };
    }
    let rest = rows - full * Q4X4_ROWS;
    if rest > 0 {
        let mut tail = [0.0f32; Q4X4_ROWS];
        // SAFETY: the last group starts at full * group_bytes and is
        // group_bytes long (w.len() = groups * group_bytes, groups = full + 1);
        // `tail` holds 4 floats.
        unsafe {
            gemv_q4x4_groups(
                w[full * group_bytes..].as_ptr(),
                act_qs.as_ptr(),
                act_d.as_ptr(),
                nb,
                tail.as_mut_ptr(),
                1,
            )
        };
        out[full * Q4X4_ROWS..].copy_from_slice(&tail[..rest]);
    }
    true
}

/// The asm loop: `groups` row groups, each `nb` super-blocks.
///
/// # Safety
/// `w` must point to `groups * nb * 72` readable bytes, `qs` to `nb * 32`,
/// `d` to `nb` floats, `out` to `groups * 4` writable floats, `nb >= 1`, and
/// the CPU must implement dotprod.
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_q4x4_groups(
    w: *const u8,
    qs: *const i8,
    d: *const f32,
    nb: usize,
    out: *mut f32,
    groups: usize,
) {
    // SAFETY: per the function contract, every load stays inside `w`, `qs`,
    // `d` and every store inside `out`: the inner loop reads 72 bytes of `w`,
    // 32 bytes of `qs` and 4 bytes of `d` per block, for nb blocks; the outer
    // loop stores 16 bytes of `out` per group. Only the listed registers are
    // written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0xf0",
            "2:",
            "movi v16.16b, #0",          // acc16 (4 rows) = 0
            "mov x9, {qs}",
            "mov x10, {d}",
            "mov x11, {nb}",
            "3:",
            "ld1 {{v0.4h}}, [{w}], #8",                         // 4 row scales (f16)
            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64", // 4 chunks
            "ld1 {{v5.16b, v6.16b}}, [x9], #32",                // act quants 0..15, 16..31
            "ld1r {{v7.4s}}, [x10], #4",                        // act scale
            "movi v8.16b, #0",
            "shl v17.16b, v1.16b, #4",
            "and v18.16b, v1.16b, v31.16b",
            "shl v19.16b, v2.16b, #4",
            "and v20.16b, v2.16b, v31.16b",
            "shl v21.16b, v3.16b, #4",
            "and v22.16b, v3.16b, v31.16b",
            "shl v23.16b, v4.16b, #4",
            "and v24.16b, v4.16b, v31.16b",
            "sdot v8.4s, v17.16b, v5.4b[0]",
            "sdot v8.4s, v18.16b, v6.4b[0]",
            "sdot v8.4s, v19.16b, v5.4b[1]",
            "sdot v8.4s, v20.16b, v6.4b[1]",
            "sdot v8.4s, v21.16b, v5.4b[2]",
            "sdot v8.4s, v22.16b, v6.4b[2]",
            "sdot v8.4s, v23.16b, v5.4b[3]",
            "sdot v8.4s, v24.16b, v6.4b[3]",
            "fcvtl v0.4s, v0.4h",
            "scvtf v8.4s, v8.4s, #4",    // (16 * isum) / 16 as f32: exact
            "fmul v0.4s, v0.4s, v7.4s",  // d_w * d_a
            "fmul v8.4s, v8.4s, v0.4s",
            "fadd v16.4s, v16.4s, v8.4s",
            "subs x11, x11, #1",
            "b.ne 3b",
            "st1 {{v16.4s}}, [{out}], #16",
            "subs {groups}, {groups}, #1",
            "b.ne 2b",
            w = inout(reg) w => _,
            out = inout(reg) out => _,
            groups = inout(reg) groups => _,
            qs = in(reg) qs,
            d = in(reg) d,
            nb = in(reg) nb,
            out("x9") _, out("x10") _, out("x11") _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _, out("v8") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
            out("v21") _, out("v22") _, out("v23") _, out("v24") _,
            out("v31") _,
            options(nostack),
        );
    }
}
