// Einsum as seen by olc-core. The equation is parsed and checked at
// create(); per input-shape signature a plan is built once (and cached) that
// decomposes the contraction into steps:
//
//   permute  a strided copy (transposes, diagonals made contiguous),
//   reduce   a strided sum of one operand or of the product of two
//            (labels summed away, small or integer products), through
//            8-byte accumulators,
//   gemm     one batched [B, M, K] x [B, K, N] product on the family's GEMM
//            driver, reading operands in place whenever their layout fits
//            (row-major or transposed A and B, any batch strides).
//
// Operands are combined left to right. Before each pair, labels that only
// one operand holds and nothing later needs are summed away; repeated labels
// of one operand are diagonals (their strides add up); size-1 dimensions
// that broadcast are dropped. Compiled without ISA flags.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "adapter_util.h"
#include "einsum_adapter.h"
#include "einsum_loops.h"
#include "gemm_driver.h"

namespace olc_mm {

namespace {

const olc_core_api* g_api = nullptr;

constexpr int kLetters = 52;  // 'A'..'Z' are 0..25, 'a'..'z' 26..51 (ASCII order)
constexpr int kEllipsis = -1;

std::string label_name(int l) {
  if (l < 26) return std::string(1, static_cast<char>('A' + l));
  if (l < kLetters) return std::string(1, static_cast<char>('a' + l - 26));
  return "ellipsis dimension " + std::to_string(l - kLetters);
}

// ------------------------------------------------------------ equation

struct Term {
  std::vector<int> items;  // labels, kEllipsis where "..." stands
  bool has_ellipsis() const { return std::find(items.begin(), items.end(), kEllipsis) != items.end(); }
  int letters() const { return static_cast<int>(items.size()) - (has_ellipsis() ? 1 : 0); }
};

struct Equation {
  std::vector<Term> inputs;
  Term output;
  bool any_ellipsis = false;
};

// Parses one term (spaces already removed); empty string on success.
std::string parse_term(const std::string& s, bool is_output, Term* t) {
  for (size_t i = 0; i < s.size();) {
    const char ch = s[i];
    if (ch == '.') {
      if (s.compare(i, 3, "...") != 0) return "a '.' that is not part of '...' in term '" + s + "'";
      if (t->has_ellipsis()) return "more than one '...' in term '" + s + "'";
      t->items.push_back(kEllipsis);
      i += 3;
      continue;
    }
    int l;
    if (ch >= 'A' && ch <= 'Z') l = ch - 'A';
    else if (ch >= 'a' && ch <= 'z') l = 26 + (ch - 'a');
    else return std::string("invalid character '") + ch + "' in term '" + s + "'";
    if (is_output && std::find(t->items.begin(), t->items.end(), l) != t->items.end())
      return std::string("output label '") + ch + "' appears more than once";
    t->items.push_back(l);
    ++i;
  }
  return "";
}

std::string parse_equation(const char* text, int n_inputs, Equation* eq) {
  std::string s;
  for (const char* p = text; *p; ++p)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') s += *p;
  const size_t arrow = s.find("->");
  if (arrow != std::string::npos && s.find("->", arrow + 2) != std::string::npos) return "more than one '->'";
  const std::string lhs = arrow == std::string::npos ? s : s.substr(0, arrow);
  for (char ch : lhs)
    if (ch == '-' || ch == '>') return "a '-' or '>' that is not part of '->'";
  std::vector<std::string> terms(1);
  for (char ch : lhs) {
    if (ch == ',') terms.emplace_back();
    else terms.back() += ch;
  }
  if (static_cast<int>(terms.size()) != n_inputs)
    return "the equation has " + std::to_string(terms.size()) + " input term(s) but the node has " +
           std::to_string(n_inputs) + " input(s)";
  int count[kLetters] = {0};
  for (const std::string& ts : terms) {
    Term t;
    std::string e = parse_term(ts, false, &t);
    if (!e.empty()) return e;
    for (int l : t.items)
      if (l >= 0) ++count[l];
    eq->any_ellipsis = eq->any_ellipsis || t.has_ellipsis();
    eq->inputs.push_back(t);
  }
  if (arrow != std::string::npos) {
    const std::string rhs = s.substr(arrow + 2);
    std::string e = parse_term(rhs, true, &eq->output);
    if (!e.empty()) return e;
    for (int l : eq->output.items)
      if (l >= 0 && !count[l]) return "output label '" + label_name(l) + "' appears in no input term";
    if (eq->any_ellipsis && !eq->output.has_ellipsis()) {
      // Allowed only when every ellipsis turns out empty (checked per shape).
    }
  } else {
    // Implicit output: the ellipsis, then the labels used exactly once, sorted.
    if (eq->any_ellipsis) eq->output.items.push_back(kEllipsis);
    for (int l = 0; l < kLetters; ++l)
      if (count[l] == 1) eq->output.items.push_back(l);
  }
  return "";
}

// ------------------------------------------------------------ plan

enum class StepKind { kPermute, kReduce, kGemm };

struct Step {
  StepKind kind;
  int a = -1, b = -1, c = -1;  // slots
  std::vector<LoopDim> dims;   // permute or accumulate nest
  std::vector<LoopDim> sdims;  // reduce: the store nest (accumulators -> c)
  int64_t acc_elems = 0;
  GemmDesc g{};
  std::vector<int64_t> aoff, boff, coff;  // gemm: element offsets per batch entry
};

// Slots: inputs 0..n-1, the output n, temporaries n+1...
struct Plan {
  std::vector<int64_t> out_shape;
  int64_t out_elems = 0;
  bool view = false;  // the output is input 0 read with out_shape
  std::vector<int64_t> temp_elems;
  int64_t max_acc = 0;
  std::vector<Step> steps;
  std::string detail;
};

struct EinsumState {
  int32_t dtype;
  int32_t kind;
  int esize;
  bool is_float;
  Equation eq;
  KernelSet ks;
  const EinsumLoops* loops;
  const char* isa_name;
  GemmTuning tun;
  const olc_tuning_param* t_kc = nullptr;
  const olc_tuning_param* t_nc = nullptr;
  const olc_tuning_param* t_par = nullptr;
  const olc_tuning_param* t_splitk = nullptr;
  const olc_tuning_param* t_gemv = nullptr;
  const olc_tuning_param* t_direct_b = nullptr;
  const olc_tuning_param* t_direct_a = nullptr;
  mutable std::mutex mu;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans;
};

constexpr size_t kMaxPlans = 32;

// An operand during planning: distinct labels with their element strides.
struct Operand {
  int slot;
  std::vector<int> labels;
  std::vector<int64_t> strides;
  std::vector<int> unit;  // labels of the input term dropped as size 1 (they broadcast)
  int64_t stride_of(int l) const {
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] == l) return strides[i];
    return -1;
  }
  bool has(int l) const { return std::find(labels.begin(), labels.end(), l) != labels.end(); }
};

bool contains(const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); }

struct Builder {
  const EinsumState* st;
  int n_in;
  std::vector<int64_t> lsize;  // size per label
  Plan* plan;

  int new_temp(int64_t elems) {
    plan->temp_elems.push_back(elems);
    return n_in + static_cast<int>(plan->temp_elems.size());
  }
  int64_t count(const std::vector<int>& labels) const {
    int64_t n = 1;
    for (int l : labels) n *= lsize[l];
    return n;
  }
  // Contiguous operand over `labels` in that order, in slot `slot`.
  Operand contiguous(int slot, const std::vector<int>& labels) const {
    Operand o{slot, labels, std::vector<int64_t>(labels.size())};
    int64_t s = 1;
    for (size_t i = labels.size(); i-- > 0;) {
      o.strides[i] = s;
      s *= lsize[labels[i]];
    }
    return o;
  }

  // Drops unit loops, orders by `key` (outermost first) and merges loops
  // that are contiguous in every operand. An empty loop keeps the nest empty.
  static void normalize(std::vector<LoopDim>* dims, bool by_dest) {
    std::vector<LoopDim> v;
    for (const LoopDim& d : *dims) {
      if (d.n == 0) {
        *dims = {LoopDim{0, 0, 0, 0}};
        return;
      }
      if (d.n != 1) v.push_back(d);
    }
    auto key = [by_dest](const LoopDim& d) {
      return by_dest ? std::make_pair(d.sc, d.sa + d.sb) : std::make_pair(d.sa + d.sb, d.sc);
    };
    std::stable_sort(v.begin(), v.end(), [&](const LoopDim& x, const LoopDim& y) { return key(x) > key(y); });
    std::vector<LoopDim> m;
    for (const LoopDim& d : v) {
      if (!m.empty()) {
        LoopDim& o = m.back();
        if (o.sa == d.sa * d.n && o.sb == d.sb * d.n && o.sc == d.sc * d.n) {
          o.n *= d.n;
          o.sa = d.sa;
          o.sb = d.sb;
          o.sc = d.sc;
          continue;
        }
      }
      m.push_back(d);
    }
    *dims = m;
  }

  // Copies x into `dst` (strides per label of x given by dstride).
  void emit_permute(const Operand& x, int dst, const std::vector<int64_t>& dstride) {
    Step s;
    s.kind = StepKind::kPermute;
    s.a = x.slot;
    s.c = dst;
    for (size_t i = 0; i < x.labels.size(); ++i)
      s.dims.push_back(LoopDim{lsize[x.labels[i]], x.strides[i], 0, dstride[x.labels[i]]});
    normalize(&s.dims, true);
    plan->steps.push_back(std::move(s));
    plan->detail += plan->detail.empty() ? "permute" : "+permute";
  }

  // dst[keep] = sum over the other labels of x (* y); dst strides per label.
  void emit_reduce(const Operand& x, const Operand* y, const std::vector<int>& keep, int dst,
                   const std::vector<int64_t>& dstride) {
    Step s;
    s.kind = StepKind::kReduce;
    s.a = x.slot;
    s.b = y ? y->slot : -1;
    s.c = dst;
    const Operand acc = contiguous(-1, keep);
    std::vector<int> all = x.labels;
    if (y)
      for (int l : y->labels)
        if (!contains(all, l)) all.push_back(l);
    for (int l : all) {
      const int64_t sa = std::max<int64_t>(0, x.stride_of(l));
      const int64_t sb = y ? std::max<int64_t>(0, y->stride_of(l)) : 0;
      const int64_t sc = std::max<int64_t>(0, acc.stride_of(l));
      s.dims.push_back(LoopDim{lsize[l], sa, sb, sc});
    }
    for (size_t i = 0; i < keep.size(); ++i)
      s.sdims.push_back(LoopDim{lsize[keep[i]], acc.strides[i], 0, dstride[keep[i]]});
    normalize(&s.dims, false);
    normalize(&s.sdims, true);
    s.acc_elems = count(keep);
    plan->max_acc = std::max(plan->max_acc, s.acc_elems);
    plan->steps.push_back(std::move(s));
    plan->detail += plan->detail.empty() ? "reduce" : "+reduce";
  }

  std::vector<int64_t> stride_table(const Operand& o) const {
    std::vector<int64_t> t(lsize.size(), -1);
    for (size_t i = 0; i < o.labels.size(); ++i) t[o.labels[i]] = o.strides[i];
    return t;
  }

  // Sums away the labels of x not in `keep_set` (into a contiguous temporary).
  Operand presum(const Operand& x, const std::vector<bool>& needed) {
    std::vector<int> keep;
    for (int l : x.labels)
      if (needed[l]) keep.push_back(l);
    if (keep.size() == x.labels.size()) return x;
    Operand out = contiguous(new_temp(count(keep)), keep);
    emit_reduce(x, nullptr, keep, out.slot, stride_table(out));
    out.unit = x.unit;
    return out;
  }

  // Labels ordered by descending stride in table t.
  static std::vector<int> by_stride(std::vector<int> labels, const std::vector<int64_t>& t) {
    std::stable_sort(labels.begin(), labels.end(), [&](int a, int b) { return t[a] > t[b]; });
    return labels;
  }

  struct Group {
    bool ok;
    int64_t size, stride;  // stride of the innermost label (meaningless when size == 1)
  };
  Group group(const std::vector<int>& order, const std::vector<int64_t>& t) const {
    Group g{true, 1, 1};
    for (size_t i = 0; i < order.size(); ++i) {
      if (i + 1 < order.size() && t[order[i]] != t[order[i + 1]] * lsize[order[i + 1]]) g.ok = false;
      g.size *= lsize[order[i]];
    }
    if (!order.empty()) g.stride = t[order.back()];
    return g;
  }

  // A [M, K] (or B [K, N] with roles renamed): row-major when the inner
  // group is contiguous, transposed when the outer one is.
  struct MatFit {
    bool ok, trans;
    int64_t ld;
  };
  static MatFit fit_matrix(const Group& outer, const Group& inner) {
    if (!outer.ok || !inner.ok) return {false, false, 0};
    if (inner.size == 1 || inner.stride == 1)
      return {true, false, outer.size == 1 ? std::max<int64_t>(1, inner.size) : outer.stride};
    if (outer.size == 1 || outer.stride == 1)
      return {true, true, inner.size == 1 ? std::max<int64_t>(1, outer.size) : inner.stride};
    return {false, false, 0};
  }

  // One pairwise contraction; returns the result (or writes the output when
  // out_stride is given: the last pair).
  Operand contract(const Operand& p, const Operand& q, const std::vector<bool>& needed,
                   const std::vector<int64_t>* out_stride, const std::vector<int>& out_labels) {
    std::vector<int> batch, kdim;
    for (int l : p.labels) {
      if (!q.has(l)) continue;
      (needed[l] ? batch : kdim).push_back(l);
    }
    auto only = [](const Operand& a, const Operand& b) {
      std::vector<int> v;
      for (int l : a.labels)
        if (!b.has(l)) v.push_back(l);
      return v;
    };
    const std::vector<int> p_only = only(p, q), q_only = only(q, p);
    const int64_t Pn = count(p_only), Qn = count(q_only), Kn = count(kdim);
    const bool use_gemm = st->is_float && std::max(Pn, Qn) >= 4 && Pn * Qn * Kn >= 256;
    if (!use_gemm) {
      std::vector<int> keep;
      if (out_stride) {
        for (int l : out_labels)
          if (p.has(l) || q.has(l)) keep.push_back(l);
        emit_reduce(p, &q, keep, n_in, *out_stride);
        return Operand{n_in, {}, {}};
      }
      keep = batch;
      keep.insert(keep.end(), p_only.begin(), p_only.end());
      keep.insert(keep.end(), q_only.begin(), q_only.end());
      const Operand out = contiguous(new_temp(count(keep)), keep);
      emit_reduce(p, &q, keep, out.slot, stride_table(out));
      return out;
    }

    // Candidates: which operand is A, the orders of M, N and K, and whether
    // labels one side broadcasts (size 1 there) are batch labels read with
    // stride 0 on that side (as MatMul broadcasts) or M / N labels.
    std::vector<int> bcast;
    for (int l : p_only)
      if (contains(q.unit, l)) bcast.push_back(l);
    for (int l : q_only)
      if (contains(p.unit, l)) bcast.push_back(l);
    struct Choice {
      bool swap;
      std::vector<int> batch, mo, no, ko;
      bool fx, fy, fc;
      MatFit ma, mb;
      int64_t ldc;
      int64_t cost;
    };
    Choice best{};
    bool have = false;
    const std::vector<int64_t> tp = stride_table(p), tq = stride_table(q);
    for (int promote = 0; promote < (bcast.empty() ? 1 : 2); ++promote)
    for (int swap = 0; swap < 2; ++swap) {
      const Operand& x = swap ? q : p;
      const Operand& y = swap ? p : q;
      const std::vector<int64_t>& tx = swap ? tq : tp;
      const std::vector<int64_t>& ty = swap ? tp : tq;
      std::vector<int> bt = batch, m, n;
      for (int l : swap ? q_only : p_only) (promote && contains(bcast, l) ? bt : m).push_back(l);
      for (int l : swap ? p_only : q_only) (promote && contains(bcast, l) ? bt : n).push_back(l);
      std::vector<std::vector<int>> mos = {by_stride(m, tx)}, nos = {by_stride(n, ty)},
                                    kos = {by_stride(kdim, tx), by_stride(kdim, ty)};
      if (out_stride) {
        mos.push_back(by_stride(m, *out_stride));
        nos.push_back(by_stride(n, *out_stride));
      }
      for (const auto& mo : mos)
        for (const auto& no : nos)
          for (const auto& ko : kos) {
            Choice c{swap != 0, bt, mo, no, ko, false, false, true, {}, {}, 0, 0};
            c.ma = fit_matrix(group(mo, tx), group(ko, tx));
            c.mb = fit_matrix(group(ko, ty), group(no, ty));
            c.fx = c.ma.ok;
            c.fy = c.mb.ok;
            if (out_stride) {
              const Group gm = group(mo, *out_stride), gn = group(no, *out_stride);
              c.fc = gm.ok && gn.ok && (gn.size == 1 || gn.stride == 1);
              c.ldc = gm.size == 1 ? std::max<int64_t>(1, gn.size) : gm.stride;
            }
            const int64_t sx = count(x.labels), sy = count(y.labels), sc = count(bt) * count(m) * count(n);
            // A promoted batch multiplies the GEMM calls: a small tie-break cost.
            c.cost = (c.fx ? 0 : sx) + (c.fy ? 0 : sy) + (c.fc ? 0 : 2 * sc) + (promote ? count(bt) : 0);
            if (!have || c.cost < best.cost) {
              best = c;
              have = true;
            }
          }
    }
    const Operand* x = best.swap ? &q : &p;
    const Operand* y = best.swap ? &p : &q;
    const int64_t M = count(best.mo), N = count(best.no), K = count(best.ko);
    std::vector<int> bo = by_stride(best.batch, stride_table(*x));
    // A copied operand holds its own batch labels only (stride 0 for the rest).
    auto own = [&](const Operand& o) {
      std::vector<int> v;
      for (int l : bo)
        if (o.has(l)) v.push_back(l);
      return v;
    };
    Operand xm, ym;
    if (!best.fx) {
      std::vector<int> lab = own(*x);
      lab.insert(lab.end(), best.mo.begin(), best.mo.end());
      lab.insert(lab.end(), best.ko.begin(), best.ko.end());
      xm = contiguous(new_temp(count(lab)), lab);
      emit_permute(*x, xm.slot, stride_table(xm));
      x = &xm;
      best.ma = {true, false, std::max<int64_t>(1, K)};
    }
    if (!best.fy) {
      std::vector<int> lab = own(*y);
      lab.insert(lab.end(), best.ko.begin(), best.ko.end());
      lab.insert(lab.end(), best.no.begin(), best.no.end());
      ym = contiguous(new_temp(count(lab)), lab);
      emit_permute(*y, ym.slot, stride_table(ym));
      y = &ym;
      best.mb = {true, false, std::max<int64_t>(1, N)};
    }
    std::vector<int> clab = bo;
    clab.insert(clab.end(), best.mo.begin(), best.mo.end());
    clab.insert(clab.end(), best.no.begin(), best.no.end());
    Operand cop;
    std::vector<int64_t> tc;
    int64_t ldc;
    const bool direct_out = out_stride && best.fc;
    if (direct_out) {
      tc = *out_stride;
      cop.slot = n_in;
      ldc = best.ldc;
    } else {
      cop = contiguous(new_temp(count(clab)), clab);
      tc = stride_table(cop);
      ldc = std::max<int64_t>(1, N);
    }
    Step s;
    s.kind = StepKind::kGemm;
    s.a = x->slot;
    s.b = y->slot;
    s.c = cop.slot;
    s.g.dtype = st->dtype;
    s.g.M = M;
    s.g.N = N;
    s.g.K = K;
    s.g.transA = best.ma.trans;
    s.g.transB = best.mb.trans;
    s.g.lda = best.ma.ld;
    s.g.ldb = best.mb.ld;
    s.g.ldc = ldc;
    s.g.alpha = 1.0;
    s.g.beta = 0.0;
    s.g.bias = nullptr;
    const std::vector<int64_t> tx = stride_table(*x), ty = stride_table(*y);
    const int64_t nb = count(bo);
    s.aoff.resize(nb);
    s.boff.resize(nb);
    s.coff.resize(nb);
    std::vector<int64_t> idx(bo.size(), 0);
    for (int64_t e = 0; e < nb; ++e) {
      int64_t oa = 0, ob = 0, oc = 0;
      for (size_t i = 0; i < bo.size(); ++i) {
        oa += idx[i] * std::max<int64_t>(0, tx[bo[i]]);
        ob += idx[i] * std::max<int64_t>(0, ty[bo[i]]);
        oc += idx[i] * tc[bo[i]];
      }
      s.aoff[e] = oa;
      s.boff[e] = ob;
      s.coff[e] = oc;
      for (size_t i = bo.size(); i-- > 0;) {
        if (++idx[i] < lsize[bo[i]]) break;
        idx[i] = 0;
      }
    }
    plan->steps.push_back(std::move(s));
    char buf[128];
    std::snprintf(buf, sizeof buf, "gemm[%lldx%lldx%lldx%lld%s%s]", (long long)nb, (long long)M, (long long)N,
                  (long long)K, best.ma.trans ? " tA" : "", best.mb.trans ? " tB" : "");
    plan->detail += plan->detail.empty() ? buf : std::string("+") + buf;
    if (out_stride && !direct_out) emit_permute(cop, n_in, *out_stride);
    return cop;
  }
};

std::string shape_key_label(int l) { return "'" + label_name(l) + "'"; }

// Builds the plan of one input-shape signature; empty string on success.
std::string build_plan(const EinsumState* st, int n_in, const olc_tensor* inputs, Plan* plan) {
  const Equation& eq = st->eq;
  // Ellipsis ranks.
  int E = 0;
  for (int i = 0; i < n_in; ++i) {
    const Term& t = eq.inputs[i];
    const int need = t.letters();
    const int r = inputs[i].ndim;
    if (t.has_ellipsis() ? r < need : r != need)
      return "input " + std::to_string(i) + " has rank " + std::to_string(r) + " but its equation term needs " +
             (t.has_ellipsis() ? "at least " : "") + std::to_string(need);
    if (t.has_ellipsis()) E = std::max(E, r - need);
  }
  if (E > 0 && !eq.output.has_ellipsis())
    return "the inputs' '...' covers " + std::to_string(E) +
           " dimension(s) but the output term has no '...' to hold them";
  Builder b{st, n_in, std::vector<int64_t>(kLetters + E, -1), plan};
  // Expanded labels per input and the size of each label (size 1 broadcasts).
  std::vector<std::vector<int>> lab(n_in);
  std::vector<int> where(kLetters + E, -1);
  for (int i = 0; i < n_in; ++i) {
    const Term& t = eq.inputs[i];
    const int e = inputs[i].ndim - t.letters();
    for (int it : t.items) {
      if (it == kEllipsis) {
        for (int j = 0; j < e; ++j) lab[i].push_back(kLetters + E - e + j);
      } else {
        lab[i].push_back(it);
      }
    }
    for (int d = 0; d < inputs[i].ndim; ++d) {
      const int l = lab[i][d];
      const int64_t n = inputs[i].shape[d];
      for (int d2 = 0; d2 < d; ++d2)
        if (lab[i][d2] == l && inputs[i].shape[d2] != n)
          return "label " + shape_key_label(l) + " is repeated in input " + std::to_string(i) +
                 " with different sizes (" + std::to_string(inputs[i].shape[d2]) + " and " + std::to_string(n) +
                 "): input shape " + shape_str(inputs[i]);
      int64_t& s = b.lsize[l];
      if (s == -1 || s == 1) {
        s = n;
        where[l] = i;
      } else if (n != 1 && n != s) {
        return "label " + shape_key_label(l) + " has size " + std::to_string(s) + " in input " +
               std::to_string(where[l]) + " " + shape_str(inputs[where[l]]) + " but " + std::to_string(n) +
               " in input " + std::to_string(i) + " " + shape_str(inputs[i]) + " (only size 1 broadcasts)";
      }
    }
  }
  // Output labels and shape.
  std::vector<int> out_labels;
  for (int it : eq.output.items) {
    if (it == kEllipsis) {
      for (int j = 0; j < E; ++j) out_labels.push_back(kLetters + j);
    } else {
      out_labels.push_back(it);
    }
  }
  plan->out_shape.clear();
  plan->out_elems = 1;
  for (int l : out_labels) {
    plan->out_shape.push_back(b.lsize[l]);
    plan->out_elems *= b.lsize[l];
  }
  std::vector<int64_t> ostride(b.lsize.size(), 0);
  {
    int64_t s = 1;
    for (size_t i = out_labels.size(); i-- > 0;) {
      ostride[out_labels[i]] = s;
      s *= b.lsize[out_labels[i]];
    }
  }
  // Views: distinct labels, repeated ones as diagonals, broadcast and unit
  // dimensions dropped.
  std::vector<Operand> ops(n_in);
  for (int i = 0; i < n_in; ++i) {
    Operand& o = ops[i];
    o.slot = i;
    int64_t s = 1;
    std::vector<int64_t> cs(inputs[i].ndim);
    for (int d = inputs[i].ndim; d-- > 0;) {
      cs[d] = s;
      s *= inputs[i].shape[d];
    }
    if (eq.inputs[i].has_ellipsis())  // leading '...' dimensions this input lacks broadcast too
      for (int j = 0; j < E - (inputs[i].ndim - eq.inputs[i].letters()); ++j)
        if (b.lsize[kLetters + j] > 1) o.unit.push_back(kLetters + j);
    for (int d = 0; d < inputs[i].ndim; ++d) {
      const int l = lab[i][d];
      if (inputs[i].shape[d] == 1) {
        if (b.lsize[l] > 1 && !contains(o.unit, l)) o.unit.push_back(l);
        continue;
      }
      bool found = false;
      for (size_t k = 0; k < o.labels.size(); ++k)
        if (o.labels[k] == l) {
          o.strides[k] += cs[d];
          found = true;
        }
      if (!found) {
        o.labels.push_back(l);
        o.strides.push_back(cs[d]);
      }
    }
  }
  if (plan->out_elems == 0) {
    plan->detail = "empty";
    return "";
  }
  std::vector<bool> in_out(b.lsize.size(), false);
  for (int l : out_labels) in_out[l] = true;

  if (n_in == 1) {
    const Operand& x = ops[0];
    bool reduce = false, same = true;
    for (size_t k = 0; k < x.labels.size(); ++k) {
      reduce = reduce || !in_out[x.labels[k]];
      same = same && in_out[x.labels[k]] && ostride[x.labels[k]] == x.strides[k];
    }
    if (!reduce && same && olc_element_count(&inputs[0]) == plan->out_elems &&
        OLC_API_HAS(g_api, view_output)) {
      plan->view = true;
      plan->detail = "view";
      return "";
    }
    if (!reduce) {
      b.emit_permute(x, n_in, ostride);
    } else {
      std::vector<int> keep;
      for (int l : out_labels)
        if (x.has(l)) keep.push_back(l);
      b.emit_reduce(x, nullptr, keep, n_in, ostride);
    }
    return "";
  }
  Operand cur = ops[0];
  for (int i = 1; i < n_in; ++i) {
    std::vector<bool> later = in_out;
    for (int j = i + 1; j < n_in; ++j)
      for (int l : ops[j].labels) later[l] = true;
    std::vector<bool> need_cur = later, need_nxt = later;
    for (int l : ops[i].labels) need_cur[l] = true;
    for (int l : cur.labels) need_nxt[l] = true;
    const Operand p = b.presum(cur, need_cur);
    const Operand q = b.presum(ops[i], need_nxt);
    const bool last = i == n_in - 1;
    cur = b.contract(p, q, later, last ? &ostride : nullptr, out_labels);
  }
  return "";
}

// ------------------------------------------------------------ create / run

int32_t kind_of(int32_t dt) {
  switch (dt) {
    case OLC_DTYPE_FLOAT: return OLC_EINSUM_FLOAT;
    case OLC_DTYPE_DOUBLE: return OLC_EINSUM_DOUBLE;
    case OLC_DTYPE_FLOAT16: return OLC_EINSUM_FLOAT16;
    case OLC_DTYPE_BFLOAT16: return OLC_EINSUM_BFLOAT16;
    case OLC_DTYPE_INT8:
    case OLC_DTYPE_UINT8: return OLC_EINSUM_INT8;
    case OLC_DTYPE_INT16:
    case OLC_DTYPE_UINT16: return OLC_EINSUM_INT16;
    case OLC_DTYPE_INT32:
    case OLC_DTYPE_UINT32: return OLC_EINSUM_INT32;
    case OLC_DTYPE_INT64:
    case OLC_DTYPE_UINT64: return OLC_EINSUM_INT64;
    default: return 0;
  }
}

void* einsum_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  AttrReader ar{node, error, esize};
  if (!ar.check_known({"equation"})) return nullptr;
  const olc_attribute* eqa = ar.find("equation");
  if (!eqa) return fail_create(error, esize, "attribute 'equation' is required");
  if (eqa->type != OLC_ATTR_STRING || !eqa->s) return fail_create(error, esize, "attribute 'equation' must be a string");
  if (node->n_inputs < 1) return fail_create(error, esize, "Einsum takes at least 1 input, got 0");
  if (node->n_outputs != 1) return fail_create(error, esize, "expects 1 output, got %d", node->n_outputs);
  auto st = std::make_unique<EinsumState>();
  const std::string e = parse_equation(eqa->s, node->n_inputs, &st->eq);
  if (!e.empty()) return fail_create(error, esize, "invalid equation '%s': %s", eqa->s, e.c_str());
  for (int32_t i = 0; i < node->n_inputs && node->input_ranks; ++i) {
    const Term& t = st->eq.inputs[i];
    const int32_t r = node->input_ranks[i];
    if (r >= 0 && (t.has_ellipsis() ? r < t.letters() : r != t.letters()))
      return fail_create(error, esize, "invalid equation '%s' for the inputs: input %d has rank %d but its term needs %s%d",
                         eqa->s, i, r, t.has_ellipsis() ? "at least " : "", t.letters());
  }
  const int32_t dt = node->input_dtypes[0];
  st->kind = kind_of(dt);
  if (!st->kind)
    return fail_create(error, esize, "unsupported input type %s (float, int and uint types)", olc_dtype_name(dt));
  for (int32_t i = 1; i < node->n_inputs; ++i)
    if (node->input_dtypes[i] != OLC_DTYPE_UNDEFINED && node->input_dtypes[i] != dt)
      return fail_create(error, esize, "input %d has type %s, input 0 has %s", i, olc_dtype_name(node->input_dtypes[i]),
                         olc_dtype_name(dt));
  if (node->output_dtypes[0] != OLC_DTYPE_UNDEFINED && node->output_dtypes[0] != dt)
    return fail_create(error, esize, "output type %s differs from the input type %s",
                       olc_dtype_name(node->output_dtypes[0]), olc_dtype_name(dt));
  st->dtype = dt;
  st->esize = static_cast<int>(olc_dtype_size(dt));
  st->is_float = is_float_type(dt);
  st->ks = select_kernels(api);
  const int32_t level = api->simd_level();
  st->loops = level >= OLC_SIMD_AVX512 ? avx512::einsum_loops()
              : level >= OLC_SIMD_AVX2 ? avx2::einsum_loops()
                                       : scalar::einsum_loops();
  st->isa_name = st->ks.isa_name;
  st->tun = default_gemm_tuning(dt);
  if (st->is_float) {
    // The GEMM of Einsum reads MatMul's tuning (the same driver and shapes).
    const char* lib = "olc_matmul";
    const GemmTuning& t = st->tun;
    const char* isa = st->ks.isa_name;
    st->t_kc = api->tuning_declare_int(lib, "MatMul", isa, dt, "kc", t.kc);
    st->t_nc = api->tuning_declare_int(lib, "MatMul", isa, dt, "nc", t.nc);
    st->t_par = api->tuning_declare_int(lib, "MatMul", isa, dt, "parallel_min_macs", t.parallel_min_macs);
    st->t_splitk = api->tuning_declare_int(lib, "MatMul", isa, dt, "split_k_min", t.split_k_min);
    st->t_gemv = api->tuning_declare_int(lib, "MatMul", isa, dt, "gemv_max", t.gemv_max);
    st->t_direct_b = api->tuning_declare_int(lib, "MatMul", isa, dt, "direct_b_max_mblocks", t.direct_b_max_mblocks);
    st->t_direct_a = api->tuning_declare_int(lib, "MatMul", isa, dt, "direct_a", t.direct_a);
  }
  return st.release();
}

void einsum_destroy(void* state) { delete static_cast<EinsumState*>(state); }

GemmTuning read_tuning(const EinsumState* st) {
  GemmTuning t = st->tun;
  if (!st->t_kc) return t;
  t.kc = std::max<int64_t>(16, std::min<int64_t>(4096, g_api->tuning_read_int(st->t_kc)));
  t.nc = std::max<int64_t>(32, std::min<int64_t>(1 << 16, g_api->tuning_read_int(st->t_nc)));
  t.parallel_min_macs = g_api->tuning_read_int(st->t_par);
  t.split_k_min = g_api->tuning_read_int(st->t_splitk);
  t.gemv_max = std::max<int64_t>(1, g_api->tuning_read_int(st->t_gemv));
  t.direct_b_max_mblocks = g_api->tuning_read_int(st->t_direct_b);
  t.direct_a = g_api->tuning_read_int(st->t_direct_a);
  return t;
}

// A loop nest split over its outermost loop on the session executor (that
// loop must write distinct destinations: never a summed loop).
enum class NestOp { kPermute, kAccumulate, kStore };

struct NestJob {
  const EinsumState* st;
  NestOp op;
  const std::vector<LoopDim>* dims;
  const char* a;
  const char* b;
  char* c;
  int64_t asz, bsz, csz;  // element sizes of a, b and c
};

void run_nest(const NestJob& j, const LoopDim* dims, const char* a, const char* b, char* c) {
  const int nd = static_cast<int>(j.dims->size());
  switch (j.op) {
    case NestOp::kPermute: j.st->loops->permute(j.st->esize, nd, dims, a, c); break;
    case NestOp::kAccumulate: j.st->loops->accumulate(j.st->kind, nd, dims, a, b, c); break;
    case NestOp::kStore: j.st->loops->store(j.st->kind, nd, dims, a, c); break;
  }
}

void nest_range(void* user, int64_t begin, int64_t end) {
  const NestJob& j = *static_cast<const NestJob*>(user);
  LoopDim local[64];
  std::vector<LoopDim> heap;
  const size_t nd = j.dims->size();
  LoopDim* dims = local;
  if (nd > 64) {
    heap = *j.dims;
    dims = heap.data();
  } else {
    std::copy(j.dims->begin(), j.dims->end(), local);
  }
  const LoopDim& d0 = (*j.dims)[0];
  dims[0].n = end - begin;
  run_nest(j, dims, j.a + begin * d0.sa * j.asz, j.b ? j.b + begin * d0.sb * j.bsz : nullptr,
           j.c + begin * d0.sc * j.csz);
}

constexpr int64_t kParallelMinElems = 1 << 15;

void nest(olc_context* ctx, const NestJob& j) {
  const std::vector<LoopDim>& dims = *j.dims;
  int64_t total = 1;
  for (const LoopDim& d : dims) total *= d.n;
  const int32_t threads = g_api->concurrency(ctx);
  if (threads > 1 && !dims.empty() && dims[0].n > 1 && dims[0].sc != 0 && total >= kParallelMinElems) {
    const int64_t grain = std::max<int64_t>(1, dims[0].n / (4 * threads));
    g_api->parallel_for(ctx, dims[0].n, grain, 0, &nest_range, const_cast<NestJob*>(&j));
    return;
  }
  run_nest(j, dims.data(), j.a, j.b, j.c);
}

std::shared_ptr<const Plan> get_plan(const EinsumState* st, int32_t n_in, const olc_tensor* inputs, std::string* err) {
  std::vector<int64_t> key;
  for (int32_t i = 0; i < n_in; ++i) {
    key.push_back(inputs[i].ndim);
    key.insert(key.end(), inputs[i].shape, inputs[i].shape + inputs[i].ndim);
  }
  {
    std::lock_guard<std::mutex> lock(st->mu);
    auto it = st->plans.find(key);
    if (it != st->plans.end()) return it->second;
  }
  auto plan = std::make_shared<Plan>();
  *err = build_plan(st, n_in, inputs, plan.get());
  if (!err->empty()) return nullptr;
  plan->detail = std::string(st->isa_name) + " " + plan->detail;
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->plans.size() >= kMaxPlans) st->plans.clear();
  st->plans[key] = plan;
  return plan;
}

int32_t einsum_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* inputs,
                   int32_t n_outputs) {
  const EinsumState* st = static_cast<const EinsumState*>(state);
  const int32_t n_in = static_cast<int32_t>(st->eq.inputs.size());
  if (n_inputs != n_in || n_outputs != 1)
    return fail_run(ctx, "expects %d input(s) and 1 output, got %d and %d", n_in, n_inputs, n_outputs);
  for (int32_t i = 0; i < n_in; ++i) {
    const olc_tensor& t = inputs[i];
    if (t.dtype != st->dtype)
      return fail_run(ctx, "input %d has type %s, the kernel was created for %s", i, olc_dtype_name(t.dtype),
                      olc_dtype_name(st->dtype));
    const int64_t n = olc_element_count(&t);
    if (n < 0) return fail_run(ctx, "input %d has a negative dimension or too many elements", i);
    if (n > 0 && !t.data) return fail_run(ctx, "input %d has no data", i);
  }
  std::string err;
  const std::shared_ptr<const Plan> plan = get_plan(st, n_in, inputs, &err);
  if (!plan) return fail_run(ctx, "%s", err.c_str());
  const int32_t ndim = static_cast<int32_t>(plan->out_shape.size());
  if (plan->view) {
    if (g_api->view_output(ctx, 0, 0, ndim, plan->out_shape.data()) != OLC_OK) return OLC_ERROR;
    g_api->record_usage_detail(ctx, plan->detail.c_str());
    return OLC_OK;
  }
  void* y = g_api->allocate_output(ctx, 0, st->dtype, ndim, plan->out_shape.data());
  if (!y && plan->out_elems > 0) return OLC_ERROR;
  if (plan->out_elems > 0) {
    std::vector<std::unique_ptr<char[]>> temps;
    for (int64_t n : plan->temp_elems) temps.emplace_back(new char[static_cast<size_t>(std::max<int64_t>(1, n)) * st->esize]);
    std::unique_ptr<uint64_t[]> acc(plan->max_acc ? new uint64_t[static_cast<size_t>(plan->max_acc)] : nullptr);
    auto ptr = [&](int slot) -> void* {
      if (slot < n_in) return inputs[slot].data;
      if (slot == n_in) return y;
      return temps[slot - n_in - 1].get();
    };
    const GemmTuning tun = st->is_float ? read_tuning(st) : st->tun;
    for (const Step& s : plan->steps) {
      switch (s.kind) {
        case StepKind::kPermute:
          nest(ctx, NestJob{st, NestOp::kPermute, &s.dims, static_cast<const char*>(ptr(s.a)), nullptr,
                            static_cast<char*>(ptr(s.c)), st->esize, 0, st->esize});
          break;
        case StepKind::kReduce:
          std::memset(acc.get(), 0, sizeof(uint64_t) * static_cast<size_t>(s.acc_elems));
          nest(ctx, NestJob{st, NestOp::kAccumulate, &s.dims, static_cast<const char*>(ptr(s.a)),
                            s.b >= 0 ? static_cast<const char*>(ptr(s.b)) : nullptr,
                            reinterpret_cast<char*>(acc.get()), st->esize, st->esize, 8});
          nest(ctx, NestJob{st, NestOp::kStore, &s.sdims, reinterpret_cast<const char*>(acc.get()), nullptr,
                            static_cast<char*>(ptr(s.c)), 8, 0, st->esize});
          break;
        case StepKind::kGemm: {
          const size_t nb = s.aoff.size();
          std::vector<const void*> ap(nb), bp(nb);
          std::vector<void*> cp(nb);
          std::vector<int64_t> bm(nb, 0);
          const char* a0 = static_cast<const char*>(ptr(s.a));
          const char* b0 = static_cast<const char*>(ptr(s.b));
          char* c0 = static_cast<char*>(ptr(s.c));
          for (size_t e = 0; e < nb; ++e) {
            ap[e] = a0 + s.aoff[e] * st->esize;
            bp[e] = b0 + s.boff[e] * st->esize;
            cp[e] = c0 + s.coff[e] * st->esize;
          }
          GemmBatch batch{static_cast<int64_t>(nb), ap.data(), bp.data(), bm.data(), cp.data(), nullptr};
          const char* path = gemm_run(g_api, ctx, st->ks, tun, s.g, batch);
          if (!std::strcmp(path, "oom")) return fail_run(ctx, "out of memory for the GEMM work buffers");
          if (!std::strcmp(path, "unsupported")) return fail_run(ctx, "internal error: no GEMM for this type");
          break;
        }
      }
    }
  }
  g_api->record_usage_detail(ctx, plan->detail.c_str());
  return OLC_OK;
}

const olc_kernel_vtable kEinsum = {OLC_ABI_VERSION, 0, "olc_matmul::Einsum", guarded_create<einsum_create>,
                                   guarded_run<einsum_run>, einsum_destroy};

}  // namespace

void set_einsum_api(const olc_core_api* api) { g_api = api; }
const olc_kernel_vtable* einsum_vtable() { return &kEinsum; }

}  // namespace olc_mm
