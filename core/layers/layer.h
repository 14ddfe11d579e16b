// The layer interface a model graph runs: one node of the graph, built from
// its job-file object by the registry (core/layers/registry.h). A layer sees
// raw float buffers of n samples, each of its per-sample input and output
// shapes (row-major, batch first); the executor (core/model/model.h on the CPU,
// core/gpu/gpu_model.h on a GPU) owns every buffer, a layer only its
// parameters and host scratch.
#ifndef LOCKSTEP_CORE_LAYERS_LAYER_H_
#define LOCKSTEP_CORE_LAYERS_LAYER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"
#include "kernels/cpu/gemm.h"

namespace lockstep {

// A sum over every replica of the job that runs inside a training pass
// (sync batch norm's statistics): the local replicas meet at a barrier, the
// last one adds their values in replica order and the workers' sums over
// the ring (core/train/replica_set.h).
class PassCollective {
 public:
  virtual ~PassCollective() = default;
  // data[0..count) becomes the sum over every replica. Every replica makes
  // the same calls (the same keys and counts, in the same order) in each
  // step, those with no samples too (Model::TrainStep sees to it). On an
  // error (a peer lost, a replica out of step) data is unspecified; the
  // collective keeps the error and the step fails with it, so a layer may
  // carry on.
  virtual absl::Status Sum(int32_t key, float* data, int64_t count) = 0;
};

// The first of graph node `node`'s collective keys (PassContext::
// collective_key): each node has 4, the same in every executor.
inline int32_t PassCollectiveKey(int node) { return 4 * node; }

struct PassContext {
  bool training = false;
  uint64_t dropout_seed = 0;  // this layer's own; only dropout reads it
  // Leave a softmax or sigmoid activation out (forward and backward): the
  // loss applies it fused with its cross-entropy, from the logits.
  bool skip_output_activation = false;
  // Training passes of a replica set with layers that sum across replicas
  // (SumsAcrossReplicas); null otherwise: such a layer then uses its own
  // batch alone. A layer's keys are collective_key + 0..3 (unique in the
  // model).
  PassCollective* collective = nullptr;
  int32_t collective_key = 0;
  // What the layer's matrix products and convolutions round their inputs
  // to (the job's "precision"; kernels/cpu/gemm.h): everything else, and
  // every output, stays float32.
  GemmPrecision precision = GemmPrecision::kFp32;
};

// The buffers of one call. Host pointers on the CPU, device pointers on a
// GPU. Set by the executor; the layer reads what its call needs.
struct LayerIO {
  int64_t n = 0;                // samples in the batch (may be 0)
  std::vector<const float*> x;  // per input: n * input_size(i)
  float* y = nullptr;           // n * output_size()
  // Backward only. dy holds d(loss)/dy and may be clobbered; dx[i], when not
  // null, is OVERWRITTEN with d(loss)/d(input i).
  float* dy = nullptr;
  std::vector<float*> dx;
  // Parameter values and gradients in params() order. Gradients are
  // ACCUMULATED (+=): the executor zeroes them before a step, so a weight
  // two layers use (tied) gets both contributions.
  std::vector<const float*> w;
  std::vector<float*> dw;
  // Device scratch of DeviceLayer::scratch_bytes(n), kept from a forward to
  // the backward of the same pass (GPU only).
  void* scratch = nullptr;
};

class Layer {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // The registered type ("dense") and the unique name in its model.
  const std::string& type() const { return type_; }
  const std::string& name() const { return name_; }
  const std::vector<Shape>& input_shapes() const { return input_shapes_; }
  const Shape& input_shape(int i = 0) const { return input_shapes_[i]; }
  int64_t input_size(int i = 0) const { return NumElements(input_shapes_[i]); }
  int num_inputs() const { return static_cast<int>(input_shapes_.size()); }
  const Shape& output_shape() const { return output_shape_; }
  int64_t output_size() const { return NumElements(output_shape_); }

  // The parameters this layer reads, in the order of LayerIO::w. A layer
  // owns its own; a tied weight is owned by the layer it is tied to (listed
  // here too). Pointers stay valid for the layer's life.
  virtual std::vector<Param*> params() { return {}; }
  // True when the output is input 0 itself (flatten; dropout outside
  // training): the executor then calls neither Forward nor Backward.
  virtual bool PassesThrough(const PassContext& ctx) const { return false; }
  // Its last operation is a softmax (a sigmoid) that sparse categorical
  // (binary) cross-entropy fuses (skip_output_activation).
  virtual bool HasSoftmaxOutput() const { return false; }
  virtual bool HasSigmoidOutput() const { return false; }
  // Its training passes call PassContext::collective (sync batch norm):
  // every replica must run them side by side, and a replica with no
  // samples still calls Forward and Backward with n == 0 to take part.
  virtual bool SumsAcrossReplicas() const { return false; }

  // CPU. Not thread-safe: a layer keeps host scratch for its Backward.
  virtual void Forward(const LayerIO& io, const PassContext& ctx) = 0;
  // x and y are those of the last Forward with the same ctx.
  virtual void Backward(const LayerIO& io, const PassContext& ctx) = 0;

 protected:
  Layer(std::string type, std::string name, std::vector<Shape> input_shapes,
        Shape output_shape)
      : type_(std::move(type)),
        name_(std::move(name)),
        input_shapes_(std::move(input_shapes)),
        output_shape_(std::move(output_shape)) {}

 private:
  std::string type_, name_;
  std::vector<Shape> input_shapes_;
  Shape output_shape_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_LAYER_H_
