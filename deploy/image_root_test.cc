// Proves the image root (//deploy:image_root.tar, or the tar named by
// $LOCKSTEP_IMAGE_ROOT_TAR) is self-contained: unpacked into a temp dir,
// the binary runs inside it with nothing from the host (chroot as the
// image's user, or a user namespace), trains, and serves a coordinator +
// worker + client over gRPC by name; nothing but the binary and the
// libraries it loads is an ELF file, and the tar is deterministic.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace {

// The binary the root was made from (LOCKSTEP_IMAGE_BINARY, a runfile):
// the CPU image's never links CUDA, the GPU image's is the CUDA build.
std::string ImageBinary() {
  const char* b = std::getenv("LOCKSTEP_IMAGE_BINARY");
  return b != nullptr ? b : "client/lockstep";
}

using testing::NewTempDir;
using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;
using testing::Subprocess;
using testing::WriteStringToFile;

constexpr double kTimeout = 30;
constexpr char kUser[] = "65532:65532";
constexpr uid_t kUid = 65532;
constexpr char kLoader[] = "/lib64/ld-linux-x86-64.so.2";
constexpr char kCudaDir[] = "/usr/local/cuda/lib64";

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// A host tool's full path: posix_spawn does not search $PATH, and Bazel's
// test PATH may lack the sbin folders chroot lives in. "" when absent.
std::string Which(const std::string& tool) {
  std::string dirs = Env("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const std::string path = dir + "/" + tool;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// The paths in an `ldd` / `ld.so --list` listing ("libz.so.1 => /lib/...
// (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)"); "not found" lines go
// to *missing.
std::set<std::string> LoadedPaths(const std::string& listing,
                                  std::vector<std::string>* missing) {
  static const std::regex kArrow(R"(^\s*\S+ => (/\S+) \(0x[0-9a-f]+\)$)");
  static const std::regex kBare(R"(^\s*(/\S+) \(0x[0-9a-f]+\)$)");
  std::set<std::string> paths;
  std::stringstream ss(listing);
  std::string line;
  std::smatch m;
  while (std::getline(ss, line)) {
    if (line.find("not found") != std::string::npos) missing->push_back(line);
    if (std::regex_match(line, m, kArrow) || std::regex_match(line, m, kBare)) {
      paths.insert(m[1]);
    }
  }
  return paths;
}

bool IsElf(const std::string& path) {
  static constexpr char kMagic[4] = {0x7f, 'E', 'L', 'F'};
  char head[4] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(head, sizeof(head));
  return in.gcount() == 4 && std::memcmp(head, kMagic, 4) == 0;
}

struct Tree {
  std::set<std::string> elf;                    // regular ELF files
  std::map<std::string, std::string> symlinks;  // path -> target
};

// Walks `root` (paths reported relative to it, with a leading "/").
void Walk(const std::string& root, const std::string& rel, Tree* tree) {
  DIR* d = opendir((root + rel).c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = rel + "/" + name;
    struct stat st;
    if (lstat((root + path).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      Walk(root, path, tree);
    } else if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      ssize_t n = readlink((root + path).c_str(), buf, sizeof(buf));
      tree->symlinks[path] = std::string(buf, n > 0 ? n : 0);
    } else if (S_ISREG(st.st_mode) && IsElf(root + path)) {
      tree->elf.insert(path);
    }
  }
  closedir(d);
}

// How the tests get inside the root.
enum class Entry { kNone, kChroot, kUserNamespace };

class ImageRootTest : public ::testing::Test {
 protected:
  // Unpacks the tar once for all tests and finds a way in.
  static void SetUpTestSuite() {
    tar_ = Runfile(Env("LOCKSTEP_IMAGE_ROOT_TAR", "deploy/image_root.tar"));
    gpu_ = Env("LOCKSTEP_IMAGE_ROOT_GPU", "") == "1";
    logs_ = NewTempDir("image_logs");
    root_ = NewTempDir("image_root");
    // As root, tar keeps the archive's numeric owners (the storage folder
    // is the lockstep user's); -p keeps /tmp's 1777 whatever the umask.
    std::vector<std::string> extract = {
        Which("tar"), "--extract", "--numeric-owner", "-p",
        "--file",     tar_,        "--directory",     root_};
    RunResult x = RunProcess(extract, logs_, 120);
    owners_kept_ = geteuid() == 0 && x.exit.exit_code == 0;
    if (x.exit.exit_code != 0 &&
        x.err.find("Cannot change ownership") != std::string::npos) {
      // Root in a user namespace that maps no uid 65532 (Bazel's
      // linux-sandbox, for one): unpack as this user instead.
      extract.push_back("--no-same-owner");
      x = RunProcess(extract, logs_, 120);
    }
    if (x.exit.exit_code != 0) {
      unpack_error_ = "tar --extract " + tar_ + ": " + x.err;
      return;
    }
    FindEntry();
    if (entry_ != Entry::kNone && !as_user_) {
      std::cerr << "note: running inside the root as root, not as uid 65532 ("
                << note_ << ")\n";
    }
  }

  static void FindEntry() {
    std::string why;
    // chroot exits 125 when chroot(2) or the switch to the user fails; any
    // other failure is the image's, and the tests report it.
    auto chroot_failed = [](const RunResult& r) {
      return r.exit.exit_code == 125 && r.err.rfind("chroot:", 0) == 0;
    };
    if (geteuid() == 0 && !Which("chroot").empty()) {
      entry_ = Entry::kChroot;
      as_user_ = owners_kept_;
      if (!owners_kept_) note_ = "the archive's owners could not be restored";
      RunResult r = RunProcess(InRoot({"/lockstep", "--version"}), logs_, 10);
      if (!chroot_failed(r)) return;
      if (as_user_) {
        note_ = "chroot --userspec=" + std::string(kUser) + ": " + r.err;
        as_user_ = false;
        r = RunProcess(InRoot({"/lockstep", "--version"}), logs_, 10);
        if (!chroot_failed(r)) return;
      }
      why = "chroot as root failed: " + r.err;
    } else {
      why = geteuid() != 0 ? "not root, so no chroot"
                           : "no chroot command on this host";
    }
    // unshare's own failures (user namespaces disabled, or no unshare(2)
    // under seccomp) print "unshare: ..." and exit 1. A user namespace maps
    // one id, the caller's, to root: no switching to the image's user.
    if (!Which("unshare").empty()) {
      entry_ = Entry::kUserNamespace;
      as_user_ = false;
      note_ = "a user namespace maps only the caller's uid";
      RunResult r = RunProcess(InRoot({"/lockstep", "--version"}), logs_, 10);
      if (!(r.exit.exit_code == 1 && r.err.rfind("unshare:", 0) == 0)) return;
      why += "; unshare --map-root-user --root failed: " + r.err;
    } else {
      why += "; no unshare command (util-linux) on this host";
    }
    entry_ = Entry::kNone;
    skip_reason_ = "cannot enter the image root: " + why;
  }

  void SetUp() override { ASSERT_TRUE(unpack_error_.empty()) << unpack_error_; }

  // argv run with `root_` as "/" and an empty environment (what a
  // container gets from the image: nothing of the host's); as the image's
  // lockstep user where FindEntry found that possible.
  static std::vector<std::string> InRoot(const std::vector<std::string>& argv) {
    std::vector<std::string> cmd = {Which("env"), "-i", "PATH=/"};
    if (entry_ == Entry::kChroot) {
      cmd.push_back(Which("chroot"));
      if (as_user_) cmd.push_back(std::string("--userspec=") + kUser);
      cmd.push_back(root_);
    } else {
      cmd.push_back(Which("unshare"));
      cmd.push_back("--map-root-user");
      cmd.push_back("--root=" + root_);
    }
    cmd.insert(cmd.end(), argv.begin(), argv.end());
    return cmd;
  }

  // What the image's own loader resolves for `elf` inside the root.
  std::set<std::string> LoadedInRoot(const std::string& elf,
                                     std::vector<std::string>* missing) {
    RunResult r = RunProcess(InRoot({kLoader, "--list", elf}), logs_, kTimeout);
    EXPECT_EQ(r.exit.exit_code, 0) << elf << ": " << r.out << r.err;
    return LoadedPaths(r.out, missing);
  }

  static std::string tar_, root_, logs_, unpack_error_, skip_reason_, note_;
  static bool gpu_, owners_kept_, as_user_;
  static Entry entry_;
};

std::string ImageRootTest::tar_, ImageRootTest::root_, ImageRootTest::logs_,
    ImageRootTest::unpack_error_, ImageRootTest::skip_reason_,
    ImageRootTest::note_;
bool ImageRootTest::gpu_ = false, ImageRootTest::owners_kept_ = false,
     ImageRootTest::as_user_ = false;
Entry ImageRootTest::entry_ = Entry::kNone;

#define SKIP_UNLESS_ENTERABLE() \
  if (entry_ == Entry::kNone) GTEST_SKIP() << skip_reason_

TEST_F(ImageRootTest, TarIsDeterministicWithFixedOwnersAndModes) {
  RunResult r = RunProcess({Which("tar"), "--list", "--verbose",
                            "--numeric-owner", "--full-time", "--file", tar_},
                           logs_, 120);
  ASSERT_EQ(r.exit.exit_code, 0) << r.err;
  // "drwxrwxrwt 0/0  0 1970-01-01 00:00:00 tmp/" (symlinks: "a -> b").
  static const std::regex kLine(
      R"(^(\S{10}) (\d+)/(\d+) +\d+ (\S+ \S+) (.+?)( -> .*)?$)");
  std::stringstream ss(r.out);
  std::string line, previous;
  std::map<std::string, std::string> modes;
  int entries = 0;
  while (std::getline(ss, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, kLine)) << line;
    const std::string name = m[5];
    ++entries;
    EXPECT_LT(previous, name) << "not in byte order";
    previous = name;
    modes[name] = m[1];
    EXPECT_EQ(m[4].str(), "1970-01-01 00:00:00") << line;
    const std::string owner = name == "var/lib/lockstep/" ? "65532" : "0";
    EXPECT_EQ(m[2].str(), owner) << line;
    EXPECT_EQ(m[3].str(), owner) << line;
  }
  EXPECT_GT(entries, 10);
  EXPECT_EQ(modes["tmp/"], "drwxrwxrwt");
  EXPECT_EQ(modes["var/lib/lockstep/"], "drwxr-xr-x");
  EXPECT_EQ(modes["lockstep"], "-rwxr-xr-x");
  EXPECT_EQ(modes["etc/passwd"], "-rw-r--r--");
  EXPECT_EQ(modes["lib64/ld-linux-x86-64.so.2"], "-rwxr-xr-x");
  // The runtime mounts its own; an image copy would shadow nothing useful.
  EXPECT_EQ(modes.count("etc/hosts"), 0u);
  EXPECT_EQ(modes.count("etc/resolv.conf"), 0u);

  EXPECT_NE(ReadFileOrEmpty(root_ + "/etc/passwd")
                .find("\nlockstep:x:65532:65532:lockstep:/var/lib/lockstep:"),
            std::string::npos);
  EXPECT_NE(ReadFileOrEmpty(root_ + "/etc/group").find("\nlockstep:x:65532:"),
            std::string::npos);
  EXPECT_NE(ReadFileOrEmpty(root_ + "/etc/nsswitch.conf")
                .find("\nhosts: files dns\n"),
            std::string::npos);
}

TEST_F(ImageRootTest, OnlyTheBinaryAndTheLibrariesItLoadsAreElf) {
  SKIP_UNLESS_ENTERABLE();
  // Inside the root, the image's loader finds every library the host's ldd
  // names, at the same paths.
  std::vector<std::string> missing;
  const std::set<std::string> loaded = LoadedInRoot("/lockstep", &missing);
  EXPECT_TRUE(missing.empty()) << ::testing::PrintToString(missing);
  RunResult host =
      RunProcess({Which("ldd"), Runfile(ImageBinary())}, logs_, kTimeout);
  ASSERT_EQ(host.exit.exit_code, 0) << host.err;
  std::vector<std::string> host_missing;
  EXPECT_EQ(loaded, LoadedPaths(host.out, &host_missing));
  EXPECT_EQ(loaded.count(kLoader), 1u);
  EXPECT_EQ(loaded.count("/lib/x86_64-linux-gnu/libopenblas.so.0"), 1u);

  Tree tree;
  Walk(root_, "", &tree);
  std::set<std::string> expected = loaded;
  expected.insert("/lockstep");
  // The GPU variant's CUDA libraries, and what each loads in the root.
  const std::string cuda_prefix = std::string(kCudaDir) + "/";
  std::set<std::string> cuda_libs;
  for (const std::string& path : tree.elf) {
    if (path.rfind(cuda_prefix, 0) != 0) continue;
    cuda_libs.insert(path.substr(cuda_prefix.size()));
    expected.insert(path);
    std::vector<std::string> lib_missing;
    for (const std::string& dep : LoadedInRoot(path, &lib_missing)) {
      expected.insert(dep);
    }
    EXPECT_TRUE(lib_missing.empty())
        << path << ": " << ::testing::PrintToString(lib_missing);
  }
  std::vector<std::string> extra, absent;
  std::set_difference(tree.elf.begin(), tree.elf.end(), expected.begin(),
                      expected.end(), std::back_inserter(extra));
  std::set_difference(expected.begin(), expected.end(), tree.elf.begin(),
                      tree.elf.end(), std::back_inserter(absent));
  EXPECT_TRUE(extra.empty())
      << "ELF files nothing loads: " << ::testing::PrintToString(extra);
  EXPECT_TRUE(absent.empty()) << "loaded but not in the root as files: "
                              << ::testing::PrintToString(absent);

  if (!gpu_) {
    EXPECT_TRUE(tree.symlinks.empty())
        << ::testing::PrintToString(tree.symlinks);
    EXPECT_TRUE(cuda_libs.empty()) << ::testing::PrintToString(cuda_libs);
    return;
  }
  for (const char* lib :
       {"libcudart.so.", "libcublas.so.", "libcublasLt.so.", "libcudnn.so.",
        "libcudnn_graph.so.", "libcudnn_ops.so.", "libcudnn_cnn.so.",
        "libcudnn_adv.so.", "libcudnn_heuristic.so.",
        "libcudnn_engines_precompiled.so.",
        "libcudnn_engines_runtime_compiled.so.", "libnvrtc.so.",
        "libnccl.so."}) {
    bool found = false;
    for (const std::string& have : cuda_libs) found |= have.rfind(lib, 0) == 0;
    EXPECT_TRUE(found) << lib << " missing from " << kCudaDir;
  }
  // The only links: cuDNN's unversioned names, to a file beside them.
  for (const auto& [path, target] : tree.symlinks) {
    EXPECT_EQ(path.rfind(cuda_prefix, 0), 0u) << path;
    EXPECT_EQ(target.find('/'), std::string::npos) << path << " -> " << target;
    EXPECT_EQ(tree.elf.count(cuda_prefix + target), 1u)
        << path << " -> " << target;
  }
  EXPECT_NE(ReadFileOrEmpty(root_ + "/etc/ld.so.conf.d/cuda.conf")
                .find("/usr/local/cuda/lib64"),
            std::string::npos);
}

TEST_F(ImageRootTest, VersionRunsInside) {
  SKIP_UNLESS_ENTERABLE();
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
  SKIP_UNLESS_ENTERABLE();
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
  SKIP_UNLESS_ENTERABLE();
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
  for (int i = 0; i < 200 && address.empty() && !coordinator.Wait(0).exited;
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
