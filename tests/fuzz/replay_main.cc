// main() for a fuzz target built without libFuzzer (fuzz.bzl): runs
// LLVMFuzzerTestOneInput over every file of the folders and files named on
// the command line, then over each input's prefixes (every length up to 256,
// then 16 more spread to the end) and a fixed set of single-byte changes
// (every 7th byte set to 0x00, 0xff, and its bits flipped). Deterministic:
// the same inputs every run. Arguments starting with '-' (libFuzzer's
// flags) are ignored.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& bytes) {
  // A copy of exactly `size` bytes, so reading past it is a heap overflow
  // that ASan reports.
  std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(copy.empty() ? nullptr : copy.data(), copy.size());
}

int64_t Replay(const std::string& bytes) {
  int64_t runs = 0;
  Run(bytes);
  ++runs;
  const size_t n = bytes.size();
  for (size_t len = 0; len < n; ++len) {
    if (len > 256 && (len - 256) % std::max<size_t>(1, (n - 256) / 16) != 0) {
      continue;
    }
    Run(bytes.substr(0, len));
    ++runs;
  }
  for (size_t i = 0; i < n; i += 7) {
    for (int change = 0; change < 3; ++change) {
      std::string b = bytes;
      b[i] = change == 0   ? '\0'
             : change == 1 ? static_cast<char>(0xff)
                           : static_cast<char>(~b[i]);
      Run(b);
      ++runs;
    }
  }
  return runs;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.empty() && arg[0] == '-') continue;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path().string());
      }
    } else {
      files.push_back(arg);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs\n");
    return 1;
  }
  int64_t runs = 0;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 1;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    runs += Replay(bytes);
  }
  std::printf("replay: %zu inputs, %lld runs, no failure\n", files.size(),
              static_cast<long long>(runs));
  return 0;
}
