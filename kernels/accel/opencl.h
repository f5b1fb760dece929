/* sparsetune accelerator kernels: OpenCL C 1.2 header. */
#define KERNEL __kernel
#define GLOBAL __global
#define DEVFN
#define LOCAL_ARRAY(type, name, n) __local type name[n]
#define GLOBAL_ID ((ulong)get_global_id(0))
#define LOCAL_ID ((uint)get_local_id(0))
#define GROUP_ID ((ulong)get_group_id(0))
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)

/* OpenCL 1.2 has no float atomics: retry a 32-bit compare-and-swap on the
   float's bits until no other work-item changed it in between. */
void atomic_add_f32(__global float *p, float v) {
	volatile __global uint *u = (volatile __global uint *)p;
	uint seen = *u, prev;
	for (;;) {
		prev = atomic_cmpxchg(u, seen, as_uint(as_float(seen) + v));
		if (prev == seen)
			break;
		seen = prev;
	}
}
#define ATOMIC_ADD_F32(p, v) atomic_add_f32((p), (v))
/* A multiply-add at the device's fastest (mad may fuse or not, as the
   device runs it faster). */
#define FMA(a, b, c) mad((a), (b), (c))
