// The gRPC ring transport in one process: three collective services on
// 127.0.0.1 with free ports. The ring all-reduce over it gives the same bytes
// as over the in-process transport; stale generations, wrong senders and
// malformed messages are refused with errors that say so.
#include "worker/grpc_ring_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "core/collective/in_process_transport.h"
#include "core/collective/ring_allreduce.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/rpc_util.h"
#include "rpc/tls.h"
#include "worker/collective_service.h"

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
  void Start(const std::string& job, int64_t generation, bool checksum = false,
             int connect_timeout_ms = kConnectTimeoutMs) {
    Clear();
    for (size_t r = 0; r < nodes_.size(); ++r) {
      GrpcRingOptions o;
      o.job = job;
      o.generation = generation;
      o.rank = static_cast<int>(r);
      o.peers = peers_;
      o.lanes = 2;
      o.checksum = checksum;
      o.connect_timeout_ms = connect_timeout_ms;
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
  int64_t step = 0;  // one step per collective, as training numbers them
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{1000003}}) {
    ++step;
    std::vector<std::vector<float>> data(world);
    std::vector<absl::Status> status(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      data[r] = Input(r, n);
      threads.emplace_back([&, r] {
        RingOptions o;
        o.chunk_elements = 64 * 1024;
        o.timeout = absl::Seconds(20);
        status[r] = RingAllReduce(ring.at(r), CollectiveTag{1, step, 0, 0},
                                  data[r].data(), n, o);
      });
    }
    for (auto& t : threads) t.join();
    const std::vector<float> want = Expected(world, n);
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(status[r].ok())
          << "n=" << n << " rank " << r << ": " << status[r];
      ASSERT_EQ(want, data[r]) << "n=" << n << " rank " << r;
    }
  }
}

// Compressed gradients cross the gRPC ring as bfloat16 and come out with
// the same bits as over the in-process transport (the algorithm, not the
// transport, decides every rounding), identical on every rank.
TEST(GrpcTransportTest, BfloatRingAllReduceMatchesTheInProcessRingBitwise) {
  const int world = 3;
  const int64_t n = 300007;
  GrpcRing ring(world);
  ring.Start("job", 1);
  auto local = InProcessRing::Create(world);
  RingOptions o;
  o.chunk_elements = 16 * 1024;
  o.timeout = absl::Seconds(20);
  o.wire = WireType::kBfloat16;
  std::vector<std::vector<float>> grpc_data(world), local_data(world);
  std::vector<absl::Status> status(2 * world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    grpc_data[r] = local_data[r] = Input(r, n);
    threads.emplace_back([&, r] {
      status[r] = RingAllReduce(ring.at(r), CollectiveTag{1, 1, 0, 0},
                                grpc_data[r].data(), n, o);
    });
    threads.emplace_back([&, r] {
      status[world + r] =
          RingAllReduce(local->endpoint(r), CollectiveTag{1, 1, 0, 0},
                        local_data[r].data(), n, o);
    });
  }
  for (auto& t : threads) t.join();
  const std::vector<float> exact = Expected(world, n);
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    ASSERT_TRUE(status[world + r].ok()) << status[world + r];
    ASSERT_EQ(0, std::memcmp(local_data[0].data(), grpc_data[r].data(),
                             sizeof(float) * n))
        << "rank " << r;
  }
  int64_t rounded = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (grpc_data[0][i] != exact[i]) ++rounded;
  }
  EXPECT_GT(rounded, n / 2) << "the inputs are not bfloat16 values, so most "
                               "sums must differ from the float32 ones";
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
  SendTracker sends;
  ASSERT_TRUE(stale
                  .SendToNext(CollectiveTag{1, 5, 0, 0}, &x, 1,
                              WireType::kFloat32, sends)
                  .ok());
  // The refusal comes back to the sender as a broken send.
  absl::Status s;
  for (int i = 0; i < 100; ++i) {
    s = stale.SendToNext(CollectiveTag{1, 5, 0, 1}, &x, 1, WireType::kFloat32,
                         sends);
    if (!s.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("stale generation"));
  // Refused or dropped, every payload was let go of.
  EXPECT_TRUE(sends.WaitIdle(absl::Now() + absl::Seconds(5)))
      << sends.in_flight() << " sends still in flight";
  // The current generation's receiver never saw it.
  float got = 0;
  absl::Status r = ring.at(1).RecvFromPrev(
      CollectiveTag{1, 5, 0, 0}, absl::Now() + absl::Milliseconds(200), &got, 1,
      WireType::kFloat32, RecvOp::kCopy);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r)) << r;
  EXPECT_EQ(got, 0.0f);
}

v1::RingHeader Header(const std::string& job, int64_t generation,
                      int from_rank) {
  v1::RingHeader h;
  h.set_job(job);
  h.set_generation(generation);
  h.set_from_rank(from_rank);
  return h;
}

// Delivers `bytes` under `h` with the checksum a sender would have set.
absl::Status DeliverSealed(GrpcRingTransport& t, v1::RingHeader h,
                           std::string bytes) {
  RingPayload payload(std::move(bytes));
  h.set_checksum(RingChecksum(h, payload));
  return t.Deliver(h, std::move(payload));
}

TEST(GrpcTransportTest, WrongSenderOrLengthIsRefused) {
  GrpcRing ring(3);
  ring.Start("job", 1);
  absl::Status s = DeliverSealed(ring.at(1), Header("job", 1, 2),
                                 std::string(8, '\0'));
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("only rank 0 sends to rank 1"));
  // Once refused, the rank's waits fail with the reason.
  float got[2] = {0, 0};
  absl::Status r = ring.at(1).RecvFromPrev(
      CollectiveTag{1, 0, 0, 0}, absl::Now() + absl::Seconds(5), got, 2,
      WireType::kFloat32, RecvOp::kCopy);
  EXPECT_THAT(r.message(), HasSubstr("only rank 0 sends"));

  s = DeliverSealed(ring.at(2), Header("job", 1, 1), std::string(7, 'x'));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("7 bytes"));

  s = DeliverSealed(ring.at(0), Header("another", 1, 2), "");
  EXPECT_THAT(s.message(), HasSubstr("job \"another\""));
}

// A previous rank is never more than a step ahead (it needs this rank's
// part of every step): a message for a step further on is refused, not
// buffered.
TEST(GrpcTransportTest, AMessageFarAheadIsRefusedNotBuffered) {
  GrpcRing ring(2);
  ring.Start("job", 1);
  v1::RingHeader h = Header("job", 1, 0);
  h.set_step(5);
  const float one = 1;
  const std::string bytes(reinterpret_cast<const char*>(&one), sizeof(one));
  ASSERT_TRUE(DeliverSealed(ring.at(1), h, bytes).ok());
  float got = 0;
  ASSERT_TRUE(ring.at(1)
                  .RecvFromPrev(CollectiveTag{1, 5, 0, 0},
                                absl::Now() + absl::Seconds(5), &got, 1,
                                WireType::kFloat32, RecvOp::kCopy)
                  .ok());
  EXPECT_EQ(got, 1);
  h.set_step(7);  // two ahead: the ring's pipelining allows it
  EXPECT_TRUE(DeliverSealed(ring.at(1), h, bytes).ok());
  h.set_step(8);
  const absl::Status s = DeliverSealed(ring.at(1), h, bytes);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("from rank 0: this rank's collectives are at step 5, "
                        "and its previous rank cannot be more than 2 steps "
                        "ahead"));
}

// With cluster.ring_checksum, a bit flipped on the way, in the payload or
// in the header's tag, fails the receive (and so its collective and step),
// naming the sender.
TEST(GrpcTransportTest, AMessageDamagedOnTheWayFailsTheReceive) {
  const float two[2] = {1.5f, -2.0f};
  const std::string bytes(reinterpret_cast<const char*>(two), sizeof(two));
  v1::RingHeader h = Header("job", 1, 0);
  h.set_step(3);
  h.set_payload_bytes(8);
  h.set_checksum(RingChecksum(h, RingPayload(bytes)));
  auto receive = [](GrpcRingTransport& t, int chunk) {
    float dst[2] = {9, 9};
    return t.RecvFromPrev(CollectiveTag{1, 3, 0, chunk},
                          absl::Now() + absl::Seconds(5), dst, 2,
                          WireType::kFloat32, RecvOp::kAdd);
  };
  {
    GrpcRing ring(2);
    ring.Start("job", 1, /*checksum=*/true);
    std::string flipped = bytes;
    flipped[5] ^= 0x10;
    ASSERT_TRUE(ring.at(1).Deliver(h, RingPayload(flipped)).ok());
    const absl::Status r = receive(ring.at(1), 0);
    EXPECT_TRUE(absl::IsDataLoss(r)) << r;
    EXPECT_THAT(r.message(),
                HasSubstr("refused generation 1 step 3 bucket 0 chunk 0 from "
                          "rank 0: its checksum"));
    EXPECT_THAT(r.message(), HasSubstr("damaged on the way; the step is "
                                       "abandoned, its update never made"));
    EXPECT_EQ(ring.at(1).suspect_rank(), 0);
    // The transport has failed: later receives fail with the same reason.
    EXPECT_TRUE(absl::IsDataLoss(receive(ring.at(1), 1)));
  }
  {
    // The same payload under a tag damaged on the way (chunk 0 -> chunk 1):
    // summed into the wrong place it would be as wrong as a flipped value.
    GrpcRing ring(2);
    ring.Start("job", 1, /*checksum=*/true);
    v1::RingHeader moved = h;
    moved.set_chunk(1);
    ASSERT_TRUE(ring.at(1).Deliver(moved, RingPayload(bytes)).ok());
    EXPECT_TRUE(absl::IsDataLoss(receive(ring.at(1), 1)));
  }
  {
    GrpcRing ring(2);
    ring.Start("job", 1, /*checksum=*/true);
    ASSERT_TRUE(ring.at(1).Deliver(h, RingPayload(bytes)).ok());
    EXPECT_TRUE(receive(ring.at(1), 0).ok());
  }
  {
    // Without cluster.ring_checksum nothing is checked: the flip is summed.
    GrpcRing ring(2);
    ring.Start("job", 1);
    std::string flipped = bytes;
    flipped[5] ^= 0x10;
    ASSERT_TRUE(ring.at(1).Deliver(h, RingPayload(flipped)).ok());
    EXPECT_TRUE(receive(ring.at(1), 0).ok());
  }
}

TEST(GrpcTransportTest, AMessageOfTheWrongLengthIsRefusedAndNotWritten) {
  GrpcRing ring(2);
  ring.Start("job", 1);
  float four[4] = {1, 2, 3, 4};
  v1::RingHeader h = Header("job", 1, 0);
  h.set_step(3);
  ASSERT_TRUE(DeliverSealed(ring.at(1), h,
                            std::string(reinterpret_cast<const char*>(four),
                                        12))
                  .ok());
  float dst[4] = {9, 9, 9, 9};
  absl::Status r = ring.at(1).RecvFromPrev(CollectiveTag{1, 3, 0, 0},
                                           absl::Now() + absl::Seconds(5), dst,
                                           4, WireType::kFloat32, RecvOp::kAdd);
  EXPECT_TRUE(absl::IsInvalidArgument(r)) << r;
  EXPECT_THAT(
      r.message(),
      HasSubstr("expected 16 bytes (4 float32 values), received 12 bytes"));
  for (float v : dst) EXPECT_EQ(v, 9.0f);
}

// The payload slice of an encoded message is the caller's memory: a change
// made after encoding shows in what is decoded, and the tracker counts the
// send until the last reference to the message is gone.
TEST(GrpcTransportTest, ASmallSendIsReleasedOnceWrittenNotWhenTheStreamEnds) {
  GrpcRing ring(2);
  ring.Start("job", 1);
  const float x = 2.5f;
  SendTracker sends;
  ASSERT_TRUE(ring.at(0)
                  .SendToNext(CollectiveTag{1, 1, 0, 0}, &x, 1,
                              WireType::kFloat32, sends)
                  .ok());
  float got = 0;
  ASSERT_TRUE(ring.at(1)
                  .RecvFromPrev(CollectiveTag{1, 1, 0, 0},
                                absl::Now() + absl::Seconds(5), &got, 1,
                                WireType::kFloat32, RecvOp::kCopy)
                  .ok());
  EXPECT_EQ(got, 2.5f);
  EXPECT_TRUE(sends.WaitIdle(absl::Now() + absl::Seconds(2)))
      << sends.in_flight() << " send(s) still held by gRPC";
}

TEST(GrpcTransportTest, AbortEndsAWaitAtOnce) {
  GrpcRing ring(2);
  ring.Start("job", 1);
  // The abort comes once the receive below is blocked (bounded: 10 s).
  std::thread t([&] {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!ring.at(0).OldestWait().waiting && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_TRUE(ring.at(0).OldestWait().waiting) << "no receive waited";
    ring.node(0).service.AbortCurrent(absl::CancelledError("job cancelled"));
  });
  const absl::Time t0 = absl::Now();
  float got = 0;
  absl::Status r = ring.at(0).RecvFromPrev(
      CollectiveTag{1, 0, 0, 0}, absl::Now() + absl::Seconds(30), &got, 1,
      WireType::kFloat32, RecvOp::kCopy);
  t.join();
  EXPECT_TRUE(absl::IsAborted(r)) << r;
  EXPECT_THAT(r.message(), HasSubstr("job cancelled"));
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
  SendTracker sends;
  absl::Status s =
      t.SendToNext(CollectiveTag{1, 0, 0, 0}, &x, 1, WireType::kFloat32, sends);
  ASSERT_TRUE(s.ok());
  // wait_for_ready keeps retrying a refused connection; Abort ends it.
  float got = 0;
  absl::Status r = t.RecvFromPrev(CollectiveTag{1, 0, 0, 0},
                                  absl::Now() + absl::Milliseconds(300), &got,
                                  1, WireType::kFloat32, RecvOp::kCopy);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r)) << r;
  EXPECT_THAT(r.message(), HasSubstr("rank 1 (127.0.0.1:1)"));
  EXPECT_EQ(sends.in_flight(), 1) << "queued behind the connection";
  t.Abort(absl::CancelledError("test over"));
  EXPECT_TRUE(sends.WaitIdle(absl::Now() + absl::Seconds(5)))
      << "Abort must let go of the queued payload";
}

// A next rank that cannot be reached (its advertised port refuses, or a
// socket that completes TCP's handshake but never speaks gRPC) fails the
// transport within the connect time, naming that rank as the suspect: the
// lane's stream would otherwise wait for its connection for ever, and the
// coordinator could only guess whom to blame from two waiting ranks.
TEST(GrpcTransportTest, AnUnreachableNextRankFailsNamingIt) {
  // Listening, never accepting: the kernel completes the handshake.
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(silent, 16), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string silent_address =
      "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  GrpcRing ring(2);
  for (const std::string& next : {std::string("127.0.0.1:1"), silent_address}) {
    SCOPED_TRACE(next);
    GrpcRingOptions o;
    o.job = "job";
    o.generation = 1;
    o.rank = 0;
    o.peers = {ring.peers()[0], next};
    o.connect_timeout_ms = 1000;
    GrpcRingTransport t(o);
    const float x = 1.0f;
    SendTracker sends;
    ASSERT_TRUE(t.SendToNext(CollectiveTag{1, 0, 0, 0}, &x, 1,
                             WireType::kFloat32, sends)
                    .ok());
    const absl::Time t0 = absl::Now();
    float got = 0;
    absl::Status r = t.RecvFromPrev(CollectiveTag{1, 0, 0, 0},
                                    absl::Now() + absl::Seconds(30), &got, 1,
                                    WireType::kFloat32, RecvOp::kCopy);
    EXPECT_TRUE(absl::IsUnavailable(r)) << r;
    EXPECT_THAT(r.message(), HasSubstr("could not connect to rank 1 (" + next +
                                       ") within 1.0 s"));
    EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
    EXPECT_EQ(t.suspect_rank(), 1);
    EXPECT_TRUE(sends.WaitIdle(absl::Now() + absl::Seconds(5)))
        << "the failure must let go of the queued payload";
  }
  close(silent);
}

// A connected ring is left alone by the connect watch: a transport that
// lives past the connect time still sends and receives.
TEST(GrpcTransportTest, AConnectedRingOutlivesTheConnectTime) {
  GrpcRing ring(2);
  ring.Start("job", 1, /*checksum=*/false, /*connect_timeout_ms=*/2000);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  std::thread t([&] {
    const float x = 2.5f;
    SendTracker sends;
    ASSERT_TRUE(ring.at(0)
                    .SendToNext(CollectiveTag{1, 0, 0, 0}, &x, 1,
                                WireType::kFloat32, sends)
                    .ok());
    EXPECT_TRUE(sends.WaitIdle(absl::Now() + absl::Seconds(10)));
  });
  float got = 0;
  absl::Status r = ring.at(1).RecvFromPrev(
      CollectiveTag{1, 0, 0, 0}, absl::Now() + absl::Seconds(10), &got, 1,
      WireType::kFloat32, RecvOp::kCopy);
  t.join();
  EXPECT_TRUE(r.ok()) << r;
  EXPECT_EQ(got, 2.5f);
  EXPECT_EQ(ring.at(0).suspect_rank(), -1);
}

// A collective whose next rank never takes its messages cannot leave them
// pointing into a buffer the caller is about to free: it times out, aborts
// the transport (dropping them) and only then returns.
TEST(GrpcTransportTest, ACollectiveReturnsOnlyOnceItsSendsAreReleased) {
  GrpcRing ring(2);
  GrpcRingOptions o;
  o.job = "job";
  o.generation = 1;
  o.rank = 0;
  o.peers = {ring.peers()[0], "127.0.0.1:1"};
  GrpcRingTransport t(o);
  std::vector<float> data(1 << 16, 1.0f);
  RingOptions ro;
  ro.chunk_elements = 4096;
  ro.timeout = absl::Milliseconds(300);
  const absl::Time t0 = absl::Now();
  absl::Status s = RingAllReduce(t, CollectiveTag{1, 0, 0, 0}, data.data(),
                                 static_cast<int64_t>(data.size()), ro);
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  // The transport was aborted by the collective: later sends fail at once.
  SendTracker sends;
  EXPECT_FALSE(t.SendToNext(CollectiveTag{1, 1, 0, 0}, data.data(), 1,
                            WireType::kFloat32, sends)
                   .ok());
}

}  // namespace
}  // namespace lockstep
