#include "attn_driver.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <vector>

namespace olc_attn {

void key_bounds(const AttnProblem& p, int64_t b, int64_t i, int64_t* lo, int64_t* hi) {
  const int64_t pos = (p.q_off ? p.q_off[b] : 0) + i;
  int64_t h = p.T, l = 0;
  if (p.kv_len) h = std::min(h, p.kv_len[b]);
  if (p.causal) h = std::min(h, pos + 1);
  if (p.right >= 0) h = std::min(h, pos + p.right + 1);
  if (p.left >= 0) l = std::max<int64_t>(l, pos - p.left);
  *lo = l;
  *hi = std::max(h, l);
}

namespace {

struct AttendJob {
  const IsaKernels* k;
  const AttnProblem* p;
  const WorkItem* units;
  std::atomic<bool>* oom;
};

void attend_range(void* user, int64_t begin, int64_t end) {
  const AttendJob& j = *static_cast<const AttendJob*>(user);
  for (int64_t u = begin; u < end; ++u) {
    try {
      j.k->attend(j.p, &j.units[u]);
    } catch (...) {  // std::bad_alloc of the scratch: reported after the loop
      j.oom->store(true);
    }
  }
}

struct ReduceJob {
  const IsaKernels* k;
  const AttnProblem* p;
  const WorkItem* items;
  const int64_t* first;      // per split item: its first part
  const int64_t* count;
  float* const* parts;
};

void reduce_range(void* user, int64_t begin, int64_t end) {
  const ReduceJob& j = *static_cast<const ReduceJob*>(user);
  for (int64_t u = begin; u < end; ++u) j.k->reduce(j.p, &j.items[u], j.parts + j.first[u], j.count[u]);
}

}  // namespace

int32_t run_attention(const olc_core_api* api, olc_context* ctx, const IsaKernels* k, const AttnProblem& problem,
                      const EngineTuning& tune) {
  AttnProblem p = problem;
  const bool empty = p.B == 0 || p.Hq == 0 || p.Sq == 0 || p.Dv == 0;
  const int64_t G = empty ? 1 : p.Hq / p.Hkv;
  const int64_t br = std::max<int64_t>(1, std::min(p.Sq, tune.rows / G));
  const int64_t nqb = empty ? 0 : (p.Sq + br - 1) / br;
  // The caches: written by the work items themselves when each kv head has
  // one item (decode: its rows are then read back from cache), else in a
  // pass of their own before the attention.
  const bool fused = nqb == 1 && (p.fill_k || p.fill_v);
  if (!fused) {
    if (p.fill_k) write_cache(api, ctx, *p.fill_k);
    if (p.fill_v) write_cache(api, ctx, *p.fill_v);
    p.fill_k = p.fill_v = nullptr;
  }
  if (empty) return OLC_OK;
  std::vector<WorkItem> items;
  items.reserve(static_cast<size_t>(p.B * p.Hkv * nqb));
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t g = 0; g < p.Hkv; ++g)
      for (int64_t qb = 0; qb < nqb; ++qb) {
        WorkItem w;
        w.b = b;
        w.g = g;
        if (fused) w.fill1 = p.T;
        w.i0 = qb * br;
        w.i1 = std::min(p.Sq, w.i0 + br);
        if (p.qk) {
          w.t0 = 0;  // every score is an output
          w.t1 = p.T;
        } else {
          w.t0 = p.T;
          w.t1 = 0;
          for (int64_t i = w.i0; i < w.i1; ++i) {
            int64_t lo, hi;
            key_bounds(p, b, i, &lo, &hi);
            if (hi > lo) {
              w.t0 = std::min(w.t0, lo);
              w.t1 = std::max(w.t1, hi);
            }
          }
          if (w.t1 <= w.t0) w.t0 = w.t1 = 0;
        }
        items.push_back(w);
      }

  // Split-KV: with fewer items than about four per thread, an item's keys
  // are cut into parts of at least split_min_keys (whole tiles), each part
  // keeps its own max / sum / accumulator, and a second pass combines them.
  const int64_t conc = api->concurrency(ctx);
  const int64_t n_items = static_cast<int64_t>(items.size());
  const int64_t want = (conc > 1 && !p.qk && n_items < 4 * conc) ? (4 * conc + n_items - 1) / n_items : 1;
  const int64_t R = G * br;
  const int64_t part_floats = 2 * R + R * p.Dv;
  std::vector<WorkItem> units;
  std::vector<int64_t> first, count;
  std::vector<WorkItem> split_items;
  int64_t n_parts = 0;
  if (want > 1) {
    for (const WorkItem& w : items) {
      const int64_t keys = w.t1 - w.t0;
      const int64_t ns = std::max<int64_t>(1, std::min(want, keys / std::max<int64_t>(1, tune.split_min_keys)));
      if (ns > 1) n_parts += ns;
    }
  }
  std::vector<float> parts_buf;
  std::vector<float*> parts;
  if (n_parts > 0) {
    try {
      parts_buf.resize(static_cast<size_t>(n_parts * part_floats));
    } catch (const std::bad_alloc&) {
      return api->set_error(ctx, "out of memory (split-KV partial results)");
    }
    parts.reserve(static_cast<size_t>(n_parts));
  }
  units.reserve(static_cast<size_t>(n_items + n_parts));
  for (const WorkItem& w : items) {
    const int64_t keys = w.t1 - w.t0;
    const int64_t ns = n_parts > 0 ? std::max<int64_t>(1, std::min(want, keys / std::max<int64_t>(1, tune.split_min_keys)))
                                   : 1;
    if (ns == 1) {
      units.push_back(w);
      continue;
    }
    first.push_back(static_cast<int64_t>(parts.size()));
    count.push_back(ns);
    split_items.push_back(w);
    const int64_t tiles = (keys + 63) / 64;
    for (int64_t s = 0; s < ns; ++s) {
      WorkItem u = w;
      u.t0 = w.t0 + (tiles * s / ns) * 64;
      u.t1 = std::min(w.t1, w.t0 + (tiles * (s + 1) / ns) * 64);
      if (fused) {  // the parts split the item's cache rows: the first and last take the rows around [t0, t1)
        u.fill0 = s == 0 ? 0 : u.t0;
        u.fill1 = s == ns - 1 ? p.T : u.t1;
      }
      u.part = parts_buf.data() + static_cast<size_t>(parts.size() * part_floats);
      parts.push_back(u.part);
      units.push_back(u);
    }
  }

  std::atomic<bool> oom{false};
  AttendJob job{k, &p, units.data(), &oom};
  api->parallel_for(ctx, static_cast<int64_t>(units.size()), 1, 0, &attend_range, &job);
  if (oom.load()) return api->set_error(ctx, "out of memory (attention scratch)");
  if (!split_items.empty()) {
    ReduceJob rj{k, &p, split_items.data(), first.data(), count.data(), parts.data()};
    api->parallel_for(ctx, static_cast<int64_t>(split_items.size()), 1, 0, &reduce_range, &rj);
  }
  return OLC_OK;
}

void fill_cache_rows(const CacheWrite& c, int64_t b, int64_t h, int64_t t0, int64_t t1) {
  const size_t es = c.dt == kF32 ? 4 : 2;
  const size_t row = static_cast<size_t>(c.D) * es;
  char* out = static_cast<char*>(c.out) + static_cast<size_t>((b * c.H + h) * c.T) * row;
  const int64_t pl = std::min(c.T, c.past_len ? c.past_len[b] : c.P);
  const char* past = static_cast<const char*>(c.past.data) + static_cast<size_t>(b * c.past.sb + h * c.past.sh) * es;
  const char* cur = static_cast<const char*>(c.cur.data) + static_cast<size_t>(b * c.cur.sb + h * c.cur.sh) * es;
  // Runs of past rows go in one copy when the past is row-contiguous: a
  // long copy moves whole cache lines without reading them first.
  auto copy_past = [&](int64_t a, int64_t z) {
    if (a >= z) return;
    if (c.past.ss == c.D) {
      std::memcpy(out + a * row, past + static_cast<size_t>(a * c.past.ss) * es, static_cast<size_t>(z - a) * row);
      return;
    }
    for (int64_t t = a; t < z; ++t) std::memcpy(out + t * row, past + static_cast<size_t>(t * c.past.ss) * es, row);
  };
  copy_past(t0, std::min(t1, pl));
  const int64_t n0 = std::max(t0, pl), n1 = std::min(t1, pl + c.S);
  for (int64_t t = n0; t < n1; ++t) {
    const int64_t s = t - pl;
    const char* src = cur + static_cast<size_t>(s * c.cur.ss) * es;
    if (c.bias) {  // the new row plus its head's bias (in float32, a chunk at a time), then rotated in place
      float buf[256];
      const float* bh = c.bias + h * c.D;
      for (int64_t d0 = 0; d0 < c.D; d0 += 256) {
        const int64_t n = std::min<int64_t>(256, c.D - d0);
        c.k->to_f32(c.dt, src + static_cast<size_t>(d0) * es, buf, n);
        for (int64_t d = 0; d < n; ++d) buf[d] += bh[d0 + d];
        c.k->from_f32(c.dt, buf, out + t * row + static_cast<size_t>(d0) * es, n);
      }
      src = out + t * row;
    }
    if (c.rope) c.k->rope_row(c.dt, c.rope, c.rope->pos[b * c.rope->pos_sb + s], src, out + t * row, c.D);
    else if (!c.bias) std::memcpy(out + t * row, src, row);
  }
  const int64_t r0 = std::max(t0, pl + c.S);
  copy_past(r0, std::min(t1, c.P));
  const int64_t z0 = std::max(r0, c.P);
  if (z0 < t1) std::memset(out + z0 * row, 0, static_cast<size_t>(t1 - z0) * row);
}

namespace {

void cache_range(void* user, int64_t begin, int64_t end) {
  const CacheWrite& c = *static_cast<const CacheWrite*>(user);
  for (int64_t bh = begin; bh < end; ++bh) fill_cache_rows(c, bh / c.H, bh % c.H, 0, c.T);
}

}  // namespace

void write_cache(const olc_core_api* api, olc_context* ctx, const CacheWrite& c) {
  const int64_t n = c.B * c.H;
  if (n == 0 || c.T == 0 || c.D == 0) return;
  const int64_t per = std::max<int64_t>(1, c.T * c.D);
  api->parallel_for(ctx, n, std::max<int64_t>(1, 65536 / per), 0, &cache_range, const_cast<CacheWrite*>(&c));
}

std::vector<float> pack_weights(const IsaKernels* k, int dt, int64_t K, int64_t N, const void* W, int64_t* ldw) {
  const int64_t w = k->width;
  *ldw = (N + w - 1) / w * w;
  std::vector<float> out(static_cast<size_t>(K * *ldw), 0.0f);
  const size_t es = dt == kF32 ? 4 : 2;
  for (int64_t r = 0; r < K; ++r)
    k->to_f32(dt, static_cast<const char*>(W) + static_cast<size_t>(r * N) * es, out.data() + r * *ldw, N);
  return out;
}

namespace {

constexpr int64_t kProjRows = 48;   // rows of A per work item
constexpr int64_t kProjKc = 256;    // depth of a W panel
constexpr int64_t kProjNc = 256;    // width of a W panel (floats)

struct ProjJob {
  const IsaKernels* k;
  int dt;
  int64_t M, K, N, ldw;
  const void* A;
  const float* W;
  const float* bias;  // float32, N values, or null
  void* C;
  std::atomic<bool>* oom;
};

void proj_range(void* user, int64_t begin, int64_t end) {
  const ProjJob& j = *static_cast<const ProjJob*>(user);
  const size_t es = j.dt == kF32 ? 4 : 2;
  std::vector<float> a, c;
  try {
    a.resize(static_cast<size_t>(kProjRows * j.K));
    c.resize(static_cast<size_t>(kProjRows * kProjNc));
  } catch (...) {
    j.oom->store(true);
    return;
  }
  for (int64_t blk = begin; blk < end; ++blk) {
    const int64_t r0 = blk * kProjRows, rows = std::min(kProjRows, j.M - r0);
    j.k->to_f32(j.dt, static_cast<const char*>(j.A) + static_cast<size_t>(r0 * j.K) * es, a.data(), rows * j.K);
    for (int64_t n0 = 0; n0 < j.ldw; n0 += kProjNc) {
      const int64_t nc = std::min(kProjNc, j.ldw - n0);
      for (int64_t k0 = 0; k0 < j.K; k0 += kProjKc) {
        const int64_t kc = std::min(kProjKc, j.K - k0);
        j.k->gemm(a.data() + k0, j.K, j.W + k0 * j.ldw + n0, j.ldw, kc, c.data(), kProjNc, rows, nc, k0 > 0);
      }
      if (j.K == 0) std::fill(c.begin(), c.end(), 0.0f);
      const int64_t nv = std::min(nc, j.N - n0);
      if (nv <= 0) continue;
      for (int64_t r = 0; r < rows; ++r) {
        float* cr = c.data() + r * kProjNc;
        if (j.bias)
          for (int64_t x = 0; x < nv; ++x) cr[x] += j.bias[n0 + x];
        j.k->from_f32(j.dt, cr, static_cast<char*>(j.C) + static_cast<size_t>((r0 + r) * j.N + n0) * es, nv);
      }
    }
  }
}

}  // namespace

int32_t run_projection(const olc_core_api* api, olc_context* ctx, const IsaKernels* k, int dt, int64_t M, int64_t K,
                       int64_t N, const void* A, const float* W, int64_t ldw, const void* bias, void* C) {
  if (M == 0 || N == 0) return OLC_OK;
  std::vector<float> b;
  if (bias) {
    b.resize(static_cast<size_t>(N));
    k->to_f32(dt, bias, b.data(), N);
  }
  std::atomic<bool> oom{false};
  ProjJob j{k, dt, M, K, N, ldw, A, W, bias ? b.data() : nullptr, C, &oom};
  api->parallel_for(ctx, (M + kProjRows - 1) / kProjRows, 1, 0, &proj_range, &j);
  if (oom.load()) return api->set_error(ctx, "out of memory (projection scratch)");
  return OLC_OK;
}

}  // namespace olc_attn
