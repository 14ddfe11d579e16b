#include "coordinator/etcd_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace {

// "https://h:p" -> "h:p", *tls set; "http://h:p" and "h:p" -> "h:p".
std::string Target(const std::string& endpoint, bool* tls) {
  absl::string_view rest = endpoint;
  *tls = absl::ConsumePrefix(&rest, "https://");
  if (!*tls) absl::ConsumePrefix(&rest, "http://");
  return std::string(rest);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    const std::string& list, bool have_ca, const std::string& flag) {
  std::vector<std::string> endpoints;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    const std::string endpoint(absl::StripAsciiWhitespace(part));
    if (endpoint.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " \"", list,
          "\": an empty endpoint (give http://host:port, comma-separated)"));
    }
    bool tls = false;
    const std::string target = Target(endpoint, &tls);
    if (absl::StrContains(target, "://") || target.empty() ||
        absl::StrContains(target, '/')) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " \"", endpoint,
                       "\": not an etcd endpoint (give http://host:port, "
                       "https://host:port or host:port)"));
    }
    if (tls && !have_ca) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " \"", endpoint,
          "\" is https:// but --etcd-ca is not given (the CA that signed "
          "etcd's certificate)"));
    }
    endpoints.push_back(endpoint);
  }
  return endpoints;
}

EtcdClient::EtcdClient(EtcdOptions options) : options_(std::move(options)) {
  for (const std::string& endpoint : options_.endpoints) {
    bool tls = false;
    const std::string target = Target(endpoint, &tls);
    std::shared_ptr<grpc::Channel> channel =
        MakeChannel(target, tls ? options_.tls : TlsFiles{});
    kv_.push_back(etcdserverpb::KV::NewStub(channel));
    lease_.push_back(etcdserverpb::Lease::NewStub(channel));
  }
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(
    EtcdOptions options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("--etcd: no endpoint given");
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(options)));
}

std::string EtcdClient::endpoint() const {
  return options_.endpoints[current_.load() % options_.endpoints.size()];
}

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

etcdserverpb::Compare EtcdClient::CreateRevisionIs(const std::string& key,
                                                   int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::CREATE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_create_revision(revision);
  return compare;
}

const etcdserverpb::KeyValue* EtcdClient::FailureRangeKey(
    const etcdserverpb::TxnResponse& response) {
  const auto& responses = response.responses();
  if (responses.empty() || !responses[0].has_response_range() ||
      responses[0].response_range().kvs_size() == 0) {
    return nullptr;
  }
  return &responses[0].response_range().kvs(0);
}

absl::Status EtcdClient::Call(
    const char* what,
    const std::function<grpc::Status(int, grpc::ClientContext*)>& call,
    absl::Duration timeout) {
  if (timeout == absl::ZeroDuration()) timeout = options_.call_timeout;
  const int n = static_cast<int>(options_.endpoints.size());
  const int first = current_.load() % n;
  std::vector<std::string> failures;
  for (int i = 0; i < n; ++i) {
    const int e = (first + i) % n;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    grpc::Status status = call(e, &context);
    if (status.ok()) {
      current_.store(e);
      return absl::OkStatus();
    }
    const grpc::StatusCode code = status.error_code();
    if (code != grpc::StatusCode::UNAVAILABLE &&
        code != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return FromGrpc(status,
                      absl::StrCat(what, " on ", options_.endpoints[e]));
    }
    failures.push_back(
        absl::StrCat(options_.endpoints[e], ": ", status.error_message()));
  }
  return absl::UnavailableError(
      absl::StrCat(what, ": no etcd endpoint answered (",
                   absl::StrJoin(failures, "; "), ")"));
}

absl::StatusOr<std::optional<etcdserverpb::KeyValue>> EtcdClient::Get(
    const std::string& key) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  etcdserverpb::RangeResponse response;
  absl::Status status =
      Call("etcd Range", [&](int e, grpc::ClientContext* context) {
        return kv_[e]->Range(context, request, &response);
      });
  if (!status.ok()) return status;
  if (response.kvs_size() == 0) return std::nullopt;
  return response.kvs(0);
}

absl::StatusOr<std::vector<etcdserverpb::KeyValue>> EtcdClient::GetPrefix(
    const std::string& prefix) {
  etcdserverpb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  etcdserverpb::RangeResponse response;
  absl::Status status =
      Call("etcd Range", [&](int e, grpc::ClientContext* context) {
        return kv_[e]->Range(context, request, &response);
      });
  if (!status.ok()) return status;
  return std::vector<etcdserverpb::KeyValue>(response.kvs().begin(),
                                             response.kvs().end());
}

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key,
                                        const std::string& value,
                                        int64_t lease) {
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  etcdserverpb::PutResponse response;
  absl::Status status =
      Call("etcd Put", [&](int e, grpc::ClientContext* context) {
        return kv_[e]->Put(context, request, &response);
      });
  if (!status.ok()) return status;
  return response.header().revision();
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(
    const etcdserverpb::TxnRequest& request) {
  etcdserverpb::TxnResponse response;
  absl::Status status =
      Call("etcd Txn", [&](int e, grpc::ClientContext* context) {
        return kv_[e]->Txn(context, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<etcdserverpb::LeaseGrantResponse> EtcdClient::GrantLease(
    int64_t ttl_seconds) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse response;
  absl::Status status =
      Call("etcd LeaseGrant", [&](int e, grpc::ClientContext* context) {
        return lease_[e]->LeaseGrant(context, request, &response);
      });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::UnavailableError(
        absl::StrCat("etcd LeaseGrant: ", response.error()));
  }
  return response;
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(
    int64_t lease, absl::Duration timeout,
    std::chrono::steady_clock::time_point* sent) {
  etcdserverpb::LeaseKeepAliveResponse response;
  absl::Status status = Call(
      "etcd LeaseKeepAlive",
      [&](int e, grpc::ClientContext* context) {
        *sent = std::chrono::steady_clock::now();
        auto stream = lease_[e]->LeaseKeepAlive(context);
        etcdserverpb::LeaseKeepAliveRequest request;
        request.set_id(lease);
        if (!stream->Write(request) || !stream->WritesDone() ||
            !stream->Read(&response)) {
          grpc::Status finished = stream->Finish();
          return finished.ok()
                     ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "the keep-alive stream closed unanswered")
                     : finished;
        }
        return stream->Finish();
      },
      timeout);
  if (!status.ok()) return status;
  return response.ttl();
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  return Call("etcd LeaseRevoke", [&](int e, grpc::ClientContext* context) {
    return lease_[e]->LeaseRevoke(context, request, &response);
  });
}

}  // namespace lockstep
