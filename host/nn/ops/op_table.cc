// The table of operations (op.h), made from the list in ops.def.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "arith/format.h"
#include "host/common/errors.h"
#include "host/nn/ops/op.h"

namespace tpu::nn::ops {

const std::vector<const OpDef*>& AllOps() {
  static const std::vector<const OpDef*> ops = [] {
    std::vector<const OpDef*> v = {
#define TPUSIM_OP(N) &N##Op(),
#include "host/nn/ops/ops.def"
#undef TPUSIM_OP
    };
    for (size_t i = 0; i < v.size(); ++i)  // in LayerType's order, so Op() is an index
      if (static_cast<size_t>(v[i]->type) != i) throw std::logic_error("ops: table out of order");
    return v;
  }();
  return ops;
}

const OpDef& Op(LayerType t) { return *AllOps().at(static_cast<size_t>(t)); }

int64_t WeightColumns(const Layer& l) {
  const auto columns = Op(l.type).columns;
  return columns ? columns(l) : l.out.c;
}

float KeepScale(Layer* /*l*/, const std::vector<float>& in_scales, float /*range*/) {
  return in_scales[0];
}

void CopyInt8(const Layer& l, const std::vector<const int8_t*>& xs,
              const std::vector<int>& /*channels*/, int8_t* y) {
  std::copy_n(xs[0], l.out.Size(), y);
}

void ReadExplicitPadding(const nlohmann::json& pad, const std::string& where, Layer* l) {
  const auto p = pad.get<std::vector<int>>();
  if (p.size() != 4) throw UsageError(where + ": padding must be [top, left, bottom, right]");
  l->padding = "explicit";
  l->pad_top = p[0];
  l->pad_left = p[1];
  l->pad_bottom = p[2];
  l->pad_right = p[3];
}

template <typename T>
std::vector<T> VectorOf(const nlohmann::json& j, const std::string& key, size_t n,
                        const std::string& where) {
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != n) {
    throw UsageError(where + ": '" + key + "' must be a list of " + std::to_string(n) + " numbers");
  }
  return j[key].get<std::vector<T>>();
}
template std::vector<float> VectorOf(const nlohmann::json&, const std::string&, size_t,
                                     const std::string&);
template std::vector<int32_t> VectorOf(const nlohmann::json&, const std::string&, size_t,
                                       const std::string&);

void ReadJoinInt8(const nlohmann::json& qj, const std::string& where, size_t shifts, Layer* l) {
  const size_t n = l->inputs.size();
  l->quantized = true;
  l->q.output_scale = qj.at("output_scale").get<float>();
  l->q.input_scales = VectorOf<float>(qj, "input_scales", n, where);
  l->q.multiplier = VectorOf<int32_t>(qj, "multiplier", n, where);
  l->q.shift = VectorOf<int32_t>(qj, "shift", shifts, where);
  for (int32_t v : l->q.multiplier)
    if (v < 0) throw UsageError(where + ": a multiplier is negative (they lie in [0, 2^31))");
  for (int32_t v : l->q.shift)
    if (v < 1 || v > 62) throw UsageError(where + ": a shift lies outside [1, 62]");
}

void ReadOneShiftInt8(const nlohmann::json& qj, const std::string& where, Layer* l) {
  ReadJoinInt8(qj, where, 1, l);
}

int GraphVersion(const Layer& /*l*/) { return 2; }

int64_t NoMacs(const Layer& /*l*/) { return 0; }

OpDef ValueJoin(LayerType type, const char* name) {
  OpDef d;
  d.type = type;
  d.name = name;
  d.min_inputs = d.max_inputs = 2;
  d.takes_activation = true;
  d.version = GraphVersion;
  d.read_int8 = ReadOneShiftInt8;
  d.write_int8 = WriteJoinInt8;
  d.macs = NoMacs;
  return d;
}

void WriteJoinInt8(const Layer& l, nlohmann::json* qj) {
  *qj = {{"input_scales", l.q.input_scales},
         {"output_scale", l.q.output_scale},
         {"multiplier", l.q.multiplier},
         {"shift", l.q.shift}};
}

void InferOneShape(const Model& m, const std::string& where, Layer* l, const char* kind,
                   const char* text) {
  if (l->activation == Activation::kSoftmax) {
    throw UsageError(fmt::format("{}: a {} takes relu, relu6 or no activation", where, kind));
  }
  const Shape3& s = m.OutputOf(l->inputs[1]);
  if (!(s == l->in)) {
    const auto shape = [](const Shape3& x) { return fmt::format("{} x {} x {}", x.h, x.w, x.c); };
    throw UsageError(
        where + ": " +
        fmt::format(fmt::runtime(text), fmt::arg("a", shape(l->in)), fmt::arg("b", shape(s))));
  }
  l->out = l->in;
}

void ResidualInt8(const Layer& l, const std::vector<const int8_t*>& xs, bool product, int8_t* y) {
  const auto ma = static_cast<uint32_t>(l.q.multiplier[0]),
             mb = static_cast<uint32_t>(l.q.multiplier[1]);
  const auto shift = static_cast<uint32_t>(l.q.shift[0]);
  const bool relu = ClampsAtZero(l.activation);
  for (int64_t i = 0; i < l.out.Size(); ++i)
    y[i] = arith::Int8Format::Residual(xs[0][i], xs[1][i], product, ma, mb, shift, relu);
}

float JoinOutputScale(const Layer& l, float range) {
  const float empty = l.activation == Activation::kRelu6 ? 6.0f / 127.0f : 1.0f;
  return range > 0 ? range / 127.0f : empty;
}

}  // namespace tpu::nn::ops
