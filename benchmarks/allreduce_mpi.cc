// One rank of the Open MPI side of benchmarks/allreduce.sh: times
// MPI_Allreduce (Debian's Open MPI, the TCP BTL on the interface mpirun
// names: 127.0.0.1, or each host's shaped link with --link; Open MPI's own
// choice of algorithm by size) with the same sizes, iteration counts and
// timing rule as allreduce_lockstep.cc. Started by mpirun, not one process
// at a time: the rank and world come from MPI, and the script passes the
// rest. Rank 0 prints one `RESULT size_bytes iters median_s min_s` line per
// size.
//
//   mpirun -np W ... allreduce_mpi --rendezvous DIR [--sizes 4K,1M,...]
//       [--iters N] [--warmup N] [--timeout-s S] [--deadline-s S]
// The C API only: the C++ bindings include <mpi.h>, which is not on the
// default include path.
#define OMPI_SKIP_MPICXX 1
#include <mpi/mpi.h>  // Debian: /usr/include/x86_64-linux-gnu/mpi

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/allreduce_harness.h"

namespace lockstep {
namespace {

constexpr char kUsage[] =
    "usage: mpirun -np W allreduce_mpi --rendezvous DIR (rank and world come "
    "from MPI)\n";

absl::Status MpiCall(const char* what, int rc) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  return absl::UnavailableError(absl::StrCat(what, ": ", std::string(text, n)));
}

absl::Status Run(const BenchFlags& b) {
  // In place, float sum, Open MPI's tuned collective picks the algorithm.
  auto all_reduce = [](float* data, int64_t count) {
    return MpiCall("MPI_Allreduce",
                   MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count),
                                 MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
  };
  int major = 0, minor = 0, release = 0;
#if defined(OMPI_MAJOR_VERSION)
  major = OMPI_MAJOR_VERSION;
  minor = OMPI_MINOR_VERSION;
  release = OMPI_RELEASE_VERSION;
#endif
  return RunSizes(b,
                  absl::StrFormat("# open mpi MPI_Allreduce (Open MPI %d.%d.%d, "
                                  "btl tcp): world %d, warmup %d",
                                  major, minor, release, b.world, b.warmup),
                  all_reduce, all_reduce);
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // Errors come back as codes (MpiCall), not an abort of the whole job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // The harness's flags, with the rank and world MPI gave.
  std::vector<std::string> args(argv, argv + argc);
  args.insert(args.begin() + 1, {"--rank", std::to_string(rank), "--world",
                                 std::to_string(world)});
  std::vector<char*> new_argv;
  for (std::string& a : args) new_argv.push_back(a.data());
  const int rc = lockstep::BenchMain(static_cast<int>(new_argv.size()),
                                     new_argv.data(), "allreduce_mpi",
                                     lockstep::kUsage, {}, lockstep::Run);
  if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
  return 0;
}
