// One block per row (max/argmax, then sum of exp in double, then the
// gradient), then one block sums the rows in a fixed order.
#include <cmath>

#include "kernels/cuda/softmax_xent.h"

namespace lockstep {
namespace cuda {
namespace {

constexpr int kRowThreads = 128;
constexpr int kSumThreads = 256;

size_t AlignUp(size_t n) { return (n + 255) / 256 * 256; }

__global__ void RowKernel(int64_t cols, const float* logits,
                          const int32_t* labels, float scale, float* grad,
                          float* row_loss, double* loss_rows,
                          int32_t* correct_rows) {
  __shared__ float best_value[kRowThreads];
  __shared__ int64_t best_index[kRowThreads];
  __shared__ double partial[kRowThreads];
  const int64_t r = blockIdx.x;
  const float* x = logits + r * cols;
  const int t = threadIdx.x;

  // First maximum: larger value wins, ties go to the smaller index.
  float bv = x[0];
  int64_t bi = 0;
  for (int64_t c = t; c < cols; c += kRowThreads) {
    if (x[c] > bv || (x[c] == bv && c < bi)) bv = x[c], bi = c;
  }
  best_value[t] = bv;
  best_index[t] = bi;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s /= 2) {
    if (t < s) {
      const float ov = best_value[t + s];
      const int64_t oi = best_index[t + s];
      if (ov > best_value[t] || (ov == best_value[t] && oi < best_index[t])) {
        best_value[t] = ov;
        best_index[t] = oi;
      }
    }
    __syncthreads();
  }
  const float m = best_value[0];
  const int64_t best = best_index[0];

  double sum = 0.0;
  for (int64_t c = t; c < cols; c += kRowThreads) {
    sum += exp(static_cast<double>(x[c]) - m);
  }
  partial[t] = sum;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s /= 2) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
  sum = partial[0];
  const int32_t label = labels[r];
  const bool valid = label >= 0 && label < cols;
  // Every read of x is done before anyone writes grad (which may alias it).
  const float x_label = valid ? x[label] : 0.0f;
  __syncthreads();

  const bool ignored = label < 0;
  if (t == 0) {
    const double loss = ignored ? 0.0
                        : valid ? m + log(sum) - static_cast<double>(x_label)
                                : nan("");
    loss_rows[r] = loss;
    // -1: not counted; else whether the first argmax is the label.
    correct_rows[r] = ignored ? -1 : best == label ? 1 : 0;
    if (row_loss != nullptr) row_loss[r] = static_cast<float>(loss);
  }
  if (grad != nullptr && ignored) {
    float* g = grad + r * cols;
    for (int64_t c = t; c < cols; c += kRowThreads) g[c] = 0.0f;
  } else if (grad != nullptr) {
    float* g = grad + r * cols;
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = t; c < cols; c += kRowThreads) {
      float v = expf(x[c] - m) * inv * scale;
      if (c == label) v -= scale;
      g[c] = v;
    }
  }
}

__global__ void SumKernel(int64_t rows, const double* loss_rows,
                          const int32_t* correct_rows, DeviceLossSums* sums) {
  __shared__ double loss[kSumThreads];
  __shared__ int64_t correct[kSumThreads];
  __shared__ int64_t count[kSumThreads];
  const int t = threadIdx.x;
  double l = 0.0;
  int64_t k = 0, c = 0;
  for (int64_t r = t; r < rows; r += kSumThreads) {
    l += loss_rows[r];
    k += correct_rows[r] > 0 ? 1 : 0;
    c += correct_rows[r] >= 0 ? 1 : 0;
  }
  loss[t] = l;
  correct[t] = k;
  count[t] = c;
  __syncthreads();
  for (int s = kSumThreads / 2; s > 0; s /= 2) {
    if (t < s) {
      loss[t] += loss[t + s];
      correct[t] += correct[t + s];
      count[t] += count[t + s];
    }
    __syncthreads();
  }
  if (t == 0) {
    sums->loss_sum = loss[0];
    sums->correct = correct[0];
    sums->count = count[0];
  }
}

}  // namespace

size_t SoftmaxCrossEntropyWorkspaceBytes(int64_t rows) {
  if (rows <= 0) return 0;
  return AlignUp(rows * sizeof(double)) + AlignUp(rows * sizeof(int32_t));
}

cudaError_t SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* logits,
                                const int32_t* labels, float scale, float* grad,
                                float* row_loss, void* workspace,
                                DeviceLossSums* sums, cudaStream_t stream) {
  if (rows < 0 || cols < 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) {  // the CPU returns zero sums, writes nothing
    return cudaMemsetAsync(sums, 0, sizeof(DeviceLossSums), stream);
  }
  double* loss_rows = static_cast<double*>(workspace);
  int32_t* correct_rows = reinterpret_cast<int32_t*>(
      static_cast<char*>(workspace) + AlignUp(rows * sizeof(double)));
  RowKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      cols, logits, labels, scale, grad, row_loss, loss_rows, correct_rows);
  SumKernel<<<1, kSumThreads, 0, stream>>>(rows, loss_rows, correct_rows, sums);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
