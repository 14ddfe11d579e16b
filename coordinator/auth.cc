// The coordinator's per-call checks: client certificate, bearer token.
#include "coordinator/auth.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep {
namespace {

constexpr char kBearer[] = "bearer ";
constexpr absl::Duration kLogEvery = absl::Minutes(1);
constexpr size_t kMaxLoggedKeys = 4096;

// "ipv4:10.0.0.5:51234" -> "ipv4:10.0.0.5": each connection has its own
// port, the rate limit is per host.
std::string PeerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

}  // namespace

BearerCheck CheckBearer(const std::string* header, const std::string& token) {
  if (header == nullptr) return BearerCheck::kMissing;
  const size_t n = sizeof(kBearer) - 1;
  if (header->size() < n ||
      !absl::EqualsIgnoreCase(header->substr(0, n), kBearer)) {
    return BearerCheck::kMissing;  // some other scheme: no bearer token
  }
  const std::string sent(absl::StripAsciiWhitespace(header->substr(n)));
  // Every byte of `token` is looked at whatever `sent` holds.
  unsigned char diff = sent.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = i < sent.size() ? sent[i] : 0;
    diff |= c ^ static_cast<unsigned char>(token[i]);
  }
  return diff == 0 ? BearerCheck::kOk : BearerCheck::kWrong;
}

grpc::Status Authorizer::CheckWorker(const grpc::ServerContext& context,
                                     const char* method) {
  if (!o_.require_client_certificate) return grpc::Status::OK;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) return grpc::Status::OK;
  return Refuse(context, method, "no client certificate",
                "worker calls need a client certificate signed by the "
                "coordinator's --tls-ca");
}

grpc::Status Authorizer::CheckJobClient(const grpc::ServerContext& context,
                                        const char* method) {
  if (o_.token.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  std::string header;
  if (it != metadata.end()) header.assign(it->second.data(), it->second.size());
  switch (CheckBearer(it == metadata.end() ? nullptr : &header, o_.token)) {
    case BearerCheck::kOk:
      return grpc::Status::OK;
    case BearerCheck::kMissing:
      return Refuse(context, method, "no bearer token",
                    "this coordinator needs a bearer token: pass "
                    "--token-file or set LOCKSTEP_TOKEN");
    case BearerCheck::kWrong:
      break;
  }
  return Refuse(context, method, "wrong bearer token", "bearer token refused");
}

grpc::Status Authorizer::Refuse(const grpc::ServerContext& context,
                                const char* method, const std::string& reason,
                                const std::string& message) {
  const std::string peer = context.peer();
  bool log = false;
  {
    absl::MutexLock lock(&mu_);
    if (logged_.size() > kMaxLoggedKeys) logged_.clear();
    const absl::Time now = absl::Now();
    auto [it, fresh] =
        logged_.try_emplace(absl::StrCat(PeerHost(peer), " ", reason), now);
    if (fresh || now - it->second >= kLogEvery) {
      it->second = now;
      log = true;
    }
  }
  if (log && o_.log) {
    LogRecord refused(absl::StrCat("refused ", method, " from ", peer, ": ",
                                   reason,
                                   " (repeats from this host: once a minute)"));
    refused.level = "warning";
    o_.log(refused);
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, message);
}

}  // namespace lockstep
