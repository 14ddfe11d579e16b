// Keras 3 optimizer updates in float32 loops the compiler vectorizes (the
// BUILD target adds -O3 -fno-math-errno; no FMA contraction at x86-64-v2, so
// results stay bitwise reproducible).
#include "core/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/train/square_sum.h"
#include "kernels/cpu/optimizer_rules.h"

namespace lockstep {
namespace {

// The loops below apply kernels/cpu/optimizer_rules.h's rules (the GPU's
// update kernels apply the same ones).
void DecayWeights(float* w, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) DecayRule(w + i, factor);
}

void SgdPlain(float* w, const float* g, int64_t n, float lr) {
  for (int64_t i = 0; i < n; ++i) SgdRule(w + i, g[i], lr);
}

void SgdMomentum(float* w, float* m, const float* g, int64_t n, float lr,
                 float momentum, bool nesterov) {
  if (nesterov) {
    for (int64_t i = 0; i < n; ++i)
      NesterovRule(w + i, m + i, g[i], lr, momentum);
  } else {
    for (int64_t i = 0; i < n; ++i)
      MomentumRule(w + i, m + i, g[i], lr, momentum);
  }
}

void AdamStep(float* w, float* m, float* v, const float* g, int64_t n,
              float alpha, float one_minus_b1, float one_minus_b2, float eps) {
  for (int64_t i = 0; i < n; ++i) {
    AdamRule(w + i, m + i, v + i, g[i], alpha, one_minus_b1, one_minus_b2, eps);
  }
}

const char* Prefix(OptimizerType type) {
  switch (type) {
    case OptimizerType::kSgd:
      return "sgd";
    case OptimizerType::kAdam:
      return "adam";
    case OptimizerType::kAdamW:
      return "adamw";
  }
  return "?";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(
    const OptimizerSpec& spec, const std::vector<Param*>& params,
    std::optional<std::vector<ParamRange>> owned) {
  auto bad = [](absl::string_view field, double got, absl::string_view want) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.", field, ": ", want, ", got ", got));
  };
  if (!(spec.learning_rate > 0)) {
    return bad("learning_rate", spec.learning_rate, "must be > 0");
  }
  if (!(spec.weight_decay >= 0)) {
    return bad("weight_decay", spec.weight_decay, "must be >= 0");
  }
  if (!(spec.global_clipnorm >= 0)) {
    return bad("global_clipnorm", spec.global_clipnorm, "must be > 0");
  }
  if (spec.type == OptimizerType::kSgd) {
    if (!(spec.momentum >= 0 && spec.momentum <= 1)) {
      return bad("momentum", spec.momentum, "must be in [0, 1]");
    }
  } else {
    if (!(spec.beta_1 >= 0 && spec.beta_1 < 1)) {
      return bad("beta_1", spec.beta_1, "must be in [0, 1)");
    }
    if (!(spec.beta_2 >= 0 && spec.beta_2 < 1)) {
      return bad("beta_2", spec.beta_2, "must be in [0, 1)");
    }
    if (!(spec.epsilon > 0)) return bad("epsilon", spec.epsilon, "must be > 0");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const Param* p = params[i];
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: parameter ", i, " is null"));
    }
    if (p->grad.size() != p->value.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer: parameter ", p->name, " has ", p->value.size(),
          " values but ", p->grad.size(), " gradient elements"));
    }
  }
  if (owned.has_value()) {
    for (const ParamRange& r : *owned) {
      if (r.param < 0 || r.param >= static_cast<int>(params.size()) ||
          r.begin < 0 || r.size < 0 ||
          r.begin + r.size > params[r.param]->value.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "optimizer: owned range [", r.begin, ", ", r.begin + r.size,
            ") of parameter ", r.param, " is outside it"));
      }
    }
  }
  return std::unique_ptr<Optimizer>(new Optimizer(spec, params, owned));
}

Optimizer::Optimizer(const OptimizerSpec& spec,
                     const std::vector<Param*>& params,
                     const std::optional<std::vector<ParamRange>>& owned)
    : spec_(spec), sharded_(owned.has_value()) {
  for (Param* p : params) {
    if (p->update == ParamUpdate::kOptimizer) ++num_params_;
  }
  // Pieces in model order; a param's owned range is one piece.
  std::vector<ParamRange> ranges;
  if (owned.has_value()) {
    ranges = *owned;
    std::sort(ranges.begin(), ranges.end(),
              [](const ParamRange& a, const ParamRange& b) {
                return std::tie(a.param, a.begin) < std::tie(b.param, b.begin);
              });
  } else {
    for (size_t i = 0; i < params.size(); ++i) {
      ranges.push_back({static_cast<int>(i), 0, params[i]->value.size()});
    }
  }
  const int n = slots();
  for (const ParamRange& r : ranges) {
    Param* p = params[r.param];
    if (p->update != ParamUpdate::kOptimizer) continue;
    Piece piece;
    piece.param = p;
    piece.begin = r.begin;
    piece.size = r.size;
    piece.decays = Decays(p->name);
    const Shape shape = sharded_ ? Shape{r.size} : p->value.shape();
    if (n >= 1) piece.first = Tensor(shape);
    if (n >= 2) piece.second = Tensor(shape);
    pieces_.push_back(std::move(piece));
  }
}

int Optimizer::slots() const {
  if (spec_.type == OptimizerType::kSgd) return spec_.momentum == 0 ? 0 : 1;
  return 2;
}

int Optimizer::num_state_tensors() const { return num_params_ * slots(); }

int64_t Optimizer::state_elements() const {
  int64_t n = 0;
  for (const Piece& p : pieces_) n += p.size * slots();
  return n;
}

bool DecaysWeights(const OptimizerSpec& spec, const std::string& name) {
  if (spec.weight_decay <= 0) return false;
  for (const std::string& pattern : spec.exclude_from_weight_decay) {
    if (name.find(pattern) != std::string::npos) return false;
  }
  return true;
}

absl::StatusOr<double> Optimizer::GlobalNorm(const RankSum& over_ranks) const {
  if (spec_.global_clipnorm <= 0) return 0.0;
  // The global L2 norm from the exact sum of squares: the same bits on
  // every replica, whatever part of the gradients each one holds.
  SquareSum sum;
  for (const Piece& p : pieces_)
    sum.Add(p.param->grad.data() + p.begin, p.size);
  if (over_ranks) {
    float wire[SquareSum::kWireFloats];
    sum.ToWire(wire);
    absl::Status s = over_ranks(wire, SquareSum::kWireFloats);
    if (!s.ok()) return s;
    sum = SquareSum::FromWire(wire);
  }
  return std::sqrt(sum.Value());
}

absl::Status Optimizer::Apply(double lr, const RankSum& over_ranks) {
  absl::StatusOr<double> norm = GlobalNorm(over_ranks);
  if (!norm.ok()) return norm.status();
  Update(lr, *norm);
  return absl::OkStatus();
}

void Optimizer::ApplyWithNorm(double lr, double norm) {
  Update(lr, spec_.global_clipnorm > 0 ? norm : 0);
}

void Optimizer::Update(double lr, double norm) {
  if (spec_.global_clipnorm > 0) {
    last_grad_norm_ = norm;
    if (norm > spec_.global_clipnorm) {
      const float scale = static_cast<float>(spec_.global_clipnorm / norm);
      for (const Piece& p : pieces_) {
        float* g = p.param->grad.data() + p.begin;
        for (int64_t i = 0; i < p.size; ++i) g[i] *= scale;
      }
    }
  }
  const float flr = static_cast<float>(lr);
  const float decay = static_cast<float>(spec_.weight_decay * lr);
  // Bias correction in double, as one float factor for the whole step.
  const double t = static_cast<double>(iterations_ + 1);
  const double b1_power = std::pow(spec_.beta_1, t);
  const double b2_power = std::pow(spec_.beta_2, t);
  const float alpha =
      static_cast<float>(lr * std::sqrt(1.0 - b2_power) / (1.0 - b1_power));
  const float one_minus_b1 = static_cast<float>(1.0 - spec_.beta_1);
  const float one_minus_b2 = static_cast<float>(1.0 - spec_.beta_2);
  const float eps = static_cast<float>(spec_.epsilon);
  const float momentum = static_cast<float>(spec_.momentum);

  for (Piece& p : pieces_) {
    float* w = p.param->value.data() + p.begin;
    const float* g = p.param->grad.data() + p.begin;
    const int64_t n = p.size;
    if (p.decays) DecayWeights(w, n, decay);
    switch (spec_.type) {
      case OptimizerType::kSgd:
        if (slots() == 0) {
          SgdPlain(w, g, n, flr);
        } else {
          SgdMomentum(w, p.first.data(), g, n, flr, momentum, spec_.nesterov);
        }
        break;
      case OptimizerType::kAdam:
      case OptimizerType::kAdamW:
        AdamStep(w, p.first.data(), p.second.data(), g, n, alpha, one_minus_b1,
                 one_minus_b2, eps);
        break;
    }
  }
  ++iterations_;
}

void UpdateMovingAverages(const std::vector<Param*>& params,
                          int64_t global_samples) {
  if (global_samples <= 0) return;
  const double inv = 1.0 / static_cast<double>(global_samples);
  for (Param* p : params) {
    if (p->update != ParamUpdate::kMovingAverage) continue;
    const float keep = p->momentum;
    const float take = 1.0f - keep;
    float* v = p->value.data();
    const float* g = p->grad.data();
    for (int64_t i = 0; i < p->value.size(); ++i)
      MovingAverageRule(v + i, g[i], inv, keep, take);
  }
}

std::string Optimizer::SlotName(int slot, const Param& p) const {
  const bool sgd = spec_.type == OptimizerType::kSgd;
  return absl::StrCat(Prefix(spec_.type),
                      slot == 1 ? "/v/" : (sgd ? "/momentum/" : "/m/"), p.name);
}

std::vector<StatePiece> Optimizer::StatePieces() {
  std::vector<StatePiece> out;
  for (int slot = 0; slot < slots(); ++slot) {
    for (Piece& p : pieces_) {
      out.push_back(StatePiece{SlotName(slot, *p.param), p.param->value.shape(),
                               p.begin, slot == 0 ? &p.first : &p.second});
    }
  }
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::StateTensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (const StatePiece& p : StatePieces()) out.emplace_back(p.name, p.data);
  return out;
}

}  // namespace lockstep
