// The fixture of the coordinator's state-machine tests (no network): a
// Coordinator over a storage folder named after the test, with a 0.3 s
// worker timeout on a hand-moved clock (Pass advances it: no test sleeps
// against a timer), and the registrations, heartbeats, fingerprints and
// failure reports its tests send it.
#ifndef LOCKSTEP_COORDINATOR_COORDINATOR_TEST_FIXTURE_H_
#define LOCKSTEP_COORDINATOR_COORDINATOR_TEST_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/file_util.h"
#include "base/time_source.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_test_util.h"
#include "gtest/gtest.h"
#include "proto/cluster.pb.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace testing {

// The job the tests submit: kTwoWorkerJob ("j", 2 workers x 1 replica).
inline constexpr const char* kJob = kTwoWorkerJob;

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override { c_ = std::make_unique<Coordinator>(Options()); }
  // The fixture's options: the storage folder, the 0.3 s worker timeout,
  // the hand-moved clock.
  CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.storage_dir = JoinPath(
        ::testing::TempDir(),
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    o.worker_timeout_seconds = 0.3;
    o.time = &time_;
    o.journal_store = journal_store_;
    return o;
  }
  // Set before SetUp to give the coordinator this journal store.
  std::shared_ptr<JournalStore> journal_store_;
  // `seconds` pass on the coordinator's clock.
  void Pass(double seconds) { time_.Advance(absl::Seconds(seconds)); }
  std::string Register(const std::string& host, int replicas = 1,
                       int version = kProtocolVersion) {
    v1::RegisterRequest r = testing::TestRegistration(host, replicas);
    r.set_protocol_version(version);
    absl::StatusOr<v1::RegisterResponse> resp =
        c_->registrations().Register(r, "peer");
    return resp.ok() ? resp->worker_id() : std::string(resp.status().message());
  }
  v1::HeartbeatResponse Beat(const std::string& id, const std::string& job = "",
                             int64_t generation = 0) {
    v1::HeartbeatRequest r;
    r.set_worker_id(id);
    r.set_job(job);
    r.set_generation(generation);
    absl::StatusOr<v1::HeartbeatResponse> resp =
        c_->registrations().Heartbeat(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : v1::HeartbeatResponse();
  }
  void Fingerprint(int rank, int64_t step, const std::string& fp) {
    v1::ProgressReport r;
    r.set_worker_id(RankHolder(rank));
    r.set_job("j");
    r.set_generation(1);
    r.set_rank(rank);
    r.set_step(step);
    r.set_fingerprint_step(step);
    r.set_fingerprint(fp);
    ASSERT_TRUE(c_->reports().ReportProgress(r).ok());
  }
  // The worker that holds `rank` of generation 1: workers register as w1,
  // w2, ... and take ranks in that order.
  static std::string RankHolder(int rank) {
    return "w" + std::to_string(rank + 1);
  }
  // A rank's report that its part of `generation` failed with `code`.
  static v1::FinishRequest Failed(const std::string& worker, int64_t generation,
                                  int rank, const std::string& error,
                                  absl::StatusCode code) {
    v1::FinishRequest f;
    f.set_worker_id(worker);
    f.set_job("j");
    f.set_generation(generation);
    f.set_rank(rank);
    f.set_error(error);
    f.set_error_code(static_cast<int>(code));
    return f;
  }
  // Rank `rank`'s report that generation 1 of "j" ended after 5 steps
  // (1 epoch) with the fingerprint "ccc..." and `test_accuracy`.
  static v1::FinishRequest Finished(int rank, double test_accuracy) {
    v1::FinishRequest f;
    f.set_worker_id(RankHolder(rank));
    f.set_job("j");
    f.set_generation(1);
    f.set_rank(rank);
    f.set_steps(5);
    f.set_epochs(1);
    f.set_fingerprint("cccccccccccccccccccccccccccccccc");
    f.set_test_accuracy(test_accuracy);
    return f;
  }
  ManualTime time_;
  std::unique_ptr<Coordinator> c_;
};

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_COORDINATOR_TEST_FIXTURE_H_
