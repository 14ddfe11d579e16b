// The gRPC ring transport in one process: three collective services on
// 127.0.0.1 with free ports. The ring all-reduce over it gives the same bytes
// as over the in-process transport; stale generations, wrong senders and
// malformed messages are refused with errors that say so.
#include "worker/grpc_transport.h"

#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "core/ring_allreduce.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"
#include "proto/tls.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

struct Node {
  CollectiveService service{absl::Seconds(2)};
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

class GrpcRing {
 public:
  explicit GrpcRing(int world) : nodes_(world) {
    for (Node& n : nodes_) {
      grpc::ServerBuilder b;
      ConfigureServer(b);
      int port = 0;
      b.AddListeningPort("127.0.0.1:0",
                         MakeServerCredentials(
                             TlsFiles(), ClientCertificates::kRequireAndVerify),
                         &port);
      b.RegisterService(&n.service);
      n.server = b.BuildAndStart();
      n.address = "127.0.0.1:" + std::to_string(port);
      peers_.push_back(n.address);
    }
  }
  ~GrpcRing() {
    Clear();
    for (Node& n : nodes_) {
      n.server->Shutdown(std::chrono::system_clock::now() +
                         std::chrono::seconds(1));
    }
  }
  void Clear() {
    for (size_t r = 0; r < transports_.size(); ++r) {
      nodes_[r].service.Detach(transports_[r].get());
    }
    transports_.clear();
  }
  // Attaches a transport for (job, generation) on every rank.
  void Start(const std::string& job, int64_t generation) {
    Clear();
    for (size_t r = 0; r < nodes_.size(); ++r) {
      GrpcRingOptions o;
      o.job = job;
      o.generation = generation;
      o.rank = static_cast<int>(r);
      o.peers = peers_;
      o.lanes = 2;
      auto t = std::make_shared<GrpcRingTransport>(o);
      nodes_[r].service.Attach(t);
      transports_.push_back(t);
    }
  }
  GrpcRingTransport& at(int r) { return *transports_[r]; }
  Node& node(int r) { return nodes_[r]; }
  const std::vector<std::string>& peers() const { return peers_; }

 private:
  std::vector<Node> nodes_;
  std::vector<std::string> peers_;
  std::vector<std::shared_ptr<GrpcRingTransport>> transports_;
};

std::vector<float> Input(int rank, int64_t n) {
  std::mt19937 gen(1000 + rank);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// Serial sum in the documented ring order: segment s starts at rank s.
std::vector<float> Expected(int world, int64_t n) {
  std::vector<std::vector<float>> in;
  for (int r = 0; r < world; ++r) in.push_back(Input(r, n));
  std::vector<float> out(n);
  const int64_t base = n / world, extra = n % world;
  int64_t begin = 0;
  for (int s = 0; s < world; ++s) {
    const int64_t len = base + (s < extra ? 1 : 0);
    for (int64_t i = begin; i < begin + len; ++i) {
      float acc = in[s][i];
      for (int k = 1; k < world; ++k) acc += in[(s + k) % world][i];
      out[i] = acc;
    }
    begin += len;
  }
  return out;
}

TEST(GrpcTransportTest, RingAllReduceMatchesSerialSumBitwise) {
  const int world = 3;
  GrpcRing ring(world);
  ring.Start("job", 1);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{1000003}}) {
    std::vector<std::vector<float>> data(world);
    std::vector<absl::Status> status(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      data[r] = Input(r, n);
      threads.emplace_back([&, r] {
        RingOptions o;
        o.chunk_elements = 64 * 1024;
        o.timeout = absl::Seconds(20);
        status[r] = RingAllReduce(ring.at(r), CollectiveTag{1, n, 0, 0},
                                  data[r].data(), n, o);
      });
    }
    for (auto& t : threads) t.join();
    const std::vector<float> want = Expected(world, n);
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(status[r].ok())
          << "n=" << n << " rank " << r << ": " << status[r];
      ASSERT_EQ(0, std::memcmp(want.data(), data[r].data(), sizeof(float) * n))
          << "n=" << n << " rank " << r;
    }
  }
}

TEST(GrpcTransportTest, StaleGenerationIsRefusedNotSummed) {
  GrpcRing ring(2);
  ring.Start("job", 2);
  // A leftover sender of generation 1 (rank 0 -> rank 1).
  GrpcRingOptions o;
  o.job = "job";
  o.generation = 1;
  o.rank = 0;
  o.peers = ring.peers();
  GrpcRingTransport stale(o);
  const float x = 1.0f;
  ASSERT_TRUE(stale.SendToNext(CollectiveTag{1, 5, 0, 0}, &x, 1).ok());
  // The refusal comes back to the sender as a broken send.
  absl::Status s;
  for (int i = 0; i < 100; ++i) {
    s = stale.SendToNext(CollectiveTag{1, 5, 0, 1}, &x, 1);
    if (!s.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("stale generation"));
  // The current generation's receiver never saw it.
  absl::StatusOr<std::string> got = ring.at(1).RecvFromPrev(
      CollectiveTag{1, 5, 0, 0}, absl::Now() + absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
}

TEST(GrpcTransportTest, WrongSenderOrLengthIsRefused) {
  GrpcRing ring(3);
  ring.Start("job", 1);
  lockstep::v1::CollectiveChunk c;
  c.set_job("job");
  c.set_generation(1);
  c.set_from_rank(2);  // rank 1's previous rank is 0
  c.set_data(std::string(8, '\0'));
  absl::Status s = ring.at(1).Deliver(c);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("only rank 0 sends to rank 1"));
  // Once refused, the rank's waits fail with the reason.
  absl::StatusOr<std::string> got = ring.at(1).RecvFromPrev(
      CollectiveTag{1, 0, 0, 0}, absl::Now() + absl::Seconds(5));
  EXPECT_THAT(got.status().message(), HasSubstr("only rank 0 sends"));

  lockstep::v1::CollectiveChunk odd;
  odd.set_job("job");
  odd.set_generation(1);
  odd.set_from_rank(1);
  odd.set_data(std::string(7, 'x'));
  s = ring.at(2).Deliver(odd);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("7 bytes"));

  lockstep::v1::CollectiveChunk other;
  other.set_job("another");
  other.set_generation(1);
  other.set_from_rank(2);
  s = ring.at(0).Deliver(other);
  EXPECT_THAT(s.message(), HasSubstr("job \"another\""));
}

TEST(GrpcTransportTest, AbortEndsAWaitAtOnce) {
  GrpcRing ring(2);
  ring.Start("job", 1);
  std::thread t([&] {
    absl::SleepFor(absl::Milliseconds(100));
    ring.node(0).service.AbortCurrent(absl::CancelledError("job cancelled"));
  });
  const absl::Time t0 = absl::Now();
  absl::StatusOr<std::string> got = ring.at(0).RecvFromPrev(
      CollectiveTag{1, 0, 0, 0}, absl::Now() + absl::Seconds(30));
  t.join();
  EXPECT_TRUE(absl::IsAborted(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("job cancelled"));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));
}

TEST(GrpcTransportTest, DeadPeerGivesUnavailableNamingTheRank) {
  GrpcRing ring(2);
  GrpcRingOptions o;
  o.job = "job";
  o.generation = 1;
  o.rank = 0;
  o.peers = {ring.peers()[0], "127.0.0.1:1"};  // nothing listens on port 1
  GrpcRingTransport t(o);
  const float x = 1.0f;
  absl::Status s = t.SendToNext(CollectiveTag{1, 0, 0, 0}, &x, 1);
  ASSERT_TRUE(s.ok());
  // wait_for_ready keeps retrying a refused connection; Abort ends it.
  absl::StatusOr<std::string> got = t.RecvFromPrev(
      CollectiveTag{1, 0, 0, 0}, absl::Now() + absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("rank 1 (127.0.0.1:1)"));
  t.Abort(absl::CancelledError("test over"));
}

}  // namespace
}  // namespace lockstep
