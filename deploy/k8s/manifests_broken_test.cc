// The checks can fail: broken copies of the manifests, each caught by the
// check that names what broke.
#include <string>
#include <vector>

#include "deploy/k8s/manifests_test_util.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace testing {
namespace k8s {

namespace {

// The checks can fail: each broken copy of a manifest is caught, by the
// check that names what broke.
TEST_F(ManifestsTest, BrokenManifestsAreCaught) {
  if (NoKubectl()) GTEST_SKIP() << NoKubectlMessage();
  struct Breakage {
    std::string file, from, to;
    Flavor flavor;
    std::string expected_problem;
  };
  const std::vector<Breakage> breakages = {
      {"base/worker-service.yaml", "publishNotReadyAddresses: true",
       "publishNotReadyAddresses: false", Flavor::kCpu,
       "publishNotReadyAddresses"},
      {"base/worker-service.yaml", "  clusterIP: None\n", "", Flavor::kCpu,
       "headless"},
      {"base/coordinator-statefulset.yaml", "mountPath: /var/lib/lockstep",
       "mountPath: /var/lib/elsewhere", Flavor::kCpu, "--storage"},
      {"base/coordinator-statefulset.yaml", "  replicas: 1\n",
       "  replicas: 2\n", Flavor::kCpu, "coordinators without --etcd"},
      {"overlays/ha/coordinator-ha.yaml", "type: OnDelete",
       "type: RollingUpdate", Flavor::kHa, "is not OnDelete"},
      {"overlays/ha/coordinator-ha.yaml", "lockstep-etcd-2.lockstep-etcd",
       "lockstep-etcd-3.lockstep-etcd", Flavor::kHa,
       "--etcd is not every etcd member"},
      {"overlays/ha/etcd-service.yaml", "publishNotReadyAddresses: true",
       "publishNotReadyAddresses: false", Flavor::kHa,
       "members find each other"},
      {"overlays/ha/coordinator-ha.yaml", "periodSeconds: 1",
       "periodSeconds: 10", Flavor::kHa, "readinessProbe.periodSeconds"},
      {"base/coordinator-service.yaml", "targetPort: grpc", "targetPort: 7071",
       Flavor::kCpu, "--coordinator: lockstep-coordinator:7070: Service"},
      {"base/coordinator-service.yaml", "port: 7070", "port: 7000",
       Flavor::kGpu, "has no port 7070"},
      {"base/worker-statefulset.yaml", "service: liveness", "service: \"\"",
       Flavor::kCpu, "livenessProbe asks for service"},
      {"base/worker-statefulset.yaml", "port: 7081", "port: 7080", Flavor::kGpu,
       "is not the --health-listen port"},
      {"base/worker-statefulset.yaml", "secretName: lockstep-worker-tls",
       "secretName: lockstep-coordinator-tls", Flavor::kCpu,
       "is not make-secrets.sh's worker.crt"},
      {"base/worker-statefulset.yaml", ".lockstep-worker.$(POD_NAMESPACE)",
       ".lockstep-workers.$(POD_NAMESPACE)", Flavor::kCpu, "--advertise"},
      {"base/worker-pdb.yaml", "app.kubernetes.io/component: worker\n",
       "app.kubernetes.io/component: coordinator\n", Flavor::kCpu,
       "PodDisruptionBudget lockstep-worker"},
      {"base/coordinator-statefulset.yaml", "readOnlyRootFilesystem: true",
       "readOnlyRootFilesystem: false", Flavor::kCpu, "readOnlyRootFilesystem"},
      {"base/storage-pvc.yaml", "ReadWriteMany", "ReadWriteOnce", Flavor::kCpu,
       "ReadWriteMany"},
      {"overlays/gpu/worker-gpu.yaml", "            nvidia.com/gpu: 1\n", "",
       Flavor::kGpu, "limits.nvidia.com/gpu"},
      {"overlays/gpu/worker-gpu.yaml", "value: cuda:0", "value: cpu:1",
       Flavor::kGpu, "--devices"},
      {"overlays/cpu/worker-cpu.yaml", "value: \"4\"", "value: \"16\"",
       Flavor::kCpu, "--threads"},
      {"base/jobs/job.json", "/data/datasets/mnist/train-images",
       "/elsewhere/mnist/train-images", Flavor::kCpu, "data.train_images"},
  };
  int i = 0;
  for (const Breakage& b : breakages) {
    SCOPED_TRACE(b.file + ": " + b.from + " -> " + b.to);
    const std::string tree = CopyPrepared("broken" + std::to_string(i++));
    const std::string path = tree + "/" + b.file;
    std::string text = ReadFileOrEmpty(path);
    size_t at = text.find(b.from);
    ASSERT_NE(at, std::string::npos) << b.from << " is not in " << b.file;
    // Every occurrence (both liveness and startup probes, say).
    for (; at != std::string::npos; at = text.find(b.from, at + b.to.size())) {
      text.replace(at, b.from.size(), b.to);
    }
    WriteStringToFile(path, text);
    std::string error;
    Problems p = RenderAndCheck(tree, b.flavor, &error);
    if (!error.empty()) {
      ADD_FAILURE() << error;
      continue;
    }
    EXPECT_TRUE(p.Mentions(b.expected_problem))
        << "expected a problem mentioning \"" << b.expected_problem
        << "\", got:\n"
        << p.Joined();
  }
}

}  // namespace
}  // namespace k8s
}  // namespace testing
}  // namespace lockstep
