// The attributes and geometry the convolution kernels share (conv_common.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "adapter_util.h"
#include "conv_common.h"

namespace olc_mm {
namespace conv {

const char* op_name(ConvOp kind) {
  switch (kind) {
    case ConvOp::kFusedConv: return "FusedConv";
    case ConvOp::kTranspose: return "ConvTranspose";
    case ConvOp::kQLinearConv: return "QLinearConv";
    case ConvOp::kConvInteger: return "ConvInteger";
    default: return "Conv";
  }
}

std::string fmt_ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(static_cast<long long>(v[i]));
  }
  return s + "]";
}

// An optional spatial attribute (empty: absent) must have `want` values.
bool check_length(const std::vector<int64_t>& v, const char* name, int want, int nsp, char* err, size_t esize) {
  if (v.empty() || v.size() == size_t(want)) return true;
  std::snprintf(err, esize, "attribute '%s' has %zu values, %d expected for a %d-D convolution", name, v.size(), want,
                nsp);
  return false;
}

// The checks Conv and ConvTranspose share: ranks of X and W (1-D to 3-D)
// and the lengths of the spatial attributes. Returns the spatial rank, or 0
// with the reason in err.
int check_ranks(const ConvAttrs* st, const olc_tensor& x, const olc_tensor& w, char* err, size_t esize) {
  if (x.ndim < 3 || x.ndim > 5) {
    std::snprintf(err, esize, "input X must have rank 3, 4 or 5 (1-D to 3-D), got %s", shape_str(x).c_str());
    return 0;
  }
  if (w.ndim != x.ndim) {
    std::snprintf(err, esize, "weight W %s must have the rank of X %s", shape_str(w).c_str(), shape_str(x).c_str());
    return 0;
  }
  const int nsp = x.ndim - 2;
  if (!check_length(st->kshape, "kernel_shape", nsp, nsp, err, esize) ||
      !check_length(st->strides, "strides", nsp, nsp, err, esize) ||
      !check_length(st->dil, "dilations", nsp, nsp, err, esize) ||
      !check_length(st->pads, "pads", 2 * nsp, nsp, err, esize))
    return 0;
  return nsp;
}

// Resolves the geometry of one run; on failure writes the reason.
bool resolve(const ConvAttrs* st, const olc_tensor& x, const olc_tensor& w, const olc_tensor* b, Geom* g,
             char* err, size_t esize) {
  const int nsp = check_ranks(st, x, w, err, esize);
  if (nsp == 0) return false;
  g->nsp = nsp;
  g->N = x.shape[0];
  g->C = x.shape[1];
  g->Cout = w.shape[0];
  g->G = st->group;
  if (g->C % g->G != 0) {
    std::snprintf(err, esize, "input channels %lld are not divisible by group %lld", (long long)g->C,
                  (long long)g->G);
    return false;
  }
  if (g->Cout % g->G != 0) {
    std::snprintf(err, esize, "output channels %lld (W %s) are not divisible by group %lld", (long long)g->Cout,
                  shape_str(w).c_str(), (long long)g->G);
    return false;
  }
  g->Cg = g->C / g->G;
  g->Mg = g->Cout / g->G;
  if (w.shape[1] != g->Cg) {
    std::snprintf(err, esize,
                  "weight W %s expects %lld input channels per group, X %s has %lld (%lld channels, group %lld)",
                  shape_str(w).c_str(), (long long)w.shape[1], shape_str(x).c_str(), (long long)g->Cg,
                  (long long)g->C, (long long)g->G);
    return false;
  }
  if (b) {
    if (b->ndim != 1 || b->shape[0] != g->Cout) {
      std::snprintf(err, esize, "bias B %s must be 1-D with %lld values (the output channels)",
                    shape_str(*b).c_str(), (long long)g->Cout);
      return false;
    }
  }
  const int off = 3 - nsp;
  for (int i = 0; i < 3; ++i) {
    g->in[i] = 1;
    g->k[i] = 1;
    g->s[i] = 1;
    g->d[i] = 1;
    g->pb[i] = g->pe[i] = 0;
    g->out[i] = 1;
  }
  g->in_sp = g->out_sp = g->ksz = 1;
  for (int i = 0; i < nsp; ++i) {
    const int j = off + i;
    const int64_t in = x.shape[2 + i];
    const int64_t k = w.shape[2 + i];
    if (!st->kshape.empty() && st->kshape[i] != k) {
      std::snprintf(err, esize, "attribute kernel_shape %s differs from the spatial shape of W %s",
                    fmt_ints(st->kshape).c_str(), shape_str(w).c_str());
      return false;
    }
    const int64_t s = st->strides.empty() ? 1 : st->strides[i];
    const int64_t d = st->dil.empty() ? 1 : st->dil[i];
    const int64_t ext = (k - 1) * d + 1;  // the dilated kernel's extent
    int64_t pb = 0, pe = 0, out = 0;
    switch (st->autopad) {
      case AutoPad::kNotSet:
        if (!st->pads.empty()) {
          pb = st->pads[i];
          pe = st->pads[nsp + i];
        }
        if (in + pb + pe < ext) {
          std::snprintf(err, esize,
                        "kernel extent %lld (kernel %lld, dilation %lld) is larger than the padded input %lld "
                        "along spatial axis %d",
                        (long long)ext, (long long)k, (long long)d, (long long)(in + pb + pe), i);
          return false;
        }
        out = (in + pb + pe - ext) / s + 1;
        break;
      case AutoPad::kValid:
        if (in < ext) {
          std::snprintf(err, esize,
                        "kernel extent %lld (kernel %lld, dilation %lld) is larger than the input %lld along "
                        "spatial axis %d (auto_pad VALID)",
                        (long long)ext, (long long)k, (long long)d, (long long)in, i);
          return false;
        }
        out = (in - ext) / s + 1;
        break;
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: {
        out = (in + s - 1) / s;
        const int64_t total = std::max<int64_t>(0, (out - 1) * s + ext - in);
        pb = st->autopad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
        pe = total - pb;
        break;
      }
    }
    g->in[j] = in;
    g->k[j] = k;
    g->s[j] = s;
    g->d[j] = d;
    g->pb[j] = pb;
    g->pe[j] = pe;
    g->out[j] = out;
    g->in_sp *= in;
    g->out_sp *= out;
    g->ksz *= k;
  }
  g->Kg = g->Cg * g->ksz;
  g->pointwise = true;
  for (int i = 0; i < 3; ++i)
    g->pointwise = g->pointwise && g->k[i] == 1 && g->s[i] == 1 && g->pb[i] == 0 && g->pe[i] == 0;
  g->depthwise = g->Cg == 1 && g->G > 1;
  return true;
}

static bool get_ints(const olc_attribute* a, std::vector<int64_t>* out) {
  if (a->type != OLC_ATTR_INTS) return false;
  out->assign(a->ints, a->ints + a->count);
  return true;
}

// Reads and checks the attributes, the input count and the types; false
// (error written) on failure.
// The activation of a FusedConv: its name and parameters.
static bool parse_activation(AttrReader& ar, Activation* act, char* error, size_t esize) {
  const olc_attribute* a = ar.find("activation");
  const olc_attribute* pa = ar.find("activation_params");
  if (!a) {
    if (pa) return fail_create(error, esize, "attribute 'activation_params' without 'activation'"), false;
    return true;
  }
  if (a->type != OLC_ATTR_STRING || !a->s) return fail_create(error, esize, "attribute 'activation' must be a string"), false;
  std::vector<double> p;
  if (pa) {
    if (pa->type != OLC_ATTR_FLOATS) return fail_create(error, esize, "attribute 'activation_params' must be floats"), false;
    p.assign(pa->floats, pa->floats + pa->count);
  }
  struct Kind {
    const char* name;
    ActKind kind;
    size_t nparams;
  } kinds[] = {{"Relu", ActKind::kRelu, 0},       {"Clip", ActKind::kClip, 2},
               {"LeakyRelu", ActKind::kLeakyRelu, 1}, {"HardSigmoid", ActKind::kHardSigmoid, 2},
               {"Sigmoid", ActKind::kSigmoid, 0}, {"HardSwish", ActKind::kHardSwish, 0},
               {"Swish", ActKind::kSwish, 1}};
  for (const Kind& k : kinds) {
    if (std::strcmp(k.name, a->s) != 0) continue;
    if (p.size() != k.nparams)
      return fail_create(error, esize, "activation %s takes %zu parameters, got %zu", k.name, k.nparams, p.size()),
             false;
    act->kind = k.kind;
    act->a = p.size() > 0 ? static_cast<float>(p[0]) : 0.0f;
    act->b = p.size() > 1 ? static_cast<float>(p[1]) : 0.0f;
    return true;
  }
  return fail_create(error, esize, "unknown activation '%s'", a->s), false;
}

// A FusedConv's two affines: channel_scale / channel_shift (floats, folded
// into the weights) and post_scale / post_shift (floats of one value, after
// the activation, which they need).
static bool parse_affines(AttrReader& ar, ConvAttrs* st, char* error, size_t esize) {
  for (auto [name, out] : {std::pair{"channel_scale", &st->ch_scale}, std::pair{"channel_shift", &st->ch_shift}}) {
    const olc_attribute* a = ar.find(name);
    if (!a) continue;
    if (a->type != OLC_ATTR_FLOATS || a->count < 1)
      return fail_create(error, esize, "attribute '%s' must be one or more floats", name), false;
    out->assign(a->floats, a->floats + a->count);
  }
  const olc_attribute* ps = ar.find("post_scale");
  const olc_attribute* pb = ar.find("post_shift");
  if (!ps && !pb) return true;
  if (st->act.kind == ActKind::kNone)
    return fail_create(error, esize, "attributes 'post_scale' and 'post_shift' need an 'activation'"), false;
  for (const olc_attribute* a : {ps, pb})
    if (a && a->type != OLC_ATTR_FLOAT)
      return fail_create(error, esize, "attribute '%s' must be a float", a == ps ? "post_scale" : "post_shift"), false;
  st->act.post = true;
  st->act.post_scale = ps ? static_cast<float>(ps->f) : 1.0f;
  st->act.post_shift = pb ? static_cast<float>(pb->f) : 0.0f;
  return true;
}

bool parse_attrs(const olc_node_info* node, ConvOp kind, ConvAttrs* st, char* error, size_t esize) {
  const bool transpose = kind == ConvOp::kTranspose;
  const bool fused = kind == ConvOp::kFusedConv;
  const char* op = op_name(kind);
  AttrReader ar{node, error, esize};
  if (fused) {
    if (!ar.check_known({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", "activation",
                         "activation_params", "bn_epsilon", "channel_scale", "channel_shift", "post_scale",
                         "post_shift"}))
      return false;
    if (!parse_activation(ar, &st->act, error, esize) || !parse_affines(ar, st, error, esize)) return false;
    st->bn_eps = ar.get_float("bn_epsilon", 1e-5);
    if (!ar.ok) return false;
  } else if (transpose) {
    if (!ar.check_known({"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads",
                         "strides"}))
      return false;
  } else if (!ar.check_known({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})) {
    return false;
  }
  st->group = ar.get_int("group", 1);
  if (!ar.ok) return false;
  if (st->group < 1) return fail_create(error, esize, "attribute group must be >= 1, got %lld", (long long)st->group), false;
  if (const olc_attribute* a = ar.find("auto_pad")) {
    if (a->type != OLC_ATTR_STRING || !a->s)
      return fail_create(error, esize, "attribute 'auto_pad' must be a string"), false;
    const std::string v = a->s;
    if (v == "NOTSET") st->autopad = AutoPad::kNotSet;
    else if (v == "SAME_UPPER") st->autopad = AutoPad::kSameUpper;
    else if (v == "SAME_LOWER") st->autopad = AutoPad::kSameLower;
    else if (v == "VALID") st->autopad = AutoPad::kValid;
    else
      return fail_create(error, esize,
                         "attribute auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '%s'", v.c_str()),
             false;
  }
  struct IntsAttr {
    const char* name;
    std::vector<int64_t>* v;
    int64_t min;
    const char* what;
  } lists[] = {{"kernel_shape", &st->kshape, 1, "positive"},   {"strides", &st->strides, 1, "positive"},
               {"dilations", &st->dil, 1, "positive"},         {"pads", &st->pads, 0, "non-negative"},
               {"output_padding", &st->out_pad, 0, "non-negative"}, {"output_shape", &st->out_shape, 1, "positive"}};
  for (auto& l : lists) {
    const olc_attribute* a = ar.find(l.name);
    if (!a) continue;
    if (!get_ints(a, l.v)) return fail_create(error, esize, "attribute '%s' must be a list of ints", l.name), false;
    for (int64_t x : *l.v)
      if (x < l.min)
        return fail_create(error, esize, "attribute %s must be %s, got %s", l.name, l.what, fmt_ints(*l.v).c_str()),
               false;
  }
  // The spatial rank, where something tells it already.
  int nsp = -1;
  const int wi = kind == ConvOp::kQLinearConv ? 3 : 1;  // W (QLinearConv: after x, x_scale, x_zero_point)
  if (node->input_ranks && node->input_ranks[0] >= 0) nsp = node->input_ranks[0] - 2;
  else if (node->n_inputs > wi && node->input_ranks && node->input_ranks[wi] >= 0) nsp = node->input_ranks[wi] - 2;
  else if (!st->kshape.empty()) nsp = static_cast<int>(st->kshape.size());
  if (nsp != -1 && (nsp < 1 || nsp > 3))
    return fail_create(error, esize, "%s supports 1-D, 2-D and 3-D inputs (rank 3 to 5), got rank %d", op, nsp + 2),
           false;
  {
    const size_t want = nsp > 0 ? size_t(nsp) : (!st->strides.empty() ? st->strides.size() : st->dil.size());
    auto bad = [&](const char* name, size_t got, size_t w) {
      fail_create(error, esize, "attribute '%s' has %zu values, %zu expected%s", name, got, w,
                  nsp > 0 ? " for this input rank" : " (the other attributes' length)");
      return false;
    };
    if (want) {
      if (!st->kshape.empty() && st->kshape.size() != want) return bad("kernel_shape", st->kshape.size(), want);
      if (!st->strides.empty() && st->strides.size() != want) return bad("strides", st->strides.size(), want);
      if (!st->dil.empty() && st->dil.size() != want) return bad("dilations", st->dil.size(), want);
      if (!st->pads.empty() && st->pads.size() != 2 * want) return bad("pads", st->pads.size(), 2 * want);
      if (!st->out_pad.empty() && st->out_pad.size() != want) return bad("output_padding", st->out_pad.size(), want);
      if (!st->out_shape.empty() && st->out_shape.size() != want && st->out_shape.size() != want + 2)
        return bad("output_shape", st->out_shape.size(), want);
    } else if (st->pads.size() % 2) {
      fail_create(error, esize, "attribute 'pads' must have an even number of values, got %zu", st->pads.size());
      return false;
    }
  }
  return true;
}

// The runs of one panel: output columns [c0, c0 + nc) of an (od, oh, ow)
// grid, cut at row ends, as (column in the panel, length, offset) with the
// offset of the run's first position in PadLayout l.
PadCopy pad_copy_of(const Geom& g, const PadLayout& l, const void* x, int32_t dtype, int64_t nch, float* dst,
                    int64_t r0, int64_t r1) {
  PadCopy pc;
  pc.x = x;
  pc.dtype = dtype;
  pc.nch = nch;
  for (int i = 0; i < 3; ++i) {
    pc.in[i] = g.in[i];
    pc.pb[i] = g.pb[i];
  }
  pc.l = l;
  pc.dst = dst;
  pc.r0 = r0;
  pc.r1 = r1;
  return pc;
}

int64_t panel_runs(const Geom& g, const PadLayout& l, int64_t c0, int64_t nc, int64_t* runs) {
  const int64_t OH = g.out[1], OW = g.out[2];
  int64_t od = c0 / (OH * OW), oh = (c0 / OW) % OH, ow = c0 % OW;
  int64_t n = 0;
  for (int64_t c = 0; c < nc;) {
    const int64_t len = std::min(nc - c, OW - ow);
    const int64_t off = out_row_offset(g, l, od, oh) + ow;
    if (n > 0 && runs[3 * n - 1] + runs[3 * n - 2] == off) {
      runs[3 * n - 2] += len;  // continues the previous run (rows without padding between them)
    } else {
      runs[3 * n] = c;
      runs[3 * n + 1] = len;
      runs[3 * n + 2] = off;
      ++n;
    }
    c += len;
    ow = 0;
    if (++oh == OH) {
      oh = 0;
      ++od;
    }
  }
  return n;
}

}  // namespace conv
}  // namespace olc_mm
