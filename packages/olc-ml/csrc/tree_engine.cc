// The tree ensemble engine: compilation, block traversal, aggregation and
// the final transforms (see tree_engine.h for the layout).
#include "tree_engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace olc_ml {

namespace {

uint64_t key_of(int64_t tree, int64_t node) {
  return (static_cast<uint64_t>(tree) << 32) ^ (static_cast<uint64_t>(node) & 0xffffffffull);
}

std::string where(int64_t tree, int64_t node) {
  return "node " + std::to_string(node) + " of tree " + std::to_string(tree);
}

// Listed position of (tree, node id). Node ids are usually 0..n-1 per tree:
// then one flat table with an offset per tree (no hashing, which dominated
// the compile of forests of millions of nodes); sparse ids use a hash map.
class NodeIndex {
 public:
  // slot: the tree (in order of appearance) of each listed node; n_slots trees.
  void build(const std::vector<int64_t>& nodeids, const std::vector<int32_t>& slot, size_t n_slots) {
    const size_t n = nodeids.size();
    std::vector<int64_t> top(n_slots, -1);
    for (size_t i = 0; i < n; ++i) {
      int64_t& t = top[static_cast<size_t>(slot[i])];
      t = std::max(t, nodeids[i]);
    }
    offset_.assign(n_slots + 1, 0);
    for (size_t t = 0; t < n_slots; ++t) offset_[t + 1] = offset_[t] + top[t] + 1;
    dense_ = offset_[n_slots] <= static_cast<int64_t>(2 * n + 1024);
    if (dense_) {
      table_.assign(static_cast<size_t>(offset_[n_slots]), -1);
    } else {
      map_.reserve(n * 2);
    }
  }
  // False when (slot, node) is already there.
  bool insert(int32_t slot, int64_t tree, int64_t node, int32_t pos) {
    if (dense_) {
      int32_t& e = table_[static_cast<size_t>(offset_[static_cast<size_t>(slot)] + node)];
      if (e >= 0) return false;
      e = pos;
      return true;
    }
    return map_.emplace(key_of(tree, node), pos).second;
  }
  // -1 when absent. slot < 0: the tree does not exist.
  int32_t find(int32_t slot, int64_t tree, int64_t node) const {
    if (slot < 0 || node < 0) return -1;
    if (dense_) {
      const int64_t base = offset_[static_cast<size_t>(slot)];
      if (node >= offset_[static_cast<size_t>(slot) + 1] - base) return -1;
      return table_[static_cast<size_t>(base + node)];
    }
    auto it = map_.find(key_of(tree, node));
    return it == map_.end() ? -1 : it->second;
  }

 private:
  bool dense_ = true;
  std::vector<int64_t> offset_;
  std::vector<int32_t> table_;
  std::unordered_map<uint64_t, int32_t> map_;
};

}  // namespace

template <typename T>
std::string compile_forest(const EnsembleSpec& s, int branch_free_levels, Forest<T>* f) {
  const size_t n = s.nodeids.size();
  if (n == 0) return "the ensemble has no node";
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2)) return "too many nodes";
  std::vector<int32_t> tree_first;  // first listed node of each tree, in order of appearance
  std::vector<int64_t> tree_id;
  std::unordered_map<int64_t, int32_t> tree_index;
  std::vector<int32_t> slot(n);
  for (size_t i = 0; i < n; ++i) {
    if (s.nodeids[i] < 0 || s.nodeids[i] > std::numeric_limits<int32_t>::max())
      return "node id " + std::to_string(s.nodeids[i]) + " of tree " + std::to_string(s.treeids[i]) +
             " is out of range";
    if (i > 0 && s.treeids[i] == s.treeids[i - 1]) {  // nodes are usually listed tree by tree
      slot[i] = slot[i - 1];
      continue;
    }
    auto ins = tree_index.emplace(s.treeids[i], static_cast<int32_t>(tree_first.size()));
    if (ins.second) {
      tree_first.push_back(static_cast<int32_t>(i));
      tree_id.push_back(s.treeids[i]);
    }
    slot[i] = ins.first->second;
  }
  NodeIndex index;
  index.build(s.nodeids, slot, tree_first.size());
  for (size_t i = 0; i < n; ++i)
    if (!index.insert(slot[i], s.treeids[i], s.nodeids[i], static_cast<int32_t>(i)))
      return where(s.treeids[i], s.nodeids[i]) + " is defined twice";
  auto slot_of = [&](int64_t tree) {
    auto it = tree_index.find(tree);
    return it == tree_index.end() ? -1 : it->second;
  };
  const bool one_target = s.n_targets == 1;

  // Leaf weights, per listed node, in attribute order.
  std::vector<int32_t> w_count(n, 0);
  std::vector<int32_t> w_node(s.w_ids.size(), -1);
  f->weights_all_positive = true;
  std::vector<uint8_t> class_seen(static_cast<size_t>(s.n_targets), 0);
  int64_t distinct = 0;
  int32_t w_slot = -1;
  for (size_t j = 0; j < s.w_ids.size(); ++j) {
    if (s.w_values[j] < 0) f->weights_all_positive = false;
    const int64_t id = s.w_ids[j];
    if (id < 0 || id >= s.n_targets) {
      if (s.classifier)
        return "class weight " + std::to_string(j) + " is for class " + std::to_string(id) + ", but there are " +
               std::to_string(s.n_targets) + " class labels";
      return "target weight " + std::to_string(j) + " is for target " + std::to_string(id) + ", but n_targets is " +
             std::to_string(s.n_targets);
    }
    if (!class_seen[static_cast<size_t>(id)]) {
      class_seen[static_cast<size_t>(id)] = 1;
      ++distinct;
    }
    if (j == 0 || s.w_treeids[j] != s.w_treeids[j - 1]) w_slot = slot_of(s.w_treeids[j]);
    const int32_t at = index.find(w_slot, s.w_treeids[j], s.w_nodeids[j]);
    if (at < 0)
      return "weight " + std::to_string(j) + " names " + where(s.w_treeids[j], s.w_nodeids[j]) +
             ", which does not exist";
    if (s.modes[static_cast<size_t>(at)] != kLeaf) continue;  // weights of branches are ignored
    w_node[j] = at;
    ++w_count[static_cast<size_t>(at)];
  }
  std::vector<int32_t> w_start(n + 1, 0);
  for (size_t i = 0; i < n; ++i) w_start[i + 1] = w_start[i] + w_count[i];
  std::vector<int32_t> w_order(static_cast<size_t>(w_start[n]));
  {
    std::vector<int32_t> fill(w_start.begin(), w_start.end() - 1);
    for (size_t j = 0; j < s.w_ids.size(); ++j)
      if (w_node[j] >= 0) w_order[static_cast<size_t>(fill[static_cast<size_t>(w_node[j])]++)] = static_cast<int32_t>(j);
  }

  f->nodes.clear();
  f->nodes.reserve(n);
  f->leaf_first.clear();
  f->leaf_count.clear();
  f->w_target.clear();
  f->w_value.clear();
  f->roots.clear();
  f->depth.clear();
  f->fixed_depth.clear();
  f->max_feature = -1;
  f->missing = false;
  f->sum_depth = 0;
  bool first_mode = true;
  uint32_t mode = kLeq;
  std::vector<int32_t> placed(n, -1);
  std::vector<int32_t> queue;
  std::vector<int32_t> level;
  for (size_t t = 0; t < tree_first.size(); ++t) {
    const int64_t tid = tree_id[t];
    const int32_t base = static_cast<int32_t>(f->nodes.size());
    queue.clear();
    level.clear();
    queue.push_back(tree_first[t]);
    level.push_back(0);
    placed[static_cast<size_t>(tree_first[t])] = base;
    int32_t max_level = 0;
    // Breadth-first: queue[k] becomes node base + k.
    for (size_t k = 0; k < queue.size(); ++k) {
      const size_t i = static_cast<size_t>(queue[k]);
      const int32_t self = base + static_cast<int32_t>(k);
      Node<T> node{};
      const uint32_t m = s.modes[i];
      if (m == kLeaf) {
        if (w_count[i] == 0) return "leaf " + where(tid, s.nodeids[i]) + " has no weight";
        node.word = 0;
        node.child[0] = node.child[1] = self;
        node.value = static_cast<T>(s.w_values[static_cast<size_t>(w_order[static_cast<size_t>(w_start[i])])]);
        f->leaf_first.push_back(static_cast<int32_t>(f->w_target.size()));
        f->leaf_count.push_back(one_target ? 1 : w_count[i]);
        for (int32_t q = 0; q < (one_target ? 1 : w_count[i]); ++q) {
          const size_t j = static_cast<size_t>(w_order[static_cast<size_t>(w_start[i] + q)]);
          f->w_target.push_back(static_cast<int32_t>(s.w_ids[j]));
          f->w_value.push_back(static_cast<T>(s.w_values[j]));
        }
      } else {
        const int64_t feat = s.featureids[i];
        if (feat < 0 || feat > static_cast<int64_t>(kFeatureMask))
          return where(tid, s.nodeids[i]) + " reads feature " + std::to_string(feat) + ", out of range";
        f->max_feature = std::max(f->max_feature, feat);
        const bool miss = s.missing_true[i] != 0;
        f->missing = f->missing || miss;
        if (first_mode) {
          mode = m;
          first_mode = false;
        } else if (mode != m) {
          mode = kMixed;
        }
        node.word = static_cast<uint32_t>(feat) | (m << 28) | (miss ? kMissingTrue : 0u);
        node.value = static_cast<T>(s.values[i]);
        const int64_t kids[2] = {s.truenodeids[i], s.falsenodeids[i]};
        for (int side = 0; side < 2; ++side) {
          const char* which = side == 0 ? "true" : "false";
          const int32_t at = kids[side] > std::numeric_limits<int32_t>::max()
                                 ? -1
                                 : index.find(static_cast<int32_t>(t), tid, kids[side]);
          if (at < 0)
            return where(tid, s.nodeids[i]) + ": its " + which + " branch points to node id " +
                   std::to_string(kids[side]) + ", which is not in tree " + std::to_string(tid);
          const size_t c = static_cast<size_t>(at);
          if (c == i) return where(tid, s.nodeids[i]) + ": its " + which + " branch points to itself";
          if (placed[c] >= 0) {
            return where(tid, s.nodeids[i]) + ": its " + which + " branch reaches node " +
                   std::to_string(s.nodeids[c]) + " a second time (the nodes do not form a tree)";
          }
          placed[c] = base + static_cast<int32_t>(queue.size());
          node.child[side] = placed[c];
          queue.push_back(static_cast<int32_t>(c));
          level.push_back(level[k] + 1);
          max_level = std::max(max_level, level[k] + 1);
        }
        f->leaf_first.push_back(0);
        f->leaf_count.push_back(0);
      }
      f->nodes.push_back(node);
    }
    f->roots.push_back(base);
    f->depth.push_back(max_level);
    f->fixed_depth.push_back(std::min(max_level, std::max(0, branch_free_levels)));
    f->sum_depth += max_level;
  }
  f->mode = first_mode ? kLeq : mode;
  f->n_trees = static_cast<int64_t>(f->roots.size());
  f->n_targets = s.n_targets;
  f->aggregate = s.aggregate;
  f->post = s.post;
  f->base_values.assign(s.base_values.begin(), s.base_values.end());
  f->classifier = s.classifier;
  f->class_labels = s.class_labels;
  f->binary_case = s.classifier && s.n_targets == 2 && distinct == 1;
  return "";
}

namespace {

template <typename T, uint32_t MODE, bool MISS>
inline int32_t step(const Node<T>* nodes, int32_t i, const T* x) {
  const Node<T>& n = nodes[i];
  const uint32_t w = n.word;
  const T v = x[w & kFeatureMask];
  const uint32_t m = MODE == kMixed ? ((w >> 28) & 7u) : MODE;
  bool c;
  switch (m) {
    case kLeq: c = v <= n.value; break;
    case kLt: c = v < n.value; break;
    case kGte: c = v >= n.value; break;
    case kGt: c = v > n.value; break;
    case kEq: c = v == n.value; break;
    case kNeq: c = v != n.value; break;
    default: c = false; break;
  }
  if (MISS) c = c || ((w & kMissingTrue) != 0 && std::isnan(v));
  return n.child[c ? 0 : 1];
}

template <typename T>
inline void take_leaf(const Forest<T>& f, int32_t leaf, T* acc, uint8_t* has) {
  if (f.n_targets == 1) {
    const T v = f.nodes[static_cast<size_t>(leaf)].value;
    switch (f.aggregate) {
      case kSum:
      case kAverage: *acc += v; break;
      case kMin: *acc = (!*has || v < *acc) ? v : *acc; break;
      case kMax: *acc = (!*has || v > *acc) ? v : *acc; break;
    }
    *has = 1;
    return;
  }
  const int32_t first = f.leaf_first[static_cast<size_t>(leaf)];
  const int32_t count = f.leaf_count[static_cast<size_t>(leaf)];
  for (int32_t q = first; q < first + count; ++q) {
    const int32_t t = f.w_target[static_cast<size_t>(q)];
    const T v = f.w_value[static_cast<size_t>(q)];
    T& a = acc[t];
    uint8_t& h = has[t];
    switch (f.aggregate) {
      case kSum:
      case kAverage: a += v; break;
      case kMin: a = (!h || v < a) ? v : a; break;
      case kMax: a = (!h || v > a) ? v : a; break;
    }
    h = 1;
  }
}

constexpr int kBlock = 8;       // rows walking one tree together
constexpr int kTreeBlock = 16;  // trees one row walks together (the rows left over)

template <typename T, uint32_t MODE, bool MISS>
void accumulate_impl(const Forest<T>& f, const T* x, int64_t nf, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
                     T* acc, uint8_t* has) {
  const Node<T>* nodes = f.nodes.data();
  const int64_t nt = f.n_targets;
  for (int64_t t = t0; t < t1; ++t) {
    const int32_t root = f.roots[static_cast<size_t>(t)];
    const int32_t fixed = f.fixed_depth[static_cast<size_t>(t)];
    const bool deep = f.depth[static_cast<size_t>(t)] > fixed;
    int64_t r = r0;
    for (; r + kBlock <= r1; r += kBlock) {
      int32_t idx[kBlock];
      const T* rows[kBlock];
      for (int b = 0; b < kBlock; ++b) {
        idx[b] = root;
        rows[b] = x + (r + b) * nf;
      }
      for (int32_t d = 0; d < fixed; ++d)
        for (int b = 0; b < kBlock; ++b) idx[b] = step<T, MODE, MISS>(nodes, idx[b], rows[b]);
      if (deep) {
        for (int b = 0; b < kBlock; ++b) {
          int32_t i = idx[b];
          while (nodes[i].child[0] != i) i = step<T, MODE, MISS>(nodes, i, rows[b]);
          idx[b] = i;
        }
      }
      for (int b = 0; b < kBlock; ++b) take_leaf(f, idx[b], acc + (r + b - r0) * nt, has + (r + b - r0) * nt);
    }
  }
  // The rows left (all of them for a single row): kTreeBlock trees at once per
  // row, so the walks' loads overlap as the row blocks' do; leaves are still
  // taken in tree order.
  const int64_t tail = r0 + (r1 - r0) / kBlock * kBlock;
  for (int64_t r = tail; r < r1; ++r) {
    const T* row = x + r * nf;
    T* a = acc + (r - r0) * nt;
    uint8_t* h = has + (r - r0) * nt;
    int64_t t = t0;
    for (; t + kTreeBlock <= t1; t += kTreeBlock) {
      int32_t idx[kTreeBlock];
      int32_t fixed = 0;
      bool deep = false;
      for (int b = 0; b < kTreeBlock; ++b) {
        const size_t tb = static_cast<size_t>(t + b);
        idx[b] = f.roots[tb];
        fixed = std::max(fixed, f.fixed_depth[tb]);
        deep = deep || f.depth[tb] > f.fixed_depth[tb];
      }
      // Leaves point to themselves: walking a shallower tree past its
      // leaves leaves it there.
      for (int32_t d = 0; d < fixed; ++d)
        for (int b = 0; b < kTreeBlock; ++b) idx[b] = step<T, MODE, MISS>(nodes, idx[b], row);
      if (deep) {
        for (int b = 0; b < kTreeBlock; ++b) {
          int32_t i = idx[b];
          while (nodes[i].child[0] != i) i = step<T, MODE, MISS>(nodes, i, row);
          idx[b] = i;
        }
      }
      for (int b = 0; b < kTreeBlock; ++b) take_leaf(f, idx[b], a, h);
    }
    for (; t < t1; ++t) {
      const size_t ts = static_cast<size_t>(t);
      int32_t i = f.roots[ts];
      for (int32_t d = 0; d < f.fixed_depth[ts]; ++d) i = step<T, MODE, MISS>(nodes, i, row);
      if (f.depth[ts] > f.fixed_depth[ts])
        while (nodes[i].child[0] != i) i = step<T, MODE, MISS>(nodes, i, row);
      take_leaf(f, i, a, h);
    }
  }
}

template <typename T, bool MISS>
void accumulate_mode(const Forest<T>& f, const T* x, int64_t nf, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
                     T* acc, uint8_t* has) {
  switch (f.mode) {
    case kLeq: accumulate_impl<T, kLeq, MISS>(f, x, nf, r0, r1, t0, t1, acc, has); break;
    case kLt: accumulate_impl<T, kLt, MISS>(f, x, nf, r0, r1, t0, t1, acc, has); break;
    case kGte: accumulate_impl<T, kGte, MISS>(f, x, nf, r0, r1, t0, t1, acc, has); break;
    case kGt: accumulate_impl<T, kGt, MISS>(f, x, nf, r0, r1, t0, t1, acc, has); break;
    case kEq: accumulate_impl<T, kEq, MISS>(f, x, nf, r0, r1, t0, t1, acc, has); break;
    case kNeq: accumulate_impl<T, kNeq, MISS>(f, x, nf, r0, r1, t0, t1, acc, has); break;
    default: accumulate_impl<T, kMixed, MISS>(f, x, nf, r0, r1, t0, t1, acc, has); break;
  }
}

// onnxruntime's float transforms (ml_common.h), reproduced operation by
// operation so the scores round as its do.
inline float logistic(float v) {
  const float e = 1.0f / (1.0f + std::exp(-std::abs(v)));
  return v < 0 ? 1.0f - e : e;
}

inline float erf_inv(float x) {
  const float sgn = x < 0 ? -1.0f : 1.0f;
  x = (1 - x) * (1 + x);
  const float lg = std::log(x);
  const float v = 2 / (static_cast<float>(M_PI) * 0.147f) + 0.5f * lg;
  const float v2 = 1 / (0.147f) * lg;
  const float v3 = -v + std::sqrt(v * v - v2);
  return sgn * std::sqrt(v3);
}

inline float probit(float v) { return static_cast<float>(M_SQRT2) * erf_inv(2 * v - 1); }

// Writes n >= 2 scores with the transform; value k is acc[k] when it has a
// score, else 0.
template <typename T>
void write_scores(PostTransform post, T* acc, const uint8_t* has, int64_t n, float* z) {
  auto val = [&](int64_t k) { return has[k] ? acc[k] : T(0); };
  switch (post) {
    case kProbit:
      for (int64_t k = 0; k < n; ++k) z[k] = probit(static_cast<float>(val(k)));
      break;
    case kLogistic:
      for (int64_t k = 0; k < n; ++k) z[k] = logistic(static_cast<float>(val(k)));
      break;
    case kSoftmax: {
      float vmax = -std::numeric_limits<float>::max();
      for (int64_t k = 0; k < n; ++k) vmax = std::max(vmax, static_cast<float>(val(k)));
      float sum = 0.f;
      for (int64_t k = 0; k < n; ++k) {
        const float e = std::exp(static_cast<float>(val(k)) - vmax);
        z[k] = e;
        sum += e;
      }
      for (int64_t k = 0; k < n; ++k) z[k] = z[k] / sum;
      break;
    }
    case kSoftmaxZero: {
      float vmax = -std::numeric_limits<float>::max();
      for (int64_t k = 0; k < n; ++k) vmax = std::max(vmax, static_cast<float>(val(k)));
      const float exp_neg_max = std::exp(-vmax);
      float sum = 0.f;
      std::vector<T> tmp(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) {
        const float v = static_cast<float>(val(k));
        if (v > 0.0000001f || v < -0.0000001f) {
          const float e = std::exp(v - vmax);
          tmp[static_cast<size_t>(k)] = static_cast<T>(e);
          sum += e;
        } else {
          tmp[static_cast<size_t>(k)] = val(k) * static_cast<T>(exp_neg_max);
        }
      }
      for (int64_t k = 0; k < n; ++k) z[k] = static_cast<float>(tmp[static_cast<size_t>(k)] / sum);
      break;
    }
    default:
      for (int64_t k = 0; k < n; ++k) z[k] = static_cast<float>(val(k));
      break;
  }
}

}  // namespace

template <typename T>
void accumulate(const Forest<T>& f, const T* x, int64_t nf, int64_t r0, int64_t r1, int64_t t0, int64_t t1, T* acc,
                uint8_t* has) {
  if (f.missing)
    accumulate_mode<T, true>(f, x, nf, r0, r1, t0, t1, acc, has);
  else
    accumulate_mode<T, false>(f, x, nf, r0, r1, t0, t1, acc, has);
}

template <typename T>
void merge_scores(const Forest<T>& f, T* a, uint8_t* ha, const T* b, const uint8_t* hb, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    if (!hb[k]) continue;
    switch (f.aggregate) {
      case kSum:
      case kAverage: a[k] += b[k]; break;
      case kMin: a[k] = (ha[k] && a[k] < b[k]) ? a[k] : b[k]; break;
      case kMax: a[k] = (ha[k] && a[k] > b[k]) ? a[k] : b[k]; break;
    }
    ha[k] = 1;
  }
}

template <typename T>
void finalize_row(const Forest<T>& f, T* acc, uint8_t* has, float* z, int64_t* label) {
  const int64_t n = f.n_targets;
  const std::vector<T>& base = f.base_values;
  if (!f.classifier) {
    if (n == 1) {
      const T origin = base.size() == 1 ? base[0] : T(0);
      T s;
      switch (f.aggregate) {
        case kSum: s = acc[0] + origin; break;
        case kAverage: s = acc[0] / static_cast<T>(f.n_trees) + origin; break;
        default: s = has[0] ? acc[0] + origin : origin; break;
      }
      z[0] = f.post == kProbit ? probit(static_cast<float>(s)) : static_cast<float>(s);
      return;
    }
    const bool use_base = base.size() == static_cast<size_t>(n);
    for (int64_t k = 0; k < n; ++k) {
      switch (f.aggregate) {
        case kSum:
          if (use_base) acc[k] = acc[k] + base[static_cast<size_t>(k)];
          break;
        case kAverage:
          acc[k] = use_base ? acc[k] / static_cast<T>(f.n_trees) + base[static_cast<size_t>(k)]
                            : acc[k] / static_cast<T>(f.n_trees);
          break;
        default:
          acc[k] = (use_base ? base[static_cast<size_t>(k)] : T(0)) + (has[k] ? acc[k] : T(0));
          break;
      }
    }
    write_scores(f.post, acc, has, n, z);
    return;
  }
  // Classifier: scores are sums over trees.
  const std::vector<int64_t>& labels = f.class_labels;
  if (n > 2) {
    for (size_t k = 0; k < base.size(); ++k) {
      if (!has[k]) {
        has[k] = 1;
        acc[k] = base[k];
      } else {
        acc[k] += base[k];
      }
    }
    int64_t best = -1;
    T best_w = 0;
    for (int64_t k = 0; k < n; ++k) {
      if (has[k] && (best == -1 || acc[k] > best_w)) {
        best = k;
        best_w = acc[k];
      }
    }
    *label = labels[static_cast<size_t>(best < 0 ? 0 : best)];
    write_scores(f.post, acc, has, n, z);
    return;
  }
  // Two classes (onnxruntime's binary rules).
  int extra = -1;
  int64_t size = 2;
  if (base.size() == 2) {
    if (has[1]) {
      acc[1] = base[1] + acc[0];
      acc[0] = -acc[1];
      has[1] = 1;
    } else {
      acc[1] += base[1];
      acc[0] += base[0];
    }
  } else if (base.size() == 1) {
    acc[0] += base[0];
    if (!has[1]) size = 1;
  } else if (base.empty()) {
    extra = 3;
    if (!has[1]) size = 1;
  }
  T s0 = acc[0], s1 = 0;
  uint8_t h0 = has[0], h1 = 0;
  if (size == 2 && has[1]) {
    s1 = acc[1];
    h1 = 1;
  }
  const T pos = h1 ? s1 : (h0 ? s0 : T(0));
  if (f.binary_case) {
    if (f.weights_all_positive) {
      if (pos > T(0.5)) {
        extra = 0;
        *label = labels[1];
      } else {
        extra = 1;
        *label = labels[0];
      }
    } else {
      if (pos > 0) {
        extra = 2;
        *label = labels[1];
      } else {
        extra = 3;
        *label = labels[0];
      }
    }
  } else {
    // onnxruntime returns 1 / 0 here, not class_labels[1] / [0].
    *label = pos > 0 ? 1 : 0;
  }
  if (size == 2) {
    write_scores(f.post, acc, has, 2, z);
    return;
  }
  const T v = has[0] ? acc[0] : T(0);
  z[1] = 0.f;
  if (f.post == kProbit) {
    z[0] = probit(static_cast<float>(v));
    return;
  }
  switch (extra) {
    case 0:
    case 1:
      // All weights positive: the score is a probability of the positive
      // class; LOGISTIC maps it and the negative class takes the rest
      // (onnxruntime: z1 = logistic(v), z0 = 1 - z1; other transforms
      // leave {1 - v, v}).
      if (f.post == kLogistic) {
        z[1] = logistic(static_cast<float>(v));
        z[0] = 1.0f - z[1];
      } else {
        z[0] = static_cast<float>(T(1) - v);
        z[1] = static_cast<float>(v);
      }
      break;
    case 2:
    case 3:
      if (f.post == kLogistic) {
        z[1] = logistic(static_cast<float>(v));
        z[0] = logistic(static_cast<float>(-v));
      } else {
        z[0] = static_cast<float>(-v);
        z[1] = static_cast<float>(v);
      }
      break;
    default:
      z[0] = static_cast<float>(v);
      break;
  }
}

template std::string compile_forest<float>(const EnsembleSpec&, int, Forest<float>*);
template std::string compile_forest<double>(const EnsembleSpec&, int, Forest<double>*);
template void accumulate<float>(const Forest<float>&, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                float*, uint8_t*);
template void accumulate<double>(const Forest<double>&, const double*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                 double*, uint8_t*);
template void merge_scores<float>(const Forest<float>&, float*, uint8_t*, const float*, const uint8_t*, int64_t);
template void merge_scores<double>(const Forest<double>&, double*, uint8_t*, const double*, const uint8_t*, int64_t);
template void finalize_row<float>(const Forest<float>&, float*, uint8_t*, float*, int64_t*);
template void finalize_row<double>(const Forest<double>&, double*, uint8_t*, float*, int64_t*);

}  // namespace olc_ml
