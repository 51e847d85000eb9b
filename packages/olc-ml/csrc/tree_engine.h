// The tree ensemble engine: a forest compiled once from the node/leaf tables
// of a TreeEnsembleRegressor / TreeEnsembleClassifier (ai.onnx.ml 1-4) or a
// TreeEnsemble (ai.onnx.ml 5) into one flat node array, then evaluated for
// blocks of rows.
//
// Layout. Trees are renumbered breadth-first and stored one after the other,
// so the top levels of every tree share a few cache lines. A node is
// {word, child[2], value}: `word` holds the feature index (bits 0-27), the
// comparison (bits 28-30) and "missing goes to the true branch" (bit 31);
// child[0] is the true branch, child[1] the false one. A leaf points to
// itself on both sides and compares feature 0, so a walk that reaches it
// early just stays there: the first `fixed_depth` levels of a tree are walked
// without any test for leaves (no branch, only a selected index), for a block
// of rows at once so their loads overlap; rows that are still inside a node
// after that continue with a leaf test per level. A leaf keeps its first
// weight in `value` (the single-target case) and its weight range in
// leaf_first / leaf_count (several targets or classes). A set-membership
// branch (BRANCH_MEMBER) keeps the index of its set in the bits of `value`.
#ifndef OLC_ML_TREE_ENGINE_H_
#define OLC_ML_TREE_ENGINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "transforms.h"

namespace olc_ml {

// Branch comparisons as stored in a node's word (and in the spec's modes,
// where kLeaf marks a leaf of the v1-3 tables). kMixed is only a forest's
// summary: its branches compare in several ways.
enum Mode : uint32_t { kLeq = 0, kLt = 1, kGte = 2, kGt = 3, kEq = 4, kNeq = 5, kMember = 6, kLeaf = 7, kMixed = 8 };
enum Aggregate { kSum = 0, kAverage = 1, kMin = 2, kMax = 3 };

constexpr uint32_t kFeatureMask = (1u << 28) - 1;
constexpr uint32_t kMissingTrue = 1u << 31;

template <typename T>
struct Node {
  uint32_t word;
  int32_t child[2];
  T value;
};

// The aggregation and output rules shared by both forms of the operator.
struct OutputSpec {
  int64_t n_targets = 1;  // targets, or classes of a classifier
  Aggregate aggregate = kSum;
  PostTransform post = kNone;
  std::vector<double> base_values;
  bool classifier = false;
  std::vector<int64_t> class_labels;
};

// The node tables are read in place from the node's attributes (they
// outlive the compile only); lengths are checked by the adapter.
//
// ai.onnx.ml 1-4: nodes keyed by (tree id, node id), leaf weights listed
// apart and keyed the same way; modes as Mode codes (kLeaf for leaves).
struct SpecV3 {
  int64_t n_nodes = 0, n_weights = 0;
  const int64_t *treeids = nullptr, *nodeids = nullptr, *featureids = nullptr, *truenodeids = nullptr;
  const int64_t *falsenodeids = nullptr, *missing_true = nullptr, *modes = nullptr;
  const double* values = nullptr;
  const int64_t *w_treeids = nullptr, *w_nodeids = nullptr, *w_ids = nullptr;
  const double* w_values = nullptr;
};

// ai.onnx.ml 5: branches indexed 0..n-1, leaves 0..m-1, each child either a
// branch or (its *leafs flag set) a leaf; one target per leaf; modes 0-6
// (kLeq .. kMember).
struct SpecV5 {
  int64_t n_nodes = 0, n_leaves = 0, n_trees = 0;
  const int64_t *featureids = nullptr, *truenodeids = nullptr, *falsenodeids = nullptr;
  const int64_t *trueleafs = nullptr, *falseleafs = nullptr, *missing_true = nullptr, *modes = nullptr;
  const int64_t *tree_roots = nullptr, *leaf_targetids = nullptr;
  const double *splits = nullptr, *leaf_weights = nullptr;
  const double* membership = nullptr;  // the sets of the BRANCH_MEMBER nodes in node order, NaN after each
  int64_t n_membership = 0;
};

template <typename T>
struct Forest {
  std::vector<Node<T>> nodes;
  std::vector<int32_t> roots;
  std::vector<int32_t> depth;        // per tree: levels below the root
  std::vector<int32_t> fixed_depth;  // per tree: levels walked without a leaf test
  std::vector<int32_t> leaf_first, leaf_count;  // per node
  std::vector<int32_t> w_target;
  std::vector<T> w_value;
  std::vector<T> base_values;
  std::vector<T> set_values;        // BRANCH_MEMBER sets, sorted, one after the other
  std::vector<int32_t> set_first;   // per set: its first value; set_first[k + 1] ends it
  int64_t n_targets = 1;
  int64_t n_trees = 0;
  int64_t max_feature = -1;  // highest feature a branch reads
  uint32_t mode = kLeq;      // the comparison of every branch, or kMixed
  bool missing = false;      // some branch sends NaN to its true side
  Aggregate aggregate = kSum;
  PostTransform post = kNone;
  // classifier
  bool classifier = false;
  bool binary_case = false;
  bool weights_all_positive = true;
  std::vector<int64_t> class_labels;
  int64_t sum_depth = 0;
};

// Compile the tables into `forest`; "" or the reason they are invalid.
// branch_free_levels: how many top levels of each tree are walked without
// leaf tests.
template <typename T>
std::string compile_v3(const SpecV3& spec, const OutputSpec& out, int branch_free_levels, Forest<T>* forest);
template <typename T>
std::string compile_v5(const SpecV5& spec, const OutputSpec& out, int branch_free_levels, Forest<T>* forest);

// Trees a row outside a full block of rows walks together (their loads
// overlap); tree ranges in multiples of it are walked without a remainder.
constexpr int kTreeBlock = 16;

// Per-row scores of rows [r0, r1) over trees [t0, t1): acc holds
// (r1 - r0) * n_targets scores, has the matching "has a score" flags; both
// start cleared by the caller. x: the rows, n_features values each.
template <typename T>
void accumulate(const Forest<T>& f, const T* x, int64_t n_features, int64_t r0, int64_t r1, int64_t t0,
                int64_t t1, T* acc, uint8_t* has);

// Merges partial scores b into a (the aggregate's merge rule), n scores.
template <typename T>
void merge_scores(const Forest<T>& f, T* a, uint8_t* ha, const T* b, const uint8_t* hb, int64_t n);

// Final values of one row: z receives the output scores (n_targets or
// n_classes values, O = float or double), label the class label (classifier
// only).
template <typename T, typename O>
void finalize_row(const Forest<T>& f, T* acc, uint8_t* has, O* z, int64_t* label);

}  // namespace olc_ml

#endif  // OLC_ML_TREE_ENGINE_H_
