// Reading a node's attributes (olc_attribute, as olc-core hands them to
// create()): lookups by name with the type and length checks every adapter
// of this family makes, each returning "" or the reason.
#ifndef OLC_ML_ATTRS_H_
#define OLC_ML_ATTRS_H_

#include <cstring>
#include <string>

#include "olc/kernel_abi.h"

namespace olc_ml {

#define OLC_TRY(expr)           \
  do {                          \
    std::string _e = (expr);    \
    if (!_e.empty()) return _e; \
  } while (0)

class Attrs {
 public:
  Attrs(const olc_attribute* attrs, int n) : a_(attrs), n_(n) {}

  const olc_attribute* find(const std::string& name) const {
    for (int i = 0; i < n_; ++i)
      if (name == a_[i].name) return &a_[i];
    return nullptr;
  }
  // The attribute when it is present with that type, else nullptr.
  const olc_attribute* ints(const std::string& name) const { return typed(name, OLC_ATTR_INTS); }
  const olc_attribute* floats(const std::string& name) const { return typed(name, OLC_ATTR_FLOATS); }

  std::string integer(const std::string& name, int64_t dflt, int64_t* out) const {
    const olc_attribute* a = find(name);
    if (!a) {
      *out = dflt;
      return "";
    }
    if (a->type != OLC_ATTR_INT) return "attribute " + name + " must be an int";
    *out = a->i;
    return "";
  }
  std::string real(const std::string& name, double dflt, double* out) const {
    const olc_attribute* a = find(name);
    if (!a) {
      *out = dflt;
      return "";
    }
    if (a->type != OLC_ATTR_FLOAT) return "attribute " + name + " must be a float";
    *out = a->f;
    return "";
  }
  std::string string(const std::string& name, const char* dflt, std::string* out) const {
    const olc_attribute* a = find(name);
    if (!a) {
      *out = dflt;
      return "";
    }
    if (a->type != OLC_ATTR_STRING) return "attribute " + name + " must be a string";
    *out = a->s;
    return "";
  }
  // A required list of exactly n values.
  std::string ints_of_length(const std::string& name, int64_t n, const int64_t** out) const {
    return list_of_length(name, OLC_ATTR_INTS, n, false, out, nullptr);
  }
  std::string floats_of_length(const std::string& name, int64_t n, const double** out) const {
    return list_of_length(name, OLC_ATTR_FLOATS, n, false, nullptr, out);
  }
  // Absent or empty (nullptr), or exactly n values.
  std::string optional_ints_of_length(const std::string& name, int64_t n, const int64_t** out) const {
    return list_of_length(name, OLC_ATTR_INTS, n, true, out, nullptr);
  }
  std::string optional_floats_of_length(const std::string& name, int64_t n, const double** out) const {
    return list_of_length(name, OLC_ATTR_FLOATS, n, true, nullptr, out);
  }

 private:
  const olc_attribute* typed(const std::string& name, int32_t type) const {
    const olc_attribute* a = find(name);
    return a && a->type == type ? a : nullptr;
  }
  std::string list_of_length(const std::string& name, int32_t type, int64_t n, bool optional, const int64_t** ints,
                             const double** floats) const {
    if (ints) *ints = nullptr;
    if (floats) *floats = nullptr;
    const olc_attribute* a = find(name);
    if (!a || (optional && a->count == 0 && (a->type == OLC_ATTR_INTS || a->type == OLC_ATTR_FLOATS))) {
      if (optional) return "";
      return "attribute " + name + " is required";
    }
    if (a->type != type)
      return "attribute " + name + " must be a list of " + (type == OLC_ATTR_INTS ? "ints" : "floats");
    if (a->count != n)
      return name + " has " + std::to_string(a->count) + " entries, expected " + std::to_string(n);
    if (ints) *ints = a->ints;
    if (floats) *floats = a->floats;
    return "";
  }

  const olc_attribute* a_;
  int n_;
};

}  // namespace olc_ml

#endif  // OLC_ML_ATTRS_H_
