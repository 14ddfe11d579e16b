// Blocks for MobileNetV2 (Sandler et al. 2018, as torchvision builds it):
//
// inverted_residual: [1x1 conv expanding to in_channels * expansion, batch
//   norm + ReLU6] -> 3x3 depthwise conv (the stride; PyTorch's padding 1),
//   batch norm + ReLU6 -> 1x1 conv projecting to `filters`, batch norm ->
//   + the block's input when the stride is 1 and the channels agree. The
//   convolutions have no bias. With PyTorch names its parameters are
//   torchvision's InvertedResidual's: <name>.conv.0.0.weight (expand),
//   <name>.conv.0.1.{weight,bias,running_mean,running_var}, <name>.conv.1.0
//   (depthwise), <name>.conv.2.weight (project), <name>.conv.3.* (its norm);
//   without the expansion (expansion 1) the depthwise is conv.0.
//
// mobilenet_v2: the whole network, also a preset over the "input" images:
//   features.0 (3x3 conv, stride 2, 32 * alpha channels, BN + ReLU6),
//   features.1-17 (the paper's 17 inverted residuals), features.18 (1x1
//   conv to 1280 * max(1, alpha) channels, BN + ReLU6), then with
//   include_top global average pooling, dropout and classifier.1 (dense,
//   `classes` logits). Channel counts are torchvision's _make_divisible(.,
//   8). With PyTorch names every parameter is named as in torchvision's
//   mobilenet_v2(width_mult=alpha).state_dict() (its num_batches_tracked
//   counters are not kept), so torchvision weights converted to
//   safetensors load as the initial weights and checkpoints load back.
#ifndef LOCKSTEP_CORE_LAYERS_MOBILENET_H_
#define LOCKSTEP_CORE_LAYERS_MOBILENET_H_

#include <cstdint>

namespace lockstep {

// The fields a block passes to each of its batch norms.
struct BlockNorm {
  double momentum = 0.9;  // PyTorch's BatchNorm2d (its 0.1), Keras' convention
  double epsilon = 1e-5;  // PyTorch's
  bool sync = false;      // batch_norm's `sync` (SyncBatchNorm)
};

struct InvertedResidualConfig {
  int64_t filters = 0;
  int64_t strides = 1;
  int64_t expansion = 6;
  BlockNorm norm;
};

struct MobileNetV2Config {
  double alpha = 1.0;  // torchvision's width_mult
  bool include_top = true;
  int64_t classes = 1000;
  double dropout = 0.2;
  BlockNorm norm;
};

// torchvision's _make_divisible(v, 8): v rounded to a multiple of 8, at least
// 8, and not below 90% of v.
int64_t MakeDivisible(double v, int64_t divisor = 8);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_MOBILENET_H_
