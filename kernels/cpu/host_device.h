// LOCKSTEP_HOST_DEVICE marks an inline function that host code and
// kernels/cuda's .cu files both compile (nvcc: __host__ __device__; a host
// compiler: nothing), so the CPU and the GPU run one definition of it.
#ifndef LOCKSTEP_KERNELS_CPU_HOST_DEVICE_H_
#define LOCKSTEP_KERNELS_CPU_HOST_DEVICE_H_

#ifdef __CUDACC__
#define LOCKSTEP_HOST_DEVICE __host__ __device__
#else
#define LOCKSTEP_HOST_DEVICE
#endif

#endif  // LOCKSTEP_KERNELS_CPU_HOST_DEVICE_H_
