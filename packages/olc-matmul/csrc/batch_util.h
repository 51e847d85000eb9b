// numpy-style matmul batch broadcasting shared by the adapters.
#ifndef OLC_MATMUL_BATCH_UTIL_H_
#define OLC_MATMUL_BATCH_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "olc/kernel_abi.h"

namespace olc_mm {

struct MatmulShape {
  int64_t M, K, N;
  std::vector<int64_t> out_shape;
  int64_t nbatch;
  std::vector<int64_t> a_index, b_index;  // matrix index of A and B per output entry
};

// Empty string on success, else the reason.
static inline std::string matmul_shape(const olc_tensor& a, const olc_tensor& b, MatmulShape* s) {
  if (a.ndim < 1 || b.ndim < 1) return "inputs must have rank >= 1";
  const bool a1 = a.ndim == 1, b1 = b.ndim == 1;
  s->M = a1 ? 1 : a.shape[a.ndim - 2];
  s->K = a.shape[a.ndim - 1];
  const int64_t Kb = b1 ? b.shape[0] : b.shape[b.ndim - 2];
  s->N = b1 ? 1 : b.shape[b.ndim - 1];
  if (s->K != Kb)
    return "inner dimensions differ (" + std::to_string((long long)s->K) + " vs " + std::to_string((long long)Kb) + ")";
  const int32_t abat = a1 ? 0 : a.ndim - 2, bbat = b1 ? 0 : b.ndim - 2;
  const int32_t nb = abat > bbat ? abat : bbat;
  std::vector<int64_t> ob(nb), as(nb, 0), bs(nb, 0);
  int64_t ac = 1, bc = 1;
  for (int32_t d = nb - 1; d >= 0; --d) {
    const int32_t ad = d - (nb - abat), bd = d - (nb - bbat);
    const int64_t da = ad >= 0 ? a.shape[ad] : 1;
    const int64_t db = bd >= 0 ? b.shape[bd] : 1;
    if (da != db && da != 1 && db != 1) return "batch dimensions cannot be broadcast";
    ob[d] = da == 1 ? db : da;
    as[d] = da == 1 ? 0 : ac;
    bs[d] = db == 1 ? 0 : bc;
    ac *= da;
    bc *= db;
  }
  s->out_shape = ob;
  if (!a1) s->out_shape.push_back(s->M);
  if (!b1) s->out_shape.push_back(s->N);
  s->nbatch = 1;
  for (int64_t v : ob) s->nbatch *= v;
  s->a_index.assign(s->nbatch, 0);
  s->b_index.assign(s->nbatch, 0);
  std::vector<int64_t> idx(nb, 0);
  for (int64_t t = 0; t < s->nbatch; ++t) {
    for (int32_t i = 0; i < nb; ++i) {
      s->a_index[t] += idx[i] * as[i];
      s->b_index[t] += idx[i] * bs[i];
    }
    for (int32_t i = nb - 1; i >= 0; --i) {
      if (++idx[i] < ob[i]) break;
      idx[i] = 0;
    }
  }
  return "";
}

}  // namespace olc_mm

#endif  // OLC_MATMUL_BATCH_UTIL_H_
