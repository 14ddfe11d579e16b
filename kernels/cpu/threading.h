// Compute threads for the CPU kernels: a small persistent pool that
// ParallelFor uses for every parallel loop, GEMM included (gemm.cc splits
// each product over it and keeps OpenBLAS itself single-threaded).
#ifndef LOCKSTEP_KERNELS_CPU_THREADING_H_
#define LOCKSTEP_KERNELS_CPU_THREADING_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace lockstep {

// Sets the threads ParallelFor (and so GEMM) uses; n <= 0 means
// every core. Call it between steps, not while kernels run on other threads.
void SetNumThreads(int n);
// The current setting (every core until SetNumThreads is called).
int NumThreads();

// Calls fn(begin, end) on disjoint ranges that cover [0, n), at most one
// range per thread and none shorter than min_grain (except when n is), and
// blocks until all return. The ranges depend only on n, min_grain and
// NumThreads(), so a loop whose ranges write disjoint outputs is
// deterministic. Runs inline (one call, [0, n)) when there is one thread, when
// n is small, when called from inside another ParallelFor, or when another
// thread is using the pool (replicas running side by side).
void ParallelFor(int64_t n, int64_t min_grain,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn);

// True on a thread that is running a ParallelFor range. A nested ParallelFor
// runs inline, so work split for the pool there only adds overhead.
bool InsideParallelFor();

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_THREADING_H_
