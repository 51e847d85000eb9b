// Conv (ai.onnx 1, 11, 22) as seen by olc-core: attribute and shape
// validation, the constant weights packed once, and the three algorithms:
//   pointwise  1x1, stride 1, no padding: Y[g] = W[g] X[g], the GEMM reading
//              the NCHW input in place as its B operand (no copy);
//   implicit   every other grouped convolution: im2col tiles of at most
//              KC x NC values (a bounded working set per thread, never the
//              im2col matrix of the whole input) fed to the packed float32
//              microkernel, the output written in place (an image stem's
//              microkernel reads B's rows from the padded input instead);
//   depthwise  one input channel per group: a direct vectorised loop
//              (conv_kernels.inc), not a GEMM of width one.
// The weights are the GEMM's row operand (output channels are the rows of
// an NCHW output), so a constant W is packed into the microkernel's MR-row
// strips at create(). Compiled without ISA flags.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "adapter_util.h"
#include "conv_adapter.h"
#include "conv_common.h"
#include "conv_kernels.h"
#include "gemm_driver.h"
#include "scratch.h"

namespace olc_mm {

namespace {

using namespace conv;  // NOLINT(build/namespaces): the shared attributes and geometry

const olc_core_api* g_api = nullptr;

// Constant weights up to this many values are also packed as the
// transposed product's W^T panels (16 MiB of float32).
constexpr int64_t kMaxWtFloats = int64_t(1) << 22;

thread_local FloatScratch t_tile, t_ctile, t_xplane, t_yplane, t_pad, t_res;
// Per-thread index buffers (kept between runs: a small Conv's run costs
// about as much as an allocation): the tasks' panel runs, the run's tap
// offsets.
thread_local std::vector<int64_t> t_runs, t_koff;
// A panel of the implicit GEMM reading rows directly (gemm_range).
struct RowPanel {
  int64_t col;
  int nr;
  const float* bp;
};
thread_local std::vector<RowPanel> t_row_panels;

// At least n elements, every one of which the caller writes before reading:
// only grown, never shrunk (resize after a smaller layer zero-filled the
// difference again: a memset per layer when layers alternate, 1 % of a
// MobileNetV3-style stack).
inline void index_buffer(std::vector<int64_t>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

// Three quarters of the L2 (of 1 MiB where its size is unknown): past
// this much, one core's L2 no longer holds a layer's working set.
inline int64_t l2_three_quarters(const CacheInfo& c) {
  const int64_t l2 = c.l2 > 0 ? c.l2 : int64_t(1) << 20;
  return l2 / 4 * 3;
}

inline float load_f(const uint16_t* p, int64_t i, bool f16) { return f16 ? f16_to_f32(p[i]) : bf16_to_f32(p[i]); }

// Element i of a float32/float16/bfloat16 buffer as float32.
inline float elem(int32_t dt, const void* p, int64_t i) {
  if (dt == OLC_DTYPE_FLOAT) return static_cast<const float*>(p)[i];
  return load_f(static_cast<const uint16_t*>(p), i, dt == OLC_DTYPE_FLOAT16);
}
inline void put(int32_t dt, void* p, int64_t i, float v) {
  if (dt == OLC_DTYPE_FLOAT) static_cast<float*>(p)[i] = v;
  else if (dt == OLC_DTYPE_FLOAT16) static_cast<uint16_t*>(p)[i] = f32_to_f16(v);
  else static_cast<uint16_t*>(p)[i] = f32_to_bf16(v);
}
// n values from a strided source (stride in elements) into float32.
void convert_run(int32_t dt, const void* src, int64_t stride, int64_t n, float* dst) {
  if (dt == OLC_DTYPE_FLOAT) {
    const float* s = static_cast<const float*>(src);
    if (stride == 1) std::memcpy(dst, s, sizeof(float) * n);
    else
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i * stride];
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (dt == OLC_DTYPE_FLOAT16)
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i * stride]);
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i * stride]);
}

// The output epilogue of rows x cols float32 values at y (row stride ld):
// FusedConv's residual added (elements ro + i * ldr + j of R, in the run's
// type dt; NULL: none), then the activation (NULL: none). A 16-bit
// residual is converted a row at a time. false: out of memory.
bool finish(const ConvKernels* ck, const Activation* act, int32_t dt, const void* R, int64_t ro, int64_t ldr, float* y,
            int64_t rows, int64_t cols, int64_t ld) {
  if (!R || dt == OLC_DTYPE_FLOAT) {
    ck->activate(act, y, rows, cols, ld, R ? static_cast<const float*>(R) + ro : nullptr, ldr);
    return true;
  }
  float* buf = t_res.get(static_cast<size_t>(cols));
  if (!buf) return false;
  for (int64_t i = 0; i < rows; ++i) {
    convert_run(dt, static_cast<const uint16_t*>(R) + ro + i * ldr, 1, cols, buf);
    ck->activate(act, y + i * ld, 1, cols, ld, buf, cols);
  }
  return true;
}

// The activation of act as the float microkernels' epilogue applies it, set
// into ep; false for one it does not (Sigmoid, Swish, an affine after
// anything but HardSwish).
bool epilogue_activation(const Activation* act, Epi<float>* ep) {
  if (act && act->post) {
    // A scalar affine after the activation: the epilogue has it after
    // HardSwish (whose own constants leave a and b free) only.
    if (act->kind != ActKind::kHardSwish) return false;
    ep->act = kEpiHardSwishAffine;
    ep->act_a = act->post_scale;
    ep->act_b = act->post_shift;
    return true;
  }
  switch (act ? act->kind : ActKind::kNone) {
    case ActKind::kNone: return true;
    case ActKind::kRelu:
      ep->act = kEpiClamp;
      ep->act_a = 0.0f;
      ep->act_b = std::numeric_limits<float>::infinity();
      return true;
    case ActKind::kClip: ep->act = kEpiClamp; break;
    case ActKind::kLeakyRelu: ep->act = kEpiLeakyRelu; break;
    case ActKind::kHardSigmoid: ep->act = kEpiHardSigmoid; break;
    case ActKind::kHardSwish: ep->act = kEpiHardSwish; break;
    default: return false;
  }
  ep->act_a = act->a;
  ep->act_b = act->b;
  return true;
}

// ------------------------------------------------------------ geometry

struct ConvState : ConvAttrs {
  KernelSet ks;
  const ConvKernels* ck;
  const olc_tuning_param* t_kc = nullptr;
  const olc_tuning_param* t_nc = nullptr;
  const olc_tuning_param* t_par = nullptr;
  const olc_tuning_param* t_stream = nullptr;
  const olc_tuning_param* t_pwd = nullptr;
  const olc_tuning_param* t_trows = nullptr;
  const olc_tuning_param* t_inplace = nullptr;
  const olc_tuning_param* t_shared = nullptr;
  const olc_tuning_param* t_rows = nullptr;
  const olc_tuning_param* t_gemv = nullptr;
  // Constant weights: MR-row strips (GEMM) or float32 taps (depthwise),
  // chosen from W's shape (the input's channel count is checked per run).
  std::shared_ptr<PackedB> wpack;
  // The transposed product's W^T panels (GEMM layouts, W up to
  // kMaxWtFloats values).
  std::shared_ptr<PackedB> wtpack;
  // Winograd F(2x2, 3x3): the transformed weights (float32 3x3 at stride 1).
  std::shared_ptr<PackedB> wino, wino_t;  // U strips; U^T panels (few tiles)
  const olc_tuning_param* t_wino = nullptr;
  const olc_tuning_param* t_direct_t = nullptr;
  bool wpack_dw = false;
  const void* wdata = nullptr;
  std::vector<int64_t> wshape;
  // With BatchNormalization folded: the bias (Cout values), float32.
  std::vector<float> fbias;
  std::string detail_gemm, detail_pw, detail_gemmt, detail_pwt, detail_dw, detail_dwb, detail_wino, detail_winot;
  std::string detail_gemm_rows;  // the implicit GEMM reading B's rows in place (direct_rows)
  std::string detail_gemmd;      // the transposed product reading its strips in place (gemmd_range)
  std::string detail_pws, detail_pwts;  // a strided 1x1 convolution's subsampled input, pointwise
};

// ------------------------------------------------------------ weights

// W [G * Mg, Kg] into float32 strips: per group, ceil(Mg / MR) strips of
// Kg x MR (k-major, MR rows per k), rows past Mg zero.
void pack_strips(int32_t dt, const void* W, int64_t G, int64_t Mg, int64_t Kg, int MR, float* dst) {
  const int64_t ns = (Mg + MR - 1) / MR;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t s = 0; s < ns; ++s) {
      float* o = dst + (g * ns + s) * Kg * MR;
      for (int i = 0; i < MR; ++i) {
        const int64_t m = s * MR + i;
        if (m >= Mg) {
          for (int64_t k = 0; k < Kg; ++k) o[k * MR + i] = 0.0f;
          continue;
        }
        const int64_t row = (g * Mg + m) * Kg;
        for (int64_t k = 0; k < Kg; ++k) o[k * MR + i] = elem(dt, W, row + k);
      }
    }
}

size_t strips_floats(int64_t G, int64_t Mg, int64_t Kg, int MR) {
  return static_cast<size_t>(G * ((Mg + MR - 1) / MR) * Kg * MR);
}

// ------------------------------------------------------------ implicit GEMM

// K split evenly into nkb blocks of at most KC: blocks of kstep values,
// the last one shorter.
inline void kblocks(int64_t Kg, int64_t KC, int64_t* nkb, int64_t* kstep) {
  *nkb = (Kg + KC - 1) / KC;
  *kstep = (Kg + *nkb - 1) / *nkb;
}

struct GemmJob {
  const Geom* g;
  int32_t dt;
  const IsaKernels* isa;
  const ConvKernels* ck;
  const float* wp;  // strips
  const void* x;
  void* y;
  const float* bias;  // float32, Cout values, or NULL
  const Activation* act;  // applied to each finished tile; NULL: none
  const void* res;        // FusedConv's residual (Y's shape and type); NULL: none
  int64_t KC, NC;
  int64_t tn, tm, mstep;
  bool direct_b;  // pointwise float32: X read in place
  const float* wt;  // direct_b: constant W's W^T panels (the transposed product's), or NULL
  bool pack_rows;  // direct_b: the tile's panels copied row by row per K block
  bool strip_outer;  // direct_b: each strip of rows across the tile's panels, then the next
  // Implicit GEMM: B's rows read straight from the padded input at the
  // tap offsets (ukrows, no panel built); tiles of whole output rows, each
  // row in panels of NR positions and a shorter last one.
  bool direct_rows;
  bool stream;       // float32 Y written with non-temporal stores (kStream)
  // Implicit GEMM: the input in PadLayout l (images n0 .. n0 + nimg, each
  // img_stride floats from src; src is X itself when no copy is needed),
  // and the offset of each im2col row k from its group's first channel.
  const float* src;
  PadLayout l;
  int64_t n0, nimg, img_stride;
  const int64_t* koff;
  // Each task pads the rows its tile reads from X itself (2-D and 1-D, on
  // several threads, one task per tile): no serial copy before the tasks.
  bool own_pad;
  std::atomic<bool>* failed;
};

thread_local FloatScratch t_opad, t_bpanels;
thread_local std::vector<int64_t> t_task_koff;

// The padded rows [r0, r1) that output positions [s0, s0 + nc) read (one
// padded depth).
void tile_rows(const GemmJob& job, int64_t s0, int64_t nc, int64_t* r0, int64_t* r1) {
  const Geom& g = *job.g;
  const int64_t oh0 = s0 / g.out[2], oh1 = (s0 + nc - 1) / g.out[2];
  *r0 = oh0 * g.s[1];
  *r1 = std::min(job.l.Hp, oh1 * g.s[1] + (g.k[1] - 1) * g.d[1] + 1);
}

// A task's own padded rows (own_pad): rows [r0, r1) (one padded depth) of
// image n's group gi channels of X (dtype dt), copied into the calling
// thread's buffer in a layout of their own, channel after channel (laid
// out like the whole image, one tile's rows of 128 channels lay a padded
// plane apart and every tile wrote fresh lines), with `tail` zeros after
// them. *koff: the Kg tap offsets at that layout's channel stride (from
// channel 0's ksz in koff0); *row_shift: row r0's offset in layout l.
// NULL: out of memory.
const float* pad_own_rows(const Geom& g, const ConvKernels* ck, const void* x, int32_t dt, const PadLayout& l,
                          const int64_t* koff0, int64_t n, int64_t gi, int64_t r0, int64_t r1, int64_t tail,
                          const int64_t** koff, int64_t* row_shift) {
  const PadLayout lt = rows_layout(l, r0, r1);
  float* P = t_opad.get(static_cast<size_t>(g.Cg * lt.cs + tail));
  if (!P) return nullptr;
  const size_t es = dt == OLC_DTYPE_FLOAT ? 4 : 2;
  const void* xg = static_cast<const char*>(x) + static_cast<size_t>((n * g.C + gi * g.Cg) * g.in_sp) * es;
  PadCopy pc = pad_copy_of(g, lt, xg, dt, g.Cg, P, r0, r1);
  pc.dst_r0 = r0;
  ck->pad_copy(&pc);
  std::fill_n(P + g.Cg * lt.cs, tail, 0.0f);
  *row_shift = r0 * lt.sw * lt.Wq;
  std::vector<int64_t>& tk = t_task_koff;
  index_buffer(tk, g.Kg);
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t t = 0; t < g.ksz; ++t) tk[c * g.ksz + t] = koff0[t] + c * lt.cs;
  *koff = tk.data();
  return P;
}

// The epilogue of a product whose bias runs along its rows (the output
// channels of the normal product) or its columns (the transposed one's),
// with alpha = beta = 1; the caller sets bias and activation.
Epi<float> bias_epilogue(bool per_column) {
  Epi<float> ep{};
  ep.alpha = 1.0f;
  ep.beta = 1.0f;
  ep.bias_rs = per_column ? 0 : 1;
  ep.bias_cs = per_column ? 1 : 0;
  return ep;
}

// The last nr <= MR positions [c0, c0 + nr) of a pointwise tile, output
// channels [m0, m1) of group gi, as the transposed product: X^T's nr rows
// (one strip) by the W^T panels, transposed into the planes. A 14x14
// plane's last 4 of 196 positions cost the normal product a whole vector
// per strip and k (16 columns for 4: 6 % of a 1x1 1024->256 layer); here
// nr rows per W^T panel. false: out of memory.
bool pointwise_tail(const GemmJob& job, int64_t n, int64_t gi, int64_t c0, int nr, int64_t m0, int64_t m1,
                    int64_t kstep) {
  const Geom& g = *job.g;
  const IsaKernels* isa = job.isa;
  const int NR = isa->nr_f32;
  const int64_t npg = (g.Mg + NR - 1) / NR;
  const int64_t q0 = m0 / NR, q1 = (m1 + NR - 1) / NR;  // the W^T panels covering [m0, m1)
  const int64_t ldc = (q1 - q0) * NR;
  float* C = t_ctile.get(static_cast<size_t>(nr * ldc));
  if (!C) return false;
  // The strip of nr positions is read in place: row k of it is X's row k.
  const float* xg = static_cast<const float*>(job.x) + (n * g.C + gi * g.Cg) * g.in_sp + c0;
  Epi<float> ep = bias_epilogue(true);
  for (int64_t k0 = 0; k0 < g.Kg; k0 += kstep) {
    const int64_t kc = std::min(kstep, g.Kg - k0);
    const int flags = (k0 == 0 ? kFirst : 0) | (k0 + kc == g.Kg ? kLast : 0);
    for (int64_t q = q0; q < q1; ++q) {
      const int cn = static_cast<int>(std::min<int64_t>(NR, g.Mg - q * NR));
      ep.bias = job.bias ? job.bias + gi * g.Mg + q * NR : nullptr;
      isa->ukka_f32(kc, xg + k0 * g.in_sp, g.in_sp, job.wt + ((gi * npg + q) * g.Kg + k0) * NR, NR,
                    C + (q - q0) * NR, ldc, nr, cn, flags, &ep, nullptr, 0);
    }
  }
  // [position][channel] into the planes; with a residual, added to what
  // was stored, then activated.
  const int64_t o = (n * g.Cout + gi * g.Mg + m0) * g.out_sp + c0;
  float* y = static_cast<float*>(job.y) + o;
  job.ck->transpose_store(C + (m0 - q0 * NR), nr, m1 - m0, ldc, y, g.out_sp, job.res ? nullptr : job.act);
  return !job.res || finish(job.ck, job.act, job.dt, job.res, o, g.out_sp, y, m1 - m0, nr, g.out_sp);
}

void gemm_range(void* user, int64_t begin, int64_t end) {
  const GemmJob& job = *static_cast<const GemmJob*>(user);
  const Geom& g = *job.g;
  const IsaKernels* isa = job.isa;
  const int MR = isa->mr_f32, NR = isa->nr_f32;
  const bool f32 = job.dt == OLC_DTYPE_FLOAT;
  const bool direct_b = job.direct_b;
  const int64_t nstrips = (g.Mg + MR - 1) / MR;
  int64_t nkb, kstep;
  kblocks(g.Kg, job.KC, &nkb, &kstep);
  std::vector<int64_t>& runs = t_runs;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t ti = t % job.tn;
    const int64_t mi = (t / job.tn) % job.tm;
    const int64_t gi = (t / (job.tn * job.tm)) % g.G;
    const int64_t n = job.n0 + t / (job.tn * job.tm * g.G);
    // Tile ti: panels [ti P / tn, (ti + 1) P / tn) of the P panels, so the
    // tiles differ by one panel at most: ceil(out_sp / NR) panels, or
    // reading rows directly, ceil(OW / NR) per output row (panel p starts
    // at position first(p)).
    const int64_t OW = g.out[2], segs = (OW + NR - 1) / NR;
    auto first = [&](int64_t p) {
      return job.direct_rows ? p / segs * OW + p % segs * NR : std::min(g.out_sp, p * NR);
    };
    const int64_t P = job.direct_rows ? g.out_sp / OW * segs : (g.out_sp + NR - 1) / NR;
    const int64_t p0 = ti * P / job.tn, npanels = (ti + 1) * P / job.tn - p0;
    const int64_t s0 = first(p0), nc = first(p0 + npanels) - s0;
    const int64_t m0 = mi * job.mstep, m1 = std::min(g.Mg, m0 + job.mstep);
    if (m0 >= m1 || nc <= 0) continue;
    const int64_t ncpad = (nc + NR - 1) / NR * NR;
    // A last panel of at most MR positions, read in place, with constant
    // weights: the transposed product (pointwise_tail), after the others.
    const int64_t tail = nc - (npanels - 1) * NR;
    const bool tail_t = direct_b && job.wt && tail <= MR;
    const int64_t nfull = tail_t ? npanels - 1 : npanels;
    const int64_t co0 = gi * g.Mg;
    float* C;
    int64_t ldc;
    if (f32) {
      C = static_cast<float*>(job.y) + (n * g.Cout + co0 + m0) * g.out_sp + s0;
      ldc = g.out_sp;
    } else {
      C = t_ctile.get(static_cast<size_t>((m1 - m0) * ncpad));
      ldc = ncpad;
    }
    float* tile = t_tile.get(static_cast<size_t>(NR * kstep));
    if (!C || !tile) {
      job.failed->store(true);
      return;
    }
    const float* xg = nullptr;  // direct_b: X[n, g] itself, rows of in_sp values
    const float* srcg = nullptr;
    const int64_t* koff = job.koff;
    int64_t row_shift = 0;  // own_pad: where the task's first padded row lies in the job's layout
    if (direct_b) {
      xg = static_cast<const float*>(job.x) + (n * g.C + gi * g.Cg) * g.in_sp;
    } else {
      if (job.own_pad) {
        int64_t r0, r1;
        tile_rows(job, s0, nc, &r0, &r1);
        // NR zeros after them: what direct rows read past the last row's end.
        srcg = pad_own_rows(g, job.ck, job.x, job.dt, job.l, job.koff, n, gi, r0, r1, NR, &koff, &row_shift);
        if (!srcg) {
          job.failed->store(true);
          return;
        }
      } else {
        srcg = job.src + (n - job.n0) * job.img_stride + gi * g.Cg * job.l.cs;
      }
      // The panels' runs, once per task (each panel at most NR runs).
      if (!job.direct_rows) {
        index_buffer(runs, npanels * (3 * NR + 1));
        for (int64_t j = 0; j < npanels; ++j) {
          int64_t* r = runs.data() + j * (3 * NR + 1);
          r[0] = panel_runs(g, job.l, s0 + j * NR, std::min<int64_t>(NR, nc - j * NR), r + 1);
          for (int64_t i = 0; i < r[0]; ++i) r[1 + 3 * i + 2] -= row_shift;
        }
      }
    }
    // Reading rows directly: each panel's first position in the tile, width
    // and start in the padded input of tap 0, walked once per task by
    // counting (derived per panel, they took six 64-bit divisions a panel).
    std::vector<RowPanel>& rp = t_row_panels;
    if (job.direct_rows) {
      if (rp.size() < static_cast<size_t>(nfull)) rp.resize(static_cast<size_t>(nfull));  // only grown
      int64_t q = p0 / segs, sg = p0 % segs;  // output row (of the image) and segment
      int64_t od = q / g.out[1], oh = q % g.out[1];
      for (int64_t j = 0; j < nfull; ++j) {
        rp[j].col = q * OW + sg * NR - s0;
        rp[j].nr = static_cast<int>(std::min<int64_t>(NR, OW - sg * NR));
        rp[j].bp = srcg + (out_row_offset(g, job.l, od, oh) - row_shift + sg * NR);
        if (++sg == segs) {
          sg = 0;
          ++q;
          if (++oh == g.out[1]) {
            oh = 0;
            ++od;
          }
        }
      }
    }
    // Panel j of the tile: its first position in the tile and its width.
    auto panel_at = [&](int64_t j, int64_t* col, int* nr) {
      if (job.direct_rows) {
        *col = rp[j].col;
        *nr = rp[j].nr;
        return;
      }
      *col = first(p0 + j) - s0;
      *nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
    };
    Epi<float> ep = bias_epilogue(false);
    // A float32 residual and the activation (but Sigmoid) go into the
    // microkernel's epilogue: the tile's rows lie a plane apart, and read
    // back by a second pass they cost a 7x7 stem with Relu an eighth of its
    // time, MobileNet's 3x3 stem with HardSwish a seventh.
    const bool in_epilogue = f32 && epilogue_activation(job.act, &ep);
    for (int64_t k0 = 0; k0 < g.Kg; k0 += kstep) {
      const int64_t kc = std::min(kstep, g.Kg - k0);
      const int flags = (k0 == 0 ? kFirst : 0) | (k0 + kc == g.Kg ? kLast : 0) | (job.stream ? kStream : 0);
      // Each strip's weights of the next K block (from L3 or memory in a
      // model), a slice prefetched per panel.
      const int64_t next_bytes = std::min(kstep, g.Kg - k0 - kc) * MR * int64_t{sizeof(float)};
      const PrefetchSlices next_slices(next_bytes > 0 ? job.wp : nullptr, next_bytes, npanels);
      float* bpanels = nullptr;
      if (job.pack_rows) {
        // The tile's kc rows of X each read as one run of nc values (a
        // stream the hardware prefetchers follow), into its panels.
        bpanels = t_bpanels.get(static_cast<size_t>(npanels * kstep * NR));
        if (!bpanels) {
          job.failed->store(true);
          return;
        }
        for (int64_t r = 0; r < kc; ++r) {
          const float* src = xg + (k0 + r) * g.in_sp + s0;
          for (int64_t j = 0; j + 1 < npanels; ++j)
            std::memcpy(bpanels + (j * kc + r) * NR, src + j * NR, sizeof(float) * NR);
          if (tail_t) continue;
          float* d = bpanels + ((npanels - 1) * kc + r) * NR;
          std::memcpy(d, src + (npanels - 1) * NR, sizeof(float) * tail);
          std::memset(d + tail, 0, sizeof(float) * (NR - tail));
        }
      }
      // Panel j of B for this K block: (bp, ldbp); reading rows directly,
      // bp is the panel's first position in the padded input of tap 0.
      auto panel = [&](int64_t j, int64_t col, int nr, const float** bp, int64_t* ldbp) {
        if (job.direct_rows) {
          *bp = rp[j].bp;
          *ldbp = 0;
        } else if (bpanels) {
          *bp = bpanels + j * kc * NR;
          *ldbp = NR;
        } else if (direct_b && nr == NR) {
          *bp = xg + k0 * g.in_sp + s0 + j * NR;
          *ldbp = g.in_sp;
        } else if (direct_b) {
          // The column tail panel (the kernel reads NR columns), zero padded.
          const float* src = xg + k0 * g.in_sp + s0 + j * NR;
          for (int64_t r = 0; r < kc; ++r) {
            std::memcpy(tile + r * NR, src + r * g.in_sp, sizeof(float) * nr);
            std::memset(tile + r * NR + nr, 0, sizeof(float) * (NR - nr));
          }
          *bp = tile;
          *ldbp = NR;
        } else {
          // This panel of the im2col matrix, built just before use: it
          // stays in L1 while every strip of the task's rows reads it.
          const int64_t* r = runs.data() + j * (3 * NR + 1);
          PanelB pb{srcg, koff + k0, kc, r + 1, r[0], nr, NR, tile};
          job.ck->panel(&pb);
          *bp = tile;
          *ldbp = NR;
        }
      };
      // One MR x NR block of the output: strip m, panel j (at col).
      auto block = [&](int64_t m, int64_t j, int64_t col, int nr, const float* bp, int64_t ldbp) {
        const int mr = static_cast<int>(std::min<int64_t>(MR, m1 - m));
        const float* ap = job.wp + ((gi * nstrips + m / MR) * g.Kg + k0) * MR;
        int64_t pf_lines;
        const char* pf = next_slices.of(ap + kc * MR).at(j, kc, &pf_lines);
        ep.bias = job.bias ? job.bias + co0 + m : nullptr;
        float* ct = C + (m - m0) * ldc + col;
        const int64_t ro = (n * g.Cout + co0 + m) * g.out_sp + s0 + col;  // the tile's first residual value
        if (in_epilogue && job.res) {
          ep.res = static_cast<const float*>(job.res) + ro;
          ep.ld_res = g.out_sp;
        }
        if (job.direct_rows)
          isa->ukrows_f32(kc, ap, bp, koff + k0, ct, ldc, mr, nr, flags, &ep);
        else
          isa->ukpf_f32(kc, ap, bp, ldbp, ct, ldc, mr, nr, flags, &ep, pf, pf_lines);
        // The tile is final and still in L1.
        return in_epilogue || !((job.act || job.res) && (flags & kLast) &&
                                !finish(job.ck, job.act, job.dt, job.res, ro, g.out_sp, ct, mr, nr, ldc));
      };
      const float* bp;
      int64_t ldbp;
      if (job.strip_outer) {
        for (int64_t m = m0; m < m1; m += MR)
          for (int64_t j = 0; j < nfull; ++j) {
            int64_t col;
            int nr;
            panel_at(j, &col, &nr);
            panel(j, col, nr, &bp, &ldbp);
            if (!block(m, j, col, nr, bp, ldbp)) {
              job.failed->store(true);
              return;
            }
          }
      } else {
        for (int64_t j = 0; j < nfull; ++j) {
          int64_t col;
          int nr;
          panel_at(j, &col, &nr);
          panel(j, col, nr, &bp, &ldbp);
          for (int64_t m = m0; m < m1; m += MR)
            if (!block(m, j, col, nr, bp, ldbp)) {
              job.failed->store(true);
              return;
            }
        }
      }
    }
    if (tail_t && !pointwise_tail(job, n, gi, s0 + nfull * NR, static_cast<int>(tail), m0, m1, kstep)) {
      job.failed->store(true);
      return;
    }
    if (!f32) {
      for (int64_t i = 0; i < m1 - m0; ++i) {
        const int64_t o = (n * g.Cout + co0 + m0 + i) * g.out_sp + s0;
        for (int64_t c = 0; c < nc; ++c) put(job.dt, job.y, o + c, C[i * ldc + c]);
      }
    }
  }
  // Non-temporal stores are weakly ordered: drained before the caller
  // learns the tasks are done.
  if (job.stream) std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Pad copies of the images [n0, n0 + nimg): work items are (image, channel).
struct PadJob {
  const Geom* g;
  const ConvKernels* ck;
  const void* x;
  int32_t dt;
  PadLayout l;
  int64_t n0;
  float* dst;
  int64_t img_stride;
};

void pad_range(void* user, int64_t begin, int64_t end) {
  const PadJob& job = *static_cast<const PadJob*>(user);
  const Geom& g = *job.g;
  const size_t es = job.dt == OLC_DTYPE_FLOAT ? 4 : 2;
  while (begin < end) {
    const int64_t img = begin / g.C, c0 = begin % g.C;
    const int64_t c1 = std::min(g.C, c0 + (end - begin));
    const PadCopy pc =
        pad_copy_of(g, job.l, static_cast<const char*>(job.x) + static_cast<size_t>(((job.n0 + img) * g.C + c0) * g.in_sp) * es,
                    job.dt, c1 - c0, job.dst + img * job.img_stride + c0 * job.l.cs);
    job.ck->pad_copy(&pc);
    begin += c1 - c0;
  }
}

// ------------------------------------------------------------ transposed GEMM

// Few output positions (a 4x4 or 7x7 plane, a 1x1 squeeze) fill the
// microkernel's NR columns poorly in the product above. Transposed,
//   Y[n, g]^T = Xcol^T W[g]^T,
// the positions are the rows (strips of MR, cheap when partial) and the
// output channels the columns: W^T is packed into NR-column panels (at
// create() for a constant W), each MR-row strip of Xcol^T is an im2col
// panel of MR positions (the same builder), and the [position][channel]
// result is transposed into the NCHW planes as it is stored. The positions
// of every image of a chunk stack into one set of rows.

// W [G * Mg, Kg] as W^T panels: per group, ceil(Mg / NR) panels of Kg x NR
// (k-major), columns past Mg zero.
void pack_wt(int32_t dt, const void* W, int64_t G, int64_t Mg, int64_t Kg, int NR, float* dst) {
  const int64_t np = (Mg + NR - 1) / NR;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t pnl = 0; pnl < np; ++pnl) {
      float* o = dst + (g * np + pnl) * Kg * NR;
      for (int j = 0; j < NR; ++j) {
        const int64_t m = pnl * NR + j;
        if (m >= Mg) {
          for (int64_t k = 0; k < Kg; ++k) o[k * NR + j] = 0.0f;
          continue;
        }
        const int64_t row = (g * Mg + m) * Kg;
        for (int64_t k = 0; k < Kg; ++k) o[k * NR + j] = elem(dt, W, row + k);
      }
    }
}

size_t wt_floats(int64_t G, int64_t Mg, int64_t Kg, int NR) {
  return static_cast<size_t>(G * ((Mg + NR - 1) / NR) * Kg * NR);
}

// Output columns of the normal product that do useful work, against the
// transposed product's: true when the transposed one wastes clearly less.
// A plane of at most half a panel runs the one-vector microkernel: it
// counts as half a panel. Counted as a whole one, a 4x4 plane (16 positions
// at AVX-512) went to the transposed product, whose transposes of X and Y
// cost more than the half panel (one thread, alternating: 1x1 240->40 at
// 4x4 5.3-6.4 -> 4.2-4.5 us, 40->240 4.3 -> 3.8, 48->576 8.4-9.0 -> 7.6-8.1).
// Wider planes count whole panels: at AVX2, 7x7's last column counted as
// half a panel sent 512->2048 to the normal product, 15 % slower.
bool prefer_transposed(int64_t out_sp, int64_t Mg, int NR) {
  const int64_t padded = out_sp <= NR / 2 ? NR / 2 : (out_sp + NR - 1) / NR * NR;
  const double normal = double(out_sp) / double(padded);
  const double transposed = double(Mg) / double((Mg + NR - 1) / NR * NR);
  return transposed > 1.15 * normal;
}

// Whether Mg output channels fill NR-wide W^T panels to at least 90 %, a
// last panel of at most NR / 2 channels counted as one vector (UKernelKA's
// column tail): 128 and 48 do, 24 and 40 do not.
bool fills_panels(int64_t Mg, int NR) {
  const int64_t full = Mg / NR * NR, rest = Mg - full;
  const int64_t padded = full + (rest == 0 ? 0 : rest <= NR / 2 ? NR / 2 : NR);
  return 10 * Mg >= 9 * padded;
}

// Whether the direct transposed product's strips (an output row cut into
// strips of at most MR positions, evenly) all hold at least
// kDirectMinStripRows positions. A strip is a microkernel call of that
// many rows, two vectors of W^T each: below five rows its ten
// accumulators no longer cover the FMA latency of both pipes. At AVX2
// (MR 6) an 8x8 or 14x14 output row runs in strips of four; the normal
// implicit GEMM was faster there (3x3 stride 2 64->128 at 16x16, Sapphire
// Rapids at AVX2, one / two threads: 100 / 80 us direct, 88 / 47 normal;
// 128->256 370 / 250 against 326 / 169), while at AVX-512 (MR 12) the
// same rows are one strip of eight or seven and the direct product kept
// its lead (256->256 at 28x28 stride 2: 1,225 against 1,361 us). The
// scalar level (MR 4, no vector pipes to fill) is not held to it.
constexpr int64_t kDirectMinStripRows = 5;

bool direct_strips_fill(int64_t OW, int MR) {
  const int64_t spr = (OW + MR - 1) / MR;
  return MR <= kDirectMinStripRows || OW / spr >= kDirectMinStripRows;
}

// The direct transposed product's tasks per image and group: ranges of its
// strips (output rows cut into strips of at most MR positions) whose tiles
// of C (positions x channels) hold at most kDirectTileBytes, times shares
// of its W^T panels.
constexpr int64_t kDirectTileBytes = int64_t(512) << 10;

struct DirectSplit {
  int64_t blocks = 1;  // strip ranges
  int64_t shares = 1;  // panel shares
};

DirectSplit gemmd_split(const Geom& g, const PadLayout& l, int MR, int NR, int64_t threads) {
  const int64_t strips = g.out[0] * g.out[1] * ((g.out[2] + MR - 1) / MR);
  const int64_t npg = (g.Mg + NR - 1) / NR;
  const int64_t bytes = g.out_sp * npg * NR * int64_t{sizeof(float)};
  DirectSplit sp;
  sp.blocks = std::min(strips, std::max<int64_t>(1, (bytes + kDirectTileBytes - 1) / kDirectTileBytes));
  if (threads <= 1) return sp;
  // On several threads, four tasks a thread, taken as threads come free
  // (with one each, a vCPU the host slowed held up the run: 3x3 stride 2
  // 32 -> 64 at 160x160, two threads, 0.75-1.0 of the normal product).
  // Each more strip range reads all of W^T again, each more panel share
  // the input rows of its strips: the split re-reads whichever is fewer
  // bytes (3x3 stride 2 64 -> 128 at 16x16: W^T 295 KB, its padded input
  // 83 KB, shared out by panels; 128 -> 128 at 56x56: 590 KB and 1.7 MB,
  // by strips).
  const int64_t ng = g.N * g.G;
  const int64_t want = 4 * threads;
  const int64_t wt_bytes = g.Kg * npg * NR * int64_t{sizeof(float)};
  const int64_t in_bytes = g.Cg * l.cs * int64_t{sizeof(float)};
  if (ng * sp.blocks < want) {
    const int64_t more = (want + ng * sp.blocks - 1) / (ng * sp.blocks);
    if (wt_bytes > in_bytes) sp.shares = std::min(npg, more);
    else sp.blocks = std::min(strips, sp.blocks * more);
  }
  // A task count that is a multiple of the threads where the split allows.
  while ((ng * sp.blocks * sp.shares) % threads) {
    if (sp.shares < npg && (wt_bytes > in_bytes || sp.blocks == strips)) ++sp.shares;
    else if (sp.blocks < strips) ++sp.blocks;
    else break;
  }
  return sp;
}

// Which Winograd product, if any, by their products against the implicit
// GEMM's, each counted with the microkernel's padding: Winograd does 16 per
// tile of 2x2 outputs (plus about a quarter for its transforms; a third
// transposed, whose output goes out value by value), the tiles of a batch
// in NR-wide panels (normal) or as MR-row strips with the output channels
// in NR-wide panels (transposed); the implicit GEMM 9 per output, the
// positions in NR-wide panels per image (normal) or as strips
// (transposed, when its panels exist). The normal product shares out its
// tile panels only: with fewer of them than threads (one 16-tile panel of
// an 8x8 output) it runs on one thread, so it is counted as that against
// the others, which share out output channels (3x3 128 channels at 8x8,
// two threads, Zen 2 AVX2: 113 us before, as on one thread, 83 us
// transposed; 3x3 512 channels at 7x7 0.68 -> 1.42 of onnxruntime).
enum class Wino { kNone, kNormal, kTransposed };

Wino choose_winograd(const Geom& g, int NR, bool wino_t, bool implicit_t, int64_t threads) {
  auto pad = [NR](int64_t v) { return double((v + NR - 1) / NR * NR); };
  const int64_t tiles = g.N * ((g.out[1] + 1) / 2) * ((g.out[2] + 1) / 2);
  const bool normal_serial = threads > 1 && g.G * ((tiles + NR - 1) / NR) < threads;
  const double wn = 16.0 * pad(tiles) * double(g.Mg) * 1.25 * (normal_serial ? double(threads) : 1.0);
  const double wt = wino_t ? 16.0 * double(tiles) * pad(g.Mg) * 1.35 : 1e300;
  double direct = 9.0 * double(g.N) * pad(g.out_sp) * double(g.Mg);
  if (implicit_t) direct = std::min(direct, 9.0 * double(g.N * g.out_sp) * pad(g.Mg));
  if (std::min(wn, wt) >= direct) return Wino::kNone;
  return wt < wn ? Wino::kTransposed : Wino::kNormal;
}

struct GemmTJob {
  const Geom* g;
  int32_t dt;
  const IsaKernels* isa;
  const ConvKernels* ck;
  const float* wt;  // W^T panels
  void* y;
  const float* bias;
  const Activation* act;
  const void* res;   // FusedConv's residual; NULL: none
  const float* src;  // the input in PadLayout l, images n0 .. n0 + nimg
  PadLayout l;
  int64_t n0, nimg, img_stride;
  const int64_t* koff;
  int64_t KC;
  int64_t ppt;  // W^T panels per task
  int64_t ipt;  // images per task (of the chunk)
  // The strips of Xcol^T built once for every task (shared_strips), each
  // group's K blocks in turn: strip si of K block kb of group gi at
  // strips + ((gi * nkb + kb) * nstrips + si) * MR * kstep. NULL: each
  // task builds the strips of its rows.
  const float* strips;
  // On several threads: each task claims its output lines before its
  // compute (claim_for_write), since it stores them in one burst at the
  // end (the transpose into the planes). 1x1 256->256 at 7x7 after another
  // on two threads, in-process alternation: 35-36 -> 28 us (22 us where
  // the output block is one no parallel node read); 512->512 96.5 -> 95.
  bool claim;
  bool in_place;  // strips may be read in place (strip_in_place)
  std::atomic<bool>* failed;
};

// The runs of MR stacked rows [r0, r0 + cnt) (row = image * out_sp +
// position), as panel_runs gives them for one image.
int64_t strip_runs(const Geom& g, const PadLayout& l, int64_t img_stride, int64_t r0, int64_t cnt, int64_t* runs) {
  int64_t n = 0;
  for (int64_t c = 0; c < cnt;) {
    const int64_t img = (r0 + c) / g.out_sp, pos = (r0 + c) % g.out_sp;
    const int64_t len = std::min(cnt - c, g.out_sp - pos);
    const int64_t k = panel_runs(g, l, pos, len, runs + 3 * n);
    for (int64_t i = 0; i < k; ++i) {
      runs[3 * (n + i)] += c;
      runs[3 * (n + i) + 2] += img * img_stride;
    }
    n += k;
    c += len;
  }
  return n;
}

// The runs of strip si of Xcol^T (rows si * MR onwards of `rows`, at most
// MR): r[0] runs, then their triples.
void strip_runs_of(const GemmTJob& job, int64_t rows, int64_t si, int64_t* r) {
  const int MR = job.isa->mr_f32;
  r[0] = strip_runs(*job.g, job.l, job.img_stride, si * MR, std::min<int64_t>(MR, rows - si * MR), r + 1);
}

// The strip read in place, when its positions are one run of a 1x1
// convolution's float32 source (X, or a strided one's compact copy): row k
// of the strip is src's row k (strip_in_place gives its first value and
// the step per k is l.cs); NULL otherwise. The copies took 7 % of a 1x1
// 960->160 at 7x7 (five panels read each strip), and X's lines in place
// are shared by the strips. Only for tasks of at most kInPlaceMaxColumns
// output channels: past them the copy is read by enough panels to pay.
// One thread, AVX-512, alternating processes, copied -> in place:
// 960->160 105-106 -> 100 us (wall-clock medians); thread CPU time,
// 960->320 171-206 -> 165-187, 512->512 136-169 -> 131-149; 256->1024 and
// 512->2048 (32 and 64 panels) the same within the noise.
constexpr int64_t kInPlaceMaxColumns = 512;

// Whether strips are read in place by default at a level of MR rows: a
// strip's k step reads MR floats of a row of X, a cache line (or two) per
// k for MR * 4 bytes of it. AVX-512's 12 (48 of 64 bytes) read in place
// (the numbers above); AVX2's 6 (24 bytes) lost: on an AVX2-only AMD EPYC
// (Zen 3), in-process alternation (the order rotated every round), ratio
// to onnxruntime, copied against in place: 1x1 960->160 at 7x7 batch 1 one
// thread 0.96-1.08 against 0.80-0.90, batch 8 0.81-0.83 against 0.71-0.77,
// batch 8 two threads 0.79-0.87 against 0.70-0.71; 1024->256 at 14x14
// batch 8 two threads 0.99 against 0.92; 512->2048 at 7x7 the same within
// the noise.
int64_t pointwise_in_place_default(int MR) { return MR * int64_t{sizeof(float)} >= 32 ? 1 : 0; }

const float* strip_in_place(const GemmTJob& job, const float* srcg, int64_t rows, int64_t si, const int64_t* r) {
  const int MR = job.isa->mr_f32;
  if (job.g->ksz != 1 || r[0] != 1 || r[2] != std::min<int64_t>(MR, rows - si * MR)) return nullptr;
  return srcg + r[3];
}

// That strip's K block [k0, k0 + kc) into dst (MR values per k).
void build_strip(const GemmTJob& job, const float* srcg, int64_t rows, int64_t si, const int64_t* r, int64_t k0,
                 int64_t kc, float* dst) {
  const int MR = job.isa->mr_f32;
  PanelB pb{srcg, job.koff + k0, kc, r + 1, r[0], std::min<int64_t>(MR, rows - si * MR), MR, dst};
  job.ck->panel(&pb);
}

// The K block split of the transposed product.
inline void gemmt_kblocks(const GemmTJob& job, int64_t* nkb, int64_t* kstep) {
  kblocks(job.g->Kg, job.KC, nkb, kstep);
}

// Items of the shared strips: (group, K block, strip).
void strips_range(void* user, int64_t begin, int64_t end) {
  const GemmTJob& job = *static_cast<const GemmTJob*>(user);
  const Geom& g = *job.g;
  const int MR = job.isa->mr_f32;
  int64_t nkb, kstep;
  gemmt_kblocks(job, &nkb, &kstep);
  const int64_t rows = job.nimg * g.out_sp;
  const int64_t nstrips = (rows + MR - 1) / MR;
  std::vector<int64_t>& runs = t_runs;
  index_buffer(runs, 3 * MR + 1);
  for (int64_t t = begin; t < end; ++t) {
    const int64_t si = t % nstrips, kb = (t / nstrips) % nkb, gi = t / (nstrips * nkb);
    const int64_t k0 = kb * kstep, kc = std::min(kstep, g.Kg - k0);
    strip_runs_of(job, rows, si, runs.data());
    build_strip(job, job.src + gi * g.Cg * job.l.cs, rows, si, runs.data(), k0, kc,
                const_cast<float*>(job.strips) + ((gi * nkb + kb) * nstrips + si) * MR * kstep);
  }
}

// Panel pi of a transposed product's W^T panels [pa, pb) of group gi, for
// the K block [k0, k0 + kc): its width nr, its weights bp, and the weights
// to prefetch while it computes (the next panel's, or after the last one
// the next K block's first panel's: `next`, next_bytes of them), sliced
// over its microkernel calls so that they arrive in time.
struct WtPanel {
  int nr;
  const float* bp;
  const float* next;
  int64_t next_bytes;
  WtPanel(const Geom& g, const float* wt, int NR, int64_t gi, int64_t pi, int64_t pa, int64_t pb, int64_t k0,
          int64_t kc, int64_t kstep) {
    const int64_t npg = (g.Mg + NR - 1) / NR;
    nr = static_cast<int>(std::min<int64_t>(NR, g.Mg - pi * NR));
    bp = wt + ((gi * npg + pi) * g.Kg + k0) * NR;
    next = pi + 1 < pb ? bp + g.Kg * NR : k0 + kc < g.Kg ? wt + ((gi * npg + pa) * g.Kg + k0 + kc) * NR : nullptr;
    next_bytes = (pi + 1 < pb ? kc : std::min(kstep, g.Kg - k0 - kc)) * NR * int64_t{sizeof(float)};
  }
};

// A transposed product's [position][channel] tile into Y's planes, the
// activation applied (with a residual: added to the values just stored,
// then activated).
struct TStore {
  const Geom* g;
  const ConvKernels* ck;
  int32_t dt;
  void* y;
  const void* res;
  const Activation* act;
  // Positions [p0, p0 + np) of image n, channels [c0, c1) of group gi,
  // from C (ldc floats per position). false: out of memory.
  bool store(const float* C, int64_t ldc, int64_t n, int64_t gi, int64_t c0, int64_t c1, int64_t p0,
             int64_t np) const {
    const int64_t o = (n * g->Cout + gi * g->Mg + c0) * g->out_sp + p0;
    const bool f32 = dt == OLC_DTYPE_FLOAT;
    float* yt = f32 ? static_cast<float*>(y) + o : t_yplane.get(static_cast<size_t>((c1 - c0) * np));
    const int64_t ldy = f32 ? g->out_sp : np;
    if (!yt) return false;
    ck->transpose_store(C, np, c1 - c0, ldc, yt, ldy, res ? nullptr : act);
    if (res && !finish(ck, act, dt, res, o, g->out_sp, yt, c1 - c0, np, ldy)) return false;
    if (!f32)
      for (int64_t c = 0; c < c1 - c0; ++c)
        for (int64_t j = 0; j < np; ++j) put(dt, y, o + c * g->out_sp + j, yt[c * np + j]);
    return true;
  }
};

thread_local std::vector<const float*> t_inplace;

void gemmt_range(void* user, int64_t begin, int64_t end) {
  const GemmTJob& job = *static_cast<const GemmTJob*>(user);
  const Geom& g = *job.g;
  const IsaKernels* isa = job.isa;
  const int MR = isa->mr_f32, NR = isa->nr_f32;
  const int64_t npg = (g.Mg + NR - 1) / NR;            // panels per group
  const int64_t tpg = (npg + job.ppt - 1) / job.ppt;   // panel shares per group
  const int64_t tim = (job.nimg + job.ipt - 1) / job.ipt;  // image shares
  int64_t nkb, kstep;
  gemmt_kblocks(job, &nkb, &kstep);
  std::vector<int64_t>& runs = t_runs;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t ii = t % tim, pt = (t / tim) % tpg, gi = t / (tim * tpg);
    const int64_t p0 = pt * job.ppt, p1 = std::min(npg, p0 + job.ppt);
    const int64_t i0 = ii * job.ipt, i1 = std::min(job.nimg, i0 + job.ipt);  // images of the chunk
    if (p0 >= p1 || i0 >= i1) continue;
    const int64_t rows = (i1 - i0) * g.out_sp;
    const int64_t nstrips = (rows + MR - 1) / MR;
    const int64_t c0 = p0 * NR, c1 = std::min(g.Mg, p1 * NR);  // channels of the group
    const int64_t ldc = (p1 - p0) * NR;
    float* abuf = job.strips ? nullptr : t_tile.get(static_cast<size_t>(nstrips * MR * kstep));
    float* C = t_ctile.get(static_cast<size_t>(rows * ldc));
    if ((!job.strips && !abuf) || !C) {
      job.failed->store(true);
      return;
    }
    if (job.claim && job.dt == OLC_DTYPE_FLOAT)
      for (int64_t i = i0; i < i1; ++i)
        claim_for_write(static_cast<float*>(job.y) + ((job.n0 + i) * g.Cout + gi * g.Mg + c0) * g.out_sp,
                        (c1 - c0) * g.out_sp * int64_t{sizeof(float)});
    const float* srcg = job.src + i0 * job.img_stride + gi * g.Cg * job.l.cs;
    // Unless the strips are shared (built already): each strip's runs, and
    // where a strip is read in place, its first value.
    std::vector<const float*>& inplace = t_inplace;
    if (inplace.size() < static_cast<size_t>(nstrips)) inplace.resize(static_cast<size_t>(nstrips));
    if (job.strips) {
      std::fill_n(inplace.begin(), nstrips, nullptr);
    } else {
      index_buffer(runs, nstrips * (3 * MR + 1));
      for (int64_t si = 0; si < nstrips; ++si) {
        int64_t* r = runs.data() + si * (3 * MR + 1);
        strip_runs_of(job, rows, si, r);
        inplace[si] = !job.in_place || ldc > kInPlaceMaxColumns ? nullptr : strip_in_place(job, srcg, rows, si, r);
      }
    }
    Epi<float> ep = bias_epilogue(true);
    for (int64_t k0 = 0, kb = 0; k0 < g.Kg; k0 += kstep, ++kb) {
      const int64_t kc = std::min(kstep, g.Kg - k0);
      const int flags = (k0 == 0 ? kFirst : 0) | (k0 + kc == g.Kg ? kLast : 0);
      // Every strip of Xcol^T for this K block (MR positions each), built
      // here unless shared; strip si at MR * kc floats from the block's first.
      const float* ablk;
      if (job.strips) {
        ablk = job.strips + (gi * nkb + kb) * nstrips * MR * kstep;
      } else {
        for (int64_t si = 0; si < nstrips; ++si)
          if (!inplace[si]) build_strip(job, srcg, rows, si, runs.data() + si * (3 * MR + 1), k0, kc, abuf + si * MR * kc);
        ablk = abuf;
      }
      const int64_t sstride = job.strips ? MR * kstep : MR * kc;
      for (int64_t pi = p0; pi < p1; ++pi) {
        const WtPanel wp(g, job.wt, NR, gi, pi, p0, p1, k0, kc, kstep);
        const int nr = wp.nr;
        const float* bp = wp.bp;
        ep.bias = job.bias ? job.bias + gi * g.Mg + pi * NR : nullptr;
        const PrefetchSlices pfs(wp.next, wp.next_bytes, nstrips);  // a slice per strip
        for (int64_t si = 0; si < nstrips; ++si) {
          const int mr = static_cast<int>(std::min<int64_t>(MR, rows - si * MR));
          int64_t pf_lines;
          const char* pf = pfs.at(si, kc, &pf_lines);
          float* ct = C + si * MR * ldc + (pi - p0) * NR;
          if (inplace[si])
            isa->ukka_f32(kc, inplace[si] + job.koff[k0], job.l.cs, bp, NR, ct, ldc, mr, nr, flags, &ep, pf, pf_lines);
          else
            isa->ukpf_f32(kc, ablk + si * sstride, bp, NR, ct, ldc, mr, nr, flags, &ep, pf, pf_lines);
        }
      }
    }
    const TStore ts{&g, job.ck, job.dt, job.y, job.res, job.act};
    for (int64_t i = i0; i < i1; ++i)
      if (!ts.store(C + (i - i0) * g.out_sp * ldc, ldc, job.n0 + i, gi, c0, c1, 0, g.out_sp)) {
        job.failed->store(true);
        return;
      }
  }
}

// ------------------------------------------------------------ direct transposed product
// The transposed product (output positions as the microkernel's rows,
// output channels as its W^T panels' columns) with no strip built: a strip
// is up to MR consecutive positions of one output row, which lie
// consecutively in the padded, phase-split input at every tap, so the
// microkernel reads each A column straight from there (UKernelRowsA, A(i,
// k) at src[koff[k] + i]). Each output row goes in strips of nearly equal
// width (28 as 10 + 9 + 9 at MR = 12): no position padded, where the
// normal product pads each image's positions to whole NR-wide panels and
// copies every K block of them into panels (a tenth of a 3x3 stride-2
// layer of 128 channels at 56x56), and no strip copied, as the transposed
// product copies its strips. Tasks are ranges of strips of an image and
// group times shares of its W^T panels (gemmd_split); each stores its
// tile into the planes transposed (TStore).
struct GemmDJob {
  const Geom* g;
  const IsaKernels* isa;
  const ConvKernels* ck;
  int32_t dt;
  const float* wt;  // W^T panels
  const void* x;    // own_pad: X itself
  const float* bias;
  TStore out;
  // The input in PadLayout l (images from n0, img_stride floats apart),
  // unless own_pad; koff: channel 0's tap offsets (ksz of them),
  // then the other channels' (Kg in all).
  const float* src;
  PadLayout l;
  int64_t n0, img_stride;
  const int64_t* koff;
  int64_t KC;
  DirectSplit split;  // strip ranges and panel shares per image and group (gemmd_split)
  bool own_pad;     // each task copies its own padded rows of X
  std::atomic<bool>* failed;
};

void gemmd_range(void* user, int64_t begin, int64_t end) {
  const GemmDJob& job = *static_cast<const GemmDJob*>(user);
  const Geom& g = *job.g;
  const IsaKernels* isa = job.isa;
  const int MR = isa->mr_f32, NR = isa->nr_f32;
  const int64_t npg = (g.Mg + NR - 1) / NR;
  const int64_t OW = g.out[2];
  const int64_t spr = (OW + MR - 1) / MR;  // strips per output row
  const int64_t strips = g.out[0] * g.out[1] * spr;
  // Strip j of a row: positions [j OW / spr, (j + 1) OW / spr).
  auto strip_col = [&](int64_t j) { return j * OW / spr; };
  int64_t nkb, kstep;
  kblocks(g.Kg, job.KC, &nkb, &kstep);
  for (int64_t t = begin; t < end; ++t) {
    const int64_t nb = job.split.blocks, ns = job.split.shares;
    const int64_t ps = t % ns, b = (t / ns) % nb, gi = (t / (ns * nb)) % g.G, i = t / (ns * nb * g.G);
    const int64_t s0 = b * strips / nb, s1 = (b + 1) * strips / nb;  // the task's strips
    const int64_t pa = ps * npg / ns, pb = (ps + 1) * npg / ns;      // and W^T panels
    if (s0 >= s1 || pa >= pb) continue;
    const int64_t ldc = (pb - pa) * NR;
    // Its positions [p0, p0 + np) of the plane, in output rows [q0, q1).
    const int64_t q0 = s0 / spr, q1 = (s1 - 1) / spr + 1;
    const int64_t p0 = q0 * OW + strip_col(s0 % spr);
    const int64_t np = (s1 - 1) / spr * OW + strip_col((s1 - 1) % spr + 1) - p0;
    float* C = t_ctile.get(static_cast<size_t>(np * ldc));
    if (!C) {
      job.failed->store(true);
      return;
    }
    const float* srcg;
    const int64_t* koff = job.koff;
    int64_t row_shift = 0;  // own_pad: the first padded row's offset in the job's layout
    if (job.own_pad) {
      // Padded rows [r0, r1) of this group's channels (2-D: one depth).
      const int64_t r0 = q0 * g.s[1], r1 = std::min(job.l.Hp, (q1 - 1) * g.s[1] + (g.k[1] - 1) * g.d[1] + 1);
      srcg = pad_own_rows(g, job.ck, job.x, job.dt, job.l, job.koff, job.n0 + i, gi, r0, r1, 0, &koff, &row_shift);
      if (!srcg) {
        job.failed->store(true);
        return;
      }
    } else {
      srcg = job.src + i * job.img_stride + gi * g.Cg * job.l.cs;
    }
    Epi<float> ep = bias_epilogue(true);
    for (int64_t k0 = 0; k0 < g.Kg; k0 += kstep) {
      const int64_t kc = std::min(kstep, g.Kg - k0);
      const int flags = (k0 == 0 ? kFirst : 0) | (k0 + kc == g.Kg ? kLast : 0);
      for (int64_t pi = pa; pi < pb; ++pi) {
        const WtPanel wp(g, job.wt, NR, gi, pi, pa, pb, k0, kc, kstep);
        ep.bias = job.bias ? job.bias + gi * g.Mg + pi * NR : nullptr;
        const PrefetchSlices pfs(wp.next, wp.next_bytes, s1 - s0);  // a slice per strip
        int64_t q = q0, j = s0 % spr;
        int64_t od = q / g.out[1], oh = q % g.out[1];
        const float* row = srcg + out_row_offset(g, job.l, od, oh) - row_shift;
        for (int64_t si = s0; si < s1; ++si) {
          const int64_t w0 = strip_col(j), w1 = strip_col(j + 1);
          int64_t pf_lines;
          const char* pf = pfs.at(si - s0, kc, &pf_lines);
          isa->ukrowsa_f32(kc, row + w0, koff + k0, wp.bp, NR, C + (q * OW + w0 - p0) * ldc + (pi - pa) * NR, ldc,
                           static_cast<int>(w1 - w0), wp.nr, flags, &ep, pf, pf_lines);
          if (++j == spr) {
            j = 0;
            ++q;
            if (++oh == g.out[1]) {
              oh = 0;
              ++od;
            }
            row = srcg + out_row_offset(g, job.l, od, oh) - row_shift;
          }
        }
      }
    }
    if (!job.out.store(C, ldc, job.n0 + i, gi, pa * NR, std::min(g.Mg, pb * NR), p0, np)) {
      job.failed->store(true);
      return;
    }
  }
}

// ------------------------------------------------------------ GEMV

struct GemvJob {
  const Geom* g;
  const ConvKernels* ck;
  const float* x;   // [N, C] float32
  const float* wp;  // the W^T panels, NR output channels each
  const float* bias;
  const Activation* act;
  const void* res;  // FusedConv's residual; NULL: none
  float* y;         // [N, Cout] float32
  int64_t NR, panels, chunks;  // panels per group, split into chunks
};

// Tasks (image, group, chunk of panels).
void gemv_range(void* user, int64_t begin, int64_t end) {
  const GemvJob& j = *static_cast<const GemvJob*>(user);
  const Geom& g = *j.g;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t c = t % j.chunks, gi = t / j.chunks % g.G, n = t / j.chunks / g.G;
    const int64_t p0 = c * j.panels / j.chunks, p1 = (c + 1) * j.panels / j.chunks;
    const int64_t co0 = gi * g.Mg + p0 * j.NR, cols = std::min(g.Mg, p1 * j.NR) - p0 * j.NR;
    float* yo = j.y + n * g.Cout + co0;
    for (int64_t pi = p0; pi < p1; ++pi)
      j.ck->gemv_t(j.x + n * g.C + gi * g.Cg, j.wp + (gi * j.panels + pi) * g.Kg * j.NR, g.Kg, j.NR,
                   std::min<int64_t>(j.NR, g.Mg - pi * j.NR), j.bias ? j.bias + gi * g.Mg + pi * j.NR : nullptr,
                   yo + (pi - p0) * j.NR);
    finish(j.ck, j.act, OLC_DTYPE_FLOAT, j.res, n * g.Cout + co0, 0, yo, 1, cols, cols);  // float32: cannot fail
  }
}

// ------------------------------------------------------------ depthwise

// Depthwise planes from this many input values on are split into rows
// between the threads (see conv_run). Two threads, 3x3 after a 1x1 layer
// (PP-LCNet's), same process alternating: stride 2 on 32 x 112x112 70-77
// -> 48-50 us; but 64 x 56x56 at stride 1 split into rows 49-51 -> 57-63.
constexpr int64_t kDwAffinityFloats = 8192;

struct DwJob {
  const Geom* g;
  int32_t dt;
  const ConvKernels* ck;
  const float* taps;  // [Cout, ksz] float32
  const void* x;
  void* y;
  const float* bias;
  const Activation* act;
  int64_t rchunks, rstep;
  std::atomic<bool>* failed;
  const void* res;  // FusedConv's residual; NULL: none
};

void dw_range(void* user, int64_t begin, int64_t end) {
  const DwJob& job = *static_cast<const DwJob*>(user);
  const Geom& g = *job.g;
  const bool f32 = job.dt == OLC_DTYPE_FLOAT;
  const size_t es = f32 ? 4 : 2;
  const int64_t rows = g.out[0] * g.out[1];
  const int64_t planes = g.N * g.Cout;
  for (int64_t t = begin; t < end; ++t) {
    // Row chunk major: a thread's contiguous share of the tasks is the same
    // rows of every plane (see the split in conv_run).
    const int64_t rc = t / planes;
    const int64_t plane = t % planes;  // n * Cout + co
    const int64_t co = plane % g.Cout, n = plane / g.Cout;
    const int64_t ci = co / g.Mg;  // Cg == 1: group co / Mg reads channel ci
    const int64_t r0 = rc * job.rstep, r1 = std::min(rows, r0 + job.rstep);
    if (r0 >= r1) continue;
    DwPlane p;
    const void* xsrc = static_cast<const char*>(job.x) + static_cast<size_t>((n * g.C + ci) * g.in_sp) * es;
    float* yplane;
    if (f32) {
      p.x = static_cast<const float*>(xsrc);
      yplane = static_cast<float*>(job.y) + plane * g.out_sp;
    } else {
      float* xb = t_xplane.get(static_cast<size_t>(g.in_sp));
      float* yb = t_yplane.get(static_cast<size_t>((r1 - r0) * g.out[2]));
      if (!xb || !yb) {
        job.failed->store(true);
        return;
      }
      convert_run(job.dt, xsrc, 1, g.in_sp, xb);
      p.x = xb;
      yplane = yb - r0 * g.out[2];
    }
    p.w = job.taps + co * g.ksz;
    p.bias = job.bias ? job.bias[co] : 0.0f;
    p.y = yplane;
    for (int i = 0; i < 3; ++i) {
      p.in[i] = g.in[i];
      p.out[i] = g.out[i];
      p.k[i] = g.k[i];
      p.s[i] = g.s[i];
      p.d[i] = g.d[i];
      p.pb[i] = g.pb[i];
      p.pe[i] = g.pe[i];
    }
    p.r0 = r0;
    p.r1 = r1;
    p.act = job.res ? nullptr : job.act;
    job.ck->depthwise(&p);
    const int64_t nrow = (r1 - r0) * g.out[2];
    if (job.res && !finish(job.ck, job.act, job.dt, job.res, plane * g.out_sp + r0 * g.out[2], nrow,
                           yplane + r0 * g.out[2], 1, nrow, nrow)) {
      job.failed->store(true);
      return;
    }
    if (!f32) {
      const int64_t o = plane * g.out_sp + r0 * g.out[2];
      const float* src = yplane + r0 * g.out[2];
      for (int64_t i = 0; i < (r1 - r0) * g.out[2]; ++i) put(job.dt, job.y, o + i, src[i]);
    }
  }
}

// Small planes (output rows narrower than a vector): blocks of L output
// channels at once, vectorised across channels (DwBlock). Work items are
// (image, block).
struct DwBlockJob {
  const Geom* g;
  int32_t dt;
  const ConvKernels* ck;
  const float* wblk;  // [blocks][ksz][L] float32
  const void* x;
  void* y;
  const float* bias;
  const Activation* act;
  std::atomic<bool>* failed;
  const void* res;  // FusedConv's residual; NULL: none
  // On several threads: each task claims its output lines before its
  // compute (claim_for_write), since its stores come in one burst at the
  // end (the transpose back into the planes). After a pointwise Conv on
  // two threads (whose input block the output recycles), AVX-512,
  // alternating in one process: 5x5 depthwise of 256 channels at 14x14
  // 38.7 -> 28.7 us; in the PP-LCNet orientation classifier its six such
  // layers 43-44 -> 35-38 us.
  bool claim;
};

void dw_block_range(void* user, int64_t begin, int64_t end) {
  const DwBlockJob& job = *static_cast<const DwBlockJob*>(user);
  const Geom& g = *job.g;
  const int L = job.ck->lanes;
  const int64_t nblk = (g.Cout + L - 1) / L;
  const bool f32 = job.dt == OLC_DTYPE_FLOAT;
  const size_t es = f32 ? 4 : 2;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t bi = t % nblk, n = t / nblk;
    const int64_t co0 = bi * L, nch = std::min<int64_t>(L, g.Cout - co0);
    int64_t xch[64];
    float bias[64] = {};
    // Output channel co reads input channel co / Mg (stepped, not divided:
    // a 64-bit division per lane was a tenth of a small block's time).
    for (int64_t l = 0, ci = co0 / g.Mg, r = co0 % g.Mg; l < nch; ++l) {
      xch[l] = ci;
      if (++r == g.Mg) r = 0, ++ci;
      if (job.bias) bias[l] = job.bias[co0 + l];
    }
    DwBlock b;
    b.x = static_cast<const char*>(job.x) + static_cast<size_t>(n * g.C * g.in_sp) * es;
    b.dtype = job.dt;
    b.in_sp = g.in_sp;
    b.out_sp = g.out_sp;
    b.xch = xch;
    b.nch = nch;
    b.w = job.wblk + bi * g.ksz * L;
    b.bias = bias;
    float* yb = nullptr;
    if (f32) {
      b.y = static_cast<float*>(job.y) + (n * g.Cout + co0) * g.out_sp;
    } else {
      yb = t_yplane.get(static_cast<size_t>(nch * g.out_sp));
      if (!yb) {
        job.failed->store(true);
        return;
      }
      b.y = yb;
    }
    for (int i = 0; i < 3; ++i) {
      b.in[i] = g.in[i];
      b.out[i] = g.out[i];
      b.k[i] = g.k[i];
      b.s[i] = g.s[i];
      b.d[i] = g.d[i];
      b.pb[i] = g.pb[i];
      b.pe[i] = g.pe[i];
    }
    b.act = job.res ? nullptr : job.act;
    if (job.claim && f32) claim_for_write(b.y, nch * g.out_sp * int64_t{sizeof(float)});
    job.ck->depthwise_block(&b);
    if (job.res && !finish(job.ck, job.act, job.dt, job.res, (n * g.Cout + co0) * g.out_sp, g.out_sp, b.y, nch,
                           g.out_sp, g.out_sp)) {
      job.failed->store(true);
      return;
    }
    if (!f32) {
      const int64_t o = (n * g.Cout + co0) * g.out_sp;
      for (int64_t i = 0; i < nch * g.out_sp; ++i) put(job.dt, job.y, o + i, yb[i]);
    }
  }
}

// Taps [Cout, ksz] into blocks of L channels, [block][ksz][L], zeros past Cout.
void block_taps(const float* taps, int64_t cout, int64_t ksz, int L, float* dst) {
  const int64_t nblk = (cout + L - 1) / L;
  for (int64_t b = 0; b < nblk; ++b)
    for (int64_t t = 0; t < ksz; ++t)
      for (int l = 0; l < L; ++l) {
        const int64_t co = b * L + l;
        dst[(b * ksz + t) * L + l] = co < cout ? taps[co * ksz + t] : 0.0f;
      }
}

// ------------------------------------------------------------ create / run

// The inputs of Conv / FusedConv / ConvTranspose: counts and float types
// (FusedConv: X, W, B (or absent), then the four BatchNormalization inputs
// when one is folded in, then the residual when one is added: 4, 7 or 8
// inputs). Sets st->dtype (and st->bn, st->res_idx).
bool check_float_inputs(const olc_node_info* node, ConvOp kind, ConvAttrs* st, char* error, size_t esize) {
  const bool fused = kind == ConvOp::kFusedConv;
  const char* op = op_name(kind);
  if (fused && (node->n_inputs == 7 || node->n_inputs == 8)) {
    st->bn = true;
    if (node->n_inputs == 8) st->res_idx = 7;
  } else if (fused && node->n_inputs == 4) {
    st->res_idx = 3;
  } else if (node->n_inputs < 2 || node->n_inputs > 3) {
    return fail_create(error, esize, "%s takes 2 or 3 inputs%s, got %d", op,
                       fused ? " (4 with a residual, 7 with BatchNormalization, 8 with both)" : "", node->n_inputs),
           false;
  }
  if (node->n_outputs != 1) return fail_create(error, esize, "expects 1 output, got %d", node->n_outputs), false;
  const int32_t dt = node->input_dtypes[0];
  if (dt != OLC_DTYPE_FLOAT && dt != OLC_DTYPE_FLOAT16 && dt != OLC_DTYPE_BFLOAT16)
    return fail_create(error, esize, "unsupported input type %s (float32, float16, bfloat16)", olc_dtype_name(dt)),
           false;
  for (int32_t i = 1; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (i == st->res_idx) {  // the residual: the input's type
      if (t != dt)
        return fail_create(error, esize, "the residual (input %d) has type %s, input 0 has %s", i, olc_dtype_name(t),
                           olc_dtype_name(dt)),
               false;
      continue;
    }
    if (i >= 3) {  // BatchNormalization's inputs: any float type
      if (!is_float_type(t))
        return fail_create(error, esize, "BatchNormalization input %d has type %s, a float type expected", i - 2,
                           olc_dtype_name(t)),
               false;
      continue;
    }
    if (t != OLC_DTYPE_UNDEFINED && t != dt)
      return fail_create(error, esize, "input %d has type %s, input 0 has %s", i, olc_dtype_name(t),
                         olc_dtype_name(dt)),
             false;
  }
  st->dtype = dt;
  return true;
}

// What FusedConv folds into constant weights, per output channel: a
// BatchNormalization, f = scale / sqrt(var + eps), W' = W f, B' = (B - mean)
// f + bias; then the channel affine, W'' = W' s, B'' = B' s + t. In float64
// from the inputs' own types, rounded once to float32. Fills `w` (the
// folded W, float32) and st->fbias; false (error set) when an input is not
// a constant of the expected shape.
bool fold_weights(const olc_node_info* node, ConvState* st, const olc_tensor& cw, std::vector<float>* w, char* error,
                  size_t esize) {
  const int64_t cout = cw.shape[0];
  const int64_t n = olc_element_count(&cw);
  const olc_tensor* c = node->input_constants;
  auto vec = [&](int idx, const char* what, std::vector<double>* out) {
    const olc_tensor& t = c[idx];
    if (!t.data || t.ndim != 1 || t.shape[0] != cout) {
      fail_create(error, esize, "BatchNormalization %s must be a constant of shape [%lld]", what, (long long)cout);
      return false;
    }
    out->resize(static_cast<size_t>(cout));
    for (int64_t i = 0; i < cout; ++i) {
      double v;
      if (t.dtype == OLC_DTYPE_DOUBLE) v = static_cast<const double*>(t.data)[i];
      else v = elem(t.dtype, t.data, i);
      (*out)[i] = v;
    }
    return true;
  };
  for (auto [name, v] : {std::pair{"channel_scale", &st->ch_scale}, std::pair{"channel_shift", &st->ch_shift}})
    if (v->size() > 1 && v->size() != static_cast<size_t>(cout))
      return fail_create(error, esize, "attribute '%s' has %zu values: 1 or one per output channel (%lld) expected",
                         name, v->size(), (long long)cout),
             false;
  std::vector<double> f(static_cast<size_t>(cout), 1.0), b(static_cast<size_t>(cout), 0.0);
  if (node->n_inputs > 2 && node->input_dtypes[2] != OLC_DTYPE_UNDEFINED && !vec(2, "(the Conv bias)", &b))
    return false;
  if (st->bn) {
    std::vector<double> scale, bias, mean, var;
    if (!vec(3, "scale", &scale) || !vec(4, "B", &bias) || !vec(5, "mean", &mean) || !vec(6, "var", &var))
      return false;
    for (size_t co = 0; co < f.size(); ++co) {
      f[co] = scale[co] / std::sqrt(var[co] + st->bn_eps);
      b[co] = (b[co] - mean[co]) * f[co] + bias[co];
    }
  }
  auto at = [](const std::vector<double>& v, size_t i, double def) {
    return v.empty() ? def : v[v.size() == 1 ? 0 : i];
  };
  for (size_t co = 0; co < f.size(); ++co) {
    const double s = at(st->ch_scale, co, 1.0);
    f[co] *= s;
    b[co] = b[co] * s + at(st->ch_shift, co, 0.0);
  }
  const int64_t per = n / cout;
  w->resize(static_cast<size_t>(n));
  st->fbias.resize(static_cast<size_t>(cout));
  for (int64_t co = 0; co < cout; ++co) {
    st->fbias[co] = static_cast<float>(b[co]);
    for (int64_t i = co * per; i < (co + 1) * per; ++i)
      (*w)[i] = static_cast<float>(static_cast<double>(elem(st->dtype, cw.data, i)) * f[co]);
  }
  return true;
}

void* conv_create_impl(const olc_core_api* api, const olc_node_info* node, bool fused, char* error, size_t esize) {
  auto st = std::make_unique<ConvState>();
  const ConvOp kind = fused ? ConvOp::kFusedConv : ConvOp::kConv;
  if (!parse_attrs(node, kind, st.get(), error, esize) || !check_float_inputs(node, kind, st.get(), error, esize))
    return nullptr;
  const int32_t dt = st->dtype;
  st->ks = select_kernels(api);
  st->ck = conv_kernels_for(api->simd_level());
  const char* lib = "olc_matmul";
  st->t_kc = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "kc", 256);
  st->t_nc = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "nc", 256);
  // Below about a million multiply-adds (a few microseconds on one
  // thread) a second thread costs more than it saves: MobileNetV3-style
  // blocks (1x1 and depthwise layers of 0.05-0.5 M) ran 211 -> 135 us on
  // two threads with 1 << 20 instead of 1 << 16 (Sapphire Rapids).
  st->t_par = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "parallel_min_macs", 1 << 20);
  st->t_stream = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "stream_min_bytes",
                                         conv_stream_min_bytes(cache_info()));
  // A pointwise convolution's B, X: 2 read in place, 3 copied per tile
  // row by row into panels, 1 either by its shape (below), 0 built panel
  // by panel like an im2col.
  st->t_pwd = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "pointwise_direct", 1);
  // The transposed product stacks the positions of up to this many
  // output positions (whole images) into its rows per chunk.
  st->t_trows = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "transposed_max_rows", 2048);
  // 1: a pointwise convolution's transposed product reads its strips in
  // place from X (strip_in_place); 0: copies them. By default only where a
  // strip's MR floats fill most of a cache line (pointwise_in_place_default).
  st->t_inplace = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "pointwise_in_place",
                                          pointwise_in_place_default(st->ks.isa->mr_f32));
  // On several threads, a transposed product's strips of at least this
  // many values are built once for all its tasks (see run_tasks); fewer
  // are built faster by each task than handed out (1x1 512->2048 at 7x7,
  // batch 1, two threads: 49 x 512 values, 5 % slower shared, before
  // strips were read in place).
  st->t_shared = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "shared_strips_min_floats", 1 << 16);
  // 1: an image stem's implicit GEMM reads B's rows straight from its
  // padded copy (see direct_rows); 0: it builds im2col panels.
  st->t_rows = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "direct_rows", 1);
  st->t_gemv = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "gemv_split_min_bytes",
                                       conv_gemv_split_min_bytes(cache_info()));
  // 1: 3x3 stride-1 float32 convolutions with constant weights run as
  // Winograd F(2x2, 3x3); 0: the implicit GEMM.
  st->t_wino = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "winograd", 1);
  // 1: the implicit GEMM of a convolution with constant weights runs as the
  // transposed product reading its strips straight from the padded input
  // where its output channels fill the W^T panels (gemmd_range); 0: never.
  st->t_direct_t = api->tuning_declare_int(lib, "Conv", st->ks.isa_name, dt, "direct_transposed", 1);

  // Constant W: packed once, in the layout its shape calls for.
  std::string pack_note;
  const olc_tensor* cw = node->input_constants ? &node->input_constants[1] : nullptr;
  if (st->folds() && !(cw && cw->data && cw->dtype == dt && cw->ndim >= 3 && cw->ndim <= 5 &&
                       olc_element_count(cw) > 0 && cw->shape[0] % st->group == 0))
    return fail_create(error, esize, "folding %s needs a constant W whose channels divide by group",
                       st->bn ? "BatchNormalization" : "channel_scale/channel_shift");
  std::vector<float> folded;
  if (st->folds() && !fold_weights(node, st.get(), *cw, &folded, error, esize)) return nullptr;
  if (cw && cw->data && cw->dtype == dt && cw->ndim >= 3 && cw->ndim <= 5) {
    const int64_t n = olc_element_count(cw);
    // With BatchNormalization or an affine folded, the weights packed are
    // the folded float32 ones.
    const int32_t wdt = st->folds() ? OLC_DTYPE_FLOAT : dt;
    const void* wsrc = st->folds() ? static_cast<const void*>(folded.data()) : cw->data;
    const int64_t cout = cw->shape[0], cg = cw->shape[1];
    // The run takes the depthwise loop for one input channel per group,
    // unless the convolution is pointwise (1x1, stride 1, no padding).
    bool pointwise = true;
    for (int32_t i = 2; i < cw->ndim; ++i) pointwise = pointwise && cw->shape[i] == 1;
    for (int64_t v : st->strides) pointwise = pointwise && v == 1;
    for (int64_t v : st->pads) pointwise = pointwise && v == 0;
    if (n > 0 && cout % st->group == 0) {
      st->wpack_dw = cg == 1 && st->group > 1;
      const int MR = st->ks.isa->mr_f32;
      const int64_t Mg = cout / st->group, Kg = n / cout;
      // Depthwise: the taps per channel, then the same in blocks of L
      // channels for small planes.
      const int L = st->ck->lanes;
      const size_t nfl = st->wpack_dw ? static_cast<size_t>(n + (cout + L - 1) / L * Kg * L)
                                      : strips_floats(st->group, Mg, Kg, MR);
      st->wpack = make_packed(PackLayout::kF32, nfl * sizeof(float));
      if (st->wpack) {
        float* dst = static_cast<float*>(st->wpack->data);
        if (st->wpack_dw) {
          convert_run(wdt, wsrc, 1, n, dst);
          block_taps(dst, cout, Kg, L, dst + n);
        } else {
          pack_strips(wdt, wsrc, st->group, Mg, Kg, MR, dst);
          // Winograd's transformed weights: 2-D 3x3 at stride 1 without
          // dilation (the attributes say so), float32.
          bool unit = cw->ndim == 4 && cw->shape[2] == 3 && cw->shape[3] == 3 && dt == OLC_DTYPE_FLOAT;
          for (int64_t v : st->strides) unit = unit && v == 1;
          for (int64_t v : st->dil) unit = unit && v == 1;
          if (unit && cg >= 8 && Mg >= 8) {
            st->wino = make_packed(PackLayout::kF32, wino_weight_floats(st->group, Mg, cg, MR) * sizeof(float));
            if (st->wino) {
              wino_pack_weights(static_cast<const float*>(wsrc), st->group, Mg, cg, MR,
                                static_cast<float*>(st->wino->data));
              if (OLC_API_HAS(api, report_prepacked))
                api->report_prepacked(node, st->wino.get(), static_cast<int64_t>(st->wino->bytes));
            }
            const int NR = st->ks.isa->nr_f32;
            if (st->wino && n <= kMaxWtFloats)
              st->wino_t = make_packed(PackLayout::kF32, wino_weight_t_floats(st->group, Mg, cg, NR) * sizeof(float));
            if (st->wino_t) {
              wino_pack_weights_t(static_cast<const float*>(wsrc), st->group, Mg, cg, NR,
                                  static_cast<float*>(st->wino_t->data));
              if (OLC_API_HAS(api, report_prepacked))
                api->report_prepacked(node, st->wino_t.get(), static_cast<int64_t>(st->wino_t->bytes));
            }
          }
          // The transposed product's panels too (few output positions),
          // unless the weights are large (then positions are rarely few)
          // or Winograd's transposed product serves few positions instead.
          if (n <= kMaxWtFloats && !st->wino_t) {
            const int NR = st->ks.isa->nr_f32;
            st->wtpack = make_packed(PackLayout::kF32, wt_floats(st->group, Mg, Kg, NR) * sizeof(float));
            if (st->wtpack) {
              pack_wt(wdt, wsrc, st->group, Mg, Kg, NR, static_cast<float*>(st->wtpack->data));
              if (OLC_API_HAS(api, report_prepacked))
                api->report_prepacked(node, st->wtpack.get(), static_cast<int64_t>(st->wtpack->bytes));
            }
          }
        }
        st->wdata = cw->data;
        st->wshape.assign(cw->shape, cw->shape + cw->ndim);
        if (OLC_API_HAS(api, report_prepacked))
          api->report_prepacked(node, st->wpack.get(), static_cast<int64_t>(st->wpack->bytes));
        char buf[96];
        std::snprintf(buf, sizeof buf, " prepacked-W %.1f KiB",
                      (st->wpack->bytes + (st->wtpack ? st->wtpack->bytes : 0) + (st->wino ? st->wino->bytes : 0) +
                       (st->wino_t ? st->wino_t->bytes : 0)) /
                          1024.0);
        pack_note = buf;
      }
    }
  }
  if (st->folds() && !st->wpack) return fail_create(error, esize, "out of memory packing the folded weights");
  static const char* const kActNames[] = {"",        "Relu",      "Clip", "LeakyRelu", "HardSigmoid",
                                          "Sigmoid", "HardSwish", "Swish"};
  if (st->bn) pack_note += " +BatchNormalization";
  if (st->channel_affine()) pack_note += " +affine";
  if (st->res_idx) pack_note += " +Add";
  if (st->act.kind != ActKind::kNone) pack_note += std::string(" +") + kActNames[static_cast<int>(st->act.kind)];
  if (st->act.post) pack_note += " +affine";
  const std::string isa = st->ks.isa_name;
  st->detail_gemm = isa + " implicit-gemm" + pack_note;
  st->detail_gemm_rows = isa + " implicit-gemm-rows" + pack_note;
  st->detail_pw = isa + " pointwise-gemm" + pack_note;
  st->detail_gemmt = isa + " implicit-gemm-transposed" + pack_note;
  st->detail_gemmd = isa + " implicit-gemm-transposed-direct" + pack_note;
  st->detail_pwt = isa + " pointwise-gemm-transposed" + pack_note;
  st->detail_pws = isa + " pointwise-gemm-subsampled" + pack_note;
  st->detail_pwts = isa + " pointwise-gemm-transposed-subsampled" + pack_note;
  st->detail_wino = isa + " winograd-f2x2-3x3" + pack_note;
  st->detail_winot = isa + " winograd-f2x2-3x3-transposed" + pack_note;
  st->detail_dw = std::string(st->ck->name) + " depthwise" + pack_note;
  st->detail_dwb = std::string(st->ck->name) + " depthwise-channels" + pack_note;
  return st.release();
}

void* conv_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return conv_create_impl(api, node, false, error, esize);
}
void* fused_conv_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return conv_create_impl(api, node, true, error, esize);
}

void conv_destroy(void* state) { delete static_cast<ConvState*>(state); }

bool check_input(olc_context* ctx, const ConvAttrs* st, const olc_tensor& t, int idx) {
  if (t.dtype != st->dtype) {
    fail_run(ctx, "input %d has type %s, the kernel was created for %s", idx, olc_dtype_name(t.dtype),
             olc_dtype_name(st->dtype));
    return false;
  }
  const int64_t n = olc_element_count(&t);
  if (n < 0) {
    fail_run(ctx, "input %d has a negative dimension or too many elements", idx);
    return false;
  }
  if (n > 0 && !t.data) {
    fail_run(ctx, "input %d has no data", idx);
    return false;
  }
  return true;
}

// The bias as float32: B itself, or converted into `buf` for 16-bit types.
const float* bias_as_float(int32_t dtype, const olc_tensor* b, int64_t n, std::vector<float>* buf) {
  if (!b) return nullptr;
  if (dtype == OLC_DTYPE_FLOAT) return static_cast<const float*>(b->data);
  buf->resize(static_cast<size_t>(n));
  convert_run(dtype, b->data, 1, n, buf->data());
  return buf->data();
}

// A 1x1 convolution with strides and no padding (a ResNet projection
// shortcut) reads one input position in s per axis.
bool strided_pointwise(const Geom& g) {
  if (g.ksz != 1 || g.depthwise) return false;
  bool strided = false;
  for (int i = 0; i < 3; ++i) {
    if (g.pb[i] || g.pe[i]) return false;
    strided = strided || g.s[i] > 1;
  }
  return strided;
}

struct SubsampleJob {
  const Geom* g;
  const float* x;
  float* dst;
  int64_t stride;  // of the dst planes
};

// Planes [begin, end) of the N * C input planes: the positions a strided 1x1
// convolution reads, packed into out_sp values each, planes stride apart.
void subsample_range(void* user, int64_t begin, int64_t end) {
  const SubsampleJob& job = *static_cast<const SubsampleJob*>(user);
  const Geom& g = *job.g;
  for (int64_t p = begin; p < end; ++p) {
    const float* src = job.x + p * g.in_sp;
    float* d = job.dst + p * job.stride;
    for (int64_t a = 0; a < g.out[0]; ++a)
      for (int64_t b = 0; b < g.out[1]; ++b) {
        const float* row = src + (a * g.s[0] * g.in[1] + b * g.s[1]) * g.in[2];
        for (int64_t c = 0; c < g.out[2]; ++c) *d++ = row[c * g.s[2]];
      }
  }
}

thread_local FloatScratch t_sub, t_strips;

// Whether a depthwise Conv runs blocked across channels (dw_block_range,
// `depthwise-channels`) rather than plane by plane (dw_range), at L float
// lanes.
bool dw_blocked(const Geom& g, int L) {
  // L channels at once where output rows are narrower than a vector, and
  // up to 32 wide except for the 3x3 layers that AVX-512's direct loop
  // runs eight rows at a time (dw_rows3): elsewhere the direct loop loads
  // once per tap, where the blocked one shares a kernel row's loads
  // across positions. Zen 4, one thread, direct -> blocked: AVX2 3x3
  // 88@8x8 12 -> 5.5 us, 384@14x14 91 -> 47, 144@28x28 86 -> 59; 5x5
  // 120@28x28 155 -> 95 (AVX-512 158 -> 95); but AVX-512 3x3 64@32x32
  // 31 -> 65.
  const bool rows3 = dw_rows3_applies(g.in[0] + g.pb[0] + g.pe[0], g.k[1], g.k[2], g.d[1], g.s[1]);
  // 2-D 5x5 taps at W stride 1 (PP-LCNet's and MobileNetV3's wide
  // layers) go blocked up to 96 positions a row: there the blocked loop's
  // shared loads (dwb_row) outweigh its transposes. One thread, same
  // process alternating, direct -> blocked: AVX-512 240@12x80 205 ->
  // 174 us, 64@56x56 189 -> 163, 192@40x40 363 -> 237, but 32@112x112
  // 331 -> 353 and stride 2 240@24x160 301 -> 334; AVX2 240@12x80 257 ->
  // 204, 64@56x56 205 -> 182 (Sapphire Rapids).
  const bool wide5 = g.in[0] + g.pb[0] + g.pe[0] == 1 && g.k[2] == 5 && g.s[2] == 1 && g.d[2] == 1 && g.out[2] <= 96;
  // AVX-512's 3x3 rows read straight from the input stay direct from 12
  // positions a row (dw_direct3_applies).
  if (dw_direct3_applies(L, g)) return false;
  return (g.out[2] < L || (g.out[2] <= 32 && !(rows3 && L >= 16)) || wide5) && L <= 64;
}

int32_t conv_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs,
                 int32_t n_outputs) {
  const ConvState* st = static_cast<const ConvState*>(state);
  if (n_inputs < 2 || n_outputs != 1 || n_inputs <= st->res_idx)
    return fail_run(ctx, "expects %d inputs and 1 output", st->res_idx ? st->res_idx + 1 : 2);
  const olc_tensor& x = inputs[0];
  const olc_tensor& w = inputs[1];
  const olc_tensor* b = (n_inputs >= 3 && inputs[2].dtype != OLC_DTYPE_UNDEFINED) ? &inputs[2] : nullptr;
  const olc_tensor* rt = st->res_idx ? &inputs[st->res_idx] : nullptr;
  if (!check_input(ctx, st, x, 0) || !check_input(ctx, st, w, 1) || (b && !check_input(ctx, st, *b, 2)) ||
      (rt && !check_input(ctx, st, *rt, st->res_idx)))
    return OLC_ERROR;
  if (st->folds() && w.data != st->wdata)
    return fail_run(ctx, "W is not the constant the folded weights were made from at creation");
  Geom g;
  char err[400];
  if (!resolve(st, x, w, b, &g, err, sizeof err)) return fail_run(ctx, "%s", err);
  int64_t oshape[5];  // x.ndim = 2 + g.nsp <= 5 (resolve checked it)
  oshape[0] = g.N;
  oshape[1] = g.Cout;
  for (int i = 0; i < g.nsp; ++i) oshape[2 + i] = g.out[3 - g.nsp + i];
  if (rt && !(rt->ndim == x.ndim && std::equal(oshape, oshape + x.ndim, rt->shape)))
    return fail_run(ctx, "the residual has shape %s, the output %s (no broadcasting)",
                    fmt_ints(std::vector<int64_t>(rt->shape, rt->shape + rt->ndim)).c_str(),
                    fmt_ints(std::vector<int64_t>(oshape, oshape + x.ndim)).c_str());
  const void* res = rt ? rt->data : nullptr;
  void* y = g_api->allocate_output(ctx, 0, st->dtype, x.ndim, oshape);
  const int64_t total = g.N * g.Cout * g.out_sp;
  if (!y && total > 0) return OLC_ERROR;
  if (total == 0) return OLC_OK;
  std::vector<float> biasv;
  const float* bias = st->folds() ? st->fbias.data() : bias_as_float(st->dtype, b, g.Cout, &biasv);
  const Activation* act = st->act.kind == ActKind::kNone ? nullptr : &st->act;
  const bool packed = st->wpack && w.data == st->wdata && w.ndim == static_cast<int32_t>(st->wshape.size()) &&
                      std::equal(st->wshape.begin(), st->wshape.end(), w.shape) && st->wpack_dw == g.depthwise;
  // Work for the threading decision in multiply-adds. A depthwise layer
  // costs more than its few multiply-adds: its time goes with the values
  // it reads and writes (copied into padded or channel-blocked buffers,
  // no register reuse across channels), each counted as
  // kDepthwiseValueCost, and an output's taps past that. MobileNetV2's 3x3
  // depthwise layers at 7x7 and 14x14 (423K and 677K multiply-adds) split
  // again, while MobileNetV3-style layers at 16x16 and below stay on one
  // thread; a stride-2 layer reads four inputs per output (3x3 stride 2 on
  // 128 x 28x28, one thread, AVX-512: 22 us, as long as 960 x 7x7 at
  // stride 1; two threads 16 us).
  // Blocked across channels (small planes), a layer's values cost more
  // again: interleaved into the channel-blocked buffer and transposed back.
  // There a second thread pays from about 12K outputs (AVX-512, two
  // threads against one, alternating in one process, 3x3 unless said:
  // 240@7 0.93x, 5x5 128@10 1.18x, 600@7 1.26x, 144@14 1.67x, 5x5 512@7
  // 1.14x, 5x5 stride 2 256@14 1.22x; AVX2 level: 3x3 64@16 1.29x, 5x5
  // 128@10 1.33x), where 12 per value left all of these on one thread.
  constexpr int64_t kDepthwiseValueCost = 12, kBlockedValueCost = 40;
  const bool blocked = g.depthwise && dw_blocked(g, st->ck->lanes);
  const int64_t value_cost = blocked ? kBlockedValueCost : kDepthwiseValueCost;
  const int64_t macs = g.depthwise ? total * std::max<int64_t>(g.Kg, value_cost) + g.N * g.C * g.in_sp * value_cost
                                   : total * g.Kg;
  const int64_t threads =
      macs >= g_api->tuning_read_int(st->t_par) ? std::max<int32_t>(1, g_api->concurrency(ctx)) : 1;
  std::atomic<bool> failed{false};
  if (g.Kg == 0) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t co = 0; co < g.Cout; ++co) {
        const float v0 = bias ? bias[co] : 0.0f;
        for (int64_t i = 0; i < g.out_sp; ++i) {
          const int64_t o = (n * g.Cout + co) * g.out_sp + i;
          float v = v0 + (res ? elem(st->dtype, res, o) : 0.0f);
          st->ck->activate(act, &v, 1, 1, 1, nullptr, 0);
          put(st->dtype, y, o, v);
        }
      }
    g_api->record_usage_detail(ctx, st->detail_gemm.c_str());
    return OLC_OK;
  }
  if (g.depthwise) {
    std::vector<float> tapsv;
    const float* taps;
    if (packed) {
      taps = static_cast<const float*>(st->wpack->data);
    } else {
      tapsv.resize(static_cast<size_t>(g.Cout * g.ksz));
      convert_run(st->dtype, w.data, 1, g.Cout * g.ksz, tapsv.data());
      taps = tapsv.data();
    }
    if (blocked) {
      const int L = st->ck->lanes;
      std::vector<float> wblkv;
      const float* wblk;
      if (packed) {
        wblk = taps + g.Cout * g.ksz;
      } else {
        wblkv.resize(static_cast<size_t>((g.Cout + L - 1) / L * g.ksz * L));
        block_taps(taps, g.Cout, g.ksz, L, wblkv.data());
        wblk = wblkv.data();
      }
      const int64_t tasks = g.N * ((g.Cout + L - 1) / L);
      DwBlockJob bj{&g, st->dtype, st->ck, wblk, x.data, y, bias, act, &failed, res, threads > 1 && tasks > 1};
      if (bj.claim) g_api->parallel_for(ctx, tasks, 1, 0, &dw_block_range, &bj);
      else dw_block_range(&bj, 0, tasks);
      if (failed.load()) return fail_run(ctx, "out of memory for the Conv work buffers");
      g_api->record_usage_detail(ctx, st->detail_dwb.c_str());
      return OLC_OK;
    }
    DwJob job{&g, st->dtype, st->ck, taps, x.data, y, bias, act, 1, 0, &failed, res};
    const int64_t rows = g.out[0] * g.out[1];
    const int64_t planes = g.N * g.Cout;
    // On threads, the rows of planes of at least kDwAffinityFloats input
    // values go in a multiple of threads chunks, the tasks ordered chunk
    // by chunk: each thread takes the same rows of every plane, the rows
    // whose inputs the layer before (a pointwise GEMM, split by positions)
    // computed on that thread, still in its L2. Split by planes, each
    // thread read half its input from the other core's cache. Smaller
    // planes stay whole per task (their inputs are fewer, and a task's
    // setup is a larger share of its time); fewer planes than four tasks a
    // thread are split into rows as well.
    if (threads > 1 && (g.in_sp >= kDwAffinityFloats || planes < 4 * threads)) {
      const int64_t want = std::max<int64_t>(threads, (4 * threads + planes - 1) / planes);
      job.rchunks = std::min<int64_t>(rows, (want + threads - 1) / threads * threads);
    }
    job.rstep = (rows + job.rchunks - 1) / job.rchunks;
    // Whole passes of the rows the 3x3 loop runs together (eight at a
    // time; four below AVX-512): a chunk's leftover rows take a half pass
    // (four or more at AVX-512) or the slower loop.
    const bool rows3 = dw_rows3_applies(g.in[0] + g.pb[0] + g.pe[0], g.k[1], g.k[2], g.d[1], g.s[1]);
    if (rows3 && job.rchunks > 1 && job.rstep > 8) job.rstep = (job.rstep + 7) / 8 * 8;
    job.rchunks = (rows + job.rstep - 1) / job.rstep;
    const int64_t tasks = planes * job.rchunks;
    if (threads > 1 && tasks > 1) g_api->parallel_for(ctx, tasks, 1, 0, &dw_range, &job);
    else dw_range(&job, 0, tasks);
    if (failed.load()) return fail_run(ctx, "out of memory for the Conv work buffers");
    g_api->record_usage_detail(ctx, st->detail_dw.c_str());
    return OLC_OK;
  }
  const IsaKernels* isa = st->ks.isa;
  const int MR = isa->mr_f32, NR = isa->nr_f32;
  const int64_t KC = std::max<int64_t>(16, std::min<int64_t>(4096, g_api->tuning_read_int(st->t_kc)));
  const Wino wk = packed && st->wino && st->dtype == OLC_DTYPE_FLOAT && wino_applies(g) &&
                          g_api->tuning_read_int(st->t_wino)
                      ? choose_winograd(g, NR, st->wino_t != nullptr, st->wtpack != nullptr, threads)
                      : Wino::kNone;
  if (wk != Wino::kNone) {
    WinoRun wr{&g,
               isa,
               st->ck,
               wk == Wino::kTransposed,
               static_cast<const float*>(st->wino->data),
               st->wino_t ? static_cast<const float*>(st->wino_t->data) : nullptr,
               static_cast<const float*>(x.data),
               static_cast<float*>(y),
               bias,
               act,
               static_cast<const float*>(res),
               KC,
               threads};
    if (!wino_run(g_api, ctx, wr)) return fail_run(ctx, "out of memory for the Conv work buffers");
    g_api->record_usage_detail(ctx, (wk == Wino::kTransposed ? st->detail_winot : st->detail_wino).c_str());
    return OLC_OK;
  }
  // A strided 1x1 convolution without padding: the positions it reads,
  // gathered into a compact copy, make it a pointwise product read in
  // place, instead of the implicit GEMM's padded copy of the whole input
  // and its im2col panels (1x1 stride 2 64->128 at 16x16, one thread:
  // the padded copy was a third of the node's time).
  const void* xdata = x.data;
  const bool subsampled = st->dtype == OLC_DTYPE_FLOAT && strided_pointwise(g);
  if (subsampled) {
    // Planes of 64 positions and more start on a cache line (a 14x14
    // plane's 784 bytes would split the product's vector loads of X).
    const int64_t stride = g.out_sp >= 64 ? (g.out_sp + 15) / 16 * 16 : g.out_sp;
    float* xs = t_sub.get(static_cast<size_t>(g.N * g.C * stride));
    if (!xs) return fail_run(ctx, "out of memory for the Conv work buffers");
    SubsampleJob sj{&g, static_cast<const float*>(x.data), xs, stride};
    const int64_t planes = g.N * g.C;
    if (threads > 1 && planes > 1 && planes * g.out_sp >= (int64_t(1) << 16))
      g_api->parallel_for(ctx, planes, std::max<int64_t>(1, planes / (4 * threads)), 0, &subsample_range, &sj);
    else
      subsample_range(&sj, 0, planes);
    for (int i = 0; i < 3; ++i) {
      g.in[i] = g.out[i];
      g.s[i] = 1;
    }
    g.in_sp = stride;  // the planes' stride; their positions are out_sp
    g.pointwise = true;
    xdata = xs;
  }
  // Few output positions: the transposed product, when the weights'
  // transposed panels exist (a constant W up to kMaxWtFloats) or are
  // packed for this run (a fed W). The transposed product reading its
  // strips in place (gemmd_range): an implicit GEMM (not a stem's few
  // input channels, read as direct rows) whose output channels fill the
  // constant weights' W^T panels, in place of the transposed product
  // building its strips, or of the normal one
  // where K >= 3 Mg. The normal product builds K x N panel values, a
  // 1 / Mg share of its multiply-adds, where this one transposes Mg x N
  // values into the planes, a 1 / K share: at K = 9 Mg (a 3x3 layer of
  // 128 channels at stride 2) 8 % faster, at K = 0.6 Mg (1-D k3 80 ->
  // 384) 15 % slower, at K = 1.7 Mg (3x3 6 -> 32) 10 % slower. Not for
  // one output row (1-D): 1-D k3 stride 2 384 -> 384 at 3000 (K = 3 Mg)
  // ran 10-16 % slower on one and two threads, AVX-512 and AVX2.
  const bool prefer_t = prefer_transposed(g.out_sp, g.Mg, NR) && (packed ? st->wtpack != nullptr : true);
  const bool direct_t = !g.pointwise && packed && st->wtpack && g.Cg > 4 && fills_panels(g.Mg, NR) &&
                        direct_strips_fill(g.out[2], MR) &&
                        (prefer_t || (g.Kg >= 3 * g.Mg && g.out[0] * g.out[1] > 1)) &&
                        g_api->tuning_read_int(st->t_direct_t) != 0;
  const bool transposed = direct_t || prefer_t;
  const int64_t pwd = g_api->tuning_read_int(st->t_pwd);
  const bool direct_b = !transposed && g.pointwise && st->dtype == OLC_DTYPE_FLOAT && pwd != 0;
  std::unique_ptr<float[]> wrun;
  const float* wp = nullptr;
  if (transposed) {
    if (packed) {
      wp = static_cast<const float*>(st->wtpack->data);
    } else {
      wrun.reset(new float[wt_floats(g.G, g.Mg, g.Kg, NR)]);
      pack_wt(st->dtype, w.data, g.G, g.Mg, g.Kg, NR, wrun.get());
      wp = wrun.get();
    }
  } else if (packed) {
    wp = static_cast<const float*>(st->wpack->data);
  } else {
    wrun.reset(new float[strips_floats(g.G, g.Mg, g.Kg, MR)]);
    pack_strips(st->dtype, w.data, g.G, g.Mg, g.Kg, MR, wrun.get());
    wp = wrun.get();
  }
  // A 1x1 output from a 1x1 input (squeeze-and-excite gates, a
  // classifier head as a Conv): per image and group one row of the
  // transposed product, a GEMV over the W^T panels (no strips to build, no
  // MR-row microkernel). It reads each weight once: bound by memory, not
  // by multiply-adds, so its threads follow the weights' bytes.
  if (transposed && g.pointwise && g.in_sp == 1 && st->dtype == OLC_DTYPE_FLOAT && (threads == 1 || g.N == 1)) {
    GemvJob gj{&g, st->ck, static_cast<const float*>(xdata), wp, bias, act, res, static_cast<float*>(y), NR,
               (g.Mg + NR - 1) / NR, 1};
    const int64_t wbytes = g.G * g.Mg * g.Kg * int64_t{sizeof(float)};
    const int64_t conc = std::max<int32_t>(1, g_api->concurrency(ctx));
    if (conc > 1 && wbytes >= g_api->tuning_read_int(st->t_gemv)) gj.chunks = std::min<int64_t>(gj.panels, conc);
    const int64_t tasks = g.N * g.G * gj.chunks;
    if (tasks > 1 && gj.chunks > 1) g_api->parallel_for(ctx, tasks, 1, 0, &gemv_range, &gj);
    else gemv_range(&gj, 0, tasks);
    g_api->record_usage_detail(ctx, (subsampled ? st->detail_pwts : st->detail_pwt).c_str());
    return OLC_OK;
  }
  GemmJob job{};
  job.g = &g;
  job.dt = st->dtype;
  job.isa = isa;
  job.ck = st->ck;
  job.wp = wp;
  job.x = xdata;
  job.y = y;
  job.bias = bias;
  job.act = act;
  job.res = res;
  job.KC = KC;
  job.NC = std::max<int64_t>(NR, std::min<int64_t>(1 << 16, g_api->tuning_read_int(st->t_nc)) / NR * NR);
  job.failed = &failed;
  job.direct_b = direct_b;
  job.wt = direct_b && packed && st->wtpack ? static_cast<const float*>(st->wtpack->data) : nullptr;
  // Streamed tiles are final when stored: not with an activation applied
  // by a second pass over them (Sigmoid), which would read them back.
  const int64_t stream_min = g_api->tuning_read_int(st->t_stream);
  Epi<float> epi_probe{};
  job.stream = !transposed && st->dtype == OLC_DTYPE_FLOAT && stream_min > 0 &&
               g.N * g.Cout * g.out_sp * int64_t{sizeof(float)} >= stream_min && epilogue_activation(act, &epi_probe);
  // Output tiles per image and group (of at most NC columns, balanced to
  // within a panel); with too few tasks for the threads, the output
  // channels are split too (each share builds its own panels).
  job.tn = (g.out_sp + job.NC - 1) / job.NC;
  if (threads > 1 && !direct_b) {
    // Few tasks: as many tiles as make the task count a multiple of the
    // threads (13 tiles on 2 threads leave one thread idle for a 13th),
    // each tile narrowed to match.
    const int64_t ng = g.N * g.G;
    if (ng * job.tn < 8 * threads) {
      int64_t tn = job.tn;
      // An image stem (at most 4 input channels: each task's padded rows
      // cost little) is often a model's first node, whose worker thread
      // is still waking: at least four tiles per thread, so that the
      // thread which started alone hands over the rest a tile at a time
      // (a 7x7 stride-2 64-channel stem of a 64x64 image after a 0.5 ms
      // pause, two threads: 120 -> 111 us).
      if (g.Cg <= 4) tn = std::max(tn, std::min((4 * threads + ng - 1) / ng, (g.out_sp + 2 * NR - 1) / (2 * NR)));
      while ((ng * tn) % threads) ++tn;
      const int64_t nc = ((g.out_sp + tn - 1) / tn + NR - 1) / NR * NR;
      if (nc >= NR) {
        job.NC = nc;
        job.tn = (g.out_sp + nc - 1) / nc;
      }
    }
  } else if (threads > 1 && g.N * g.G * job.tn >= threads) {
    // Read in place, a tile costs only its panels: with a task or more per
    // thread but a count that leaves one idle at the end (13 tiles of a
    // 56x56 plane on 2 threads), one more tile or so, when the panels
    // still split evenly among them.
    const int64_t ng = g.N * g.G, P = (g.out_sp + NR - 1) / NR;
    int64_t tn = job.tn;
    while ((ng * tn) % threads) ++tn;
    if (tn != job.tn && ng * job.tn < 8 * threads && P % tn == 0) {
      job.NC = P / tn * NR;
      job.tn = tn;
    }
  }
  const int64_t base = g.N * g.G * job.tn;
  const int64_t mblocks = (g.Mg + MR - 1) / MR;
  // Fewer tiles than threads, or a count that leaves a thread idle at the
  // end: the output channels are split too, into the fewest shares that
  // make the task count a multiple of the threads.
  job.tm = 1;
  if (threads > 1 && base < 4 * threads && base % threads) {
    while (job.tm < mblocks && (base * job.tm) % threads) ++job.tm;
  }
  // A tile of part of a large plane reads its K rows as that many short
  // runs a plane apart: past a few dozen (more streams than the hardware
  // prefetchers follow) the first strip of each panel waited on L3 or
  // memory for every row. Copied row by row, each run is one stream (1x1
  // 256->64 at 56x56, one thread: 830 -> 780 us per image; at 14x14 the
  // whole plane is one tile and one stream, and 16 rows are few enough).
  // A whole plane whose rows do not start on a cache line (14x14: 784
  // bytes) splits the microkernel's vector loads of X; with many output
  // channels the panels copied once are read by enough strips to pay (one
  // thread, alternating in one process: 1x1 256->1024 at 14x14 1,453 ->
  // 1,264 us, 1024->256 1,248 -> 1,158; but 384->64 136 -> 144).
  const bool split_rows = (g.in_sp * int64_t{sizeof(float)}) % 64 != 0 && g.Mg >= 256;
  job.pack_rows = direct_b && (pwd == 3 || (pwd == 1 && g.Kg >= 64 && (job.tn > 1 || split_rows)));
  job.mstep = (mblocks + job.tm - 1) / job.tm * MR;
  // A K of 16 or less (MobileNetV2's 16 -> 96 expansion at 112x112) makes
  // the product a write stream: tile after tile of Mg rows, panel by panel,
  // kept Mg output rows open at once (96 streams, more than the
  // prefetchers and fill buffers follow), and a 4.8 MiB output written
  // past L2 ran at 2 GB/s. A strip at a time, across the tile's panels,
  // keeps MR rows open (one thread, caches cold: 2.2 -> 1.35 ms). Larger
  // K read B's tile back from L2 per strip and lose (1024 -> 256 at 14x14:
  // 1.42 -> 1.72 ms).
  job.strip_outer = direct_b && g.Kg <= 16;
  job.tm = (g.Mg + job.mstep - 1) / job.mstep;
  const int64_t per_image = g.G * job.tn * job.tm;
  // The transposed product: tasks are (group, share of the W^T panels,
  // share of the chunk's images): images shared out when there are enough
  // (each task builds only its own rows), else the panels.
  GemmTJob tj{};
  GemmDJob dj{};
  const bool in_place = g_api->tuning_read_int(st->t_inplace) != 0;
  const int64_t npg = (g.Mg + NR - 1) / NR;
  auto run_tasks = [&](int64_t nimg) {
    if (direct_t) {
      dj.n0 = tj.n0;
      dj.src = tj.src;
      const int64_t tasks = nimg * g.G * dj.split.blocks * dj.split.shares;
      if (threads > 1 && tasks > 1) g_api->parallel_for(ctx, tasks, 1, 0, &gemmd_range, &dj);
      else gemmd_range(&dj, 0, tasks);
      return;
    }
    if (transposed) {
      tj.ipt = nimg;
      tj.ppt = npg;
      // Images shared out duplicate the reading of W^T (Mg rows per task),
      // panels shared out the building of the strips (a row per position
      // per task): the smaller duplication wins. Panels go one share per
      // thread: every share builds all the strips again, and with two per
      // thread (5 panels as 2 + 2 + 1 on two threads) one thread built
      // them twice. Two threads, the two splits alternating in one
      // process: 1x1 960->160 at 7x7 161-188 -> 126-140 us (before, slower
      // than on one thread), 576->96 61 -> 56, 96->576 47 -> 41.
      tj.strips = nullptr;
      tj.in_place = in_place;
      if (threads > 1 && nimg >= threads && nimg * g.out_sp >= g.Mg) {
        tj.ipt = (nimg + threads - 1) / threads;
      } else if (threads > 1) {
        tj.ppt = std::min(npg, std::max<int64_t>(1, (npg * g.G + threads - 1) / threads));
        // Many panels (512->2048 at 7x7: 64) go in four shares per thread,
        // taken as the threads come free: with one share per thread, each
        // built every strip, and the run waited on whichever vCPU the host
        // slowed (two threads, batch 8, AVX2: olc's slowest tenth of the
        // runs 6-31 % above its median, onnxruntime's 2-7 %). One image of a
        // 1x1 convolution reads every strip in place (strip_in_place, each
        // share of at most kInPlaceMaxColumns channels), so its shares copy
        // nothing; otherwise the strips are built once, shared out as
        // items, when there are enough values to share (at batch 1 the
        // 49 x 512 of 512->2048 were built faster by each share).
        // Where strips are copied (pointwise_in_place 0), one image's
        // shares of two panels or more read one shared copy whatever its
        // size, and shares of one panel read them in place (each strip
        // is read once there). AVX2 Zen 3, two threads, in-process
        // alternation, ratio to onnxruntime: 512->2048 at 7x7 0.96 shared
        // against 0.69 in place and 0.84 copied per share; 256->1024 0.97
        // against 0.82 and 0.89; 960->160 (shares of one panel) 1.23 in
        // place against 0.86 shared.
        int64_t nkb, kstep;
        gemmt_kblocks(tj, &nkb, &kstep);
        const int64_t nstrips = (nimg * g.out_sp + MR - 1) / MR;
        const int64_t floats = g.G * nkb * nstrips * MR * kstep;
        const bool image_shares = npg >= 4 * threads && g.pointwise && nimg == 1;
        const bool share_copy = image_shares && !in_place && npg / (4 * threads) >= 2;
        if (image_shares && !share_copy) {
          tj.ppt = std::max<int64_t>(1, std::min(npg / (4 * threads), kInPlaceMaxColumns / NR));
          tj.in_place = true;
        } else if (npg >= 4 * threads && (share_copy || floats >= g_api->tuning_read_int(st->t_shared)) &&
                   floats * int64_t{sizeof(float)} <= l2_three_quarters(cache_info())) {
          float* strips = t_strips.get(static_cast<size_t>(floats));
          if (!strips) {
            failed.store(true);
            return;
          }
          tj.strips = strips;
          const int64_t items = g.G * nkb * nstrips;
          g_api->parallel_for(ctx, items, std::max<int64_t>(1, items / (4 * threads)), 0, &strips_range, &tj);
          tj.ppt = std::max<int64_t>(1, npg / (4 * threads));
        }
      }
      const int64_t ttasks = g.G * ((npg + tj.ppt - 1) / tj.ppt) * ((nimg + tj.ipt - 1) / tj.ipt);
      tj.claim = threads > 1 && ttasks > 1;
      if (tj.claim) g_api->parallel_for(ctx, ttasks, 1, 0, &gemmt_range, &tj);
      else gemmt_range(&tj, 0, ttasks);
      return;
    }
    const int64_t tasks = nimg * per_image;
    if (threads > 1 && tasks > 1) g_api->parallel_for(ctx, tasks, 1, 0, &gemm_range, &job);
    else gemm_range(&job, 0, tasks);
  };
  if (job.direct_b) {
    job.n0 = 0;
    job.nimg = g.N;
    run_tasks(g.N);
  } else {
    // The implicit GEMM reads X through PadLayout: X itself when it is
    // float32 with no padding and unit W stride, else a padded copy made
    // per chunk of images (at most 1 MiB, at least one image) before
    // that chunk's tasks, so that the tasks read it from L2 (8 images of
    // a 224x224 stem, 5 MiB copied before any task, were read back from
    // L3: the 7x7 stem at batch 8 ran 16.2 -> 15.4 ms, the 3x3 one 2.15
    // -> 1.97 ms on one thread). The transposed product stacks a chunk's images
    // into its rows: at most transposed_max_rows (2,048) per chunk.
    bool copy = st->dtype != OLC_DTYPE_FLOAT || g.s[2] != 1;
    for (int i = 0; i < 3; ++i) copy = copy || g.pb[i] || g.pe[i];
    PadLayout& l = job.l;
    if (copy) {
      l.Dp = g.in[0] + g.pb[0] + g.pe[0];
      l.Hp = g.in[1] + g.pb[1] + g.pe[1];
      l.sw = g.s[2];
      l.Wq = (g.in[2] + g.pb[2] + g.pe[2] + l.sw - 1) / l.sw;
      l.cs = l.Dp * l.Hp * l.sw * l.Wq;
    } else {
      l = PadLayout{g.in[0], g.in[1], 1, g.in[2], g.in_sp};
    }
    job.img_stride = g.C * l.cs;
    // An image stem (a few input channels: a short K that few output
    // channels share) spent a tenth of its time building im2col panels
    // that its strips read once or twice. From its padded copy (every
    // row of taps contiguous at W stride 1 or split by W phase) the
    // microkernel reads B's rows directly at the taps' offsets, each
    // panel within one output row. Kg within one K block, since that
    // kernel prefetches no next block of weights.
    job.direct_rows = copy && !transposed && g.Cg <= 4 && g.Kg <= KC && g.out[2] >= NR &&
                      g_api->tuning_read_int(st->t_rows) != 0;
    std::vector<int64_t>& koff = t_koff;
    index_buffer(koff, g.Kg);
    channel_tap_offsets(g, l, koff.data());
    job.koff = koff.data();
    // On several threads with one task per tile, the tasks pad their own
    // rows (a 3x3 stride-2 layer of 64 channels at 16x16 spent a sixth of
    // its two-thread time in the serial copy before); not for one output
    // row (1-D), where every task would copy the whole input. On one
    // thread too, for taps at most three rows tall (a task's rows then
    // repeat few), in an image stem or where the image's padded copy
    // passes 3/4 of the L2: that copy went to a buffer last touched a run
    // ago, its stores missing every cache, where a task's rows stay in L1
    // and L2 while its panels are built. In the models, one thread,
    // alternating processes: PP-LCNet's 3x3 stride-2 stem 172-180 -> 156-168
    // us; YOLOv5's 3x3 stride-2 24 -> 48 at 208x208 (a 4.3 MB copy)
    // 2.67-2.95 -> 2.35-2.41 ms; YOLOv8n's 16 -> 32 at 160x160 (1.7 MB)
    // 705-765 -> 676-703 us. A smaller copy stays whole: YOLOv5's 96 ->
    // 192 at 52x52 (1.1 MB) ran 2-3 % slower per task, AVX-512 and AVX2.
    // (A 7x7 stem's tiles repeat half their rows: batch 8 2 % slower.)
    const bool short_taps = (g.k[1] - 1) * g.d[1] + 1 <= 3;
    const bool large_copy = job.img_stride * int64_t{sizeof(float)} > l2_three_quarters(cache_info());
    job.own_pad = copy && !transposed && (threads > 1 || (short_taps && (job.direct_rows || large_copy))) &&
                  job.tm == 1 && l.Dp == 1 && g.out[1] > 1;
    // The same for the transposed product reading its strips in place,
    // whose tasks are strip ranges (and panel shares) of an image.
    const bool own_pad_d = direct_t && copy && l.Dp == 1 && g.out[0] == 1 && g.out[1] > 1 &&
                           (threads > 1 || (short_taps && large_copy));
    const bool own_pad = job.own_pad || own_pad_d;  // no copy of the whole input before the tasks
    int64_t chunk = copy ? std::max<int64_t>(1, std::min<int64_t>(g.N, (int64_t(1) << 18) / job.img_stride)) : g.N;
    if (transposed)
      chunk = std::max<int64_t>(1, std::min<int64_t>(chunk, g_api->tuning_read_int(st->t_trows) / g.out_sp));
    if (own_pad) chunk = g.N;
    float* buf = nullptr;
    if (copy && !own_pad) {
      // NR more: what direct rows read past the last row's end.
      buf = t_pad.get(static_cast<size_t>(chunk * job.img_stride + NR));
      if (!buf) return fail_run(ctx, "out of memory for the Conv work buffers");
      std::fill_n(buf + chunk * job.img_stride, NR, 0.0f);
    }
    tj.g = &g;
    tj.dt = st->dtype;
    tj.isa = isa;
    tj.ck = st->ck;
    tj.wt = wp;
    tj.y = y;
    tj.bias = bias;
    tj.act = act;
    tj.res = res;
    tj.l = l;
    tj.img_stride = job.img_stride;
    tj.koff = koff.data();
    tj.KC = KC;
    tj.failed = &failed;
    if (direct_t) {
      dj.g = &g;
      dj.isa = isa;
      dj.ck = st->ck;
      dj.dt = st->dtype;
      dj.wt = wp;
      dj.x = xdata;
      dj.bias = bias;
      dj.out = TStore{&g, st->ck, st->dtype, y, res, act};
      dj.l = l;
      dj.img_stride = job.img_stride;
      dj.koff = koff.data();
      dj.KC = KC;
      dj.failed = &failed;
      dj.own_pad = own_pad_d;
      dj.split = gemmd_split(g, l, MR, NR, threads);
    }
    for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
      const int64_t nimg = std::min(chunk, g.N - n0);
      job.n0 = tj.n0 = n0;
      job.nimg = tj.nimg = nimg;
      if (own_pad) {
        job.src = nullptr;
      } else if (copy) {
        PadJob pj{&g, st->ck, xdata, st->dtype, l, n0, buf, job.img_stride};
        const int64_t items = nimg * g.C;
        if (threads > 1 && nimg * job.img_stride >= (int64_t(1) << 16))
          g_api->parallel_for(ctx, items, std::max<int64_t>(1, items / (4 * threads)), 0, &pad_range, &pj);
        else
          pad_range(&pj, 0, items);
        job.src = tj.src = buf;
      } else {
        job.src = tj.src = static_cast<const float*>(xdata) + n0 * job.img_stride;
      }
      run_tasks(nimg);
      if (failed.load()) break;
    }
  }
  if (failed.load()) return fail_run(ctx, "out of memory for the Conv work buffers");
  const std::string& d = subsampled ? (transposed ? st->detail_pwts : st->detail_pws)
                        : direct_t   ? st->detail_gemmd
                        : transposed ? (g.pointwise ? st->detail_pwt : st->detail_gemmt)
                        : g.pointwise ? st->detail_pw
                        : job.direct_rows ? st->detail_gemm_rows
                                          : st->detail_gemm;
  if (job.stream)
    g_api->record_usage_detail(ctx, (d + " streamed-Y").c_str());
  else
    g_api->record_usage_detail(ctx, d.c_str());
  return OLC_OK;
}

const olc_kernel_vtable kConv = {OLC_ABI_VERSION, 0, "olc_matmul::Conv", guarded_create<conv_create>,
                                 guarded_run<conv_run>, conv_destroy};
const olc_kernel_vtable kFusedConv = {OLC_ABI_VERSION, 0, "olc_matmul::FusedConv", guarded_create<fused_conv_create>,
                                      guarded_run<conv_run>, conv_destroy};

// ------------------------------------------------------------ ConvTranspose

// Y[n, g] = col2im(W[g]^T X[n, g]): the GEMM's rows are (output channel,
// kernel offset) pairs, its K the group's input channels and its columns
// input positions, read in place from X (float32) like a pointwise Conv.
// The product of a tile of input positions is scattered-added into the
// output. Tasks own blocks of output channels (no two tasks write the
// same output), so they need no reduction.
//
// When the kernel tiles the output exactly (kernel == stride, no dilation,
// padding or output_padding along every axis: the U-Net's 2x2 stride-2
// upsampling) every output is one product element: the scatter stores
// product + bias (no bias fill, no read-modify-write; a kernel width of 2
// interleaves two product rows), and on several threads tasks also split
// the input positions, since no two positions write the same output.

struct TGeom {
  int nsp;
  int64_t N, C, Cout, G, Cg, Mg;
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
  int64_t in_sp, out_sp, ksz;
  bool tiles;  // every output is written by exactly one (position, kernel offset)
};

// W [C, Mg, k...] per group as the A operand [Mg * ksz, Cg] in MR-row
// strips, by blocks of mb output channels (a block's rows start a strip,
// so a task's rows never share a strip with another task's).
struct TLayout {
  int64_t mb, nblk;
  std::vector<int64_t> off;  // per block: float offset inside a group
  int64_t group_floats;
};

TLayout t_layout(int64_t Mg, int64_t ksz, int64_t Cg, int MR) {
  TLayout l;
  l.mb = std::max<int64_t>(1, (8 * MR + ksz - 1) / ksz);
  l.mb = std::min<int64_t>(l.mb, std::max<int64_t>(1, Mg));
  l.nblk = (Mg + l.mb - 1) / l.mb;
  int64_t o = 0;
  for (int64_t b = 0; b < l.nblk; ++b) {
    l.off.push_back(o);
    const int64_t rows = (std::min(Mg, (b + 1) * l.mb) - b * l.mb) * ksz;
    o += (rows + MR - 1) / MR * MR * Cg;
  }
  l.group_floats = o;
  return l;
}

void t_pack(int32_t dt, const void* W, int64_t G, int64_t Mg, int64_t ksz, int64_t Cg, int MR, const TLayout& l,
            float* dst) {
  const int64_t R = Mg * ksz;  // W[g*Cg + c] holds R values: row r of A
  for (int64_t g = 0; g < G; ++g)
    for (int64_t b = 0; b < l.nblk; ++b) {
      const int64_t r0 = b * l.mb * ksz, r1 = std::min(Mg, (b + 1) * l.mb) * ksz;
      float* o = dst + g * l.group_floats + l.off[b];
      for (int64_t s0 = r0; s0 < r1; s0 += MR, o += MR * Cg)
        for (int i = 0; i < MR; ++i) {
          const int64_t r = s0 + i;
          for (int64_t c = 0; c < Cg; ++c)
            o[c * MR + i] = r < r1 ? elem(dt, W, (g * Cg + c) * R + r) : 0.0f;
        }
    }
}

struct ConvTState : ConvAttrs {
  KernelSet ks;
  const ConvKernels* ck = nullptr;
  const olc_tuning_param* t_kc = nullptr;
  const olc_tuning_param* t_nc = nullptr;
  const olc_tuning_param* t_par = nullptr;
  std::shared_ptr<PackedB> wpack;
  TLayout layout;
  const void* wdata = nullptr;
  std::vector<int64_t> wshape;
  std::string detail;
};

bool t_resolve(const ConvTState* st, const olc_tensor& x, const olc_tensor& w, const olc_tensor* b, TGeom* g,
               char* err, size_t esize) {
  const int nsp = check_ranks(st, x, w, err, esize);
  if (nsp == 0 || !check_length(st->out_pad, "output_padding", nsp, nsp, err, esize)) return false;
  g->nsp = nsp;
  if (!st->out_shape.empty() && st->out_shape.size() != size_t(nsp + 2) &&
      !check_length(st->out_shape, "output_shape", nsp, nsp, err, esize))
    return false;
  g->N = x.shape[0];
  g->C = x.shape[1];
  g->G = st->group;
  if (g->C % g->G != 0) {
    std::snprintf(err, esize, "input channels %lld are not divisible by group %lld", (long long)g->C,
                  (long long)g->G);
    return false;
  }
  if (w.shape[0] != g->C) {
    std::snprintf(err, esize, "weight W %s must have %lld rows (the input channels of X %s)", shape_str(w).c_str(),
                  (long long)g->C, shape_str(x).c_str());
    return false;
  }
  g->Cg = g->C / g->G;
  g->Mg = w.shape[1];
  g->Cout = g->Mg * g->G;
  if (b && (b->ndim != 1 || b->shape[0] != g->Cout)) {
    std::snprintf(err, esize, "bias B %s must be 1-D with %lld values (the output channels)", shape_str(*b).c_str(),
                  (long long)g->Cout);
    return false;
  }
  const int off = 3 - nsp;
  for (int i = 0; i < 3; ++i) {
    g->in[i] = g->k[i] = g->s[i] = g->d[i] = g->out[i] = 1;
    g->pb[i] = 0;
  }
  g->in_sp = g->out_sp = g->ksz = 1;
  for (int i = 0; i < nsp; ++i) {
    const int j = off + i;
    const int64_t in = x.shape[2 + i], k = w.shape[2 + i];
    if (!st->kshape.empty() && st->kshape[i] != k) {
      std::snprintf(err, esize, "attribute kernel_shape %s differs from the spatial shape of W %s",
                    fmt_ints(st->kshape).c_str(), shape_str(w).c_str());
      return false;
    }
    const int64_t s = st->strides.empty() ? 1 : st->strides[i];
    const int64_t d = st->dil.empty() ? 1 : st->dil[i];
    const int64_t op = st->out_pad.empty() ? 0 : st->out_pad[i];
    const int64_t full = s * (in - 1) + op + (k - 1) * d + 1;  // the unpadded output extent
    int64_t pb = 0, out;
    const bool same = st->autopad == AutoPad::kSameUpper || st->autopad == AutoPad::kSameLower;
    if (!st->out_shape.empty() || same) {
      // The pads follow from the output size: the odd unit at the end
      // for SAME_UPPER, at the start otherwise (floor division, so a
      // negative total extends the end).
      out = !st->out_shape.empty() ? st->out_shape[st->out_shape.size() - nsp + i] : in * s;
      const int64_t total = full - out;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pb = st->autopad == AutoPad::kSameUpper ? half : total - half;
      // An output_shape past the full extent without auto_pad: the extra
      // positions (bias only) all at the end, as onnx.reference and
      // onnxruntime give them; the formula above would put half of them
      // before the first (a total of -2: one at each end).
      if (!same && total < 0) pb = 0;
    } else {
      int64_t pe = 0;
      if (st->autopad == AutoPad::kNotSet && !st->pads.empty()) {
        pb = st->pads[i];
        pe = st->pads[nsp + i];
      }
      out = full - pb - pe;
    }
    if (out <= 0) {
      std::snprintf(err, esize, "output size %lld along spatial axis %d is not positive (pads larger than the output)",
                    (long long)out, i);
      return false;
    }
    g->in[j] = in;
    g->k[j] = k;
    g->s[j] = s;
    g->d[j] = d;
    g->pb[j] = pb;
    g->out[j] = out;
    g->in_sp *= in;
    g->out_sp *= out;
    g->ksz *= k;
  }
  g->tiles = true;
  for (int j = 0; j < 3; ++j)
    g->tiles = g->tiles && g->k[j] == g->s[j] && (g->d[j] == 1 || g->k[j] == 1) && g->pb[j] == 0 &&
               g->out[j] == g->in[j] * g->s[j];
  return true;
}

struct TJob {
  const TGeom* g;
  int32_t dt;
  const IsaKernels* isa;
  const ConvKernels* ck;
  const float* wp;
  const TLayout* l;
  const void* x;
  void* y;
  const float* bias;
  int64_t KC, NC;
  int64_t ncol, colw;  // tasks per block along the input positions, and their width
  std::atomic<bool>* failed;
};

thread_local FloatScratch t_tcol, t_tb, t_tacc;

// Adds the product tile C[r, j] (rows: (m, kd, kh, kw) of the block; columns:
// input positions s0 + j) into the block's output planes Y[m]. With stride
// 2 and no dilation along W, rows kw and kw + 1 land on neighbouring
// outputs: the pair goes as one interleaved vector add (the scalar stride-2
// scatter was over half of a 4x4 stride-2 upsampling's time).
void col2im_add(const ConvKernels* ck, const TGeom& g, const float* C, int64_t ldc, int64_t rows, int64_t s0,
                int64_t nc, float* Y) {
  const int64_t IH = g.in[1], IW = g.in[2];
  const int64_t KH = g.k[1], KW = g.k[2];
  const int64_t sw = g.s[2], OW = g.out[2];
  const bool pairs = sw == 2 && g.d[2] == 1;
  // Positions q in [0, run) with 0 <= ow0 + q * sw < OW.
  auto valid = [&](int64_t ow0, int64_t run, int64_t* lo, int64_t* hi) {
    int64_t qlo = ow0 < 0 ? (-ow0 + sw - 1) / sw : 0;
    int64_t qhi = ow0 > OW - 1 ? 0 : (OW - 1 - ow0) / sw + 1;
    *lo = std::min(qlo, run);
    *hi = std::max(*lo, std::min(qhi, run));
  };
  for (int64_t r = 0; r < rows;) {
    const int64_t m = r / g.ksz, kr = r % g.ksz;
    const int64_t kd = kr / (KH * KW), kh = (kr / KW) % KH, kw = kr % KW;
    const bool pair = pairs && kw + 1 < KW;
    float* y = Y + m * g.out_sp;
    const float* c = C + r * ldc;
    const float* c1 = c + ldc;
    int64_t id = s0 / (IH * IW), ih = (s0 / IW) % IH, iw = s0 % IW;
    for (int64_t j = 0; j < nc;) {
      const int64_t run = std::min(nc - j, IW - iw);
      const int64_t od = id * g.s[0] - g.pb[0] + kd * g.d[0];
      const int64_t oh = ih * g.s[1] - g.pb[1] + kh * g.d[1];
      if (od >= 0 && od < g.out[0] && oh >= 0 && oh < g.out[1]) {
        float* yr = y + (od * g.out[1] + oh) * OW;
        const int64_t ow0 = iw * sw - g.pb[2] + kw * g.d[2];
        // Positions [q0, q1) of product row cr into the outputs from ow.
        auto scatter = [&](int64_t ow, const float* cr, int64_t q0, int64_t q1) {
          for (int64_t q = q0; q < q1; ++q) yr[ow + q * sw] += cr[j + q];
        };
        int64_t qlo, qhi;
        valid(ow0, run, &qlo, &qhi);
        if (!pair) {
          scatter(ow0, c, qlo, qhi);
        } else {
          int64_t blo, bhi;
          valid(ow0 + 1, run, &blo, &bhi);
          // Both rows' outputs in [lo, hi), each row alone at the edges.
          const int64_t lo = std::max(qlo, blo), hi = std::max(lo, std::min(qhi, bhi));
          scatter(ow0, c, qlo, std::min(lo, qhi));
          scatter(ow0, c, std::max(hi, qlo), qhi);
          scatter(ow0 + 1, c1, blo, std::min(lo, bhi));
          scatter(ow0 + 1, c1, std::max(hi, blo), bhi);
          if (hi > lo) ck->add_interleaved(yr + ow0 + lo * sw, c + j + lo, c1 + j + lo, hi - lo);
        }
      }
      j += run;
      iw = 0;
      if (++ih == IH) {
        ih = 0;
        ++id;
      }
    }
    r += pair ? 2 : 1;
  }
}

// The same when the kernel tiles the output (TGeom::tiles): stores
// C[r, j] + bias into the one output it lands on.
template <int KW>
void col2im_store_tiled(const TGeom& g, const float* C, int64_t ldc, int64_t rows, int64_t s0, int64_t nc,
                        float* Y, const float* bias) {
  const int64_t IH = g.in[1], IW = g.in[2];
  const int64_t KH = g.k[1], kw_n = KW > 0 ? KW : g.k[2];
  const int64_t OH = g.out[1], OW = g.out[2];
  for (int64_t r = 0; r < rows; r += kw_n) {
    // Rows r .. r + kw_n: one output channel m and kernel offsets (kd, kh, 0 ..).
    const int64_t m = r / g.ksz, kr = r % g.ksz;
    const int64_t kd = kr / (KH * kw_n), kh = (kr / kw_n) % KH;
    const float b = bias[m];
    float* y = Y + m * g.out_sp;
    const float* c = C + r * ldc;
    int64_t id = s0 / (IH * IW), ih = (s0 / IW) % IH, iw = s0 % IW;
    for (int64_t j = 0; j < nc;) {
      const int64_t run = std::min(nc - j, IW - iw);
      float* yr = y + ((id * g.s[0] + kd) * OH + ih * g.s[1] + kh) * OW + iw * kw_n;
      const float* cj = c + j;
      if constexpr (KW == 2) {
        const float* c1 = cj + ldc;
        for (int64_t q = 0; q < run; ++q) {
          yr[2 * q] = cj[q] + b;
          yr[2 * q + 1] = c1[q] + b;
        }
      } else {
        for (int64_t q = 0; q < run; ++q)
          for (int64_t kw = 0; kw < kw_n; ++kw) yr[q * kw_n + kw] = cj[kw * ldc + q] + b;
      }
      j += run;
      iw = 0;
      if (++ih == IH) {
        ih = 0;
        ++id;
      }
    }
  }
}

void t_range(void* user, int64_t begin, int64_t end) {
  const TJob& job = *static_cast<const TJob*>(user);
  const TGeom& g = *job.g;
  const TLayout& l = *job.l;
  const IsaKernels* isa = job.isa;
  const int MR = isa->mr_f32, NR = isa->nr_f32;
  const bool f32 = job.dt == OLC_DTYPE_FLOAT;
  const size_t es = f32 ? 4 : 2;
  const int64_t nkb = (g.Cg + job.KC - 1) / job.KC;
  const int64_t kstep = (g.Cg + nkb - 1) / nkb;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t cc = t % job.ncol;  // the input positions [cc * colw, ..) of the block
    const int64_t b = (t / job.ncol) % l.nblk;
    const int64_t gi = (t / (job.ncol * l.nblk)) % g.G;
    const int64_t n = t / (job.ncol * l.nblk * g.G);
    const int64_t c_begin = cc * job.colw, c_end = std::min(g.in_sp, c_begin + job.colw);
    const int64_t m0 = b * l.mb, m1 = std::min(g.Mg, m0 + l.mb);
    const int64_t rows = (m1 - m0) * g.ksz;
    const int64_t co0 = gi * g.Mg + m0;
    const char* xg = static_cast<const char*>(job.x) + static_cast<size_t>((n * g.C + gi * g.Cg) * g.in_sp) * es;
    const float* ablk = job.wp + gi * l.group_floats + l.off[b];
    // Tile width: the product tile (rows x nc) stays within 256 KiB.
    const int64_t NC = std::max<int64_t>(NR, std::min<int64_t>(job.NC, (65536 / rows) / NR * NR));
    float* Y;
    if (f32) {
      Y = static_cast<float*>(job.y) + (n * g.Cout + co0) * g.out_sp;
    } else {
      Y = t_tacc.get(static_cast<size_t>((m1 - m0) * g.out_sp));
    }
    float* Ct = t_tcol.get(static_cast<size_t>(rows * ((NC + NR - 1) / NR * NR)));
    float* Bt = t_tb.get(static_cast<size_t>(kstep * ((NC + NR - 1) / NR * NR)));
    if (!Y || !Ct || !Bt) {
      job.failed->store(true);
      return;
    }
    if (!g.tiles) {
      for (int64_t m = 0; m < m1 - m0; ++m) {
        const float v = job.bias ? job.bias[co0 + m] : 0.0f;
        float* y = Y + m * g.out_sp;
        for (int64_t i = 0; i < g.out_sp; ++i) y[i] = v;
      }
    }
    Epi<float> ep{};
    ep.alpha = 1.0f;
    for (int64_t s0 = c_begin; s0 < c_end; s0 += NC) {
      const int64_t nc = std::min(NC, c_end - s0);
      const int64_t ncpad = (nc + NR - 1) / NR * NR;
      for (int64_t k0 = 0; k0 < g.Cg; k0 += kstep) {
        const int64_t kc = std::min(kstep, g.Cg - k0);
        const int flags = (k0 == 0 ? kFirst : 0) | (k0 + kc == g.Cg ? kLast : 0);
        // B: rows k0 .. k0 + kc of X[n, g] (input positions s0 ..): read in
        // place (float32, full panels) or converted into a zero-padded tile.
        const bool direct = f32;
        if (!direct || nc % NR) {
          const int64_t c0 = direct ? nc / NR * NR : 0;
          const int64_t w = nc - c0;
          for (int64_t r = 0; r < kc; ++r) {
            float* o = Bt + r * (direct ? NR : ncpad);
            convert_run(job.dt, xg + static_cast<size_t>((k0 + r) * g.in_sp + s0 + c0) * es, 1, w, o);
            std::memset(o + w, 0, sizeof(float) * ((direct ? NR : ncpad) - w));
          }
        }
        for (int64_t j = 0; j * NR < nc; ++j) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
          const float* bp;
          int64_t ldbp;
          if (direct && nr == NR) {
            bp = reinterpret_cast<const float*>(xg) + k0 * g.in_sp + s0 + j * NR;
            ldbp = g.in_sp;
          } else if (direct) {
            bp = Bt;
            ldbp = NR;
          } else {
            bp = Bt + j * NR;
            ldbp = ncpad;
          }
          for (int64_t r = 0; r < rows; r += MR) {
            const int mr = static_cast<int>(std::min<int64_t>(MR, rows - r));
            isa->uk_f32(kc, ablk + (r / MR) * MR * g.Cg + k0 * MR, bp, ldbp, Ct + r * ncpad + j * NR, ncpad, mr,
                        nr, flags, &ep);
          }
        }
      }
      if (!g.tiles) col2im_add(job.ck, g, Ct, ncpad, rows, s0, nc, Y);
      else if (g.k[2] == 2) col2im_store_tiled<2>(g, Ct, ncpad, rows, s0, nc, Y, job.bias + co0);
      else col2im_store_tiled<0>(g, Ct, ncpad, rows, s0, nc, Y, job.bias + co0);
    }
    if (!f32) {
      const int64_t o = (n * g.Cout + co0) * g.out_sp;
      for (int64_t i = 0; i < (m1 - m0) * g.out_sp; ++i) put(job.dt, job.y, o + i, Y[i]);
    }
  }
}

void* convt_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  auto st = std::make_unique<ConvTState>();
  if (!parse_attrs(node, ConvOp::kTranspose, st.get(), error, esize) ||
      !check_float_inputs(node, ConvOp::kTranspose, st.get(), error, esize))
    return nullptr;
  const int32_t dt = st->dtype;
  st->ks = select_kernels(api);
  st->ck = conv_kernels_for(api->simd_level());
  const char* lib = "olc_matmul";
  st->t_kc = api->tuning_declare_int(lib, "ConvTranspose", st->ks.isa_name, dt, "kc", 256);
  st->t_nc = api->tuning_declare_int(lib, "ConvTranspose", st->ks.isa_name, dt, "nc", 256);
  st->t_par = api->tuning_declare_int(lib, "ConvTranspose", st->ks.isa_name, dt, "parallel_min_macs", 1 << 16);
  std::string pack_note;
  const olc_tensor* cw = node->input_constants ? &node->input_constants[1] : nullptr;
  if (cw && cw->data && cw->dtype == dt && cw->ndim >= 3 && cw->ndim <= 5 && cw->shape[0] % st->group == 0) {
    const int64_t n = olc_element_count(cw);
    if (n > 0) {
      const int MR = st->ks.isa->mr_f32;
      const int64_t Cg = cw->shape[0] / st->group, Mg = cw->shape[1], ksz = n / (cw->shape[0] * Mg);
      st->layout = t_layout(Mg, ksz, Cg, MR);
      st->wpack = make_packed(PackLayout::kF32, static_cast<size_t>(st->group * st->layout.group_floats) * 4);
      if (st->wpack) {
        t_pack(dt, cw->data, st->group, Mg, ksz, Cg, MR, st->layout, static_cast<float*>(st->wpack->data));
        st->wdata = cw->data;
        st->wshape.assign(cw->shape, cw->shape + cw->ndim);
        if (OLC_API_HAS(api, report_prepacked))
          api->report_prepacked(node, st->wpack.get(), static_cast<int64_t>(st->wpack->bytes));
        char buf[96];
        std::snprintf(buf, sizeof buf, " prepacked-W %.1f KiB", st->wpack->bytes / 1024.0);
        pack_note = buf;
      }
    }
  }
  st->detail = std::string(st->ks.isa_name) + " gemm-col2im" + pack_note;
  return st.release();
}

void convt_destroy(void* state) { delete static_cast<ConvTState*>(state); }

int32_t convt_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs,
                  int32_t n_outputs) {
  const ConvTState* st = static_cast<const ConvTState*>(state);
  if (n_inputs < 2 || n_outputs != 1) return fail_run(ctx, "expects 2 or 3 inputs and 1 output");
  const olc_tensor& x = inputs[0];
  const olc_tensor& w = inputs[1];
  const olc_tensor* b = (n_inputs >= 3 && inputs[2].dtype != OLC_DTYPE_UNDEFINED) ? &inputs[2] : nullptr;
  if (!check_input(ctx, st, x, 0) || !check_input(ctx, st, w, 1) || (b && !check_input(ctx, st, *b, 2)))
    return OLC_ERROR;
  TGeom g;
  char err[400];
  if (!t_resolve(st, x, w, b, &g, err, sizeof err)) return fail_run(ctx, "%s", err);
  std::vector<int64_t> oshape(x.ndim);
  oshape[0] = g.N;
  oshape[1] = g.Cout;
  for (int i = 0; i < g.nsp; ++i) oshape[2 + i] = g.out[3 - g.nsp + i];
  void* y = g_api->allocate_output(ctx, 0, st->dtype, x.ndim, oshape.data());
  const int64_t total = g.N * g.Cout * g.out_sp;
  if (!y && total > 0) return OLC_ERROR;
  if (total == 0) return OLC_OK;
  std::vector<float> biasv;
  const float* bias = bias_as_float(st->dtype, b, g.Cout, &biasv);
  if (!bias && g.tiles) {
    biasv.assign(static_cast<size_t>(g.Cout), 0.0f);  // stored as product + 0, as the fill-and-add path does
    bias = biasv.data();
  }
  if (g.Cg == 0 || g.in_sp == 0) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t co = 0; co < g.Cout; ++co)
        for (int64_t i = 0; i < g.out_sp; ++i)
          put(st->dtype, y, (n * g.Cout + co) * g.out_sp + i, bias ? bias[co] : 0.0f);
    g_api->record_usage_detail(ctx, st->detail.c_str());
    return OLC_OK;
  }
  const IsaKernels* isa = st->ks.isa;
  const int MR = isa->mr_f32, NR = isa->nr_f32;
  const bool packed = st->wpack && w.data == st->wdata && w.ndim == static_cast<int32_t>(st->wshape.size()) &&
                      std::equal(st->wshape.begin(), st->wshape.end(), w.shape);
  TLayout lrun;
  const TLayout* l = &st->layout;
  std::unique_ptr<float[]> wrun;
  const float* wp;
  if (packed) {
    wp = static_cast<const float*>(st->wpack->data);
  } else {
    lrun = t_layout(g.Mg, g.ksz, g.Cg, MR);
    l = &lrun;
    wrun.reset(new float[static_cast<size_t>(g.G * lrun.group_floats)]);
    t_pack(st->dtype, w.data, g.G, g.Mg, g.ksz, g.Cg, MR, lrun, wrun.get());
    wp = wrun.get();
  }
  std::atomic<bool> failed{false};
  TJob job{&g, st->dtype, isa, st->ck, wp, l, x.data, y, bias, 0, 0, 1, g.in_sp, &failed};
  job.KC = std::max<int64_t>(16, std::min<int64_t>(4096, g_api->tuning_read_int(st->t_kc)));
  job.NC = std::max<int64_t>(NR, std::min<int64_t>(1 << 16, g_api->tuning_read_int(st->t_nc)) / NR * NR);
  const int64_t macs = g.N * g.G * g.Mg * g.ksz * g.Cg * g.in_sp;
  const int64_t threads =
      macs >= g_api->tuning_read_int(st->t_par) ? std::max<int32_t>(1, g_api->concurrency(ctx)) : 1;
  const int64_t blocks = g.N * g.G * l->nblk;
  if (threads > 1 && g.tiles && st->dtype == OLC_DTYPE_FLOAT) {
    // A few blocks (the U-Net's: 3 to 6) balance poorly over the threads:
    // cut the input positions too, into about 8 tasks per thread of at
    // least two panels each.
    const int64_t want = (8 * threads + blocks - 1) / blocks;
    const int64_t panels = (g.in_sp + NR - 1) / NR;
    const int64_t per = std::max<int64_t>(2, (panels + want - 1) / want);
    job.colw = per * NR;
    job.ncol = (g.in_sp + job.colw - 1) / job.colw;
  }
  const int64_t tasks = blocks * job.ncol;
  if (threads > 1 && tasks > 1) g_api->parallel_for(ctx, tasks, 1, 0, &t_range, &job);
  else t_range(&job, 0, tasks);
  if (failed.load()) return fail_run(ctx, "out of memory for the ConvTranspose work buffers");
  g_api->record_usage_detail(ctx, st->detail.c_str());
  return OLC_OK;
}

const olc_kernel_vtable kConvTranspose = {OLC_ABI_VERSION, 0, "olc_matmul::ConvTranspose",
                                          guarded_create<convt_create>, guarded_run<convt_run>, convt_destroy};

}  // namespace

// The float32 output size from which the implicit GEMM writes it with
// non-temporal stores: no read for ownership of each line, and the lines go
// to memory as they fill instead of evicting the input and panels the rest
// of the product reads; but the next node then reads the output from
// memory, so only outputs too large to stay in the L3 beside their input
// stream: 3/8 of the L3 (12 MiB of 32), 12 MiB where sysfs does not say.
// On a 2-core Zen 4 VM with a 32 MiB L3 shared with other tenants
// (alternating builds, ms): batch-8 3x3 s2 3->32 stem (12 MiB out) 4.15 ->
// 2.5-3.2 on one thread, 2.5-3.4 -> 1.8-1.9 on two; 7x7 s2 3->64 (24 MiB)
// 20.7-23.1 -> 19.9 and 11.8-12.1 -> 10.3-10.9; 1x1 256->64 at 56x56 batch
// 8 (6 MiB) 4 % slower streamed; batch-1 stems (1.5 MiB) the same either
// way. At most 32 MiB of L3 is counted: a VM may report its host's whole
// L3 (480 MiB on a 2-vCPU guest of a large Xeon), of which it holds a small
// share, and there the 180 MiB that 3/8 of it gave kept every batch-8 layer
// off the stream (one thread, ms: 7x7 s2 3->64 stem 14.6 -> 12.1, 1x1
// 16->96 at 112x112 8.5 -> 3.5; two threads 7.9 -> 6.4 and 3.1 -> 1.8).
int64_t conv_stream_min_bytes(const CacheInfo& c) {
  if (c.l3 <= 0) return int64_t(12) << 20;
  return std::max<int64_t>(int64_t(4) << 20, std::min<int64_t>(c.l3, int64_t(32) << 20) / 8 * 3);
}

// A 1x1 Conv of a 1x1 input is a GEMV, bound by reading its weights: they
// are split between the threads (a share of the output channels each) from
// 3/4 of the L2 on, where one core's L2 no longer holds them and each
// thread's half does. Two threads against one, same process alternating
// (AVX-512, 2 MiB L2), weights: 1 MiB 8.3 -> 9.3 us (the hand-off costs
// more than the half saves), 1.5 MiB 15.5 -> 11.0, 2 MiB 33.5 -> 12.5,
// 2.5 MiB (PP-LCNet's 512 -> 1280 head) 64 -> 15, 8 MiB 296 -> 144.
int64_t conv_gemv_split_min_bytes(const CacheInfo& c) { return l2_three_quarters(c); }

void set_conv_api(const olc_core_api* api) { g_api = api; }
const olc_kernel_vtable* conv_vtable() { return &kConv; }
const olc_kernel_vtable* fused_conv_vtable() { return &kFusedConv; }
const olc_kernel_vtable* conv_transpose_vtable() { return &kConvTranspose; }

}  // namespace olc_mm
