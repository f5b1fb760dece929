package opencl

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sparsetune/sparsetune/internal/buildlog"
)

// requireRuntime returns the OpenCL devices, or skips the test when there
// is no runtime or device (fails instead with SPARSETUNE_OPENCL_TESTS=1).
func requireRuntime(t testing.TB) []Device {
	t.Helper()
	strict := os.Getenv("SPARSETUNE_OPENCL_TESTS") == "1"
	fail := func(format string, args ...any) {
		t.Helper()
		if strict {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (set SPARSETUNE_OPENCL_TESTS=1 to fail instead)", args...)
	}
	if err := Load(); err != nil {
		fail("%v", err)
	}
	devs, err := Devices()
	if err != nil {
		fail("listing OpenCL devices: %v", err)
	}
	if len(devs) == 0 {
		fail("OpenCL runtime loaded but no device found")
	}
	return devs
}

// newTestContext opens a context on the first device, closed at the end of
// the test.
func newTestContext(t testing.TB) *Context {
	t.Helper()
	dev := requireRuntime(t)[0]
	c, err := NewContext(dev)
	if err != nil {
		t.Fatalf("NewContext(%s): %v", dev.Name, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func mustBuild(t testing.TB, c *Context, src string) *Program {
	t.Helper()
	p, err := c.Build(src, "")
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return p
}

func mustKernel(t testing.TB, p *Program, name string) *Kernel {
	t.Helper()
	k, err := p.Kernel(name)
	if err != nil {
		t.Fatalf("Kernel(%q): %v", name, err)
	}
	return k
}

func mustBuffer(t testing.TB, c *Context, size int) *Buffer {
	t.Helper()
	b, err := c.NewBuffer(size)
	if err != nil {
		t.Fatalf("NewBuffer(%d): %v", size, err)
	}
	return b
}

func TestLoadMissingLibrary(t *testing.T) {
	_, err := loadFrom([]string{"libsparsetune-no-such-opencl.so.1"})
	if !errors.Is(err, ErrNoRuntime) {
		t.Fatalf("loadFrom(missing library) = %v, want an error wrapping ErrNoRuntime", err)
	}
	t.Logf("missing library: %v", err)
	if runtime.GOOS != "linux" || !runtimeLoading {
		return
	}
	// A library that loads but is not OpenCL: a missing entry point.
	_, err = loadFrom([]string{"libc.so.6"})
	if !errors.Is(err, ErrNoRuntime) || !strings.Contains(err.Error(), "clGetPlatformIDs") {
		t.Fatalf("loadFrom(libc) = %v, want ErrNoRuntime naming clGetPlatformIDs", err)
	}
}

func TestErrorNames(t *testing.T) {
	for c := Code(-1); c >= -72; c-- {
		if c <= -20 && c >= -29 {
			continue // not assigned by the standard
		}
		name := c.String()
		if !strings.HasPrefix(name, "CL_") || strings.Contains(name, "UNKNOWN") {
			t.Errorf("Code(%d) = %q, want a CL_ name", c, name)
		}
	}
	for code, want := range map[int32]string{
		-5: "CL_OUT_OF_RESOURCES", -11: "CL_BUILD_PROGRAM_FAILURE", -30: "CL_INVALID_VALUE",
		-46: "CL_INVALID_KERNEL_NAME", -54: "CL_INVALID_WORK_GROUP_SIZE", -72: "CL_MAX_SIZE_RESTRICTION_EXCEEDED",
		-1001: "CL_PLATFORM_NOT_FOUND_KHR", -25: "CL_UNKNOWN_ERROR_-25",
	} {
		err := check(code, "clSomething")
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "clSomething") {
			t.Errorf("check(%d) = %q, want it to name %s and the call", code, err, want)
		}
		if !errors.Is(err, Code(code)) {
			t.Errorf("errors.Is(check(%d), Code(%d)) = false", code, code)
		}
	}
	if err := check(0, "clFoo"); err != nil {
		t.Errorf("check(0) = %v", err)
	}
	wrapped := fmt.Errorf("outer: %w", check(-5, "clEnqueueNDRangeKernel"))
	if !errors.Is(wrapped, ErrOutOfResources) || errors.Is(wrapped, ErrOutOfHostMemory) {
		t.Errorf("errors.Is on a wrapped *Error does not match its code")
	}
	var e *Error
	if !errors.As(wrapped, &e) || e.Code != ErrOutOfResources || e.Op != "clEnqueueNDRangeKernel" {
		t.Errorf("errors.As(%v) = %+v", wrapped, e)
	}
}

func TestDevices(t *testing.T) {
	devs := requireRuntime(t)
	ps, err := Platforms()
	if err != nil || len(ps) == 0 {
		t.Fatalf("Platforms() = %v, %v", ps, err)
	}
	for _, p := range ps {
		t.Logf("platform %q vendor %q version %q", p.Name, p.Vendor, p.Version)
		if p.Name == "" || !strings.HasPrefix(p.Version, "OpenCL ") {
			t.Errorf("platform %+v: empty name or bad version", p)
		}
	}
	for _, d := range devs {
		t.Logf("device %q: type %s, vendor %q, driver %q, version %q, C version %q, %d CUs, %d MHz, global %d B, max alloc %d B, local %d B, max work-group %d",
			d.Name, d.Type, d.Vendor, d.DriverVersion, d.Version, d.CVersion, d.ComputeUnits, d.MaxClockMHz,
			d.GlobalMemBytes, d.MaxAllocBytes, d.LocalMemBytes, d.MaxWorkGroupSize)
		switch {
		case d.Name == "" || d.Platform == "":
			t.Errorf("device %+v: empty name or platform", d)
		case d.DriverVersion == "":
			t.Errorf("device %q: empty driver version", d.Name)
		case !strings.HasPrefix(d.Version, "OpenCL "):
			t.Errorf("device %q: version %q does not start with \"OpenCL \"", d.Name, d.Version)
		case d.ComputeUnits <= 0 || d.MaxClockMHz < 0:
			t.Errorf("device %q: %d compute units, %d MHz", d.Name, d.ComputeUnits, d.MaxClockMHz)
		case d.GlobalMemBytes <= 0 || d.MaxAllocBytes <= 0 || d.MaxAllocBytes > d.GlobalMemBytes:
			t.Errorf("device %q: global %d B, max alloc %d B", d.Name, d.GlobalMemBytes, d.MaxAllocBytes)
		case d.MaxWorkGroupSize <= 0:
			t.Errorf("device %q: max work-group size %d", d.Name, d.MaxWorkGroupSize)
		case d.Type&(TypeCPU|TypeGPU|TypeAccelerator|TypeCustom) == 0:
			t.Errorf("device %q: type %s", d.Name, d.Type)
		}
	}
	if got := (TypeGPU | TypeDefault).String(); got != "GPU|DEFAULT" {
		t.Errorf("DeviceType string = %q", got)
	}
	if _, err := NewContext(Device{Name: "made up"}); err == nil {
		t.Errorf("NewContext(zero Device) succeeded")
	}
}

const vaddSrc = `
__kernel void vadd(__global const float *a, __global const float *b,
                   __global float *c, uint n) {
	size_t i = get_global_id(0);
	if (i < n)
		c[i] = a[i] + b[i];
}

__kernel void axpb(__global float *y, __global const int *x, float a, int b, uint n) {
	size_t i = get_global_id(0);
	if (i < n)
		y[i] = a * (float)x[i] + (float)b;
}
`

func TestBuildError(t *testing.T) {
	c := newTestContext(t)
	src := `
__kernel void broken(__global float *x) {
	x[get_global_id(0)] = 1.0f   /* missing semicolon */
	x[0] += sparsetune_undeclared;
}
`
	p, err := c.Build(src, "")
	if err == nil {
		p.Release()
		t.Fatal("Build of broken source succeeded")
	}
	t.Logf("build error:\n%v", err)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("error %T is not a *BuildError: %v", err, err)
	}
	if !errors.Is(err, ErrBuildProgramFailure) {
		t.Errorf("error does not match ErrBuildProgramFailure: %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, c.Device().Name) {
		t.Errorf("error does not name the device %q: %s", c.Device().Name, msg)
	}
	if strings.TrimSpace(be.Log) == "" {
		t.Fatalf("empty build log")
	}
	if !strings.Contains(strings.ToLower(be.Log), "error") || !strings.Contains(msg, "CL_BUILD_PROGRAM_FAILURE") {
		t.Errorf("log or message lacks the error: %s", msg)
	}
	first := strings.TrimSpace(strings.Split(strings.TrimSpace(be.Log), "\n")[0])
	if !strings.Contains(msg, first) {
		t.Errorf("message does not quote the log's first line %q", first)
	}
	if lines := strings.Count(msg, "\n"); lines > buildlog.Lines+1 {
		t.Errorf("message has %d lines, want at most %d", lines, buildlog.Lines+1)
	}
	if c.live() != 0 {
		t.Errorf("failed build left %d live objects", c.live())
	}

	// A long log is cut to buildlog.Lines lines.
	long := &BuildError{Device: "dev", Log: strings.Repeat("line\n", 50), Err: ErrBuildProgramFailure}
	if got := long.Error(); strings.Count(got, "\n") != buildlog.Lines+1 || !strings.Contains(got, "30 more lines") {
		t.Errorf("long log message:\n%s", got)
	}

	// Invalid options are a build failure of another kind.
	if _, err := c.Build(vaddSrc, "-this-is-not-an-option"); err == nil {
		t.Errorf("Build with a bad option succeeded")
	} else {
		t.Logf("bad option: %v", err)
	}
}

func TestVectorAdd(t *testing.T) {
	c := newTestContext(t)
	p := mustBuild(t, c, vaddSrc)
	k := mustKernel(t, p, "vadd")
	if _, err := p.Kernel("no_such_kernel"); !errors.Is(err, ErrInvalidKernelName) {
		t.Errorf("Kernel(no_such_kernel) = %v, want CL_INVALID_KERNEL_NAME", err)
	}

	const n = 1 << 20
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i] = float32(i) * 0.5
		b[i] = 1 / float32(i+1)
	}
	bytes := n * 4
	da, db, dc := mustBuffer(t, c, bytes), mustBuffer(t, c, bytes), mustBuffer(t, c, bytes)

	// Asynchronous writes: events with durations.
	wa, err := WriteAsync(da, 0, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFloat32(db, b); err != nil {
		t.Fatal(err)
	}
	if err := dc.Zero(); err != nil {
		t.Fatal(err)
	}
	if err := k.SetArgs(da, db, dc, uint32(n)); err != nil {
		t.Fatal(err)
	}
	run, err := c.Enqueue(k, []int{n}, []int{64})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	rd, err := ReadAsync(dc, 0, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.Wait(); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if want := a[i] + b[i]; out[i] != want {
			t.Fatalf("c[%d] = %v, want %v", i, out[i], want)
		}
	}
	for _, ev := range []*Event{wa, run, rd} {
		d, err := ev.Duration()
		if err != nil {
			t.Fatalf("%s: Duration: %v", ev.op, err)
		}
		t.Logf("%s: %v", ev.op, d)
		if d <= 0 {
			t.Errorf("%s: duration %v, want > 0", ev.op, d)
		}
		if err := ev.Release(); err != nil {
			t.Errorf("%s: Release: %v", ev.op, err)
		}
		if err := ev.Release(); err != nil {
			t.Errorf("%s: second Release: %v", ev.op, err)
		}
		if d2, err := ev.Duration(); err != nil || d2 != d {
			t.Errorf("%s: Duration after Release = %v, %v", ev.op, d2, err)
		}
	}

	// Again with the driver choosing the work-group size, and Run.
	if err := dc.Zero(); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(k, []int{n}, nil); err != nil {
		t.Fatal(err)
	}
	clear(out)
	if err := ReadFloat32(dc, out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if want := a[i] + b[i]; out[i] != want {
			t.Fatalf("run 2: c[%d] = %v, want %v", i, out[i], want)
		}
	}
	if wg, err := k.WorkGroupSize(); err != nil || wg <= 0 {
		t.Errorf("WorkGroupSize() = %d, %v", wg, err)
	}
}

func TestScalarArgs(t *testing.T) {
	c := newTestContext(t)
	k := mustKernel(t, mustBuild(t, c, vaddSrc), "axpb")
	const n = 1000
	x := make([]int32, n)
	for i := range x {
		x[i] = int32(i - 500)
	}
	dx, err := NewBufferFrom(c, x)
	if err != nil {
		t.Fatal(err)
	}
	dy := mustBuffer(t, c, 4*n)
	if err := k.SetArgs(dy, dx, float32(2.5), int32(-7), uint32(n)); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(k, []int{1024}, nil); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, n)
	if err := ReadFloat32(dy, y); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if want := 2.5*float32(x[i]) - 7; y[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want)
		}
	}

	// Wrong argument types and sizes are Go or CL errors, not crashes.
	if err := k.SetArg(2, 3); err == nil || !strings.Contains(err.Error(), "unsupported type int") {
		t.Errorf("SetArg(int) = %v", err)
	}
	if err := k.SetArg(2, float64(1)); !errors.Is(err, ErrInvalidArgSize) {
		t.Errorf("SetArg(float64 for float) = %v, want CL_INVALID_ARG_SIZE", err)
	}
	if err := k.SetArg(9, int32(1)); !errors.Is(err, ErrInvalidArgIndex) {
		t.Errorf("SetArg(9) = %v, want CL_INVALID_ARG_INDEX", err)
	}
	if err := k.SetArg(0, (*Buffer)(nil)); err == nil {
		t.Errorf("SetArg(nil buffer) succeeded")
	}
	if _, err := c.Enqueue(k, nil, nil); err == nil {
		t.Errorf("Enqueue with no dimensions succeeded")
	}
	if _, err := c.Enqueue(k, []int{8, 8}, []int{8}); err == nil {
		t.Errorf("Enqueue with mismatched local dimensions succeeded")
	}
	// A released buffer argument is caught before enqueueing.
	if err := dx.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(k, []int{n}, nil); !errors.Is(err, ErrReleased) {
		t.Errorf("Enqueue with a released buffer argument = %v, want ErrReleased", err)
	}
}

func TestBufferTransfers(t *testing.T) {
	c := newTestContext(t)
	b := mustBuffer(t, c, 64)
	if b.Size() != 64 {
		t.Fatalf("Size() = %d", b.Size())
	}
	if err := b.Zero(); err != nil {
		t.Fatal(err)
	}
	if err := Write(b, 4, []uint32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(60, []byte{9, 8, 7, 6}); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, 16)
	if err := ReadUint32(b, got); err != nil {
		t.Fatal(err)
	}
	want := []uint32{0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0x06070809}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("after writes: %v, want %v", got, want)
		}
	}
	part := make([]uint32, 2)
	if err := Read(b, 5, part); err != nil || part[0] != 2 || part[1] != 3 {
		t.Errorf("Read at element 5 = %v, %v", part, err)
	}
	raw := make([]byte, 3)
	ev, err := b.ReadAsync(16, raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Release(); err != nil { // waits: raw is in use
		t.Fatal(err)
	}
	if raw[0] != 1 || raw[1] != 0 {
		t.Errorf("ReadAsync then Release: %v", raw)
	}

	ints := []int32{-1, -2}
	if err := WriteInt32(b, ints); err != nil {
		t.Fatal(err)
	}
	back := make([]int32, 2)
	if err := ReadInt32(b, back); err != nil || back[0] != -1 || back[1] != -2 {
		t.Errorf("int32 round trip = %v, %v", back, err)
	}

	// Out of range and empty transfers.
	if err := b.Write(62, []byte{1, 2, 3}); err == nil {
		t.Errorf("write past the end succeeded")
	}
	if err := b.Read(-1, raw); err == nil {
		t.Errorf("read at -1 succeeded")
	}
	if err := Read(b, 15, part); err == nil {
		t.Errorf("typed read past the end succeeded")
	}
	if err := b.Write(64, nil); err != nil {
		t.Errorf("empty write at the end: %v", err)
	}
	ev, err = b.WriteAsync(0, nil)
	if err != nil || ev.Wait() != nil || ev.Release() != nil {
		t.Errorf("empty async write: %v", err)
	}
	if d, err := ev.Duration(); err != nil || d != 0 {
		t.Errorf("empty async write duration = %v, %v", d, err)
	}

	// Odd sizes zero with a smaller pattern; empty buffers work.
	odd := mustBuffer(t, c, 7)
	if err := odd.Write(0, []byte{1, 2, 3, 4, 5, 6, 7}); err != nil {
		t.Fatal(err)
	}
	if err := odd.Zero(); err != nil {
		t.Fatal(err)
	}
	seven := make([]byte, 7)
	if err := odd.Read(0, seven); err != nil || string(seven) != "\x00\x00\x00\x00\x00\x00\x00" {
		t.Errorf("odd buffer after Zero = %v, %v", seven, err)
	}
	empty := mustBuffer(t, c, 0)
	if err := empty.Zero(); err != nil {
		t.Errorf("Zero on empty buffer: %v", err)
	}
	if _, err := c.NewBuffer(-1); err == nil {
		t.Errorf("NewBuffer(-1) succeeded")
	}
	if _, err := c.NewBuffer(int(c.Device().GlobalMemBytes) * 4); err == nil {
		t.Errorf("NewBuffer(4x global memory) succeeded")
	} else {
		t.Logf("huge buffer: %v", err)
	}
}

// atomicSrc adds floats into few slots with a compare-and-swap loop on the
// float's bits (OpenCL 1.x has no float atomics), once per work-item and
// once per work-group after a __local reduction.
const atomicSrc = `
inline void atomic_add_float(volatile __global float *p, float v) {
	volatile __global uint *u = (volatile __global uint *)p;
	uint old = *u, seen;
	for (;;) {
		uint want = as_uint(as_float(old) + v);
		seen = atomic_cmpxchg(u, old, want);
		if (seen == old)
			break;
		old = seen;
	}
}

__kernel void scatter_add(__global float *sums, __global const float *vals,
                          uint nslots, uint n) {
	size_t i = get_global_id(0);
	if (i < n)
		atomic_add_float(&sums[i % nslots], vals[i]);
}

__kernel void group_add(__global float *sums, __global const float *vals,
                        __local float *scratch, uint nslots, uint n) {
	size_t i = get_global_id(0), l = get_local_id(0), g = get_local_size(0);
	scratch[l] = i < n ? vals[i] : 0.0f;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (size_t s = g / 2; s > 0; s /= 2) {
		if (l < s)
			scratch[l] += scratch[l + s];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (l == 0)
		atomic_add_float(&sums[get_group_id(0) % nslots], scratch[0]);
}
`

func TestAtomicFloatAdd(t *testing.T) {
	c := newTestContext(t)
	p := mustBuild(t, c, atomicSrc)
	const n, nslots, group = 1 << 18, 8, 64
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i%7 + 1) // small integers: every partial sum is exact
	}
	dvals, err := NewBufferFrom(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	sums := mustBuffer(t, c, 4*nslots)

	check := func(name string, want []float32) {
		t.Helper()
		got := make([]float32, nslots)
		if err := ReadFloat32(sums, got); err != nil {
			t.Fatal(err)
		}
		for s := range want {
			if got[s] != want[s] {
				t.Errorf("%s: sums = %v, want %v", name, got, want)
				return
			}
		}
		t.Logf("%s: sums = %v", name, got)
	}

	scatter := mustKernel(t, p, "scatter_add")
	if err := sums.Zero(); err != nil {
		t.Fatal(err)
	}
	if err := scatter.SetArgs(sums, dvals, uint32(nslots), uint32(n)); err != nil {
		t.Fatal(err)
	}
	ev, err := c.Enqueue(scatter, []int{n}, []int{group})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := ev.Duration(); err != nil || d <= 0 {
		t.Errorf("scatter_add duration = %v, %v", d, err)
	}
	want := make([]float32, nslots)
	for i, v := range vals {
		want[i%nslots] += v
	}
	check("scatter_add", want)

	gk := mustKernel(t, p, "group_add")
	if err := sums.Zero(); err != nil {
		t.Fatal(err)
	}
	if err := gk.SetArgs(sums, dvals, LocalMem(group*4), uint32(nslots), uint32(n)); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(gk, []int{n}, []int{group}); err != nil {
		t.Fatal(err)
	}
	clear(want)
	for i, v := range vals {
		want[(i/group)%nslots] += v
	}
	check("group_add", want)
	if err := gk.SetArg(2, LocalMem(0)); err == nil {
		t.Errorf("SetArg(LocalMem(0)) succeeded")
	}
}

func TestAsyncRoundTrip(t *testing.T) {
	c := newTestContext(t)
	const n = 1 << 16
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(math.Sin(float64(i)))
	}
	b := mustBuffer(t, c, 4*n)
	// Write in two async halves, read back async into two halves.
	w1, err := WriteAsync(b, 0, src[:n/2])
	if err != nil {
		t.Fatal(err)
	}
	w2, err := WriteAsync(b, n/2, src[n/2:])
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, n)
	r1, err := ReadAsync(b, 0, dst[:n/2])
	if err != nil {
		t.Fatal(err)
	}
	r2, err := ReadAsync(b, n/2, dst[n/2:])
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []*Event{w1, w2, r1, r2} {
		if err := ev.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := ev.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range dst {
		if dst[i] != src[i] {
			t.Fatalf("dst[%d] = %v, want %v", i, dst[i], src[i])
		}
	}
	if c.live() != 5 {
		t.Errorf("live objects = %d, want 5 (buffer and 4 events)", c.live())
	}
	// Events left unreleased are released by Close (in Cleanup).
}

// TestConcurrentUse runs vector adds from several goroutines on one
// context, each with its own kernel and buffers.
func TestConcurrentUse(t *testing.T) {
	c := newTestContext(t)
	p := mustBuild(t, c, vaddSrc)
	const workers, rounds, n = 4, 10, 4096
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			k, err := p.Kernel("vadd")
			if err != nil {
				errs <- err
				return
			}
			defer k.Release()
			a, b := make([]float32, n), make([]float32, n)
			for i := range a {
				a[i], b[i] = float32(w*n+i), float32(i)*2
			}
			da, err1 := NewBufferFrom(c, a)
			db, err2 := NewBufferFrom(c, b)
			dc, err3 := c.NewBuffer(4 * n)
			if err := errors.Join(err1, err2, err3); err != nil {
				errs <- err
				return
			}
			defer da.Release()
			defer db.Release()
			defer dc.Release()
			out := make([]float32, n)
			for r := range rounds {
				if err := k.SetArgs(da, db, dc, uint32(n)); err != nil {
					errs <- err
					return
				}
				if err := c.Run(k, []int{n}, nil); err != nil {
					errs <- err
					return
				}
				if err := ReadFloat32(dc, out); err != nil {
					errs <- err
					return
				}
				for i := range out {
					if out[i] != a[i]+b[i] {
						errs <- fmt.Errorf("worker %d round %d: c[%d] = %v, want %v", w, r, i, out[i], a[i]+b[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := c.live(); got != 1 {
		t.Errorf("live objects after workers = %d, want 1 (the program)", got)
	}
}

// TestCreateCloseLoop creates and closes a context with buffers and
// kernels many times, releasing by hand or leaving it to Close, and checks
// that closed objects fail cleanly.
func TestCreateCloseLoop(t *testing.T) {
	dev := requireRuntime(t)[0]
	iterations := 200
	if testing.Short() {
		iterations = 20
	}
	for it := range iterations {
		c, err := NewContext(dev)
		if err != nil {
			t.Fatalf("iteration %d: NewContext: %v", it, err)
		}
		p := mustBuild(t, c, vaddSrc)
		k1, k2 := mustKernel(t, p, "vadd"), mustKernel(t, p, "axpb")
		bufs := []*Buffer{mustBuffer(t, c, 1024), mustBuffer(t, c, 1024), mustBuffer(t, c, 1024)}
		if err := k1.SetArgs(bufs[0], bufs[1], bufs[2], uint32(256)); err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		ev, err := c.Enqueue(k1, []int{256}, nil)
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		if it%2 == 0 {
			// Release by hand, twice each.
			for range 2 {
				for _, err := range []error{ev.Release(), k1.Release(), k2.Release(), p.Release(),
					bufs[0].Release(), bufs[1].Release(), bufs[2].Release()} {
					if err != nil {
						t.Fatalf("iteration %d: Release: %v", it, err)
					}
				}
			}
			if n := c.live(); n != 0 {
				t.Fatalf("iteration %d: %d live objects after releasing all", it, n)
			}
		} else if n := c.live(); n != 7 {
			t.Fatalf("iteration %d: %d live objects, want 7", it, n)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("iteration %d: Close: %v", it, err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("iteration %d: second Close: %v", it, err)
		}
		if n := c.live(); n != 0 {
			t.Fatalf("iteration %d: %d live objects after Close", it, n)
		}
		// Everything fails cleanly once closed; Release stays a no-op.
		if _, err := c.NewBuffer(16); !errors.Is(err, ErrClosed) {
			t.Fatalf("NewBuffer after Close = %v", err)
		}
		if _, err := c.Build(vaddSrc, ""); !errors.Is(err, ErrClosed) {
			t.Fatalf("Build after Close = %v", err)
		}
		if err := k1.SetArg(3, uint32(1)); !errors.Is(err, ErrClosed) {
			t.Fatalf("SetArg after Close = %v", err)
		}
		if _, err := c.Enqueue(k1, []int{256}, nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Enqueue after Close = %v", err)
		}
		if err := bufs[0].Write(0, []byte{1}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Write after Close = %v", err)
		}
		if _, err := p.Kernel("vadd"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Kernel after Close = %v", err)
		}
		if err := c.Finish(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Finish after Close = %v", err)
		}
		for _, err := range []error{ev.Release(), k1.Release(), k2.Release(), p.Release(), bufs[0].Release()} {
			if err != nil {
				t.Fatalf("Release after Close: %v", err)
			}
		}
	}
}
