// Shared declarations of the multi-input elementwise kernels (binary ops,
// variadic Sum/Mean/Min/Max, Where, Clip, SwiGLU): op lists, compute
// function types and the per-ISA selectors. Plain data only, so this header
// is safe to include from TUs compiled with different ISA flags.
//
// Compute functions take element counts and pointers and only assert; the
// adapters (binary_adapter.cc, variadic_adapter.cc, where_clip_adapter.cc)
// validate attributes, types and shapes, build the broadcast plan and split
// the work.
#ifndef OLC_ELEMENTWISE_BINARY_COMMON_H_
#define OLC_ELEMENTWISE_BINARY_COMMON_H_

#include <cstdint>

namespace olc_ew {

#define OLC_EW_BINARY_OPS(X)                                                                   \
  X(Add) X(Sub) X(Mul) X(Div) X(Mod) X(Pow) X(Equal) X(Greater) X(GreaterOrEqual) X(Less)     \
  X(LessOrEqual) X(And) X(Or) X(Xor) X(BitwiseAnd) X(BitwiseOr) X(BitwiseXor) X(BitShift)     \
  X(PRelu)

enum class BinOp : int {
#define OLC_EW_BENUM(name) name,
  OLC_EW_BINARY_OPS(OLC_EW_BENUM)
#undef OLC_EW_BENUM
  kCount
};

// Attribute-dependent variants resolved at create(): Mod.fmod and
// BitShift.direction select different compute functions.
struct BinaryVariant {
  bool fmod = false;        // Mod: 1 = C remainder (truncated quotient)
  bool shift_left = false;  // BitShift: direction == "LEFT"
};

// y[k] = op(a[k * sa], b[k * sb]) for k in [0, n), where (sa, sb) is
// (1, 1) for vv, (0, 1) for sv and (1, 0) for vs. y never overlaps a or b
// except when y == a exactly (in place on a full input 0).
using BinaryFn = void (*)(const void* a, const void* b, void* y, int64_t n);
constexpr int64_t kStreamPieceBytes = 256;
// The *_stream variants compute the same values but write the 64-byte
// aligned body of y with non-temporal stores, in pieces of
// kStreamPieceBytes, for outputs far larger than the caches; the caller
// issues stream_fence() once after its last call.
// nullptr where the level has no such stores or the op is bound by its
// arithmetic rather than by memory.
struct BinaryFns {
  BinaryFn vv = nullptr, sv = nullptr, vs = nullptr;
  BinaryFn vv_stream = nullptr, sv_stream = nullptr, vs_stream = nullptr;
};

// float32 Pow with an exponent that is the same for every element (a
// constant of the model, or a one-element feed) and one of these values:
// an exact function of the base (pow_f32.inc), chosen at create() for a
// constant and per run for a one-element feed.
enum class PowConst : int { None, Zero, One, Two, Three, Half, MinusOne, MinusHalf, kCount };

enum class VarOp : int { Sum, Mean, Min, Max };

// y[k] = op over j of in[j][k * inc[j]] for k in [0, n); inc[j] is 0 or 1.
// Inputs are combined left to right in the compute type (float for
// float16/bfloat16), per block of the output, then stored once. y may be
// the same buffer as in[0] (then inc[0] == 1). At most kMaxVariadicInputs
// inputs (the broadcast plan's limit). select_variadic_stream gives the
// variant with non-temporal stores (as BinaryFns' *_stream), or nullptr.
constexpr int kMaxVariadicInputs = 16;
using VariadicFn = void (*)(const void* const* in, const int64_t* inc, int n_in, void* y, int64_t n);

// out[k] = c[k * ic] ? x[k * ix] : y[k * iy], elements of `size` bytes;
// one function per element size, the strides (0 or 1) passed as a mask
// (bit 0: c, bit 1: x, bit 2: y). select_where_stream gives the variant
// with non-temporal stores (as BinaryFns' *_stream), nullptr where none.
using WhereFn = void (*)(const uint8_t* c, const void* x, const void* y, void* out, int64_t n, int inc_mask);

// y[k] = min(max(x[k], lo), hi) with NaN propagated; lo and hi point to one
// value of the element type each, or are nullptr when absent.
// select_clip_stream gives the variant with non-temporal stores, or nullptr.
using ClipFn = void (*)(const void* x, void* y, int64_t n, const void* lo, const void* hi);

// y[k] = a[k] * sigmoid(alpha * a[k]) * b[k]
using SwiGluFn = void (*)(const void* a, const void* b, void* y, int64_t n, double alpha);

#define OLC_EW_DECLARE_NARY_SELECT(isa)                                                          \
  namespace isa {                                                                                \
  bool select_binary(BinOp op, BinaryVariant v, int32_t a_dtype, int32_t b_dtype, BinaryFns* out); \
  bool select_pow_const(PowConst c, BinaryFns* out);                                             \
  VariadicFn select_variadic(VarOp op, int32_t dtype);                                           \
  VariadicFn select_variadic_stream(VarOp op, int32_t dtype);                                    \
  WhereFn select_where(int32_t elem_size);                                                        \
  WhereFn select_where_stream(int32_t elem_size);                                                 \
  ClipFn select_clip(int32_t dtype);                                                              \
  ClipFn select_clip_stream(int32_t dtype);                                                       \
  SwiGluFn select_swiglu(int32_t dtype);                                                          \
  void stream_fence();                                                                             \
  }
// Each returns nullptr / false when that level has no variant; callers
// then try the next lower level. The scalar level covers every supported
// combination, so it also defines what is supported.
OLC_EW_DECLARE_NARY_SELECT(nary_scalar)
OLC_EW_DECLARE_NARY_SELECT(nary_avx2)
OLC_EW_DECLARE_NARY_SELECT(nary_avx512)
#undef OLC_EW_DECLARE_NARY_SELECT

}  // namespace olc_ew

#endif  // OLC_ELEMENTWISE_BINARY_COMMON_H_
