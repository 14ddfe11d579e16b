// Keras 3 optimizer updates in float32 loops the compiler vectorizes (the
// BUILD target adds -O3 -fno-math-errno; no FMA contraction at x86-64-v2, so
// results stay bitwise reproducible).
#include "core/train/optimizer.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

// Keras' base optimizer: variable -= variable * weight_decay * lr, applied
// before the update step.
void DecayWeights(float* w, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) w[i] -= w[i] * factor;
}

void SgdPlain(float* w, const float* g, int64_t n, float lr) {
  for (int64_t i = 0; i < n; ++i) w[i] -= g[i] * lr;
}

// m = m * momentum - g * lr; w += m (nesterov: w += m * momentum - g * lr).
void SgdMomentum(float* w, float* m, const float* g, int64_t n, float lr,
                 float momentum, bool nesterov) {
  if (nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const float gl = g[i] * lr;
      const float mi = m[i] * momentum - gl;
      m[i] = mi;
      w[i] += mi * momentum - gl;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float mi = m[i] * momentum - g[i] * lr;
      m[i] = mi;
      w[i] += mi;
    }
  }
}

// m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); w -= m * alpha / (sqrt(v) +
// eps).
void AdamStep(float* w, float* m, float* v, const float* g, int64_t n,
              float alpha, float one_minus_b1, float one_minus_b2, float eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] + (gi - m[i]) * one_minus_b1;
    const float vi = v[i] + (gi * gi - v[i]) * one_minus_b2;
    m[i] = mi;
    v[i] = vi;
    w[i] -= (mi * alpha) / (std::sqrt(vi) + eps);
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
    const OptimizerSpec& spec, const std::vector<Param*>& params) {
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
  return std::unique_ptr<Optimizer>(new Optimizer(spec, params));
}

Optimizer::Optimizer(const OptimizerSpec& spec,
                     const std::vector<Param*>& params)
    : spec_(spec) {
  for (Param* p : params) {
    if (p->update == ParamUpdate::kOptimizer) params_.push_back(p);
  }
  for (const Param* p : params_) decays_.push_back(Decays(p->name));
  const bool sgd = spec_.type == OptimizerType::kSgd;
  if (sgd && spec_.momentum == 0) return;  // plain SGD keeps no state
  first_.reserve(params_.size());
  for (const Param* p : params_) first_.emplace_back(p->value.shape());
  if (sgd) return;
  second_.reserve(params_.size());
  for (const Param* p : params_) second_.emplace_back(p->value.shape());
}

bool DecaysWeights(const OptimizerSpec& spec, const std::string& name) {
  if (spec.weight_decay <= 0) return false;
  for (const std::string& pattern : spec.exclude_from_weight_decay) {
    if (name.find(pattern) != std::string::npos) return false;
  }
  return true;
}

double Optimizer::ClipGradients() {
  // The global L2 norm in double, parameter by parameter in order: the
  // same bits on every replica, which all hold the same summed gradients.
  double sum = 0;
  for (const Param* p : params_) {
    const float* g = p->grad.data();
    double part = 0;
    for (int64_t i = 0; i < p->grad.size(); ++i) {
      part += static_cast<double>(g[i]) * g[i];
    }
    sum += part;
  }
  const double norm = std::sqrt(sum);
  if (spec_.global_clipnorm > 0 && norm > spec_.global_clipnorm) {
    const float scale = static_cast<float>(spec_.global_clipnorm / norm);
    for (Param* p : params_) {
      float* g = p->grad.data();
      for (int64_t i = 0; i < p->grad.size(); ++i) g[i] *= scale;
    }
  }
  return norm;
}

void Optimizer::Apply(double lr) {
  if (spec_.global_clipnorm > 0) last_grad_norm_ = ClipGradients();
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

  for (size_t k = 0; k < params_.size(); ++k) {
    Param* p = params_[k];
    float* w = p->value.data();
    const float* g = p->grad.data();
    const int64_t n = p->value.size();
    if (decays_[k]) DecayWeights(w, n, decay);
    switch (spec_.type) {
      case OptimizerType::kSgd:
        if (first_.empty()) {
          SgdPlain(w, g, n, flr);
        } else {
          SgdMomentum(w, first_[k].data(), g, n, flr, momentum, spec_.nesterov);
        }
        break;
      case OptimizerType::kAdam:
      case OptimizerType::kAdamW:
        AdamStep(w, first_[k].data(), second_[k].data(), g, n, alpha,
                 one_minus_b1, one_minus_b2, eps);
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
    for (int64_t i = 0; i < p->value.size(); ++i) {
      const float batch = static_cast<float>(g[i] * inv);
      v[i] = v[i] * keep + batch * take;
    }
  }
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::StateTensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  const std::string prefix = Prefix(spec_.type);
  const bool sgd = spec_.type == OptimizerType::kSgd;
  for (size_t k = 0; k < first_.size(); ++k) {
    out.emplace_back(
        absl::StrCat(prefix, sgd ? "/momentum/" : "/m/", params_[k]->name),
        &first_[k]);
  }
  for (size_t k = 0; k < second_.size(); ++k) {
    out.emplace_back(absl::StrCat(prefix, "/v/", params_[k]->name),
                     &second_[k]);
  }
  return out;
}

}  // namespace lockstep
