// Small helpers shared by the adapters (portable code only).
#ifndef OLC_MATMUL_ADAPTER_UTIL_H_
#define OLC_MATMUL_ADAPTER_UTIL_H_

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "olc/kernel_abi.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace olc_mm {

const olc_core_api* core_api();
void set_core_api(const olc_core_api* api);

__attribute__((format(printf, 3, 4))) static inline void* fail_create(char* error, size_t size, const char* fmt,
                                                                       ...) {
  if (error && size) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(error, size, fmt, ap);
    va_end(ap);
  }
  return nullptr;
}

__attribute__((format(printf, 2, 3))) static inline int32_t fail_run(olc_context* ctx, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return core_api()->set_error(ctx, msg);
}

static inline std::string shape_str(const olc_tensor& t) {
  std::string s = "[";
  for (int32_t d = 0; d < t.ndim; ++d) {
    if (d) s += ", ";
    s += std::to_string(static_cast<long long>(t.shape[d]));
  }
  return s + "]";
}

static inline bool is_float_type(int32_t dt) {
  return dt == OLC_DTYPE_FLOAT || dt == OLC_DTYPE_DOUBLE || dt == OLC_DTYPE_FLOAT16 || dt == OLC_DTYPE_BFLOAT16;
}

// C ABI entry points never let a C++ exception escape: allocation failures
// (or any other exception) become an error message.
template <int32_t (*Run)(const void*, olc_context*, int32_t, const olc_tensor*, int32_t)>
int32_t guarded_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs,
                    int32_t n_outputs) {
  try {
    return Run(state, ctx, n_inputs, inputs, n_outputs);
  } catch (const std::bad_alloc&) {
    return fail_run(ctx, "out of memory");
  } catch (const std::exception& e) {
    return fail_run(ctx, "internal error: %s", e.what());
  } catch (...) {
    return fail_run(ctx, "internal error");
  }
}

template <void* (*Create)(const olc_core_api*, const olc_node_info*, char*, size_t)>
void* guarded_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t size) {
  try {
    return Create(api, node, error, size);
  } catch (const std::bad_alloc&) {
    return fail_create(error, size, "out of memory");
  } catch (const std::exception& e) {
    return fail_create(error, size, "internal error: %s", e.what());
  } catch (...) {
    return fail_create(error, size, "internal error");
  }
}

// Whether the CPU has PREFETCHW (CPUID 0x80000001 ECX bit 8: Intel since
// Broadwell, every AMD64 CPU).
static inline bool has_prefetchw() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8));
  }();
  return has;
#else
  return false;
#endif
}

// Asks for the cache lines of [p, p + bytes) in a writable state (at most
// kClaimMaxBytes of them) ahead of a burst of stores. A recycled output
// buffer that a parallel node has just read on every thread (a pointwise
// GEMM reads all of its input) is shared by the cores' caches, and each
// store waits for the other copies of its line to be invalidated; asked
// for before the compute, those invalidations overlap it. A hint: nothing
// where the CPU lacks PREFETCHW.
constexpr int64_t kClaimMaxBytes = 16 << 10;
static inline void claim_for_write(const void* p, int64_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  if (!has_prefetchw()) return;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(std::min(bytes, kClaimMaxBytes));
  for (uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; a < end; a += 64)
    __asm__ volatile("prefetchw %0" : : "m"(*reinterpret_cast<const char*>(a)));
#else
  (void)p;
  (void)bytes;
#endif
}

// Attribute reader: checks names against the allowed list and types.
struct AttrReader {
  const olc_node_info* node;
  char* error;
  size_t size;
  bool ok = true;

  // Returns false (error set) when an attribute is not in `allowed`.
  bool check_known(std::initializer_list<const char*> allowed) {
    for (int32_t k = 0; k < node->n_attributes; ++k) {
      const char* n = node->attributes[k].name ? node->attributes[k].name : "";
      bool found = false;
      for (const char* a : allowed) found = found || !std::strcmp(a, n);
      if (!found) {
        fail_create(error, size, "unknown attribute '%s'", n);
        return ok = false;
      }
    }
    return true;
  }
  const olc_attribute* find(const char* name) const {
    for (int32_t k = 0; k < node->n_attributes; ++k)
      if (node->attributes[k].name && !std::strcmp(node->attributes[k].name, name)) return &node->attributes[k];
    return nullptr;
  }
  int64_t get_int(const char* name, int64_t def) {
    const olc_attribute* a = find(name);
    if (!a) return def;
    if (a->type != OLC_ATTR_INT) {
      fail_create(error, size, "attribute '%s' must be an int", name);
      ok = false;
      return def;
    }
    return a->i;
  }
  double get_float(const char* name, double def) {
    const olc_attribute* a = find(name);
    if (!a) return def;
    if (a->type != OLC_ATTR_FLOAT) {
      fail_create(error, size, "attribute '%s' must be a float", name);
      ok = false;
      return def;
    }
    return a->f;
  }
};

}  // namespace olc_mm

#endif  // OLC_MATMUL_ADAPTER_UTIL_H_
