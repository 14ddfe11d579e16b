// A small synchronous client of etcd's v3 API (proto/etcd.proto): reads,
// transactions and leases, over one or more endpoints. The coordinators'
// leader election (coordinator/leader_lease.h) and journal
// (coordinator/etcd_journal_store.h) are built on it.
//
// Endpoints are "http://host:port", "https://host:port" (TLS with the
// given CA, and the client certificate when one is given) or "host:port".
// A call goes to the endpoint that answered last; when it cannot reach it
// (UNAVAILABLE) or gets no answer in time (DEADLINE_EXCEEDED, as from a
// member cut off from its quorum), it tries the next one, each once.
#ifndef LOCKSTEP_COORDINATOR_ETCD_CLIENT_H_
#define LOCKSTEP_COORDINATOR_ETCD_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/etcd.grpc.pb.h"
#include "rpc/tls.h"

namespace lockstep {

struct EtcdOptions {
  // Comma-separated in the flag (--etcd); at least one.
  std::vector<std::string> endpoints;
  // For https:// endpoints: the CA (required), and a client certificate
  // and key when etcd asks for one.
  TlsFiles tls;
  // Each call's deadline on one endpoint.
  absl::Duration call_timeout = absl::Seconds(2);
};

// "http://a:2379,https://b:2379" -> its endpoints; InvalidArgument naming
// `flag` for an empty list or entry, another scheme, or an https://
// endpoint without tls.ca.
absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    const std::string& list, bool have_ca, const std::string& flag);

class EtcdClient {
 public:
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(
      EtcdOptions options);

  // The key's current value, or nullopt when it is absent.
  absl::StatusOr<std::optional<etcdserverpb::KeyValue>> Get(
      const std::string& key);
  // Every key under `prefix`, in key order.
  absl::StatusOr<std::vector<etcdserverpb::KeyValue>> GetPrefix(
      const std::string& prefix);
  // The store's revision after the write.
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value,
                              int64_t lease = 0);
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(
      const etcdserverpb::TxnRequest& request);
  // A lease of `ttl_seconds` (etcd may raise it to its minimum).
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> GrantLease(
      int64_t ttl_seconds);
  // The lease's TTL after this keep-alive: <= 0 when it has expired.
  // Each endpoint gets `timeout` (a keep-alive must not wait out the TTL
  // on one that hangs); *sent is when the answered attempt was sent.
  absl::StatusOr<int64_t> KeepAlive(
      int64_t lease, absl::Duration timeout,
      std::chrono::steady_clock::time_point* sent);
  absl::Status RevokeLease(int64_t lease);

  // The endpoint that answered last ("http://127.0.0.1:2379").
  std::string endpoint() const;

  // [prefix, PrefixEnd(prefix)) is every key starting with prefix.
  static std::string PrefixEnd(const std::string& prefix);
  // A transaction's compare: create_revision(key) == revision (0: the key
  // is absent).
  static etcdserverpb::Compare CreateRevisionIs(const std::string& key,
                                                int64_t revision);
  // The key a failed transaction's first failure op (a Range) read, or
  // null when it is absent.
  static const etcdserverpb::KeyValue* FailureRangeKey(
      const etcdserverpb::TxnResponse& response);

 private:
  explicit EtcdClient(EtcdOptions options);
  // Runs `call` on the current endpoint, then on each other one while it
  // fails with UNAVAILABLE or DEADLINE_EXCEEDED, each with `timeout`
  // (zero: options_.call_timeout); `what` names the call in errors ("etcd
  // Txn").
  absl::Status Call(const char* what,
                    const std::function<grpc::Status(
                        int endpoint, grpc::ClientContext* context)>& call,
                    absl::Duration timeout = absl::ZeroDuration());

  const EtcdOptions options_;
  std::vector<std::unique_ptr<etcdserverpb::KV::Stub>> kv_;
  std::vector<std::unique_ptr<etcdserverpb::Lease::Stub>> lease_;
  std::atomic<int> current_{0};
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_ETCD_CLIENT_H_
