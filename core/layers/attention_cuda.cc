// multi_head_attention on a GPU, with its CPU pass's semantics through
// kernels/cuda/transformer.h and cuBLAS. It keeps Q, K, V, the
// probabilities (before dropout) and the heads' outputs in the layer's
// scratch for the backward; the dropout mask is recomputed from its seed,
// as on the CPU.
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "core/layers/attention.h"
#include "core/layers/device_layer.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layers/device_context.h"
#include "kernels/cuda/transformer.h"

namespace lockstep {
namespace {

using cuda::DeviceContext;

// Hands out 256-byte-aligned float arrays from one device buffer; with a
// null base it only counts, so one function gives both a layout and its
// size.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  float* Take(int64_t floats) {
    char* p = base_ == nullptr ? nullptr : base_ + used_;
    used_ += (static_cast<size_t>(floats) * sizeof(float) + 255) / 256 * 256;
    return reinterpret_cast<float*>(p);
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// What the forward keeps for the backward, in the layer's scratch.
struct Saved {
  float *q, *k, *v, *context;  // [n * L, inner] each
  float* probs;                // [n * heads, L, L], before dropout
};

Saved SavedLayout(const MultiHeadAttentionLayer& l, int64_t n, void* base,
                  size_t* bytes) {
  Carver c(base);
  const int64_t rows = n * l.length(), in = l.inner();
  Saved s;
  s.q = c.Take(rows * in);
  s.k = c.Take(rows * in);
  s.v = c.Take(rows * in);
  s.context = c.Take(rows * in);
  s.probs = c.Take(n * l.heads() * l.length() * l.length());
  if (bytes != nullptr) *bytes = c.used();
  return s;
}

// The (sample, head) pairs as strided batches. A head is a column block of
// width key_dim in [n * L, inner], so one element stride steps either over
// a head's samples (L * inner) or over a sample's heads (key_dim); the
// loop runs over whichever count is smaller and batches the other.
struct HeadBatches {
  int64_t loops, batch;
  int64_t qkv_step, probs_step;      // per loop
  int64_t qkv_stride, probs_stride;  // per batch entry
};

HeadBatches Batches(const MultiHeadAttentionLayer& l, int64_t n) {
  const int64_t h = l.heads(), len = l.length(), in = l.inner(),
                d = l.key_dim();
  if (h <= n) return {h, n, d, len * len, len * in, h * len * len};
  return {n, h, len * in, h * len * len, d, len * len};
}

// One strided-batched GEMM per loop of `b`. A, B and C are each a [n * L,
// inner] array (kQkv) or the [n * heads, L, L] probabilities (kProbs).
enum class Layout { kQkv, kProbs };

absl::Status BatchedGemm(const HeadBatches& b, DeviceContext& dc, bool ta,
                         bool tb, int64_t m, int64_t nn, int64_t k, float alpha,
                         const float* a, Layout la, int64_t lda,
                         const float* bm, Layout lb, int64_t ldb, float* c,
                         Layout lc, int64_t ldc) {
  auto step = [&](Layout x) {
    return x == Layout::kQkv ? b.qkv_step : b.probs_step;
  };
  auto stride = [&](Layout x) {
    return x == Layout::kQkv ? b.qkv_stride : b.probs_stride;
  };
  for (int64_t i = 0; i < b.loops; ++i) {
    RETURN_IF_ERROR(cuda::GemmStridedBatched(
        *dc.cublas, dc.stream, dc.gemm, ta, tb, m, nn, k, alpha,
        a + i * step(la), lda, stride(la), bm + i * step(lb), ldb, stride(lb),
        0.0f, c + i * step(lc), ldc, stride(lc), b.batch));
  }
  return absl::OkStatus();
}

// y [rows, out] = x [rows, in] W (+ b), W in the layer's layout.
absl::Status Project(const MultiHeadAttentionLayer& l, DeviceContext& dc,
                     int64_t rows, int64_t in, int64_t out, const float* x,
                     const float* w, const float* b, float* y) {
  RETURN_IF_ERROR(cuda::Gemm(*dc.cublas, dc.stream, dc.gemm, false, l.out_in(),
                             rows, out, in, 1.0f, x, in, w,
                             l.out_in() ? in : out, 0.0f, y, out));
  if (b != nullptr) {
    CUDA_RETURN_IF_ERROR(cuda::AddBias(rows, out, b, y, dc.stream));
  }
  return absl::OkStatus();
}

// dW += the weight gradient of y = x W for dy, in the layer's layout.
absl::Status WeightGrad(const MultiHeadAttentionLayer& l, DeviceContext& dc,
                        int64_t rows, int64_t in, int64_t out, const float* x,
                        const float* dy, float* dw) {
  if (l.out_in()) {
    return cuda::Gemm(*dc.cublas, dc.stream, dc.gemm, true, false, out, in,
                      rows, 1.0f, dy, out, x, in, 1.0f, dw, in);
  }
  return cuda::Gemm(*dc.cublas, dc.stream, dc.gemm, true, false, in, out, rows,
                    1.0f, x, in, dy, out, 1.0f, dw, out);
}

// db += the column sums of dy [rows, cols]. cuda::BiasGrad overwrites, so
// it sums into `tmp` (its `ws` for the parallel form) first.
absl::Status BiasGradAdd(DeviceContext& dc, int64_t rows, int64_t cols,
                         const float* dy, float* db, float* tmp, float* ws) {
  CUDA_RETURN_IF_ERROR(cuda::BiasGrad(rows, cols, dy, tmp, dc.stream, ws));
  CUDA_RETURN_IF_ERROR(cuda::Axpy(cols, 1.0f, tmp, db, dc.stream));
  return absl::OkStatus();
}

cuda::AttentionDropout DropoutOf(const MultiHeadAttentionLayer& l,
                                 const PassContext& ctx) {
  cuda::AttentionDropout d;
  d.enabled = ctx.training && l.rate() > 0.0f;
  d.rate = l.rate();
  d.seed = ctx.dropout_seed;
  return d;
}

absl::Status AttentionForward(Layer& layer, DeviceLayerState*,
                              const LayerIO& io, const PassContext& ctx,
                              DeviceContext& dc) {
  const auto& l = static_cast<const MultiHeadAttentionLayer&>(layer);
  const int64_t n = io.n, len = l.length(), w = l.width(), h = l.heads(),
                d = l.key_dim(), in = l.inner(), rows = n * len;
  if (n == 0) return absl::OkStatus();
  // io.w: q, [bq,] k, [bk,] v, [bv,] o, [bo].
  const int step = l.use_bias() ? 2 : 1;
  auto bias = [&](int i) {
    return l.use_bias() ? io.w[i * step + 1] : nullptr;
  };
  const Saved s = SavedLayout(l, n, io.scratch, nullptr);
  RETURN_IF_ERROR(Project(l, dc, rows, w, in, io.x[0], io.w[0], bias(0), s.q));
  RETURN_IF_ERROR(
      Project(l, dc, rows, w, in, io.x[0], io.w[step], bias(1), s.k));
  RETURN_IF_ERROR(
      Project(l, dc, rows, w, in, io.x[0], io.w[2 * step], bias(2), s.v));
  const HeadBatches b = Batches(l, n);
  // Scores Q K^T / sqrt(key_dim) per (sample, head), then the softmax.
  RETURN_IF_ERROR(BatchedGemm(b, dc, false, true, len, len, d, l.scale(), s.q,
                              Layout::kQkv, in, s.k, Layout::kQkv, in, s.probs,
                              Layout::kProbs, len));
  const cuda::AttentionDropout drop = DropoutOf(l, ctx);
  const float* use = s.probs;
  float* dropped = nullptr;
  if (drop.enabled) {
    ASSIGN_OR_RETURN(void* ws, dc.workspace(n * h * len * len * sizeof(float)));
    dropped = static_cast<float*>(ws);
    use = dropped;
  }
  CUDA_RETURN_IF_ERROR(
      cuda::AttentionSoftmaxForward(n, h, len, l.masked() ? io.x[1] : nullptr,
                                    drop, s.probs, dropped, dc.stream));
  // Each head's output into its column block of the context.
  RETURN_IF_ERROR(BatchedGemm(b, dc, false, false, len, d, len, 1.0f, use,
                              Layout::kProbs, len, s.v, Layout::kQkv, in,
                              s.context, Layout::kQkv, in));
  return Project(l, dc, rows, in, w, s.context, io.w[3 * step], bias(3), io.y);
}

absl::Status AttentionBackward(Layer& layer, DeviceLayerState*,
                               const LayerIO& io, const PassContext& ctx,
                               DeviceContext& dc) {
  const auto& l = static_cast<const MultiHeadAttentionLayer&>(layer);
  const int64_t n = io.n, len = l.length(), w = l.width(), h = l.heads(),
                d = l.key_dim(), in = l.inner(), rows = n * len;
  if (n == 0) return absl::OkStatus();
  const bool use_bias = l.use_bias();
  const int step = use_bias ? 2 : 1;
  auto weight = [&](int i) { return io.w[i * step]; };
  auto dweight = [&](int i) { return io.dw[i * step]; };
  auto dbias = [&](int i) { return use_bias ? io.dw[i * step + 1] : nullptr; };
  const Saved s = SavedLayout(l, n, io.scratch, nullptr);

  // One workspace call (a second may move the first's buffer).
  const int64_t widest = std::max(w, in);
  auto carve = [&](Carver& c) {
    struct {
      float *dcontext, *dq, *dk, *dv, *dp, *bias_sum, *bias_ws;
    } t;
    t.dcontext = c.Take(rows * in);
    t.dq = c.Take(rows * in);
    t.dk = c.Take(rows * in);
    t.dv = c.Take(rows * in);
    t.dp = c.Take(n * h * len * len);
    t.bias_sum = c.Take(widest);
    t.bias_ws = c.Take(cuda::BiasGradWorkspaceFloats(rows, widest));
    return t;
  };
  Carver count(nullptr);
  carve(count);
  ASSIGN_OR_RETURN(void* ws, dc.workspace(count.used()));
  Carver carver(ws);
  const auto t = carve(carver);

  // The output projection.
  RETURN_IF_ERROR(cuda::Gemm(*dc.cublas, dc.stream, dc.gemm, false, !l.out_in(),
                             rows, in, w, 1.0f, io.dy, w, weight(3),
                             l.out_in() ? in : w, 0.0f, t.dcontext, in));
  RETURN_IF_ERROR(WeightGrad(l, dc, rows, in, w, s.context, io.dy, dweight(3)));
  if (use_bias) {
    RETURN_IF_ERROR(
        BiasGradAdd(dc, rows, w, io.dy, dbias(3), t.bias_sum, t.bias_ws));
  }

  const HeadBatches b = Batches(l, n);
  const cuda::AttentionDropout drop = DropoutOf(l, ctx);
  // dV = P'^T dC, with P' (the dropped probabilities) regenerated into dp,
  // which dP = dC V^T then overwrites (stream order).
  const float* use = s.probs;
  if (drop.enabled) {
    CUDA_RETURN_IF_ERROR(cuda::AttentionDropoutForward(
        n * h * len * len, drop, s.probs, t.dp, dc.stream));
    use = t.dp;
  }
  RETURN_IF_ERROR(BatchedGemm(b, dc, true, false, len, d, len, 1.0f, use,
                              Layout::kProbs, len, t.dcontext, Layout::kQkv, in,
                              t.dv, Layout::kQkv, in));
  RETURN_IF_ERROR(BatchedGemm(b, dc, false, true, len, len, d, 1.0f, t.dcontext,
                              Layout::kQkv, in, s.v, Layout::kQkv, in, t.dp,
                              Layout::kProbs, len));
  CUDA_RETURN_IF_ERROR(cuda::AttentionSoftmaxBackward(
      n, h, len, l.scale(), drop, s.probs, t.dp, dc.stream));
  // dQ = dS K; dK = dS^T Q.
  RETURN_IF_ERROR(BatchedGemm(b, dc, false, false, len, d, len, 1.0f, t.dp,
                              Layout::kProbs, len, s.k, Layout::kQkv, in, t.dq,
                              Layout::kQkv, in));
  RETURN_IF_ERROR(BatchedGemm(b, dc, true, false, len, d, len, 1.0f, t.dp,
                              Layout::kProbs, len, s.q, Layout::kQkv, in, t.dk,
                              Layout::kQkv, in));

  // The input projections: weights, biases, and dx summed over the three.
  const float* grads[] = {t.dq, t.dk, t.dv};
  for (int i = 0; i < 3; ++i) {
    RETURN_IF_ERROR(
        WeightGrad(l, dc, rows, w, in, io.x[0], grads[i], dweight(i)));
    if (use_bias) {
      RETURN_IF_ERROR(
          BiasGradAdd(dc, rows, in, grads[i], dbias(i), t.bias_sum, t.bias_ws));
    }
  }
  if (io.dx[0] != nullptr) {
    for (int i = 0; i < 3; ++i) {
      RETURN_IF_ERROR(cuda::Gemm(*dc.cublas, dc.stream, dc.gemm, false,
                                 !l.out_in(), rows, w, in, 1.0f, grads[i], in,
                                 weight(i), l.out_in() ? w : in,
                                 i == 0 ? 0.0f : 1.0f, io.dx[0], w));
    }
  }
  if (l.masked() && io.dx[1] != nullptr) {
    CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(io.dx[1], 0, rows * sizeof(float), dc.stream));
  }
  return absl::OkStatus();
}

DeviceLayer Attention() {
  DeviceLayer d;
  d.scratch_bytes = [](const Layer& layer, int64_t n) -> int64_t {
    size_t bytes = 0;
    SavedLayout(static_cast<const MultiHeadAttentionLayer&>(layer), n, nullptr,
                &bytes);
    return static_cast<int64_t>(bytes);
  };
  d.forward = &AttentionForward;
  d.backward = &AttentionBackward;
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(multi_head_attention, "multi_head_attention",
                               Attention());

}  // namespace
}  // namespace lockstep
