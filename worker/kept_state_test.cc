// KeptState and WorkerState.FetchState over a real server (as the worker
// daemon serves it): the kept state comes back byte for byte, and only for
// its job and step.
#include "worker/kept_state.h"

#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "rpc/daemon_server.h"
#include "rpc/health_service.h"
#include "rpc/rpc_util.h"
#include "worker/checkpoint_rpc.h"

namespace lockstep {
namespace {

LoadedCheckpoint State(int64_t step) {
  LoadedCheckpoint c;
  c.state.step = step;
  c.state.epoch = 1;
  c.state.step_in_epoch = step - 4;
  c.state.seed = 99;
  c.state.generation = 3;
  c.state.optimizer_iterations = step;
  c.state.job_json = R"({"name": "j"})";
  c.state.artifacts["vocab.txt"] = "[PAD]\n[UNK]\n";
  c.state.train_loss = 0.25;
  c.model.emplace_back("dense/kernel",
                       Tensor({2, 3}, {1, -2, 3.5f, -0.0f, 1e-30f, 7}));
  c.model.emplace_back("dense/bias", Tensor({3}, {0.5f, 0, -1}));
  c.optimizer.emplace_back("adam/m/dense/kernel",
                           Tensor({2, 3}, {0, 0, 1, 0, 0, 2}));
  return c;
}

TEST(KeptStateTest, ServedByteForByteOnlyForItsJobAndStep) {
  KeptState kept;
  WorkerStateService service(&kept);
  HealthService health;
  DaemonServerOptions o;
  o.listen = "127.0.0.1:0";
  auto server = DaemonServer::Start(o, {&service}, &health);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = lockstep::v1::WorkerState::NewStub(
      MakeChannel((*server)->address(), TlsFiles()));

  absl::StatusOr<LoadedCheckpoint> none = FetchKeptState(stub.get(), "j", 7, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find(
                "this worker keeps no training state of job \"j\" at step 7"),
            std::string::npos)
      << none.status();

  lockstep::v1::RegisterRequest none_kept;
  kept.Describe(&none_kept);
  EXPECT_EQ(none_kept.held_step(), 0);
  kept.Keep("j", {State(7)}, "f7");
  lockstep::v1::RegisterRequest described;
  kept.Describe(&described);
  EXPECT_EQ(described.held_job(), "j");
  EXPECT_EQ(described.held_generation(), 3);
  EXPECT_EQ(described.held_step(), 7);
  EXPECT_EQ(described.held_fingerprint(), "f7");
  EXPECT_NE(kept.Get("j", 7), nullptr);
  EXPECT_NE(kept.Get("j", 7, "f7"), nullptr);
  EXPECT_EQ(kept.Get("j", 7, "f8"), nullptr);  // another state of step 7
  EXPECT_EQ(kept.Get("j", 8), nullptr);
  EXPECT_EQ(kept.Get("k", 7), nullptr);

  absl::StatusOr<LoadedCheckpoint> got = FetchKeptState(stub.get(), "j", 7, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  const LoadedCheckpoint want = State(7);
  EXPECT_EQ(got->path, "rank 1's memory (step 7)");
  EXPECT_EQ(got->state.step, 7);
  EXPECT_EQ(got->state.step_in_epoch, 3);
  EXPECT_EQ(got->state.seed, 99u);
  EXPECT_EQ(got->state.optimizer_iterations, 7);
  EXPECT_EQ(got->state.job_json, want.state.job_json);
  EXPECT_EQ(got->state.artifacts, want.state.artifacts);
  ASSERT_EQ(got->model.size(), 2u);
  ASSERT_EQ(got->optimizer.size(), 1u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got->model[i].first, want.model[i].first);
    EXPECT_EQ(got->model[i].second.shape(), want.model[i].second.shape());
    // Bytes, not values: -0.0 and a denormal-range value survive.
    ASSERT_EQ(got->model[i].second.size(), want.model[i].second.size());
    EXPECT_EQ(std::memcmp(got->model[i].second.data(),
                          want.model[i].second.data(),
                          sizeof(float) * want.model[i].second.size()),
              0);
  }
  EXPECT_EQ(got->optimizer[0].first, "adam/m/dense/kernel");
  EXPECT_EQ(got->optimizer[0].second.values(),
            want.optimizer[0].second.values());

  EXPECT_EQ(FetchKeptState(stub.get(), "j", 8, 1).status().code(),
            absl::StatusCode::kNotFound);
  kept.Clear();
  EXPECT_EQ(kept.Get("j", 7), nullptr);
  EXPECT_EQ(FetchKeptState(stub.get(), "j", 7, 1).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep
