// MatMulNBits int8-activation kernels for the baseline level: plain loops
// over the packed layout of nbits_i8.h (also the simplest statement of what
// the SIMD kernels compute).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "nbits_i8.h"

namespace olc_mm {
namespace scalar {
namespace {

void quantize(const float* a, int64_t K, int64_t bs, int64_t kb, int8_t* q, float* scale, int32_t* sum,
              float* ssum) {
  for (int64_t b = 0; b < kb; ++b) {
    const int64_t k0 = b * bs, n = std::min(bs, K - k0);
    uint32_t mx = 0;  // max |a| as bits: NaN > inf > every finite value
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, a + k0 + i, 4);
      mx = std::max(mx, u & 0x7fffffffu);
    }
    float amax;
    std::memcpy(&amax, &mx, 4);
    const float inv = nb_inv_scale(amax);
    int32_t t = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t v = inv != 0.0f ? static_cast<int32_t>(std::nearbyint(a[k0 + i] * inv)) : 0;
      q[k0 + i] = static_cast<int8_t>(v);
      t += v;
    }
    for (int64_t i = n; i < bs; ++i) q[k0 + i] = 0;
    const float s = amax / 127.0f;
    scale[b] = s;
    sum[b] = t;
    ssum[b] = s * static_cast<float>(t);
  }
}

void run(const NbI8Run* p) {
  const NbQuantA& a = *p->a;
  const NbI8Weights& w = *p->w;
  const int bits = w.bits;
  const int parts = 8 / bits, ku = 4 * parts;  // bit fields per byte, k per 64-byte unit
  const uint32_t mask = (1u << bits) - 1u;
  const int32_t zdef = w.zmode == NbZp::kDefault ? 1 << (bits - 1) : 0;
  const int64_t wblk = 2 * w.bs * bits;  // bytes per block of one group
  for (int64_t m = p->m0; m < p->m1; ++m) {
    const int8_t* qa = a.q + m * a.stride;
    for (int64_t g = p->g0; g < p->g1; ++g) {
      for (int j = 0; j < kNbGroup; ++j) {
        const int64_t n = g * kNbGroup + j;
        if (n >= p->N) break;
        float* yp = p->y + m * p->ldy + n;
        float acc = p->b0 == 0 ? 0.0f : *yp;
        for (int64_t b = p->b0; b < p->b1; ++b) {
          const uint8_t* wb = w.q + g * w.gstride + b * wblk;
          const int8_t* ab = qa + b * w.bs;
          int32_t d = 0;
          for (int64_t k = 0; k < w.bs; ++k) {
            const int64_t u = k / ku, r = k % ku, f = r / 4, t = r % 4;
            const int32_t v = (wb[u * 64 + 4 * j + t] >> (bits * f)) & mask;
            d += v * ab[k];
          }
          const int64_t i = (g * w.kb + b) * kNbGroup + j;
          const int32_t z = zdef + (w.zmode == NbZp::kUint8 ? w.zp[i] : 0);
          d -= z * a.sum[m * w.kb + b];
          acc += static_cast<float>(d) * (w.scale[i] * a.scale[m * w.kb + b]);
          if (w.zmode == NbZp::kFloat) acc += w.nzs[i] * a.ssum[m * w.kb + b];
        }
        if (p->b1 == w.kb && p->bias) acc += p->bias[n];
        *yp = acc;
      }
    }
  }
}

}  // namespace

NbI8Kernels nbits_i8_kernels() { return {"scalar", &quantize, &run}; }

}  // namespace scalar
}  // namespace olc_mm
