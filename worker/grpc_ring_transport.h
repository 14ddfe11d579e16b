// The ring transport between worker daemons over gRPC (DESIGN "Ring
// all-reduce"): rank r keeps `lanes` long-lived Push streams to rank r+1;
// rank r+1's CollectiveService routes them into the GrpcRingTransport of the
// matching (job, generation), which checks every message before its bytes
// reach a mailbox keyed by tag. Push is raw on both ends (proto/
// collective.proto has the framing): a message's floats go out of the
// caller's buffer and are summed out of gRPC's receive slices, with no copy
// in between.
#ifndef LOCKSTEP_WORKER_GRPC_RING_TRANSPORT_H_
#define LOCKSTEP_WORKER_GRPC_RING_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/collective/transport.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/collective.pb.h"
#include "rpc/rpc_util.h"
#include "rpc/tls.h"
#include "worker/decaying_sum.h"
#include "worker/lane_stream.h"
#include "worker/ring_message.h"

namespace lockstep {

inline constexpr int kConnectTimeoutMs = 15000;

struct GrpcRingOptions {
  std::string job;
  int64_t generation = 0;
  int rank = 0;
  std::vector<std::string> peers;  // collective addresses in rank order
  int lanes = 2;                   // parallel streams to the next rank
  TlsFiles tls;                    // the worker's certificate; off: plaintext
  // A stream to the next rank whose data stays unacknowledged this long is
  // broken (the neighbour then reports that rank): MakeChannel's
  // keepalive_timeout_ms. Longer rides through longer partitions.
  int keepalive_timeout_ms = kKeepaliveTimeoutMs;
  // A next rank not connected within this long is unreachable (its
  // advertised address refuses, drops or never speaks gRPC) and reported.
  // Longer than the keepalive: a restarted peer's name may still resolve
  // to its old address for a while, and a loaded host's TLS handshake is
  // slow; shorter than the coordinator's hang timeout (30 s).
  int connect_timeout_ms = kConnectTimeoutMs;
  // The job's cluster.ring_checksum: messages carry an XXH3-64 of header
  // and payload, and each receive checks it as it sums.
  bool checksum = false;
};

class GrpcRingTransport : public Transport {
 public:
  explicit GrpcRingTransport(GrpcRingOptions options);
  // Closes the outgoing streams (cancelling them if aborted, or if they do
  // not close within seconds) and waits until gRPC is done with them.
  ~GrpcRingTransport() override;

  int rank() const override { return options_.rank; }
  int world_size() const override {
    return static_cast<int>(options_.peers.size());
  }
  absl::Status SendToNext(const CollectiveTag& tag, const void* data,
                          int64_t count, WireType type,
                          const SendTracker& sends) override;
  absl::Status RecvFromPrev(const CollectiveTag& tag, absl::Time deadline,
                            float* dst, int64_t count, WireType type,
                            RecvOp op) override;
  void Abort(const absl::Status& reason) override;

  const std::string& job() const { return options_.job; }
  // Streams to the next rank (0 in a ring of one).
  int lanes() const { return static_cast<int>(lanes_.size()); }
  int64_t generation() const { return options_.generation; }
  int prev_rank() const { return (rank() - 1 + world_size()) % world_size(); }
  int next_rank() const { return (rank() + 1) % world_size(); }

  // Called by CollectiveService for each incoming message, `arrived` when
  // gRPC had read it. Returns the refusal (FailedPrecondition /
  // InvalidArgument, naming what is wrong) and then fails every Recv with
  // it; nothing refused reaches a mailbox.
  absl::Status Deliver(const lockstep::v1::RingHeader& header,
                       RingPayload payload, absl::Time arrived = absl::Now());
  // The incoming stream from the previous rank broke (not a clean close).
  void LinkBroken(const std::string& detail);

  // The oldest receive now blocked (for hang diagnosis); waiting is false
  // when none is.
  struct Wait {
    bool waiting = false;
    int from_rank = -1;
    CollectiveTag tag;
    double seconds = 0;
  };
  Wait OldestWait();
  // The neighbour the first failure points at (a broken or refused stream,
  // a send that failed, a receive that timed out); -1 when none does (an
  // abort, no failure).
  int suspect_rank();

  // The link from the previous rank, recently (decaying sums, half-life
  // 10 s): payload bytes delivered and their transit seconds, each from
  // the sender's clock when it queued the message to this host's when gRPC
  // had read it.
  struct LinkTiming {
    double bytes = 0;
    double seconds = 0;
  };
  LinkTiming RecentLink();

 private:
  void Fail(const absl::Status& status, int suspect = -1);
  // Until every lane's channel is READY: past the connect time, fails the
  // transport naming the next rank (a lane's stream waits for its
  // connection, retrying, and would not fail by itself).
  void WatchConnect();

  const GrpcRingOptions options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;   // one per lane
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // one per lane
  std::vector<RingLaneStream*> lanes_;  // each lives until its stream is done
  absl::Notification stop_watch_;
  std::thread connect_watch_;  // WatchConnect; joined before lanes_ go

  absl::Mutex mu_;
  absl::CondVar arrived_;
  // Messages delivered and not yet received; their checksums are checked by
  // the receive, on the collective's thread (not gRPC's).
  absl::flat_hash_map<CollectiveTag, RingMessage> mailbox_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // first failure; sticky
  int suspect_ ABSL_GUARDED_BY(mu_) = -1;
  // Receives in progress and since when.
  absl::flat_hash_map<CollectiveTag, absl::Time> waiting_ ABSL_GUARDED_BY(mu_);
  // The highest step a receive has asked for (-1: none yet). The previous
  // rank needs this rank's part of every step it completes, so it is never
  // more than a step ahead: a message beyond kMaxStepsAhead is refused, and
  // at most kMaxUnreadMessages wait unread (a hostile or broken peer cannot
  // fill this process's memory).
  int64_t asked_step_ ABSL_GUARDED_BY(mu_) = -1;
  DecayingSum link_bytes_ ABSL_GUARDED_BY(mu_);
  DecayingSum link_seconds_ ABSL_GUARDED_BY(mu_);
};

inline constexpr int64_t kMaxStepsAhead = 2;
inline constexpr size_t kMaxUnreadMessages = size_t{1} << 16;

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_GRPC_RING_TRANSPORT_H_
