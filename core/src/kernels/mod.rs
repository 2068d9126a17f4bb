//! Safe dispatch between the kernel sets of `kestrel-kernels` (the scalar
//! `generic` kernels and the architecture kernels), the threaded matrix
//! multiply on top, and its epilogues. The host detects the CPU's features
//! and hands in a token; the core never guesses.
//!
//! Every architecture module of `kestrel-kernels` exports the operations of
//! `generic` under the same names and signatures (the token in front), so
//! one `dispatch!` macro picks the kernel set, and the kernels' `ShapeError`
//! becomes this crate's [`Error`] in one place (its `From` impl below).

use crate::error::Error;
use crate::parallel::{Parallel, MAX_PARTS};
use crate::quant::layout::Gemm;
use crate::quant::repack::{Layout, PackedMatrix};
use crate::state::KvView;
#[cfg(doc)]
use kestrel_kernels::generic;
use kestrel_kernels::ShapeError;

/// Calls kernel `$op` of the kernel set `$k` (a `&Kernels`) with `$args`:
/// the generic one for [`Kernels::Scalar`], the architecture's with its
/// token otherwise.
macro_rules! dispatch {
    ($k:expr, $op:ident($($arg:expr),* $(,)?)) => {
        match $k {
            Kernels::Scalar => kestrel_kernels::generic::$op($($arg),*),
            #[cfg(target_arch = "aarch64")]
            Kernels::Dotprod(cpu) => kestrel_kernels::aarch64::$op(*cpu, $($arg),*),
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2(cpu) => kestrel_kernels::x86_64::$op(*cpu, $($arg),*),
        }
    };
}

/// A kernel's shape error is a size mismatch: the one place it is mapped.
impl From<ShapeError> for Error {
    fn from(e: ShapeError) -> Error {
        Error::SizeMismatch {
            what: e.what,
            expected: e.expected,
            actual: e.actual,
        }
    }
}

/// The kernels behind the methods without a `Result` (SwiGLU, attention)
/// only fail on slices their caller sized wrongly: a bug in the caller,
/// reported as an out-of-bounds index would be.
#[track_caller]
fn sized_by_caller(r: Result<(), ShapeError>) {
    if let Err(e) = r {
        panic!("kernel called with a wrong shape: {e}");
    }
}

/// The kernel set an inference uses.
#[derive(Clone, Copy, Debug)]
pub enum Kernels {
    /// The scalar references: every architecture, every build.
    Scalar,
    /// aarch64 with dotprod: hand-written `sdot` kernels.
    #[cfg(target_arch = "aarch64")]
    Dotprod(kestrel_kernels::aarch64::Dotprod),
    /// x86_64 with AVX2, FMA and F16C: `core::arch` intrinsic kernels (the
    /// Q4_0x4 and Q8_0x8 GEMM tiles with AVX512-VNNI when the token has it).
    #[cfg(target_arch = "x86_64")]
    Avx2(kestrel_kernels::x86_64::Avx2),
}

/// The activations of a matrix multiply: `m` rows, as f32 (for f32/f16
/// weights) and quantized in the format the weight's layout multiplies
/// ([`crate::quant::repack::ActFormat`]: Q8_0 or Q8_K). What the layout does not
/// need may be empty.
#[derive(Clone, Copy, Debug)]
pub struct Acts<'a> {
    /// `m x cols` f32 values.
    pub x: &'a [f32],
    /// `m x cols` quants.
    pub qs: &'a [i8],
    /// `m x cols/32` scales (Q8_0), or `m x cols/256` (Q8_K).
    pub d: &'a [f32],
    /// Q8_K: `m x cols/32` sums of each 32 quants.
    pub sums: &'a [i16],
}

/// What a matrix multiply does with its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// `out = W x` (`m x rows`).
    Store,
    /// `out += W x` (`m x rows`): the residual add of the o and down
    /// projections.
    Add,
    /// `out = silu(gate) * up` (`m x rows / 2`) from fused gate/up rows in
    /// runs of 8 gate then 8 up rows ([`generic::swiglu_runs`]).
    SwiGlu,
}

impl Epilogue {
    /// Output values per input row of `rows` matrix rows.
    fn width(self, rows: usize) -> usize {
        match self {
            Epilogue::SwiGlu => rows / 2,
            _ => rows,
        }
    }

    /// Applies the epilogue to `result` (one token's rows of the multiply)
    /// into `dst` (that token's matching output range).
    fn apply(self, k: &Kernels, result: &[f32], dst: &mut [f32]) {
        match self {
            Epilogue::Store => dst.copy_from_slice(result),
            Epilogue::Add => {
                for (d, &r) in dst.iter_mut().zip(result) {
                    *d += r;
                }
            }
            Epilogue::SwiGlu => k.swiglu_runs(dst, result),
        }
    }
}

struct Part<'o> {
    row0: usize,
    rows: usize,
    /// The part's result (`m x rows`).
    out: &'o mut [f32],
    /// For one token with an epilogue: the output range the part owns.
    dst: Option<&'o mut [f32]>,
    result: Result<(), Error>,
}

impl Kernels {
    /// A short name for logs and test output.
    pub fn name(&self) -> &'static str {
        match self {
            Kernels::Scalar => "scalar",
            #[cfg(target_arch = "aarch64")]
            Kernels::Dotprod(_) => "aarch64-dotprod",
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2(cpu) => match cpu.vnni() {
                kestrel_kernels::x86_64::Vnni::Avx512 => "x86_64-avx512vnni",
                kestrel_kernels::x86_64::Vnni::Avx => "x86_64-avxvnni",
                kestrel_kernels::x86_64::Vnni::No => "x86_64-avx2",
            },
        }
    }

    /// Quantizes activations to Q8_0 content (`x.len()` a multiple of 32):
    /// the same bytes as [`generic::quantize_acts_q8_0`], with the fastest
    /// code the kernel set has.
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn quantize_acts(&self, x: &[f32], qs: &mut [i8], d: &mut [f32]) -> Result<(), Error> {
        Ok(dispatch!(self, quantize_acts_q8_0(x, qs, d))?)
    }

    /// Quantizes activations to Q8_K (`x.len()` a multiple of 256): the
    /// same bytes as [`generic::quantize_acts_q8_k`], with the fastest code
    /// the kernel set has.
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn quantize_acts_k(
        &self,
        x: &[f32],
        qs: &mut [i8],
        d: &mut [f32],
        sums: &mut [i16],
    ) -> Result<(), Error> {
        Ok(dispatch!(self, quantize_acts_q8_k(x, qs, d, sums))?)
    }

    /// `out[r] = W[r] . x` for a plain f32 or f16 weight: the same bits as
    /// [`generic::matvec_f32`] / [`generic::matvec_f16`], with the fastest
    /// code the kernel set has.
    pub fn matvec_float(&self, w: &PackedMatrix, x: &[f32], out: &mut [f32]) -> Result<(), Error> {
        let (b, r, c) = (w.bytes, w.rows, w.cols);
        match w.layout {
            Layout::F32 => Ok(dispatch!(self, matvec_f32(b, r, c, x, out))?),
            Layout::F16 => Ok(dispatch!(self, matvec_f16(b, r, c, x, out))?),
            _ => Err(Error::SizeMismatch {
                what: "matvec_float layout group rows (f32/f16 only)",
                expected: 1,
                actual: w.layout.group_rows(),
            }),
        }
    }

    /// SwiGLU over fused gate/up runs: the bits of
    /// [`generic::swiglu_runs`], with the fastest code the kernel set has.
    /// `out.len()` must be a multiple of 8 and `gate_up` twice as long.
    pub fn swiglu_runs(&self, out: &mut [f32], gate_up: &[f32]) {
        sized_by_caller(dispatch!(self, swiglu_runs(out, gate_up)))
    }

    /// One value head of the gated delta rule for one token (Qwen3.5's
    /// Gated DeltaNet): `state` [k.len(), v.len()] decays by `decay`, takes
    /// the write `state += k (beta (v - state^T k))^T`, and `out` gets
    /// `state^T q`: the bits of [`generic::delta_rule`], with the fastest
    /// code the kernel set has.
    #[allow(clippy::too_many_arguments)]
    pub fn delta_rule(
        &self,
        state: &mut [f32],
        k: &[f32],
        q: &[f32],
        v: &[f32],
        decay: f32,
        beta: f32,
        out: &mut [f32],
    ) {
        sized_by_caller(dispatch!(
            self,
            delta_rule(state, k, q, v, decay, beta, out)
        ))
    }

    /// GELU (tanh approximation) in place: the bits of
    /// [`generic::gelu_tanh`] on every value, with the fastest code the
    /// kernel set has.
    pub fn gelu_tanh(&self, x: &mut [f32]) {
        dispatch!(self, gelu_tanh_in_place(x))
    }

    /// Softmax of each row of `n` values in place (the heads of one GQA
    /// group, a block of queries): every row the bits of
    /// [`Kernels::softmax`], the rows' serial passes overlapped
    /// ([`generic::softmax_rows`]).
    pub fn softmax_rows(&self, x: &mut [f32], n: usize) {
        dispatch!(self, softmax_rows(x, n))
    }

    /// One tile of an online softmax over the rows of `n` values in `x`
    /// (`maxes`, `sums` one per row): the bits of
    /// [`generic::softmax_rows_online`], with the fastest code the kernel
    /// set has.
    pub fn softmax_rows_online(
        &self,
        x: &mut [f32],
        n: usize,
        maxes: &mut [f32],
        sums: &mut [f32],
    ) {
        sized_by_caller(dispatch!(self, softmax_rows_online(x, n, maxes, sums)))
    }

    /// Softmax in place: the bits of [`generic::softmax`] (the
    /// exponentials vectorized, their sum in order): one row of
    /// [`Kernels::softmax_rows`].
    pub fn softmax(&self, x: &mut [f32]) {
        let n = x.len();
        self.softmax_rows(x, n);
    }

    /// Attention scores of one query head over `scores.len()` cached keys
    /// (`q.len()` elements at `j * stride`, all inside `keys`): the same
    /// bits as [`generic::attn_scores_f16`] / [`generic::attn_scores_f32`],
    /// with the fastest code the kernel set has: one head of
    /// [`Kernels::attn_scores_heads`].
    pub fn attn_scores(
        &self,
        q: &[f32],
        keys: KvView,
        stride: usize,
        scale: f32,
        scores: &mut [f32],
    ) {
        self.attn_scores_heads(q, 1, keys, stride, scale, scores)
    }

    /// Attention output of one head: `out = sum_j probs[j] * V_j` over the
    /// cached values (`out.len()` elements at `j * stride`, all inside
    /// `values`): the same bits as [`generic::attn_values_f16`] /
    /// [`generic::attn_values_f32`], with the fastest code the kernel set
    /// has: one head of [`Kernels::attn_values_heads`].
    pub fn attn_values(&self, probs: &[f32], values: KvView, stride: usize, out: &mut [f32]) {
        let hd = out.len();
        self.attn_values_heads(probs, 1, values, stride, hd, out, hd)
    }

    /// Attention scores of `heads` query heads over the same cached keys
    /// (one GQA group): `qs` the heads' queries one after the other,
    /// `scores` their rows of scores (`scores[g * n + j]`); each row the
    /// bits of [`Kernels::attn_scores`] for its query.
    pub fn attn_scores_heads(
        &self,
        qs: &[f32],
        heads: usize,
        keys: KvView,
        stride: usize,
        scale: f32,
        scores: &mut [f32],
    ) {
        sized_by_caller(match keys {
            KvView::F16(k) => {
                dispatch!(
                    self,
                    attn_scores_f16_heads(qs, heads, k, stride, scale, scores)
                )
            }
            KvView::F32(k) => {
                dispatch!(
                    self,
                    attn_scores_f32_heads(qs, heads, k, stride, scale, scores)
                )
            }
        })
    }

    /// Attention outputs of `heads` query heads over the same cached values
    /// (one GQA group): `probs` the heads' probabilities one after the
    /// other, head `g`'s `hd` outputs at `out[g * out_stride ..]`; each the
    /// bits of [`Kernels::attn_values`] for its probabilities.
    #[allow(clippy::too_many_arguments)]
    pub fn attn_values_heads(
        &self,
        probs: &[f32],
        heads: usize,
        values: KvView,
        stride: usize,
        hd: usize,
        out: &mut [f32],
        out_stride: usize,
    ) {
        sized_by_caller(match values {
            KvView::F16(v) => dispatch!(
                self,
                attn_values_f16_heads(probs, heads, v, stride, hd, out, out_stride)
            ),
            KvView::F32(v) => dispatch!(
                self,
                attn_values_f32_heads(probs, heads, v, stride, hd, out, out_stride)
            ),
        })
    }

    /// `out[t][r] = W[r] . act[t]` for `m` quantized activation rows (in
    /// the layout's format) and a quantized weight; `out` is `m x rows`.
    /// One thread.
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn gemm_quantized(
        &self,
        w: &PackedMatrix,
        acts: &Acts,
        m: usize,
        out: &mut [f32],
    ) -> Result<(), Error> {
        let (b, r, c) = (w.bytes, w.rows, w.cols);
        let nb = c / w.layout.block_cols().max(1);

        let qs = acts.qs.get(..m * c).ok_or(Error::SizeMismatch {
            what: "activation quants",
            expected: m * c,
            actual: acts.qs.len(),
        })?;
        let d = acts.d.get(..m * nb).ok_or(Error::SizeMismatch {
            what: "activation scales",
            expected: m * nb,
            actual: acts.d.len(),
        })?;
        let n = m * c / crate::quant::QK;
        let sums = || {
            acts.sums.get(..n).ok_or(Error::SizeMismatch {
                what: "activation sums",
                expected: n,
                actual: acts.sums.len(),
            })
        };
        match w.layout.spec().gemm {
            Gemm::Q8_0(f) => Ok(match self {
                Kernels::Scalar => (f.generic)(b, r, c, qs, d, m, out),
                #[cfg(target_arch = "aarch64")]
                Kernels::Dotprod(cpu) => (f.arch)(*cpu, b, r, c, qs, d, m, out),
                #[cfg(target_arch = "x86_64")]
                Kernels::Avx2(cpu) => (f.arch)(*cpu, b, r, c, qs, d, m, out),
            }?),
            Gemm::Q8K(f) => {
                let s = sums()?;
                Ok(match self {
                    Kernels::Scalar => (f.generic)(b, r, c, qs, d, s, m, out),
                    #[cfg(target_arch = "aarch64")]
                    Kernels::Dotprod(cpu) => (f.arch)(*cpu, b, r, c, qs, d, s, m, out),
                    #[cfg(target_arch = "x86_64")]
                    Kernels::Avx2(cpu) => (f.arch)(*cpu, b, r, c, qs, d, s, m, out),
                }?)
            }
            Gemm::None => Err(Error::SizeMismatch {
                what: "gemm_quantized needs a quantized layout (group rows 4 or 8)",
                expected: 4,
                actual: w.layout.group_rows(),
            }),
        }
    }

    /// [`Kernels::gemm_quantized`] for a layout multiplied with Q8_0
    /// activations (Q4_0x4, Q8_0x8).
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn gemm_q8(
        &self,
        w: &PackedMatrix,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) -> Result<(), Error> {
        let acts = Acts {
            x: &[],
            qs: act_qs,
            d: act_d,
            sums: &[],
        };
        self.gemm_quantized(w, &acts, m, out)
    }

    /// One part of a multiply: `out` (`m x w.rows`) for any layout.
    fn multiply_part(
        &self,
        w: &PackedMatrix,
        acts: &Acts,
        m: usize,
        out: &mut [f32],
    ) -> Result<(), Error> {
        match w.layout {
            Layout::F32 | Layout::F16 => {
                if out.len() != m * w.rows {
                    return Err(Error::SizeMismatch {
                        what: "output values",
                        expected: m * w.rows,
                        actual: out.len(),
                    });
                }
                for t in 0..m {
                    let x =
                        acts.x
                            .get(t * w.cols..(t + 1) * w.cols)
                            .ok_or(Error::SizeMismatch {
                                what: "f32 activations",
                                expected: m * w.cols,
                                actual: acts.x.len(),
                            })?;
                    self.matvec_float(w, x, &mut out[t * w.rows..(t + 1) * w.rows])?;
                }
                Ok(())
            }
            _ => self.gemm_quantized(w, acts, m, out),
        }
    }

    /// `out[t][r] = W[r] . act[t]`, `out` = `m x rows`, split over the
    /// pool's threads by row groups (each thread streams its own rows).
    /// For `m > 1`, `tmp` (at least `m x rows`) holds the parts before they
    /// are scattered into `out`.
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn matmul<P: Parallel>(
        &self,
        pool: &P,
        w: &PackedMatrix,
        acts: &Acts,
        m: usize,
        out: &mut [f32],
        tmp: &mut [f32],
    ) -> Result<(), Error> {
        self.matmul_into(pool, w, acts, m, Epilogue::Store, out, tmp)
    }

    /// [`Kernels::matmul`] with an epilogue: store, add into, or SwiGLU
    /// into `out`. For one token each thread applies the epilogue to the
    /// rows it computed, while they are in cache; for a batch it is applied
    /// as the parts are scattered. `tmp` needs `m x rows` values (`rows`
    /// when `m == 1`; nothing for a plain store of one token).
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn matmul_into<P: Parallel>(
        &self,
        pool: &P,
        w: &PackedMatrix,
        acts: &Acts,
        m: usize,
        epi: Epilogue,
        out: &mut [f32],
        tmp: &mut [f32],
    ) -> Result<(), Error> {
        let width = epi.width(w.rows);
        if out.len() != m * width {
            return Err(Error::SizeMismatch {
                what: "matmul output",
                expected: m * width,
                actual: out.len(),
            });
        }
        // SwiGLU needs whole runs of 16 fused rows in each part.
        let unit = if epi == Epilogue::SwiGlu {
            if !w.rows.is_multiple_of(16) {
                return Err(Error::SizeMismatch {
                    what: "fused gate/up rows (a multiple of 16)",
                    expected: w.rows.next_multiple_of(16),
                    actual: w.rows,
                });
            }
            16
        } else {
            w.layout.group_rows()
        };
        let units = w.rows.div_ceil(unit);
        let parts = pool.threads().clamp(1, MAX_PARTS).min(units.max(1));
        let need = if m == 1 { w.rows } else { m * w.rows };
        let have = tmp.len();
        if m == 1 && epi == Epilogue::Store {
            return self.run_parts(pool, w, acts, 1, parts, unit, out, None, epi);
        }
        let buf = tmp.get_mut(..need).ok_or(Error::SizeMismatch {
            what: "matmul scratch",
            expected: need,
            actual: have,
        })?;
        if m == 1 {
            return self.run_parts(pool, w, acts, 1, parts, unit, buf, Some(out), epi);
        }
        self.run_parts(pool, w, acts, m, parts, unit, buf, None, epi)?;
        // Part p holds `m x rows_p` at offset row0_p * m; scatter into `out`
        // through the epilogue, the tokens split over the threads.
        let buf: &[f32] = buf;
        let mut token_parts: heapless::Vec<&mut [f32], MAX_PARTS> = heapless::Vec::new();
        let tparts = pool.threads().clamp(1, MAX_PARTS).min(m);
        let mut rest = out;
        for p in 0..tparts {
            let tokens = m * (p + 1) / tparts - m * p / tparts;
            let (chunk, tail) = core::mem::take(&mut rest).split_at_mut(tokens * width);
            rest = tail;
            let _ = token_parts.push(chunk);
        }
        pool.for_each_mut(&mut token_parts, &|p, chunk| {
            let t0 = m * p / tparts;
            for (i, dst_row) in chunk.chunks_exact_mut(width).enumerate() {
                let t = t0 + i;
                for q in 0..parts {
                    let (row0, rows) = part_rows(w.rows, unit, units, parts, q);
                    let src = &buf[row0 * m + t * rows..row0 * m + (t + 1) * rows];
                    let (d0, dn) = (epi.width(row0), epi.width(rows));
                    epi.apply(self, src, &mut dst_row[d0..d0 + dn]);
                }
            }
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_parts<P: Parallel>(
        &self,
        pool: &P,
        w: &PackedMatrix,
        acts: &Acts,
        m: usize,
        parts: usize,
        unit: usize,
        buf: &mut [f32],
        dst: Option<&mut [f32]>,
        epi: Epilogue,
    ) -> Result<(), Error> {
        let units = w.rows.div_ceil(unit);
        let mut items: heapless::Vec<Part<'_>, MAX_PARTS> = heapless::Vec::new();
        let mut rest = buf;
        let mut dst_rest = dst;
        for p in 0..parts {
            let (row0, rows) = part_rows(w.rows, unit, units, parts, p);
            let (chunk, tail) = core::mem::take(&mut rest).split_at_mut(rows * m);
            rest = tail;
            let part_dst = match dst_rest.take() {
                Some(d) => {
                    let (a, b) = d.split_at_mut(epi.width(rows));
                    dst_rest = Some(b);
                    Some(a)
                }
                None => None,
            };
            let _ = items.push(Part {
                row0,
                rows,
                out: chunk,
                dst: part_dst,
                result: Ok(()),
            });
        }
        pool.for_each_mut(&mut items, &|_, part| {
            part.result = w
                .sub_rows(part.row0, part.rows)
                .and_then(|sub| self.multiply_part(&sub, acts, m, part.out));
            if let (Ok(()), Some(d)) = (&part.result, part.dst.as_deref_mut()) {
                epi.apply(self, part.out, d);
            }
        });
        items.iter().try_for_each(|p| p.result)
    }
}

/// Rows `(row0, rows)` of part `p` of `parts`: whole units of `unit` rows
/// (a row group, or a SwiGLU run), split evenly; the last unit may be short.
fn part_rows(total: usize, unit: usize, units: usize, parts: usize, p: usize) -> (usize, usize) {
    let u0 = units * p / parts;
    let u1 = units * (p + 1) / parts;
    let row0 = u0 * unit;
    (row0, (u1 * unit).min(total) - row0)
}
