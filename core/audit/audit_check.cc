// The sample audit's check (see audit_check.h).
#include "core/audit/audit_check.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/json_util.h"

namespace lockstep {
namespace {

using Json = nlohmann::json;

// Bounds on what a file may claim before the check allocates for it.
constexpr int64_t kMaxEpochSamples = int64_t{1} << 31;
constexpr int64_t kMaxWorldReplicas = int64_t{1} << 20;

absl::StatusOr<std::vector<int64_t>> IntArray(const Json& obj, const char* key,
                                              const std::string& where) {
  ASSIGN_OR_RETURN(const Json* a, GetField(obj, key, where));
  if (!a->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: field \"%s\" must be an array", where, key));
  }
  std::vector<int64_t> out;
  for (const Json& v : *a) {
    if (!v.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: field \"%s\" must hold integers", where, key));
    }
    out.push_back(v.get<int64_t>());
  }
  return out;
}

}  // namespace

bool AuditReport::exactly_once() const {
  if (!problems.empty()) return false;
  for (const Epoch& e : epochs) {
    if (e.complete && (e.never > 0 || e.more > 0)) return false;
  }
  return true;
}

absl::StatusOr<AuditReport> CheckAudit(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  AuditReport report;
  struct Header {
    uint64_t seed = 0;
    bool shuffle = true;
    int64_t global_batch = 0;
  };
  std::optional<Header> header;
  std::map<int64_t, std::pair<int64_t, int64_t>> generations;
  // (generation, rank, step) -> the record.
  std::map<std::tuple<int64_t, int64_t, int64_t>, SampleRecord> records;
  int64_t number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (line.empty()) continue;
    const std::string where = absl::StrFormat("%s line %d", path, number);
    ASSIGN_OR_RETURN(Json j, ParseJson(line, where));
    ASSIGN_OR_RETURN(std::string kind, GetString(j, "kind", where));
    if (kind == "header") {
      Header h;
      ASSIGN_OR_RETURN(report.job, GetString(j, "job", where));
      ASSIGN_OR_RETURN(h.seed, GetUint64(j, "seed", where));
      ASSIGN_OR_RETURN(const Json* shuffle, GetField(j, "shuffle", where));
      if (!shuffle->is_boolean()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": field \"shuffle\" must be a boolean"));
      }
      h.shuffle = shuffle->get<bool>();
      ASSIGN_OR_RETURN(h.global_batch, GetInt64(j, "global_batch", where));
      if (h.global_batch <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": global_batch must be > 0"));
      }
      header = h;
    } else if (kind == "generation") {
      ASSIGN_OR_RETURN(int64_t g, GetInt64(j, "generation", where));
      ASSIGN_OR_RETURN(int64_t from, GetInt64(j, "from_step", where));
      ASSIGN_OR_RETURN(int64_t world, GetInt64(j, "world_replicas", where));
      if (from < 0 || world < 1 || world > kMaxWorldReplicas) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": from_step must be >= 0 and world_replicas in [1, ",
            kMaxWorldReplicas, "]"));
      }
      auto [it, added] = generations.emplace(g, std::make_pair(from, world));
      if (!added && it->second != std::make_pair(from, world)) {
        report.problems.push_back(absl::StrFormat(
            "generation %d is said to start twice, from step %d and %d", g,
            it->second.first, from));
      }
    } else if (kind == "samples") {
      SampleRecord r;
      ASSIGN_OR_RETURN(r.generation, GetInt64(j, "generation", where));
      ASSIGN_OR_RETURN(r.rank, GetInt64(j, "rank", where));
      ASSIGN_OR_RETURN(r.step, GetInt64(j, "step", where));
      ASSIGN_OR_RETURN(r.epoch, GetInt64(j, "epoch", where));
      ASSIGN_OR_RETURN(r.epoch_samples, GetInt64(j, "epoch_samples", where));
      ASSIGN_OR_RETURN(r.hash, GetUint32(j, "hash", where));
      ASSIGN_OR_RETURN(r.count, GetInt64(j, "count", where));
      ASSIGN_OR_RETURN(r.replicas, IntArray(j, "replicas", where));
      ASSIGN_OR_RETURN(r.world_replicas, GetInt64(j, "world_replicas", where));
      ASSIGN_OR_RETURN(const Json* positions, GetField(j, "positions", where));
      if (!positions->is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": field \"positions\" must be an array"));
      }
      for (const Json& p : *positions) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() ||
            !p[1].is_number_integer()) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": positions must be [begin, end] integer pairs"));
        }
        r.positions.emplace_back(p[0].get<int64_t>(), p[1].get<int64_t>());
      }
      if (r.step < 0 || r.epoch < 0 || r.epoch_samples < 1 ||
          r.epoch_samples > kMaxEpochSamples || r.world_replicas < 1 ||
          r.world_replicas > kMaxWorldReplicas) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": step and epoch must be >= 0, epoch_samples in [1, ",
            kMaxEpochSamples, "], world_replicas in [1, ", kMaxWorldReplicas,
            "]"));
      }
      ++report.records;
      auto key = std::make_tuple(r.generation, r.rank, r.step);
      auto it = records.find(key);
      if (it == records.end()) {
        records.emplace(key, std::move(r));
      } else if (it->second.hash == r.hash &&
                 it->second.positions == r.positions) {
        ++report.duplicates;  // a call retried after its answer was lost
      } else {
        report.problems.push_back(absl::StrFormat(
            "rank %d recorded step %d of generation %d twice, with other "
            "samples",
            r.rank, r.step, r.generation));
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown kind \"", kind, "\""));
    }
  }
  if (!header.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no header line (not an audit file?)"));
  }
  for (const auto& [g, start] : generations) {
    report.generations.push_back({g, start});
  }
  if (!generations.empty())
    report.first_step = generations.begin()->second.first;
  // The generation whose run of `step` stands: the latest that started at
  // or before it (a later one starting after it did not redo it).
  auto accepted_generation = [&](int64_t step) -> int64_t {
    int64_t best = -1;
    for (const auto& [g, start] : generations) {
      if (start.first <= step) best = g;
    }
    return best;
  };
  // Plans by (epoch_samples, world_replicas).
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<ShardPlan>> plans;
  auto plan_for = [&](int64_t samples, int64_t world) -> const ShardPlan& {
    auto& p = plans[{samples, world}];
    if (p == nullptr) {
      p = std::make_unique<ShardPlan>(samples, header->global_batch, world,
                                      header->seed, header->shuffle);
    }
    return *p;
  };
  // step -> (generation, replicas seen, count of each).
  std::map<int64_t, std::map<int64_t, int>> step_replicas;
  std::map<int64_t, int64_t> step_generation;
  std::map<int64_t, std::vector<uint16_t>> seen;  // epoch -> per position
  std::map<int64_t, int64_t> epoch_samples;
  std::map<int64_t, std::set<int64_t>> epoch_steps;
  for (const auto& [key, r] : records) {
    auto gen = generations.find(r.generation);
    if (gen == generations.end()) {
      report.problems.push_back(absl::StrFormat(
          "rank %d recorded step %d for generation %d, which never started",
          r.rank, r.step, r.generation));
      continue;
    }
    if (r.step < gen->second.first) {
      report.problems.push_back(absl::StrFormat(
          "rank %d recorded step %d in generation %d, which started at step %d",
          r.rank, r.step, r.generation, gen->second.first));
      continue;
    }
    if (accepted_generation(r.step) != r.generation) {
      ++report.thrown_away;
      continue;
    }
    ++report.accepted;
    const std::string who = absl::StrFormat("step %d (generation %d, rank %d)",
                                            r.step, r.generation, r.rank);
    if (r.world_replicas != gen->second.second) {
      report.problems.push_back(
          absl::StrFormat("%s: a world of %d replicas, the generation's is %d",
                          who, r.world_replicas, gen->second.second));
      continue;
    }
    const ShardPlan& plan = plan_for(r.epoch_samples, r.world_replicas);
    const int64_t spe = plan.steps_per_epoch();
    if (spe <= 0 || r.step / spe != r.epoch) {
      report.problems.push_back(
          absl::StrFormat("%s: epoch %d, but the plan puts it in epoch %d", who,
                          r.epoch, spe > 0 ? r.step / spe : 0));
      continue;
    }
    std::vector<std::pair<int64_t, int64_t>> positions;
    std::vector<int64_t> indices;
    for (int64_t replica : r.replicas) {
      if (replica < 0 || replica >= r.world_replicas) {
        report.problems.push_back(
            absl::StrFormat("%s: replica %d is outside the world of %d", who,
                            replica, r.world_replicas));
      }
    }
    PlanPositions(plan, r.epoch, r.step % spe, r.replicas, &positions,
                  &indices);
    if (positions != r.positions) {
      report.problems.push_back(absl::StrFormat(
          "%s: positions differ from the shard plan's for replicas %s", who,
          absl::StrJoin(r.replicas, ",")));
      continue;
    }
    if (IndicesHash(indices) != r.hash ||
        static_cast<int64_t>(indices.size()) != r.count) {
      report.problems.push_back(absl::StrFormat(
          "%s: the samples consumed (%d, hash %08x) are not the shard "
          "plan's (%d, hash %08x)",
          who, r.count, r.hash, indices.size(), IndicesHash(indices)));
      continue;
    }
    if (epoch_samples.count(r.epoch) &&
        epoch_samples[r.epoch] != r.epoch_samples) {
      report.problems.push_back(
          absl::StrFormat("%s: an epoch of %d samples, another rank's has %d",
                          who, r.epoch_samples, epoch_samples[r.epoch]));
      continue;
    }
    epoch_samples[r.epoch] = r.epoch_samples;
    std::vector<uint16_t>& counts = seen[r.epoch];
    counts.resize(r.epoch_samples, 0);
    for (const auto& [a, b] : r.positions) {
      for (int64_t p = a; p < b; ++p) {
        if (counts[p] < 0xffff) ++counts[p];
      }
    }
    for (int64_t replica : r.replicas) ++step_replicas[r.step][replica];
    step_generation[r.step] = r.generation;
    epoch_steps[r.epoch].insert(r.step);
  }
  // Each accepted step: every replica of its generation's world once.
  for (const auto& [step, replicas] : step_replicas) {
    const int64_t world = generations[step_generation[step]].second;
    std::vector<std::string> missing, doubled;
    for (int64_t r = 0; r < world; ++r) {
      auto it = replicas.find(r);
      if (it == replicas.end()) missing.push_back(absl::StrCat(r));
      if (it != replicas.end() && it->second > 1) {
        doubled.push_back(absl::StrCat(r));
      }
    }
    if (!missing.empty() || !doubled.empty()) {
      report.problems.push_back(absl::StrFormat(
          "step %d (generation %d): replicas%s%s%s%s", step,
          step_generation[step],
          missing.empty() ? "" : " not recorded: ", absl::StrJoin(missing, ","),
          doubled.empty() ? "" : " recorded twice: ",
          absl::StrJoin(doubled, ",")));
    }
  }
  for (const auto& [epoch, counts] : seen) {
    AuditReport::Epoch e;
    e.epoch = epoch;
    e.samples = epoch_samples[epoch];
    for (uint16_t c : counts) {
      if (c == 0) ++e.never;
      if (c == 1) ++e.once;
      if (c > 1) ++e.more;
    }
    e.steps = static_cast<int64_t>(epoch_steps[epoch].size());
    e.steps_due = plan_for(e.samples, 1).steps_per_epoch();
    e.complete = report.first_step <= epoch * e.steps_due &&
                 !step_replicas.empty() &&
                 step_replicas.rbegin()->first >= (epoch + 1) * e.steps_due - 1;
    report.epochs.push_back(e);
  }
  return report;
}

std::string FormatAudit(const AuditReport& r) {
  std::vector<std::string> gens;
  for (const auto& [g, start] : r.generations) {
    gens.push_back(absl::StrFormat("%d from step %d on %d replicas", g,
                                   start.first, start.second));
  }
  std::string out = absl::StrFormat(
      "job %s: generations %s\n", r.job,
      gens.empty() ? std::string("(none started)") : absl::StrJoin(gens, ", "));
  for (const AuditReport::Epoch& e : r.epochs) {
    out += absl::StrFormat(
        "epoch %d: %d samples: %d seen once, %d never, %d more than once "
        "(%d of %d steps%s)\n",
        e.epoch, e.samples, e.once, e.never, e.more, e.steps, e.steps_due,
        e.complete ? "" : ", not complete");
  }
  out += absl::StrFormat(
      "records: %d accepted, %d thrown away (steps a later generation "
      "redid), %d repeated calls\n",
      r.accepted, r.thrown_away, r.duplicates);
  for (const std::string& p : r.problems) out += "problem: " + p + "\n";
  out += r.exactly_once()
             ? "every sample of every complete epoch was seen exactly once\n"
             : "NOT exactly once\n";
  return out;
}

}  // namespace lockstep
