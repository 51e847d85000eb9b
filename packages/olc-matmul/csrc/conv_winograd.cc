// Winograd F(2x2, 3x3) for 3x3 convolutions at stride 1 without dilation
// (conv_common.h): 16 products of the transformed weights U = G g G^T
// (per output channel and input channel, packed at create() into the
// microkernel's MR-row strips, one set per transform position xi) by the
// transformed 4x4 input tiles V = B^T d B (built per block of tiles as the
// GEMM's B panels), summed over the input channels by the packed float32
// microkernel, then A^T M A gives each 2x2 output tile. 16 multiply-adds
// per 4 outputs and input channel instead of 36: 2.25 times fewer. The
// transforms (conv_kernels.inc) work on kL tiles of a tile row at once,
// from the padded input split into even and odd columns (PadLayout with
// sw = 2), so a tile row's patches are consecutive values. The products
// of one xi prefetch the next xi's weights (16/9 of the plain weights'
// bytes, from L3 or memory in a model): a slice per microkernel call.
// Portable code.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <vector>

#include "adapter_util.h"
#include "conv_common.h"
#include "scratch.h"

namespace olc_mm {
namespace conv {

namespace {

thread_local FloatScratch t_v, t_m, t_pad;  // t_pad: a task's padded rows, or the transposed product's copy

// The stride of the 16 matrices of V and of M (xi apart): an odd number of
// cache lines, so that the 16 lines a transform writes or reads per channel
// fall into 16 different L1 sets (at a multiple of 4 KiB, e.g. 64 channels
// x 32 tiles, all 16 share one set of 12 ways and evict each other).
int64_t xi_stride(int64_t floats) {
  int64_t lines = (floats + 15) / 16;
  if (lines % 2 == 0) ++lines;
  return lines * 16;
}

struct Job {
  const WinoRun* r;
  // Transposed: shares of the U^T panels, panels per share; the (group,
  // block) being run; its V shared by the shares (vshared; NULL: each
  // share transforms the block's input itself), channels per input task.
  int64_t nshare, ppt, cur_g, cur_b, cpt;
  float* vshared;
  const Geom* g;
  PadLayout l;
  float* pad;  // transposed: the chunk's padded images (img_stride apart)
  int64_t n0, img_stride;
  int64_t TH, TW, T;  // tiles per image
  int64_t nt, nb, nblk;  // tiles of the chunk's images, tiles per block, blocks per group
  int64_t npan;          // normal product: panels of the chunk's tiles, shared out evenly by the blocks
  std::atomic<bool>* failed;
};

// The padded rows [*r0, *r1) that tiles [t0, t1) read, when they lie in
// one image (tile rows tha .. thb read padded rows 2 tha .. 2 thb + 3);
// false, and every row, when they span images.
bool tile_rows(const Job& job, int64_t t0, int64_t t1, int64_t* r0, int64_t* r1) {
  *r0 = *r1 = 0;
  if (t0 / job.T != (t1 - 1) / job.T) return false;
  *r0 = 2 * ((t0 % job.T) / job.TW);
  *r1 = std::min(job.l.Hp, 2 * (((t1 - 1) % job.T) / job.TW) + 4);
  return true;
}

// The padded input of tiles [t0, t1), channels [c0, c1): images ia .. ib
// of the chunk (ia = t0 / T) into dst (images img_stride apart, channel c
// at (c - c0) l.cs), only the padded rows the tiles read when they lie in
// one image; with own_rows, l holds those rows only (dst starts at the
// first). Returns ia.
int64_t pad_tiles(const Job& job, const PadLayout& l, int64_t t0, int64_t t1, int64_t c0, int64_t c1, float* dst,
                  int64_t img_stride, bool own_rows) {
  const Geom& g = *job.g;
  const int64_t ia = t0 / job.T, ib = (t1 - 1) / job.T;
  int64_t r0, r1;
  tile_rows(job, t0, t1, &r0, &r1);
  for (int64_t i = ia; i <= ib; ++i) {
    PadCopy pc = pad_copy_of(g, l, job.r->x + ((job.n0 + i) * g.C + c0) * g.in_sp, OLC_DTYPE_FLOAT, c1 - c0,
                             dst + (i - ia) * img_stride, r0, r1);
    if (own_rows) pc.dst_r0 = r0;
    job.r->ck->pad_copy(&pc);
  }
  return ia;
}

// The normal product: a task is (group, block of tiles), from its own
// padded copy of the rows its tiles read (no serial copy before the
// tasks, no barrier between them).
void range(void* user, int64_t begin, int64_t end) {
  const Job& job = *static_cast<const Job*>(user);
  const WinoRun& r = *job.r;
  const Geom& g = *job.g;
  const IsaKernels* isa = r.isa;
  const int MR = isa->mr_f32, NR = isa->nr_f32;
  const int64_t nstrips = (g.Mg + MR - 1) / MR;
  const int64_t nkb = (g.Cg + r.KC - 1) / r.KC;
  const int64_t kstep = (g.Cg + nkb - 1) / nkb;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t bi = t % job.nblk, gi = t / job.nblk;
    const int64_t t0 = bi * job.npan / job.nblk * NR, t1 = std::min(job.nt, (bi + 1) * job.npan / job.nblk * NR);
    const int64_t npan = (t1 - t0 + NR - 1) / NR, ld = npan * NR;
    // Tiles of one image: their padded rows in a layout of those rows only
    // (laid out like the whole image, the rows of each channel lay a
    // padded plane apart and every block wrote fresh lines).
    int64_t r0, r1;
    const bool own_rows = tile_rows(job, t0, t1, &r0, &r1);
    const PadLayout lt = own_rows ? rows_layout(job.l, r0, r1) : job.l;
    const int64_t nimg = (t1 - 1) / job.T - t0 / job.T + 1, pstride = g.Cg * lt.cs;
    const int64_t xsv = xi_stride(g.Cg * ld), xsm = xi_stride(g.Mg * ld);
    float* V = t_v.get(static_cast<size_t>(16 * xsv));
    float* M = t_m.get(static_cast<size_t>(16 * xsm));
    float* P = t_pad.get(static_cast<size_t>(nimg * pstride));
    if (!V || !M || !P) {
      job.failed->store(true);
      return;
    }
    const int64_t ia = pad_tiles(job, lt, t0, t1, gi * g.Cg, (gi + 1) * g.Cg, P, pstride, own_rows);
    WinoIn in;
    in.src = P;
    in.l = lt;
    in.row0 = r0;
    in.img_stride = pstride;
    in.nch = g.Cg;
    in.ld_ch = g.Cg;
    in.T = job.T;
    in.TW = job.TW;
    in.t0 = t0 - ia * job.T;  // tile numbers from P's first image
    in.t1 = t1 - ia * job.T;
    in.xi_stride = xsv;
    in.NR = NR;
    in.dst = V;
    r.ck->wino_input(&in);
    Epi<float> ep{};
    ep.alpha = 1.0f;
    ep.beta = 1.0f;
    const int64_t ublock = nstrips * g.Cg * MR;  // floats of U per xi and group
    for (int xi = 0; xi < 16; ++xi) {
      const float* U = r.wt + (static_cast<int64_t>(xi) * g.G + gi) * ublock;
      const float* Vx = V + xi * xsv;
      float* Mx = M + xi * xsm;
      PrefetchSlices next(xi + 1 < 16 ? U + g.G * ublock : nullptr, ublock * sizeof(float), nkb * npan * nstrips);
      for (int64_t k0 = 0; k0 < g.Cg; k0 += kstep) {
        const int64_t kc = std::min(kstep, g.Cg - k0);
        const int flags = (k0 == 0 ? kFirst : 0) | (k0 + kc == g.Cg ? kLast : 0);
        for (int64_t j = 0; j < npan; ++j) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, t1 - t0 - j * NR));
          const float* bp = Vx + (j * g.Cg + k0) * NR;
          for (int64_t m = 0; m < g.Mg; m += MR) {
            const int mr = static_cast<int>(std::min<int64_t>(MR, g.Mg - m));
            int64_t pf_lines;
            const char* pf = next.take(kc, &pf_lines);
            isa->ukpf_f32(kc, U + ((m / MR) * g.Cg + k0) * MR, bp, NR, Mx + m * ld + j * NR, ld, mr, nr, flags, &ep,
                          pf, pf_lines);
          }
        }
      }
    }
    WinoOut out;
    out.m = M;
    out.ldm = ld;
    out.xi_stride = xsm;
    out.nch = g.Mg;
    out.T = job.T;
    out.TW = job.TW;
    out.t0 = t0;
    out.t1 = t1;
    out.OH = g.out[1];
    out.OW = g.out[2];
    out.bias = r.bias ? r.bias + gi * g.Mg : nullptr;
    out.act = r.act;
    out.y_img_stride = g.Cout * g.out_sp;
    out.y = r.y + (job.n0 * g.Cout + gi * g.Mg) * g.out_sp;
    out.r = r.res ? r.res + (job.n0 * g.Cout + gi * g.Mg) * g.out_sp : nullptr;
    r.ck->wino_output(&out);
  }
}

// The transposed product (few tiles): M^T[xi] = V^T[xi] U^T[xi], the
// tiles as MR-row strips, the output channels as NR-column panels of U^T.
// Per (group, block of tiles): the input transform, then the products and
// outputs by shares of the panels. On two threads each share transforms
// the whole input itself: reading the half of V the other core wrote costs
// more than transforming it again (3x3 128 channels at 8x8: 59 -> 49 us on
// two threads). With more shares the transform runs first, by channel
// ranges, into one V that they all read.

// Channels [c0, c1) of group gi, block bi: their padded rows into pad (the
// group's channel 0 at pad, channel c at c cs, images pstride apart), then
// their transform into the block's strips V.
void transform_channels(const Job& job, int64_t gi, int64_t bi, int64_t c0, int64_t c1, float* pad, int64_t pstride,
                        float* V) {
  const Geom& g = *job.g;
  const int MR = job.r->isa->mr_f32;
  const int64_t t0 = bi * job.nb, t1 = std::min(job.nt, t0 + job.nb);
  const int64_t rows = (t1 - t0 + MR - 1) / MR * MR;
  const int64_t cg0 = gi * g.Cg;
  const int64_t ia = pad_tiles(job, job.l, t0, t1, cg0 + c0, cg0 + c1, pad + c0 * job.l.cs, pstride, false);
  WinoIn in;
  in.src = pad + c0 * job.l.cs;
  in.l = job.l;
  in.img_stride = pstride;
  in.nch = c1 - c0;
  in.ld_ch = g.Cg;
  in.T = job.T;
  in.TW = job.TW;
  in.t0 = t0 - ia * job.T;
  in.t1 = t1 - ia * job.T;
  in.xi_stride = xi_stride(g.Cg * rows);
  in.NR = MR;  // strips of MR tiles
  in.dst = V + c0 * MR;
  job.r->ck->wino_input(&in);
}

void range_tin(void* user, int64_t begin, int64_t end) {
  const Job& job = *static_cast<const Job*>(user);
  const int64_t Cg = job.g->Cg;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t c0 = t * job.cpt, c1 = std::min(Cg, c0 + job.cpt);
    if (c0 < c1)
      transform_channels(job, job.cur_g, job.cur_b, c0, c1, job.pad + job.cur_g * Cg * job.l.cs, job.img_stride,
                         job.vshared);
  }
}

void range_t(void* user, int64_t begin, int64_t end) {
  const Job& job = *static_cast<const Job*>(user);
  const WinoRun& r = *job.r;
  const Geom& g = *job.g;
  const IsaKernels* isa = r.isa;
  const int MR = isa->mr_f32, NR = isa->nr_f32;
  const int64_t npg = (g.Mg + NR - 1) / NR;
  const int64_t nkb = (g.Cg + r.KC - 1) / r.KC;
  const int64_t kstep = (g.Cg + nkb - 1) / nkb;
  const float* V = job.vshared;
  for (int64_t t = begin; t < end; ++t) {
    // Tasks: shares of the current (group, block) with a shared V; else
    // (share, group, block), the share slowest (a thread keeps its panels
    // of U^T across the blocks).
    const int64_t gb = job.vshared ? 0 : t % (g.G * job.nblk), share = job.vshared ? t : t / (g.G * job.nblk);
    const int64_t gi = job.vshared ? job.cur_g : gb / job.nblk, bi = job.vshared ? job.cur_b : gb % job.nblk;
    const int64_t t0 = bi * job.nb, t1 = std::min(job.nt, t0 + job.nb);
    const int64_t nstrips = (t1 - t0 + MR - 1) / MR, rows = nstrips * MR;
    const int64_t xsv = xi_stride(g.Cg * rows);
    const int64_t p0 = share * job.ppt, p1 = std::min(npg, p0 + job.ppt);
    if (p0 >= p1) continue;
    const int64_t ldm = (p1 - p0) * NR, xsm = xi_stride(rows * ldm);
    float* M = t_m.get(static_cast<size_t>(16 * xsm));
    if (!M) {
      job.failed->store(true);
      return;
    }
    if (!job.vshared) {
      // This share's own V, from its own copy of the group's padded rows.
      const int64_t pstride = g.Cg * job.l.cs, nimg = (t1 - 1) / job.T - t0 / job.T + 1;
      float* P = t_pad.get(static_cast<size_t>(nimg * pstride));
      float* Vo = t_v.get(static_cast<size_t>(16 * xsv));
      if (!P || !Vo) {
        job.failed->store(true);
        return;
      }
      transform_channels(job, gi, bi, 0, g.Cg, P, pstride, Vo);
      V = Vo;
    }
    Epi<float> ep{};
    ep.alpha = 1.0f;
    ep.beta = 1.0f;
    const int64_t ublock = npg * g.Cg * NR;  // floats of U^T per xi and group
    for (int xi = 0; xi < 16; ++xi) {
      const float* Ux = r.wt_t + (static_cast<int64_t>(xi) * g.G + gi) * ublock;
      const float* Vx = V + xi * xsv;
      float* Mx = M + xi * xsm;
      // This share's panels of the next xi.
      PrefetchSlices next(xi + 1 < 16 ? Ux + g.G * ublock + p0 * g.Cg * NR : nullptr,
                          (p1 - p0) * g.Cg * NR * sizeof(float), nkb * (p1 - p0) * nstrips);
      for (int64_t k0 = 0; k0 < g.Cg; k0 += kstep) {
        const int64_t kc = std::min(kstep, g.Cg - k0);
        const int flags = (k0 == 0 ? kFirst : 0) | (k0 + kc == g.Cg ? kLast : 0);
        for (int64_t j = p0; j < p1; ++j) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, g.Mg - j * NR));
          const float* bp = Ux + (j * g.Cg + k0) * NR;
          for (int64_t si = 0; si < nstrips; ++si) {
            const int mr = static_cast<int>(std::min<int64_t>(MR, t1 - t0 - si * MR));
            int64_t pf_lines;
            const char* pf = next.take(kc, &pf_lines);
            isa->ukpf_f32(kc, Vx + (si * g.Cg + k0) * MR, bp, NR, Mx + si * MR * ldm + (j - p0) * NR, ldm, mr, nr,
                          flags, &ep, pf, pf_lines);
          }
        }
      }
    }
    const int64_t c0 = p0 * NR, c1 = std::min(g.Mg, p1 * NR);
    WinoOut out;
    out.m = M;
    out.ldm = ldm;
    out.xi_stride = xsm;
    out.nch = c1 - c0;
    out.T = job.T;
    out.TW = job.TW;
    out.t0 = t0;
    out.t1 = t1;
    out.OH = g.out[1];
    out.OW = g.out[2];
    out.y_img_stride = g.Cout * g.out_sp;
    out.bias = r.bias ? r.bias + gi * g.Mg + c0 : nullptr;
    out.act = r.act;
    out.y = r.y + (job.n0 * g.Cout + gi * g.Mg + c0) * g.out_sp;
    out.r = r.res ? r.res + (job.n0 * g.Cout + gi * g.Mg + c0) * g.out_sp : nullptr;
    r.ck->wino_output_t(&out);
  }
}

}  // namespace

bool wino_applies(const Geom& g) {
  return g.nsp == 2 && g.k[1] == 3 && g.k[2] == 3 && g.s[1] == 1 && g.s[2] == 1 && g.d[1] == 1 && g.d[2] == 1 &&
         g.Cg >= 8 && g.Mg >= 8;
}

size_t wino_weight_floats(int64_t G, int64_t Mg, int64_t Cg, int MR) {
  return static_cast<size_t>(16 * G * ((Mg + MR - 1) / MR) * Cg * MR);
}

// U = G g G^T per (output channel, input channel), in float64 from the
// float32 taps, rounded once; G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
void wino_pack_weights(const float* W, int64_t G, int64_t Mg, int64_t Cg, int MR, float* dst) {
  const int64_t ns = (Mg + MR - 1) / MR;
  const double Gm[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  std::fill(dst, dst + wino_weight_floats(G, Mg, Cg, MR), 0.0f);
  for (int64_t gi = 0; gi < G; ++gi)
    for (int64_t m = 0; m < Mg; ++m)
      for (int64_t c = 0; c < Cg; ++c) {
        const float* k = W + ((gi * Mg + m) * Cg + c) * 9;
        double t[4][3];  // G g
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 3; ++j) t[i][j] = Gm[i][0] * k[j] + Gm[i][1] * k[3 + j] + Gm[i][2] * k[6 + j];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) {
            const double u = t[i][0] * Gm[j][0] + t[i][1] * Gm[j][1] + t[i][2] * Gm[j][2];  // (G g) G^T
            const int64_t xi = 4 * i + j;
            dst[(((xi * G + gi) * ns + m / MR) * Cg + c) * MR + m % MR] = static_cast<float>(u);
          }
      }
}

// U^T: per xi and group, ceil(Mg / NR) panels of Cg x NR (the output
// channels as columns), zeros past Mg.
size_t wino_weight_t_floats(int64_t G, int64_t Mg, int64_t Cg, int NR) {
  return static_cast<size_t>(16 * G * ((Mg + NR - 1) / NR) * Cg * NR);
}

void wino_pack_weights_t(const float* W, int64_t G, int64_t Mg, int64_t Cg, int NR, float* dst) {
  const int64_t np = (Mg + NR - 1) / NR;
  const double Gm[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  std::fill(dst, dst + wino_weight_t_floats(G, Mg, Cg, NR), 0.0f);
  for (int64_t gi = 0; gi < G; ++gi)
    for (int64_t m = 0; m < Mg; ++m)
      for (int64_t c = 0; c < Cg; ++c) {
        const float* k = W + ((gi * Mg + m) * Cg + c) * 9;
        double t[4][3];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 3; ++j) t[i][j] = Gm[i][0] * k[j] + Gm[i][1] * k[3 + j] + Gm[i][2] * k[6 + j];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) {
            const double u = t[i][0] * Gm[j][0] + t[i][1] * Gm[j][1] + t[i][2] * Gm[j][2];
            const int64_t xi = 4 * i + j;
            dst[(((xi * G + gi) * np + m / NR) * Cg + c) * NR + m % NR] = static_cast<float>(u);
          }
      }
}

bool wino_run(const olc_core_api* api, olc_context* ctx, const WinoRun& r) {
  const Geom& g = *r.g;
  const int NR = r.isa->nr_f32;
  Job job{};
  job.r = &r;
  job.g = &g;
  job.TH = (g.out[1] + 1) / 2;
  job.TW = (g.out[2] + 1) / 2;
  job.T = job.TH * job.TW;
  // Padded input, even and odd columns apart, covering every tile's 4x4
  // patch (zeros past the input and its end pads).
  PadLayout& l = job.l;
  l.Dp = 1;
  l.Hp = std::max(g.in[1] + g.pb[1] + g.pe[1], 2 * job.TH + 2);
  l.sw = 2;
  l.Wq = std::max((g.in[2] + g.pb[2] + g.pe[2] + 1) / 2, job.TW + 1);
  l.cs = l.Hp * 2 * l.Wq;
  job.img_stride = g.C * l.cs;
  std::atomic<bool> failed{false};
  job.failed = &failed;
  // Chunks of images whose padded copy is at most 4 MiB (the transposed
  // product's shared copy; the normal product's tasks copy their own rows).
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(g.N, (int64_t(4) << 20) / job.img_stride));
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nimg = std::min(chunk, g.N - n0);
    job.n0 = n0;
    // Blocks of the chunk's tiles (sized below), enough to share among
    // the threads where the tiles allow.
    job.nt = nimg * job.T;
    // Tiles per block: whole panels (strips when transposed). The normal
    // product's V and M about 256 KiB each (L2 with the input and U; 1
    // MiB blocks went through L3, and four blocks of 784 tiles balanced
    // two threads poorly: 3x3 64 channels at 56x56, 523 -> 427 us on two
    // threads); the transposed product's about 1 MiB (its blocks each
    // read all of U^T).
    const int W = r.transposed ? r.isa->mr_f32 : NR;
    const int64_t vfloats = int64_t(1) << (r.transposed ? 18 : 16);
    const int64_t cap = std::max<int64_t>(W, vfloats / (16 * std::max(g.Cg, g.Mg)) / W * W);
    job.nb = std::min(cap, (job.nt + W - 1) / W * W);
    if (r.transposed) {
      // The U^T panels in one share per thread.
      job.nblk = (job.nt + job.nb - 1) / job.nb;
      const int64_t npg = (g.Mg + NR - 1) / NR;
      job.nshare = std::min<int64_t>(npg, std::max<int64_t>(1, r.threads));
      job.ppt = (npg + job.nshare - 1) / job.nshare;
      job.nshare = (npg + job.ppt - 1) / job.ppt;
      if (job.nshare <= 2) {
        // Each share transforms its blocks' input itself: one parallel
        // step over (share, group, block).
        job.vshared = nullptr;
        const int64_t tasks = job.nshare * g.G * job.nblk;
        if (r.threads > 1 && tasks > 1) api->parallel_for(ctx, tasks, 1, 0, &range_t, &job);
        else range_t(&job, 0, tasks);
        if (failed.load()) return false;
        continue;
      }
      // Per (group, block): the input transform in channel ranges into
      // one V, then the shares.
      const int64_t cin = std::min<int64_t>(g.Cg, std::max<int64_t>(1, 2 * r.threads));
      job.cpt = (g.Cg + cin - 1) / cin;
      const int MR = r.isa->mr_f32;
      job.pad = t_pad.get(static_cast<size_t>(nimg * job.img_stride));
      float* V = t_v.get(static_cast<size_t>(16 * xi_stride(g.Cg * ((job.nb + MR - 1) / MR * MR))));
      if (!V || !job.pad) return false;
      job.vshared = V;
      for (int64_t gi = 0; gi < g.G; ++gi)
        for (int64_t bi = 0; bi < job.nblk; ++bi) {
          job.cur_g = gi;
          job.cur_b = bi;
          const int64_t itasks = (g.Cg + job.cpt - 1) / job.cpt;
          if (r.threads > 1 && itasks > 1) api->parallel_for(ctx, itasks, 1, 0, &range_tin, &job);
          else range_tin(&job, 0, itasks);
          if (r.threads > 1 && job.nshare > 1) api->parallel_for(ctx, job.nshare, 1, 0, &range_t, &job);
          else range_t(&job, 0, job.nshare);
          if (failed.load()) return false;
        }
      continue;
    }
    // Blocks of whole panels, their count a multiple of the threads when
    // few, the panels shared out evenly (sizes differ by at most one: 784
    // tiles in equal blocks of 224 left a last one of 112, and one thread
    // 448 tiles to the other's 336).
    job.npan = (job.nt + NR - 1) / NR;
    int64_t nblk = (job.nt + job.nb - 1) / job.nb;
    if (r.threads > 1 && g.G * nblk < 4 * r.threads)
      while ((g.G * nblk) % r.threads && nblk < job.npan) ++nblk;
    job.nblk = nblk;
    const int64_t tasks = g.G * job.nblk;
    if (r.threads > 1 && tasks > 1) api->parallel_for(ctx, tasks, 1, 0, &range, &job);
    else range(&job, 0, tasks);
    if (failed.load()) return false;
  }
  return true;
}

}  // namespace conv
}  // namespace olc_mm
