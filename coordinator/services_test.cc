// The service adapters answer nothing before the journal is replayed: every
// call is UNAVAILABLE (which workers and clients retry), then served.
#include "coordinator/services.h"

#include <atomic>

#include "base/file_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(ServicesTest, CallsAreUnavailableUntilTheJournalIsReplayed) {
  CoordinatorOptions o;
  o.storage_dir = JoinPath(::testing::TempDir(), "services");
  Coordinator c(o);
  Authorizer auth(AuthOptions{});
  std::atomic<bool> shutdown{false};
  JobServiceImpl jobs(&c, &auth, &shutdown);
  ClusterServiceImpl cluster(&c, &auth);
  grpc::ServerContext context;
  lockstep::v1::ListJobsRequest list;
  lockstep::v1::ListJobsResponse listed;
  grpc::Status s = jobs.ListJobs(&context, &list, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.error_message(), "the coordinator is replaying its journal");
  lockstep::v1::HeartbeatRequest beat;
  beat.set_worker_id("w1");
  lockstep::v1::HeartbeatResponse answer;
  s = cluster.Heartbeat(&context, &beat, &answer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);

  ASSERT_TRUE(c.LoadJournal().ok());  // none yet: nothing to replay
  EXPECT_TRUE(jobs.ListJobs(&context, &list, &listed).ok());
  // Now an unknown worker id is NotFound (register again), not UNAVAILABLE.
  s = cluster.Heartbeat(&context, &beat, &answer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
}

}  // namespace
}  // namespace lockstep
