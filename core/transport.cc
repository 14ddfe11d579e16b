// Formatting helpers for the collective transport interface
// (core/transport.h).
#include "core/transport.h"

#include "absl/strings/str_cat.h"

namespace lockstep {

std::string TagToString(const CollectiveTag& tag) {
  return absl::StrCat("generation ", tag.generation, " step ", tag.step,
                      " bucket ", tag.bucket, " chunk ", tag.chunk);
}

std::string BucketName(int32_t bucket) {
  if (bucket == kLossBucket) return "the loss all-reduce";
  if (bucket == kEvalBucket) return "the evaluation all-reduce";
  if (bucket == kDrainBucket) return "the drain barrier";
  return absl::StrCat("gradient bucket ", bucket);
}

}  // namespace lockstep
