// Throwaway TLS material for tests, made with the openssl CLI (Debian
// package openssl): a CA, a coordinator certificate, a worker certificate
// usable as client and server, and an unrelated "rogue" CA with its own
// worker-like certificate. EC prime256v1 keys, valid for two days.
#ifndef LOCKSTEP_TESTS_TEST_CERTS_H_
#define LOCKSTEP_TESTS_TEST_CERTS_H_

#include <string>

namespace lockstep {
namespace testing {

struct TestCerts {
  // Paths of PEM files.
  std::string ca;  // the cluster's CA
  // serverAuth; SAN IP:127.0.0.1 and DNS:localhost.
  std::string coordinator_cert, coordinator_key;
  // serverAuth and clientAuth; SAN IP:127.0.0.1.
  std::string worker_cert, worker_key;
  // Another CA, and a certificate like the worker's signed by it.
  std::string rogue_ca, rogue_cert, rogue_key;
};

// Writes the files under `dir`. False, with the failing command and its
// output in *why, when openssl is missing or fails.
bool MakeTestCerts(const std::string& dir, TestCerts* certs, std::string* why);

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_TEST_CERTS_H_
