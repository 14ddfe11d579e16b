// Tensors on the wire (checkpoint slices): float32 bytes plus a CRC32C that
// the receiver checks before it trusts them. Used by worker and coordinator.
#ifndef LOCKSTEP_RPC_TENSOR_WIRE_H_
#define LOCKSTEP_RPC_TENSOR_WIRE_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "proto/cluster.pb.h"

namespace lockstep {

void TensorToWire(const std::string& name, bool optimizer, const Tensor& t,
                  lockstep::v1::TensorData* out);
// DataLoss naming the tensor when the bytes do not match the shape or the
// CRC; InvalidArgument for a negative dimension or a shape of more elements
// than int64 bytes can hold (checked before anything is allocated).
absl::StatusOr<Tensor> TensorFromWire(const lockstep::v1::TensorData& data);

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_TENSOR_WIRE_H_
