// result.json writer.
#include "core/train/result_file.h"

#include <nlohmann/json.hpp>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/file_util.h"

namespace lockstep {

std::string ResultToJson(const JobSpec& spec, const TrainResult& r) {
  nlohmann::ordered_json j;
  j["name"] = spec.name;
  j["test_accuracy"] = r.test_accuracy;
  j["test_loss"] = r.test_loss;
  j["train_loss"] = r.train_loss;
  j["train_accuracy"] = r.train_accuracy;
  j["steps"] = r.steps;
  j["epochs"] = r.epochs;
  j["samples_per_sec"] = r.samples_per_sec;
  j["wall_seconds"] = r.wall_seconds;
  j["fingerprint"] = r.fingerprint;
  j["num_parameters"] = r.num_parameters;
  j["global_batch_size"] = spec.global_batch_size();
  j["replicas"] = spec.total_replicas();
  j["shard"] = ShardModeName(r.shard);
  if (r.shard != ShardMode::kNone) j["copies"] = r.copies;
  j["optimizer_state_bytes"] = r.optimizer_state_bytes;
  if (r.loss_scale > 0) {  // precision fp16
    j["loss_scale"] = r.loss_scale;
    j["skipped_steps"] = r.skipped_steps;
  }
  j["resumed_from_step"] = r.resumed_from_step;
  if (!r.membership.empty()) {
    // The history the result is a function of (elastic jobs).
    nlohmann::ordered_json spans = nlohmann::ordered_json::array();
    for (const WorldSpan& w : r.membership) {
      nlohmann::ordered_json e;
      e["generation"] = w.generation;
      e["from_step"] = w.from_step;
      e["workers"] = w.workers;
      e["replicas"] = w.replicas;
      e["why"] = w.why;
      if (w.started_unix_seconds > 0) {
        e["started_at"] = absl::FormatTime(
            absl::RFC3339_full,
            absl::FromUnixMicros(
                static_cast<int64_t>(w.started_unix_seconds * 1e6)),
            absl::UTCTimeZone());
      }
      spans.push_back(std::move(e));
    }
    j["membership"] = std::move(spans);
  }
  if (r.skipped_samples > 0) j["skipped_samples"] = r.skipped_samples;
  if (!r.fenced.empty()) j["fenced"] = r.fenced;
  j["checkpoint"] = r.checkpoint_path;
  j["finished_at"] =
      absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  return j.dump(2) + "\n";
}

absl::Status WriteResultFile(const std::string& path, const JobSpec& spec,
                             const TrainResult& result) {
  return WriteFileAtomic(path, ResultToJson(spec, result));
}

}  // namespace lockstep
