// The text-model layers' device passes (core/layers/transformer_cuda.cc
// over kernels/cuda/transformer.h) against their CPU passes on random
// inputs: outputs, input gradients (overwritten) and parameter gradients
// (accumulated onto what was there), bit for bit where the sums run in the
// CPU's order, and repeatable bit for bit from run to run. Skips without a
// GPU.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/layers/device_layer.h"
#include "core/layers/layer.h"
#include "core/layers/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layers/device_context.h"
#include "kernels/cuda/transformer.h"

namespace lockstep {
namespace cuda {
namespace {

using lockstep::testing::BuildLayer;
using lockstep::testing::RandomVector;
using Vectors = std::vector<std::vector<float>>;

struct Pass {
  std::vector<float> y;
  Vectors dx;  // per input; empty when not asked for
  Vectors dw;  // per parameter
};

void Randomize(Layer& l, uint32_t seed) {
  for (Param* p : l.params()) {
    p->value.values() = RandomVector(p->value.size(), seed++, -0.5f, 0.5f);
  }
}

// The CPU's pass, parameter gradients from zero.
Pass RunCpu(Layer& l, int64_t n, const PassContext& ctx, const Vectors& x,
            const std::vector<bool>& want_dx, std::vector<float> dy) {
  Pass out;
  out.y.resize(n * l.output_size());
  out.dx.resize(x.size());
  LayerIO io;
  io.n = n;
  for (const auto& v : x) io.x.push_back(v.data());
  io.y = out.y.data();
  for (Param* p : l.params()) {
    p->grad.SetZero();
    io.w.push_back(p->value.data());
    io.dw.push_back(p->grad.data());
  }
  l.Forward(io, ctx);
  for (size_t i = 0; i < x.size(); ++i) {
    if (want_dx[i]) out.dx[i].assign(x[i].size(), 123.0f);
    io.dx.push_back(want_dx[i] ? out.dx[i].data() : nullptr);
  }
  io.dy = dy.data();
  l.Backward(io, ctx);
  for (Param* p : l.params()) out.dw.push_back(p->grad.values());
  return out;
}

// The registered device pass, parameter gradients from `dw0`.
Pass RunGpu(Layer& l, int64_t n, const PassContext& ctx, const Vectors& x,
            const std::vector<bool>& want_dx, const std::vector<float>& dy,
            const Vectors& dw0) {
  Pass out;
  const DeviceLayer* impl = FindDeviceLayer(l.type());
  if (impl == nullptr) {
    ADD_FAILURE() << "no device layer for " << l.type()
                  << " (is //core/layers:cuda linked?)";
    return out;
  }
  std::unique_ptr<CachingAllocator> gemm_scratch = NewDeviceAllocator(0);
  absl::StatusOr<CublasHandle> cublas =
      CublasHandle::Create(gemm_scratch.get());
  if (!cublas.ok()) {
    ADD_FAILURE() << cublas.status();
    return out;
  }
  std::unique_ptr<DeviceArray<char>> workspace;
  DeviceContext dc;
  dc.cublas = &*cublas;
  dc.workspace = [&workspace](size_t bytes) -> absl::StatusOr<void*> {
    if (workspace == nullptr || workspace->bytes() < bytes) {
      workspace = std::make_unique<DeviceArray<char>>(bytes);
    }
    return static_cast<void*>(workspace->get());
  };
  std::vector<std::unique_ptr<DeviceArray<float>>> keep;
  auto device = [&keep](const std::vector<float>& v) {
    keep.push_back(std::make_unique<DeviceArray<float>>(v));
    return keep.back()->get();
  };
  LayerIO io;
  io.n = n;
  for (const auto& v : x) io.x.push_back(device(v));
  DeviceArray<float> y(n * l.output_size());
  io.y = y.get();
  std::vector<float*> dw_dev;
  const std::vector<Param*> params = l.params();
  for (size_t i = 0; i < params.size(); ++i) {
    io.w.push_back(device(params[i]->value.values()));
    dw_dev.push_back(device(dw0[i]));
    io.dw.push_back(dw_dev.back());
  }
  const int64_t scratch =
      impl->scratch_bytes ? impl->scratch_bytes(l, n) : int64_t{0};
  DeviceArray<char> scratch_dev(static_cast<size_t>(scratch > 0 ? scratch : 1));
  io.scratch = scratch_dev.get();
  std::unique_ptr<DeviceLayerState> state =
      impl->make_state ? impl->make_state(l) : nullptr;
  absl::Status s = impl->forward(l, state.get(), io, ctx, dc);
  EXPECT_TRUE(s.ok()) << s;
  // Input gradients start as garbage: they must be overwritten.
  std::vector<std::unique_ptr<DeviceArray<float>>> dx_dev(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (want_dx[i]) {
      dx_dev[i] = std::make_unique<DeviceArray<float>>(
          std::vector<float>(x[i].size(), 123.0f));
    }
    io.dx.push_back(want_dx[i] ? dx_dev[i]->get() : nullptr);
  }
  io.dy = device(dy);
  s = impl->backward(l, state.get(), io, ctx, dc);
  EXPECT_TRUE(s.ok()) << s;
  out.y = y.ToHost();
  for (const auto& d : dx_dev) {
    out.dx.push_back(d != nullptr ? d->ToHost() : std::vector<float>());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<float> g(dw0[i].size());
    EXPECT_EQ(cudaMemcpy(g.data(), dw_dev[i], g.size() * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    out.dw.push_back(std::move(g));
  }
  return out;
}

// |got - want| <= tol (1 + |want|); tol 0 asks for equal bits.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (tol == 0) {
      ASSERT_EQ(got[i], want[i]) << what << "[" << i << "]";
    } else {
      ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i])))
          << what << "[" << i << "]";
    }
  }
}

// The device pass against the CPU's, from random parameter gradients (they
// must accumulate) or, with tol 0, from zeros so the sums can be the CPU's
// exactly; then a second device pass must repeat the first bit for bit.
void Compare(Layer& l, int64_t n, const PassContext& ctx, const Vectors& x,
             const std::vector<bool>& want_dx, double tol) {
  SCOPED_TRACE(l.type() + " n=" + std::to_string(n));
  Randomize(l, 5);
  const std::vector<float> dy = RandomVector(n * l.output_size(), 6);
  const Pass cpu = RunCpu(l, n, ctx, x, want_dx, dy);
  Vectors dw0;
  uint32_t seed = 40;
  for (Param* p : l.params()) {
    dw0.push_back(tol == 0 ? std::vector<float>(p->value.size(), 0.0f)
                           : RandomVector(p->value.size(), seed++));
  }
  const Pass gpu = RunGpu(l, n, ctx, x, want_dx, dy, dw0);
  ASSERT_EQ(gpu.dw.size(), dw0.size());
  ExpectClose(gpu.y, cpu.y, tol, "y");
  for (size_t i = 0; i < x.size(); ++i) {
    ExpectClose(gpu.dx[i], cpu.dx[i], tol, "dx" + std::to_string(i));
  }
  for (size_t i = 0; i < dw0.size(); ++i) {
    std::vector<float> want = cpu.dw[i];
    for (size_t j = 0; j < want.size(); ++j) want[j] += dw0[i][j];
    ExpectClose(gpu.dw[i], want, tol, l.params()[i]->name);
  }
  const Pass again = RunGpu(l, n, ctx, x, want_dx, dy, dw0);
  ExpectClose(again.y, gpu.y, 0, "repeated y");
  for (size_t i = 0; i < dw0.size(); ++i) {
    ExpectClose(again.dw[i], gpu.dw[i], 0, "repeated dw");
  }
}

// Integer values in [lo, hi) as floats.
std::vector<float> Ids(int64_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(lo, hi - 1);
  std::vector<float> v(n);
  for (float& f : v) f = static_cast<float>(d(gen));
  return v;
}

TEST(TransformerCudaTest, AddSumsInOrder) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // 10 inputs: more than one kernel's worth of pointers.
  for (int k : {2, 10}) {
    std::vector<Shape> shapes(k, Shape{4, 6});
    std::string inputs;
    for (int i = 0; i < k; ++i) {
      inputs += (i > 0 ? ", \"in" : "\"in") + std::to_string(i) + "\"";
    }
    std::unique_ptr<Layer> l = BuildLayer(
        R"({"type": "add", "inputs": [)" + inputs + "]}", shapes);
    ASSERT_NE(l, nullptr);
    Vectors x;
    for (int i = 0; i < k; ++i) x.push_back(RandomVector(3 * 24, 10 + i));
    Compare(*l, 3, PassContext(), x, std::vector<bool>(k, true), 0);
  }
}

TEST(TransformerCudaTest, Gelu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::unique_ptr<Layer> l = BuildLayer(R"({"type": "gelu"})", {{5, 7}});
  ASSERT_NE(l, nullptr);
  Compare(*l, 3, PassContext(), {RandomVector(105, 3, -4, 4)}, {true}, 2e-6);
}

TEST(TransformerCudaTest, EmbeddingSumsDuplicatesInTheCpuOrder) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "embedding", "input_dim": 7, "output_dim": 40})", {{32}});
  ASSERT_NE(l, nullptr);
  // Many repeats of 7 ids, and values that are no id (zero rows, no
  // gradient).
  std::vector<float> ids = Ids(16 * 32, 0, 7, 4);
  ids[3] = 7.0f;
  ids[40] = -1.0f;
  ids[77] = 2.5f;
  ids[200] = 1e9f;
  for (bool want_dx : {false, true}) {
    Compare(*l, 16, PassContext(), {ids}, {want_dx}, 0);
  }
  Compare(*l, 16, PassContext(), {ids}, {true}, 1e-6);  // accumulates
  Compare(*l, 0, PassContext(), Vectors{std::vector<float>()}, {true}, 0);
  // A large vocabulary: more key bits.
  std::unique_ptr<Layer> big = BuildLayer(
      R"({"type": "embedding", "input_dim": 100000, "output_dim": 8})", {{64}});
  ASSERT_NE(big, nullptr);
  std::vector<float> many = Ids(8 * 64, 0, 100000, 5);
  for (int i = 0; i < 100; ++i) many[i * 5] = 99999.0f;
  Compare(*big, 8, PassContext(), {many}, {false}, 0);
  // A padding-like id in 4 of 5 lookups (a run of thousands: many tiles of
  // loads, then a remainder), still the CPU's order, bit for bit.
  std::unique_ptr<Layer> padded = BuildLayer(
      R"({"type": "embedding", "input_dim": 30, "output_dim": 16})", {{128}});
  ASSERT_NE(padded, nullptr);
  std::vector<float> pads = Ids(64 * 128, 0, 30, 6);
  for (size_t i = 0; i < pads.size(); ++i) {
    if (i % 5 != 0) pads[i] = 0.0f;
  }
  Compare(*padded, 64, PassContext(), {pads}, {false}, 0);
}

TEST(TransformerCudaTest, PositionEmbedding) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "position_embedding", "max_length": 9, "output_dim": 4})",
      {{6}});
  ASSERT_NE(l, nullptr);
  Compare(*l, 5, PassContext(), {Ids(30, 0, 50, 6)}, {true}, 0);
  Compare(*l, 5, PassContext(), {Ids(30, 0, 50, 6)}, {false}, 1e-6);
}

TEST(TransformerCudaTest, LayerNorm) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // Narrow rows, then rows wider than a block over several 64-row blocks.
  struct Case {
    Shape shape;
    int64_t n;
  };
  for (const Case& c :
       {Case{{5, 40}, 3}, Case{{50, 300}, 3}, Case{{4, 8}, 0}}) {
    std::unique_ptr<Layer> l =
        BuildLayer(R"({"type": "layer_norm", "epsilon": 1e-5})", {c.shape});
    ASSERT_NE(l, nullptr);
    const int64_t size = c.n * NumElements(c.shape);
    for (bool want_dx : {true, false}) {
      Compare(*l, c.n, PassContext(), {RandomVector(size, 7, -2, 3)}, {want_dx},
              2e-5);
    }
  }
}

TEST(TransformerCudaTest, GatherPositions) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::unique_ptr<Layer> l =
      BuildLayer(R"({"type": "gather_positions", "inputs": ["in0", "in1"]})",
                 {{8, 6}, {5}});
  ASSERT_NE(l, nullptr);
  // Repeats, padding (-1), out of range and non-integer positions.
  const std::vector<float> p = {1, 1, 7, -1, 0, 3, 8, 2.5f, 3,  3,
                                5, 5, 5, 0,  1, 2, 6, 4,    -3, 7};
  const std::vector<float> x = RandomVector(4 * 48, 8);
  Compare(*l, 4, PassContext(), {x, p}, {true, true}, 0);
  Compare(*l, 4, PassContext(), {x, p}, {true, false}, 0);
}

TEST(TransformerCudaTest, AttentionMatchesTheCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // Sample 1 padded after two tokens; sample 2 fully padded (all-zero
  // probabilities).
  const int len = 7;
  std::vector<float> mask(4 * len, 1.0f);
  for (int j = 2; j < len; ++j) mask[len + j] = 0.0f;
  for (int j = 0; j < len; ++j) mask[2 * len + j] = 0.0f;
  PassContext train;
  train.training = true;
  train.dropout_seed = 1234;
  for (ParamNaming naming : {ParamNaming::kKeras, ParamNaming::kTorch}) {
    std::unique_ptr<Layer> l = BuildLayer(
        R"({"type": "multi_head_attention", "num_heads": 3, "dropout": 0.2})",
        {{len, 12}, {len}}, naming);
    ASSERT_NE(l, nullptr);
    // n = 4 loops over the 3 heads; n = 2 loops over the samples.
    for (int64_t n : {4, 2, 0}) {
      const std::vector<float> x = RandomVector(n * len * 12, 9);
      const std::vector<float> m(mask.begin(), mask.begin() + n * len);
      for (const PassContext& ctx : {PassContext(), train}) {
        Compare(*l, n, ctx, {x, m}, {true, true}, 2e-4);
      }
    }
  }
  // No mask, key_dim != width / heads, no biases, no input gradient.
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "multi_head_attention", "num_heads": 3, "key_dim": 5,
          "use_bias": false, "dropout": 0.5})",
      {{9, 8}});
  ASSERT_NE(l, nullptr);
  Compare(*l, 3, train, {RandomVector(3 * 72, 10)}, {false}, 2e-4);
}

TEST(GemmStridedBatchedTest, MatchesCpuGemmPerBatch) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::unique_ptr<CachingAllocator> gemm_scratch = NewDeviceAllocator(0);
  absl::StatusOr<CublasHandle> handle =
      CublasHandle::Create(gemm_scratch.get());
  ASSERT_TRUE(handle.ok()) << handle.status();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t m = 5, n = 6, k = 4, batch = 3, pad = 2;
      const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad,
                    ldc = n + pad;
      const int64_t sa = (ta ? k : m) * lda + 1, sb = (tb ? n : k) * ldb + 3,
                    sc = m * ldc + 5;
      const std::vector<float> a = RandomVector(batch * sa, 1);
      const std::vector<float> b = RandomVector(batch * sb, 2);
      const std::vector<float> c0 = RandomVector(batch * sc, 3);
      std::vector<float> want = c0;
      for (int64_t i = 0; i < batch; ++i) {
        lockstep::Gemm(ta, tb, m, n, k, 0.5f, a.data() + i * sa, lda,
                       b.data() + i * sb, ldb, 0.25f, want.data() + i * sc,
                       ldc);
      }
      DeviceArray<float> da(a), db(b), dc(c0);
      const absl::Status s = GemmStridedBatched(
          *handle, nullptr, GemmOptions(), ta, tb, m, n, k, 0.5f, da.get(), lda,
          sa, db.get(), ldb, sb, 0.25f, dc.get(), ldc, sc, batch);
      ASSERT_TRUE(s.ok()) << s;
      ExpectClose(dc.ToHost(), want, 1e-5, "c");
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
