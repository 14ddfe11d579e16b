// Proves the image root (//deploy:image_root.tar, or the tar named by
// $LOCKSTEP_IMAGE_ROOT_TAR) is what it should be: the tar is deterministic,
// with fixed owners and modes, and nothing but the binary and the libraries
// it loads (resolved inside the root by the image's own loader) is an ELF
// file.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "deploy/image_root_test_fixture.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;
using testing::image_root::Entry;
using testing::image_root::ImageBinary;
using testing::image_root::ImageRootTest;
using testing::image_root::kLoader;
using testing::image_root::kTimeout;
using testing::image_root::LoadedPaths;
using testing::image_root::Which;

constexpr char kCudaDir[] = "/usr/local/cuda/lib64";

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

}  // namespace
}  // namespace lockstep
