// TLS for every lockstep channel and server: the PEM files behind the
// --tls-cert / --tls-key / --tls-ca flags, loaded and checked once, and the
// gRPC credentials built from them (insecure ones when TLS is off).
#ifndef LOCKSTEP_RPC_TLS_H_
#define LOCKSTEP_RPC_TLS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace lockstep {

// PEM contents (not paths). All empty: TLS off.
struct TlsFiles {
  std::string cert;  // this endpoint's certificate chain; may be empty for a
  std::string key;   // job client (then key is empty too)
  std::string ca;    // the CA that signed every peer's certificate
  bool enabled() const { return !ca.empty(); }
};

// The flag values (file paths); empty = not given.
struct TlsPaths {
  std::string cert, key, ca;
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

enum class TlsRole {
  // Coordinator and worker: all three files or none.
  kDaemon,
  // Job client: --tls-ca alone, or all three (a client certificate).
  kClient,
};

// InvalidArgument naming the missing flag when `paths` is a partial set for
// `role` ("--tls-cert is given but --tls-key is not"); OK for none or a
// complete set. Checks the flags only, not the files.
absl::Status CheckTlsPaths(const TlsPaths& paths, TlsRole role);

// CheckTlsPaths, then reads and checks each file. Errors name the flag and
// the path: missing (NotFound), unreadable (PermissionDenied), empty, not
// PEM, a key that does not belong to the certificate, an expired
// certificate (InvalidArgument). No paths: TLS off (empty TlsFiles).
absl::StatusOr<TlsFiles> LoadTlsFiles(const TlsPaths& paths, TlsRole role);

// SslCredentials trusting only tls.ca, presenting tls.cert/key when given;
// InsecureChannelCredentials when TLS is off.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const TlsFiles& tls);

enum class ClientCertificates {
  // The coordinator's port: job clients may come without a certificate;
  // one that is presented must verify against tls.ca. Worker RPCs check
  // for it per call (coordinator/auth.h).
  kRequestAndVerify,
  // A worker's collective port: no verified certificate, no connection.
  kRequireAndVerify,
};

// SslServerCredentials with tls.cert/key and tls.ca as the client CA;
// InsecureServerCredentials when TLS is off.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const TlsFiles& tls, ClientCertificates client_certificates);

// OK when the leaf certificate of tls.cert names the host of `host_port`
// (an IP address among its IP SANs, a name among its DNS SANs, wildcards
// as TLS matches them), or TLS is off. Else FailedPrecondition saying so:
// a worker whose certificate does not name its --advertise address is
// refused by every peer that dials it ("No match found for server name").
absl::Status CheckCertificateNames(const TlsFiles& tls,
                                   const std::string& host_port);

// True for a listen address on the loopback interface (127.x.x.x,
// localhost, [::1]); false for 0.0.0.0, [::] and every other host.
bool IsLoopbackAddress(const std::string& host_port);

// `status` with a hint appended when it is the kind of failure a TLS
// mismatch produces (gRPC reports a failed handshake as UNAVAILABLE, like
// a peer that is down): with TLS on, whether `peer` ("the coordinator")
// uses TLS with the same CA (and trusts this side's certificate, when it
// has one); with TLS off, that `tls_flags` ("--tls-ca")
// are needed if it uses TLS. Other statuses, and a refused connection
// (nothing listening), come back unchanged.
absl::Status AddTlsHint(const absl::Status& status, const TlsFiles& tls,
                        const std::string& peer, const std::string& tls_flags);

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_TLS_H_
