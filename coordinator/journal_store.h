// Where the coordinator's journal lives (DESIGN "The coordinator's
// journal"): the whole state it last acted on (lockstep.v1.Journal),
// replaced before each job or membership transition takes effect and read
// back when a coordinator starts. The coordinator turns its state into a
// Journal and back (state_journal.cc); a store only keeps the
// message. FileJournalStore: a file on the shared storage, for one
// coordinator. EtcdJournalStore (coordinator/etcd_journal_store.h): keys
// in etcd shared by coordinators in standby, each write fenced by the
// leader's term.
#ifndef LOCKSTEP_COORDINATOR_JOURNAL_STORE_H_
#define LOCKSTEP_COORDINATOR_JOURNAL_STORE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/journal.pb.h"

namespace lockstep {

class JournalStore {
 public:
  virtual ~JournalStore() = default;
  // Where the journal is, for messages ("/srv/lockstep/coordinator/
  // journal.pb").
  virtual std::string Where() const = 0;
  // The journal last written, or nullopt when there is none. A damaged
  // one: DataLoss, from Damaged().
  virtual absl::StatusOr<std::optional<lockstep::v1::Journal>> Read() = 0;
  // Replaces the journal whole: a failure leaves the previous one.
  virtual absl::Status Write(const lockstep::v1::Journal& journal) = 0;
  // "" while this coordinator may write; else why not ("a standby
  // coordinator: the leader is ..."). A store that is not shared always
  // may.
  virtual std::string NotLeading() const { return ""; }
  // This coordinator's leadership term (etcd: its leader key's create
  // revision); 0 for a store that is not shared. Its checkpoint commits
  // record it (CheckpointStore::set_term).
  virtual int64_t term() const { return 0; }
  // Writes refused because this coordinator no longer led.
  virtual int64_t refused_writes() const { return 0; }
  // DataLoss: "the journal WHERE is damaged (WHY); move it aside ...".
  absl::Status Damaged(const std::string& why) const;
};

// STORAGE/coordinator/journal.pb: "LSJRNL01", the CRC32C of the payload
// (4 bytes, little-endian) and the serialized Journal, replaced atomically
// (a temporary file, fsync, rename, fsync of the folder), so a
// coordinator killed at any moment restarts from the last transition it
// acted on.
class FileJournalStore : public JournalStore {
 public:
  explicit FileJournalStore(std::string storage_dir);
  std::string Where() const override { return path_; }
  absl::StatusOr<std::optional<lockstep::v1::Journal>> Read() override;
  absl::Status Write(const lockstep::v1::Journal& journal) override;

 private:
  const std::string path_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOURNAL_STORE_H_
