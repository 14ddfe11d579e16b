// safetensors files (a checkpoint's model.safetensors and
// optimizer.safetensors; weights from elsewhere): any bytes parse, or are
// refused with a message, in both reader modes (checkpoints: F32 only;
// any_dtype: other floats converted to fp32, the rest skipped). A file the
// F32-only mode accepts reads the same in any_dtype mode. A parsed file
// written back with WriteSafetensors reads again to the same names, shapes,
// float bytes and metadata, and the write's SafetensorsWriteInfo (what a
// checkpoint commit records in state.json) matches the file written: its
// size, its CRC32C and each tensor's. The only tensors the writer may refuse
// are those it documents as invalid: an empty name, which the reader accepts.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "core/checkpoint/safetensors.h"
#include "core/tensor.h"
#include "tests/fuzz/fuzz_util.h"

namespace lockstep {
namespace {

using Tensors = std::vector<std::pair<std::string, Tensor>>;

// A tensor's shape and raw float bytes, by name: zero-size tensors share a
// data offset, so the order they come back in is not fixed.
using ByName = std::map<std::string, std::pair<Shape, std::string>>;

ByName Index(const Tensors& tensors) {
  ByName out;
  for (const auto& [name, t] : tensors) {
    std::string bytes(reinterpret_cast<const char*>(t.data()),
                      sizeof(float) * static_cast<size_t>(t.size()));
    // Names are the keys of one JSON object: never two alike.
    FUZZ_CHECK(
        out.emplace(name, std::make_pair(t.shape(), std::move(bytes))).second);
  }
  return out;
}

// One path per process, rewritten by every round trip.
const std::string& RoundTripPath() {
  static const std::string path = fuzz::ScratchDir() + "/fuzz_" +
                                  std::to_string(static_cast<long>(getpid())) +
                                  "_round_trip.safetensors";
  return path;
}

// Writes `tensors` and `metadata` back and checks that they read again
// unchanged.
void CheckRoundTrip(const Tensors& tensors,
                    const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, const Tensor*>> borrowed;
  bool empty_name = false;
  for (const auto& [name, t] : tensors) {
    borrowed.emplace_back(name, &t);
    empty_name |= name.empty();
  }
  const std::string& path = RoundTripPath();
  SafetensorsWriteInfo info;
  const absl::Status written =
      WriteSafetensors(path, borrowed, metadata, &info);
  fuzz::CheckRefusal(written);
  if (empty_name) {
    FUZZ_CHECK(absl::IsInvalidArgument(written));
    return;
  }
  FUZZ_CHECK(written.ok());

  absl::StatusOr<std::string> file = ReadFile(path);
  FUZZ_CHECK(file.ok());
  FUZZ_CHECK(info.file_bytes == file->size());
  FUZZ_CHECK(info.file_crc32c == Crc32c(file->data(), file->size()));
  FUZZ_CHECK(info.tensor_crc32c.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    FUZZ_CHECK(info.tensor_crc32c[i] ==
               Crc32c(t.data(), sizeof(float) * static_cast<size_t>(t.size())));
  }

  std::map<std::string, std::string> metadata_again;
  absl::StatusOr<Tensors> again =
      ParseSafetensors(*file, path, &metadata_again);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(Index(*again) == Index(tensors));
  FUZZ_CHECK(metadata_again == metadata);
}

}  // namespace
}  // namespace lockstep

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const std::string bytes(reinterpret_cast<const char*>(data), size);

  std::map<std::string, std::string> metadata;
  absl::StatusOr<Tensors> f32 = ParseSafetensors(bytes, "fuzz", &metadata);
  fuzz::CheckRefusal(f32.status());

  SafetensorsReadOptions any;
  any.any_dtype = true;
  std::vector<SkippedTensor> skipped;
  any.skipped = &skipped;
  std::map<std::string, std::string> any_metadata;
  absl::StatusOr<Tensors> converted =
      ParseSafetensors(bytes, "fuzz", &any_metadata, any);
  fuzz::CheckRefusal(converted.status());

  if (f32.ok()) {
    // All F32: any_dtype has nothing to convert or skip.
    FUZZ_CHECK(converted.ok());
    FUZZ_CHECK(skipped.empty());
    FUZZ_CHECK(Index(*converted) == Index(*f32));
    FUZZ_CHECK(any_metadata == metadata);
    CheckRoundTrip(*f32, metadata);
  } else if (converted.ok()) {
    // A skipped tensor is named once and is not also returned.
    const ByName kept = Index(*converted);
    std::vector<std::string> sorted;
    for (const SkippedTensor& t : skipped) {
      FUZZ_CHECK(kept.count(t.name) == 0);
      // Named with the dtype it has: one the reader does not convert.
      FUZZ_CHECK(!t.dtype.empty() && t.dtype != "F32" && t.dtype != "F16" &&
                 t.dtype != "BF16" && t.dtype != "F64");
      sorted.push_back(t.name);
    }
    std::sort(sorted.begin(), sorted.end());
    FUZZ_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) ==
               sorted.end());
    CheckRoundTrip(*converted, any_metadata);
  }
  return 0;
}
