// The field list, from the parser's own key lists and the registries.
#include "core/job/job_fields.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "core/data/data_format.h"
#include "core/job/job_spec_internal.h"
#include "core/layers/registry.h"

namespace lockstep {

std::vector<std::string> JobFieldNames() {
  using job_spec_internal::Keys;
  std::set<std::string> out;
  auto add = [&out](const std::string& prefix, const Keys& keys) {
    for (const std::string& k : keys) out.insert(prefix + k);
  };
  // Sections are objects whose own fields are listed below, not fields.
  const std::set<std::string> sections = {
      "model",   "optimizer", "lr_schedule", "data", "checkpoint",
      "summary", "cluster",   "restart",     "audit"};
  for (const std::string& k : job_spec_internal::RootKeys()) {
    if (sections.count(k) == 0) out.insert(k);
  }
  add("checkpoint.", job_spec_internal::CheckpointKeys());
  add("summary.", job_spec_internal::SummaryKeys());
  add("cluster.", job_spec_internal::ClusterKeys());
  add("cluster.workers.", job_spec_internal::ElasticWorkersKeys());
  add("restart.", job_spec_internal::RestartKeys());
  add("audit.", job_spec_internal::AuditKeys());
  for (const std::string& k : job_spec_internal::ModelKeys()) {
    if (k != "init") out.insert("model." + k);
  }
  add("model.inputs[].", job_spec_internal::ModelInputKeys());
  add("model.init.", job_spec_internal::ModelInitKeys());
  add("model.layers[].", CommonLayerKeys());
  add("optimizer.", job_spec_internal::OptimizerKeys());
  add("lr_schedule.", job_spec_internal::ScheduleKeys());
  add("data.", DataCommonKeys());
  add("data.", DataClassificationKeys());
  for (const std::string& type : LayerTypeNames()) {
    add(absl::StrCat("layer ", type, ": "), FindLayerType(type)->keys);
  }
  for (const std::string& format : DataFormatNames()) {
    add(absl::StrCat("data ", format, ": "), FindDataFormat(format)->keys);
  }
  return std::vector<std::string>(out.begin(), out.end());
}

}  // namespace lockstep
