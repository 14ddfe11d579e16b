// The fixture of the image root tests (image_root_contents_test.cc,
// image_root_run_test.cc): the image root (//deploy:image_root.tar, or the
// tar named by $LOCKSTEP_IMAGE_ROOT_TAR) unpacked into a temp dir once per
// test binary, and a way to run the binary inside it with nothing from the
// host (chroot as the image's user, or a user namespace).
#ifndef LOCKSTEP_DEPLOY_IMAGE_ROOT_TEST_FIXTURE_H_
#define LOCKSTEP_DEPLOY_IMAGE_ROOT_TEST_FIXTURE_H_

#include <unistd.h>

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace testing {
namespace image_root {

// The binary the root was made from (LOCKSTEP_IMAGE_BINARY, a runfile):
// the CPU image's never links CUDA, the GPU image's is the CUDA build.
std::string ImageBinary();

inline constexpr double kTimeout = 30;
inline constexpr char kUser[] = "65532:65532";
inline constexpr char kLoader[] = "/lib64/ld-linux-x86-64.so.2";

// $name, or `fallback` when it is unset or empty.
std::string Env(const char* name, const std::string& fallback);

// A host tool's full path: posix_spawn does not search $PATH, and Bazel's
// test PATH may lack the sbin folders chroot lives in. "" when absent.
std::string Which(const std::string& tool);

// The paths in an `ldd` / `ld.so --list` listing ("libz.so.1 => /lib/...
// (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)"); "not found" lines go
// to *missing.
std::set<std::string> LoadedPaths(const std::string& listing,
                                  std::vector<std::string>* missing);

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

// In a TEST_F of ImageRootTest: skips, saying why, where FindEntry found
// no way into the root.
#define SKIP_UNLESS_ENTERABLE() \
  if (entry_ == Entry::kNone) GTEST_SKIP() << skip_reason_

// For tests that run the image's lockstep inside the root. Under a
// sanitizer that binary is the sanitizer's, which the unpacked root cannot
// serve (a container runtime mounts /proc; the suppressions stay outside):
// ASan's runtime reads its options and the threads of LeakSanitizer's exit
// check from /proc, so every run would end in "LeakSanitizer has
// encountered a fatal error" whatever ASAN_OPTIONS says; TSan's reads the
// suppressions of third_party/tsan/suppressions.txt by their path outside
// the root, so Abseil's own hand-offs would be reported as races.
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNLESS_RUNNABLE()                                              \
  SKIP_UNLESS_ENTERABLE();                                                  \
  GTEST_SKIP() << "under AddressSanitizer the image's lockstep needs /proc, " \
                  "which the unpacked image root does not have"
#elif defined(__SANITIZE_THREAD__)
#define SKIP_UNLESS_RUNNABLE()                                            \
  SKIP_UNLESS_ENTERABLE();                                                \
  GTEST_SKIP() << "under ThreadSanitizer the image's lockstep needs the " \
                  "suppressions of third_party/tsan and /proc, which the " \
                  "unpacked image root does not have"
#else
#define SKIP_UNLESS_RUNNABLE() SKIP_UNLESS_ENTERABLE()
#endif

}  // namespace image_root
}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_DEPLOY_IMAGE_ROOT_TEST_FIXTURE_H_
