// The coordinator's /metrics, dashboard and /api/state (see ops_endpoints.h).
#include "coordinator/ops_endpoints.h"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/dashboard_html.h"
#include "coordinator/job_table.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Families built up metric by metric, in the order first named.
class Families {
 public:
  void Add(const std::string& name, const std::string& help, MetricType type,
           std::vector<ClientMetric::Label> labels, double value) {
    auto it =
        std::find_if(out_.begin(), out_.end(),
                     [&](const MetricFamily& f) { return f.name == name; });
    if (it == out_.end()) {
      out_.push_back(MetricFamily{name, help, type, {}});
      it = std::prev(out_.end());
    }
    ClientMetric m;
    m.label = std::move(labels);
    if (type == MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    it->metric.push_back(std::move(m));
  }
  void Gauge(const std::string& name, const std::string& help,
             std::vector<ClientMetric::Label> labels, double value) {
    Add(name, help, MetricType::Gauge, std::move(labels), value);
  }
  void Counter(const std::string& name, const std::string& help,
               std::vector<ClientMetric::Label> labels, double value) {
    Add(name, help, MetricType::Counter, std::move(labels), value);
  }
  // A family that exists with no series yet still shows its HELP/TYPE.
  void Declare(const std::string& name, const std::string& help,
               MetricType type) {
    if (std::none_of(out_.begin(), out_.end(),
                     [&](const MetricFamily& f) { return f.name == name; })) {
      out_.push_back(MetricFamily{name, help, type, {}});
    }
  }
  const std::vector<MetricFamily>& families() const { return out_; }

 private:
  std::vector<MetricFamily> out_;
};

const lockstep::v1::JobState kStates[] = {
    lockstep::v1::PENDING,   lockstep::v1::RUNNING, lockstep::v1::RECOVERING,
    lockstep::v1::SUCCEEDED, lockstep::v1::FAILED,  lockstep::v1::CANCELLED};

}  // namespace

std::string CoordinatorMetricsText(const Coordinator::OpsView& view,
                                   bool ready) {
  Families f;
  f.Gauge("lockstep_coordinator_ready",
          "1 once the journal is replayed and the coordinator serves", {},
          ready ? 1 : 0);
  f.Gauge("lockstep_coordinator_leading",
          "1 unless this coordinator stands by behind etcd or lost its lease "
          "(always 1 without --etcd)",
          {}, absl::StartsWith(view.not_serving, kNotLeaderPrefix) ? 0 : 1);
  f.Counter("lockstep_coordinator_journal_writes_refused_total",
            "Journal writes refused because this coordinator no longer led", {},
            static_cast<double>(view.refused_journal_writes));
  for (lockstep::v1::JobState state : kStates) {
    const auto n = std::count_if(view.jobs.begin(), view.jobs.end(),
                                 [state](const Coordinator::JobView& j) {
                                   return j.status.state() == state;
                                 });
    f.Gauge("lockstep_jobs", "Jobs by state", {{"state", JobStateName(state)}},
            static_cast<double>(n));
  }
  const char* kJobFamilies[][2] = {
      {"lockstep_job_state", "1 for the job's current state"},
      {"lockstep_job_generation", "The job's generation"},
  };
  for (const auto& fam : kJobFamilies) {
    f.Declare(fam[0], fam[1], MetricType::Gauge);
  }
  for (const Coordinator::JobView& j : view.jobs) {
    const lockstep::v1::JobStatus& s = j.status;
    const std::vector<ClientMetric::Label> job = {{"job", s.name()}};
    // What describes a run going on is 0 once none is: an ended job's last
    // rate, ETA and live workers would read as a job still training.
    const bool ended = IsTerminal(s.state());
    f.Gauge("lockstep_job_state", "1 for the job's current state",
            {{"job", s.name()}, {"state", JobStateName(s.state())}}, 1);
    f.Gauge("lockstep_job_generation", "The job's generation", job,
            static_cast<double>(s.generation()));
    f.Gauge("lockstep_job_step", "Steps completed (rank 0's last report)", job,
            static_cast<double>(s.step()));
    f.Gauge("lockstep_job_total_steps", "Steps the job trains in all", job,
            static_cast<double>(s.total_steps()));
    if (s.step() > 0) {  // none before the first step's report
      f.Gauge("lockstep_job_loss", "Training loss, running mean of the epoch",
              job, s.loss());
      f.Gauge("lockstep_job_accuracy",
              "Training accuracy, running mean of the epoch", job,
              s.accuracy());
    }
    if (!j.curves.eval.empty()) {
      f.Gauge("lockstep_job_test_loss", "Loss of the last evaluation", job,
              j.curves.eval.back()[1]);
      f.Gauge("lockstep_job_test_accuracy", "Accuracy of the last evaluation",
              job, j.curves.eval.back()[2]);
    }
    f.Gauge("lockstep_job_samples_per_second",
            "Training samples per second (all workers; 0 once ended)", job,
            ended ? 0 : s.samples_per_sec());
    f.Gauge("lockstep_job_eta_seconds",
            "Estimated seconds left (-1 unknown; 0 once ended)", job,
            ended ? 0 : s.eta_seconds());
    f.Gauge("lockstep_job_workers_alive",
            "Workers alive among its ranks (0 once ended)", job,
            ended ? 0 : s.workers_alive());
    if (s.loss_scale() > 0) {
      f.Gauge("lockstep_job_loss_scale",
              "precision fp16: the dynamic loss scale (rank 0's)", job,
              s.loss_scale());
      f.Gauge("lockstep_job_skipped_steps",
              "precision fp16: steps skipped on an overflow so far", job,
              static_cast<double>(s.skipped_steps()));
    }
    if (s.optimizer_state_bytes() > 0) {
      f.Gauge("lockstep_job_optimizer_state_bytes",
              "Optimizer state bytes per worker (the most any rank holds; "
              "cluster.shard divides it)",
              job, static_cast<double>(s.optimizer_state_bytes()));
    }
    if (s.has_straggler()) {
      f.Gauge("lockstep_job_straggler",
              "1 for the rank that holds the running job back (cause: link "
              "or compute; coordinator/straggler.h)",
              {{"job", s.name()},
               {"rank", absl::StrCat(s.straggler().rank())},
               {"worker", s.straggler().worker_id()},
               {"cause", s.straggler().cause()}},
              1);
    }
    f.Counter("lockstep_job_restarts_total",
              "Generations started after a failure or a departure", job,
              s.restarts());
    if (s.membership_size() > 0) {
      f.Gauge("lockstep_job_world_workers",
              "Workers of the job's latest generation (elastic jobs vary)",
              job, s.membership(s.membership_size() - 1).workers());
      f.Counter("lockstep_job_membership_changes_total",
                "Generations that started after the first (any reason)", job,
                s.membership_size() - 1);
    }
    for (const auto& [kind, n] : s.fenced()) {
      f.Counter("lockstep_job_fenced_total",
                "Requests naming an older (or unknown) generation of the job, "
                "refused: what a fenced-off process tried to change",
                {{"job", s.name()}, {"kind", kind}}, static_cast<double>(n));
    }
    const Coordinator::CheckpointFigures& c = j.checkpoints;
    f.Counter("lockstep_job_checkpoints_total", "Checkpoints committed", job,
              static_cast<double>(c.committed));
    f.Counter("lockstep_job_checkpoint_failures_total",
              "Checkpoints that could not be committed", job,
              static_cast<double>(c.failed));
    f.Gauge("lockstep_job_checkpoint_last_seconds",
            "Time to commit the last checkpoint (verify, write, fsync, "
            "rename)",
            job, c.last_seconds);
    f.Counter("lockstep_job_checkpoint_seconds_total",
              "Time spent committing checkpoints", job, c.seconds_total);
    f.Gauge("lockstep_job_checkpoint_last_bytes",
            "Size of the last committed checkpoint", job,
            static_cast<double>(c.last_bytes));
    f.Counter("lockstep_job_checkpoint_bytes_total",
              "Bytes of committed checkpoints", job,
              static_cast<double>(c.bytes_total));
  }
  int idle = 0, busy = 0, lost = 0;
  f.Declare("lockstep_worker_heartbeat_age_seconds",
            "Seconds since the worker's last heartbeat", MetricType::Gauge);
  for (const lockstep::v1::WorkerStatus& w : view.workers) {
    if (!w.alive()) {
      ++lost;
      continue;
    }
    (w.job().empty() ? idle : busy)++;
    const std::vector<ClientMetric::Label> worker = {
        {"worker", w.worker_id()}, {"name", w.name()}, {"host", w.host()}};
    f.Gauge("lockstep_worker_heartbeat_age_seconds",
            "Seconds since the worker's last heartbeat", worker,
            w.heartbeat_age_seconds());
    if (w.ring_ms_per_mib() > 0) {
      f.Gauge("lockstep_worker_ring_ms_per_mib",
              "Recent transit of the ring messages from its previous rank, "
              "ms per MiB (half-life 10 s)",
              worker, w.ring_ms_per_mib());
    }
    if (w.compute_ms_per_step() > 0) {
      f.Gauge("lockstep_worker_compute_ms_per_step",
              "Recent own work per step (step time less the all-reduce "
              "wait), ms (half-life 10 s)",
              worker, w.compute_ms_per_step());
    }
  }
  for (const auto& [state, n] : {std::pair<const char*, int>{"idle", idle},
                                 {"busy", busy},
                                 {"lost", lost}}) {
    f.Gauge("lockstep_workers", "Registered workers by state",
            {{"state", state}}, n);
  }
  return prometheus::TextSerializer().Serialize(f.families());
}

nlohmann::json DashboardState(const Coordinator::OpsView& view) {
  nlohmann::json out;
  out["not_serving"] = view.not_serving;
  out["jobs"] = nlohmann::json::array();
  for (const Coordinator::JobView& j : view.jobs) {
    const lockstep::v1::JobStatus& s = j.status;
    nlohmann::json job = {
        {"name", s.name()},
        {"state", JobStateName(s.state())},
        {"generation", s.generation()},
        {"step", s.step()},
        {"total_steps", s.total_steps()},
        {"epoch", s.epoch()},
        {"epochs", s.epochs()},
        {"loss", s.loss()},
        {"accuracy", s.accuracy()},
        {"test_loss", s.test_loss()},
        {"test_accuracy", s.test_accuracy()},
        {"samples_per_sec", s.samples_per_sec()},
        {"eta_seconds", s.eta_seconds()},
        {"message", s.message()},
        {"straggler", s.has_straggler() ? s.straggler().text() : ""},
        {"restarts", s.restarts()},
        {"max_restarts", s.max_restarts()},
        {"workers_alive", s.workers_alive()},
        {"workers_needed", s.workers_needed()},
        {"world_workers", s.membership_size() > 0
                              ? s.membership(s.membership_size() - 1).workers()
                              : 0},
        {"checkpoint_path", s.checkpoint_path()},
        {"checkpoints", j.checkpoints.committed},
    };
    nlohmann::json events = nlohmann::json::array();
    const int first = std::max(0, s.events_size() - 8);
    for (int i = first; i < s.events_size(); ++i) events.push_back(s.events(i));
    job["events"] = events;
    job["train"] = j.curves.train;
    job["eval"] = j.curves.eval;
    out["jobs"].push_back(job);
  }
  out["workers"] = nlohmann::json::array();
  for (const lockstep::v1::WorkerStatus& w : view.workers) {
    out["workers"].push_back(
        {{"id", w.worker_id()},
         {"name", w.name()},
         {"host", w.host()},
         {"pid", w.pid()},
         {"address", w.address()},
         {"replicas", w.replicas()},
         {"job", w.job()},
         {"rank", w.rank()},
         {"alive", w.alive()},
         {"heartbeat_age_seconds", w.heartbeat_age_seconds()},
         {"waiting", w.waiting()},
         {"ring_ms_per_mib", w.ring_ms_per_mib()},
         {"compute_ms_per_step", w.compute_ms_per_step()}});
  }
  return out;
}

std::map<std::string, HttpHandler> CoordinatorRoutes(
    const Coordinator* coordinator) {
  std::map<std::string, HttpHandler> routes;
  routes["/metrics"] = [coordinator](const auto&) {
    HttpReply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = CoordinatorMetricsText(coordinator->Ops(), coordinator->ready());
    return r;
  };
  routes["/api/state"] = [coordinator](const auto&) {
    HttpReply r;
    r.content_type = "application/json";
    r.body =
        DashboardState(coordinator->Ops())
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return r;
  };
  routes["/"] = [](const auto&) {
    HttpReply r;
    r.content_type = "text/html; charset=utf-8";
    r.body = kDashboardHtml;
    return r;
  };
  return routes;
}

}  // namespace lockstep
