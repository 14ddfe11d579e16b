// One thread per row (few classes), then one thread adds the rows in order:
// the CPU's exact arithmetic (--fmad=false keeps diff * diff unfused). Binary
// cross-entropy runs the same way, one logit per row.
#include "kernels/cuda/layers/mse.h"

namespace lockstep {
namespace cuda {
namespace {

constexpr int kThreads = 128;

size_t AlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

__global__ void RowKernel(int64_t rows, int64_t cols, const float* y,
                          const int32_t* labels, float g_scale, float* grad,
                          double* row_loss, int32_t* row_correct) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float* yr = y + r * cols;
  const int32_t label = labels[r];
  float* g = grad == nullptr ? nullptr : grad + r * cols;
  if (label < 0) {  // no label here: no loss, not counted
    row_correct[r] = -1;
    row_loss[r] = 0.0;
    if (g != nullptr) {
      for (int64_t c = 0; c < cols; ++c) g[c] = 0.0f;
    }
    return;
  }
  int64_t best = 0;  // the first maximum, as CountArgmaxCorrect
  for (int64_t c = 1; c < cols; ++c) {
    if (yr[c] > yr[best]) best = c;
  }
  row_correct[r] = best == label ? 1 : 0;
  double loss = 0.0;
  for (int64_t c = 0; c < cols; ++c) {
    const float target =
        cols == 1 ? static_cast<float>(label) : (c == label ? 1.0f : 0.0f);
    const float diff = yr[c] - target;
    loss += static_cast<double>(diff) * diff;
    if (g != nullptr) g[c] = diff * g_scale;
  }
  row_loss[r] = loss / cols;
}

__global__ void BceRowKernel(int64_t rows, const float* z, const int32_t* labels,
                             float scale, float* grad, double* row_loss,
                             int32_t* row_correct) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float zr = z[r];
  if (labels[r] < 0) {  // no label here: no loss, not counted
    row_correct[r] = -1;
    row_loss[r] = 0.0;
    if (grad != nullptr) grad[r] = 0.0f;
    return;
  }
  const float t = labels[r] > 0 ? 1.0f : 0.0f;
  row_correct[r] = (zr > 0.0f) == (t > 0.0f) ? 1 : 0;
  const double zd = zr;
  row_loss[r] = (zd > 0.0 ? zd : 0.0) - zd * t + log1p(exp(-fabs(zd)));
  if (grad != nullptr) {
    const float e = expf(-fabsf(zr));
    const float p = zr >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    grad[r] = (p - t) * scale;
  }
}

__global__ void SumKernel(int64_t rows, const double* row_loss,
                          const int32_t* row_correct, DeviceLossSums* sums) {
  double loss = 0.0;
  int64_t correct = 0, count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    loss += row_loss[r];
    correct += row_correct[r] > 0 ? 1 : 0;
    count += row_correct[r] >= 0 ? 1 : 0;
  }
  sums->loss_sum = loss;
  sums->correct = correct;
  sums->count = count;
}

// The per-row results of `workspace`: losses, then correct flags.
double* RowLoss(void* workspace) { return static_cast<double*>(workspace); }
int32_t* RowCorrect(void* workspace, int64_t rows) {
  return reinterpret_cast<int32_t*>(static_cast<char*>(workspace) +
                                    AlignUp(rows * sizeof(double)));
}

}  // namespace

cudaError_t BinaryCrossEntropy(int64_t rows, const float* logits,
                               const int32_t* labels, float scale,
                               float* grad, void* workspace,
                               DeviceLossSums* sums, cudaStream_t stream) {
  if (rows < 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaMemsetAsync(sums, 0, sizeof(DeviceLossSums), stream);
  const int64_t blocks = (rows + kThreads - 1) / kThreads;
  BceRowKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      rows, logits, labels, scale, grad, RowLoss(workspace),
      RowCorrect(workspace, rows));
  SumKernel<<<1, 1, 0, stream>>>(rows, RowLoss(workspace),
                                 RowCorrect(workspace, rows), sums);
  return cudaGetLastError();
}

size_t MeanSquaredErrorWorkspaceBytes(int64_t rows) {
  if (rows <= 0) return 0;
  return AlignUp(rows * sizeof(double)) + AlignUp(rows * sizeof(int32_t));
}

cudaError_t MeanSquaredError(int64_t rows, int64_t cols, const float* y,
                             const int32_t* labels, float scale, float* grad,
                             void* workspace, DeviceLossSums* sums,
                             cudaStream_t stream) {
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) {
    return cudaMemsetAsync(sums, 0, sizeof(DeviceLossSums), stream);
  }
  double* row_loss = RowLoss(workspace);
  int32_t* row_correct = RowCorrect(workspace, rows);
  // The CPU's 2.0f * scale / float(cols), rounded the same way on the host.
  const float g_scale = 2.0f * scale / static_cast<float>(cols);
  const int64_t blocks = (rows + kThreads - 1) / kThreads;
  RowKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      rows, cols, y, labels, g_scale, grad, row_loss, row_correct);
  SumKernel<<<1, 1, 0, stream>>>(rows, row_loss, row_correct, sums);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
