// Proves the image root (//deploy:image_root.tar, or the tar named by
// $LOCKSTEP_IMAGE_ROOT_TAR) is self-contained: unpacked into a temp dir,
// the binary runs inside it with nothing from the host (chroot as the
// image's user, or a user namespace), trains, and serves a coordinator +
// worker + client over gRPC by name.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <regex>
#include <string>

#include "deploy/image_root_test_fixture.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace {

using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;
using testing::Subprocess;
using testing::WriteStringToFile;
using testing::image_root::Entry;
using testing::image_root::ImageBinary;
using testing::image_root::ImageRootTest;
using testing::image_root::kTimeout;

constexpr uid_t kUid = 65532;

TEST_F(ImageRootTest, VersionRunsInside) {
  SKIP_UNLESS_RUNNABLE();
  RunResult r = RunProcess(InRoot({"/lockstep", "--version"}), logs_, kTimeout);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(
      std::regex_match(r.out, std::regex(R"(lockstep \d+\.\d+\.\d+\n)")))
      << r.out;
  RunResult host =
      RunProcess({Runfile(ImageBinary()), "--version"}, logs_, kTimeout);
  EXPECT_EQ(r.out, host.out);
}

TEST_F(ImageRootTest, TrainsAJobInside) {
  SKIP_UNLESS_RUNNABLE();
  WriteStringToFile(root_ + "/tmp/train.json", testing::TinyJob().dump(2));
  RunResult r =
      RunProcess(InRoot({"/lockstep", "train", "/tmp/train.json", "--storage",
                         "/var/lib/lockstep/train", "--threads", "1"}),
                 logs_, kTimeout);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[tiny] finished: 189 steps"), std::string::npos)
      << r.out;
  const std::string result =
      root_ + "/var/lib/lockstep/train/jobs/tiny/result.json";
  nlohmann::json res =
      nlohmann::json::parse(ReadFileOrEmpty(result), nullptr, false);
  ASSERT_TRUE(res.is_object()) << r.out << r.err;
  EXPECT_EQ(res["steps"], 189);  // ceil(1000 / 16) x 3 epochs
  EXPECT_EQ(res["replicas"], 1);
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.5);
  EXPECT_LE(res["test_accuracy"].get<double>(), 1.0);
  if (as_user_) {
    // Written by the image's user into the folder the image gave it.
    struct stat st;
    ASSERT_EQ(stat(result.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, kUid);
  }
}

TEST_F(ImageRootTest, ClusterTalksGrpcByNameInside) {
  SKIP_UNLESS_RUNNABLE();
  // A container runtime writes /etc/hosts; here the test does. Both address
  // families: gRPC's c-ares resolver asks for A and AAAA, and an AAAA that
  // only a DNS server could answer (there is none in here) costs ~3 s of
  // retries per lookup.
  WriteStringToFile(root_ + "/etc/hosts",
                    "127.0.0.1\tlocalhost lockstep-coordinator\n"
                    "::1\tlocalhost lockstep-coordinator\n");
  WriteStringToFile(root_ + "/tmp/cluster.json",
                    testing::TinyJob({{"name", "cluster"}}).dump(2));
  const std::string address_file = "/var/lib/lockstep/cluster.address";
  Subprocess coordinator(
      InRoot({"/lockstep", "coordinator", "--listen", "127.0.0.1:0",
              "--storage", "/var/lib/lockstep/cluster", "--address-file",
              address_file}),
      logs_);
  std::string address;
  for (int i = 0; i < testing::Scaled(200) && address.empty() && !coordinator.Wait(0).exited;
       ++i) {
    address = ReadFileOrEmpty(root_ + address_file);
    if (address.empty() || address.back() != '\n') {
      address.clear();
      usleep(50000);
    }
  }
  ASSERT_FALSE(address.empty()) << coordinator.Stderr();
  address.pop_back();  // the newline
  const std::string by_name =
      "lockstep-coordinator:" + address.substr(address.rfind(':') + 1);

  Subprocess worker(InRoot({"/lockstep", "worker", "--coordinator", by_name,
                            "--replicas", "1", "--threads", "1"}),
                    logs_);
  ASSERT_TRUE(worker.WaitForOutput("registered with " + by_name, 15))
      << worker.Stdout() << worker.Stderr();
  RunResult submit =
      RunProcess(InRoot({"/lockstep", "submit", "/tmp/cluster.json", "--wait",
                         "--coordinator", by_name}),
                 logs_, kTimeout);
  ASSERT_EQ(submit.exit.exit_code, 0) << submit.out << submit.err;
  EXPECT_NE(submit.out.find("job cluster SUCCEEDED: 189 steps"),
            std::string::npos)
      << submit.out;
  nlohmann::json res = nlohmann::json::parse(
      ReadFileOrEmpty(root_ +
                      "/var/lib/lockstep/cluster/jobs/cluster/result.json"),
      nullptr, false);
  ASSERT_TRUE(res.is_object()) << submit.out;
  EXPECT_EQ(res["steps"], 189);
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.5);

  worker.Signal(SIGTERM);
  coordinator.Signal(SIGTERM);
  EXPECT_TRUE(worker.Wait(10).exited);
  EXPECT_TRUE(coordinator.Wait(10).exited);
}

}  // namespace
}  // namespace lockstep
