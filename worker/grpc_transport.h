// The ring transport between worker daemons over gRPC (DESIGN "Ring
// all-reduce"): rank r keeps `lanes` long-lived Push streams to rank r+1;
// rank r+1's CollectiveService routes them into the GrpcRingTransport of the
// matching (job, generation), which checks every message before its bytes
// reach a mailbox keyed by tag.
#ifndef LOCKSTEP_WORKER_GRPC_TRANSPORT_H_
#define LOCKSTEP_WORKER_GRPC_TRANSPORT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/log.h"
#include "core/transport.h"
#include "proto/collective.grpc.pb.h"
#include "proto/tls.h"

namespace lockstep {

struct GrpcRingOptions {
  std::string job;
  int64_t generation = 0;
  int rank = 0;
  std::vector<std::string> peers;  // collective addresses in rank order
  int lanes = 2;                   // parallel streams to the next rank
  TlsFiles tls;                    // the worker's certificate; off: plaintext
};

// Call once at process start in processes that run the ring. Every ring
// message lands in a fresh ~1 MiB buffer; by default glibc serves those
// with mmap and unmaps them on free, so each message re-faults and zeroes
// its pages (about a fifth of a rank's CPU). Raising the mmap and trim
// thresholds keeps the buffers in the reused heap.
void KeepMessageBuffersResident();

class GrpcRingTransport : public Transport {
 public:
  explicit GrpcRingTransport(GrpcRingOptions options);
  // Closes the outgoing streams (cancelling them if aborted) and joins the
  // sender threads.
  ~GrpcRingTransport() override;

  int rank() const override { return options_.rank; }
  int world_size() const override {
    return static_cast<int>(options_.peers.size());
  }
  absl::Status SendToNext(const CollectiveTag& tag, const float* data,
                          int64_t count) override;
  absl::StatusOr<std::string> RecvFromPrev(const CollectiveTag& tag,
                                           absl::Time deadline) override;
  void Abort(const absl::Status& reason) override;

  const std::string& job() const { return options_.job; }
  int64_t generation() const { return options_.generation; }
  int prev_rank() const { return (rank() - 1 + world_size()) % world_size(); }
  int next_rank() const { return (rank() + 1) % world_size(); }

  // Called by CollectiveService for each incoming message. Returns the
  // refusal (FailedPrecondition / InvalidArgument, naming what is wrong) and
  // then fails every Recv with it; nothing refused reaches a mailbox.
  absl::Status Deliver(lockstep::v1::CollectiveChunk& chunk);
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

 private:
  struct Lane {
    absl::Mutex mu;
    absl::CondVar cv;
    std::deque<std::unique_ptr<lockstep::v1::CollectiveChunk>> queue
        ABSL_GUARDED_BY(mu);
    bool closing ABSL_GUARDED_BY(mu) = false;
    std::unique_ptr<lockstep::v1::Collective::Stub> stub;
    std::thread thread;
  };
  void SendLoop(int lane_index);
  void Fail(const absl::Status& status, int suspect = -1);

  const GrpcRingOptions options_;
  std::vector<std::unique_ptr<Lane>> lanes_;

  absl::Mutex mu_;
  absl::CondVar arrived_;
  absl::flat_hash_map<CollectiveTag, std::string> mailbox_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // first failure; sticky
  int suspect_ ABSL_GUARDED_BY(mu_) = -1;
  // Receives in progress and since when.
  absl::flat_hash_map<CollectiveTag, absl::Time> waiting_ ABSL_GUARDED_BY(mu_);
  std::vector<grpc::ClientContext*> open_calls_ ABSL_GUARDED_BY(mu_);
};

// The gRPC service each worker daemon hosts for the whole of its life. It
// waits (bounded) for the transport of a stream's (job, generation) to be
// attached, refuses streams of older generations and other jobs, and feeds
// messages to the attached transport.
class CollectiveService final : public lockstep::v1::Collective::Service {
 public:
  // How long a stream may wait for its generation's transport to appear
  // (peers start a generation at slightly different times).
  explicit CollectiveService(absl::Duration attach_wait = absl::Seconds(30))
      : attach_wait_(attach_wait) {}

  // Refused streams are logged here (a peer that speaks out of turn).
  void SetLog(LogFn log) { log_ = std::move(log); }

  void Attach(std::shared_ptr<GrpcRingTransport> transport);
  // Detaches it if it is the attached one.
  void Detach(const GrpcRingTransport* transport);
  // Aborts the attached transport (the job was stopped): its waits return.
  void AbortCurrent(const absl::Status& reason);
  // The attached transport's OldestWait (not waiting when none is attached).
  GrpcRingTransport::Wait CurrentWait();

  grpc::Status Push(grpc::ServerContext* context,
                    grpc::ServerReader<lockstep::v1::CollectiveChunk>* reader,
                    lockstep::v1::PushAck* ack) override;

 private:
  grpc::Status Refuse(grpc::ServerContext* context, const absl::Status& why);

  const absl::Duration attach_wait_;
  LogFn log_;
  absl::Mutex mu_;
  std::shared_ptr<GrpcRingTransport> current_ ABSL_GUARDED_BY(mu_);
  // The newest generation ever attached per job: older ones are stale.
  absl::flat_hash_map<std::string, int64_t> newest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_GRPC_TRANSPORT_H_
