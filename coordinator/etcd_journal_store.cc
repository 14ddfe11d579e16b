#include "coordinator/etcd_journal_store.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep {
namespace {

constexpr char kMembership[] = "membership";
constexpr char kJob[] = "job/";

}  // namespace

EtcdJournalStore::EtcdJournalStore(EtcdClient* etcd, const LeaderLease* lease,
                                   std::string prefix)
    : journal_prefix_(absl::StrCat(prefix, "/journal/")),
      etcd_(etcd),
      lease_(lease) {}

std::string EtcdJournalStore::Where() const {
  return absl::StrCat("etcd ", etcd_->endpoint(), " ", journal_prefix_);
}

absl::StatusOr<std::optional<lockstep::v1::Journal>> EtcdJournalStore::Read() {
  absl::StatusOr<std::vector<etcdserverpb::KeyValue>> kvs =
      etcd_->GetPrefix(journal_prefix_);
  if (!kvs.ok()) return kvs.status();
  if (kvs->empty()) return std::optional<lockstep::v1::Journal>();
  lockstep::v1::Journal journal;
  bool membership = false;
  std::map<std::string, std::string> read;
  for (const etcdserverpb::KeyValue& kv : *kvs) {  // in key order
    const std::string name = kv.key().substr(journal_prefix_.size());
    read[kv.key()] = kv.value();
    if (name == kMembership) {
      lockstep::v1::Journal part;
      if (!part.ParseFromString(kv.value()) || part.jobs_size() != 0) {
        return Damaged(absl::StrCat("key ", kv.key(), " is not a membership"));
      }
      part.mutable_jobs()->Swap(journal.mutable_jobs());
      journal = std::move(part);
      membership = true;
    } else if (absl::StartsWith(name, kJob)) {
      int64_t index = 0;
      if (!absl::SimpleAtoi(name.substr(sizeof(kJob) - 1), &index) ||
          !journal.add_jobs()->ParseFromString(kv.value())) {
        return Damaged(absl::StrCat("key ", kv.key(), " is not a job"));
      }
    } else {
      return Damaged(absl::StrCat("unknown key ", kv.key()));
    }
  }
  if (!membership) {
    return Damaged(
        absl::StrCat("key ", journal_prefix_, kMembership, " is missing"));
  }
  absl::MutexLock lock(&mu_);
  written_ = std::move(read);
  return std::optional<lockstep::v1::Journal>(std::move(journal));
}

int64_t EtcdJournalStore::term() const { return lease_->term(); }

std::string EtcdJournalStore::NotLeading() const {
  if (deposed_.load()) {
    absl::MutexLock lock(&mu_);
    return deposed_why_;
  }
  return lease_->NotLeading();
}

absl::Status EtcdJournalStore::Write(const lockstep::v1::Journal& journal) {
  const std::string not_leading = NotLeading();
  if (!not_leading.empty()) {
    refused_.fetch_add(1);
    return absl::FailedPreconditionError(
        absl::StrCat("journal write refused: ", not_leading));
  }
  // Every key's bytes: the jobs first, the membership (which names them
  // through their workers) last, so a write cut into several
  // transactions never names a job that is not there yet.
  std::vector<std::pair<std::string, std::string>> keys;
  for (int i = 0; i < journal.jobs_size(); ++i) {
    keys.emplace_back(absl::StrFormat("%s%s%06d", journal_prefix_, kJob, i),
                      journal.jobs(i).SerializeAsString());
  }
  lockstep::v1::Journal membership = journal;
  membership.clear_jobs();
  keys.emplace_back(absl::StrCat(journal_prefix_, kMembership),
                    membership.SerializeAsString());

  absl::MutexLock lock(&mu_);
  std::vector<etcdserverpb::RequestOp> ops;
  std::map<std::string, std::string> after;
  for (auto& [key, bytes] : keys) {
    auto it = written_.find(key);
    if (it == written_.end() || it->second != bytes) {
      etcdserverpb::PutRequest* put = ops.emplace_back().mutable_request_put();
      put->set_key(key);
      put->set_value(bytes);
    }
    after[key] = std::move(bytes);
  }
  for (const auto& [key, bytes] : written_) {
    if (!after.count(key)) {
      ops.emplace_back().mutable_request_delete_range()->set_key(key);
    }
  }
  const int64_t term = lease_->term();
  for (size_t first = 0; first < ops.size(); first += kMaxOpsPerTxn) {
    etcdserverpb::TxnRequest txn;
    *txn.add_compare() = EtcdClient::CreateRevisionIs(lease_->key(), term);
    for (size_t i = first; i < std::min(ops.size(), first + kMaxOpsPerTxn);
         ++i) {
      *txn.add_success() = ops[i];
    }
    txn.add_failure()->mutable_request_range()->set_key(lease_->key());
    absl::StatusOr<etcdserverpb::TxnResponse> result = etcd_->Txn(txn);
    if (!result.ok()) return result.status();
    if (!result->succeeded()) {
      std::string now = "is absent";
      if (const etcdserverpb::KeyValue* kv =
              EtcdClient::FailureRangeKey(*result)) {
        now = absl::StrFormat("names %s (term %d)", kv->value(),
                              kv->create_revision());
      }
      deposed_why_ = absl::StrFormat(
          "etcd refused this coordinator's write: the leader key %s %s, "
          "not this coordinator's term %d; it no longer leads",
          lease_->key(), now, term);
      deposed_ = true;
      refused_.fetch_add(1);
      return absl::FailedPreconditionError(
          absl::StrCat("journal write refused: ", deposed_why_));
    }
    for (size_t i = first; i < std::min(ops.size(), first + kMaxOpsPerTxn);
         ++i) {
      const etcdserverpb::RequestOp& op = ops[i];
      if (op.has_request_put()) {
        written_[op.request_put().key()] = op.request_put().value();
      } else {
        written_.erase(op.request_delete_range().key());
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep
