// Tensor <-> TensorData with CRC32C verification.
#include "rpc/tensor_wire.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "base/crc32c.h"

namespace lockstep {

void TensorToWire(const std::string& name, bool optimizer, const Tensor& t,
                  lockstep::v1::TensorData* out) {
  out->set_name(name);
  out->set_optimizer(optimizer);
  out->clear_shape();
  for (int64_t d : t.shape()) out->add_shape(d);
  out->set_offset(0);  // whole (a part's sender sets both after)
  out->clear_whole_shape();
  out->mutable_data()->assign(reinterpret_cast<const char*>(t.data()),
                              sizeof(float) * t.size());
  out->set_crc32c(Crc32c(out->data().data(), out->data().size()));
}

absl::StatusOr<Tensor> TensorFromWire(const lockstep::v1::TensorData& data) {
  // A peer's shape may claim more elements than int64 counts: the product
  // would wrap (undefined behaviour), and a wrapped count can match a short
  // payload and then size the allocation. So the product of the nonzero
  // dimensions is bounded as it grows, by the most floats whose byte count
  // fits int64; that also keeps NumElements, which multiplies in order,
  // from overflowing on a shape with a zero dimension.
  constexpr int64_t kMaxElements =
      std::numeric_limits<int64_t>::max() / static_cast<int64_t>(sizeof(float));
  Shape shape;
  for (int64_t d : data.shape()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tensor %s: negative dimension %d", data.name(), d));
    }
    shape.push_back(d);
  }
  int64_t nonzero = 1;
  for (int64_t d : shape) {
    if (d == 0) continue;
    if (nonzero > kMaxElements / d) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor %s: shape %s has more than %d elements", data.name(),
          ShapeToString(shape), kMaxElements));
    }
    nonzero *= d;
  }
  const int64_t n = NumElements(shape);
  if (static_cast<int64_t>(data.data().size()) !=
      n * static_cast<int64_t>(sizeof(float))) {
    return absl::DataLossError(absl::StrFormat(
        "tensor %s: %d bytes for shape %s (%d expected)", data.name(),
        data.data().size(), ShapeToString(shape), n * sizeof(float)));
  }
  const uint32_t crc = Crc32c(data.data().data(), data.data().size());
  if (crc != data.crc32c()) {
    return absl::DataLossError(absl::StrFormat(
        "tensor %s: CRC32C %08x does not match the sender's %08x (damaged "
        "in transit)",
        data.name(), crc, data.crc32c()));
  }
  Tensor t(shape);
  if (n > 0) std::memcpy(t.data(), data.data().data(), sizeof(float) * n);
  return t;
}

}  // namespace lockstep
