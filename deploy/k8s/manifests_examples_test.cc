// The examples/ manifests (submit Job, dataset loader pod) fit the objects
// of the rendered cpu overlay.
#include <string>
#include <utility>
#include <vector>

#include "deploy/k8s/manifests_checks.h"
#include "deploy/k8s/manifests_pod.h"
#include "deploy/k8s/manifests_test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {
namespace k8s {

namespace {

TEST_F(ManifestsTest, SubmitJobExampleFitsTheDeployment) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  std::string error;
  std::vector<Json> objects = Render(*prepared_ + "/overlays/cpu", &error);
  ASSERT_TRUE(error.empty()) << error;
  std::vector<Json> job =
      YamlToObjects(*prepared_ + "/examples/submit-job.yaml", &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(job.size(), 1u);
  const Objects deployment(std::move(objects));
  const SecretFiles secrets = ReadSecrets(*prepared_);
  Problems p = CheckSubmitJob(job[0], deployment, secrets);
  EXPECT_TRUE(p.list().empty()) << p.Joined();

  // And these checks can fail: a wrong port, a wrong ConfigMap.
  Json wrong_port = job[0];
  for (Json& a :
       wrong_port["spec"]["template"]["spec"]["containers"][0]["args"]) {
    if (a == "lockstep-coordinator:7070") a = "lockstep-coordinator:7071";
  }
  EXPECT_TRUE(CheckSubmitJob(wrong_port, deployment, secrets)
                  .Mentions("has no port 7071"));
  Json wrong_map = job[0];
  for (Json& v : wrong_map["spec"]["template"]["spec"]["volumes"]) {
    if (v.contains("configMap")) v["configMap"]["name"] = "lockstep-jobs";
  }
  EXPECT_TRUE(CheckSubmitJob(wrong_map, deployment, secrets)
                  .Mentions("ConfigMap \"lockstep-jobs\", which is not "
                            "rendered"));
}

// The dataset loader pod writes where the workers read: the shared claim.
TEST_F(ManifestsTest, DatasetLoaderExampleMountsTheClaim) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  std::string error;
  std::vector<Json> objects = Render(*prepared_ + "/overlays/cpu", &error);
  ASSERT_TRUE(error.empty()) << error;
  std::vector<Json> pods =
      YamlToObjects(*prepared_ + "/examples/dataset-loader.yaml", &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(pods.size(), 1u);
  ASSERT_EQ(Str(Get(pods[0], {"kind"})), "Pod");
  Pod pod;
  pod.owner = "Pod (examples/dataset-loader.yaml)";
  pod.spec = &pods[0]["spec"];
  Problems p;
  const Objects deployment(std::move(objects));
  CheckPodHardening(pod, &p);
  CheckVolumeSources(deployment, pod, &p);
  bool mounts_claim = false;
  for (const Json& v : Get(*pod.spec, {"volumes"})) {
    if (Str(Get(v, {"persistentVolumeClaim", "claimName"})) == kStorageClaim)
      mounts_claim = true;
  }
  EXPECT_TRUE(mounts_claim) << "the loader does not mount " << kStorageClaim;
  EXPECT_TRUE(p.list().empty()) << p.Joined();
}

}  // namespace
}  // namespace k8s
}  // namespace testing
}  // namespace lockstep
