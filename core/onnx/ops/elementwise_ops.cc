#include "core/onnx/ops/elementwise_ops.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/onnx/ops/op_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace onnx_ops {
namespace {

const std::map<std::string, UnaryKind>& UnaryKinds() {
  static const auto* kinds = new std::map<std::string, UnaryKind>{
      {"erf", UnaryKind::kErf},
      {"sqrt", UnaryKind::kSqrt},
      {"neg", UnaryKind::kNeg},
      {"exp", UnaryKind::kExp},
      {"log", UnaryKind::kLog},
      {"reciprocal", UnaryKind::kReciprocal},
      {"abs", UnaryKind::kAbs},
      {"clip", UnaryKind::kClip},
      {"trunc", UnaryKind::kTrunc},
      {"nonzero", UnaryKind::kNonzero},
      {"not", UnaryKind::kNot},
      {"hard_sigmoid", UnaryKind::kHardSigmoid},
      {"hard_swish", UnaryKind::kHardSwish}};
  return *kinds;
}

const std::map<std::string, BinaryKind>& BinaryKinds() {
  static const auto* kinds = new std::map<std::string, BinaryKind>{
      {"add", BinaryKind::kAdd},
      {"sub", BinaryKind::kSub},
      {"mul", BinaryKind::kMul},
      {"div", BinaryKind::kDiv},
      {"pow", BinaryKind::kPow},
      {"equal", BinaryKind::kEqual},
      {"less", BinaryKind::kLess},
      {"greater", BinaryKind::kGreater},
      {"less_equal", BinaryKind::kLessEqual},
      {"greater_equal", BinaryKind::kGreaterEqual}};
  return *kinds;
}

bool Differentiable(BinaryKind k) {
  return k == BinaryKind::kAdd || k == BinaryKind::kSub ||
         k == BinaryKind::kMul || k == BinaryKind::kDiv ||
         k == BinaryKind::kPow;
}

inline float Apply(BinaryKind k, float a, float b) {
  switch (k) {
    case BinaryKind::kAdd:
      return a + b;
    case BinaryKind::kSub:
      return a - b;
    case BinaryKind::kMul:
      return a * b;
    case BinaryKind::kDiv:
      return a / b;
    case BinaryKind::kPow:
      return std::pow(a, b);
    case BinaryKind::kEqual:
      return a == b;
    case BinaryKind::kLess:
      return a < b;
    case BinaryKind::kGreater:
      return a > b;
    case BinaryKind::kLessEqual:
      return a <= b;
    case BinaryKind::kGreaterEqual:
      return a >= b;
  }
  return 0;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateUnary(
    const Json& c, const LayerBuildContext& ctx) {
  auto kind = UnaryKinds().find(c.value("op", std::string()));
  if (kind == UnaryKinds().end()) return ctx.Error("unknown unary op");
  const bool hard = kind->second == UnaryKind::kHardSigmoid;
  const float lo = hard ? c.value("alpha", 0.2f) : c.value("min", -INFINITY);
  const float hi = hard ? c.value("beta", 0.5f) : c.value("max", INFINITY);
  return std::unique_ptr<Layer>(
      new UnaryOp(ctx.name, ctx.inputs[0], kind->second, lo, hi));
}

// Operand `key` of config c into *op: a parameter operand is made in
// *own (*has_own set) unless tied; own == null refuses parameters.
absl::Status ReadOperand(const Json& c, const char* key,
                         const LayerBuildContext& ctx, Param* own,
                         bool* has_own, BinaryOp::Operand* op) {
  auto it = c.find(key);
  if (it == c.end() || !it->is_object()) {
    return ctx.Error(absl::StrCat("needs an operand \"", key, "\""));
  }
  const Json& o = *it;
  if (o.contains("input")) {
    op->input = o["input"].get<int>();
    if (op->input < 0 || op->input >= static_cast<int>(ctx.inputs.size())) {
      return ctx.Error(absl::StrCat("operand ", key, ": no input ", op->input));
    }
    op->shape = ctx.inputs[op->input];
  } else if (o.contains("const")) {
    ASSIGN_OR_RETURN(op->shape, ShapeField(o, "shape", ctx));
    ASSIGN_OR_RETURN(std::vector<double> v, NumbersField(o, "const", ctx));
    if (static_cast<int64_t>(v.size()) != NumElements(op->shape)) {
      return ctx.Error(absl::StrCat("operand ", key, ": ", v.size(),
                                    " values for ", ShapeToString(op->shape)));
    }
    op->values.assign(v.begin(), v.end());
  } else if (o.contains("zeros")) {
    ASSIGN_OR_RETURN(op->shape, ShapeField(o, "zeros", ctx));
    op->values.assign(NumElements(op->shape), 0.0f);
  } else if (o.contains("param") && own != nullptr) {
    if (*has_own) return ctx.Error("two parameter operands");
    ASSIGN_OR_RETURN(op->param, ResolveParam(o, ctx, own));
    *has_own = op->own_param = op->param == own;
    op->shape = op->param->value.shape();
  } else {
    return ctx.Error(absl::StrCat("operand ", key,
                                  " is none of input, const, "
                                  "zeros",
                                  own != nullptr ? ", param" : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> CreateWhere(
    const Json& c, const LayerBuildContext& ctx) {
  BinaryOp::Operand ops[3];
  bool unused = false;
  const char* keys[3] = {"cond", "a", "b"};
  for (int k = 0; k < 3; ++k) {
    RETURN_IF_ERROR(ReadOperand(c, keys[k], ctx, nullptr, &unused, &ops[k]));
  }
  ASSIGN_OR_RETURN(Shape ab, BroadcastShapes(ops[1].shape, ops[2].shape, ctx));
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(ops[0].shape, ab, ctx));
  return std::unique_ptr<Layer>(
      new WhereOp(ctx.name, ctx.inputs, out, std::move(ops[0]),
                  std::move(ops[1]), std::move(ops[2])));
}

absl::StatusOr<std::unique_ptr<Layer>> CreateBinary(
    const Json& c, const LayerBuildContext& ctx) {
  auto kind = BinaryKinds().find(c.value("op", std::string()));
  if (kind == BinaryKinds().end()) return ctx.Error("unknown binary op");
  BinaryOp::Operand ops[2];
  Param own;
  bool has_own = false;
  for (int k = 0; k < 2; ++k) {
    RETURN_IF_ERROR(
        ReadOperand(c, k == 0 ? "a" : "b", ctx, &own, &has_own, &ops[k]));
  }
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(ops[0].shape, ops[1].shape, ctx));
  return std::unique_ptr<Layer>(
      new BinaryOp(ctx.name, ctx.inputs, out, kind->second, std::move(ops[0]),
                   std::move(ops[1]), std::move(own)));
}

LOCKSTEP_REGISTER_ONNX_OP(unary, "onnx_unary", 1, 1, &CreateUnary);
LOCKSTEP_REGISTER_ONNX_OP(binary, "onnx_binary", 0, 2, &CreateBinary);
LOCKSTEP_REGISTER_ONNX_OP(where, "onnx_where", 1, 3, &CreateWhere);

}  // namespace

UnaryOp::UnaryOp(const std::string& name, const Shape& shape, UnaryKind kind,
                 float lo, float hi)
    : Layer("onnx_unary", name, {shape}, shape),
      kind_(kind),
      lo_(lo),
      hi_(hi) {}

void UnaryOp::Forward(const LayerIO& io, const PassContext&) {
  const float* x = io.x[0];
  float* y = io.y;
  ParallelFor(io.n * output_size(), 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i];
      float r = 0;
      switch (kind_) {
        case UnaryKind::kErf:
          r = std::erf(v);
          break;
        case UnaryKind::kSqrt:
          r = std::sqrt(v);
          break;
        case UnaryKind::kNeg:
          r = -v;
          break;
        case UnaryKind::kExp:
          r = std::exp(v);
          break;
        case UnaryKind::kLog:
          r = std::log(v);
          break;
        case UnaryKind::kReciprocal:
          r = 1.0f / v;
          break;
        case UnaryKind::kAbs:
          r = std::fabs(v);
          break;
        case UnaryKind::kClip:
          r = std::min(std::max(v, lo_), hi_);
          break;
        case UnaryKind::kTrunc:
          r = std::trunc(v);
          break;
        case UnaryKind::kNonzero:
          r = v != 0;
          break;
        case UnaryKind::kNot:
          r = v == 0;
          break;
        case UnaryKind::kHardSigmoid:
          r = std::min(std::max(lo_ * v + hi_, 0.0f), 1.0f);
          break;
        case UnaryKind::kHardSwish:
          r = v * std::min(std::max(v + 3.0f, 0.0f), 6.0f) / 6.0f;
          break;
      }
      y[i] = r;
    }
  });
}

void UnaryOp::Backward(const LayerIO& io, const PassContext&) {
  float* dx = io.dx[0];
  if (dx == nullptr) return;
  const float* x = io.x[0];
  const float* y = io.y;
  const float* dy = io.dy;
  const float two_over_sqrt_pi = 1.1283791670955126f;
  ParallelFor(io.n * output_size(), 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i];
      float d = 0;
      switch (kind_) {
        case UnaryKind::kErf:
          d = two_over_sqrt_pi * std::exp(-v * v);
          break;
        case UnaryKind::kSqrt:
          d = 0.5f / y[i];
          break;
        case UnaryKind::kNeg:
          d = -1;
          break;
        case UnaryKind::kExp:
          d = y[i];
          break;
        case UnaryKind::kLog:
          d = 1.0f / v;
          break;
        case UnaryKind::kReciprocal:
          d = -y[i] * y[i];
          break;
        case UnaryKind::kAbs:
          d = v > 0 ? 1.0f : (v < 0 ? -1.0f : 0.0f);
          break;
        // torch's clamp passes the gradient where lo <= x <= hi.
        case UnaryKind::kClip:
          d = v >= lo_ && v <= hi_;
          break;
        case UnaryKind::kTrunc:
        case UnaryKind::kNonzero:
        case UnaryKind::kNot:
          d = 0;
          break;
        // torch's: alpha strictly inside the ramp; hardswish's x / 3 + 1/2
        // on [-3, 3].
        case UnaryKind::kHardSigmoid: {
          const float t = lo_ * v + hi_;
          d = t > 0 && t < 1 ? lo_ : 0.0f;
          break;
        }
        case UnaryKind::kHardSwish:
          d = v < -3 ? 0.0f : (v <= 3 ? v / 3.0f + 0.5f : 1.0f);
          break;
      }
      dx[i] = dy[i] * d;
    }
  });
}

BinaryOp::BinaryOp(const std::string& name, std::vector<Shape> inputs,
                   Shape out, BinaryKind kind, Operand a, Operand b, Param own)
    : Layer("onnx_binary", name, std::move(inputs), std::move(out)),
      kind_(kind),
      own_(std::move(own)) {
  op_[0] = std::move(a);
  op_[1] = std::move(b);
  for (int k = 0; k < 2; ++k) {
    if (op_[k].own_param) op_[k].param = &own_;
    stride_[k] = BroadcastStrides(op_[k].shape, output_shape());
  }
}

std::vector<Param*> BinaryOp::params() {
  for (const Operand& o : op_) {
    if (o.param != nullptr) return {o.param};
  }
  return {};
}

const float* BinaryOp::Values(const LayerIO& io, int k, int64_t s) const {
  const Operand& o = op_[k];
  if (o.input >= 0) return io.x[o.input] + s * NumElements(o.shape);
  if (o.param != nullptr) return io.w[0];
  return o.values.data();
}

namespace {

template <BinaryKind K>
void ForwardRuns(const Shape& out, const std::vector<int64_t>& sa,
                 const std::vector<int64_t>& sb, const float* a, const float* b,
                 float* y) {
  ForEachRun(out, sa, sb,
             [&](int64_t o, int64_t ia, int64_t ib, int64_t count, int64_t da,
                 int64_t db) {
               const float* pa = a + ia;
               const float* pb = b + ib;
               float* py = y + o;
               if (da == 1 && db == 1) {
                 for (int64_t j = 0; j < count; ++j) {
                   py[j] = Apply(K, pa[j], pb[j]);
                 }
               } else if (da == 1 && db == 0) {
                 const float vb = *pb;
                 for (int64_t j = 0; j < count; ++j) {
                   py[j] = Apply(K, pa[j], vb);
                 }
               } else if (da == 0 && db == 1) {
                 const float va = *pa;
                 for (int64_t j = 0; j < count; ++j) {
                   py[j] = Apply(K, va, pb[j]);
                 }
               } else {
                 for (int64_t j = 0; j < count; ++j) {
                   py[j] = Apply(K, pa[j * da], pb[j * db]);
                 }
               }
             });
}

// d(loss)/da and d(loss)/db of one element, given dy = g.
template <BinaryKind K>
inline void Grads(float g, float va, float vb, float y, float* ga, float* gb) {
  switch (K) {
    case BinaryKind::kAdd:
      *ga = g;
      *gb = g;
      break;
    case BinaryKind::kSub:
      *ga = g;
      *gb = -g;
      break;
    case BinaryKind::kMul:
      *ga = g * vb;
      *gb = g * va;
      break;
    case BinaryKind::kDiv:
      *ga = g / vb;
      *gb = -g * va / (vb * vb);
      break;
    case BinaryKind::kPow:
      *ga = g * vb * std::pow(va, vb - 1);
      *gb = va > 0 ? g * y * std::log(va) : 0.0f;
      break;
    default:
      *ga = 0;
      *gb = 0;
      break;
  }
}

template <BinaryKind K>
void BackwardRuns(const Shape& out, const std::vector<int64_t>& sa,
                  const std::vector<int64_t>& sb, const float* a,
                  const float* b, const float* y, const float* dy, float* ga,
                  float* gb) {
  ForEachRun(out, sa, sb,
             [&](int64_t o, int64_t ia, int64_t ib, int64_t count, int64_t da,
                 int64_t db) {
               for (int64_t j = 0; j < count; ++j) {
                 float fa, fb;
                 Grads<K>(dy[o + j], a[ia + j * da], b[ib + j * db], y[o + j],
                          &fa, &fb);
                 if (ga != nullptr) ga[ia + j * da] += fa;
                 if (gb != nullptr) gb[ib + j * db] += fb;
               }
             });
}

#define LOCKSTEP_BINARY_DISPATCH(kind, call) \
  switch (kind) {                            \
    case BinaryKind::kAdd:                   \
      call(BinaryKind::kAdd);                \
      break;                                 \
    case BinaryKind::kSub:                   \
      call(BinaryKind::kSub);                \
      break;                                 \
    case BinaryKind::kMul:                   \
      call(BinaryKind::kMul);                \
      break;                                 \
    case BinaryKind::kDiv:                   \
      call(BinaryKind::kDiv);                \
      break;                                 \
    case BinaryKind::kPow:                   \
      call(BinaryKind::kPow);                \
      break;                                 \
    case BinaryKind::kEqual:                 \
      call(BinaryKind::kEqual);              \
      break;                                 \
    case BinaryKind::kLess:                  \
      call(BinaryKind::kLess);               \
      break;                                 \
    case BinaryKind::kGreater:               \
      call(BinaryKind::kGreater);            \
      break;                                 \
    case BinaryKind::kLessEqual:             \
      call(BinaryKind::kLessEqual);          \
      break;                                 \
    case BinaryKind::kGreaterEqual:          \
      call(BinaryKind::kGreaterEqual);       \
      break;                                 \
  }

}  // namespace

void BinaryOp::Forward(const LayerIO& io, const PassContext&) {
  const int64_t size = output_size();
  // Samples are independent: split over the threads.
  ParallelFor(io.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const float* a = Values(io, 0, s);
      const float* b = Values(io, 1, s);
      float* y = io.y + s * size;
#define LOCKSTEP_BINARY_FORWARD(K) \
  ForwardRuns<K>(output_shape(), stride_[0], stride_[1], a, b, y)
      LOCKSTEP_BINARY_DISPATCH(kind_, LOCKSTEP_BINARY_FORWARD)
#undef LOCKSTEP_BINARY_FORWARD
    }
  });
}

void BinaryOp::Backward(const LayerIO& io, const PassContext&) {
  // Where each operand's gradient goes: an input's dx (overwritten: zeroed
  // first) or the parameter's gradient (accumulated over the batch).
  float* to[2] = {nullptr, nullptr};
  bool param = false;
  for (int k = 0; k < 2; ++k) {
    const Operand& o = op_[k];
    if (o.input >= 0 && o.input < static_cast<int>(io.dx.size())) {
      to[k] = io.dx[o.input];
      if (to[k] != nullptr) {
        std::fill(to[k], to[k] + io.n * NumElements(o.shape), 0.0f);
      }
    } else if (o.param != nullptr && !io.dw.empty()) {
      to[k] = io.dw[0];
      param = to[k] != nullptr;
    }
  }
  // The same input on both sides (x * x): both halves add into one dx.
  if (op_[0].input >= 0 && op_[0].input == op_[1].input) to[1] = to[0];
  if (!Differentiable(kind_) || (to[0] == nullptr && to[1] == nullptr)) return;
  const int64_t size = output_size();
  auto samples = [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const float* a = Values(io, 0, s);
      const float* b = Values(io, 1, s);
      float* ga =
          to[0] == nullptr
              ? nullptr
              : to[0] + (op_[0].input >= 0 ? s * NumElements(op_[0].shape) : 0);
      float* gb =
          to[1] == nullptr
              ? nullptr
              : to[1] + (op_[1].input >= 0 ? s * NumElements(op_[1].shape) : 0);
#define LOCKSTEP_BINARY_BACKWARD(K)                             \
  BackwardRuns<K>(output_shape(), stride_[0], stride_[1], a, b, \
                  io.y + s * size, io.dy + s * size, ga, gb)
      LOCKSTEP_BINARY_DISPATCH(kind_, LOCKSTEP_BINARY_BACKWARD)
#undef LOCKSTEP_BINARY_BACKWARD
    }
  };
  // A parameter's gradient sums over the samples in order (the same bits
  // whatever the threads); inputs' gradients are per sample.
  if (param) {
    samples(0, io.n);
  } else {
    ParallelFor(io.n, 1, samples);
  }
}

WhereOp::WhereOp(const std::string& name, std::vector<Shape> inputs, Shape out,
                 BinaryOp::Operand cond, BinaryOp::Operand a,
                 BinaryOp::Operand b)
    : Layer("onnx_where", name, std::move(inputs), std::move(out)) {
  op_[0] = std::move(cond);
  op_[1] = std::move(a);
  op_[2] = std::move(b);
  const Shape& o = output_shape();
  for (int k = 0; k < 3; ++k) {
    const std::vector<int64_t> s = BroadcastStrides(op_[k].shape, o);
    at_[k].resize(NumElements(o));
    ForEachBroadcast(o, s, s,
                     [&](int64_t e, int64_t i, int64_t) { at_[k][e] = i; });
  }
}

const float* WhereOp::Values(const LayerIO& io, int k, int64_t s) const {
  const BinaryOp::Operand& o = op_[k];
  if (o.input >= 0) return io.x[o.input] + s * NumElements(o.shape);
  return o.values.data();
}

void WhereOp::Forward(const LayerIO& io, const PassContext&) {
  const int64_t size = output_size();
  ParallelFor(io.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const float* c = Values(io, 0, s);
      const float* a = Values(io, 1, s);
      const float* b = Values(io, 2, s);
      float* y = io.y + s * size;
      for (int64_t e = 0; e < size; ++e) {
        y[e] = c[at_[0][e]] != 0 ? a[at_[1][e]] : b[at_[2][e]];
      }
    }
  });
}

void WhereOp::Backward(const LayerIO& io, const PassContext&) {
  float* to[3] = {nullptr, nullptr, nullptr};
  for (int k = 0; k < 3; ++k) {
    const BinaryOp::Operand& o = op_[k];
    if (o.input >= 0 && o.input < static_cast<int>(io.dx.size()) &&
        io.dx[o.input] != nullptr) {
      to[k] = io.dx[o.input];
      std::fill(to[k], to[k] + io.n * NumElements(o.shape), 0.0f);
    }
  }
  if (to[1] == nullptr && to[2] == nullptr) return;
  const int64_t size = output_size();
  // Inputs the same on both sides add into one gradient: serial then.
  auto samples = [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const float* c = Values(io, 0, s);
      const float* dy = io.dy + s * size;
      float* da =
          to[1] == nullptr ? nullptr : to[1] + s * NumElements(op_[1].shape);
      float* db =
          to[2] == nullptr ? nullptr : to[2] + s * NumElements(op_[2].shape);
      for (int64_t e = 0; e < size; ++e) {
        if (c[at_[0][e]] != 0) {
          if (da != nullptr) da[at_[1][e]] += dy[e];
        } else if (db != nullptr) {
          db[at_[2][e]] += dy[e];
        }
      }
    }
  };
  ParallelFor(io.n, 1, samples);
}

}  // namespace onnx_ops
}  // namespace lockstep
