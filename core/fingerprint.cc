// XXH3-128 fingerprint of tensor bytes.
#include "core/fingerprint.h"

#include <xxhash.h>

#include <cstdio>

namespace lockstep {

std::string FingerprintTensors(const std::vector<const Tensor*>& tensors) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  for (const Tensor* t : tensors) {
    if (t->size() > 0) {
      XXH3_128bits_update(state, t->data(), sizeof(float) * t->size());
    }
  }
  XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return std::string(buf, 32);
}

std::string Fingerprint(const std::vector<Param*>& params) {
  std::vector<const Tensor*> tensors;
  tensors.reserve(params.size());
  for (const Param* p : params) tensors.push_back(&p->value);
  return FingerprintTensors(tensors);
}

}  // namespace lockstep
