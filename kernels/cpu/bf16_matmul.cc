// oneDNN's matmul primitive over strided row-major matrices (see
// bf16_matmul.h). Each calling thread keeps its own engine, stream and
// primitives by shape, and runs them on itself alone: oneDNN's OpenMP
// threads stay at one, so the Gemm split over our pool is the only
// parallelism (as OpenBLAS's own threads are kept off in gemm.cc).
#include "kernels/cpu/bf16_matmul.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace lockstep {
namespace {

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, uint32_t, uint32_t>;
// Primitives a thread keeps; past this many shapes it starts over.
constexpr size_t kMaxPrimitives = 512;

// A product's primitive and its operands' descriptions (shape, strides).
struct Product {
  dnnl::matmul matmul;
  dnnl::memory::desc a, b, c;
};

struct ThreadState {
  ThreadState() : engine(dnnl::engine::kind::cpu, 0), stream(engine) {
    omp_set_num_threads(1);  // this thread's oneDNN calls run on it alone
  }
  dnnl::engine engine;
  dnnl::stream stream;
  std::map<Key, Product> products;
  std::string impl;  // of the last primitive made
};

ThreadState& State() {
  thread_local ThreadState state;
  return state;
}

// The product of this shape, strides and scales, made on first use.
Product& Find(ThreadState& t, bool trans_a, bool trans_b, int64_t m, int64_t n,
              int64_t k, float alpha, int64_t lda, int64_t ldb, float beta,
              int64_t ldc) {
  const Key key{trans_a, trans_b, m,   n,           k,
                lda,     ldb,     ldc, Bits(alpha), Bits(beta)};
  auto it = t.products.find(key);
  if (it != t.products.end()) return it->second;
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // op(A) is m x k: stored k x m (strides 1, lda) when transposed.
  Product p;
  p.a = dnnl::memory::desc(dims{m, k}, dt::bf16,
                           trans_a ? dims{1, lda} : dims{lda, 1});
  p.b = dnnl::memory::desc(dims{k, n}, dt::bf16,
                           trans_b ? dims{1, ldb} : dims{ldb, 1});
  p.c = dnnl::memory::desc(dims{m, n}, dt::f32, dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), attr,
                                        t.engine);
  t.impl = pd.impl_info_str();
  p.matmul = dnnl::matmul(pd);
  if (t.products.size() >= kMaxPrimitives) t.products.clear();
  return t.products.emplace(key, std::move(p)).first->second;
}

// Bf16Matmul; oneDNN's error into *error (when not null) on false.
bool Run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
         float alpha, const uint16_t* a, int64_t lda, const uint16_t* b,
         int64_t ldb, float beta, float* c, int64_t ldc, std::string* error) {
  if (m <= 0 || n <= 0 || k <= 0) return false;
  try {
    ThreadState& t = State();
    Product& p = Find(t, trans_a, trans_b, m, n, k, alpha, lda, ldb, beta, ldc);
    dnnl::memory am(p.a, t.engine, const_cast<uint16_t*>(a));
    dnnl::memory bm(p.b, t.engine, const_cast<uint16_t*>(b));
    dnnl::memory cm(p.c, t.engine, c);
    p.matmul.execute(
        t.stream,
        {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    t.stream.wait();
  } catch (const std::exception& e) {
    if (error != nullptr) *error = e.what();
    return false;
  }
  return true;
}

struct Probe {
  bool available = false;
  std::string description;
};

// One 2 x 3 x 4 product: which implementation oneDNN picks here, and
// whether its result is the exact one.
Probe RunProbe() {
  Probe p;
  const char* env = std::getenv("LOCKSTEP_BF16_GEMM");
  if (env != nullptr && std::string(env) == "software") {
    p.description =
        "converted in software (LOCKSTEP_BF16_GEMM=software): bfloat16-"
        "rounded inputs multiplied in float32";
    return p;
  }
  // Small integers: exact in bfloat16 and in the float32 sums.
  const float af[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const float bf[12] = {1, 0, 2, 1, 1, 0, 0, 3, 1, 2, 2, 2};
  uint16_t a[8], b[12];
  for (int i = 0; i < 8; ++i) a[i] = static_cast<uint16_t>(Bits(af[i]) >> 16);
  for (int i = 0; i < 12; ++i) b[i] = static_cast<uint16_t>(Bits(bf[i]) >> 16);
  float c[6] = {0};
  std::string error;
  if (!Run(false, false, 2, 3, 4, 1.0f, a, 4, b, 3, 0.0f, c, 3, &error)) {
    p.description =
        "converted in software: oneDNN refused a bfloat16 "
        "matmul (" +
        error + ")";
    return p;
  }
  const std::string impl = State().impl;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      float want = 0;
      for (int q = 0; q < 4; ++q) want += af[i * 4 + q] * bf[q * 3 + j];
      if (c[i * 3 + j] != want) {
        p.description = "converted in software: oneDNN's bfloat16 matmul (" +
                        impl + ") gave a wrong probe product";
        return p;
      }
    }
  }
  if (impl.find("bf16") == std::string::npos &&
      impl.find("amx") == std::string::npos) {
    p.description =
        "converted in software: this CPU has no bfloat16 "
        "instructions (oneDNN would emulate them: " +
        impl + "), so bf16 is no faster than fp32 here";
    return p;
  }
  p.available = true;
  p.description = "oneDNN " + impl;
  return p;
}

const Probe& TheProbe() {
  static const Probe probe = RunProbe();
  return probe;
}

}  // namespace

bool Bf16MatmulAvailable() { return TheProbe().available; }

std::string Bf16MatmulDescription() { return TheProbe().description; }

bool Bf16Matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                float alpha, const uint16_t* a, int64_t lda, const uint16_t* b,
                int64_t ldb, float beta, float* c, int64_t ldc) {
  return Run(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
             nullptr);
}

}  // namespace lockstep
