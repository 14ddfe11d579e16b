// Shared pieces of the deploy/k8s manifest tests: YAML to JSON through
// kubectl, JSON access, the rendered objects and the ManifestsTest fixture.
#ifndef LOCKSTEP_DEPLOY_K8S_MANIFESTS_TEST_UTIL_H_
#define LOCKSTEP_DEPLOY_K8S_MANIFESTS_TEST_UTIL_H_

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/subprocess.h"

namespace lockstep {
namespace testing {
namespace k8s {

using Json = nlohmann::json;

constexpr double kTimeoutS = 90;  // one kubectl or openssl call
constexpr char kNamespace[] = "lockstep-test";
constexpr char kOpenSsl[] = "/usr/bin/openssl";
constexpr char kBash[] = "/bin/bash";

// The names the manifests promise (README, example Job, clients).
constexpr char kCoordinator[] = "lockstep-coordinator";
constexpr char kWorker[] = "lockstep-worker";
// The coordinators' headless Service (the StatefulSet's serviceName).
constexpr char kCoordinatorPods[] = "lockstep-coordinators";
// overlays/ha: the etcd StatefulSet and its headless Service.
constexpr char kEtcd[] = "lockstep-etcd";
constexpr char kStorageClaim[] = "lockstep-storage";
constexpr char kJobConfigMap[] = "lockstep-job";

std::string Describe(const std::vector<std::string>& argv, const RunResult& r);

bool Succeeded(const RunResult& r);

// Base64 (standard alphabet); whitespace is skipped (Kustomize v5 wraps
// long Secret values).
std::string DecodeBase64(const std::string& in);

// Splits kubectl's output (JSON objects one after another) into objects.
std::vector<Json> ParseJsonStream(const std::string& text, std::string* error);

// j[path...], or null when any step is missing.
const Json& Get(const Json& j, std::initializer_list<const char*> path);

std::string Str(const Json& j);

// --- Objects ---

class Objects {
 public:
  explicit Objects(std::vector<Json> objects) : objects_(std::move(objects)) {}
  const Json* Find(const std::string& kind, const std::string& name) const {
    for (const Json& o : objects_) {
      if (Str(Get(o, {"kind"})) == kind &&
          Str(Get(o, {"metadata", "name"})) == name)
        return &o;
    }
    return nullptr;
  }
  std::vector<const Json*> OfKind(const std::string& kind) const {
    std::vector<const Json*> out;
    for (const Json& o : objects_) {
      if (Str(Get(o, {"kind"})) == kind) out.push_back(&o);
    }
    return out;
  }
  const std::vector<Json>& all() const { return objects_; }

 private:
  std::vector<Json> objects_;
};

// What a set of checks found wrong, in words.
class Problems {
 public:
  void Add(const std::string& what) { list_.push_back(what); }
  bool Expect(bool ok, const std::string& what) {
    if (!ok) Add(what);
    return ok;
  }
  const std::vector<std::string>& list() const { return list_; }
  bool Mentions(const std::string& needle) const {
    for (const std::string& p : list_) {
      if (p.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  std::string Joined() const {
    std::string s;
    for (const std::string& p : list_) s += "  - " + p + "\n";
    return s;
  }

 private:
  std::vector<std::string> list_;
};

// overlays/cpu, overlays/gpu, overlays/ha (cpu workers, 3 coordinators in
// standby behind a 3-member etcd).
enum class Flavor { kCpu, kGpu, kHa };

// What make-secrets.sh wrote (to compare with what the pods mount).
struct SecretFiles {
  std::string ca, ca_key, coordinator_cert, coordinator_key, worker_cert,
      worker_key, token;
};

// Copies deploy/k8s once per test binary, runs make-secrets.sh in the copy
// (prepared_) and renders with kubectl. Tests skip when kubectl is missing.
class ManifestsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

  void SetUp() override { ASSERT_TRUE(setup_error_->empty()) << *setup_error_; }

  // True when the test cannot run (then GTEST_SKIP from the caller).
  static bool NoKubectl() { return kubectl_->empty(); }
  static std::string NoKubectlMessage();

  // deploy/k8s from the runfiles (manifests and the script only) into a
  // new folder.
  static std::string CopyManifests(const std::string& name);

  // A copy of the prepared tree (with its secrets) to edit.
  static std::string CopyPrepared(const std::string& name);

  static SecretFiles ReadSecrets(const std::string& tree);

  // YAML file -> objects, through kubectl's decoder (manifests_test_util.cc).
  static std::vector<Json> YamlToObjects(const std::string& yaml_path,
                                         std::string* error);

  // `kubectl kustomize DIR` as objects.
  static std::vector<Json> Render(const std::string& dir, std::string* error);

  static Json ExampleJob(const std::string& file);

  // Renders overlay `flavor` of `tree` and runs the deployment checks.
  static Problems RenderAndCheck(const std::string& tree, Flavor flavor,
                                 std::string* error);

  static std::string* kubectl_;
  static std::string* prepared_;
  static std::string* setup_error_;
};

}  // namespace k8s
}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_DEPLOY_K8S_MANIFESTS_TEST_UTIL_H_
