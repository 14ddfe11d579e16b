// A Transport whose ranks are threads of one process: for tests of the
// collective algorithms (multi-rank tests run N ranks as threads over it).
#ifndef LOCKSTEP_CORE_COLLECTIVE_IN_PROCESS_TRANSPORT_H_
#define LOCKSTEP_CORE_COLLECTIVE_IN_PROCESS_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/collective/transport.h"

namespace lockstep {

// Owns `world` connected endpoints: endpoint(r) sends into the mailbox of
// endpoint((r + 1) % world). Mailboxes are keyed by the full tag and
// unbounded (a send never blocks). A second message with a tag that is still
// waiting is refused like a stale one (see SetCurrentGeneration).
// Thread-safe. The endpoints live as long as the ring.
class InProcessRing {
 public:
  // nullptr when world < 1.
  static std::unique_ptr<InProcessRing> Create(int world);
  ~InProcessRing();

  InProcessRing(const InProcessRing&) = delete;
  InProcessRing& operator=(const InProcessRing&) = delete;

  int world_size() const { return static_cast<int>(endpoints_.size()); }

  // The transport of rank `rank` (0 <= rank < world), owned by the ring.
  Transport& endpoint(int rank);

  // Aborts every endpoint with `reason` (what a cancelled job does).
  void AbortAll(const absl::Status& reason);

  // Test hook: delivers `bytes` to `rank` as if its previous rank had sent
  // them with `tag` as float32 values, through the same checks as a real
  // send.
  void InjectFromPrev(int rank, const CollectiveTag& tag, std::string bytes);

  // Test hook: the generation endpoint `rank` is in (initially 0). A message
  // of an older generation is refused on arrival: it is dropped, and from
  // then on every RecvFromPrev of that endpoint (pending or future, any tag)
  // fails with FailedPrecondition("rank P sent a message for stale
  // generation G (current H): refused").
  void SetCurrentGeneration(int rank, int64_t generation);

 private:
  class Endpoint;

  explicit InProcessRing(int world);

  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_COLLECTIVE_IN_PROCESS_TRANSPORT_H_
