// gRPC <-> absl status conversion and the shared channel/server settings.
#include "rpc/rpc_util.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace lockstep {

absl::Status FromGrpc(const grpc::Status& status, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      !absl::StartsWith(status.error_message(), kNotLeaderPrefix)) {
    return absl::UnavailableError(absl::StrCat(
        what, ": peer unreachable or gone (", status.error_message(), ")"));
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": no answer before the deadline (",
                     status.error_message(), ")"));
  }
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // A gRPC server without this service: another kind of lockstep daemon
    // (a worker's collective port for a coordinator), or another program.
    return absl::UnimplementedError(absl::StrCat(
        what, ": the server there does not serve this call (UNIMPLEMENTED",
        status.error_message().empty() ? "" : ": ", status.error_message(),
        "): another service listens at that address (another lockstep "
        "daemon, or another program), or another lockstep version"));
  }
  if (status.error_message().empty()) {
    return absl::Status(code,
                        absl::StrCat(what, ": ", absl::StatusCodeToString(code),
                                     " with no message"));
  }
  return absl::Status(code, absl::StrCat(what, ": ", status.error_message()));
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const TlsFiles& tls, int lane,
                                           int keepalive_timeout_ms,
                                           int keepalive_time_ms) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Fail fast on a dead peer instead of waiting for TCP timeouts.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_time_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_timeout_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (lane > 0) {
    // Distinct args give a distinct subchannel, hence its own connection.
    args.SetInt("lockstep.lane", lane);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // A lane carries ring messages, which are never replayed: gRPC's retry
    // support would keep a reference to every sent payload (up to 256 KiB
    // per call) in case it had to send it again, so the ring's buffers
    // would stay pinned long after the bytes left.
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  }
  return grpc::CreateCustomChannel(address, MakeChannelCredentials(tls), args);
}

void ConfigureServer(grpc::ServerBuilder& builder, int max_message_bytes) {
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // gRPC's default SO_REUSEPORT would let a second daemon bind a port in
  // use and silently take half its connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

std::string AdvertisedAddress(const std::string& advertise,
                              const std::string& bound) {
  if (advertise.empty()) return bound;
  const size_t bracket = advertise.rfind(']');
  const size_t colon = advertise.rfind(':');
  const bool has_port = colon != std::string::npos &&
                        (bracket == std::string::npos || colon > bracket);
  std::string host = has_port ? advertise.substr(0, colon) : advertise;
  if (has_port && advertise.substr(colon + 1) != "0") return advertise;
  const size_t bound_colon = bound.rfind(':');
  if (bound_colon == std::string::npos) return advertise;
  return host + bound.substr(bound_colon);
}

}  // namespace lockstep
