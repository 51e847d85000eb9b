// The recurrent ops LSTM (ai.onnx 1, 7, 14), GRU (1, 3, 7, 14), RNN
// (1, 7, 14) and com.microsoft DynamicQuantizeLSTM (1) as seen by
// olc-core, on one driver: attribute, type and shape validation, constant
// W and R packed once and B's two halves summed once, and the run. Only
// the cell math differs per op (rnn_kernels.inc). Compiled without ISA
// flags.
//
// DynamicQuantizeLSTM is LSTM but for how the weights arrive: int8 /
// uint8 W [dirs, input, 4 hidden] and R [dirs, hidden, 4 hidden] with a
// scale and zero point per direction or per column. They are dequantized
// ((q - zero point) * scale) into LSTM's float layout, once at creation
// when constant (else per run), and from there it runs as LSTM; a
// constant quantized R is also kept as int8 panels, which one row's
// recurrent product reads instead of the float R when that is larger than
// the caches favour (gemv_q8_panels).
//
// A run: X W^T for every step at once, one GEMM ([seq * batch, input] x
// [input, dirs * gates hidden]) with the biases added as its tiles are
// stored; then per direction and step the recurrent product H(t-1) R^T
// ([rows, hidden] x [hidden, gates hidden]: the GEMM on the packed R, or
// for a single row a GEMV over its panels) and the gate math, which
// writes H(t) (and LSTM's C(t)) and Y's row. GRU without
// linear_before_reset needs r(t) before the product of its candidate
// gate: H(t-1) against the z and r columns, the gates, then r (.) H(t-1)
// against the h columns (R packed as those two parts). Threads take whole
// directions and blocks of batch rows, whose recurrences are independent,
// so no step waits for another thread; a lone row of a lone direction
// splits each step's product across threads instead, and only when that
// product is large.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "adapter_util.h"
#include "gemm_driver.h"
#include "rnn_adapter.h"
#include "rnn_kernels.h"
#include "scratch.h"

namespace olc_mm {

namespace {

const olc_core_api* g_api = nullptr;

enum Input : int {
  kX = 0, kW, kR, kB, kSeqLens, kInitialH, kInitialC, kP,
  kLstmInputs,
  // DynamicQuantizeLSTM's: per direction ([dirs]) or per column ([dirs, 4 hidden]).
  kWScale = kLstmInputs, kWZeroPoint, kRScale, kRZeroPoint,
  kNumInputs
};
const char* const kInputNames[kNumInputs] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P",
                                             "W_scale", "W_zero_point", "R_scale", "R_zero_point"};
// The rank of each input (-1: 1 or 2, checked with the shapes).
const int32_t kRanks[kNumInputs] = {3, 3, 3, 2, 1, 3, 3, 2, -1, -1, -1, -1};

enum class Direction { kForward, kReverse, kBidirectional };

enum class CellKind { kLstm, kGru, kRnn };

// What differs between the three ops outside their cell math.
struct OpTraits {
  const char* op;
  CellKind kind;
  bool quantized;  // DynamicQuantizeLSTM's int8 / uint8 weights
  int gates;      // blocks of hidden_size rows in W and R
  int acts;       // activations per direction
  int n_inputs;   // the schema's inputs
  int n_outputs;  // the schema's outputs
  RnnAct default_acts[3];
  const char* act_names;  // the activations of one direction, for errors
  const char* inputs_list;
};
const OpTraits kLstmOp = {"LSTM", CellKind::kLstm, false, 4, 3, 8, 3,
                          {RnnAct::kSigmoid, RnnAct::kTanh, RnnAct::kTanh}, "f, g and h",
                          "X, W, R, B, sequence_lens, initial_h, initial_c, P"};
const OpTraits kGruOp = {"GRU", CellKind::kGru, false, 3, 2, 6, 2, {RnnAct::kSigmoid, RnnAct::kTanh, RnnAct::kTanh},
                         "f and g", "X, W, R, B, sequence_lens, initial_h"};
const OpTraits kRnnOp = {"RNN", CellKind::kRnn, false, 1, 1, 6, 2, {RnnAct::kTanh, RnnAct::kTanh, RnnAct::kTanh},
                         "f", "X, W, R, B, sequence_lens, initial_h"};
const OpTraits kDynamicQuantizeLstmOp = {
    "DynamicQuantizeLSTM", CellKind::kLstm, true, 4, 3, kNumInputs, 3,
    {RnnAct::kSigmoid, RnnAct::kTanh, RnnAct::kTanh}, "f, g and h",
    "X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point, R_scale, R_zero_point; B to P may "
    "be empty"};

// A quantized weight (W or R of DynamicQuantizeLSTM): its codes [dirs, K,
// G], their type, and the scale and zero point of each direction or column.
struct QuantWeight {
  const void* q;
  bool is_uint8;
  const float* scale;
  const void* zero;
  bool per_column;
  int64_t dirs, K, G;
  float zero_at(int64_t d, int64_t j) const {
    const int64_t i = per_column ? d * G + j : d;
    return is_uint8 ? static_cast<const uint8_t*>(zero)[i] : static_cast<const int8_t*>(zero)[i];
  }
  float scale_at(int64_t d, int64_t j) const { return scale[per_column ? d * G + j : d]; }
  int32_t code(int64_t d, int64_t k, int64_t j) const {
    const int64_t i = (d * K + k) * G + j;
    return is_uint8 ? static_cast<const uint8_t*>(q)[i] : static_cast<const int8_t*>(q)[i];
  }
};

// w[d, j, k] = (q[d, k, j] - zero) * scale: LSTM's [dirs, G, K] layout.
void dequantize_to_lstm_layout(const QuantWeight& w, float* out) {
  for (int64_t d = 0; d < w.dirs; ++d)
    for (int64_t j = 0; j < w.G; ++j) {
      const float s = w.scale_at(d, j), z = w.zero_at(d, j);
      float* row = out + (d * w.G + j) * w.K;
      for (int64_t k = 0; k < w.K; ++k) row[k] = (static_cast<float>(w.code(d, k, j)) - z) * s;
    }
}

// A quantized R as gemv_q8_panels reads it: per direction, panels of nr
// columns, each K rows of nr int8 codes (uint8 codes stored as q - 128 and
// their zero points moved by as much), then the scales and zero points of
// every direction, each padded to whole panels.
struct Q8Panels {
  std::shared_ptr<PackedB> codes;
  std::vector<float> scale, zero;  // [dirs, padded]
  int64_t padded = 0;              // columns per direction, whole panels
  int64_t mat_bytes = 0;           // bytes of one direction's panels
};

std::unique_ptr<Q8Panels> pack_q8(const QuantWeight& w, int64_t nr) {
  auto p = std::make_unique<Q8Panels>();
  p->padded = (w.G + nr - 1) / nr * nr;
  p->mat_bytes = p->padded * w.K;
  p->codes = make_packed(PackLayout::kQ8Rows, static_cast<size_t>(w.dirs * p->mat_bytes));
  if (!p->codes) return nullptr;
  p->codes->nr = static_cast<int>(nr);
  p->codes->K = w.K;
  p->codes->N = w.G;
  p->codes->nmat = w.dirs;
  p->codes->panel_stride = w.K * nr;
  p->codes->mat_stride = p->mat_bytes;
  int8_t* dst = static_cast<int8_t*>(p->codes->data);
  std::memset(dst, 0, static_cast<size_t>(w.dirs * p->mat_bytes));
  p->scale.assign(static_cast<size_t>(w.dirs * p->padded), 0.0f);
  p->zero.assign(static_cast<size_t>(w.dirs * p->padded), 0.0f);
  const int32_t shift = w.is_uint8 ? 128 : 0;
  for (int64_t d = 0; d < w.dirs; ++d) {
    int8_t* m = dst + d * p->mat_bytes;
    for (int64_t j = 0; j < w.G; ++j) {
      p->scale[d * p->padded + j] = w.scale_at(d, j);
      p->zero[d * p->padded + j] = w.zero_at(d, j) - static_cast<float>(shift);
      int8_t* col = m + (j / nr) * w.K * nr + j % nr;
      for (int64_t k = 0; k < w.K; ++k) col[k * nr] = static_cast<int8_t>(w.code(d, k, j) - shift);
    }
  }
  return p;
}

// The recurrent product's column blocks of R: all gates at once, but for
// GRU without linear_before_reset, whose h block multiplies r (.) H(t-1):
// z and r, then h.
struct RPart {
  int64_t col0, cols;
};

struct RecurrentState {
  const OpTraits* op = nullptr;
  int32_t weight_type = OLC_DTYPE_FLOAT;  // W's (and R's, zero points') element type
  Direction direction = Direction::kForward;
  int64_t dirs = 1;
  int64_t hidden = 0;  // 0: R's last dimension, at run time
  int64_t layout = 0;  // 0: [seq, batch, ...]; 1: [batch, seq, ...]
  RnnActivation act[2][3];  // per direction, in the op's order
  bool has_clip = false;
  float clip = 0.0f;
  bool input_forget = false;         // LSTM
  bool linear_before_reset = false;  // GRU
  bool want[3] = {false, false, false};  // Y, Y_h, Y_c named in the graph
  KernelSet ks;
  GemmTuning tun;
  const RecurrentKernels* rk = nullptr;
  const olc_tuning_param* t_split = nullptr;
  const olc_tuning_param* t_step = nullptr;
  const olc_tuning_param* t_split_r = nullptr;
  std::shared_ptr<PackedB> w_packed;  // constant W, one [input, dirs * gates hidden] matrix
  std::vector<int64_t> w_shape;
  std::shared_ptr<PackedB> r_packed[2];  // constant R per part, dirs matrices of [hidden, part columns]
  std::vector<int64_t> r_shape;
  std::unique_ptr<Q8Panels> r_q8;  // a constant quantized R, as int8 panels
  const olc_tuning_param* t_q8 = nullptr;
  std::vector<float> bias;  // constant B: the projection's bias per direction, [dirs * gates hidden]
  std::vector<float> rbh;   // constant B, GRU with linear_before_reset: Rbh per direction, [dirs * hidden]
  // Usage details per way of sharing the work (serial, split,
  // step-parallel) without and with the int8 R's GEMV.
  enum Mode { kSerial = 0, kSplit, kStep };
  std::string detail[2][3];

  int64_t gates_of(int64_t H) const { return op->gates * H; }
  int parts() const { return op->kind == CellKind::kGru && !linear_before_reset ? 2 : 1; }
  RPart part(int p, int64_t H) const {
    if (parts() == 1) return {0, gates_of(H)};
    return p == 0 ? RPart{0, 2 * H} : RPart{2 * H, H};
  }
  bool separate_rbh() const { return op->kind == CellKind::kGru && linear_before_reset; }
};

// ONNX Runtime's defaults where activation_alpha / activation_beta run
// out: LeakyRelu 0.01, HardSigmoid 0.2 and 0.5, Elu 1; every other 0.
bool takes_alpha(RnnAct k) {
  return k == RnnAct::kAffine || k == RnnAct::kLeakyRelu || k == RnnAct::kThresholdedRelu ||
         k == RnnAct::kScaledTanh || k == RnnAct::kHardSigmoid || k == RnnAct::kElu;
}
bool takes_beta(RnnAct k) { return k == RnnAct::kAffine || k == RnnAct::kScaledTanh || k == RnnAct::kHardSigmoid; }
float default_alpha(RnnAct k) {
  return k == RnnAct::kLeakyRelu ? 0.01f : k == RnnAct::kHardSigmoid ? 0.2f : k == RnnAct::kElu ? 1.0f : 0.0f;
}
float default_beta(RnnAct k) { return k == RnnAct::kHardSigmoid ? 0.5f : 0.0f; }

const char* direction_name(Direction d) {
  return d == Direction::kForward ? "forward" : d == Direction::kReverse ? "reverse" : "bidirectional";
}

// The activations (the op's count per direction) with their alphas and
// betas, each list consumed in order by the functions that take one.
bool read_activations(const AttrReader& ar, RecurrentState* st, char* error, size_t esize) {
  const int per_dir = st->op->acts;
  std::vector<int64_t> codes;
  const olc_attribute* a = ar.find("activations");
  if (!a) {
    for (int64_t d = 0; d < st->dirs; ++d)
      for (int k = 0; k < per_dir; ++k) codes.push_back(static_cast<int64_t>(st->op->default_acts[k]));
  } else {
    // The registration's native_attributes hook (rnn_attributes.py) has
    // turned the names into RnnAct codes.
    if (a->type != OLC_ATTR_INTS)
      return fail_create(error, esize, "attribute 'activations' must be a list of strings"), false;
    codes.assign(a->ints, a->ints + a->count);
    if (static_cast<int64_t>(codes.size()) != per_dir * st->dirs)
      return fail_create(error, esize,
                         "attribute 'activations' lists %lld functions; direction '%s' takes %lld (%s per "
                         "direction)",
                         (long long)codes.size(), direction_name(st->direction), (long long)(per_dir * st->dirs),
                         st->op->act_names),
             false;
    for (int64_t c : codes)
      if (c < 0 || c >= static_cast<int64_t>(RnnAct::kCount))
        return fail_create(error, esize, "attribute 'activations' holds an unknown function code %lld", (long long)c),
               false;
  }
  std::vector<double> alphas, betas;
  for (auto [name, list] : {std::make_pair("activation_alpha", &alphas), std::make_pair("activation_beta", &betas)}) {
    const olc_attribute* v = ar.find(name);
    if (!v) continue;
    if (v->type != OLC_ATTR_FLOATS)
      return fail_create(error, esize, "attribute '%s' must be a list of floats", name), false;
    list->assign(v->floats, v->floats + v->count);
  }
  size_t next_alpha = 0, next_beta = 0;
  for (int64_t d = 0; d < st->dirs; ++d)
    for (int k = 0; k < per_dir; ++k) {
      RnnActivation& act = st->act[d][k];
      act.kind = static_cast<RnnAct>(codes[d * per_dir + k]);
      act.alpha = default_alpha(act.kind);
      act.beta = default_beta(act.kind);
      if (takes_alpha(act.kind) && next_alpha < alphas.size()) act.alpha = static_cast<float>(alphas[next_alpha++]);
      if (takes_beta(act.kind) && next_beta < betas.size()) act.beta = static_cast<float>(betas[next_beta++]);
    }
  return true;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i] < 0 ? std::string("*") : std::to_string(static_cast<long long>(dims[i]));
  }
  return s + "]";
}

// Whether t has the shape dims (-1: any size there).
bool shape_is(const olc_tensor& t, const std::vector<int64_t>& dims) {
  if (t.ndim != static_cast<int32_t>(dims.size())) return false;
  for (int32_t d = 0; d < t.ndim; ++d)
    if (dims[d] >= 0 && t.shape[d] != dims[d]) return false;
  return true;
}

// The shape each of W, R, B and P must have (input size -1: any); the
// quantized W and R are transposed against the float ones.
std::vector<int64_t> expected_shape(const OpTraits& op, int input, int64_t dirs, int64_t hidden, int64_t input_size) {
  const int64_t G = op.gates * hidden;
  switch (input) {
    case kW: return op.quantized ? std::vector<int64_t>{dirs, input_size, G} : std::vector<int64_t>{dirs, G, input_size};
    case kR: return op.quantized ? std::vector<int64_t>{dirs, hidden, G} : std::vector<int64_t>{dirs, G, hidden};
    case kB: return {dirs, 2 * op.gates * hidden};
    default: return {dirs, 3 * hidden};  // kP
  }
}
std::string shape_formula(const OpTraits& op, int input) {
  auto times_hidden = [](int n) { return n == 1 ? std::string("hidden_size") : std::to_string(n) + " * hidden_size"; };
  switch (input) {
    case kW:
      return op.quantized ? "[num_directions, input_size, " + times_hidden(op.gates) + "]"
                          : "[num_directions, " + times_hidden(op.gates) + ", input_size]";
    case kR:
      return op.quantized ? "[num_directions, hidden_size, " + times_hidden(op.gates) + "]"
                          : "[num_directions, " + times_hidden(op.gates) + ", hidden_size]";
    case kB: return "[num_directions, " + times_hidden(2 * op.gates) + "]";
    default: return "[num_directions, 3 * hidden_size]";
  }
}

// Whether input i has W's element type: R, and the zero points.
bool has_weight_type(int i) { return i == kW || i == kR || i == kWZeroPoint || i == kRZeroPoint; }
// The element type input i must have.
int32_t expected_dtype(const RecurrentState& st, int i) {
  return i == kSeqLens ? OLC_DTYPE_INT32 : has_weight_type(i) ? st.weight_type : OLC_DTYPE_FLOAT;
}

// An empty string when a scale (kWScale, kRScale) or zero point has a
// shape its weight takes: [dirs] or [dirs, 4 hidden], the zero point the
// scale's; else why not.
std::string quant_param_error(const RecurrentState& st, int i, const olc_tensor& t, int64_t hidden,
                              const olc_tensor* scale) {
  char buf[320];
  const std::vector<int64_t> per_dir{st.dirs}, per_col{st.dirs, st.gates_of(hidden)};
  if (!shape_is(t, per_dir) && !shape_is(t, per_col)) {
    std::snprintf(buf, sizeof buf,
                  "input %s has shape %s; direction '%s' and hidden_size %lld take [num_directions] = %s or "
                  "[num_directions, 4 * hidden_size] = %s",
                  kInputNames[i], shape_str(t).c_str(), direction_name(st.direction), (long long)hidden,
                  dims_str(per_dir).c_str(), dims_str(per_col).c_str());
    return buf;
  }
  if (scale && scale->ndim != t.ndim) {
    std::snprintf(buf, sizeof buf, "input %s has shape %s, not its scale %s's %s", kInputNames[i],
                  shape_str(t).c_str(), kInputNames[i - 1], shape_str(*scale).c_str());
    return buf;
  }
  return "";
}

QuantWeight quant_weight(const RecurrentState& st, const olc_tensor& q, const olc_tensor& scale,
                         const olc_tensor& zero) {
  QuantWeight w;
  w.q = q.data;
  w.is_uint8 = q.dtype == OLC_DTYPE_UINT8;
  w.scale = static_cast<const float*>(scale.data);
  w.zero = zero.data;
  w.per_column = scale.ndim == 2;
  w.dirs = st.dirs;
  w.K = q.shape[1];
  w.G = q.shape[2];
  return w;
}

// R's column block [part.col0, + part.cols) of every direction packed as
// dirs matrices of [hidden, part.cols]; all of R is packed in place.
std::shared_ptr<PackedB> pack_r_part(const KernelSet& ks, const float* R, int64_t dirs, int64_t H, int64_t G,
                                     RPart part) {
  if (part.col0 == 0 && part.cols == G) return pack_b_constant(ks, OLC_DTYPE_FLOAT, R, true, H, G, dirs);
  std::vector<float> rows(static_cast<size_t>(dirs * part.cols * H));
  for (int64_t d = 0; d < dirs; ++d)
    std::memcpy(rows.data() + d * part.cols * H, R + (d * G + part.col0) * H, sizeof(float) * part.cols * H);
  return pack_b_constant(ks, OLC_DTYPE_FLOAT, rows.data(), true, H, part.cols, dirs);
}

// B [dirs, 2 G] to the projection's bias [dirs, G]: Wb + Rb, but for GRU
// with linear_before_reset, whose h block takes Wbh alone there and Rbh
// ([dirs, H]) inside the reset gate's product.
void sum_bias(const RecurrentState& st, const float* bv, int64_t D, int64_t H, float* bias, float* rbh) {
  const int64_t G = st.gates_of(H);
  const int64_t both = st.separate_rbh() ? 2 * H : G;
  for (int64_t d = 0; d < D; ++d) {
    const float* wb = bv + d * 2 * G;
    const float* rb = wb + G;
    for (int64_t k = 0; k < both; ++k) bias[d * G + k] = wb[k] + rb[k];
    for (int64_t k = both; k < G; ++k) bias[d * G + k] = wb[k];
    if (st.separate_rbh()) std::memcpy(rbh + d * H, rb + 2 * H, sizeof(float) * H);
  }
}

void* recurrent_create(const OpTraits& op, const olc_core_api* api, const olc_node_info* node, char* error,
                       size_t esize) {
  AttrReader ar{node, error, esize};
  auto st = std::make_unique<RecurrentState>();
  st->op = &op;
  // Opset 1's output_sequence only says whether Y is wanted, which the
  // graph's output names say too; GRU's linear_before_reset came with
  // opset 3 and layout with opset 14. DynamicQuantizeLSTM (com.microsoft
  // opset 1) has the attributes of LSTM at opset 7: neither of those.
  std::vector<const char*> known = {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                                    "hidden_size"};
  if (op.kind == CellKind::kLstm) known.push_back("input_forget");
  if (op.kind == CellKind::kGru && node->opset >= 3) known.push_back("linear_before_reset");
  if (!op.quantized && node->opset < 7) known.push_back("output_sequence");
  if (!op.quantized && node->opset >= 14) known.push_back("layout");
  for (int32_t k = 0; k < node->n_attributes; ++k) {
    const char* name = node->attributes[k].name ? node->attributes[k].name : "";
    if (std::none_of(known.begin(), known.end(), [&](const char* a) { return !std::strcmp(a, name); }))
      return fail_create(error, esize, "unknown attribute '%s'", name);
  }
  if (const olc_attribute* a = ar.find("direction")) {
    if (a->type != OLC_ATTR_STRING || !a->s) return fail_create(error, esize, "attribute 'direction' must be a string");
    if (!std::strcmp(a->s, "forward")) st->direction = Direction::kForward;
    else if (!std::strcmp(a->s, "reverse")) st->direction = Direction::kReverse;
    else if (!std::strcmp(a->s, "bidirectional")) st->direction = Direction::kBidirectional;
    else
      return fail_create(error, esize, "attribute 'direction' is '%s', not one of forward, reverse, bidirectional",
                         a->s);
  }
  st->dirs = st->direction == Direction::kBidirectional ? 2 : 1;
  const bool has_hidden = ar.find("hidden_size") != nullptr;
  st->hidden = ar.get_int("hidden_size", 0);
  const double clip = ar.get_float("clip", 0.0);
  const bool has_clip = ar.find("clip") != nullptr;
  const int64_t input_forget = ar.get_int("input_forget", 0);
  const int64_t linear_before_reset = ar.get_int("linear_before_reset", 0);
  st->layout = ar.get_int("layout", 0);
  if (!ar.ok) return nullptr;
  if (has_hidden && st->hidden <= 0)
    return fail_create(error, esize, "attribute 'hidden_size' must be positive, got %lld", (long long)st->hidden);
  if (has_clip && !(clip > 0.0))
    return fail_create(error, esize, "attribute 'clip' must be positive, got %g", clip);
  if (st->layout != 0 && st->layout != 1)
    return fail_create(error, esize, "attribute 'layout' must be 0 or 1, got %lld", (long long)st->layout);
  if (linear_before_reset != 0 && linear_before_reset != 1)
    return fail_create(error, esize, "attribute 'linear_before_reset' must be 0 or 1, got %lld",
                       (long long)linear_before_reset);
  if (!read_activations(ar, st.get(), error, esize)) return nullptr;
  st->has_clip = has_clip;
  st->clip = static_cast<float>(clip);
  st->input_forget = input_forget != 0;
  st->linear_before_reset = linear_before_reset != 0;

  if (op.quantized) {
    if (node->n_inputs != op.n_inputs)
      return fail_create(error, esize, "%s takes %d inputs (%s), got %d", op.op, op.n_inputs, op.inputs_list,
                         node->n_inputs);
  } else if (node->n_inputs < 3 || node->n_inputs > op.n_inputs) {
    return fail_create(error, esize, "%s takes 3 to %d inputs (%s), got %d", op.op, op.n_inputs, op.inputs_list,
                       node->n_inputs);
  }
  if (node->n_outputs > op.n_outputs)
    return fail_create(error, esize, "%s has at most %d outputs, got %d", op.op, op.n_outputs, node->n_outputs);
  if (node->input_dtypes[kX] != OLC_DTYPE_FLOAT)
    return fail_create(error, esize, "unsupported input type %s (float32 only)",
                       olc_dtype_name(node->input_dtypes[kX]));
  if (op.quantized) {
    // W's type (int8 or uint8) binds R's and the zero points'.
    st->weight_type = node->input_dtypes[kW];
    if (st->weight_type != OLC_DTYPE_INT8 && st->weight_type != OLC_DTYPE_UINT8)
      return fail_create(error, esize, "input W has type %s; %s takes int8 or uint8 weights",
                         olc_dtype_name(st->weight_type), op.op);
  }
  for (int i = 0; i < node->n_inputs; ++i) {
    const int32_t t = node->input_dtypes[i];
    if (op.quantized && has_weight_type(i)) {
      if (t != st->weight_type)
        return fail_create(error, esize, "input %s has type %s; it must have W's type %s", kInputNames[i],
                           olc_dtype_name(t), olc_dtype_name(st->weight_type));
    } else {
      const int32_t want = expected_dtype(*st, i);
      if (t != OLC_DTYPE_UNDEFINED && t != want)
        return fail_create(error, esize, "input %s has type %s, expected %s", kInputNames[i], olc_dtype_name(t),
                           olc_dtype_name(want));
    }
    const int32_t r = node->input_ranks ? node->input_ranks[i] : -1;
    if (t != OLC_DTYPE_UNDEFINED && r >= 0 && kRanks[i] >= 0 && r != kRanks[i])
      return fail_create(error, esize, "input %s has rank %d, expected %d", kInputNames[i], r, kRanks[i]);
  }
  for (int i = 0; i < node->n_outputs; ++i) {
    const int32_t t = node->output_dtypes[i];
    if (t != OLC_DTYPE_UNDEFINED && t != OLC_DTYPE_FLOAT)
      return fail_create(error, esize, "output %d has type %s, expected float32", i, olc_dtype_name(t));
    // An output without a name has no type: nothing reads it.
    st->want[i] = t != OLC_DTYPE_UNDEFINED;
  }

  // Constant weights, biases, peepholes, scales and zero points: their
  // shapes checked now; W and R packed (dequantized first).
  const olc_tensor* cst = node->input_constants;
  auto constant = [&](int i) -> const olc_tensor* {
    if (!cst || i >= node->n_inputs || !cst[i].data) return nullptr;
    return cst[i].dtype == expected_dtype(*st, i) ? &cst[i] : nullptr;
  };
  if (const olc_tensor* r = constant(kR)) {
    if (r->ndim != 3) return fail_create(error, esize, "input R has rank %d, expected 3", r->ndim);
    if (!has_hidden) st->hidden = r->shape[op.quantized ? 1 : 2];
    if (st->hidden <= 0)
      return fail_create(error, esize, "input R of shape %s gives a hidden size of %lld; it must be positive",
                         shape_str(*r).c_str(), (long long)st->hidden);
  }
  if (st->hidden > 0) {
    for (int i : {kW, kR, kB, kP}) {
      const olc_tensor* t = constant(i);
      if (!t) continue;
      const std::vector<int64_t> want = expected_shape(op, i, st->dirs, st->hidden, -1);
      if (!shape_is(*t, want))
        return fail_create(error, esize, "input %s has shape %s; direction '%s' and hidden_size %lld take %s = %s",
                           kInputNames[i], shape_str(*t).c_str(), direction_name(st->direction),
                           (long long)st->hidden, shape_formula(op, i).c_str(), dims_str(want).c_str());
    }
    if (op.quantized)
      for (int i : {kWScale, kWZeroPoint, kRScale, kRZeroPoint}) {
        const olc_tensor* t = constant(i);
        if (!t) continue;
        const bool is_zero = i == kWZeroPoint || i == kRZeroPoint;
        const std::string why = quant_param_error(*st, i, *t, st->hidden, is_zero ? constant(i - 1) : nullptr);
        if (!why.empty()) return fail_create(error, esize, "%s", why.c_str());
      }
  }

  st->ks = select_kernels(api);
  st->tun = default_gemm_tuning(OLC_DTYPE_FLOAT);
  st->rk = recurrent_kernels_for(api->simd_level());
  const char* isa = st->ks.isa_name;
  // Threads split the directions and the batch rows of a run whose
  // recurrent products total at least split_min_macs; a lone row of a lone
  // direction splits each step's product once it reaches step_min_macs.
  st->t_split = api->tuning_declare_int("olc_matmul", op.op, isa, OLC_DTYPE_FLOAT, "split_min_macs", 1 << 18);
  st->t_step = api->tuning_declare_int("olc_matmul", op.op, isa, OLC_DTYPE_FLOAT, "step_min_macs", 1 << 18);
  // ... and only while a direction's R, as its steps read it, fits one
  // core's L2: a thread per direction then streams a whole R per step
  // from beyond it, where sharing each step's product keeps each thread's
  // part of R in its L2 (ddddocr's CRNN, hidden 512 bidirectional, float R
  // 4 MiB a direction, two threads: 10.8 -> 9.0 ms; its int8 R, 1 MiB,
  // still splits: 6.7 ms against 7.1).
  const int64_t l2_bytes = cache_info().l2 > 0 ? cache_info().l2 : int64_t(1) << 20;
  st->t_split_r = api->tuning_declare_int("olc_matmul", op.op, isa, OLC_DTYPE_FLOAT, "split_max_r_bytes", l2_bytes);
  // One row's recurrent product reads the int8 R instead of the float one
  // once the float R of a direction has at least this many bytes (L2's
  // size): below, it stays in L2 and the FMAs alone are as fast as
  // converting codes (equal at 1 MiB, hidden 256; int8 2.8 times faster at
  // 4 MiB, hidden 512, on a 2 MiB L2).
  if (op.quantized)
    st->t_q8 = api->tuning_declare_int("olc_matmul", op.op, isa, OLC_DTYPE_FLOAT, "q8_gemv_min_bytes", l2_bytes);

  std::string pack_note;
  auto note = [&](const char* what, const PackedB& p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " prepacked-%s %.1f KiB", what, p.bytes / 1024.0);
    pack_note += buf;
    if (OLC_API_HAS(api, report_prepacked)) api->report_prepacked(node, &p, static_cast<int64_t>(p.bytes));
  };
  // A quantized weight whose codes, scale and zero point are all constant,
  // dequantized into LSTM's layout; empty otherwise.
  auto dequantized = [&](int q, int scale) -> std::vector<float> {
    const olc_tensor *tq = constant(q), *ts = constant(scale), *tz = constant(scale + 1);
    if (!tq || !ts || !tz) return {};
    const QuantWeight w = quant_weight(*st, *tq, *ts, *tz);
    std::vector<float> out(static_cast<size_t>(w.dirs * w.G * w.K));
    dequantize_to_lstm_layout(w, out.data());
    return out;
  };
  if (st->hidden > 0) {
    const int64_t H = st->hidden, G = st->gates_of(H);
    if (const olc_tensor* w = constant(kW)) {
      const int64_t input_size = op.quantized ? w->shape[1] : w->shape[2];
      const std::vector<float> wf = op.quantized ? dequantized(kW, kWScale) : std::vector<float>{};
      const void* src = op.quantized ? (wf.empty() ? nullptr : wf.data()) : w->data;
      if (input_size > 0 && src) {
        st->w_packed = pack_b_constant(st->ks, OLC_DTYPE_FLOAT, src, true, input_size, st->dirs * G, 1);
        if (st->w_packed) {
          st->w_shape.assign(w->shape, w->shape + 3);
          note("W", *st->w_packed);
        }
      }
    }
    if (const olc_tensor* r = constant(kR)) {
      const std::vector<float> rf = op.quantized ? dequantized(kR, kRScale) : std::vector<float>{};
      const float* src = op.quantized ? (rf.empty() ? nullptr : rf.data()) : static_cast<const float*>(r->data);
      bool all = src != nullptr;
      for (int p = 0; all && p < st->parts(); ++p) {
        st->r_packed[p] = pack_r_part(st->ks, src, st->dirs, H, G, st->part(p, H));
        all = all && st->r_packed[p];
      }
      if (all) {
        st->r_shape.assign(r->shape, r->shape + 3);
        for (int p = 0; p < st->parts(); ++p) note(st->parts() == 1 ? "R" : p == 0 ? "R-zr" : "R-h", *st->r_packed[p]);
        // DynamicQuantizeLSTM is one part (LSTM's gates all at once).
        if (op.quantized) {
          st->r_q8 = pack_q8(quant_weight(*st, *r, *constant(kRScale), *constant(kRZeroPoint)), st->rk->q8_nr);
          if (st->r_q8) note("R-int8", *st->r_q8->codes);
        }
      } else {
        for (auto& p : st->r_packed) p.reset();
      }
    }
    if (const olc_tensor* b = constant(kB)) {
      st->bias.resize(static_cast<size_t>(st->dirs * G));
      if (st->separate_rbh()) st->rbh.resize(static_cast<size_t>(st->dirs * H));
      sum_bias(*st, static_cast<const float*>(b->data), st->dirs, H, st->bias.data(), st->rbh.data());
    }
  }
  const std::string base = std::string(isa) + " " + direction_name(st->direction);
  for (int q8 = 0; q8 < 2; ++q8)
    for (const auto& [mode, name] : {std::make_pair(RecurrentState::kSerial, " serial"),
                                     std::make_pair(RecurrentState::kSplit, " split"),
                                     std::make_pair(RecurrentState::kStep, " step-parallel")})
      st->detail[q8][mode] = base + name + (q8 ? " int8-R-gemv" : "") + pack_note;
  return st.release();
}

void* lstm_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return recurrent_create(kLstmOp, api, node, error, esize);
}
void* gru_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return recurrent_create(kGruOp, api, node, error, esize);
}
void* rnn_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return recurrent_create(kRnnOp, api, node, error, esize);
}
void* dynamic_quantize_lstm_create(const olc_core_api* api, const olc_node_info* node, char* error, size_t esize) {
  return recurrent_create(kDynamicQuantizeLstmOp, api, node, error, esize);
}

void recurrent_destroy(void* state) { delete static_cast<RecurrentState*>(state); }

// ------------------------------------------------------------ run

struct RecurrentRun {
  const RecurrentState* st;
  int64_t S, Bt, I, H, D, G;
  int64_t chunks;  // blocks of batch rows per direction
  const float* xproj;  // [S * Bt, D * G], rows in X's order
  const int32_t* lens; // NULL: every row runs S steps
  const float* R;      // as fed ([D, G, H]); NULL with the packed R
  const PackedB* r_packed[2];  // per part of R
  const Q8Panels* r_q8;  // not NULL: one row's product reads these int8 panels
  const float* rbh;    // GRU with linear_before_reset: Rbh [D * H]; NULL: zero
  const float* h0;
  const float* c0;
  const float* P;
  float* y;            // NULL: Y not wanted
  float* y_h;
  float* y_c;
  float* hbuf;         // [D * Bt * 2 H]: H(t-1) and H(t) of each row block, swapped per step
  float* cbuf;         // [D * Bt * H]: LSTM's C; GRU's r (.) H(t-1)
  float* gates;        // [D * Bt * G]
  olc_context* step_ctx;  // not NULL: each step's product may use the session's threads
  GemmTuning tun;
  std::atomic<bool>* failed;
};

int64_t x_row(const RecurrentRun& r, int64_t t, int64_t b) { return r.st->layout ? b * r.S + t : t * r.Bt + b; }
int64_t y_offset(const RecurrentRun& r, int64_t t, int64_t d, int64_t b) {
  return (r.st->layout ? (b * r.S + t) * r.D + d : (t * r.D + d) * r.Bt + b) * r.H;
}
int64_t state_offset(const RecurrentRun& r, int64_t d, int64_t b) {
  return (r.st->layout ? b * r.D + d : d * r.Bt + b) * r.H;
}

// One row's product with the int8 R over columns [j0, j1) (whole panels
// but for the last).
struct Q8Gemv {
  const RecurrentKernels* rk;
  const Q8Panels* q;
  int64_t d, H, G, panels_per_item;
  const float* h;
  float* gates;
};
void q8_gemv_items(void* user, int64_t begin, int64_t end) {
  const Q8Gemv& g = *static_cast<const Q8Gemv*>(user);
  const int64_t nr = g.q->codes->nr;
  const int64_t j0 = begin * g.panels_per_item * nr, j1 = std::min(g.G, end * g.panels_per_item * nr);
  if (j0 >= j1) return;
  const int64_t at = g.d * g.q->padded + j0;
  g.rk->gemv_q8_panels(g.h, static_cast<const int8_t*>(g.q->codes->data) + g.d * g.q->mat_bytes + j0 * g.H, g.H,
                       j1 - j0, g.q->scale.data() + at, g.q->zero.data() + at, g.gates + j0);
}

// C[M, N] (rows ldc apart) = A[M, K] B^T (+ bias along N, NULL: none) on
// the family's GEMM, B matrix `mat` of `packed`, or [N, K] read in place
// when packed is NULL: the input projection and the recurrent products.
// False when out of memory.
bool product_bt(olc_context* ctx, const RecurrentState& st, const GemmTuning& tun, int64_t M, int64_t N, int64_t K,
                const float* a, const float* b, const PackedB* packed, int64_t mat, float* c, int64_t ldc,
                const float* bias) {
  GemmDesc desc{};
  desc.dtype = OLC_DTYPE_FLOAT;
  desc.M = M;
  desc.N = N;
  desc.K = K;
  desc.transB = true;
  desc.lda = K;
  desc.ldb = K;
  desc.ldc = ldc;
  desc.alpha = 1.0;
  desc.beta = bias ? 1.0 : 0.0;
  desc.bias = bias;
  desc.bias_cs = 1;
  const void* ap = a;
  const void* bp = b;
  void* cp = c;
  GemmBatch batch{1, &ap, &bp, &mat, &cp, packed};
  return std::strcmp(gemm_run(g_api, ctx, st.ks, tun, desc, batch), "oom") != 0;
}

// out[rows, part.cols] (rows G apart) = h[rows, H] times part `part` of
// R_d^T.
bool recurrent_product(const RecurrentRun& r, int64_t d, int part, int64_t rows, const float* h, float* out) {
  const RecurrentState* st = r.st;
  const int64_t G = r.G, H = r.H;
  if (rows == 1 && r.r_q8) {
    // DynamicQuantizeLSTM: R is one part. Step-parallel: blocks of 4
    // panels (the kernel's group) per thread.
    Q8Gemv g{st->rk, r.r_q8, d, H, G, 4, h, out};
    const int64_t items = (G + 4 * r.r_q8->codes->nr - 1) / (4 * r.r_q8->codes->nr);
    if (r.step_ctx) g_api->parallel_for(r.step_ctx, items, 1, 0, &q8_gemv_items, &g);
    else q8_gemv_items(&g, 0, items);
    return true;
  }
  const RPart cols = st->part(part, H);
  const PackedB* packed = r.r_packed[part];
  const float* fed = r.R ? r.R + (d * G + cols.col0) * H : nullptr;
  if (rows == 1 && !r.step_ctx) {
    if (packed) {  // a GEMV over the packed panels: no MR-row tile for one row
      st->rk->gemv_panels(h, static_cast<const float*>(packed->data) + d * packed->mat_stride, H, packed->nr,
                          packed->panel_stride, cols.cols, nullptr, out);
    } else {
      st->ks.isa->gemv_rows_f32(cols.cols, H, fed, H, h, out);
    }
    return true;
  }
  return product_bt(r.step_ctx, *st, r.tun, rows, cols.cols, H, h, fed, packed, d, out, G, nullptr);
}

// Direction d, batch rows [b0, b1): every step, then the final states and
// the zeros of Y past each row's length.
void run_rows(const RecurrentRun& r, int64_t d, int64_t b0, int64_t b1) {
  const RecurrentState* st = r.st;
  const RecurrentKernels& rk = *st->rk;
  const int64_t H = r.H, G = r.G, nb = b1 - b0;
  const bool reverse = st->direction == Direction::kReverse || d == 1;
  const CellKind kind = st->op->kind;
  const bool gru_two_parts = kind == CellKind::kGru && st->parts() == 2;
  const bool has_c = kind == CellKind::kLstm;
  float* hp = r.hbuf + (d * r.Bt + b0) * 2 * H;  // H(t-1)
  float* hn = hp + nb * H;                       // H(t)
  float* c = r.cbuf + (d * r.Bt + b0) * H;       // LSTM: C; GRU: r (.) H(t-1)
  float* gates = r.gates + (d * r.Bt + b0) * G;
  const RnnActivation* act = st->act[d];
  const float* peep = r.P ? r.P + d * 3 * H : nullptr;
  const LstmCell lstm{H, act[0], act[1], act[2], st->has_clip, st->clip, st->input_forget, peep};
  const GruCell gru{H, act[0], act[1], st->has_clip, st->clip, r.rbh ? r.rbh + d * H : nullptr};
  const RnnCell rnn{H, act[0], st->has_clip, st->clip};
  int64_t max_len = 0;
  bool ragged = false;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t len = r.lens ? r.lens[b] : r.S;
    max_len = std::max(max_len, len);
    ragged = ragged || len != r.S;
    const int64_t so = state_offset(r, d, b);
    if (r.h0) std::memcpy(hp + (b - b0) * H, r.h0 + so, sizeof(float) * H);
    else std::memset(hp + (b - b0) * H, 0, sizeof(float) * H);
    if (!has_c) continue;
    if (r.c0) std::memcpy(c + (b - b0) * H, r.c0 + so, sizeof(float) * H);
    else std::memset(c + (b - b0) * H, 0, sizeof(float) * H);
  }
  auto row_len = [&](int64_t i) { return r.lens ? r.lens[b0 + i] : r.S; };
  // This step's projection row of row i (reverse runs each row from its
  // own last step back) and Y's row.
  auto step_of = [&](int64_t i, int64_t s) { return reverse ? row_len(i) - 1 - s : s; };
  auto xw_of = [&](int64_t i, int64_t t) { return r.xproj + x_row(r, t, b0 + i) * r.D * G + d * G; };
  auto y_of = [&](int64_t i, int64_t t) { return r.y ? r.y + y_offset(r, t, d, b0 + i) : nullptr; };
  for (int64_t s = 0; s < max_len; ++s) {
    // Without initial_h the first product is zero.
    const bool zero_h = s == 0 && !r.h0;
    if (!zero_h && !recurrent_product(r, d, 0, nb, hp, gates)) {
      r.failed->store(true);
      return;
    }
    if (gru_two_parts) {
      // z into the gates' z block, r (.) H(t-1) into c; then its product.
      for (int64_t i = 0; i < nb; ++i) {
        if (s >= row_len(i)) {  // ended: a defined operand for the product, whose result is unused
          std::memset(c + i * H, 0, sizeof(float) * H);
          continue;
        }
        rk.gru_reset_row(&gru, xw_of(i, step_of(i, s)), zero_h ? nullptr : gates + i * G, hp + i * H, gates + i * G,
                         c + i * H);
      }
      if (!zero_h && !recurrent_product(r, d, 1, nb, c, gates + 2 * H)) {
        r.failed->store(true);
        return;
      }
    }
    for (int64_t i = 0; i < nb; ++i) {
      if (s >= row_len(i)) {  // this row has ended: its state stays
        std::memcpy(hn + i * H, hp + i * H, sizeof(float) * H);
        continue;
      }
      const int64_t t = step_of(i, s);
      const float* xw = xw_of(i, t);
      const float* hr = zero_h ? nullptr : gates + i * G;
      switch (kind) {
        case CellKind::kLstm: rk.lstm_row(&lstm, xw, hr, c + i * H, hn + i * H, y_of(i, t)); break;
        case CellKind::kRnn: rk.rnn_row(&rnn, xw, hr, hn + i * H, y_of(i, t)); break;
        case CellKind::kGru:
          if (gru_two_parts)
            rk.gru_update_row(&gru, xw, zero_h ? nullptr : gates + i * G + 2 * H, gates + i * G, hp + i * H,
                              hn + i * H, y_of(i, t));
          else
            rk.gru_linear_row(&gru, xw, hr, hp + i * H, hn + i * H, y_of(i, t));
          break;
      }
    }
    std::swap(hp, hn);
  }
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t len = r.lens ? r.lens[b] : r.S;
    const int64_t so = state_offset(r, d, b);
    // A row of length 0 ends with zero states, as ONNX Runtime gives them.
    if (r.y_h) {
      if (len > 0) std::memcpy(r.y_h + so, hp + (b - b0) * H, sizeof(float) * H);
      else std::memset(r.y_h + so, 0, sizeof(float) * H);
    }
    if (r.y_c) {
      if (len > 0) std::memcpy(r.y_c + so, c + (b - b0) * H, sizeof(float) * H);
      else std::memset(r.y_c + so, 0, sizeof(float) * H);
    }
    if (r.y && ragged)
      for (int64_t t = len; t < r.S; ++t) std::memset(r.y + y_offset(r, t, d, b), 0, sizeof(float) * H);
  }
}

void run_items(void* user, int64_t begin, int64_t end) {
  const RecurrentRun& r = *static_cast<const RecurrentRun*>(user);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t d = item / r.chunks, q = item % r.chunks;
    run_rows(r, d, q * r.Bt / r.chunks, (q + 1) * r.Bt / r.chunks);
  }
}

bool check_tensor(const RecurrentState& st, olc_context* ctx, const olc_tensor& t, int i) {
  const int32_t want = expected_dtype(st, i);
  if (t.dtype != want) {
    fail_run(ctx, "input %s has type %s, expected %s", kInputNames[i], olc_dtype_name(t.dtype), olc_dtype_name(want));
    return false;
  }
  if (kRanks[i] >= 0 && t.ndim != kRanks[i]) {
    fail_run(ctx, "input %s has shape %s, expected rank %d", kInputNames[i], shape_str(t).c_str(), kRanks[i]);
    return false;
  }
  const int64_t n = olc_element_count(&t);
  if (n < 0) {
    fail_run(ctx, "input %s has a negative dimension or too many elements", kInputNames[i]);
    return false;
  }
  if (n > 0 && !t.data) {
    fail_run(ctx, "input %s has no data", kInputNames[i]);
    return false;
  }
  return true;
}

thread_local FloatScratch t_recurrent_scratch;

int32_t recurrent_run(const void* state, olc_context* ctx, int32_t n_inputs, const olc_tensor* in,
                      int32_t n_outputs) {
  const RecurrentState* st = static_cast<const RecurrentState*>(state);
  auto has = [&](int i) { return i < n_inputs && in[i].dtype != OLC_DTYPE_UNDEFINED; };
  if (!has(kX) || !has(kW) || !has(kR)) return fail_run(ctx, "inputs X, W and R are required");
  if (st->op->quantized && !(has(kWScale) && has(kWZeroPoint) && has(kRScale) && has(kRZeroPoint)))
    return fail_run(ctx, "inputs W_scale, W_zero_point, R_scale and R_zero_point are required");
  if (n_inputs > st->op->n_inputs)
    return fail_run(ctx, "expects at most %d inputs, got %d", st->op->n_inputs, n_inputs);
  if (n_outputs > st->op->n_outputs)
    return fail_run(ctx, "expects at most %d outputs, got %d", st->op->n_outputs, n_outputs);
  for (int i = 0; i < n_inputs; ++i)
    if (has(i) && !check_tensor(*st, ctx, in[i], i)) return OLC_ERROR;
  const olc_tensor& x = in[kX];
  const int64_t S = st->layout ? x.shape[1] : x.shape[0];
  const int64_t Bt = st->layout ? x.shape[0] : x.shape[1];
  const int64_t I = x.shape[2];
  const int64_t D = st->dirs;
  const int64_t H = st->hidden ? st->hidden : in[kR].shape[st->op->quantized ? 1 : 2];
  if (H <= 0)
    return fail_run(ctx, "input R of shape %s gives a hidden size of %lld; it must be positive",
                    shape_str(in[kR]).c_str(), (long long)H);
  if (H > (int64_t(1) << 40)) return fail_run(ctx, "hidden size %lld is too large", (long long)H);
  const int64_t G = st->gates_of(H);
  for (int i : {kW, kR, kB, kP}) {
    if (!has(i)) continue;
    const std::vector<int64_t> want = expected_shape(*st->op, i, D, H, I);
    if (!shape_is(in[i], want))
      return fail_run(ctx, "input %s has shape %s; direction '%s', hidden_size %lld and input size %lld take %s = %s",
                      kInputNames[i], shape_str(in[i]).c_str(), direction_name(st->direction), (long long)H,
                      (long long)I, shape_formula(*st->op, i).c_str(), dims_str(want).c_str());
  }
  if (st->op->quantized)
    for (int i : {kWScale, kWZeroPoint, kRScale, kRZeroPoint}) {
      const bool is_zero = i == kWZeroPoint || i == kRZeroPoint;
      const std::string why = quant_param_error(*st, i, in[i], H, is_zero ? &in[i - 1] : nullptr);
      if (!why.empty()) return fail_run(ctx, "%s", why.c_str());
    }
  const std::vector<int64_t> state_shape = st->layout ? std::vector<int64_t>{Bt, D, H} : std::vector<int64_t>{D, Bt, H};
  for (int i : {kInitialH, kInitialC})
    if (has(i) && !shape_is(in[i], state_shape))
      return fail_run(ctx, "input %s has shape %s, expected %s (%s)", kInputNames[i], shape_str(in[i]).c_str(),
                      dims_str(state_shape).c_str(),
                      st->layout ? "[batch_size, num_directions, hidden_size]"
                                 : "[num_directions, batch_size, hidden_size]");
  const int32_t* lens = nullptr;
  if (has(kSeqLens)) {
    if (!shape_is(in[kSeqLens], {Bt}))
      return fail_run(ctx, "input sequence_lens has shape %s, expected [batch_size] = [%lld]",
                      shape_str(in[kSeqLens]).c_str(), (long long)Bt);
    lens = static_cast<const int32_t*>(in[kSeqLens].data);
    for (int64_t b = 0; b < Bt; ++b)
      if (lens[b] < 0 || lens[b] > S)
        return fail_run(ctx, "sequence_lens[%lld] is %d, outside [0, seq_length = %lld]", (long long)b, lens[b],
                        (long long)S);
  }

  // Work buffers: the input projection, the summed biases of a fed B (and
  // GRU's separate Rbh), per direction and row H(t-1), H(t), C (GRU: r
  // (.) H(t-1)) and the recurrent product, and quantized weights not
  // packed at creation, dequantized.
  const int64_t M = S * Bt, N = D * G;
  const bool fed_bias = has(kB) && st->bias.empty();
  const int64_t bias_floats = fed_bias ? N + (st->separate_rbh() ? D * H : 0) : 0;
  const bool w_packed = st->w_packed && shape_is(in[kW], st->w_shape);
  const bool r_prepacked = st->r_packed[0] && shape_is(in[kR], st->r_shape);
  const bool quantized = st->op->quantized;
  const uint64_t w_floats = quantized && !w_packed ? static_cast<uint64_t>(N) * static_cast<uint64_t>(I) : 0;
  const uint64_t r_floats = quantized && !r_prepacked ? static_cast<uint64_t>(N) * static_cast<uint64_t>(H) : 0;
  uint64_t floats = 0, part = 0;
  bool overflow = __builtin_mul_overflow(static_cast<uint64_t>(M), static_cast<uint64_t>(N), &floats);
  overflow = overflow || __builtin_mul_overflow(static_cast<uint64_t>(D * Bt), static_cast<uint64_t>(3 * H + G), &part);
  overflow = overflow || __builtin_add_overflow(floats, part + bias_floats, &floats) ||
             __builtin_add_overflow(floats, w_floats + r_floats, &floats) ||
             floats > (uint64_t(1) << 60) / sizeof(float);
  if (overflow) return fail_run(ctx, "the work buffers of X %s with hidden size %lld are too large",
                                shape_str(x).c_str(), (long long)H);
  float* work = floats ? t_recurrent_scratch.get(static_cast<size_t>(floats)) : nullptr;
  if (floats && !work) return fail_run(ctx, "out of memory for the %s work buffers", st->op->op);

  // Outputs; an unnamed one gets no values (nothing reads it).
  const int64_t y_shape0[4] = {S, D, Bt, H}, y_shape1[4] = {Bt, S, D, H};
  const int64_t* state_dims = state_shape.data();
  const int64_t none = 0;
  float* outs[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < n_outputs; ++i) {
    void* p;
    if (!st->want[i]) p = g_api->allocate_output(ctx, i, OLC_DTYPE_FLOAT, 1, &none);
    else if (i == 0) p = g_api->allocate_output(ctx, 0, OLC_DTYPE_FLOAT, 4, st->layout ? y_shape1 : y_shape0);
    else p = g_api->allocate_output(ctx, i, OLC_DTYPE_FLOAT, 3, state_dims);
    if (!p) return OLC_ERROR;
    if (st->want[i]) outs[i] = static_cast<float*>(p);
  }
  if (Bt == 0) {
    g_api->record_usage_detail(ctx, st->detail[0][RecurrentState::kSerial].c_str());
    return OLC_OK;
  }

  float* xproj = work;
  float* bias_run = xproj + M * N;
  float* w_dequant = bias_run + bias_floats;
  float* r_dequant = w_dequant + w_floats;
  float* rest = r_dequant + r_floats;
  // The float W and R as LSTM takes them ([D, G, I], [D, G, H]) where they
  // are not packed: as fed, or dequantized now.
  const float* w_float = static_cast<const float*>(in[kW].data);
  const float* r_float = static_cast<const float*>(in[kR].data);
  if (w_floats) {
    dequantize_to_lstm_layout(quant_weight(*st, in[kW], in[kWScale], in[kWZeroPoint]), w_dequant);
    w_float = w_dequant;
  }
  if (r_floats) {
    dequantize_to_lstm_layout(quant_weight(*st, in[kR], in[kRScale], in[kRZeroPoint]), r_dequant);
    r_float = r_dequant;
  }
  const float* bias = st->bias.empty() ? nullptr : st->bias.data();
  const float* rbh = st->rbh.empty() ? nullptr : st->rbh.data();
  if (fed_bias) {
    sum_bias(*st, static_cast<const float*>(in[kB].data), D, H, bias_run, bias_run + N);
    bias = bias_run;
    if (st->separate_rbh()) rbh = bias_run + N;
  }
  const GemmTuning tun = st->tun;
  if (M > 0) {
    const float* xv = static_cast<const float*>(x.data);
    if (M == 1 && w_packed) {  // one step of one row: a GEMV over the panels
      const PackedB& p = *st->w_packed;
      st->rk->gemv_panels(xv, static_cast<const float*>(p.data), I, p.nr, p.panel_stride, N, bias, xproj);
    } else {
      if (!product_bt(ctx, *st, tun, M, N, I, xv, w_float, w_packed ? st->w_packed.get() : nullptr, 0, xproj, N, bias))
        return fail_run(ctx, "out of memory for the GEMM work buffers");
    }
  }

  std::atomic<bool> failed{false};
  RecurrentRun r{};
  r.st = st;
  r.S = S;
  r.Bt = Bt;
  r.I = I;
  r.H = H;
  r.D = D;
  r.G = G;
  r.xproj = xproj;
  r.lens = lens;
  // A fed R read by several steps is packed once for the run: the GEMM
  // would pack it again every step (a fed R doubled the time of 100 steps
  // of 8 rows), and one row's GEMV is faster over the panels.
  std::shared_ptr<PackedB> r_run[2];
  bool packed_every_part = true;
  for (int p = 0; p < st->parts(); ++p) {
    if (r_prepacked) {
      r.r_packed[p] = st->r_packed[p].get();
    } else if (S > 1) {
      r_run[p] = pack_r_part(st->ks, r_float, D, H, G, st->part(p, H));
      r.r_packed[p] = r_run[p].get();
      packed_every_part = packed_every_part && r_run[p];
    }
  }
  if (!packed_every_part) r.r_packed[0] = r.r_packed[1] = nullptr;  // out of memory: read R in place
  r.R = r.r_packed[0] ? nullptr : r_float;
  r.rbh = rbh;
  r.h0 = has(kInitialH) ? static_cast<const float*>(in[kInitialH].data) : nullptr;
  r.c0 = has(kInitialC) ? static_cast<const float*>(in[kInitialC].data) : nullptr;
  r.P = has(kP) ? static_cast<const float*>(in[kP].data) : nullptr;
  r.y = outs[0];
  r.y_h = outs[1];
  r.y_c = outs[2];
  r.hbuf = rest;
  r.cbuf = r.hbuf + D * Bt * 2 * H;
  r.gates = r.cbuf + D * Bt * H;
  r.tun = tun;
  r.failed = &failed;

  // Threads: whole directions and blocks of rows when the run is large
  // enough; else one thread, whose steps may still share a large product.
  const int32_t threads = std::max<int32_t>(1, g_api->concurrency(ctx));
  const double run_macs = static_cast<double>(S) * static_cast<double>(Bt * D) * static_cast<double>(G * H);
  const int64_t split_chunks = std::max<int64_t>(1, std::min<int64_t>(Bt, (threads + D - 1) / D));
  // The int8 R where every product is of one row (a block of one batch row).
  const auto q8_for = [&](int64_t chunks) -> const Q8Panels* {
    return r_prepacked && st->r_q8 && chunks == Bt &&
                   static_cast<double>(sizeof(float)) * static_cast<double>(G * H) >=
                       static_cast<double>(g_api->tuning_read_int(st->t_q8))
               ? st->r_q8.get()
               : nullptr;
  };
  const double r_read_bytes = static_cast<double>(G * H) * (q8_for(split_chunks) ? 1.0 : sizeof(float));
  const bool split = threads > 1 && (D > 1 || Bt > 1) &&
                     run_macs >= static_cast<double>(g_api->tuning_read_int(st->t_split)) &&
                     r_read_bytes <= static_cast<double>(g_api->tuning_read_int(st->t_split_r));
  r.chunks = split ? split_chunks : 1;
  r.r_q8 = q8_for(r.chunks);
  const char* detail;
  if (split) {
    g_api->parallel_for(ctx, D * r.chunks, 1, 0, &run_items, &r);
    detail = st->detail[r.r_q8 != nullptr][RecurrentState::kSplit].c_str();
  } else {
    const bool step_parallel = threads > 1 && static_cast<double>(Bt) * static_cast<double>(G * H) >=
                                                  static_cast<double>(g_api->tuning_read_int(st->t_step));
    r.step_ctx = step_parallel ? ctx : nullptr;
    run_items(&r, 0, D * r.chunks);
    detail = st->detail[r.r_q8 != nullptr][step_parallel ? RecurrentState::kStep : RecurrentState::kSerial].c_str();
  }
  if (failed.load()) return fail_run(ctx, "out of memory for the GEMM work buffers");
  g_api->record_usage_detail(ctx, detail);
  return OLC_OK;
}

const olc_kernel_vtable kLstm = {OLC_ABI_VERSION, 0, "olc_matmul::LSTM", guarded_create<lstm_create>,
                                 guarded_run<recurrent_run>, recurrent_destroy};
const olc_kernel_vtable kGru = {OLC_ABI_VERSION, 0, "olc_matmul::GRU", guarded_create<gru_create>,
                                guarded_run<recurrent_run>, recurrent_destroy};
const olc_kernel_vtable kRnn = {OLC_ABI_VERSION, 0, "olc_matmul::RNN", guarded_create<rnn_create>,
                                guarded_run<recurrent_run>, recurrent_destroy};
const olc_kernel_vtable kDynamicQuantizeLstm = {OLC_ABI_VERSION, 0, "olc_matmul::DynamicQuantizeLSTM",
                                                guarded_create<dynamic_quantize_lstm_create>,
                                                guarded_run<recurrent_run>, recurrent_destroy};

}  // namespace

void set_recurrent_api(const olc_core_api* api) { g_api = api; }
const olc_kernel_vtable* lstm_vtable() { return &kLstm; }
const olc_kernel_vtable* gru_vtable() { return &kGru; }
const olc_kernel_vtable* rnn_vtable() { return &kRnn; }
const olc_kernel_vtable* dynamic_quantize_lstm_vtable() { return &kDynamicQuantizeLstm; }

}  // namespace olc_mm
