// The safetensors file format (huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON header padded with spaces to
// a multiple of 8, then the raw little-endian tensor bytes. Files written here
// load in Python's `safetensors.numpy.load_file`, and files it writes (F32)
// load here.
#ifndef LOCKSTEP_CORE_CHECKPOINT_SAFETENSORS_H_
#define LOCKSTEP_CORE_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace lockstep {

// What WriteSafetensors wrote, for callers that record checksums.
struct SafetensorsWriteInfo {
  uint64_t file_bytes = 0;
  uint32_t file_crc32c = 0;  // of the whole file
  // CRC32C of each tensor's data bytes, in the order given to the writer.
  std::vector<uint32_t> tensor_crc32c;
};

// Builds the file image's header (length prefix + padded JSON) for `tensors`
// in the layout the Python library uses: "__metadata__" first (omitted when
// empty), then tensors sorted by name, data contiguous in that order, compact
// JSON. Exposed for tests.
absl::StatusOr<std::string> SafetensorsHeader(
    const std::vector<std::pair<std::string, const Tensor*>>& tensors,
    const std::map<std::string, std::string>& metadata);

// Writes `path` (created or truncated) and fsyncs it. Blocks. Names must be
// unique and non-empty (InvalidArgument). Errors name the path and the OS
// reason (`writing "/x/model.safetensors": No space left on device`,
// ResourceExhausted for ENOSPC). A partial file is left for the caller to
// remove (the caller usually writes into a temporary folder).
absl::Status WriteSafetensors(
    const std::string& path,
    const std::vector<std::pair<std::string, const Tensor*>>& tensors,
    const std::map<std::string, std::string>& metadata,
    SafetensorsWriteInfo* info = nullptr);

// A tensor ReadSafetensors left out (any_dtype): its name and dtype.
struct SkippedTensor {
  std::string name;
  std::string dtype;  // "I64", "BOOL", "F8_E4M3", ...
  bool operator==(const SkippedTensor& o) const {
    return name == o.name && dtype == o.dtype;
  }
};

struct SafetensorsReadOptions {
  // false (checkpoints, which lockstep writes): any dtype but F32 is
  // DataLoss. true (weights from elsewhere): F64, F16 and BF16 tensors are
  // converted to fp32, and integer, bool and fp8 ones (Hugging Face's
  // position_ids buffer) are left out, put in `skipped`.
  bool any_dtype = false;
  std::vector<SkippedTensor>* skipped = nullptr;
};

// Reads a whole file. Tensors come back in file (data offset) order.
// DataLoss naming the file when it is truncated, its header length runs past
// the end, the header JSON is malformed, offsets leave gaps, overlap or run
// out of range, a shape disagrees with its byte count, or a dtype is unknown
// (or not F32, unless options.any_dtype).
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadSafetensors(
    const std::string& path,
    std::map<std::string, std::string>* metadata = nullptr,
    const SafetensorsReadOptions& options = {});

// Same over a file image already in memory; `name` is used in errors.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ParseSafetensors(
    const std::string& bytes, const std::string& name,
    std::map<std::string, std::string>* metadata = nullptr,
    const SafetensorsReadOptions& options = {});

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_CHECKPOINT_SAFETENSORS_H_
