// make-secrets.sh and the Secrets: certificates that verify for the names
// the pods dial, private files, no overwrite, no rendering without them.
#include <sys/stat.h>

#include <string>
#include <vector>

#include "deploy/k8s/manifests_test_util.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace testing {
namespace k8s {

namespace {

std::string OpenSsl(const std::vector<std::string>& args, bool* ok) {
  std::vector<std::string> argv = {kOpenSsl};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = RunProcess(argv, NewTempDir("log"), kTimeoutS);
  *ok = Succeeded(r);
  return Describe(argv, r);
}

// make-secrets.sh: certificates that verify against the CA for the names the
// pods dial, with the usages lockstep needs; a token; private files.
TEST_F(ManifestsTest, MakeSecretsWritesUsableCertificates) {
  const std::string d = *prepared_ + "/base/secrets/";
  const std::string ns = kNamespace;
  struct Case {
    std::string cert, purpose, host;
    bool valid;
  };
  const std::string coord = kCoordinator, worker = kWorker;
  const std::vector<Case> cases = {
      {"coordinator.crt", "sslserver", coord, true},
      {"coordinator.crt", "sslserver", coord + "." + ns, true},
      {"coordinator.crt", "sslserver", coord + "." + ns + ".svc", true},
      {"coordinator.crt", "sslserver", coord + "." + ns + ".svc.cluster.local",
       true},
      {"coordinator.crt", "sslserver", "localhost", true},  // port-forward
      {"coordinator.crt", "sslserver", coord + ".other.svc", false},
      {"worker.crt", "sslserver",
       worker + "-0." + worker + "." + ns + ".svc.cluster.local", true},
      {"worker.crt", "sslserver",
       worker + "-17." + worker + "." + ns + ".svc.cluster.local", true},
      {"worker.crt", "sslclient", "", true},  // presented to the coordinator
      {"worker.crt", "sslserver",
       worker + "-0." + worker + ".other.svc.cluster.local", false},
      {"worker.crt", "sslserver",
       "a.b." + worker + "." + ns + ".svc.cluster.local", false},
      {"worker.crt", "sslserver", coord, false},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"verify", "-CAfile", d + "ca.crt",
                                     "-purpose", c.purpose};
    if (!c.host.empty()) {
      args.push_back("-verify_hostname");
      args.push_back(c.host);
    }
    args.push_back(d + c.cert);
    bool ok = false;
    const std::string what = OpenSsl(args, &ok);
    EXPECT_EQ(ok, c.valid) << what;
  }
  const std::string token = ReadFileOrEmpty(d + "token");
  EXPECT_EQ(token.size(), 65u) << "64 hex digits and a newline: " << token;
  for (const char* f : {"ca.key", "coordinator.key", "worker.key", "token"}) {
    struct stat st;
    ASSERT_EQ(stat((d + f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  // Never overwrites without --force.
  const std::string before = ReadFileOrEmpty(d + "ca.crt");
  RunResult again =
      RunProcess({kBash, *prepared_ + "/make-secrets.sh", "--namespace", ns},
                 NewTempDir("log"), kTimeoutS);
  EXPECT_TRUE(again.exit.exited && again.exit.exit_code == 1)
      << again.out << again.err;
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  EXPECT_EQ(ReadFileOrEmpty(d + "ca.crt"), before);
}

// Without make-secrets.sh's files the base does not render (rather than
// rendering empty Secrets).
TEST_F(ManifestsTest, RenderingNeedsTheSecretsFiles) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  const std::string tree = CopyManifests("nosecrets");
  std::string error;
  Render(tree + "/overlays/cpu", &error);
  EXPECT_NE(error.find("secrets"), std::string::npos)
      << "rendering without base/secrets/ should fail naming it: " << error;
}

}  // namespace
}  // namespace k8s
}  // namespace testing
}  // namespace lockstep
