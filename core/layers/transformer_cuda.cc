// The text-model layers on a GPU: add, gelu, activation, embedding,
// position_embedding, layer_norm and gather_positions, with their CPU passes'
// semantics through kernels/cuda/transformer.h (multi_head_attention is
// attention_cuda.cc).
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "core/layers/device_layer.h"
#include "core/layers/elementwise_layers.h"
#include "core/layers/embedding.h"
#include "core/layers/gather_positions.h"
#include "core/layers/layer_norm.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/layers/device_context.h"
#include "kernels/cuda/transformer.h"

namespace lockstep {
namespace {

using cuda::DeviceContext;

// ---- add, gelu ----

DeviceLayer Add() {
  DeviceLayer d;
  d.forward = [](Layer& l, DeviceLayerState*, const LayerIO& io,
                 const PassContext&, DeviceContext& dc) -> absl::Status {
    CUDA_RETURN_IF_ERROR(cuda::AddForward(io.n * l.output_size(),
                                          static_cast<int>(io.x.size()),
                                          io.x.data(), io.y, dc.stream));
    return absl::OkStatus();
  };
  // Every input's gradient is dy itself.
  d.backward = [](Layer& l, DeviceLayerState*, const LayerIO& io,
                  const PassContext&, DeviceContext& dc) -> absl::Status {
    const size_t bytes = io.n * l.output_size() * sizeof(float);
    for (float* dx : io.dx) {
      if (dx == nullptr || dx == io.dy || bytes == 0) continue;
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          dx, io.dy, bytes, cudaMemcpyDeviceToDevice, dc.stream));
    }
    return absl::OkStatus();
  };
  return d;
}

// activation: the kernels' in-place pass on a copy of its input.
DeviceLayer ActivationOnGpu() {
  DeviceLayer d;
  d.forward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                 const PassContext& ctx, DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const ActivationLayer&>(layer);
    const size_t bytes = io.n * l.output_size() * sizeof(float);
    if (bytes > 0 && io.y != io.x[0]) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          io.y, io.x[0], bytes, cudaMemcpyDeviceToDevice, dc.stream));
    }
    const bool skip =
        ctx.skip_output_activation && (l.act() == ActivationKind::kSoftmax ||
                                       l.act() == ActivationKind::kSigmoid);
    if (!skip) {
      CUDA_RETURN_IF_ERROR(cuda::BiasActivationForward(
          l.Rows(io.n), l.Cols(), nullptr, l.act(), io.y, dc.stream));
    }
    return absl::OkStatus();
  };
  d.backward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                  const PassContext& ctx, DeviceContext& dc) -> absl::Status {
    if (io.dx[0] == nullptr) return absl::OkStatus();
    const auto& l = static_cast<const ActivationLayer&>(layer);
    const bool skip =
        ctx.skip_output_activation && (l.act() == ActivationKind::kSoftmax ||
                                       l.act() == ActivationKind::kSigmoid);
    if (!skip) {
      CUDA_RETURN_IF_ERROR(cuda::ActivationBackwardBiasGrad(
          l.Rows(io.n), l.Cols(), l.act(), io.y, io.dy, nullptr, dc.stream));
    }
    const size_t bytes = io.n * l.output_size() * sizeof(float);
    if (bytes > 0 && io.dx[0] != io.dy) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          io.dx[0], io.dy, bytes, cudaMemcpyDeviceToDevice, dc.stream));
    }
    return absl::OkStatus();
  };
  return d;
}

DeviceLayer Gelu() {
  DeviceLayer d;
  d.forward = [](Layer& l, DeviceLayerState*, const LayerIO& io,
                 const PassContext&, DeviceContext& dc) -> absl::Status {
    CUDA_RETURN_IF_ERROR(
        cuda::GeluForward(io.n * l.output_size(), io.x[0], io.y, dc.stream));
    return absl::OkStatus();
  };
  d.backward = [](Layer& l, DeviceLayerState*, const LayerIO& io,
                  const PassContext&, DeviceContext& dc) -> absl::Status {
    if (io.dx[0] == nullptr) return absl::OkStatus();
    CUDA_RETURN_IF_ERROR(cuda::GeluBackward(io.n * l.output_size(), io.x[0],
                                            io.dy, io.dx[0], dc.stream));
    return absl::OkStatus();
  };
  return d;
}

// ---- embedding, position_embedding ----

DeviceLayer Embedding() {
  DeviceLayer d;
  d.forward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                 const PassContext&, DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const EmbeddingLayer&>(layer);
    if (l.positions()) {
      CUDA_RETURN_IF_ERROR(cuda::PositionEmbeddingForward(
          io.n, l.lookups() * l.dim(), io.w[0], io.y, dc.stream));
    } else {
      CUDA_RETURN_IF_ERROR(cuda::EmbeddingForward(io.n * l.lookups(), l.rows(),
                                                  l.dim(), io.x[0], io.w[0],
                                                  io.y, dc.stream));
    }
    return absl::OkStatus();
  };
  // The table's gradient accumulates (it may be tied to a dense layer's).
  d.backward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                  const PassContext&, DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const EmbeddingLayer&>(layer);
    if (l.positions()) {
      CUDA_RETURN_IF_ERROR(cuda::PositionEmbeddingBackward(
          io.n, l.lookups() * l.dim(), io.dy, io.dw[0], dc.stream));
    } else {
      const int64_t lookups = io.n * l.lookups();
      size_t bytes = 0;
      CUDA_RETURN_IF_ERROR(cuda::EmbeddingBackwardWorkspaceBytes(
          lookups, l.rows(), l.dim(), &bytes));
      ASSIGN_OR_RETURN(void* ws, dc.workspace(std::max<size_t>(bytes, 1)));
      CUDA_RETURN_IF_ERROR(cuda::EmbeddingBackward(lookups, l.rows(), l.dim(),
                                                   io.x[0], io.dy, io.dw[0], ws,
                                                   bytes, dc.stream));
    }
    // Ids are not differentiable: a requested input gradient is zero.
    if (io.dx[0] != nullptr && io.n > 0) {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
          io.dx[0], 0, io.n * l.input_size() * sizeof(float), dc.stream));
    }
    return absl::OkStatus();
  };
  return d;
}

// ---- layer_norm ----

DeviceLayer LayerNorm() {
  DeviceLayer d;
  // Per row: the mean and the reciprocal standard deviation.
  d.scratch_bytes = [](const Layer& layer, int64_t n) -> int64_t {
    const auto& l = static_cast<const LayerNormLayer&>(layer);
    return 2 * l.Rows(n) * static_cast<int64_t>(sizeof(float));
  };
  d.forward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                 const PassContext&, DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const LayerNormLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::LayerNormForward(
        l.Rows(io.n), l.width(), l.epsilon(), io.x[0], io.w[0], io.w[1], io.y,
        static_cast<float*>(io.scratch), dc.stream));
    return absl::OkStatus();
  };
  d.backward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                  const PassContext&, DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const LayerNormLayer&>(layer);
    const int64_t rows = l.Rows(io.n);
    const int64_t floats =
        cuda::LayerNormBackwardWorkspaceFloats(rows, l.width());
    ASSIGN_OR_RETURN(
        void* ws, dc.workspace(std::max<int64_t>(floats, 1) * sizeof(float)));
    CUDA_RETURN_IF_ERROR(cuda::LayerNormBackward(
        rows, l.width(), io.x[0], io.w[0],
        static_cast<const float*>(io.scratch), io.dy, io.dx[0], io.dw[0],
        io.dw[1], static_cast<float*>(ws), dc.stream));
    return absl::OkStatus();
  };
  return d;
}

// ---- gather_positions ----

DeviceLayer GatherPositions() {
  DeviceLayer d;
  d.forward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                 const PassContext&, DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const GatherPositionsLayer&>(layer);
    CUDA_RETURN_IF_ERROR(
        cuda::GatherPositionsForward(io.n, l.length(), l.width(), l.count(),
                                     io.x[0], io.x[1], io.y, dc.stream));
    return absl::OkStatus();
  };
  d.backward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                  const PassContext&, DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const GatherPositionsLayer&>(layer);
    if (io.dx[1] != nullptr && io.n * l.count() > 0) {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
          io.dx[1], 0, io.n * l.count() * sizeof(float), dc.stream));
    }
    if (io.dx[0] == nullptr) return absl::OkStatus();
    CUDA_RETURN_IF_ERROR(
        cuda::GatherPositionsBackward(io.n, l.length(), l.width(), l.count(),
                                      io.x[1], io.dy, io.dx[0], dc.stream));
    return absl::OkStatus();
  };
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(add, "add", Add());
LOCKSTEP_REGISTER_DEVICE_LAYER(gelu, "gelu", Gelu());
LOCKSTEP_REGISTER_DEVICE_LAYER(activation, "activation", ActivationOnGpu());
LOCKSTEP_REGISTER_DEVICE_LAYER(embedding, "embedding", Embedding());
LOCKSTEP_REGISTER_DEVICE_LAYER(position_embedding, "position_embedding",
                               Embedding());
LOCKSTEP_REGISTER_DEVICE_LAYER(layer_norm, "layer_norm", LayerNorm());
LOCKSTEP_REGISTER_DEVICE_LAYER(gather_positions, "gather_positions",
                               GatherPositions());

}  // namespace
}  // namespace lockstep
