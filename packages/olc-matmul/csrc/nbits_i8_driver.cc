// MatMulNBits with int8 activations: kernel choice, weight packing, the
// quantization of A and the split of the columns over the executor.
#include "nbits_i8_driver.h"
#include "scratch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace olc_mm {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t round64(size_t x) { return (x + 63) & ~size_t(63); }

// A one-row product over fewer weight bytes than this runs on the calling
// thread alone: waking a worker costs more than it saves.
constexpr int64_t kParallelMinBytes = 96 * 1024;
// Rows of A quantized in parallel from this many elements.
constexpr int64_t kParallelQuantMin = 1 << 16;
// Several rows: the columns go in strips of kStripGroups groups (128
// columns), each strip in passes of about kPassK k over all the rows. A
// pass's weights (32 KiB at 4 bits) stay in L1/L2 while every row block
// reads them, and the strip's output rows (M x 128 floats, where the
// passes add up) stay in L2: with the whole width in one pass the
// output of 128 x 4096 (2 MiB) went through L3 once per pass.
constexpr int64_t kPassK = 512;
constexpr int64_t kStripGroups = 8;

thread_local Scratch t_quant_a;

struct QuantJob {
  const NbI8Kernels* ks;
  const float* A;
  int64_t K, bs, kb;
  int8_t* q;
  float* scale;
  int32_t* sum;
  float* ssum;
};

void quant_range(void* user, int64_t begin, int64_t end) {
  const QuantJob& j = *static_cast<const QuantJob*>(user);
  for (int64_t m = begin; m < end; ++m)
    j.ks->quantize(j.A + m * j.K, j.K, j.bs, j.kb, j.q + m * j.kb * j.bs, j.scale + m * j.kb, j.sum + m * j.kb,
                   j.ssum + m * j.kb);
}

struct ProductJob {
  const NbI8Kernels* ks;
  NbI8Run base;  // rows and blocks of the whole problem; groups per range
  int64_t pass_blocks;
};

void product_range(void* user, int64_t begin, int64_t end) {
  const ProductJob& j = *static_cast<const ProductJob*>(user);
  NbI8Run r = j.base;
  if (j.pass_blocks >= j.base.b1) {  // one pass (one row): the whole range at once
    r.g0 = begin;
    r.g1 = end;
    j.ks->run(&r);
    return;
  }
  for (int64_t g = begin; g < end; g += kStripGroups) {
    r.g0 = g;
    r.g1 = std::min(end, g + kStripGroups);
    for (int64_t b = 0; b < j.base.b1; b += j.pass_blocks) {
      r.b0 = b;
      r.b1 = std::min(j.base.b1, b + j.pass_blocks);
      j.ks->run(&r);
    }
  }
}

}  // namespace

NbI8Kernels select_nbits_i8(const olc_core_api* api, bool use_vnni) {
  const int32_t level = api->simd_level();
  const uint64_t f = api->cpu_features();
  if (level >= OLC_SIMD_AVX512 && (f & OLC_CPU_AVX512_VNNI) && use_vnni) return avx512vnni::nbits_i8_kernels();
  if (level >= OLC_SIMD_AVX2 && (f & OLC_CPU_AVX_VNNI) && use_vnni) return avxvnni::nbits_i8_kernels();
  if (level >= OLC_SIMD_AVX2) return avx2::nbits_i8_kernels();
  return scalar::nbits_i8_kernels();
}

size_t nbits_i8_packed_bytes(int bits, int64_t bs, int64_t kb, int64_t N, NbZp zmode) {
  const int64_t groups = cdiv(N, kNbGroup);
  const size_t per = static_cast<size_t>(groups * kb * kNbGroup);  // (column, block) pairs
  size_t bytes = round64(static_cast<size_t>(groups * kb * 2 * bs * bits)) + round64(per * sizeof(float));
  if (zmode == NbZp::kUint8) bytes += round64(per);
  if (zmode == NbZp::kFloat) bytes += round64(per * sizeof(float));
  return bytes;
}

void nbits_i8_pack(int bits, int64_t bs, int64_t kb, int64_t N, const uint8_t* B, const float* scales, NbZp zmode,
                   const float* zp, const float* nzs, void* dst, NbI8Weights* w) {
  const int64_t groups = cdiv(N, kNbGroup);
  const int64_t blob = bs * bits / 8, wblk = 2 * bs * bits;
  const int parts = 8 / bits, ku = 4 * parts;
  const uint32_t mask = (1u << bits) - 1u;
  uint8_t* base = static_cast<uint8_t*>(dst);
  w->bits = bits;
  w->bs = bs;
  w->kb = kb;
  w->groups = groups;
  w->zmode = zmode;
  w->gstride = kb * wblk;
  uint8_t* q = base;
  size_t off = round64(static_cast<size_t>(groups * w->gstride));
  float* sc = reinterpret_cast<float*>(base + off);
  const size_t per = static_cast<size_t>(groups * kb * kNbGroup);
  off += round64(per * sizeof(float));
  uint8_t* zq = nullptr;
  float* zf = nullptr;
  if (zmode == NbZp::kUint8) {
    zq = base + off;
    off += round64(per);
  } else if (zmode == NbZp::kFloat) {
    zf = reinterpret_cast<float*>(base + off);
    off += round64(per * sizeof(float));
  }
  w->q = q;
  w->scale = sc;
  w->zp = zq;
  w->nzs = zf;
  // Columns past N (the last group's tail) are zero with scale 0.
  if (N % kNbGroup) {
    const int64_t g = groups - 1;
    std::memset(q + g * w->gstride, 0, static_cast<size_t>(w->gstride));
  }
  std::memset(sc, 0, per * sizeof(float));
  if (zq) std::memset(zq, 0, per);
  if (zf) std::memset(zf, 0, per * sizeof(float));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t g = n / kNbGroup, j = n % kNbGroup;
    for (int64_t b = 0; b < kb; ++b) {
      const uint8_t* src = B + (n * kb + b) * blob;
      uint8_t* d = q + g * w->gstride + b * wblk + 4 * j;
      if (bits == 4) {
        // Octet by octet: source bytes s0..s3 hold k 0..7 (low nibble
        // first); byte t of the slot holds k t (low) and k t + 4 (high).
        for (int64_t u = 0; u < bs / 8; ++u, src += 4, d += 64) {
          const uint8_t s0 = src[0], s1 = src[1], s2 = src[2], s3 = src[3];
          d[0] = static_cast<uint8_t>((s0 & 0x0f) | (s2 << 4));
          d[1] = static_cast<uint8_t>((s0 >> 4) | (s2 & 0xf0));
          d[2] = static_cast<uint8_t>((s1 & 0x0f) | (s3 << 4));
          d[3] = static_cast<uint8_t>((s1 >> 4) | (s3 & 0xf0));
        }
      } else {
        for (int64_t u = 0; u < bs / ku; ++u)
          for (int t = 0; t < 4; ++t) {
            uint32_t v = 0;
            for (int f = 0; f < parts; ++f) {
              const int64_t k = u * ku + 4 * f + t;
              v |= ((src[k * bits / 8] >> (bits * (k % parts))) & mask) << (bits * f);
            }
            d[u * 64 + t] = static_cast<uint8_t>(v);
          }
      }
      const int64_t i = (g * kb + b) * kNbGroup + j;
      sc[i] = scales[n * kb + b];
      if (zq) zq[i] = static_cast<uint8_t>(zp[n * kb + b]);
      if (zf) zf[i] = nzs[n * kb + b];
    }
  }
}

bool nbits_i8_run(const olc_core_api* api, olc_context* ctx, const NbI8Kernels& ks, const NbI8Weights& w, int64_t K,
                  int64_t N, const float* A, int64_t M, const float* bias, float* Y) {
  const int64_t kb = w.kb, bs = w.bs;
  const size_t qbytes = round64(static_cast<size_t>(M * kb * bs));
  const size_t fbytes = round64(static_cast<size_t>(M * kb) * sizeof(float));
  uint8_t* s = static_cast<uint8_t*>(t_quant_a.get(qbytes + 3 * fbytes));
  if (!s) return false;
  QuantJob qj{&ks, A, K, bs, kb, reinterpret_cast<int8_t*>(s), reinterpret_cast<float*>(s + qbytes),
              reinterpret_cast<int32_t*>(s + qbytes + fbytes), reinterpret_cast<float*>(s + qbytes + 2 * fbytes)};
  const int64_t threads = api->concurrency(ctx);
  if (threads > 1 && M > 1 && M * K >= kParallelQuantMin) api->parallel_for(ctx, M, 1, 0, &quant_range, &qj);
  else quant_range(&qj, 0, M);

  NbQuantA qa{kb * bs, qj.q, qj.scale, qj.sum, qj.ssum};
  ProductJob pj{&ks, {&qa, &w, bias, Y, N, N, 0, M, 0, w.groups, 0, kb}, M == 1 ? kb : std::max<int64_t>(1, kPassK / bs)};
  const int64_t wbytes = N * K * w.bits / 8;
  const bool parallel = threads > 1 && w.groups > 1 && (M > 1 || wbytes >= kParallelMinBytes);
  // Ranges of column groups; a grain of 4 groups keeps each pass of the
  // one-row kernel (4 groups on AVX-512) whole.
  if (parallel) api->parallel_for(ctx, w.groups, 4, 0, &product_range, &pj);
  else product_range(&pj, 0, w.groups);
  return true;
}

}  // namespace olc_mm
