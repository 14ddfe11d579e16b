// Loading and checking the TLS files (with OpenSSL, so a wrong file is named
// at start rather than as a failed handshake later) and the gRPC credentials.
#include "rpc/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "rpc/host_port.h"

namespace lockstep {
namespace {

// The newest OpenSSL error, for messages; clears the queue.
std::string OpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "no detail";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;
using Cert = std::unique_ptr<X509, X509Deleter>;
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Reads `path` for `flag`; empty files and files without a PEM block are
// errors that name both.
absl::StatusOr<std::string> ReadPem(const std::string& flag,
                                    const std::string& path) {
  absl::StatusOr<std::string> pem = ReadFile(path);
  if (!pem.ok()) return AnnotateStatus(pem.status(), flag);
  if (pem->find_first_not_of(" \t\r\n") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " \"", path, "\": the file is empty"));
  }
  if (!absl::StrContains(*pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " \"", path, "\": not a PEM file (no \"-----BEGIN\" line)"));
  }
  return pem;
}

// The certificates in `pem` (at least one), each checked for expiry.
absl::StatusOr<std::vector<Cert>> ParseCertificates(const std::string& flag,
                                                    const std::string& path,
                                                    const std::string& pem) {
  std::vector<Cert> certs;
  Bio bio = MemoryBio(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(x);
  }
  ERR_clear_error();  // the end of the input reads as an error
  if (certs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " \"", path,
        "\": holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")"));
  }
  for (const Cert& c : certs) {
    if (X509_cmp_current_time(X509_get0_notAfter(c.get())) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " \"", path, "\": a certificate in it has expired"));
    }
    // Else every peer would refuse it ("certificate verify failed").
    if (X509_cmp_current_time(X509_get0_notBefore(c.get())) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " \"", path,
                       "\": a certificate in it is not valid yet (its "
                       "notBefore is in the future: check this machine's "
                       "clock, or the date it was issued for)"));
    }
  }
  return certs;
}

absl::Status CheckKeyMatches(const TlsPaths& paths, const TlsFiles& files,
                             X509* leaf) {
  Bio bio = MemoryBio(files.key);
  // No passphrase callback: OpenSSL's default asks on the terminal, and a
  // daemon would wait there for ever.
  pem_password_cb* no_prompt = [](char*, int, int, void*) { return 0; };
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_prompt, nullptr));
  if (key == nullptr && absl::StrContains(files.key, "ENCRYPTED")) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key \"", paths.key,
        "\": not a PEM private key without a passphrase (it is encrypted; "
        "a daemon has no one to ask: openssl pkey -in KEY -out PLAIN.key "
        "writes it without)"));
  }
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key \"", paths.key,
                     "\": not a PEM private key without a passphrase (",
                     OpenSslError(), ")"));
  }
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key \"", paths.key,
                     "\" is not the key of the certificate in --tls-cert \"",
                     paths.cert, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTlsPaths(const TlsPaths& paths, TlsRole role) {
  if (!paths.any()) return absl::OkStatus();
  auto missing = [](absl::string_view given, absl::string_view needed,
                    absl::string_view why) {
    const bool plural = absl::StrContains(needed, " and ");
    return absl::InvalidArgumentError(
        absl::StrCat(given, " is given but ", needed, plural ? " are" : " is",
                     " not (", why, ")"));
  };
  if (!paths.cert.empty() && paths.key.empty()) {
    return missing("--tls-cert", "--tls-key", "the certificate's private key");
  }
  if (!paths.key.empty() && paths.cert.empty()) {
    return missing("--tls-key", "--tls-cert", "the key's certificate");
  }
  if (paths.ca.empty()) {  // then both --tls-cert and --tls-key are given
    return missing("--tls-cert", "--tls-ca",
                   "the CA that signed the other side's certificate");
  }
  if (role == TlsRole::kDaemon && paths.cert.empty()) {
    return missing("--tls-ca", "--tls-cert and --tls-key",
                   "this daemon's own certificate and key");
  }
  return absl::OkStatus();
}

absl::StatusOr<TlsFiles> LoadTlsFiles(const TlsPaths& paths, TlsRole role) {
  RETURN_IF_ERROR(CheckTlsPaths(paths, role));
  TlsFiles files;
  if (!paths.any()) return files;
  ASSIGN_OR_RETURN(files.ca, ReadPem("--tls-ca", paths.ca));
  RETURN_IF_ERROR(ParseCertificates("--tls-ca", paths.ca, files.ca).status());
  if (paths.cert.empty()) return files;
  ASSIGN_OR_RETURN(files.cert, ReadPem("--tls-cert", paths.cert));
  ASSIGN_OR_RETURN(files.key, ReadPem("--tls-key", paths.key));
  ASSIGN_OR_RETURN(std::vector<Cert> chain,
                   ParseCertificates("--tls-cert", paths.cert, files.cert));
  RETURN_IF_ERROR(CheckKeyMatches(paths, files, chain.front().get()));
  return files;
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = tls.ca;
  o.pem_cert_chain = tls.cert;
  o.pem_private_key = tls.key;
  return grpc::SslCredentials(o);
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const TlsFiles& tls, ClientCertificates client_certificates) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(
      client_certificates == ClientCertificates::kRequireAndVerify
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = tls.ca;
  o.pem_key_cert_pairs.push_back({tls.key, tls.cert});
  return grpc::SslServerCredentials(o);
}

absl::Status CheckCertificateNames(const TlsFiles& tls,
                                   const std::string& host_port) {
  if (!tls.enabled() || tls.cert.empty()) return absl::OkStatus();
  const std::string host = HostOf(host_port);
  Bio bio = MemoryBio(tls.cert);
  Cert leaf(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (leaf == nullptr) {
    ERR_clear_error();
    return absl::OkStatus();  // LoadTlsFiles refused it already
  }
  const bool ip = X509_check_ip_asc(leaf.get(), host.c_str(), 0) == 1;
  const bool name = !ip && X509_check_host(leaf.get(), host.c_str(),
                                           host.size(), 0, nullptr) == 1;
  ERR_clear_error();
  if (ip || name) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "--tls-cert does not name \"", host, "\", the address peers dial (",
      host_port,
      "): every worker would refuse its ring connection (\"No match found "
      "for server name\"); issue the certificate with subjectAltName IP:",
      host, " (or DNS:NAME), or give --advertise an address it names"));
}

bool IsLoopbackAddress(const std::string& host_port) {
  const std::string host = HostOf(host_port);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::Status AddTlsHint(const absl::Status& status, const TlsFiles& tls,
                        const std::string& peer, const std::string& tls_flags) {
  // Nothing listening is not a TLS problem; everything else UNAVAILABLE
  // (a reset, a closed socket, a failed handshake) may be one.
  if (!absl::IsUnavailable(status) ||
      absl::StrContains(status.message(), "Connection refused") ||
      // rpc_util.h kNotLeaderPrefix: an answer from a coordinator that
      // does not lead, not a failed connection.
      absl::StrContains(status.message(), "not the leader: ")) {
    return status;
  }
  // Neither is TLS's doing: say what is.
  if (absl::StrContains(status.message(), "http1.x server")) {
    return absl::Status(
        status.code(),
        absl::StrCat(status.message(),
                     " (an HTTP/1 server answers there, not lockstep's gRPC: "
                     "a dashboard's --http port, or another web server?)"));
  }
  if (absl::StrContains(status.message(), "DNS resolution failed") ||
      absl::StrContains(status.message(), "keepalive watchdog timeout")) {
    // The name does not resolve, or a peer that answered before went
    // silent (paused, gone): gRPC's words say so; TLS is not it.
    return status;
  }
  if (tls.enabled() &&
      absl::StrContains(status.message(), "wrong version number")) {
    // OpenSSL read a plaintext answer where a TLS record belongs.
    return absl::Status(
        status.code(),
        absl::StrCat(status.message(), " (", peer,
                     " answers without TLS: drop ", tls_flags,
                     ", or start it with --tls-cert, --tls-key and --tls-ca)"));
  }
  std::string hint;
  if (!tls.enabled()) {
    hint = absl::StrCat(" (if ", peer, " uses TLS, pass ", tls_flags, ")");
  } else {
    hint = absl::StrCat(
        " (is ", peer,
        " using TLS with the same CA as --tls-ca, and a "
        "certificate valid for this address?",
        tls.cert.empty() ? "" : " Does it trust the CA of --tls-cert?", ")");
  }
  return absl::Status(status.code(), absl::StrCat(status.message(), hint));
}

}  // namespace lockstep
