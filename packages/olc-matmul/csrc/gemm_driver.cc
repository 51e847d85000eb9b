// Portable GEMM driver: algorithm choice, blocking, packing and the 2-D
// partition of the output over the session executor. Compiled without ISA
// flags; the per-level work happens in the microkernels it calls.
#include "gemm_driver.h"
#include "adapter_util.h"
#include "scratch.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace olc_mm {

namespace {

std::atomic<int64_t> g_packed_bytes{0};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct F16 { uint16_t v; };
struct BF16 { uint16_t v; };

inline float to_c(float x) { return x; }
inline double to_c(double x) { return x; }
inline float to_c(F16 x) { return f16_to_f32(x.v); }
inline float to_c(BF16 x) { return bf16_to_f32(x.v); }
inline void from_c(float x, float* o) { *o = x; }
inline void from_c(double x, double* o) { *o = x; }
inline void from_c(float x, F16* o) { o->v = f32_to_f16(x); }
inline void from_c(float x, BF16* o) { o->v = f32_to_bf16(x); }

template <typename S> struct ComputeOf { using type = float; };
template <> struct ComputeOf<double> { using type = double; };

thread_local Scratch t_bpack, t_apack, t_cwork;

template <typename T> const UKernel<T>& uk_of(const IsaKernels* k);
template <> const UKernel<float>& uk_of<float>(const IsaKernels* k) { return k->uk_f32; }
template <> const UKernel<double>& uk_of<double>(const IsaKernels* k) { return k->uk_f64; }
template <typename T> const UKernelDA<T>& ukda_of(const IsaKernels* k);
template <> const UKernelDA<float>& ukda_of<float>(const IsaKernels* k) { return k->ukda_f32; }
template <> const UKernelDA<double>& ukda_of<double>(const IsaKernels* k) { return k->ukda_f64; }
template <typename T> int mr_of(const IsaKernels* k) { return sizeof(T) == 4 ? k->mr_f32 : k->mr_f64; }
template <typename T> int nr_of(const IsaKernels* k) { return sizeof(T) == 4 ? k->nr_f32 : k->nr_f64; }

// dst: ceil(nc / NR) panels of kc x NR (panel stride pstride), columns past
// nc zero. B(k, n) = transB ? B[n * ldb + k] : B[k * ldb + n].
template <typename S, typename T>
void pack_b(const S* B, bool transB, int64_t ldb, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int NR,
            int64_t pstride, T* dst) {
  if (!transB) {
    // Row by row: each source row is read contiguously across all panels
    // (a panel-by-panel walk touches one short piece of every row per
    // panel, which defeats the hardware prefetchers when B is large).
    const int64_t full = nc / NR;
    const int tail = static_cast<int>(nc - full * NR);
    for (int64_t k = 0; k < kc; ++k) {
      const S* src = B + (k0 + k) * ldb + n0;
      T* o = dst + k * NR;
      for (int64_t j = 0; j < full; ++j) {
        const S* s = src + j * NR;
        T* d = o + j * pstride;
        if constexpr (std::is_same<S, T>::value) std::memcpy(d, s, sizeof(T) * NR);
        else
          for (int c = 0; c < NR; ++c) d[c] = to_c(s[c]);
      }
      if (tail) {
        const S* s = src + full * NR;
        T* d = o + full * pstride;
        int c = 0;
        for (; c < tail; ++c) d[c] = to_c(s[c]);
        for (; c < NR; ++c) d[c] = T(0);
      }
    }
    return;
  }
  for (int64_t j = 0; j * NR < nc; ++j) {
    T* d = dst + j * pstride;
    const int64_t c0 = n0 + j * NR;
    const int w = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
    {
      int c = 0;
#if defined(__SSE2__)
      if constexpr (std::is_same<S, float>::value && std::is_same<T, float>::value) {
        // Four columns (rows of the stored B) at a time, transposed 4 x 4 in
        // registers: whole-vector loads and stores instead of one store per
        // element at a stride of a panel row (attention scores Q K^T over 12
        // heads of 128 x 128 x 64, one thread: 200 -> 160 us).
        for (; c + 4 <= w; c += 4) {
          const float* s0 = B + (c0 + c) * ldb + k0;
          const float* s1 = s0 + ldb;
          const float* s2 = s1 + ldb;
          const float* s3 = s2 + ldb;
          int64_t k = 0;
          for (; k + 4 <= kc; k += 4) {
            __m128 r0 = _mm_loadu_ps(s0 + k), r1 = _mm_loadu_ps(s1 + k);
            __m128 r2 = _mm_loadu_ps(s2 + k), r3 = _mm_loadu_ps(s3 + k);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(d + k * NR + c, r0);
            _mm_storeu_ps(d + (k + 1) * NR + c, r1);
            _mm_storeu_ps(d + (k + 2) * NR + c, r2);
            _mm_storeu_ps(d + (k + 3) * NR + c, r3);
          }
          for (; k < kc; ++k) {
            float* o = d + k * NR + c;
            o[0] = s0[k];
            o[1] = s1[k];
            o[2] = s2[k];
            o[3] = s3[k];
          }
        }
      }
#endif
      for (; c < w; ++c) {
        const S* src = B + (c0 + c) * ldb + k0;
        for (int64_t k = 0; k < kc; ++k) d[k * NR + c] = to_c(src[k]);
      }
      if (w < NR)
        for (int64_t k = 0; k < kc; ++k)
          for (int c = w; c < NR; ++c) d[k * NR + c] = T(0);
    }
  }
}

// Whether reading `rows` rows of A in place, lda_bytes apart, keeps more
// lines of one L1 set live than its 8 ways: rows a multiple of 4 KiB
// apart all map to one set. AVX-512's 12 rows at K = 1024, 2048 or 3072
// float32 ran 5-7 % slower in place than packed (Zen 4, one thread:
// 1024^3 93.5 -> 99.3 GFLOP/s, 128x768x3072 88 -> 93.5, constant B
// 128x1024x1024 96 -> 103), where AVX2's 6 rows, or 12 rows 2 KiB apart
// (6 a set), read in place as fast or faster.
bool rows_crowd_l1_set(int64_t lda_bytes, int64_t rows) { return rows > 8 && lda_bytes % 4096 == 0; }

// dst: kc x MR, k-major; rows past mr are not written (never read).
template <typename S, typename T>
void pack_a(const S* A, bool transA, int64_t lda, int64_t m0, int mr, int64_t k0, int64_t kc, int MR, T* dst) {
  if (!transA) {
    for (int i = 0; i < mr; ++i) {
      const S* src = A + (m0 + i) * lda + k0;
      for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = to_c(src[k]);
    }
  } else {
    for (int64_t k = 0; k < kc; ++k) {
      const S* src = A + (k0 + k) * lda + m0;
      for (int i = 0; i < mr; ++i) dst[k * MR + i] = to_c(src[i]);
    }
  }
}

// bfloat16 pair layouts for vdpbf16ps. B: per panel, ceil(kc / 2) pairs x
// NR columns x 2 (k, k + 1), zero padded in k and n. A: per pair, MR 32-bit
// entries (row i: A(i, k) low half, A(i, k + 1) high half).
void pack_b_pairs(const uint16_t* B, bool transB, int64_t ldb, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                  int NR, int64_t pstride, uint16_t* dst) {
  const int64_t kc2 = (kc + 1) / 2;
  for (int64_t j = 0; j * NR < nc; ++j) {
    uint16_t* d = dst + j * pstride;
    const int64_t c0 = n0 + j * NR;
    const int w = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
    if (!transB) {
      for (int64_t q = 0; q < kc2; ++q) {
        const uint16_t* r0 = B + (k0 + 2 * q) * ldb + c0;
        const bool has1 = 2 * q + 1 < kc;
        const uint16_t* r1 = r0 + ldb;
        uint16_t* o = d + q * 2 * NR;
        int c = 0;
        for (; c < w; ++c) {
          o[2 * c] = r0[c];
          o[2 * c + 1] = has1 ? r1[c] : 0;
        }
        for (; c < NR; ++c) o[2 * c] = o[2 * c + 1] = 0;
      }
    } else {
      for (int c = 0; c < NR; ++c) {
        if (c >= w) {
          for (int64_t q = 0; q < kc2; ++q) d[q * 2 * NR + 2 * c] = d[q * 2 * NR + 2 * c + 1] = 0;
          continue;
        }
        const uint16_t* src = B + (c0 + c) * ldb + k0;
        for (int64_t q = 0; q < kc2; ++q) {
          d[q * 2 * NR + 2 * c] = src[2 * q];
          d[q * 2 * NR + 2 * c + 1] = 2 * q + 1 < kc ? src[2 * q + 1] : 0;
        }
      }
    }
  }
}

void pack_a_pairs(const uint16_t* A, bool transA, int64_t lda, int64_t m0, int mr, int64_t k0, int64_t kc, int MR,
                  uint16_t* dst) {
  const int64_t kc2 = (kc + 1) / 2;
  for (int64_t q = 0; q < kc2; ++q) {
    const bool has1 = 2 * q + 1 < kc;
    for (int i = 0; i < mr; ++i) {
      const int64_t k = k0 + 2 * q;
      uint16_t lo, hi;
      if (!transA) {
        lo = A[(m0 + i) * lda + k];
        hi = has1 ? A[(m0 + i) * lda + k + 1] : 0;
      } else {
        lo = A[k * lda + m0 + i];
        hi = has1 ? A[(k + 1) * lda + m0 + i] : 0;
      }
      dst[2 * (q * MR + i)] = lo;
      dst[2 * (q * MR + i) + 1] = hi;
    }
  }
}

// The epilogue of the tile whose first element is C(m, c): alpha and the
// bias times beta, or none when the tile goes into a split-K partial.
template <typename T>
Epi<T> tile_epilogue(const GemmDesc& d, const T* bias, bool partial, int64_t m, int64_t c) {
  Epi<T> ep{};
  if (partial) {
    ep.alpha = T(1);
    return ep;
  }
  ep.alpha = static_cast<T>(d.alpha);
  ep.beta = static_cast<T>(d.beta);
  ep.bias = bias ? bias + m * d.bias_rs + c * d.bias_cs : nullptr;
  ep.bias_rs = d.bias_rs;
  ep.bias_cs = d.bias_cs;
  return ep;
}

struct Plan {
  int64_t tm, tn, tk;       // task grid per batch entry (tk > 1: split K)
  int64_t mstep, nstep, kstep;
  int64_t tasks;
};

template <typename S>
struct Job {
  using T = typename ComputeOf<S>::type;
  const KernelSet* ks;
  const GemmTuning* tun;
  const GemmDesc* d;
  const GemmBatch* b;
  Plan plan;
  T* partials;  // split K: tk buffers of M x N
  std::atomic<bool>* failed;  // set when a task cannot get its scratch memory
};

// bfloat16 through vdpbf16ps: float32 accumulation in a workspace (or the
// split-K partial), rounded to bfloat16 once at the end.
template <typename S>
void general_task_bf16(const Job<S>& job, int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t ka,
                       int64_t kb, float* part) {
  const GemmDesc& d = *job.d;
  const GemmBatch& b = *job.b;
  const KernelSet& ks = *job.ks;
  const int MR = ks.mr_bf16, NR = ks.nr_bf16;
  const int64_t KC = (job.tun->kc + 1) / 2 * 2;
  const int64_t NC = std::max<int64_t>(NR, job.tun->nc / NR * NR);
  const uint16_t* A = static_cast<const uint16_t*>(b.a[bi]);
  const uint16_t* B = b.packed ? nullptr : static_cast<const uint16_t*>(b.b[bi]);
  uint16_t* C = static_cast<uint16_t*>(b.c[bi]);
  const PackedB* pk = b.packed;
  const uint16_t* pk_base = pk ? static_cast<const uint16_t*>(pk->data) + b.b_mat[bi] * pk->mat_stride : nullptr;
  const int64_t mlen = m1 - m0;
  uint16_t* apack = static_cast<uint16_t*>(t_apack.get(sizeof(uint16_t) * MR * (KC + 2)));
  uint16_t* bpack =
      pk ? nullptr : static_cast<uint16_t*>(t_bpack.get(sizeof(uint16_t) * (KC + 2) * ((NC + NR - 1) / NR * NR)));
  if (!apack || (!pk && !bpack)) {
    job.failed->store(true);
    return;
  }
  Epi<float> ep{};
  const float* bias = static_cast<const float*>(d.bias);
  const bool amx = ks.amx_bf16 && !d.transA && NR == 32;
  amx::TileScope tiles(amx);
  for (int64_t nc0 = n0; nc0 < n1; nc0 += NC) {
    const int64_t nc = std::min(NC, n1 - nc0);
    auto epilogue = [&](int64_t m, int64_t j) { ep = tile_epilogue(d, bias, part != nullptr, m, nc0 + j * NR); };
    float* Ct;
    int64_t ldct;
    if (part) {
      Ct = part + m0 * d.N + nc0;
      ldct = d.N;
    } else {
      ldct = nc;
      Ct = static_cast<float*>(t_cwork.get(sizeof(float) * mlen * nc));
      if (!Ct) {
        job.failed->store(true);
        return;
      }
    }
    for (int64_t k0 = ka; k0 < kb; k0 += KC) {
      const int64_t kc = std::min(KC, kb - k0);
      const int64_t kc2 = (kc + 1) / 2;
      const int flags = (k0 == ka ? kFirst : 0) | (k0 + kc == kb ? kLast : 0);
      int64_t pstride;
      const uint16_t* bblock;
      if (pk) {
        pstride = pk->panel_stride;
        bblock = pk_base + (nc0 / NR) * pk->panel_stride + (k0 / 2) * 2 * NR;
      } else {
        pstride = kc2 * 2 * NR;
        pack_b_pairs(B, d.transB, d.ldb, k0, kc, nc0, nc, NR, pstride, bpack);
        bblock = bpack;
      }
      int64_t m = m0;
      if (amx) {
        // Full 32 x 32 blocks on AMX tiles over the block's whole 32-k steps;
        // the vdpbf16ps kernel then adds the K tail (fewer than 32 k) and
        // applies the epilogue at the last k (a call with no k when there is
        // no tail). Partial panels and rows go the vdpbf16ps way below.
        const int64_t k_amx = kc / 32 * 32;
        for (; k_amx > 0 && m + 32 <= m1; m += 32) {
          float* crow = Ct + (m - m0) * ldct;
          for (int64_t j = 0; j * NR < nc; ++j) {
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
            const uint16_t* bp = bblock + j * pstride;
            const bool full = nr == 32;
            if (full)
              amx::bf16_block_32x32(k_amx / 32, A + m * d.lda + k0, d.lda, bp, crow + j * NR, ldct, flags & kFirst);
            const int64_t kt = full ? k_amx : 0;  // k done on tiles
            if (full && kt == kc && !(flags & kLast)) continue;
            for (int64_t mm = m; mm < m + 32; mm += MR) {
              const int mr = static_cast<int>(std::min<int64_t>(MR, m + 32 - mm));
              pack_a_pairs(A, false, d.lda, mm, mr, k0 + kt, kc - kt, MR, apack);
              epilogue(mm, j);
              ks.uk_bf16((kc - kt + 1) / 2, apack, bp + (kt / 2) * 2 * NR, crow + (mm - m) * ldct + j * NR, ldct, mr,
                         nr, kt > 0 ? (flags & kLast) : flags, &ep);
            }
          }
        }
      }
      for (; m < m1; m += MR) {
        const int mr = static_cast<int>(std::min<int64_t>(MR, m1 - m));
        pack_a_pairs(A, d.transA, d.lda, m, mr, k0, kc, MR, apack);
        float* crow = Ct + (m - m0) * ldct;
        for (int64_t j = 0; j * NR < nc; ++j) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
          epilogue(m, j);
          ks.uk_bf16(kc2, apack, bblock + j * pstride, crow + j * NR, ldct, mr, nr, flags, &ep);
        }
      }
    }
    if (!part) {
      for (int64_t i = 0; i < mlen; ++i) {
        uint16_t* o = C + (m0 + i) * d.ldc + nc0;
        const float* w = Ct + i * ldct;
        for (int64_t j = 0; j < nc; ++j) o[j] = f32_to_bf16(w[j]);
      }
    }
  }
}

template <typename S>
void general_task(const Job<S>& job, int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t ka,
                  int64_t kb, typename ComputeOf<S>::type* part) {
  using T = typename ComputeOf<S>::type;
  if constexpr (std::is_same<S, BF16>::value) {
    if (job.ks->uk_bf16) return general_task_bf16<S>(job, bi, m0, m1, n0, n1, ka, kb, part);
  }
  const GemmDesc& d = *job.d;
  const GemmBatch& b = *job.b;
  const IsaKernels* isa = job.ks->isa;
  const UKernel<T> uk = uk_of<T>(isa);
  const UKernelDA<T> ukda = ukda_of<T>(isa);
  const int MR = mr_of<T>(isa), NR = nr_of<T>(isa);
  const int64_t NC = std::max<int64_t>(NR, job.tun->nc / NR * NR);
  const S* A = static_cast<const S*>(b.a[bi]);
  const S* B = b.packed ? nullptr : static_cast<const S*>(b.b[bi]);
  S* C = static_cast<S*>(b.c[bi]);
  const PackedB* pk = b.packed;
  const T* pk_base = pk ? static_cast<const T*>(pk->data) + b.b_mat[bi] * pk->mat_stride : nullptr;
  constexpr bool direct = std::is_same<S, T>::value;
  const int64_t mlen = m1 - m0;
  // Few row blocks: packing B costs more than its reuse saves; read full
  // panels of a row-major B in place.
  const bool direct_b = direct && !pk && !d.transB && (mlen + MR - 1) / MR <= job.tun->direct_b_max_mblocks;
  // A row-major in the compute type: the kernel reads its rows in place
  // (unless they crowd an L1 set).
  const bool direct_a = direct && !d.transA && job.tun->direct_a &&
                        !rows_crowd_l1_set(d.lda * int64_t{sizeof(T)}, std::min<int64_t>(MR, mlen));
  // Prepacked B walked panel by panel (below) keeps no A strip in L1, so
  // K blocks may be longer: equal blocks of at most 1.5 kc, fewer passes
  // over C (K 384 in one block rather than 256 + 128: MiniLM's projections
  // 2-3 % faster; K 768 to 3072 even).
  // The panel walk (below) reads the task's whole K block of A once per
  // panel: from L2 while it fits there, else from L3 every time (Zen 2,
  // 512 KiB L2: the QKV projection 512x2304x768, whose 768 KB blocks of A
  // did not fit, ran at 87 GFLOP/s walking the panels, x by rows).
  const int64_t walk_kc = ceil_div(kb - ka, ceil_div(kb - ka, job.tun->kc + job.tun->kc / 2));
  const bool panel_walk =
      pk && direct_a && mlen * walk_kc * static_cast<int64_t>(sizeof(T)) <= job.tun->panel_walk_max_a;
  const int64_t KC = panel_walk ? walk_kc : job.tun->kc;

  T* apack = static_cast<T*>(t_apack.get(sizeof(T) * MR * KC));
  T* bpack = pk ? nullptr : static_cast<T*>(t_bpack.get(sizeof(T) * KC * ((NC + NR - 1) / NR * NR)));
  if (!apack || (!pk && !bpack)) {
    job.failed->store(true);
    return;
  }

  Epi<T> ep{};
  const T* bias = static_cast<const T*>(d.bias);
  for (int64_t nc0 = n0; nc0 < n1; nc0 += NC) {
    const int64_t nc = std::min(NC, n1 - nc0);
    T* Ct;
    int64_t ldct;
    if (part) {
      Ct = part + m0 * d.N + nc0;
      ldct = d.N;
    } else if (direct) {
      Ct = reinterpret_cast<T*>(C) + m0 * d.ldc + nc0;
      ldct = d.ldc;
    } else {
      ldct = nc;
      Ct = static_cast<T*>(t_cwork.get(sizeof(T) * mlen * nc));
      if (!Ct) {
        job.failed->store(true);
        return;
      }
    }
    for (int64_t k0 = ka; k0 < kb; k0 += KC) {
      const int64_t kc = std::min(KC, kb - k0);
      const int flags = (k0 == ka ? kFirst : 0) | (k0 + kc == kb ? kLast : 0);
      int64_t pstride;
      const T* bblock;
      if (pk) {
        pstride = pk->panel_stride;
        bblock = pk_base + (nc0 / NR) * pk->panel_stride + k0 * NR;
      } else if (direct_b) {
        pstride = 0;
        bblock = nullptr;
        // Full panels read in place; the column tail panel is packed.
        const int64_t tail = nc % NR;
        if (tail) pack_b<S, T>(B, d.transB, d.ldb, k0, kc, nc0 + nc - tail, tail, NR, kc * NR, bpack);
      } else {
        pstride = kc * NR;
        pack_b<S, T>(B, d.transB, d.ldb, k0, kc, nc0, nc, NR, pstride, bpack);
        bblock = bpack;
      }
      // The tile of row block m and panel j; pf: lines to prefetch meanwhile.
      auto tile = [&](int64_t m, int64_t j, const void* pf, int64_t pf_lines) {
        const int mr = static_cast<int>(std::min<int64_t>(MR, m1 - m));
        const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j * NR));
        T* ct = Ct + (m - m0) * ldct + j * NR;
        ep = tile_epilogue(d, bias, part != nullptr, m, nc0 + j * NR);
        const T* bptr;
        int64_t ldbp = NR;
        if (direct_b) {
          if (nr == NR) {
            bptr = reinterpret_cast<const T*>(B) + k0 * d.ldb + nc0 + j * NR;
            ldbp = d.ldb;
          } else {
            bptr = bpack;
          }
        } else {
          bptr = bblock + j * pstride;
        }
        if (direct_a) {
          ukda(kc, reinterpret_cast<const T*>(A) + m * d.lda + k0, d.lda, bptr, ldbp, ct, ldct, mr, nr, flags, &ep, pf,
               pf_lines);
        } else {
          uk(kc, apack, bptr, ldbp, ct, ldct, mr, nr, flags, &ep);
        }
      };
      const int64_t panels = ceil_div(nc, NR);
      if (panel_walk) {
        // Prepacked B arrives from L3 or memory (a model's weights are
        // far larger than L2): panel by panel, each used by every row
        // block while it is in cache, the row blocks prefetching the next
        // panel a slice each. Row block by row block instead, the first
        // one would wait for all of B at L3 bandwidth (MiniLM-shaped
        // encoder, 36 GEMMs over 42 MB of weights: 1.6 ms of 16).
        const int64_t rblocks = ceil_div(mlen, MR);
        for (int64_t j = 0; j < panels; ++j) {
          const T* next = nullptr;
          if (j + 1 < panels) next = bblock + (j + 1) * pstride;
          else if (k0 + kc < kb) next = pk_base + (nc0 / NR) * pk->panel_stride + (k0 + kc) * NR;
          else if (nc0 + NC < n1) next = pk_base + ((nc0 + NC) / NR) * pk->panel_stride + ka * NR;
          const PrefetchSlices pfs(next, kc * NR * static_cast<int64_t>(sizeof(T)), rblocks);
          for (int64_t r = 0; r < rblocks; ++r) {
            int64_t count;
            const char* pf = pfs.at(r, kc, &count);
            tile(m0 + r * MR, j, pf, count);
          }
        }
      } else {
        for (int64_t m = m0; m < m1; m += MR) {
          if (!direct_a) {
            const int mr = static_cast<int>(std::min<int64_t>(MR, m1 - m));
            pack_a<S, T>(A, d.transA, d.lda, m, mr, k0, kc, MR, apack);
          }
          for (int64_t j = 0; j < panels; ++j) tile(m, j, nullptr, 0);
        }
      }
    }
    if (!direct && !part) {
      for (int64_t i = 0; i < mlen; ++i) {
        S* o = C + (m0 + i) * d.ldc + nc0;
        const T* w = Ct + i * ldct;
        for (int64_t j = 0; j < nc; ++j) from_c(w[j], o + j);
      }
    }
  }
}

template <typename S>
void run_range(void* user, int64_t begin, int64_t end) {
  const Job<S>& job = *static_cast<const Job<S>*>(user);
  const Plan& p = job.plan;
  const GemmDesc& d = *job.d;
  const int64_t per = p.tm * p.tn * p.tk;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t bi = t / per;
    int64_t r = t % per;
    const int64_t ik = r / (p.tm * p.tn);
    r %= p.tm * p.tn;
    const int64_t im = r / p.tn, in = r % p.tn;
    const int64_t m0 = im * p.mstep, m1 = std::min(d.M, m0 + p.mstep);
    const int64_t n0 = in * p.nstep, n1 = std::min(d.N, n0 + p.nstep);
    const int64_t k0 = ik * p.kstep, k1 = std::min(d.K, k0 + p.kstep);
    if (m0 >= m1 || n0 >= n1) continue;
    if (p.tk > 1) {
      if (k0 >= k1) {
        // An empty K share still owns its partial buffer: zero it.
        typename ComputeOf<S>::type* part = job.partials + ik * d.M * d.N;
        for (int64_t i = m0; i < m1; ++i)
          for (int64_t j = n0; j < n1; ++j) part[i * d.N + j] = 0;
        continue;
      }
      general_task<S>(job, bi, m0, m1, n0, n1, k0, k1, job.partials + ik * d.M * d.N);
    } else {
      general_task<S>(job, bi, m0, m1, n0, n1, 0, d.K, nullptr);
    }
  }
}

// Task grid costs in multiply-add equivalents (see choose_grid).
constexpr double kPackBCost = 8.0;   // per element of B packed
constexpr double kPackACost = 4.0;   // per element of A packed
constexpr double kReadACost = 4.0;   // per element of A read in place
constexpr double kTaskCost = 20000.0;
constexpr int64_t kMaxPerThread = 4;  // tasks per thread considered

// Writes alpha * 0 + beta * bias (K == 0).
template <typename S>
void fill_k0(const GemmDesc& d, const GemmBatch& b) {
  using T = typename ComputeOf<S>::type;
  const T* bias = static_cast<const T*>(d.bias);
  const T zero = static_cast<T>(d.alpha) * T(0);
  for (int64_t bi = 0; bi < b.n; ++bi) {
    S* C = static_cast<S*>(b.c[bi]);
    for (int64_t i = 0; i < d.M; ++i)
      for (int64_t j = 0; j < d.N; ++j) {
        T v = zero;
        if (bias) v += bias[i * d.bias_rs + j * d.bias_cs] * static_cast<T>(d.beta);
        from_c(v, C + i * d.ldc + j);
      }
  }
}

// GEMV family: M <= 4 or N <= 4, B not prepacked, float32/float64 storage.
// Rows mode (M <= N): output row i = op(A)[i, :] . op(B). Columns mode:
// output column j = op(A) . op(B)[:, j]. Each task computes one chunk of
// one output vector.
template <typename T>
struct GemvJob {
  const KernelSet* ks;
  const GemmDesc* d;
  const GemmBatch* b;
  bool rows;
  int64_t nvec, len;      // vectors per entry and their length
  int64_t chunk, chunks;  // chunk length and chunks per vector
  std::atomic<bool>* failed;
};

thread_local Scratch t_gemv_v, t_gemv_y;

template <typename T>
void gemv_range(void* user, int64_t begin, int64_t end) {
  const GemvJob<T>& job = *static_cast<const GemvJob<T>*>(user);
  const GemmDesc& d = *job.d;
  const IsaKernels* isa = job.ks->isa;
  GemvRows<T> rows;
  GemvCols<T> cols;
  if constexpr (sizeof(T) == 4) {
    rows = isa->gemv_rows_f32;
    cols = isa->gemv_cols_f32;
  } else {
    rows = isa->gemv_rows_f64;
    cols = isa->gemv_cols_f64;
  }
  const T* bias = static_cast<const T*>(d.bias);
  const T alpha = static_cast<T>(d.alpha), beta = static_cast<T>(d.beta);
  T* vbuf = static_cast<T*>(t_gemv_v.get(sizeof(T) * d.K));
  T* ybuf = job.rows ? nullptr : static_cast<T*>(t_gemv_y.get(sizeof(T) * job.chunk));
  if (!vbuf || (!job.rows && !ybuf)) {
    job.failed->store(true);
    return;
  }
  for (int64_t t = begin; t < end; ++t) {
    const int64_t per = job.nvec * job.chunks;
    const int64_t bi = t / per;
    const int64_t vi = (t % per) / job.chunks;
    const int64_t ci = t % job.chunks;
    const int64_t o0 = ci * job.chunk, o1 = std::min(job.len, o0 + job.chunk);
    const T* A = static_cast<const T*>(job.b->a[bi]);
    const T* B = static_cast<const T*>(job.b->b[bi]);
    T* C = static_cast<T*>(job.b->c[bi]);
    if (job.rows) {
      const int64_t i = vi;
      const T* v;
      if (!d.transA) {
        v = A + i * d.lda;
      } else {
        for (int64_t k = 0; k < d.K; ++k) vbuf[k] = A[k * d.lda + i];
        v = vbuf;
      }
      T* y = C + i * d.ldc;
      if (d.transB) rows(o1 - o0, d.K, B + o0 * d.ldb, d.ldb, v, y + o0);
      else cols(o1 - o0, d.K, B + o0, d.ldb, v, y + o0);
      for (int64_t j = o0; j < o1; ++j) {
        T r = y[j] * alpha;
        if (bias) r += bias[i * d.bias_rs + j * d.bias_cs] * beta;
        y[j] = r;
      }
    } else {
      const int64_t j = vi;
      const T* v;
      if (d.transB) {
        v = B + j * d.ldb;
      } else {
        for (int64_t k = 0; k < d.K; ++k) vbuf[k] = B[k * d.ldb + j];
        v = vbuf;
      }
      if (d.transA) cols(o1 - o0, d.K, A + o0, d.lda, v, ybuf);
      else rows(o1 - o0, d.K, A + o0 * d.lda, d.lda, v, ybuf);
      for (int64_t i = o0; i < o1; ++i) {
        T r = ybuf[i - o0] * alpha;
        if (bias) r += bias[i * d.bias_rs + j * d.bias_cs] * beta;
        C[i * d.ldc + j] = r;
      }
    }
  }
}

// The task grid (tm x tn) of one entry. A task computes a block of the
// output: it packs the columns of B it needs (unless B is prepacked or read
// in place) and reads or packs its rows of A, so splitting M repeats the
// packing of B and splitting N repeats the traffic of A. The executor hands
// out tasks dynamically: several tasks per thread let a thread that starts
// late (or is interrupted) take fewer, at the price of the repeated work.
// Cost of a grid, in multiply-add equivalents: rounds of tasks times the
// largest task (with a fixed cost per task, so that of two grids as fast
// the one with fewer tasks wins: on this 2-core Zen 4, 128x3072x768 with
// a dynamic B runs 15 % slower as 1 x 8 tasks than as 1 x 2).
template <typename S>
void choose_grid(const GemmTuning& tun, const GemmDesc& d, const GemmBatch& b, int MR, int NR, int64_t threads,
                 int64_t* tm_out, int64_t* tn_out) {
  using T = typename ComputeOf<S>::type;
  constexpr bool direct = std::is_same<S, T>::value;
  const int64_t bm = ceil_div(d.M, MR), bn = ceil_div(d.N, NR);
  const int64_t maxt = threads * kMaxPerThread;
  const int64_t NC = std::max<int64_t>(NR, tun.nc / NR * NR);
  double best = 0;
  int64_t btm = 1, btn = 1;
  bool have = false;
  for (int64_t tm = 1; tm <= std::min(bm, maxt); ++tm) {
    for (int64_t tn = 1; tn <= std::min(bn, maxt); ++tn) {
      const int64_t mstep = ceil_div(bm, tm) * MR, nstep = ceil_div(bn, tn) * NR;
      const int64_t rtm = ceil_div(d.M, mstep), rtn = ceil_div(d.N, nstep);
      if (rtm != tm || rtn != tn) continue;  // the same grid as a smaller one
      const int64_t tasks = b.n * tm * tn;
      if (tasks > maxt) continue;
      if (tasks < threads && (tm < bm || tn < bn)) continue;
      const double mlen = static_cast<double>(std::min(d.M, mstep));
      const double nlen = static_cast<double>(std::min(d.N, nstep));
      const double K = static_cast<double>(d.K);
      double t = mlen * nlen * K;
      const bool direct_b = direct && !d.transB && ceil_div(static_cast<int64_t>(mlen), MR) <= tun.direct_b_max_mblocks;
      if (!b.packed && !direct_b) t += nlen * K * kPackBCost;
      const bool direct_a = direct && !d.transA && tun.direct_a &&
                            !rows_crowd_l1_set(d.lda * int64_t{sizeof(T)}, std::min<int64_t>(MR, d.M));
      t += mlen * K * (direct_a ? kReadACost : kPackACost) * static_cast<double>(ceil_div(static_cast<int64_t>(nlen), NC));
      t += kTaskCost;
      const double rounds = static_cast<double>(ceil_div(tasks, threads));
      const double cost = rounds * t;
      if (!have || cost < best * 0.999) {
        best = cost;
        btm = tm;
        btn = tn;
        have = true;
      }
    }
  }
  *tm_out = btm;
  *tn_out = btn;
}

template <typename S>
const char* run_typed(const olc_core_api* api, olc_context* ctx, const KernelSet& ks, const GemmTuning& tun,
                      const GemmDesc& d, const GemmBatch& b) {
  using T = typename ComputeOf<S>::type;
  if (b.n == 0 || d.M == 0 || d.N == 0) return "empty";
  if (d.K == 0) {
    fill_k0<S>(d, b);
    return "k0";
  }
  const int64_t macs = d.M * d.N * d.K;  // per entry; bounded by the sizes of the operands
  const int64_t threads = (macs * b.n >= tun.parallel_min_macs) ? std::max<int32_t>(1, api->concurrency(ctx)) : 1;
  if constexpr (std::is_same<S, T>::value) {
    if (!b.packed && (d.M <= tun.gemv_max || d.N <= tun.gemv_max)) {
      std::atomic<bool> failed{false};
      GemvJob<T> job{&ks, &d, &b, d.M <= d.N, 0, 0, 0, 0, &failed};
      job.nvec = job.rows ? d.M : d.N;
      job.len = job.rows ? d.N : d.M;
      int64_t chunks = 1;
      if (threads > 1 && b.n * job.nvec < threads) chunks = std::min<int64_t>(threads, ceil_div(job.len, 64));
      job.chunk = ceil_div(ceil_div(job.len, chunks), 16) * 16;
      job.chunks = ceil_div(job.len, job.chunk);
      const int64_t total = b.n * job.nvec * job.chunks;
      if (threads > 1 && total > 1) api->parallel_for(ctx, total, 1, 0, &gemv_range<T>, &job);
      else gemv_range<T>(&job, 0, total);
      return failed.load() ? "oom" : "gemv";
    }
  }
  const IsaKernels* isa = ks.isa;
  int MR = mr_of<T>(isa), NR = nr_of<T>(isa);
  if (std::is_same<S, BF16>::value && ks.uk_bf16) {
    MR = ks.mr_bf16;
    NR = ks.nr_bf16;
  }
  std::atomic<bool> failed{false};
  Job<S> job{&ks, &tun, &d, &b, {}, nullptr, &failed};
  Plan& p = job.plan;
  const int64_t bm = ceil_div(d.M, MR), bn = ceil_div(d.N, NR);
  p.tm = p.tn = p.tk = 1;
  const char* path = "blocked";
  if (threads > 1 && b.n < threads) {
    const int64_t want = threads;  // tasks per entry
    // Fewer than two tiles per thread (3 tiles on 2 threads: one thread
    // gets two): with a long K, sharing K balances exactly.
    if (bm * bn < 2 * want && b.n == 1 && d.K >= tun.split_k_min) {
      p.tk = want;
      path = "split-k";
    } else {
      choose_grid<S>(tun, d, b, MR, NR, threads, &p.tm, &p.tn);
    }
  } else if (b.n > 1) {
    path = "batched";
  }
  p.mstep = ceil_div(bm, p.tm) * MR;
  p.nstep = ceil_div(bn, p.tn) * NR;
  p.kstep = ceil_div(ceil_div(d.K, p.tk), 8) * 8;  // even: bfloat16 pairs never straddle shares
  p.tm = ceil_div(d.M, p.mstep);
  p.tn = ceil_div(d.N, p.nstep);
  p.tasks = b.n * p.tm * p.tn * p.tk;
  std::unique_ptr<T[]> partials;
  if (p.tk > 1) {
    partials.reset(new (std::nothrow) T[static_cast<size_t>(p.tk * d.M * d.N)]);
    if (!partials) {
      p.tk = 1;
      p.kstep = d.K;
      p.tasks = b.n * p.tm * p.tn;
      path = "blocked";
    }
    job.partials = partials.get();
  }
  if (threads > 1 && p.tasks > 1) api->parallel_for(ctx, p.tasks, 1, 0, &run_range<S>, &job);
  else run_range<S>(&job, 0, p.tasks);
  if (failed.load()) return "oom";
  if (p.tk > 1) {
    // Reduce the K shares and apply the epilogue.
    S* C = static_cast<S*>(b.c[0]);
    const T* bias = static_cast<const T*>(d.bias);
    const T alpha = static_cast<T>(d.alpha), beta = static_cast<T>(d.beta);
    const int64_t mn = d.M * d.N;
    for (int64_t i = 0; i < d.M; ++i)
      for (int64_t j = 0; j < d.N; ++j) {
        T s = 0;
        for (int64_t q = 0; q < p.tk; ++q) s += job.partials[q * mn + i * d.N + j];
        s *= alpha;
        if (bias) s += bias[i * d.bias_rs + j * d.bias_cs] * beta;
        from_c(s, C + i * d.ldc + j);
      }
  }
  return path;
}

}  // namespace

PackedB::~PackedB() {
  std::free(data);
  g_packed_bytes.fetch_sub(static_cast<int64_t>(bytes));
}

int64_t packed_bytes_live() { return g_packed_bytes.load(); }

std::shared_ptr<PackedB> make_packed(PackLayout layout, size_t bytes) {
  auto pk = std::make_shared<PackedB>();
  pk->layout = layout;
  pk->nr = 0;
  pk->K = pk->N = pk->nmat = pk->panel_stride = pk->mat_stride = 0;
  pk->bytes = std::max<size_t>(bytes, 1);
  pk->data = std::aligned_alloc(64, (pk->bytes + 63) & ~size_t(63));
  if (!pk->data) {
    pk->bytes = 0;
    return nullptr;
  }
  g_packed_bytes.fetch_add(static_cast<int64_t>(pk->bytes));
  return pk;
}

// CPU 0's data caches as the core API reports them (the sysfs figures `olc
// info` prints); zeros (unknown: the portable defaults) from an olc-core
// without that slot.
const CacheInfo& cache_info() {
  static const CacheInfo info = [] {
    CacheInfo c;
    const olc_core_api* api = core_api();
    if (!api || !OLC_API_HAS(api, data_cache_bytes)) return c;
    int32_t sharers[3] = {1, 1, 1};
    c.l1d = api->data_cache_bytes(1, &sharers[0]);
    c.l2 = api->data_cache_bytes(2, &sharers[1]);
    c.l3 = api->data_cache_bytes(3, &sharers[2]);
    c.l1d_sharers = sharers[0];
    c.l2_sharers = sharers[1];
    c.l3_sharers = sharers[2];
    return c;
  }();
  return info;
}

GemmTuning default_gemm_tuning(int32_t dtype) { return gemm_tuning_for_caches(cache_info(), dtype); }

GemmTuning gemm_tuning_for_caches(const CacheInfo& c, int32_t dtype) {
  GemmTuning t;
  // Below about 0.75 M multiply-adds a second thread costs more than it
  // saves. Gemm with a constant B, two threads against one, same process
  // alternating (AVX-512, 2 vCPUs): 128x64x16 0.62x, 64x64x64 0.59x,
  // 128x128x32 (0.52 M) 0.86x, 256x64x64 (1.05 M) 1.14x, 128x128x64
  // 1.37x, 256x128x64 1.68x.
  t.parallel_min_macs = 3 << 18;
  // Blocking from the caches of one thread (a cache shared by SMT siblings
  // counts as its share). kc: an MR x kc strip of A and a kc x NR panel of
  // B in L1, 256 from 32 KiB per thread up. nc: the kc x nc block of packed
  // B, which every row block of the task reads again. From 1 MiB of L2 up,
  // the block fills half of it: 512, as tuned on Sapphire Rapids (2 MiB)
  // and Zen 4 (1 MiB). Below, an eighth: the task's rows of A stream
  // through L2 past the block, and on a Zen 2 (512 KiB L2, float32 kc 256)
  // a half-L2 block (nc 256) cost the two-thread runs 15-25 % (512^3 1.60
  // against 2.10 ms, 1024^3 13.2 against 15.7, 512x512x2048 6.5 against
  // 8.5; one thread and M = 128 even) where an eighth (nc 64) did not.
  const int64_t elem = dtype == OLC_DTYPE_DOUBLE ? 8 : 4;  // float16/bfloat16 pack as float32
  const int64_t l1 = c.l1d / std::max(1, c.l1d_sharers), l2 = c.l2 / std::max(1, c.l2_sharers);
  t.kc = (l1 == 0 || l1 >= (32 << 10)) ? 256 : 128;
  t.nc = 512;
  if (l2 > 0) {
    const int64_t share = l2 >= (1 << 20) ? l2 / 2 : l2 / 8;
    t.nc = std::max<int64_t>(64, std::min<int64_t>(512, share / (t.kc * elem) / 64 * 64));
  }
  t.split_k_min = 1024;
  t.gemv_max = 4;
  t.direct_b_max_mblocks = 3;
  t.direct_a = 1;
  if (l2 > 0) t.panel_walk_max_a = l2 / 2;
  return t;
}

KernelSet select_kernels(const olc_core_api* api) {
  KernelSet ks{};
  const int32_t level = api->simd_level();
  const uint64_t feats = api->cpu_features();
  if (level >= OLC_SIMD_AVX512) ks.isa = avx512::kernels();
  else if (level >= OLC_SIMD_AVX2) ks.isa = avx2::kernels();
  else ks.isa = scalar::kernels();
  ks.isa_name = ks.isa->name;
  if (level >= OLC_SIMD_AVX512 && (feats & OLC_CPU_AVX512_BF16))
    ks.uk_bf16 = avx512bf16::uk_bf16(&ks.mr_bf16, &ks.nr_bf16);
  // AMX-BF16 reads the vdpbf16ps kernel's packed panels; use_amx = 0 keeps
  // bfloat16 GEMMs on vdpbf16ps.
  const olc_tuning_param* use_amx =
      api->tuning_declare_int("olc_matmul", "MatMul", "default", OLC_DTYPE_BFLOAT16, "use_amx", 1);
  const uint64_t amx_bits = OLC_CPU_AMX_TILE | OLC_CPU_AMX_BF16;
  ks.amx_bf16 = ks.uk_bf16 && (feats & amx_bits) == amx_bits && api->tuning_read_int(use_amx) != 0;
  return ks;
}

template <typename S>
static std::shared_ptr<PackedB> pack_typed(const KernelSet& ks, const S* B, bool transB, int64_t K, int64_t N,
                                           int64_t nmat) {
  using T = typename ComputeOf<S>::type;
  const int NR = nr_of<T>(ks.isa);
  auto pk = std::make_shared<PackedB>();
  pk->layout = sizeof(T) == 4 ? PackLayout::kF32 : PackLayout::kF64;
  pk->nr = NR;
  pk->K = K;
  pk->N = N;
  pk->nmat = nmat;
  pk->panel_stride = K * NR;
  pk->mat_stride = ceil_div(N, NR) * pk->panel_stride;
  pk->bytes = static_cast<size_t>(std::max<int64_t>(1, pk->mat_stride * nmat)) * sizeof(T);
  pk->data = std::aligned_alloc(64, (pk->bytes + 63) & ~size_t(63));
  if (!pk->data) {
    pk->bytes = 0;
    return nullptr;
  }
  g_packed_bytes.fetch_add(static_cast<int64_t>(pk->bytes));
  T* dst = static_cast<T*>(pk->data);
  const int64_t ldb = transB ? K : N;
  for (int64_t m = 0; m < nmat; ++m)
    pack_b<S, T>(B + m * K * N, transB, ldb, 0, K, 0, N, NR, pk->panel_stride, dst + m * pk->mat_stride);
  return pk;
}

static std::shared_ptr<PackedB> pack_bf16_pairs(const KernelSet& ks, const uint16_t* B, bool transB, int64_t K,
                                                int64_t N, int64_t nmat) {
  const int NR = ks.nr_bf16;
  auto pk = std::make_shared<PackedB>();
  pk->layout = PackLayout::kBf16;
  pk->nr = NR;
  pk->K = K;
  pk->N = N;
  pk->nmat = nmat;
  pk->panel_stride = (K + 1) / 2 * 2 * NR;
  pk->mat_stride = ceil_div(N, NR) * pk->panel_stride;
  pk->bytes = static_cast<size_t>(std::max<int64_t>(1, pk->mat_stride * nmat)) * sizeof(uint16_t);
  pk->data = std::aligned_alloc(64, (pk->bytes + 63) & ~size_t(63));
  if (!pk->data) {
    pk->bytes = 0;
    return nullptr;
  }
  g_packed_bytes.fetch_add(static_cast<int64_t>(pk->bytes));
  uint16_t* dst = static_cast<uint16_t*>(pk->data);
  const int64_t ldb = transB ? K : N;
  for (int64_t m = 0; m < nmat; ++m)
    pack_b_pairs(B + m * K * N, transB, ldb, 0, K, 0, N, NR, pk->panel_stride, dst + m * pk->mat_stride);
  return pk;
}

std::shared_ptr<PackedB> pack_b_constant(const KernelSet& ks, int32_t dtype, const void* B, bool transB, int64_t K,
                                         int64_t N, int64_t nmat) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: return pack_typed<float>(ks, static_cast<const float*>(B), transB, K, N, nmat);
    case OLC_DTYPE_DOUBLE: return pack_typed<double>(ks, static_cast<const double*>(B), transB, K, N, nmat);
    case OLC_DTYPE_FLOAT16: return pack_typed<F16>(ks, static_cast<const F16*>(B), transB, K, N, nmat);
    case OLC_DTYPE_BFLOAT16:
      if (ks.uk_bf16) return pack_bf16_pairs(ks, static_cast<const uint16_t*>(B), transB, K, N, nmat);
      return pack_typed<BF16>(ks, static_cast<const BF16*>(B), transB, K, N, nmat);
    default: return nullptr;
  }
}

const char* gemm_run(const olc_core_api* api, olc_context* ctx, const KernelSet& ks, const GemmTuning& tun,
                     const GemmDesc& d, const GemmBatch& b) {
  switch (d.dtype) {
    case OLC_DTYPE_FLOAT: return run_typed<float>(api, ctx, ks, tun, d, b);
    case OLC_DTYPE_DOUBLE: return run_typed<double>(api, ctx, ks, tun, d, b);
    case OLC_DTYPE_FLOAT16: return run_typed<F16>(api, ctx, ks, tun, d, b);
    case OLC_DTYPE_BFLOAT16: return run_typed<BF16>(api, ctx, ks, tun, d, b);
    default: return "unsupported";
  }
}

}  // namespace olc_mm
