// The one place gRPC statuses become absl::Status and back, plus the wire
// protocol version workers and coordinator must share and the channel and
// server settings every lockstep endpoint uses.
#ifndef LOCKSTEP_RPC_RPC_UTIL_H_
#define LOCKSTEP_RPC_RPC_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "rpc/tls.h"

namespace lockstep {

// Bumped on any incompatible change to cluster.proto or collective.proto,
// or to what a collective carries (2: the loss all-reduce counts leaving
// ranks; 3: a generation may start from survivors' memory, which an older
// worker would look for as a checkpoint; 4: a ring segment is cut into at
// least two chunks when each holds 1 MiB, RingChunkElements, which an
// older worker would not number or size alike; 5: a checkpoint slice names
// its sender, CheckpointSlice.worker_id, which the coordinator checks: an
// older worker's slices would be refused mid-job).
inline constexpr int kProtocolVersion = 5;

// Same code; the message is prefixed with `what` ("Register with
// 127.0.0.1:7070") so the caller knows which call failed. An unreachable
// peer (UNAVAILABLE) says so in plain words.
absl::Status FromGrpc(const grpc::Status& status, absl::string_view what);
grpc::Status ToGrpc(const absl::Status& status);

// How every UNAVAILABLE from a coordinator that does not lead begins
// ("not the leader: a standby; the leader is 10.0.0.2:7070 (term 12)"):
// an answer from a live process, so FromGrpc does not call it unreachable
// and no TLS hint is added; the caller goes on to another coordinator.
inline constexpr char kNotLeaderPrefix[] = "not the leader: ";

// The largest gRPC message lockstep sends or accepts: a ring chunk of
// cluster.ring_chunk_kib's most (1 GiB) with its header, or one tensor of a
// checkpoint stream. gRPC refuses a longer one from its length prefix
// (RESOURCE_EXHAUSTED), before it buffers any of it: a peer claiming 10 GB
// costs nothing.
inline constexpr int kMaxMessageBytes = (1 << 30) + (16 << 20);

// Every lockstep client channel: TLS with `tls` (plaintext when TLS is off,
// see rpc/tls.h), messages up to kMaxMessageBytes; `lane` > 0 forces a separate
// TCP connection so several streams to one peer do not share one socket.
// `keepalive_timeout_ms`: how long an unanswered keepalive ping, and (as
// gRPC makes it the socket's TCP_USER_TIMEOUT) unacknowledged data, may
// wait before the connection is declared dead; `keepalive_time_ms`: how
// often a ping is sent.
inline constexpr int kKeepaliveTimeoutMs = 5000;
inline constexpr int kKeepaliveTimeMs = 10000;
std::shared_ptr<grpc::Channel> MakeChannel(
    const std::string& address, const TlsFiles& tls, int lane = 0,
    int keepalive_timeout_ms = kKeepaliveTimeoutMs,
    int keepalive_time_ms = kKeepaliveTimeMs);

// Applies the server-side counterparts (message sizes up to
// `max_message_bytes`, keepalive).
void ConfigureServer(grpc::ServerBuilder& builder,
                     int max_message_bytes = kMaxMessageBytes);

// The address peers dial, from --advertise and the address the server
// bound: `advertise` as given when it names a port; "HOST" or "HOST:0"
// (an IPv6 host in brackets) takes the bound port, so a daemon started
// with --listen 0.0.0.0:0 (a batch system's task, no fixed port) can
// still advertise its node's name; empty: `bound` itself.
std::string AdvertisedAddress(const std::string& advertise,
                              const std::string& bound);

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_RPC_UTIL_H_
