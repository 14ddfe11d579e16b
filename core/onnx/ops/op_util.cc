#include "core/onnx/ops/op_util.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/layers/common.h"

namespace lockstep {
namespace onnx_ops {

bool RegisterOp(const std::string& type, int min_inputs, int max_inputs,
                OpCreate create) {
  LayerTypeInfo info;
  info.type = type;
  info.keras_stem = type;
  info.min_inputs = min_inputs;
  info.max_inputs = max_inputs;
  info.internal = true;
  info.parse = [](const spec_reader::Reader&, Json*) {
    return absl::InvalidArgumentError(
        "an ONNX op node is made by the importer, not a job file");
  };
  info.create = std::move(create);
  return RegisterLayerType(std::move(info));
}

absl::StatusOr<Shape> ShapeField(const Json& config, const char* key,
                                 const LayerBuildContext& ctx) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_array()) {
    return ctx.Error(absl::StrCat("needs a list \"", key, "\""));
  }
  Shape s;
  for (const Json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return ctx.Error(
          absl::StrCat("\"", key, "\" holds ", v.dump(), ", not a size"));
    }
    s.push_back(v.get<int64_t>());
  }
  return s;
}

absl::StatusOr<std::vector<double>> NumbersField(const Json& config,
                                                 const char* key,
                                                 const LayerBuildContext& ctx) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_array()) {
    return ctx.Error(absl::StrCat("needs a list \"", key, "\""));
  }
  std::vector<double> v;
  v.reserve(it->size());
  for (const Json& x : *it) {
    // JSON has no infinities: the importer writes them as strings.
    if (x.is_string() && (x == "inf" || x == "-inf" || x == "nan")) {
      v.push_back(x == "inf"    ? HUGE_VAL
                  : x == "-inf" ? -HUGE_VAL
                                : std::nan(""));
      continue;
    }
    if (!x.is_number()) {
      return ctx.Error(absl::StrCat("\"", key, "\" holds ", x.dump()));
    }
    v.push_back(x.get<double>());
  }
  return v;
}

std::optional<Shape> Broadcast(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b,
                                      const LayerBuildContext& ctx) {
  std::optional<Shape> out = Broadcast(a, b);
  if (!out) {
    return ctx.Error(absl::StrCat("shapes ", ShapeToString(a), " and ",
                                  ShapeToString(b), " do not broadcast"));
  }
  return *out;
}

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  const size_t r = out.size(), lead = r - in.size();
  std::vector<int64_t> s(r, 0);
  int64_t stride = 1;
  for (size_t i = r; i-- > lead;) {
    const int64_t d = in[i - lead];
    s[i] = d == 1 ? 0 : stride;
    stride *= d;
  }
  return s;
}

absl::StatusOr<Param*> ResolveParam(const Json& ref,
                                    const LayerBuildContext& ctx, Param* own) {
  auto name = ref.find("param");
  if (name == ref.end() || !name->is_string()) {
    return ctx.Error("a parameter operand needs \"param\"");
  }
  ASSIGN_OR_RETURN(Shape shape, ShapeField(ref, "shape", ctx));
  const std::string owner = ref.value("owner", std::string());
  if (owner.empty()) {
    MakeParam(name->get<std::string>(), shape, own);
    return own;
  }
  Layer* other = ctx.find_layer ? ctx.find_layer(owner) : nullptr;
  if (other != nullptr) {
    for (Param* p : other->params()) {
      if (p->name == name->get<std::string>() && p->value.shape() == shape) {
        return p;
      }
    }
  }
  return ctx.Error(
      absl::StrCat("no earlier layer \"", owner, "\" holds the parameter \"",
                   name->get<std::string>(), "\" ", ShapeToString(shape)));
}

}  // namespace onnx_ops
}  // namespace lockstep
