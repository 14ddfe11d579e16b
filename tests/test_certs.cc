// Test certificates through the openssl CLI.
#include "tests/test_certs.h"

#include <unistd.h>

#include <vector>

#include "tests/subprocess.h"

namespace lockstep {
namespace testing {
namespace {

constexpr char kOpenSsl[] = "/usr/bin/openssl";

bool Run(const std::string& dir, std::vector<std::string> args,
         std::string* why) {
  args.insert(args.begin(), kOpenSsl);
  RunResult r = RunProcess(args, dir, 30);
  if (r.exit.exited && r.exit.exit_code == 0) return true;
  *why = "failed:";
  for (const std::string& a : args) *why += " " + a;
  *why += "\n" + r.out + r.err;
  return false;
}

// A new EC key and a certificate for `cn` signed by ca/ca_key with the
// extensions in `ext` (openssl x509 -extfile syntax).
bool Issue(const std::string& dir, const std::string& name,
           const std::string& cn, const std::string& ca,
           const std::string& ca_key, const std::string& ext, int serial,
           std::string* why) {
  const std::string base = dir + "/" + name;
  WriteStringToFile(base + ".ext", ext);
  return Run(dir,
             {"req", "-newkey", "ec", "-pkeyopt",
              "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
              base + ".key", "-out", base + ".csr", "-subj", "/CN=" + cn},
             why) &&
         Run(dir,
             {"x509", "-req", "-in", base + ".csr", "-CA", ca, "-CAkey", ca_key,
              "-set_serial", std::to_string(serial), "-days", "2", "-extfile",
              base + ".ext", "-out", base + ".pem"},
             why);
}

bool MakeCa(const std::string& dir, const std::string& name, std::string* why) {
  const std::string base = dir + "/" + name;
  return Run(
      dir,
      {"req", "-x509", "-newkey", "ec", "-pkeyopt",
       "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", base + ".key",
       "-out", base + ".pem", "-days", "2", "-subj", "/CN=" + name},
      why);
}

}  // namespace

bool MakeTestCerts(const std::string& dir, TestCerts* certs, std::string* why) {
  if (access(kOpenSsl, X_OK) != 0) {
    *why = std::string(kOpenSsl) +
           " not found: the TLS tests need the openssl CLI (Debian package "
           "openssl; scripts/install_deps.sh installs it)";
    return false;
  }
  const std::string ca = dir + "/ca.pem", ca_key = dir + "/ca.key";
  const std::string rogue_ca = dir + "/rogue-ca.pem";
  const std::string worker_ext =
      "subjectAltName=IP:127.0.0.1\n"
      "extendedKeyUsage=serverAuth,clientAuth\n";
  if (!MakeCa(dir, "ca", why) ||
      !Issue(dir, "coordinator", "coordinator", ca, ca_key,
             "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
             "extendedKeyUsage=serverAuth\n",
             2, why) ||
      !Issue(dir, "worker", "worker", ca, ca_key, worker_ext, 3, why) ||
      !MakeCa(dir, "rogue-ca", why) ||
      !Issue(dir, "rogue", "rogue", rogue_ca, dir + "/rogue-ca.key", worker_ext,
             4, why)) {
    return false;
  }
  certs->ca = ca;
  certs->coordinator_cert = dir + "/coordinator.pem";
  certs->coordinator_key = dir + "/coordinator.key";
  certs->worker_cert = dir + "/worker.pem";
  certs->worker_key = dir + "/worker.key";
  certs->rogue_ca = rogue_ca;
  certs->rogue_cert = dir + "/rogue.pem";
  certs->rogue_key = dir + "/rogue.key";
  return true;
}

}  // namespace testing
}  // namespace lockstep
