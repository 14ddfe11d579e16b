// The sample audit's records and its file (see sample_audit.h).
#include "core/audit/sample_audit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/crc32c.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/json_util.h"

namespace lockstep {

using Json = nlohmann::json;

void PlanPositions(const ShardPlan& plan, int64_t epoch, int64_t step_in_epoch,
                   const std::vector<int64_t>& replicas,
                   std::vector<std::pair<int64_t, int64_t>>* positions,
                   std::vector<int64_t>* indices) {
  for (int64_t r : replicas) {
    const auto span = plan.ReplicaPositions(epoch, step_in_epoch, r);
    if (span.first < span.second) {
      if (!positions->empty() && positions->back().second == span.first) {
        positions->back().second = span.second;
      } else {
        positions->push_back(span);
      }
    }
    if (indices != nullptr) {
      const std::vector<int64_t> idx =
          plan.ReplicaSlice(epoch, step_in_epoch, r);
      indices->insert(indices->end(), idx.begin(), idx.end());
    }
  }
}

uint32_t IndicesHash(const std::vector<int64_t>& indices) {
  uint32_t crc = 0;
  for (int64_t i : indices) {
    unsigned char b[8];
    for (int k = 0; k < 8; ++k) {
      b[k] = static_cast<unsigned char>(static_cast<uint64_t>(i) >> (8 * k));
    }
    crc = Crc32cExtend(crc, b, 8);
  }
  return crc;
}

SampleRecord RecordOf(const ShardPlan& plan, const Batch& batch,
                      const std::vector<int64_t>& replicas) {
  SampleRecord r;
  r.step = batch.global_step;
  r.epoch = batch.epoch;
  r.epoch_samples = plan.num_samples();
  PlanPositions(plan, batch.epoch, batch.step_in_epoch, replicas, &r.positions,
                nullptr);
  r.hash = IndicesHash(batch.indices);
  r.count = static_cast<int64_t>(batch.indices.size());
  r.replicas = replicas;
  r.world_replicas = plan.total_replicas();
  return r;
}

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(
    const std::string& path, const JobSpec& spec) {
  RETURN_IF_ERROR(MakeDirs(Dirname(path)));
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus("cannot open", path, errno);
  std::unique_ptr<AuditLog> log(new AuditLog(path, fd));
  if (::lseek(fd, 0, SEEK_END) == 0) {
    Json h;
    h["kind"] = "header";
    h["job"] = spec.name;
    h["seed"] = spec.seed;
    h["shuffle"] = spec.data.shuffle;
    h["global_batch"] = spec.global_batch_size();
    RETURN_IF_ERROR(log->Line(DumpJson(h)));
  }
  return log;
}

AuditLog::~AuditLog() {
  absl::MutexLock lock(&mu_);
  ::close(fd_);
}

absl::Status AuditLog::Line(const std::string& json) {
  const std::string line = json + "\n";
  absl::MutexLock lock(&mu_);
  // O_APPEND and one write: a line is never interleaved or torn by a kill.
  const ssize_t n = ::write(fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) {
    return ErrnoToStatus("cannot append to", path_, n < 0 ? errno : ENOSPC);
  }
  return absl::OkStatus();
}

absl::Status AuditLog::Generation(int64_t generation, int64_t from_step,
                                  int64_t world_replicas) {
  Json g;
  g["kind"] = "generation";
  g["generation"] = generation;
  g["from_step"] = from_step;
  g["world_replicas"] = world_replicas;
  return Line(DumpJson(g));
}

absl::Status AuditLog::Add(const SampleRecord& r) {
  Json j;
  j["kind"] = "samples";
  j["generation"] = r.generation;
  j["rank"] = r.rank;
  j["step"] = r.step;
  j["epoch"] = r.epoch;
  j["epoch_samples"] = r.epoch_samples;
  Json positions = Json::array();
  for (const auto& [a, b] : r.positions) positions.push_back({a, b});
  j["positions"] = std::move(positions);
  j["hash"] = r.hash;
  j["count"] = r.count;
  j["replicas"] = r.replicas;
  j["world_replicas"] = r.world_replicas;
  return Line(DumpJson(j));
}

}  // namespace lockstep
