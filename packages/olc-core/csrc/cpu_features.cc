// CPU feature detection and the OLC_SIMD cap.
//
// A feature bit means "usable here": the CPU reports it (cpuid) AND the OS
// saves the register state it needs (xgetbv/XCR0). A CPU with AVX-512 under
// an OS that does not enable ZMM state reports no AVX-512 bits at all.

#include "cpu_features.h"

#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(_M_X64)
#define OLC_X86_64 1
#if defined(_MSC_VER) && !defined(__clang__)
#include <immintrin.h>
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace olc {
namespace {

struct Detected {
  uint64_t features = 0;
  int32_t level = OLC_SIMD_SCALAR;
};

#ifdef OLC_X86_64

struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
#if defined(_MSC_VER) && !defined(__clang__)
  int out[4];
  __cpuidex(out, static_cast<int>(leaf), static_cast<int>(subleaf));
  r.eax = out[0];
  r.ebx = out[1];
  r.ecx = out[2];
  r.edx = out[3];
#else
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
#endif
  return r;
}

// Only called when cpuid reports OSXSAVE, otherwise xgetbv faults.
uint64_t xgetbv0() {
#if defined(_MSC_VER) && !defined(__clang__)
  return _xgetbv(0);
#else
  // Inline asm rather than _xgetbv(): the intrinsic needs -mxsave on this
  // (portable) translation unit.
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
#endif
}

inline bool bit(uint32_t reg, int n) { return (reg >> n) & 1u; }

// XCR0 state components.
constexpr uint64_t kXcr0Sse = 1ull << 1;
constexpr uint64_t kXcr0Ymm = 1ull << 2;
constexpr uint64_t kXcr0Opmask = 1ull << 5;
constexpr uint64_t kXcr0ZmmHi256 = 1ull << 6;
constexpr uint64_t kXcr0Hi16Zmm = 1ull << 7;
constexpr uint64_t kXcr0TileCfg = 1ull << 17;
constexpr uint64_t kXcr0TileData = 1ull << 18;

// Linux keeps AMX tile data disabled per process until it is requested
// (arch_prctl ARCH_REQ_XCOMP_PERM); XCR0 alone would claim AMX is usable and
// the first tile instruction would then fault with SIGILL.
bool request_amx_permission() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return true;
#endif
}

Detected detect() {
  Detected d;
  const uint32_t max_leaf = cpuid(0, 0).eax;
  if (max_leaf < 1) return d;

  const Regs l1 = cpuid(1, 0);
  uint64_t f = 0;
  if (bit(l1.edx, 26)) f |= OLC_CPU_SSE2;
  if (bit(l1.ecx, 0)) f |= OLC_CPU_SSE3;
  if (bit(l1.ecx, 9)) f |= OLC_CPU_SSSE3;
  if (bit(l1.ecx, 19)) f |= OLC_CPU_SSE41;
  if (bit(l1.ecx, 20)) f |= OLC_CPU_SSE42;

  uint64_t xcr0 = 0;
  if (bit(l1.ecx, 27)) xcr0 = xgetbv0();  // OSXSAVE
  const bool os_ymm = (xcr0 & (kXcr0Sse | kXcr0Ymm)) == (kXcr0Sse | kXcr0Ymm);
  const uint64_t zmm_mask =
      kXcr0Sse | kXcr0Ymm | kXcr0Opmask | kXcr0ZmmHi256 | kXcr0Hi16Zmm;
  const bool os_zmm = (xcr0 & zmm_mask) == zmm_mask;
  const bool os_amx =
      (xcr0 & (kXcr0TileCfg | kXcr0TileData)) == (kXcr0TileCfg | kXcr0TileData);

  // FMA and F16C are VEX-encoded: usable only with YMM state enabled.
  if (os_ymm) {
    if (bit(l1.ecx, 28)) f |= OLC_CPU_AVX;
    if (bit(l1.ecx, 12)) f |= OLC_CPU_FMA;
    if (bit(l1.ecx, 29)) f |= OLC_CPU_F16C;
  }

  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    if (os_ymm && (f & OLC_CPU_AVX) && bit(l7.ebx, 5)) f |= OLC_CPU_AVX2;
    // AVX-VNNI: leaf 7 subleaf 1, eax bit 4 (VEX-encoded, YMM state only).
    if (os_ymm && (f & OLC_CPU_AVX2) && l7.eax >= 1 && bit(cpuid(7, 1).eax, 4)) f |= OLC_CPU_AVX_VNNI;
    if (os_zmm && bit(l7.ebx, 16)) {
      f |= OLC_CPU_AVX512F;
      if (bit(l7.ebx, 17)) f |= OLC_CPU_AVX512DQ;
      if (bit(l7.ebx, 30)) f |= OLC_CPU_AVX512BW;
      if (bit(l7.ebx, 31)) f |= OLC_CPU_AVX512VL;
      if (bit(l7.ecx, 11)) f |= OLC_CPU_AVX512_VNNI;
      if (bit(l7.edx, 23)) f |= OLC_CPU_AVX512_FP16;
      if (l7.eax >= 1 && bit(cpuid(7, 1).eax, 5)) f |= OLC_CPU_AVX512_BF16;
    }
    if (os_amx && bit(l7.edx, 24) && request_amx_permission()) {
      f |= OLC_CPU_AMX_TILE;
      if (bit(l7.edx, 25)) f |= OLC_CPU_AMX_INT8;
      if (bit(l7.edx, 22)) f |= OLC_CPU_AMX_BF16;
    }
  }

  d.features = f;
  const uint64_t avx2_level = OLC_CPU_AVX | OLC_CPU_AVX2 | OLC_CPU_FMA | OLC_CPU_F16C;
  const uint64_t avx512_level =
      OLC_CPU_AVX512F | OLC_CPU_AVX512BW | OLC_CPU_AVX512VL | OLC_CPU_AVX512DQ;
  if ((f & avx2_level) == avx2_level) {
    d.level = OLC_SIMD_AVX2;
    if ((f & avx512_level) == avx512_level) d.level = OLC_SIMD_AVX512;
  }
  return d;
}

#else  // not x86-64: no vector paths yet, everything runs the scalar code.

Detected detect() { return Detected{}; }

#endif

const Detected& detected() {
  static const Detected d = detect();  // thread-safe one-time init (C++11)
  return d;
}

// Features that stay visible under each cap.
constexpr uint64_t kScalarFeatures =
    OLC_CPU_SSE2 | OLC_CPU_SSE3 | OLC_CPU_SSSE3 | OLC_CPU_SSE41 | OLC_CPU_SSE42;
constexpr uint64_t kAvx2Features =
    kScalarFeatures | OLC_CPU_AVX | OLC_CPU_AVX2 | OLC_CPU_FMA | OLC_CPU_F16C | OLC_CPU_AVX_VNNI;

// -1: uncapped. Written by the env var (once) and by set_simd_cap().
std::atomic<int32_t> g_cap{-1};
std::once_flag g_env_once;
std::string g_env_error;  // written once under g_env_once, read-only after

std::string lower_trimmed(const char* s) {
  std::string out;
  for (const char* p = s; *p; ++p) {
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*p))));
  }
  const auto first = out.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return std::string();
  const auto last = out.find_last_not_of(" \t\r\n");
  return out.substr(first, last - first + 1);
}

void read_env_once() {
  std::call_once(g_env_once, [] {
    const char* raw = std::getenv("OLC_SIMD");
    if (raw == nullptr) return;
    const std::string v = lower_trimmed(raw);
    int32_t cap = -1;
    if (v.empty() || v == "native") {
      cap = -1;
    } else if (v == "scalar" || v == "sse2") {
      cap = OLC_SIMD_SCALAR;
    } else if (v == "avx2") {
      cap = OLC_SIMD_AVX2;
    } else if (v == "avx512") {
      cap = OLC_SIMD_AVX512;
    } else {
      // Never abort on a bad value: run uncapped, and let the Python side
      // raise with this message (olc_core.simd checks it at import).
      g_env_error = std::string("OLC_SIMD='") + raw +
                    "' is not a SIMD level; accepted values (case-insensitive): "
                    "scalar, sse2, avx2, avx512, native, or empty";
      return;
    }
    g_cap.store(cap, std::memory_order_relaxed);
  });
}

}  // namespace

uint64_t detected_cpu_features() { return detected().features; }

int32_t detected_simd_level() { return detected().level; }

int32_t simd_cap() {
  read_env_once();
  return g_cap.load(std::memory_order_relaxed);
}

void set_simd_cap(int32_t level) {
  if (level > OLC_SIMD_AVX512) {
    throw std::invalid_argument("set_simd_cap: level " + std::to_string(level) +
                                " is not a SIMD level (0 scalar, 1 avx2, 2 avx512, "
                                "< 0 removes the cap)");
  }
  read_env_once();  // so that a later first read cannot overwrite this cap
  g_cap.store(level < 0 ? -1 : level, std::memory_order_relaxed);
}

int32_t simd_level() {
  const int32_t level = detected_simd_level();
  const int32_t cap = simd_cap();
  return (cap >= 0 && cap < level) ? cap : level;
}

uint64_t cpu_features() {
  const uint64_t f = detected_cpu_features();
  switch (simd_cap()) {
    case OLC_SIMD_SCALAR:
      return f & kScalarFeatures;
    case OLC_SIMD_AVX2:
      return f & kAvx2Features;
    default:
      return f;
  }
}

const std::string& simd_env_error() {
  read_env_once();
  return g_env_error;
}

namespace {

struct CacheLevel {
  int64_t bytes = 0;
  int32_t shared_by = 1;
};

// First line of a sysfs file, without the newline; false when unreadable.
bool read_sysfs_line(const std::string& path, char* buf, size_t size) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return false;
  const bool ok = std::fgets(buf, static_cast<int>(size), f) != nullptr;
  std::fclose(f);
  if (ok) buf[std::strcspn(buf, "\n")] = '\0';
  return ok;
}

// "32K", "8192K", "1M" or a plain byte count.
int64_t parse_cache_size(const char* s) {
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (v <= 0) return 0;
  if (*end == 'K') return static_cast<int64_t>(v) << 10;
  if (*end == 'M') return static_cast<int64_t>(v) << 20;
  if (*end == 'G') return static_cast<int64_t>(v) << 30;
  return v;
}

// Logical CPUs in a list such as "0-3,8-11".
int32_t count_cpu_list(const char* s) {
  int32_t n = 0;
  while (*s) {
    char* end = nullptr;
    const long lo = std::strtol(s, &end, 10);
    if (end == s) break;
    long hi = lo;
    s = end;
    if (*s == '-') {
      hi = std::strtol(s + 1, &end, 10);
      s = end;
    }
    n += static_cast<int32_t>(hi >= lo ? hi - lo + 1 : 1);
    if (*s == ',') ++s;
  }
  return n > 0 ? n : 1;
}

// Levels 1-3 (index 0 unused), read once.
const std::array<CacheLevel, 4>& cache_levels() {
  static const std::array<CacheLevel, 4> levels = [] {
    std::array<CacheLevel, 4> l{};
    const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
    for (int i = 0; i < 16; ++i) {
      const std::string dir = base + std::to_string(i) + "/";
      char level[16], type[32], size[32], shared[256];
      if (!read_sysfs_line(dir + "level", level, sizeof level) || !read_sysfs_line(dir + "type", type, sizeof type) ||
          !read_sysfs_line(dir + "size", size, sizeof size))
        continue;
      if (std::strncmp(type, "Data", 4) && std::strncmp(type, "Unified", 7)) continue;
      const int lv = std::atoi(level);
      if (lv < 1 || lv > 3) continue;
      l[lv].bytes = parse_cache_size(size);
      l[lv].shared_by = read_sysfs_line(dir + "shared_cpu_list", shared, sizeof shared) ? count_cpu_list(shared) : 1;
    }
    return l;
  }();
  return levels;
}

}  // namespace

int64_t data_cache_bytes(int32_t level, int32_t* shared_by) {
  const CacheLevel c = level >= 1 && level <= 3 ? cache_levels()[level] : CacheLevel{};
  if (shared_by) *shared_by = c.shared_by;
  return c.bytes;
}

}  // namespace olc
