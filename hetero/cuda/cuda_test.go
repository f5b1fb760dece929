package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// needGPU loads the driver; without one the test is skipped, unless
// SPARSETUNE_GPU_TESTS=1 demands a GPU.
func needGPU(t testing.TB) {
	t.Helper()
	if err := Load(); err != nil {
		if os.Getenv("SPARSETUNE_GPU_TESTS") != "1" {
			t.Skipf("no CUDA driver: %v", err)
		}
		t.Fatalf("SPARSETUNE_GPU_TESTS=1 but the CUDA driver does not load: %v", err)
	}
}

// testContext opens a context on the first device, closed at the end of
// the test.
func testContext(t testing.TB) *Context {
	t.Helper()
	needGPU(t)
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 {
		t.Fatal("no CUDA devices")
	}
	c, err := NewContext(devs[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// f32 views pinned bytes as float32s.
func f32(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func TestDevices(t *testing.T) {
	needGPU(t)
	v, err := DriverVersion()
	if err != nil {
		t.Fatal(err)
	}
	nv, err := NVRTCVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("driver CUDA %s, NVRTC %s", v, nv)
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 {
		t.Fatal("Devices returned none")
	}
	for i, d := range devs {
		t.Logf("%v: clock %d MHz, %d MiB", d, d.ClockMHz, d.GlobalMemory>>20)
		if d.Ordinal != i || d.Name == "" || d.Major < 3 || d.Minor < 0 || d.SMs <= 0 || d.GlobalMemory < 1<<28 {
			t.Errorf("device %d: implausible %+v", i, d)
		}
		if d.ClockMHz < 0 || d.ClockMHz > 10000 {
			t.Errorf("device %d: clock %d MHz", i, d.ClockMHz)
		}
	}
}

const saxpySrc = `
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + y[i];
}
`

// compileSaxpy compiles saxpySrc in c and looks up its kernel.
func compileSaxpy(t *testing.T, c *Context) (*Module, *Function) {
	t.Helper()
	m, err := c.Compile(saxpySrc)
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Function("saxpy")
	if err != nil {
		t.Fatal(err)
	}
	return m, f
}

// saxpyBuffers allocates saxpy's x and y, n float32s each, on the device,
// and a stream to run it on.
func saxpyBuffers(t *testing.T, c *Context, n int) (dx, dy *Buffer, s *Stream) {
	t.Helper()
	var err error
	if dx, err = c.Alloc(4 * n); err != nil {
		t.Fatal(err)
	}
	if dy, err = c.Alloc(4 * n); err != nil {
		t.Fatal(err)
	}
	if s, err = c.NewStream(); err != nil {
		t.Fatal(err)
	}
	return dx, dy, s
}

func TestSaxpy(t *testing.T) {
	c := testContext(t)
	m, f := compileSaxpy(t, c)
	if !strings.Contains(m.PTX(), "saxpy") {
		t.Errorf("PTX lacks the kernel:\n%s", m.PTX())
	}
	const n = 1 << 20
	hx, err := c.AllocHost(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	hy, err := c.AllocHost(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	x, y := f32(hx.Bytes()), f32(hy.Bytes())
	for i := range n {
		x[i] = float32(i % 1000)
		y[i] = float32(i % 7)
	}
	dx, dy, s := saxpyBuffers(t, c, n)
	if err := s.CopyToDevice(dx, 0, hx.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyToDevice(dy, 0, hy.Bytes()); err != nil {
		t.Fatal(err)
	}
	start, err := s.Record()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Launch(f, (n+255)/256, 256, 0, float32(2), dx, dy, uint32(n)); err != nil {
		t.Fatal(err)
	}
	end, err := s.Record()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyToHost(hy.Bytes(), dy, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if want := 2*float32(i%1000) + float32(i%7); y[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
	d, err := Elapsed(start, end)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Errorf("Elapsed = %v, want > 0", d)
	}
	t.Logf("saxpy on %d elements: %v", n, d)

	// Ordinary Go memory works too (staged by the driver), and Zero and
	// offsets behave.
	if err := s.Zero(dy, 4, 8); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := s.CopyToHost(got, dy, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	g := f32(got)
	if g[0] != 2*0+0 || g[1] != 0 || g[2] != 0 || g[3] != 2*3+3 {
		t.Errorf("after Zero(4, 8): %v", g)
	}
	if err := s.CopyToHost(make([]byte, 8), dy, 4*n-4); err == nil {
		t.Error("out-of-range CopyToHost succeeded")
	}
	for _, e := range []*Event{start, end} {
		if err := e.Wait(); err != nil {
			t.Error(err)
		}
		if err := e.Release(); err != nil {
			t.Error(err)
		}
		if err := e.Release(); err != nil {
			t.Errorf("second Release: %v", err)
		}
	}
	if _, err := Elapsed(start, end); !errors.Is(err, ErrReleased) {
		t.Errorf("Elapsed on released events: %v, want ErrReleased", err)
	}
}

func TestBuildError(t *testing.T) {
	c := testContext(t)
	_, err := c.Compile("extern \"C\" __global__ void broken(float* p) { p[0] = undefined_name; }\n")
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("Compile of bad source: %v, want *BuildError", err)
	}
	if !strings.Contains(be.Log, "undefined_name") {
		t.Errorf("log does not mention the error:\n%s", be.Log)
	}
	msg := be.Error()
	if !strings.Contains(msg, c.Device().Name) || !strings.Contains(msg, "undefined_name") {
		t.Errorf("message lacks device or log: %s", msg)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "NVRTC_ERROR_COMPILATION" {
		t.Errorf("underlying error %v, want NVRTC_ERROR_COMPILATION", be.Err)
	}
	t.Log(msg)

	m, err := c.Compile(saxpySrc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Function("nosuch"); err == nil {
		t.Error("Function of a missing kernel succeeded")
	}
}

func TestAllocFree(t *testing.T) {
	c := testContext(t)
	free, total, err := c.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free <= 0 || total < free || total > c.Device().GlobalMemory {
		t.Errorf("MemInfo = %d free of %d; device has %d", free, total, c.Device().GlobalMemory)
	}
	for _, n := range []int{0, 1, 4096, 1 << 20} {
		b, err := c.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if b.Size() != n {
			t.Errorf("Size = %d, want %d", b.Size(), n)
		}
		h, err := c.AllocHost(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Bytes()) != n {
			t.Errorf("len(Bytes) = %d, want %d", len(h.Bytes()), n)
		}
		for _, err := range []error{b.Free(), b.Free(), h.Free(), h.Free()} {
			if err != nil {
				t.Error(err)
			}
		}
		if h.Bytes() != nil {
			t.Error("Bytes after Free is not nil")
		}
	}
	if c.live() != 0 {
		t.Errorf("%d objects alive after freeing all", c.live())
	}
	if _, err := c.Alloc(-1); err == nil {
		t.Error("Alloc(-1) succeeded")
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	b.Free()
	if err := s.Zero(b, 0, 16); !errors.Is(err, ErrReleased) {
		t.Errorf("Zero on a freed buffer: %v, want ErrReleased", err)
	}
}

func TestCloseFreesAll(t *testing.T) {
	c0 := testContext(t) // keeps the primary context alive for measuring
	c, err := NewContext(c0.Device())
	if err != nil {
		t.Fatal(err)
	}
	// Objects whose device footprint is not measured come first.
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	m, f := compileSaxpy(t, c)
	ev, err := s.Record()
	if err != nil {
		t.Fatal(err)
	}
	before, _, err := c0.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := c.Alloc(16 << 20); err != nil {
			t.Fatal(err)
		}
	}
	h, err := c.AllocHost(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	during, _, err := c0.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if before-during < 64<<20 {
		t.Errorf("allocating 64 MiB lowered free memory by only %d bytes", before-during)
	}
	if n := c.live(); n != 8 {
		t.Errorf("live = %d, want 8", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if c.live() != 0 {
		t.Errorf("%d objects alive after Close", c.live())
	}
	after, _, err := c0.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if before-after > 1<<20 {
		t.Errorf("free memory %d before allocating, %d after Close: %d bytes not returned", before, after, before-after)
	}
	if h.Bytes() != nil {
		t.Error("host buffer still mapped after Close")
	}
	// Everything is idempotent or reports ErrClosed after Close.
	for _, err := range []error{h.Free(), s.Close(), ev.Release(), m.Unload()} {
		if err != nil {
			t.Errorf("free after Close: %v", err)
		}
	}
	if _, err := c.Alloc(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close: %v, want ErrClosed", err)
	}
	if err := s.Launch(f, 1, 1, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Launch after Close: %v, want ErrClosed", err)
	}
}

func TestLaunchRefusesInt(t *testing.T) {
	c := testContext(t)
	_, f := compileSaxpy(t, c)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Launch(f, 1, 4, 0, float32(1), x, x, 4)
	if err == nil || !strings.Contains(err.Error(), "int32") {
		t.Errorf("Launch with a Go int: %v, want a refusal", err)
	}
	if err := s.Launch(f, 0, 4, 0); err == nil {
		t.Error("Launch with grid 0 succeeded")
	}
	if err := s.Synchronize(); err != nil {
		t.Error(err)
	}
}

// TestConcurrent uses one context from several goroutines, each with its
// own stream, so that the context is pushed on many OS threads at once.
func TestConcurrent(t *testing.T) {
	c := testContext(t)
	const workers, n = 8, 1 << 16
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			errs <- func() error {
				s, err := c.NewStream()
				if err != nil {
					return err
				}
				defer s.Close()
				b, err := c.Alloc(n)
				if err != nil {
					return err
				}
				defer b.Free()
				src := make([]byte, n)
				for i := range src {
					src[i] = byte(i*7 + w)
				}
				if err := s.CopyToDevice(b, 0, src); err != nil {
					return err
				}
				if err := s.Zero(b, 0, 64); err != nil {
					return err
				}
				dst := make([]byte, n)
				if err := s.CopyToHost(dst, b, 0); err != nil {
					return err
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				for i := range dst {
					want := src[i]
					if i < 64 {
						want = 0
					}
					if dst[i] != want {
						return fmt.Errorf("worker %d: byte %d = %d, want %d", w, i, dst[i], want)
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if c.live() != 0 {
		t.Errorf("%d objects alive", c.live())
	}
}

// The tests below need no GPU.

func TestLoaderMissingLibrary(t *testing.T) {
	_, err := loadFrom([]string{"/nonexistent/libcuda.so.1"}, []string{"/nonexistent/libnvrtc.so"})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("loadFrom of a missing library: %v, want ErrNoDriver", err)
	}
	if !strings.Contains(err.Error(), "/nonexistent/libcuda.so.1") {
		t.Errorf("error does not name the library: %v", err)
	}
	_, err = loadFrom(nil, nil)
	if !errors.Is(err, ErrNoDriver) {
		t.Errorf("loadFrom of no names: %v, want ErrNoDriver", err)
	}
}

func TestErrorNames(t *testing.T) {
	for code, want := range map[int32]string{
		0:   "CUDA_SUCCESS",
		1:   "CUDA_ERROR_INVALID_VALUE",
		2:   "CUDA_ERROR_OUT_OF_MEMORY",
		100: "CUDA_ERROR_NO_DEVICE",
		222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
		700: "CUDA_ERROR_ILLEGAL_ADDRESS",
		719: "CUDA_ERROR_LAUNCH_FAILED",
	} {
		if got := resultName(code); got != want {
			t.Errorf("resultName(%d) = %q, want %q", code, got, want)
		}
	}
	if got := resultName(123456); got != "CUDA_ERROR_CODE_123456" {
		t.Errorf("unknown code named %q", got)
	}
	if got := nvrtcName(6); got != "NVRTC_ERROR_COMPILATION" {
		t.Errorf("nvrtcName(6) = %q", got)
	}
	if err := check(0, "cuInit"); err != nil {
		t.Errorf("check(0) = %v", err)
	}
	err := check(2, "cuMemAlloc_v2")
	if got := err.Error(); got != "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY" {
		t.Errorf("Error() = %q", got)
	}
	var ce *Error
	if !errors.As(fmt.Errorf("wrapped: %w", err), &ce) || ce.Code != ResultOutOfMemory {
		t.Errorf("errors.As: %+v", ce)
	}
}

func TestBuildErrorMessage(t *testing.T) {
	var log strings.Builder
	for i := range 25 {
		fmt.Fprintf(&log, "sparsetune.cu(%d): error: line %d\n", i, i)
	}
	e := &BuildError{Device: "NVIDIA H100", Options: "--gpu-architecture=compute_90", Log: log.String(),
		Err: &Error{Code: 6, Name: "NVRTC_ERROR_COMPILATION", Op: "nvrtcCompileProgram"}}
	msg := e.Error()
	for _, want := range []string{`"NVIDIA H100"`, "NVRTC_ERROR_COMPILATION", "compute_90", "line 0", "line 19", "(5 more lines)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "line 20") {
		t.Errorf("message quotes more than 20 lines:\n%s", msg)
	}
	if (&BuildError{Device: "d", Err: errors.New("x")}).Error() == "" {
		t.Error("empty message")
	}
}

func TestPackArgs(t *testing.T) {
	vals, err := packArgs(nil, []any{int32(-2), uint32(3), int64(-4), uint64(5), float32(1.5), float64(-2.25)})
	if err != nil {
		t.Fatal(err)
	}
	if int32(uint32(vals[0])) != -2 || uint32(vals[1]) != 3 || int64(vals[2]) != -4 || vals[3] != 5 ||
		math.Float32frombits(uint32(vals[4])) != 1.5 || math.Float64frombits(vals[5]) != -2.25 {
		t.Errorf("packed %x", vals)
	}
	for _, bad := range []any{42, uint(1), uintptr(1), "s", (*Buffer)(nil), &Buffer{}} {
		if _, err := packArgs(nil, []any{bad}); err == nil {
			t.Errorf("packArgs accepted %T", bad)
		}
	}
	if _, err := packArgs(nil, []any{7}); err == nil || !strings.Contains(err.Error(), "int32") {
		t.Errorf("Go int refusal does not suggest int32: %v", err)
	}
}

func TestArch(t *testing.T) {
	c := &Context{dev: Device{Major: 9, Minor: 0}}
	if got := c.Arch(); got != "--gpu-architecture=compute_90" {
		t.Errorf("Arch = %q", got)
	}
	if !hasArch([]string{"-arch=compute_80"}) || hasArch([]string{"--use_fast_math"}) {
		t.Error("hasArch wrong")
	}
}

// TestLoadPTX: PTX that Compile made loads again without NVRTC (what a
// cache of it relies on) and runs; PTX that is not is a *BuildError.
func TestLoadPTX(t *testing.T) {
	c := testContext(t)
	m, _ := compileSaxpy(t, c)
	again, err := c.LoadPTX([]byte(m.PTX())) // no NUL: LoadPTX adds one
	if err != nil {
		t.Fatal(err)
	}
	f, err := again.Function("saxpy")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), 1
	}
	asBytes := func(v []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)) }
	dx, dy, s := saxpyBuffers(t, c, n)
	for _, err := range []error{s.CopyToDevice(dx, 0, asBytes(x)), s.CopyToDevice(dy, 0, asBytes(y)),
		s.Launch(f, (n+255)/256, 256, 0, float32(3), dx, dy, uint32(n)), s.CopyToHost(asBytes(y), dy, 0), s.Synchronize()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range y {
		if v != 3*float32(i)+1 {
			t.Fatalf("y[%d] = %v, want %v", i, v, 3*float32(i)+1)
		}
	}
	var be *BuildError
	if _, err := c.LoadPTX([]byte("this is not PTX")); !errors.As(err, &be) {
		t.Errorf("LoadPTX of text: %v, want a *BuildError", err)
	}
}
