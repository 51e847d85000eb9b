// The tree ensemble engine: compilation, block traversal, aggregation and
// the final transforms (see tree_engine.h for the layout).
#include "tree_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace olc_ml {

namespace {

constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max() / 2;

uint64_t key_of(int64_t tree, int64_t node) {
  return (static_cast<uint64_t>(tree) << 32) ^ (static_cast<uint64_t>(node) & 0xffffffffull);
}

// Listed position of (tree, node id). Node ids are usually 0..n-1 per tree:
// then one flat table with an offset per tree (no hashing, which dominated
// the compile of forests of millions of nodes); sparse ids use a hash map.
class NodeIndex {
 public:
  // slot: the tree (in order of appearance) of each listed node; n_slots trees.
  void build(const int64_t* nodeids, size_t n, const std::vector<int32_t>& slot, size_t n_slots) {
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

// ---- front ends: what the breadth-first emitter asks of a listed node ----
//
// A front end numbers every node it can be asked about ("listed" index) and
// answers: the trees' roots, whether a node is a leaf, a branch's mode,
// feature, split, missing flag and children (listed indices), a leaf's
// weights, and a node's name for messages.

// ai.onnx.ml 1-4: listed = position in the nodes_* tables.
class SourceV3 {
 public:
  explicit SourceV3(const SpecV3& s) : s_(s) {}

  std::string prepare(const OutputSpec& out) {
    const size_t n = static_cast<size_t>(s_.n_nodes);
    slot_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (s_.nodeids[i] < 0 || s_.nodeids[i] > std::numeric_limits<int32_t>::max())
        return "node id " + std::to_string(s_.nodeids[i]) + " of tree " + std::to_string(s_.treeids[i]) +
               " is out of range";
      const uint32_t m = static_cast<uint32_t>(s_.modes[i]);
      if (s_.modes[i] < 0 || (m > kNeq && m != kLeaf))
        return "nodes_modes[" + std::to_string(i) + "] is not a known mode";
      if (i > 0 && s_.treeids[i] == s_.treeids[i - 1]) {  // nodes are usually listed tree by tree
        slot_[i] = slot_[i - 1];
        continue;
      }
      auto ins = tree_index_.emplace(s_.treeids[i], static_cast<int32_t>(tree_first_.size()));
      if (ins.second) {
        tree_first_.push_back(static_cast<int32_t>(i));
        tree_id_.push_back(s_.treeids[i]);
      }
      slot_[i] = ins.first->second;
    }
    index_.build(s_.nodeids, n, slot_, tree_first_.size());
    for (size_t i = 0; i < n; ++i)
      if (!index_.insert(slot_[i], s_.treeids[i], s_.nodeids[i], static_cast<int32_t>(i)))
        return node_name(s_.treeids[i], s_.nodeids[i]) + " is defined twice";
    // Leaf weights, per listed node, in attribute order; weights of branches are ignored.
    const size_t nw = static_cast<size_t>(s_.n_weights);
    std::vector<int32_t> w_node(nw, -1);
    w_start_.assign(n + 1, 0);
    int32_t w_slot = -1;
    for (size_t j = 0; j < nw; ++j) {
      const int64_t id = s_.w_ids[j];
      if (id < 0 || id >= out.n_targets) {
        if (out.classifier)
          return "class weight " + std::to_string(j) + " is for class " + std::to_string(id) + ", but there are " +
                 std::to_string(out.n_targets) + " class labels";
        return "target weight " + std::to_string(j) + " is for target " + std::to_string(id) +
               ", but n_targets is " + std::to_string(out.n_targets);
      }
      if (j == 0 || s_.w_treeids[j] != s_.w_treeids[j - 1]) w_slot = slot_of(s_.w_treeids[j]);
      const int32_t at = index_.find(w_slot, s_.w_treeids[j], s_.w_nodeids[j]);
      if (at < 0)
        return "weight " + std::to_string(j) + " names " + node_name(s_.w_treeids[j], s_.w_nodeids[j]) +
               ", which does not exist";
      if (s_.modes[at] != kLeaf) continue;
      w_node[j] = at;
      ++w_start_[static_cast<size_t>(at) + 1];
    }
    for (size_t i = 0; i < n; ++i) w_start_[i + 1] += w_start_[i];
    w_order_.resize(static_cast<size_t>(w_start_[n]));
    std::vector<int32_t> fill(w_start_.begin(), w_start_.end() - 1);
    for (size_t j = 0; j < nw; ++j)
      if (w_node[j] >= 0) w_order_[static_cast<size_t>(fill[static_cast<size_t>(w_node[j])]++)] = static_cast<int32_t>(j);
    return "";
  }

  int64_t n_listed() const { return s_.n_nodes; }
  int64_t n_trees() const { return static_cast<int64_t>(tree_first_.size()); }
  std::string root(int64_t t, int32_t* at) const {
    *at = tree_first_[static_cast<size_t>(t)];
    return "";
  }
  std::string where(int32_t i) const { return node_name(s_.treeids[i], s_.nodeids[i]); }
  bool leaf(int32_t i) const { return s_.modes[i] == kLeaf; }
  uint32_t mode(int32_t i) const { return static_cast<uint32_t>(s_.modes[i]); }
  int64_t feature(int32_t i) const { return s_.featureids[i]; }
  double split(int32_t i) const { return s_.values[i]; }
  bool missing(int32_t i) const { return s_.missing_true && s_.missing_true[i] != 0; }
  int32_t set_of(int32_t) const { return -1; }
  std::string child(int64_t t, int32_t i, int side, int32_t* at) const {
    const int64_t id = side == 0 ? s_.truenodeids[i] : s_.falsenodeids[i];
    *at = id > std::numeric_limits<int32_t>::max() ? -1 : index_.find(static_cast<int32_t>(t), tree_id_[t], id);
    if (*at < 0)
      return where(i) + ": its " + (side == 0 ? "true" : "false") + " branch points to node id " +
             std::to_string(id) + ", which is not in tree " + std::to_string(tree_id_[t]);
    return "";
  }
  int32_t weight_count(int32_t i) const { return w_start_[i + 1] - w_start_[i]; }
  void weight(int32_t i, int32_t q, int32_t* target, double* value) const {
    const size_t j = static_cast<size_t>(w_order_[static_cast<size_t>(w_start_[i] + q)]);
    *target = static_cast<int32_t>(s_.w_ids[j]);
    *value = s_.w_values[j];
  }

 private:
  static std::string node_name(int64_t tree, int64_t node) {
    return "node " + std::to_string(node) + " of tree " + std::to_string(tree);
  }
  int32_t slot_of(int64_t tree) const {
    auto it = tree_index_.find(tree);
    return it == tree_index_.end() ? -1 : it->second;
  }

  const SpecV3& s_;
  std::vector<int32_t> slot_, tree_first_;
  std::vector<int64_t> tree_id_;
  std::unordered_map<int64_t, int32_t> tree_index_;
  NodeIndex index_;
  std::vector<int32_t> w_start_, w_order_;
};

// ai.onnx.ml 5: listed = branch index, or n_nodes + leaf index.
class SourceV5 {
 public:
  explicit SourceV5(const SpecV5& s) : s_(s) {}

  std::string prepare(const OutputSpec& out) {
    if (s_.n_nodes + s_.n_leaves > kMaxIndex) return "too many nodes";
    for (int64_t j = 0; j < s_.n_leaves; ++j)
      if (s_.leaf_targetids[j] < 0 || s_.leaf_targetids[j] >= out.n_targets)
        return "leaf " + std::to_string(j) + " is for target " + std::to_string(s_.leaf_targetids[j]) +
               ", but n_targets is " + std::to_string(out.n_targets);
    // The sets of the BRANCH_MEMBER nodes, in node order, each ended by a NaN.
    set_of_.assign(static_cast<size_t>(s_.n_nodes), -1);
    int64_t pos = 0;
    for (int64_t i = 0; i < s_.n_nodes; ++i) {
      if (s_.modes[i] < 0 || s_.modes[i] > kMember)
        return "node " + std::to_string(i) + " has mode " + std::to_string(s_.modes[i]) +
               ", not a known mode (0 to 6)";
      if (s_.modes[i] != kMember) continue;
      std::vector<double> set;
      while (pos < s_.n_membership && !std::isnan(s_.membership[pos])) set.push_back(s_.membership[pos++]);
      if (pos >= s_.n_membership)
        return "node " + std::to_string(i) + " is BRANCH_MEMBER, but membership_values holds no set (ended by a "
               "NaN) for it";
      ++pos;
      std::sort(set.begin(), set.end());
      set.erase(std::unique(set.begin(), set.end()), set.end());
      set_of_[static_cast<size_t>(i)] = static_cast<int32_t>(sets.size());
      sets.push_back(std::move(set));
    }
    if (pos != s_.n_membership)
      return "membership_values holds " + std::to_string(count_sets()) + " sets (ended by NaN), but " +
             std::to_string(sets.size()) + " nodes are BRANCH_MEMBER";
    return "";
  }

  int64_t n_listed() const { return s_.n_nodes + s_.n_leaves; }
  int64_t n_trees() const { return s_.n_trees; }
  std::string root(int64_t t, int32_t* at) const {
    const int64_t r = s_.tree_roots[t];
    if (r < 0 || r >= s_.n_nodes)
      return "tree_roots[" + std::to_string(t) + "] is " + std::to_string(r) + ", but there are " +
             std::to_string(s_.n_nodes) + " nodes";
    // A tree that is one leaf: a root whose two branches are the same leaf
    // is that leaf, the one numbered as the root itself (as onnxruntime and
    // the ONNX reference read it).
    if (s_.trueleafs[r] && s_.falseleafs[r] && s_.truenodeids[r] == s_.falsenodeids[r]) {
      if (r >= s_.n_leaves)
        return "tree " + std::to_string(t) + " is a single leaf, leaf " + std::to_string(r) + ", but there are " +
               std::to_string(s_.n_leaves) + " leaves";
      *at = static_cast<int32_t>(s_.n_nodes + r);
      return "";
    }
    *at = static_cast<int32_t>(r);
    return "";
  }
  std::string where(int32_t i) const {
    return i < s_.n_nodes ? "node " + std::to_string(i) : "leaf " + std::to_string(i - s_.n_nodes);
  }
  bool leaf(int32_t i) const { return i >= s_.n_nodes; }
  uint32_t mode(int32_t i) const { return static_cast<uint32_t>(s_.modes[i]); }
  int64_t feature(int32_t i) const { return s_.featureids[i]; }
  double split(int32_t i) const { return s_.modes[i] == kMember ? 0.0 : s_.splits[i]; }
  bool missing(int32_t i) const { return s_.missing_true && s_.missing_true[i] != 0; }
  int32_t set_of(int32_t i) const { return set_of_[static_cast<size_t>(i)]; }
  std::string child(int64_t, int32_t i, int side, int32_t* at) const {
    const int64_t id = side == 0 ? s_.truenodeids[i] : s_.falsenodeids[i];
    const bool to_leaf = (side == 0 ? s_.trueleafs[i] : s_.falseleafs[i]) != 0;
    const int64_t limit = to_leaf ? s_.n_leaves : s_.n_nodes;
    if (id < 0 || id >= limit)
      return where(i) + ": its " + (side == 0 ? "true" : "false") + " branch points to " +
             (to_leaf ? "leaf " : "node ") + std::to_string(id) + ", but there are " + std::to_string(limit) +
             (to_leaf ? " leaves" : " nodes");
    *at = static_cast<int32_t>(to_leaf ? s_.n_nodes + id : id);
    return "";
  }
  int32_t weight_count(int32_t) const { return 1; }
  void weight(int32_t i, int32_t, int32_t* target, double* value) const {
    *target = static_cast<int32_t>(s_.leaf_targetids[i - s_.n_nodes]);
    *value = s_.leaf_weights[i - s_.n_nodes];
  }

  std::vector<std::vector<double>> sets;

 private:
  int64_t count_sets() const {
    int64_t k = 0;
    for (int64_t p = 0; p < s_.n_membership; ++p) k += std::isnan(s_.membership[p]) ? 1 : 0;
    return k;
  }

  const SpecV5& s_;
  std::vector<int32_t> set_of_;
};

// Trees breadth-first into f->nodes (see tree_engine.h), from any front end.
template <typename T, typename Source>
std::string emit(const Source& src, const OutputSpec& out, int branch_free_levels, Forest<T>* f) {
  const int64_t n = src.n_listed();
  if (src.n_trees() == 0) return "the ensemble has no tree";
  if (n > kMaxIndex) return "too many nodes";
  const bool one_target = out.n_targets == 1;
  *f = Forest<T>{};
  f->nodes.reserve(static_cast<size_t>(n));
  f->leaf_first.reserve(static_cast<size_t>(n));
  f->leaf_count.reserve(static_cast<size_t>(n));
  f->weights_all_positive = true;
  std::vector<uint8_t> class_seen(static_cast<size_t>(out.n_targets), 0);
  int64_t distinct = 0;
  bool first_mode = true;
  uint32_t mode = kLeq;
  std::vector<int32_t> stamp(static_cast<size_t>(n), -1);  // the tree that placed each listed node
  std::vector<int32_t> queue, level;
  for (int64_t t = 0; t < src.n_trees(); ++t) {
    const int32_t base = static_cast<int32_t>(f->nodes.size());
    int32_t root = -1;
    std::string e = src.root(t, &root);
    if (!e.empty()) return e;
    queue.assign(1, root);
    level.assign(1, 0);
    stamp[static_cast<size_t>(root)] = static_cast<int32_t>(t);
    int32_t max_level = 0;
    // Breadth-first: queue[k] becomes node base + k.
    for (size_t k = 0; k < queue.size(); ++k) {
      const int32_t i = queue[k];
      const int32_t self = base + static_cast<int32_t>(k);
      Node<T> node{};
      if (src.leaf(i)) {
        const int32_t count = src.weight_count(i);
        if (count == 0) return "leaf " + src.where(i) + " has no weight";
        node.child[0] = node.child[1] = self;
        f->leaf_first.push_back(static_cast<int32_t>(f->w_target.size()));
        f->leaf_count.push_back(one_target ? 1 : count);
        for (int32_t q = 0; q < count; ++q) {
          int32_t target = 0;
          double value = 0;
          src.weight(i, q, &target, &value);
          if (value < 0) f->weights_all_positive = false;
          if (!class_seen[static_cast<size_t>(target)]) {
            class_seen[static_cast<size_t>(target)] = 1;
            ++distinct;
          }
          if (q == 0) node.value = static_cast<T>(value);
          if (one_target && q > 0) continue;
          f->w_target.push_back(target);
          f->w_value.push_back(static_cast<T>(value));
        }
      } else {
        const int64_t feat = src.feature(i);
        if (feat < 0 || feat > static_cast<int64_t>(kFeatureMask))
          return src.where(i) + " reads feature " + std::to_string(feat) + ", out of range";
        f->max_feature = std::max(f->max_feature, feat);
        const bool miss = src.missing(i);
        f->missing = f->missing || miss;
        const uint32_t m = src.mode(i);
        if (first_mode) {
          mode = m;
          first_mode = false;
        } else if (mode != m) {
          mode = kMixed;
        }
        node.word = static_cast<uint32_t>(feat) | (m << 28) | (miss ? kMissingTrue : 0u);
        if (m == kMember) {
          const uint32_t set = static_cast<uint32_t>(src.set_of(i));
          std::memcpy(&node.value, &set, sizeof(set));
        } else {
          node.value = static_cast<T>(src.split(i));
        }
        for (int side = 0; side < 2; ++side) {
          int32_t c = -1;
          e = src.child(t, i, side, &c);
          if (!e.empty()) return e;
          const char* which = side == 0 ? "true" : "false";
          if (c == i) return src.where(i) + ": its " + which + " branch points to itself";
          if (stamp[static_cast<size_t>(c)] == static_cast<int32_t>(t))
            return src.where(i) + ": its " + which + " branch reaches " + src.where(c) +
                   " a second time (the nodes do not form a tree)";
          stamp[static_cast<size_t>(c)] = static_cast<int32_t>(t);
          node.child[side] = base + static_cast<int32_t>(queue.size());
          queue.push_back(c);
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
  f->n_targets = out.n_targets;
  f->aggregate = out.aggregate;
  f->post = out.post;
  f->base_values.assign(out.base_values.begin(), out.base_values.end());
  f->classifier = out.classifier;
  f->class_labels = out.class_labels;
  f->binary_case = out.classifier && out.n_targets == 2 && distinct == 1;
  return "";
}

}  // namespace

template <typename T>
std::string compile_v3(const SpecV3& spec, const OutputSpec& out, int branch_free_levels, Forest<T>* f) {
  if (spec.n_nodes == 0) return "the ensemble has no node";
  if (spec.n_nodes > kMaxIndex) return "too many nodes";
  SourceV3 src(spec);
  std::string e = src.prepare(out);
  if (!e.empty()) return e;
  return emit(src, out, branch_free_levels, f);
}

template <typename T>
std::string compile_v5(const SpecV5& spec, const OutputSpec& out, int branch_free_levels, Forest<T>* f) {
  SourceV5 src(spec);
  std::string e = src.prepare(out);
  if (!e.empty()) return e;
  e = emit(src, out, branch_free_levels, f);
  if (!e.empty()) return e;
  f->set_first.assign(1, 0);
  for (const auto& set : src.sets) {
    for (double v : set) f->set_values.push_back(static_cast<T>(v));
    f->set_first.push_back(static_cast<int32_t>(f->set_values.size()));
  }
  return "";
}

namespace {

// Whether v is in BRANCH_MEMBER set k (sorted; NaN is in no set).
template <typename T>
bool in_set(const Forest<T>& f, const T& bits, T v) {
  uint32_t k;
  std::memcpy(&k, &bits, sizeof(k));
  const T* first = f.set_values.data() + f.set_first[k];
  const T* last = f.set_values.data() + f.set_first[k + 1];
  if (last - first <= 8) {
    for (const T* p = first; p < last; ++p)
      if (*p == v) return true;
    return false;
  }
  const T* p = std::lower_bound(first, last, v);
  return p != last && *p == v;
}

template <typename T, uint32_t MODE, bool MISS>
inline int32_t step(const Forest<T>& f, const Node<T>* nodes, int32_t i, const T* x) {
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
    case kMember: c = in_set(f, n.value, v); break;
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
        for (int b = 0; b < kBlock; ++b) idx[b] = step<T, MODE, MISS>(f, nodes, idx[b], rows[b]);
      if (deep) {
        for (int b = 0; b < kBlock; ++b) {
          int32_t i = idx[b];
          while (nodes[i].child[0] != i) i = step<T, MODE, MISS>(f, nodes, i, rows[b]);
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
        for (int b = 0; b < kTreeBlock; ++b) idx[b] = step<T, MODE, MISS>(f, nodes, idx[b], row);
      if (deep) {
        for (int b = 0; b < kTreeBlock; ++b) {
          int32_t i = idx[b];
          while (nodes[i].child[0] != i) i = step<T, MODE, MISS>(f, nodes, i, row);
          idx[b] = i;
        }
      }
      for (int b = 0; b < kTreeBlock; ++b) take_leaf(f, idx[b], a, h);
    }
    for (; t < t1; ++t) {
      const size_t ts = static_cast<size_t>(t);
      int32_t i = f.roots[ts];
      for (int32_t d = 0; d < f.fixed_depth[ts]; ++d) i = step<T, MODE, MISS>(f, nodes, i, row);
      if (f.depth[ts] > f.fixed_depth[ts])
        while (nodes[i].child[0] != i) i = step<T, MODE, MISS>(f, nodes, i, row);
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

// Writes n >= 2 scores with the transform; value k is acc[k] when it has a
// score, else 0. Transforms are computed in float32, as onnxruntime computes
// them for either output type (O = float or double); NONE writes the score
// itself.
template <typename T, typename O>
void write_scores(PostTransform post, T* acc, const uint8_t* has, int64_t n, O* z) {
  auto val = [&](int64_t k) { return has[k] ? acc[k] : T(0); };
  switch (post) {
    case kProbit:
      for (int64_t k = 0; k < n; ++k) z[k] = static_cast<O>(probit(static_cast<float>(val(k))));
      break;
    case kLogistic:
      for (int64_t k = 0; k < n; ++k) z[k] = static_cast<O>(logistic(static_cast<float>(val(k))));
      break;
    case kSoftmax:
    case kSoftmaxZero: {
      std::vector<float> e(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) e[static_cast<size_t>(k)] = static_cast<float>(val(k));
      if (post == kSoftmax) softmax(e.data(), n);
      else softmax_zero(e.data(), n);
      for (int64_t k = 0; k < n; ++k) z[k] = static_cast<O>(e[static_cast<size_t>(k)]);
      break;
    }
    default:
      for (int64_t k = 0; k < n; ++k) z[k] = static_cast<O>(val(k));
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

template <typename T, typename O>
void finalize_row(const Forest<T>& f, T* acc, uint8_t* has, O* z, int64_t* label) {
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
      z[0] = f.post == kProbit ? static_cast<O>(probit(static_cast<float>(s))) : static_cast<O>(s);
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
  z[1] = O(0);
  if (f.post == kProbit) {
    z[0] = static_cast<O>(probit(static_cast<float>(v)));
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
        const float p = logistic(static_cast<float>(v));
        z[1] = static_cast<O>(p);
        z[0] = static_cast<O>(1.0f - p);
      } else {
        z[0] = static_cast<O>(static_cast<float>(T(1) - v));
        z[1] = static_cast<O>(static_cast<float>(v));
      }
      break;
    case 2:
    case 3:
      if (f.post == kLogistic) {
        z[1] = static_cast<O>(logistic(static_cast<float>(v)));
        z[0] = static_cast<O>(logistic(static_cast<float>(-v)));
      } else {
        z[0] = static_cast<O>(static_cast<float>(-v));
        z[1] = static_cast<O>(static_cast<float>(v));
      }
      break;
    default:
      z[0] = static_cast<O>(static_cast<float>(v));
      break;
  }
}

template std::string compile_v3<float>(const SpecV3&, const OutputSpec&, int, Forest<float>*);
template std::string compile_v3<double>(const SpecV3&, const OutputSpec&, int, Forest<double>*);
template std::string compile_v5<float>(const SpecV5&, const OutputSpec&, int, Forest<float>*);
template std::string compile_v5<double>(const SpecV5&, const OutputSpec&, int, Forest<double>*);
template void accumulate<float>(const Forest<float>&, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                float*, uint8_t*);
template void accumulate<double>(const Forest<double>&, const double*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                 double*, uint8_t*);
template void merge_scores<float>(const Forest<float>&, float*, uint8_t*, const float*, const uint8_t*, int64_t);
template void merge_scores<double>(const Forest<double>&, double*, uint8_t*, const double*, const uint8_t*, int64_t);
template void finalize_row<float, float>(const Forest<float>&, float*, uint8_t*, float*, int64_t*);
template void finalize_row<double, float>(const Forest<double>&, double*, uint8_t*, float*, int64_t*);
template void finalize_row<double, double>(const Forest<double>&, double*, uint8_t*, double*, int64_t*);

}  // namespace olc_ml
