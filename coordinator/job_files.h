// A job's files on the coordinator's storage served to clients that do not
// mount it (JobService.ListJobFiles / ReadJobFile: `lockstep pull`, the
// Python client): paths confined to the job's folder, chunks CRC-checked,
// reads resumable at an offset. Stateless: every call opens what it reads.
#ifndef LOCKSTEP_COORDINATOR_JOB_FILES_H_
#define LOCKSTEP_COORDINATOR_JOB_FILES_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/jobs.pb.h"

namespace lockstep {

// The largest chunk ReadJobFile sends (gRPC's default message limit is
// 4 MiB; 1 MiB keeps a retried chunk cheap).
inline constexpr int64_t kJobFileChunkBytes = int64_t{1} << 20;

// STORAGE/coordinator/storage_id: a random identity of the storage, made
// on first use. A client that reads the same id through its own file
// system sees the coordinator's storage and reads files directly.
absl::StatusOr<std::string> LoadOrCreateStorageId(const std::string& storage);

// Moves the job's results (checkpoints/, summaries/, result.json) into
// `job_dir`/previous-<unix seconds>/ so a restarted job begins with none
// and nothing is deleted; returns that folder ("" when there was nothing).
absl::StatusOr<std::string> MoveJobResultsAside(const std::string& job_dir);

// Every regular file under `job_dir` (relative '/'-separated paths, sorted),
// or under its folder `prefix` ("checkpoints/step-00000100/"). Names that
// begin with '.' (a checkpoint still being written) and symbolic links are
// left out. InvalidArgument for a prefix that leaves the folder.
absl::StatusOr<lockstep::v1::ListJobFilesResponse> ListJobFiles(
    const std::string& job_dir, const std::string& prefix);

// Sends `path` (relative to `job_dir`) from `offset` through `write`, in
// chunks of at most `chunk_bytes`; the last chunk (also for an empty file
// or an offset at its end) carries the CRC-32 of the whole file. Blocks
// until sent; stops early with Cancelled when `write` returns false (the
// client left). InvalidArgument for a path that is not a plain relative
// path inside the folder or an offset past the end, NotFound for a missing
// file, FailedPrecondition when `expect_size` (> 0) is not the file's size.
absl::Status ReadJobFile(
    const std::string& job_dir, const std::string& path, int64_t offset,
    int64_t expect_size, int64_t chunk_bytes,
    const std::function<bool(const lockstep::v1::FileChunk&)>& write);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_FILES_H_
