// layer_norm: rows in parallel; the scale and shift gradients summed per
// block of rows, then the blocks in order (deterministic for any thread
// count).
#include "core/layers/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "base/status_macros.h"
#include "core/layers/common.h"
#include "core/layers/registry.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

constexpr int64_t kRowBlock = 64;

absl::Status ReadLayerNorm(const Reader& r, LayerNormConfig* c) {
  return r.Number("epsilon", spec_reader::kPositive, &c->epsilon);
}

Json LayerNormToJson(const LayerNormConfig& c) {
  Json j;
  j["epsilon"] = c.epsilon;
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateLayerNorm(
    const LayerNormConfig& c, const LayerBuildContext& ctx) {
  return std::unique_ptr<Layer>(std::make_unique<LayerNormLayer>(
      c, ctx.name, ctx.inputs[0], ctx.ParamName("gamma", "weight"),
      ctx.ParamName("beta", "bias")));
}

LOCKSTEP_REGISTER_LAYER(layer_norm, MakeLayerType<LayerNormConfig>(
                                        "layer_norm", "layer_normalization",
                                        {"epsilon"}, 1, 1, &ReadLayerNorm,
                                        &LayerNormToJson, &CreateLayerNorm));

}  // namespace

LayerNormLayer::LayerNormLayer(const LayerNormConfig& config,
                               const std::string& name, const Shape& input,
                               std::string gamma_name, std::string beta_name)
    : Layer("layer_norm", name, {input}, input),
      epsilon_(static_cast<float>(config.epsilon)) {
  const int64_t w = input.back();
  MakeParam(gamma_name, {w}, &gamma_);
  for (float& g : gamma_.value.values()) g = 1.0f;
  MakeParam(beta_name, {w}, &beta_);
}

void LayerNormLayer::Forward(const LayerIO& io, const PassContext&) {
  const int64_t rows = Rows(io.n), w = width();
  if (static_cast<int64_t>(mean_.size()) < rows) {
    mean_.resize(rows);
    rstd_.resize(rows);
  }
  const float* gamma = io.w[0];
  const float* beta = io.w[1];
  ParallelFor(rows, std::max<int64_t>(1, 4096 / w), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      LayerNormRow(w, io.x[0] + r * w, gamma, beta, epsilon_, io.y + r * w,
                   &mean_[r], &rstd_[r]);
    }
  });
}

void LayerNormLayer::Backward(const LayerIO& io, const PassContext&) {
  const int64_t rows = Rows(io.n), w = width();
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  partial_.assign(blocks * 2 * w, 0.0f);
  const float* gamma = io.w[0];
  float* dx_all = io.dx[0];
  ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      float* dgamma = partial_.data() + blk * 2 * w;
      float* dbeta = dgamma + w;
      const int64_t end = std::min(rows, (blk + 1) * kRowBlock);
      for (int64_t r = blk * kRowBlock; r < end; ++r) {
        const float* x = io.x[0] + r * w;
        const float* dy = io.dy + r * w;
        const float mean = mean_[r], rstd = rstd_[r];
        // xhat = (x - mean) rstd; with g = dy * gamma:
        // dx = rstd (g - mean(g) - xhat mean(g xhat)).
        float sum_g = 0.0f, sum_gx = 0.0f;
        for (int64_t c = 0; c < w; ++c) {
          const float xhat = (x[c] - mean) * rstd;
          dgamma[c] += dy[c] * xhat;
          dbeta[c] += dy[c];
          const float g = dy[c] * gamma[c];
          sum_g += g;
          sum_gx += g * xhat;
        }
        if (dx_all == nullptr) continue;
        float* dx = dx_all + r * w;
        const float inv_w = 1.0f / static_cast<float>(w);
        const float mg = sum_g * inv_w, mgx = sum_gx * inv_w;
        for (int64_t c = 0; c < w; ++c) {
          const float xhat = (x[c] - mean) * rstd;
          dx[c] = rstd * (dy[c] * gamma[c] - mg - xhat * mgx);
        }
      }
    }
  });
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float* p = partial_.data() + blk * 2 * w;
    for (int64_t c = 0; c < w; ++c) {
      io.dw[0][c] += p[c];
      io.dw[1][c] += p[w + c];
    }
  }
}

}  // namespace lockstep
