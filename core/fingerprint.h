// A short, stable fingerprint of model weights: XXH3-128 over the float bytes
// of every tensor in order. Equal fingerprints mean bit-identical weights
// (used to check replicas agree and that a resumed run matches).
#ifndef LOCKSTEP_CORE_FINGERPRINT_H_
#define LOCKSTEP_CORE_FINGERPRINT_H_

#include <string>
#include <vector>

#include "core/tensor.h"

namespace lockstep {

// 32 lowercase hex digits (high 64 bits first) over params[i]->value bytes.
std::string Fingerprint(const std::vector<Param*>& params);
// Same over arbitrary tensors. Shapes are not hashed, only the data bytes in
// order, so Fingerprint(params) == FingerprintTensors(their values).
std::string FingerprintTensors(const std::vector<const Tensor*>& tensors);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_FINGERPRINT_H_
