// The sum of the squares of float32 values, exact. A float's square is an
// integer below 2^48 times a power of two, so the squares are added into
// integer bins by exponent and carried into one 640-bit integer: the sum
// does not depend on the order of the values nor on how they are split
// between ranks. The global gradient norm (optimizer.global_clipnorm) is
// this sum's square root, so a sharded optimizer (cluster.shard), whose
// ranks each hold a part of the gradients, clips with the same bits as one
// that holds them all.
#ifndef LOCKSTEP_CORE_TRAIN_SQUARE_SUM_H_
#define LOCKSTEP_CORE_TRAIN_SQUARE_SUM_H_

#include <cstdint>

namespace lockstep {

class SquareSum {
 public:
  // Floats carrying the sum over ranks (ToWire, FromWire): 80 bytes of
  // the integer (one per float, each < 256) and the non-finite counts.
  static constexpr int kWireFloats = 82;

  SquareSum();

  // Adds x[0..n)^2. An infinity makes the sum +inf, a NaN NaN.
  void Add(const float* x, int64_t n);
  // Adds another sum (exact).
  void Add(const SquareSum& other);
  // The sum as a double: the exact integer rounded (deterministically:
  // the same exact sum always gives the same bits).
  double Value() const;

  // Writes kWireFloats floats whose element-wise float sum over up to 2^16
  // ranks, in any order, is exact (GatherSum), and reads such a sum back.
  void ToWire(float* out) const;
  static SquareSum FromWire(const float* in);

 private:
  static constexpr int kLimbs = 10;  // bit 0 is 2^-298 (a denormal's square)
  static constexpr int kLanes = 4;   // bin sets, breaking the add chains
  void Flush();                      // bins into limbs_ (empty after Add)
  void AddAt(int bit, uint64_t v);   // limbs_ += v * 2^bit

  uint64_t limbs_[kLimbs];
  uint64_t bins_[kLanes][256];
  int64_t infinities_ = 0, nans_ = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_SQUARE_SUM_H_
