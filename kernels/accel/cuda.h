/* sparsetune accelerator kernels: CUDA header (compiled by NVRTC). */
typedef unsigned int uint;
typedef unsigned long long ulong;
#define KERNEL extern "C" __global__
#define GLOBAL
#define DEVFN __device__
#define LOCAL_ARRAY(type, name, n) __shared__ type name[n]
#define GLOBAL_ID ((ulong)blockIdx.x * blockDim.x + threadIdx.x)
#define LOCAL_ID ((uint)threadIdx.x)
#define GROUP_ID ((ulong)blockIdx.x)
#define BARRIER() __syncthreads()
#define ATOMIC_ADD_F32(p, v) atomicAdd((p), (v))
/* A multiply-add: NVRTC contracts it into one FFMA (--fmad defaults to
   true). */
#define FMA(a, b, c) ((a) * (b) + (c))
