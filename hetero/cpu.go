package hetero

import (
	"bufio"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

// CPUDevice runs the Go kernels of package kernels on the host's cores.
type CPUDevice struct {
	threads int
	info    Info
}

// NewCPU returns the CPU device running kernels on threads goroutines (0
// for GOMAXPROCS).
func NewCPU(threads int) *CPUDevice {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	info := Info{Name: "cpu", Kind: CPU, ComputeUnits: threads, Driver: runtime.Version(),
		Vendor: runtime.GOARCH, Model: runtime.GOARCH, Type: "cpu"}
	readCPUInfo(&info)
	return &CPUDevice{threads: threads, info: info}
}

// readCPUInfo fills what Linux tells of the processor and memory; elsewhere
// the fields keep what the Go runtime knows.
func readCPUInfo(info *Info) {
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		parseCPUInfo(f, info)
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64); err == nil {
					info.GlobalMemory = kb << 10
				}
				break
			}
		}
	}
}

// parseCPUInfo fills info from the first processor's block of a Linux
// /proc/cpuinfo: its vendor, model name, family number and clock.
func parseCPUInfo(r io.Reader, info *Info) {
	sc := bufio.NewScanner(r)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if seen { // the end of the first processor's block
				break
			}
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		seen = true
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "vendor_id":
			info.Vendor = val
		case "model name":
			info.Model = val
		case "cpu family":
			if f, err := strconv.Atoi(val); err == nil && f > 0 {
				info.Family = f
			}
		case "cpu MHz":
			if mhz, err := strconv.ParseFloat(val, 64); err == nil && info.ClockMHz == 0 {
				info.ClockMHz = int(mhz + 0.5)
			}
		}
	}
}

// Info describes the CPU.
func (d *CPUDevice) Info() Info { return d.info }

// SpTTM binds an SpTTM plan of f.
func (d *CPUDevice) SpTTM(f formats.FiberFormat, ut, out *kernels.Matrix) (Job, error) {
	if ut == nil {
		return nil, errNilMatrix
	}
	p, err := kernels.NewSpTTM(f, ut.Cols, d.threads)
	if err != nil {
		return nil, err
	}
	return &cpuJob{run: func() error { return p.Run(out, ut) }, flops: p.Flops(), bytes: p.Bytes()}, nil
}

// MTTKRP binds an MTTKRP plan of x.
func (d *CPUDevice) MTTKRP(x formats.TensorFormat, mode int, factors []*kernels.Matrix, out *kernels.Matrix) (Job, error) {
	if out == nil {
		return nil, errNilMatrix
	}
	p, err := kernels.NewMTTKRP(x, mode, out.Cols, d.threads)
	if err != nil {
		return nil, err
	}
	return &cpuJob{run: func() error { return p.Run(out, factors) }, flops: p.Flops(), bytes: p.Bytes(), workspace: p.WorkspaceBytes()}, nil
}

type cpuJob struct {
	run          func() error
	flops, bytes float64
	workspace    int64
}

func (j *cpuJob) Run() (Timing, error) {
	start := time.Now()
	err := j.run()
	return Timing{Kernel: time.Since(start)}, err
}

func (j *cpuJob) Flops() float64 { return j.flops }
func (j *cpuJob) Bytes() float64 { return j.bytes }
func (j *cpuJob) Close() error   { return nil }

// WorkspaceBytes returns the host memory the kernel plan holds beside the
// format and the dense matrices: an MTTKRP plan's private output copies
// and padded copies of its factors (kernels.MTTKRP.WorkspaceBytes); an
// SpTTM plan holds none.
func (j *cpuJob) WorkspaceBytes() int64 { return j.workspace }
