package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/sparsetune/sparsetune/internal/buildlog"
)

// BuildError is a failed compile: NVRTC rejected the source, or the driver
// could not load the PTX NVRTC produced. Its message names the device and
// quotes the start of the NVRTC log; Log holds the whole log.
type BuildError struct {
	Device  string // the device's name
	Options string // the NVRTC options, space-separated
	Log     string // the NVRTC program log
	Err     error  // the failing call's error, usually NVRTC_ERROR_COMPILATION
}

func (e *BuildError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cuda: compiling for device %q failed: %v", e.Device, e.Err)
	if e.Options != "" {
		fmt.Fprintf(&b, " (options %q)", e.Options)
	}
	buildlog.Append(&b, "NVRTC log", e.Log)
	return b.String()
}

// Unwrap returns the failing call's error.
func (e *BuildError) Unwrap() error { return e.Err }

// Module is compiled code loaded into a context.
type Module struct {
	c   *Context
	h   atomic.Uintptr // CUmodule
	log string
	ptx []byte
}

// Arch returns the NVRTC option selecting the device's virtual
// architecture, e.g. "--gpu-architecture=compute_90".
func (c *Context) Arch() string {
	return fmt.Sprintf("--gpu-architecture=compute_%d%d", c.dev.Major, c.dev.Minor)
}

// Compile compiles CUDA C++ source with NVRTC to PTX for the device's
// compute capability and loads it into the context. opts are further
// NVRTC options (e.g. "--use_fast_math", "-DN=4"); one that selects an
// architecture (--gpu-architecture, -arch) replaces the default. A failure
// is a [*BuildError] quoting the NVRTC log.
func (c *Context) Compile(src string, opts ...string) (*Module, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	all := opts
	if !hasArch(opts) {
		all = append([]string{c.Arch()}, opts...)
	}
	buildErr := func(log string, err error) error {
		return &BuildError{Device: c.dev.Name, Options: strings.Join(all, " "), Log: log, Err: err}
	}
	ptx, log, err := compilePTX(src, all)
	if err != nil {
		return nil, buildErr(log, err)
	}
	m, err := c.load(ptx, log)
	if err != nil && !errors.Is(err, ErrClosed) {
		err = buildErr(log, err)
	}
	return m, err
}

// LoadPTX loads PTX that NVRTC made (Module.PTX of an earlier Compile, as
// a cache would keep it) into the context: the driver compiles it for the
// device. A failure is a [*BuildError].
func (c *Context) LoadPTX(ptx []byte) (*Module, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	if len(ptx) == 0 || ptx[len(ptx)-1] != 0 {
		ptx = append(slices.Clip(ptx), 0) // the driver reads a C string
	}
	m, err := c.load(ptx, "")
	if err != nil && !errors.Is(err, ErrClosed) {
		err = &BuildError{Device: c.dev.Name, Err: err}
	}
	return m, err
}

// load loads NUL-terminated PTX into the context.
func (c *Context) load(ptx []byte, log string) (*Module, error) {
	m := &Module{c: c, log: log, ptx: ptx}
	err := c.do(func() error {
		var h uintptr
		if err := check(cu.ModuleLoadData(&h, unsafe.Pointer(&ptx[0])), "cuModuleLoadData"); err != nil {
			return err
		}
		m.h.Store(h)
		c.track(m)
		return nil
	})
	runtime.KeepAlive(ptx)
	if errors.Is(err, ErrClosed) {
		return nil, err
	}
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) && ce.Code == ResultUnsupportedPTXVersion {
			err = fmt.Errorf("%w (NVRTC is newer than the driver; use an NVRTC no newer than the driver's CUDA version)", err)
		}
		return nil, err
	}
	return m, nil
}

// hasArch reports whether opts select an architecture.
func hasArch(opts []string) bool {
	for _, o := range opts {
		if strings.HasPrefix(o, "--gpu-architecture") || strings.HasPrefix(o, "-arch") {
			return true
		}
	}
	return false
}

// cBytes returns s as a NUL-terminated byte slice.
func cBytes(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// compilePTX runs NVRTC on src with opts and returns the NUL-terminated
// PTX and the program log.
func compilePTX(src string, opts []string) (ptx []byte, log string, err error) {
	text, name := cBytes(src), cBytes("sparsetune.cu")
	var prog uintptr
	if err := checkNVRTC(cu.NvrtcCreateProgram(&prog, &text[0], &name[0], 0, nil, nil), "nvrtcCreateProgram"); err != nil {
		return nil, "", err
	}
	defer cu.NvrtcDestroyProgram(&prog)

	// The options are a C array of pointers to C strings, all in Go
	// memory: pin the strings, whose addresses are stored in Go memory
	// handed to C, and the array.
	var pin runtime.Pinner
	defer pin.Unpin()
	var optp **byte
	if len(opts) > 0 {
		ptrs := make([]*byte, len(opts))
		for i, o := range opts {
			b := cBytes(o)
			pin.Pin(&b[0])
			ptrs[i] = &b[0]
		}
		pin.Pin(&ptrs[0])
		optp = &ptrs[0]
	}
	status := cu.NvrtcCompileProgram(prog, int32(len(opts)), optp)
	runtime.KeepAlive(text)
	runtime.KeepAlive(name)
	log = programLog(prog)
	if err := checkNVRTC(status, "nvrtcCompileProgram"); err != nil {
		return nil, log, err
	}
	var size uintptr
	if err := checkNVRTC(cu.NvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize"); err != nil {
		return nil, log, err
	}
	// The size counts the terminating NUL; one more byte keeps the PTX
	// NUL-terminated whatever NVRTC writes.
	ptx = make([]byte, size+1)
	if err := checkNVRTC(cu.NvrtcGetPTX(prog, &ptx[0]), "nvrtcGetPTX"); err != nil {
		return nil, log, err
	}
	return ptx, log, nil
}

// programLog returns NVRTC's log for prog, or "" if it cannot be read.
func programLog(prog uintptr) string {
	var size uintptr
	if cu.NvrtcGetProgramLogSize(prog, &size) != 0 || size == 0 {
		return ""
	}
	buf := make([]byte, size+1)
	if cu.NvrtcGetProgramLog(prog, &buf[0]) != 0 {
		return ""
	}
	return cString(buf)
}

// Log returns the NVRTC log of the compile (warnings, or nothing).
func (m *Module) Log() string { return m.log }

// PTX returns the PTX the module was loaded from, without the final NUL.
func (m *Module) PTX() string { return cString(m.ptx) }

// Unload unloads the module; its Functions can no longer be launched.
// Calling it again does nothing.
func (m *Module) Unload() error { return m.c.releaseObject(m) }

func (m *Module) rank() int { return 2 }

func (m *Module) release() error {
	if h := m.h.Swap(0); h != 0 {
		return check(cu.ModuleUnload(h), "cuModuleUnload")
	}
	return nil
}

// Function is one kernel (a __global__ function) of a [Module].
type Function struct {
	m    *Module
	h    uintptr // CUfunction, valid while m is loaded
	name string
}

// Function looks up the kernel called name (cuModuleGetFunction). Declare
// kernels extern "C" so that name is the source name.
func (m *Module) Function(name string) (*Function, error) {
	var h uintptr
	err := m.c.do(func() error {
		mh := m.h.Load()
		if mh == 0 {
			return fmt.Errorf("module: %w", ErrReleased)
		}
		return check(cu.ModuleGetFunction(&h, mh, name), "cuModuleGetFunction")
	})
	if err != nil {
		return nil, m.c.wrap(fmt.Errorf("kernel %q: %w", name, err))
	}
	return &Function{m: m, h: h, name: name}, nil
}

// Name returns the kernel's name.
func (f *Function) Name() string { return f.name }
