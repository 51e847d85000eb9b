// AVX-512 (F/BW/VL/DQ) level: float32, float16 and bfloat16 computed 16
// lanes at a time in f32, 4 vectors per iteration, masked tails (no
// over-read), optional non-temporal stores. float64, integer and BOOL ops
// use the generic loops compiled for this ISA.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "olc/kernel_abi.h"
#include "unary_common.h"
#include "vmath_shim_avx512.h"

namespace olc_ew {
namespace avx512 {

#include "unary_elem.inc"

using olc_ew_vm::vm_cos;
using olc_ew_vm::vm_erf;
using olc_ew_vm::vm_erf2;
using olc_ew_vm::vm_exp;
using olc_ew_vm::vm_exp2;
using olc_ew_vm::vm_expm1;
using olc_ew_vm::vm_log;
using olc_ew_vm::vm_gelu;
using olc_ew_vm::vm_gelu_tanh;
using olc_ew_vm::vm_softplus;
using olc_ew_vm::vm_sigmoid;
using olc_ew_vm::vm_sigmoid2;
using olc_ew_vm::vm_sin;
using olc_ew_vm::vm_tanh;
using olc_ew_vm::vm_mish;
using olc_ew_vm::vm_tan;
using olc_ew_vm::vm_asin;
using olc_ew_vm::vm_acos;
using olc_ew_vm::vm_atan;
using olc_ew_vm::vm_sinh;
using olc_ew_vm::vm_cosh;
using olc_ew_vm::vm_asinh;
using olc_ew_vm::vm_acosh;
using olc_ew_vm::vm_atanh;
using olc_ew_vm::vm_tanh2;

// ---- loads and stores: 16 elements as one __m512 of f32 ----

struct LF32 {
  using T = float;
  static __m512 load(const T* p) { return _mm512_loadu_ps(p); }
  static __m512 load_tail(const T* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(T* p, __m512 v) { _mm512_storeu_ps(p, v); }
  static void stream(T* p, __m512 v) { _mm512_stream_ps(p, v); }
  static void store_tail(T* p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
};

struct LF16 {
  using T = uint16_t;
  static __m256i pack(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static __m512 load(const T* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_tail(const T* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
  static void store(T* p, __m512 v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), pack(v)); }
  static void stream(T* p, __m512 v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), pack(v)); }
  static void store_tail(T* p, __mmask16 m, __m512 v) { _mm256_mask_storeu_epi16(p, m, pack(v)); }
};

struct LBF16 {
  using T = uint16_t;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  // Round to nearest even; NaN keeps its top bits and is made quiet.
  static __m256i pack(__m512 v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
  }
  static __m512 load(const T* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_tail(const T* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
  static void store(T* p, __m512 v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), pack(v)); }
  static void stream(T* p, __m512 v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), pack(v)); }
  static void store_tail(T* p, __mmask16 m, __m512 v) { _mm256_mask_storeu_epi16(p, m, pack(v)); }
};

// ---- vector ops (same evaluation order as unary_elem.inc) ----

static inline __m512 vset(float v) { return _mm512_set1_ps(v); }
static inline __m512 vsignmask() { return _mm512_set1_ps(-0.0f); }

struct VAbs { explicit VAbs(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return _mm512_andnot_ps(vsignmask(), x); } };
struct VNeg { explicit VNeg(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return _mm512_xor_ps(x, vsignmask()); } };
struct VExp { explicit VExp(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_exp(x); }
  void pair(__m512& a, __m512& b) const { vm_exp2(a, b); } };
struct VLog { explicit VLog(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_log(x); } };
struct VSqrt { explicit VSqrt(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return _mm512_sqrt_ps(x); } };
struct VReciprocal { explicit VReciprocal(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return _mm512_div_ps(vset(1.f), x); } };
struct VSigmoid { explicit VSigmoid(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_sigmoid(x); }
  void pair(__m512& a, __m512& b) const { vm_sigmoid2(a, b); } };
struct VTanh { explicit VTanh(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_tanh(x); }
  void pair(__m512& a, __m512& b) const { vm_tanh2(a, b); } };
struct VErf { explicit VErf(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_erf(x); }
  void pair(__m512& a, __m512& b) const { vm_erf2(a, b); } };
struct VSin { explicit VSin(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_sin(x); } };
struct VCos { explicit VCos(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_cos(x); } };
struct VFloor { explicit VFloor(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); } };
struct VCeil { explicit VCeil(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return _mm512_roundscale_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); } };
struct VRound { explicit VRound(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); } };
// max(0, x) returns x for NaN; + 0 turns -0 into +0.
struct VRelu { explicit VRelu(const UnaryParams*) {}
  __m512 operator()(__m512 x) const {
    const __m512 z = _mm512_setzero_ps();
    return _mm512_add_ps(_mm512_max_ps(z, x), z);
  } };
struct VHardSigmoid {
  __m512 a, b;
  explicit VHardSigmoid(const UnaryParams* p) : a(vset(p->alpha)), b(vset(p->beta)) {}
  __m512 operator()(__m512 x) const {
    const __m512 t = _mm512_add_ps(_mm512_mul_ps(x, a), b);
    return _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(vset(1.f), t));
  } };
struct VLeakyRelu {
  __m512 a;
  explicit VLeakyRelu(const UnaryParams* p) : a(vset(p->alpha)) {}
  __m512 operator()(__m512 x) const {
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
    return _mm512_mul_ps(x, _mm512_mask_blend_ps(pos, a, vset(1.f)));
  } };
struct VElu {
  __m512 a;
  explicit VElu(const UnaryParams* p) : a(vset(p->alpha)) {}
  __m512 operator()(__m512 x) const {
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
    return _mm512_mask_blend_ps(pos, _mm512_mul_ps(a, vm_expm1(x)), x);
  } };
struct VSelu {
  __m512 a, g;
  explicit VSelu(const UnaryParams* p) : a(vset(p->alpha)), g(vset(p->gamma)) {}
  __m512 operator()(__m512 x) const {
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
    return _mm512_mul_ps(_mm512_mask_blend_ps(pos, _mm512_mul_ps(a, vm_expm1(x)), x), g);
  } };
struct VSoftplus { explicit VSoftplus(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_softplus(x); } };
struct VGelu { explicit VGelu(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_gelu(x); } };
struct VGeluTanh { explicit VGeluTanh(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_gelu_tanh(x); } };
struct VSign { explicit VSign(const UnaryParams*) {}
  __m512 operator()(__m512 x) const {
    const __m512 z = _mm512_setzero_ps();
    __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, z, _CMP_GT_OQ), z, vset(1.f));
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, z, _CMP_LT_OQ), r, vset(-1.f));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, x);
  } };

struct VMish { explicit VMish(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_mish(x); } };
struct VTan { explicit VTan(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_tan(x); } };
struct VAsin { explicit VAsin(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_asin(x); } };
struct VAcos { explicit VAcos(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_acos(x); } };
struct VAtan { explicit VAtan(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_atan(x); } };
struct VSinh { explicit VSinh(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_sinh(x); } };
struct VCosh { explicit VCosh(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_cosh(x); } };
struct VAsinh { explicit VAsinh(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_asinh(x); } };
struct VAcosh { explicit VAcosh(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_acosh(x); } };
struct VAtanh { explicit VAtanh(const UnaryParams*) {}
  __m512 operator()(__m512 x) const { return vm_atanh(x); } };
// Same evaluation order as EHardSwish / ESoftsign / ... in unary_elem.inc.
struct VHardSwish { explicit VHardSwish(const UnaryParams*) {}
  __m512 operator()(__m512 x) const {
    const __m512 t = _mm512_mul_ps(_mm512_add_ps(x, vset(3.f)), vset(1.f / 6.f));
    const __m512 h = _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(vset(1.f), t));
    return _mm512_mul_ps(_mm512_max_ps(x, vset(-3.f)), h);
  } };
struct VSoftsign { explicit VSoftsign(const UnaryParams*) {}
  __m512 operator()(__m512 x) const {
    const __m512 xc = _mm512_max_ps(vset(-0x1p30f), _mm512_min_ps(vset(0x1p30f), x));
    return _mm512_div_ps(xc, _mm512_add_ps(vset(1.f), _mm512_andnot_ps(vsignmask(), xc)));
  } };
struct VCelu {
  __m512 a;
  explicit VCelu(const UnaryParams* p) : a(vset(p->alpha)) {}
  __m512 operator()(__m512 x) const {
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
    return _mm512_mask_blend_ps(pos, _mm512_mul_ps(a, vm_expm1(_mm512_div_ps(x, a))), x);
  } };
struct VThresholdedRelu {
  __m512 a;
  explicit VThresholdedRelu(const UnaryParams* p) : a(vset(p->alpha)) {}
  __m512 operator()(__m512 x) const {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, a, _CMP_LE_OQ), x, _mm512_setzero_ps());
  } };
struct VShrink {
  __m512 l, nl, b;
  explicit VShrink(const UnaryParams* p) : l(vset(p->alpha)), nl(vset(-p->alpha)), b(vset(p->beta)) {}
  __m512 operator()(__m512 x) const {
    const __m512 mid = _mm512_maskz_sub_ps(_mm512_cmp_ps_mask(x, l, _CMP_GT_OQ), x, b);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, nl, _CMP_GE_OQ), _mm512_add_ps(x, b), mid);
  } };

// ---- driver ----

// Ops with a pair(a, b) form get two vectors per call (interleaved
// dependency chains); the others one at a time. Same results either way.
template <class V, class = void>
struct HasPair : std::false_type {};
template <class V>
struct HasPair<V, std::void_t<decltype(std::declval<const V&>().pair(std::declval<__m512&>(),
                                                                     std::declval<__m512&>()))>>
    : std::true_type {};

template <class V>
static inline void apply4(const V& op, __m512& a0, __m512& a1, __m512& a2, __m512& a3) {
  if constexpr (HasPair<V>::value) {
    op.pair(a0, a1);
    op.pair(a2, a3);
  } else {
    a0 = op(a0);
    a1 = op(a1);
    a2 = op(a2);
    a3 = op(a3);
  }
}

template <class L, class V>
static void vrun(const void* xv, void* yv, int64_t n, const UnaryParams* p) {
  const V op(p);
  const typename L::T* x = static_cast<const typename L::T*>(xv);
  typename L::T* y = static_cast<typename L::T*>(yv);
  int64_t i = 0;
  if (p->stream && (reinterpret_cast<uintptr_t>(y) & 63) == 0) {
    for (; i + 64 <= n; i += 64) {
      __m512 a0 = L::load(x + i), a1 = L::load(x + i + 16);
      __m512 a2 = L::load(x + i + 32), a3 = L::load(x + i + 48);
      apply4(op, a0, a1, a2, a3);
      L::stream(y + i, a0);
      L::stream(y + i + 16, a1);
      L::stream(y + i + 32, a2);
      L::stream(y + i + 48, a3);
    }
    _mm_sfence();
  }
  for (; i + 64 <= n; i += 64) {
    __m512 a0 = L::load(x + i), a1 = L::load(x + i + 16);
    __m512 a2 = L::load(x + i + 32), a3 = L::load(x + i + 48);
    apply4(op, a0, a1, a2, a3);
    L::store(y + i, a0);
    L::store(y + i + 16, a1);
    L::store(y + i + 32, a2);
    L::store(y + i + 48, a3);
  }
  for (; i + 16 <= n; i += 16) L::store(y + i, op(L::load(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    L::store_tail(y + i, m, op(L::load_tail(x + i, m)));
  }
}

// IsNaN / IsInf on float32: compare masks expanded to 0/1 bytes.
template <bool kNaN>
static void vpred_f32(const void* xv, void* yv, int64_t n, const UnaryParams* p) {
  const float* x = static_cast<const float*>(xv);
  uint8_t* y = static_cast<uint8_t*>(yv);
  const __m128i one = _mm_set1_epi8(1);
  const __m512 pinf = _mm512_set1_ps(p->detect_positive ? std::numeric_limits<float>::infinity()
                                                        : std::numeric_limits<float>::quiet_NaN());
  const __m512 ninf = _mm512_set1_ps(p->detect_negative ? -std::numeric_limits<float>::infinity()
                                                        : std::numeric_limits<float>::quiet_NaN());
  auto mask = [&](__m512 v) -> __mmask16 {
    if (kNaN) return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_cmp_ps_mask(v, pinf, _CMP_EQ_OQ) | _mm512_cmp_ps_mask(v, ninf, _CMP_EQ_OQ);
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm_maskz_mov_epi8(mask(_mm512_loadu_ps(x + i)), one));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm_mask_storeu_epi8(y + i, m, _mm_maskz_mov_epi8(mask(_mm512_maskz_loadu_ps(m, x + i)), one));
  }
}

template <class V>
static UnaryFn vec_for(int32_t dtype) {
  switch (dtype) {
    case OLC_DTYPE_FLOAT: return &vrun<LF32, V>;
    case OLC_DTYPE_FLOAT16: return &vrun<LF16, V>;
    case OLC_DTYPE_BFLOAT16: return &vrun<LBF16, V>;
    default: return nullptr;
  }
}

static UnaryFn select_vector(Op op, int32_t dtype) {
  switch (op) {
    case Op::Abs: return vec_for<VAbs>(dtype);
    case Op::Neg: return vec_for<VNeg>(dtype);
    case Op::Exp: return vec_for<VExp>(dtype);
    case Op::Log: return vec_for<VLog>(dtype);
    case Op::Sqrt: return vec_for<VSqrt>(dtype);
    case Op::Reciprocal: return vec_for<VReciprocal>(dtype);
    case Op::Sigmoid: return vec_for<VSigmoid>(dtype);
    case Op::HardSigmoid: return vec_for<VHardSigmoid>(dtype);
    case Op::Tanh: return vec_for<VTanh>(dtype);
    case Op::Relu: return vec_for<VRelu>(dtype);
    case Op::LeakyRelu: return vec_for<VLeakyRelu>(dtype);
    case Op::Elu: return vec_for<VElu>(dtype);
    case Op::Selu: return vec_for<VSelu>(dtype);
    case Op::Softplus: return vec_for<VSoftplus>(dtype);
    case Op::Gelu: return vec_for<VGelu>(dtype);
    case Op::GeluTanh: return vec_for<VGeluTanh>(dtype);
    case Op::Erf: return vec_for<VErf>(dtype);
    case Op::Floor: return vec_for<VFloor>(dtype);
    case Op::Ceil: return vec_for<VCeil>(dtype);
    case Op::Round: return vec_for<VRound>(dtype);
    case Op::Sign: return vec_for<VSign>(dtype);
    case Op::Sin: return vec_for<VSin>(dtype);
    case Op::Cos: return vec_for<VCos>(dtype);
    case Op::HardSwish: return vec_for<VHardSwish>(dtype);
    case Op::Mish: return vec_for<VMish>(dtype);
    case Op::Softsign: return vec_for<VSoftsign>(dtype);
    case Op::Celu: return vec_for<VCelu>(dtype);
    case Op::ThresholdedRelu: return vec_for<VThresholdedRelu>(dtype);
    case Op::Shrink: return vec_for<VShrink>(dtype);
    case Op::Tan: return vec_for<VTan>(dtype);
    case Op::Asin: return vec_for<VAsin>(dtype);
    case Op::Acos: return vec_for<VAcos>(dtype);
    case Op::Atan: return vec_for<VAtan>(dtype);
    case Op::Sinh: return vec_for<VSinh>(dtype);
    case Op::Cosh: return vec_for<VCosh>(dtype);
    case Op::Asinh: return vec_for<VAsinh>(dtype);
    case Op::Acosh: return vec_for<VAcosh>(dtype);
    case Op::Atanh: return vec_for<VAtanh>(dtype);
    case Op::IsNaN: return dtype == OLC_DTYPE_FLOAT ? &vpred_f32<true> : nullptr;
    case Op::IsInf: return dtype == OLC_DTYPE_FLOAT ? &vpred_f32<false> : nullptr;
    default: return nullptr;
  }
}

UnaryFn select(Op op, int32_t dtype) {
  UnaryFn f = select_vector(op, dtype);
  return f ? f : select_generic(op, dtype);
}

}  // namespace avx512
}  // namespace olc_ew
