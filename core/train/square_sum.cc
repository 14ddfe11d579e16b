// Exact sums of squares (see square_sum.h).
#include "core/train/square_sum.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace lockstep {
namespace {

// A bin takes squares below 2^48, so 2^16 of them cannot overflow it.
constexpr int64_t kBinCapacity = int64_t{1} << 16;

}  // namespace

SquareSum::SquareSum() {
  std::memset(limbs_, 0, sizeof(limbs_));
  std::memset(bins_, 0, sizeof(bins_));
}

void SquareSum::AddAt(int bit, uint64_t v) {
  int limb = bit / 64;
  const int off = bit % 64;
  unsigned __int128 add = static_cast<unsigned __int128>(v) << off;
  while (add != 0 && limb < kLimbs) {
    const unsigned __int128 sum = static_cast<unsigned __int128>(limbs_[limb]) +
                                  static_cast<uint64_t>(add);
    limbs_[limb] = static_cast<uint64_t>(sum);
    add = (add >> 64) + (sum >> 64);
    ++limb;
  }
}

void SquareSum::Flush() {
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int e = 1; e < 255; ++e) {
      if (bins_[lane][e] == 0) continue;
      // A float with biased exponent e (1 for denormals) and integer
      // mantissa m is m * 2^(e - 150); its square m^2 * 2^(2e - 300), at
      // bit 2e - 2 of the integer whose bit 0 is 2^-298.
      AddAt(2 * e - 2, bins_[lane][e]);
      bins_[lane][e] = 0;
    }
  }
}

void SquareSum::Add(const float* x, int64_t n) {
  int64_t i = 0;
  while (i < n) {
    // Each lane takes every kLanes-th value: at most kBinCapacity per bin.
    const int64_t end = std::min(n, i + kLanes * kBinCapacity);
    for (; i < end; ++i) {
      uint32_t b;
      std::memcpy(&b, x + i, sizeof(b));
      uint32_t e = (b >> 23) & 0xffu;
      uint64_t m = b & 0x7fffffu;
      if (e == 255) {
        (m == 0 ? infinities_ : nans_) += 1;
        continue;
      }
      m |= static_cast<uint64_t>(e != 0) << 23;
      e += (e == 0);
      bins_[i & (kLanes - 1)][e] += m * m;
    }
    Flush();
  }
}

void SquareSum::Add(const SquareSum& other) {
  SquareSum o = other;
  o.Flush();
  Flush();
  for (int l = 0; l < kLimbs; ++l) AddAt(64 * l, o.limbs_[l]);
  infinities_ += o.infinities_;
  nans_ += o.nans_;
}

double SquareSum::Value() const {
  if (nans_ > 0) return std::numeric_limits<double>::quiet_NaN();
  if (infinities_ > 0) return std::numeric_limits<double>::infinity();
  SquareSum s = *this;
  s.Flush();
  double v = 0;
  for (int l = kLimbs - 1; l >= 0; --l) {
    v = v * 0x1p64 + static_cast<double>(s.limbs_[l]);
  }
  return std::ldexp(v, -298);
}

void SquareSum::ToWire(float* out) const {
  SquareSum s = *this;
  s.Flush();
  for (int l = 0; l < kLimbs; ++l) {
    for (int k = 0; k < 8; ++k) {
      out[l * 8 + k] = static_cast<float>((s.limbs_[l] >> (8 * k)) & 0xffu);
    }
  }
  out[80] = static_cast<float>(infinities_ > 0);
  out[81] = static_cast<float>(nans_ > 0);
}

SquareSum SquareSum::FromWire(const float* in) {
  SquareSum s;
  for (int l = 0; l < kLimbs; ++l) {
    for (int k = 0; k < 8; ++k) {
      // Each is a sum of integers below 256 over at most 2^16 ranks: an
      // exact float below 2^24.
      s.AddAt(64 * l + 8 * k, static_cast<uint64_t>(in[l * 8 + k]));
    }
  }
  s.infinities_ = in[80] > 0 ? 1 : 0;
  s.nans_ = in[81] > 0 ? 1 : 0;
  return s;
}

}  // namespace lockstep
