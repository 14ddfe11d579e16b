// batch_norm on a GPU: kernels/cuda/layers/batch_norm.h (the CPU's bits),
// then the activation; the batch mean, variance and rstd live in the
// layer's scratch from the forward to the backward of a pass. sync: true
// takes its per-channel sums to the host, sums them over the replicas with
// the pass's collective (as the CPU layer, whose SyncMoments decides the
// same), and brings the result back: the stream waits on each such sum.
#include <algorithm>
#include <vector>

#include "base/status_macros.h"
#include "core/layers/batch_norm.h"
#include "core/layers/device_layer.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/layers/batch_norm.h"
#include "kernels/cuda/layers/device_context.h"

namespace lockstep {
namespace {

// Scratch: [mean | var | rstd], channels floats each.
struct Stats {
  float* mean;
  float* var;
  float* rstd;
};

Stats InScratch(const BatchNormLayer& l, const LayerIO& io) {
  float* s = static_cast<float*>(io.scratch);
  const int64_t c = l.channels();
  return Stats{s, s + c, s + 2 * c};
}

// The shared workspace: the block partials, 2 * channels summed doubles,
// 3 * channels coefficient floats.
struct Work {
  double* partial;
  double* sums;
  float* coef;
};

absl::StatusOr<Work> Workspace(const BatchNormLayer& l, int64_t rows,
                               cuda::DeviceContext& dc) {
  const int64_t c = l.channels();
  const int64_t doubles = cuda::BatchNormWorkspaceDoubles(rows, c) + 2 * c;
  ASSIGN_OR_RETURN(void* ws,
                   dc.workspace(std::max<size_t>(
                       doubles * sizeof(double) + 3 * c * sizeof(float), 16)));
  double* d = static_cast<double*>(ws);
  return Work{d, d + (doubles - 2 * c), reinterpret_cast<float*>(d + doubles)};
}

// sync: the host side of the sums, kept from a forward to its backward.
struct SyncState : DeviceLayerState {
  std::vector<double> sums;   // device sums, copied over
  std::vector<float> wire;    // what the collective sums
  std::vector<float> shift;   // the running mean
  std::vector<float> mean, var;
  double stat_rows = 0;       // every replica's rows
};

// Copies `count` device doubles into state.sums and waits for the stream.
absl::Status ToHost(const double* device, int64_t count, SyncState& st,
                    cuda::DeviceContext& dc) {
  st.sums.resize(count);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(st.sums.data(), device,
                                       count * sizeof(double),
                                       cudaMemcpyDeviceToHost, dc.stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dc.stream));
  return absl::OkStatus();
}

absl::Status Upload(float* device, const std::vector<float>& host,
                    cuda::DeviceContext& dc) {
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device, host.data(),
                                       host.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, dc.stream));
  return absl::OkStatus();
}

// The global batch's mean and biased variance into the scratch (sync),
// through one or two sums (the CPU layer's SyncStatistics). With no rows
// this replica only takes its part.
absl::Status SyncForward(const BatchNormLayer& l, SyncState& st,
                         const LayerIO& io, const PassContext& ctx,
                         cuda::DeviceContext& dc) {
  const int64_t rows = l.Rows(io.n), c = l.channels();
  st.wire.assign(2 * c + 1, 0.0f);
  st.shift.resize(c);
  st.mean.resize(c);
  st.var.resize(c);
  Work w{};
  if (rows > 0) {
    ASSIGN_OR_RETURN(w, Workspace(l, rows, dc));
    CUDA_RETURN_IF_ERROR(cuda::BatchNormChannelSums(
        cuda::BatchNormSumKind::kShifted, rows, c, io.x[0], nullptr, io.w[2],
        w.sums, w.partial, dc.stream));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(st.shift.data(), io.w[2],
                                         c * sizeof(float),
                                         cudaMemcpyDeviceToHost, dc.stream));
    RETURN_IF_ERROR(ToHost(w.sums, 2 * c, st, dc));
    for (int64_t k = 0; k < 2 * c; ++k) {
      st.wire[k] = static_cast<float>(st.sums[k]);
    }
    st.wire[2 * c] = static_cast<float>(rows);
  } else {
    // No rows: only this replica's part in the sums matters (the choice of
    // a second sum depends on the sums alone; the mean goes unused).
    std::fill(st.shift.begin(), st.shift.end(), 0.0f);
  }
  // The collective keeps any error and fails the step (PassCollective).
  ctx.collective->Sum(ctx.collective_key, st.wire.data(), 2 * c + 1)
      .IgnoreError();
  const bool exact = SyncMoments(c, st.wire.data(), st.shift.data(),
                                 l.epsilon(), st.mean.data(), st.var.data(),
                                 &st.stat_rows);
  const Stats sc = rows > 0 ? InScratch(l, io) : Stats{};
  if (rows > 0) RETURN_IF_ERROR(Upload(sc.mean, st.mean, dc));
  if (exact) {
    std::fill(st.wire.begin(), st.wire.begin() + c, 0.0f);
    if (rows > 0) {
      CUDA_RETURN_IF_ERROR(cuda::BatchNormChannelSums(
          cuda::BatchNormSumKind::kSquared, rows, c, io.x[0], nullptr,
          sc.mean, w.sums, w.partial, dc.stream));
      RETURN_IF_ERROR(ToHost(w.sums, c, st, dc));
      for (int64_t k = 0; k < c; ++k) {
        st.wire[k] = static_cast<float>(st.sums[k]);
      }
    }
    ctx.collective->Sum(ctx.collective_key + 1, st.wire.data(), c)
        .IgnoreError();
    const double inv = st.stat_rows > 0 ? 1.0 / st.stat_rows : 0.0;
    for (int64_t k = 0; k < c; ++k) {
      st.var[k] = static_cast<float>(st.wire[k] * inv);
    }
  }
  if (rows > 0) RETURN_IF_ERROR(Upload(sc.var, st.var, dc));
  // The host vectors must outlive the copies: wait for them.
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dc.stream));
  return absl::OkStatus();
}

bool Synced(const BatchNormLayer& l, const PassContext& ctx) {
  return l.SumsAcrossReplicas() && ctx.training && ctx.collective != nullptr;
}

absl::Status Forward(Layer& layer, DeviceLayerState* state, const LayerIO& io,
                     const PassContext& ctx, cuda::DeviceContext& dc) {
  const auto& l = static_cast<const BatchNormLayer&>(layer);
  const int64_t rows = l.Rows(io.n), c = l.channels();
  const bool sync = Synced(l, ctx);
  if (sync) {  // with no rows too: every replica takes part
    RETURN_IF_ERROR(
        SyncForward(l, *static_cast<SyncState*>(state), io, ctx, dc));
  }
  if (rows == 0) return absl::OkStatus();
  const Stats st = InScratch(l, io);
  const float* mean = io.w[2];
  const float* var = io.w[3];
  if (ctx.training) {
    if (!sync) {
      ASSIGN_OR_RETURN(Work w, Workspace(l, rows, dc));
      CUDA_RETURN_IF_ERROR(cuda::BatchNormStatistics(
          rows, c, io.x[0], st.mean, st.var, w.partial, dc.stream));
    }
    mean = st.mean;
    var = st.var;
  }
  CUDA_RETURN_IF_ERROR(
      cuda::BatchNormRstd(c, var, l.epsilon(), st.rstd, dc.stream));
  CUDA_RETURN_IF_ERROR(cuda::BatchNormForward(
      rows, c, io.x[0], mean, st.rstd, io.w[0], io.w[1], io.y, dc.stream));
  CUDA_RETURN_IF_ERROR(cuda::BiasActivationForward(rows, c, nullptr, l.act(),
                                                   io.y, dc.stream));
  return absl::OkStatus();
}

absl::Status Backward(Layer& layer, DeviceLayerState* state,
                      const LayerIO& io, const PassContext& ctx,
                      cuda::DeviceContext& dc) {
  const auto& l = static_cast<const BatchNormLayer&>(layer);
  const int64_t rows = l.Rows(io.n), c = l.channels();
  const bool sync = Synced(l, ctx);
  if (rows == 0 && !sync) return absl::OkStatus();
  double stat_rows = static_cast<double>(rows);
  if (sync) {
    // sum(dy) and sum(dy * (x - mean)) over every replica's rows; this
    // replica's own go to dbeta and dgamma (the gradient all-reduce sums
    // those).
    SyncState& ss = *static_cast<SyncState*>(state);
    ss.wire.assign(2 * c, 0.0f);
    Work w{};
    Stats st{};
    if (rows > 0) {
      st = InScratch(l, io);
      CUDA_RETURN_IF_ERROR(cuda::ActivationBackwardBiasGrad(
          rows, c, l.act(), io.y, io.dy, nullptr, dc.stream));
      ASSIGN_OR_RETURN(w, Workspace(l, rows, dc));
      CUDA_RETURN_IF_ERROR(cuda::BatchNormChannelSums(
          cuda::BatchNormSumKind::kBackward, rows, c, io.x[0], io.dy, st.mean,
          w.sums, w.partial, dc.stream));
      CUDA_RETURN_IF_ERROR(cuda::BatchNormAddParamGrads(
          c, w.sums, st.rstd, io.dw[0], io.dw[1], dc.stream));
      RETURN_IF_ERROR(ToHost(w.sums, 2 * c, ss, dc));
      for (int64_t k = 0; k < 2 * c; ++k) {
        ss.wire[k] = static_cast<float>(ss.sums[k]);
      }
    }
    ctx.collective->Sum(ctx.collective_key + 2, ss.wire.data(), 2 * c)
        .IgnoreError();
    if (rows == 0) return absl::OkStatus();
    for (int64_t k = 0; k < 2 * c; ++k) ss.sums[k] = ss.wire[k];
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(w.sums, ss.sums.data(),
                                         2 * c * sizeof(double),
                                         cudaMemcpyHostToDevice, dc.stream));
    if (io.dx[0] != nullptr) {
      CUDA_RETURN_IF_ERROR(cuda::BatchNormInputGrad(
          rows, c, io.x[0], io.dy, st.mean, st.rstd, io.w[0], w.sums,
          ss.stat_rows, w.coef, io.dx[0], dc.stream));
    }
    // ss.sums must outlive its copy.
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dc.stream));
    stat_rows = ss.stat_rows;
  } else {
    const Stats st = InScratch(l, io);
    CUDA_RETURN_IF_ERROR(cuda::ActivationBackwardBiasGrad(
        rows, c, l.act(), io.y, io.dy, nullptr, dc.stream));
    ASSIGN_OR_RETURN(Work w, Workspace(l, rows, dc));
    const float* mean = ctx.training ? st.mean : io.w[2];
    CUDA_RETURN_IF_ERROR(cuda::BatchNormBackward(
        rows, c, io.x[0], io.dy, mean, st.rstd, io.w[0], ctx.training,
        io.dw[0], io.dw[1], io.dx[0], w.partial, w.coef, dc.stream));
    if (!ctx.training) return absl::OkStatus();
  }
  // The statistics' "gradients" (the CPU layer's AddStatisticsContributions).
  const Stats st = InScratch(l, io);
  const double bessel = stat_rows > 1 ? stat_rows / (stat_rows - 1) : 1.0;
  CUDA_RETURN_IF_ERROR(cuda::BatchNormAddStatistics(
      c, static_cast<float>(io.n), bessel, st.mean, st.var, io.dw[2],
      io.dw[3], dc.stream));
  return absl::OkStatus();
}

DeviceLayer Impl() {
  DeviceLayer d;
  d.make_state = [](const Layer&) -> std::unique_ptr<DeviceLayerState> {
    return std::make_unique<SyncState>();
  };
  d.scratch_bytes = [](const Layer& layer, int64_t) -> int64_t {
    return 3 * static_cast<const BatchNormLayer&>(layer).channels() *
           static_cast<int64_t>(sizeof(float));
  };
  d.forward = &Forward;
  d.backward = &Backward;
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(batch_norm, "batch_norm", Impl());

}  // namespace
}  // namespace lockstep
