package hetero

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/kernels/accel"
)

// The accelerator jobs are written once, against accelRuntime, which each
// backend (OpenCL, CUDA) implements in a few dozen lines over its binding.

// accelRuntime is what an accelerator backend gives the jobs: device
// memory, the kernels of package accel compiled for the device, and two
// in-order queues, so that a copy on one overlaps a kernel on the other.
type accelRuntime interface {
	alloc(n int) (devMem, error)
	// queue returns queue 0 (kernels, and the transfers a kernel waits on)
	// or queue 1 (copies overlapping them).
	queue(i int) devQueue
	// live returns how many device objects the runtime holds, for tests
	// that check nothing leaks.
	live() int
}

// devMem is a device buffer.
type devMem interface {
	size() int
	free() error
}

// devQueue queues commands; each returns an event for its completion. Go
// memory passed to write or read must stay untouched until that event has
// completed.
type devQueue interface {
	write(dst devMem, off int, src []byte) (devEvent, error)
	read(dst []byte, src devMem, off int) (devEvent, error)
	// launch runs a kernel over items work-items in work-groups of group.
	// Arguments are devMem, uint32, uint64 or float32.
	launch(kernel string, items, group int, args ...any) (devEvent, error)
}

// devEvent is a queued command.
type devEvent interface {
	wait() error
	// elapsed waits and returns the device time the command took.
	elapsed() (time.Duration, error)
	release() error
}

// unsupportedError says a device cannot run a job as asked (no kernel for
// the format, an order too high, no room in its memory): Measure reports
// such a format as skipped instead of failing.
type unsupportedError struct{ error }

func (e unsupportedError) Unwrap() error { return e.error }

func unsupported(format string, args ...any) error {
	return unsupportedError{fmt.Errorf(format, args...)}
}

// IsUnsupported reports whether err says the device cannot run the job as
// asked, rather than that running it failed.
func IsUnsupported(err error) bool {
	var u unsupportedError
	return errors.As(err, &u)
}

// accelDevice is an accelerator reached through a runtime.
type accelDevice struct {
	info Info
	rt   accelRuntime
	// group is the work-group size the kernels were compiled for.
	group int
	// maxAlloc is the largest single buffer the device allocates.
	maxAlloc int64

	mu     sync.Mutex // serialises runs: the kernels' arguments are shared
	budget int64      // device memory a job may use, in bytes
	// defaultBudget is DefaultMemoryFraction of the device's free memory
	// when it was opened (of its global memory where free is unknown).
	defaultBudget int64
}

// DefaultMemoryFraction is the share of a device's memory a job may use
// unless told otherwise (SetMemoryBudget): the rest is left to the driver,
// other processes and fragmentation. For CUDA it is a share of the free
// memory at start-up; OpenCL cannot tell free memory, so there it is a
// share of the global memory.
const DefaultMemoryFraction = 0.5

// Info describes the device.
func (d *accelDevice) Info() Info { return d.info }

// MemoryBudget returns the bytes of device memory a job may use.
func (d *accelDevice) MemoryBudget() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.budget
}

// SetMemoryBudget caps the device memory a job may use; an MTTKRP on an
// ALTO tensor that does not fit is streamed in blocks. 0 restores the
// default.
func (d *accelDevice) SetMemoryBudget(bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if bytes <= 0 {
		bytes = d.defaultBudget
	}
	d.budget = bytes
}

// deviceArrays is a job's device memory, allocated and filled while the
// job is bound. The first failure is kept in err, and later allocations
// and uploads do nothing, so binding reads as a list of arrays with one
// check at the end; free releases all of it.
type deviceArrays struct {
	rt   accelRuntime
	mems []devMem
	err  error
}

// alloc allocates n bytes. A failure is reported as unsupported: the
// device has no room for the job, whatever the budget said.
func (a *deviceArrays) alloc(n int) devMem {
	if a.err != nil {
		return nil
	}
	m, err := a.rt.alloc(n)
	if err != nil {
		a.err = unsupportedError{fmt.Errorf("allocating %s of device memory: %w", formatBytes(int64(n)), err)}
		return nil
	}
	a.mems = append(a.mems, m)
	return m
}

func (a *deviceArrays) free() error {
	var errs []error
	for _, m := range a.mems {
		errs = append(errs, m.free())
	}
	a.mems = nil
	return errors.Join(errs...)
}

// bytesOf views a slice of fixed-size numbers as bytes.
func bytesOf[T uint32 | uint64 | float32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// upload allocates a buffer holding s and copies s into it, waiting for
// the copy (s may be a temporary).
func upload[T uint32 | uint64 | float32](a *deviceArrays, s []T) devMem {
	b := bytesOf(s)
	m := a.alloc(len(b))
	if m == nil || len(b) == 0 {
		return m
	}
	ev, err := a.rt.queue(0).write(m, 0, b)
	if err == nil {
		err = errors.Join(ev.wait(), ev.release())
	}
	if err != nil {
		a.err = err
		return nil
	}
	return m
}

// timed waits for ev, adds its device time to t and releases it.
func timed(ev devEvent, t *time.Duration) error {
	d, err := ev.elapsed()
	*t += d
	return errors.Join(err, ev.release())
}

// groups rounds items up to whole work-groups of size group.
func groups(items, group int) int { return (items + group - 1) / group * group }

// accelJob is one bound operation: resident device arrays and a run
// function that queues the per-run work and reports its timing.
type accelJob struct {
	d            *accelDevice
	arrs         deviceArrays
	run          func() (Timing, error)
	flops, bytes float64
	// streamed is the number of pieces each run sends the tensor in, 0
	// when the tensor stays on the device.
	streamed int
}

func (j *accelJob) Run() (Timing, error) {
	if j.run == nil {
		return Timing{}, errors.New("job is closed")
	}
	j.d.mu.Lock()
	defer j.d.mu.Unlock()
	t, err := j.run()
	if err != nil {
		return t, fmt.Errorf("%s: %w", j.d.info.Name, err)
	}
	return t, nil
}

func (j *accelJob) Flops() float64 { return j.flops }
func (j *accelJob) Bytes() float64 { return j.bytes }

func (j *accelJob) Close() error {
	j.d.mu.Lock()
	defer j.d.mu.Unlock()
	j.run = nil
	return j.arrs.free()
}

// failed frees what a job being bound allocated and returns err naming the
// device.
func (d *accelDevice) failed(arrs *deviceArrays, err error) error {
	return errors.Join(fmt.Errorf("%s: %w", d.info.Name, err), arrs.free())
}

// fits reports an error when a job needs more device memory than the
// budget allows.
func (d *accelDevice) fits(need int64, what string) error {
	if need > d.budget {
		return unsupported("%s needs %s of device memory, over the budget of %s (SetMemoryBudget, --device-memory)",
			what, formatBytes(need), formatBytes(d.budget))
	}
	return nil
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// runPhases is the per-run skeleton every job shares: queue the uploads of
// the dense operands, the kernels, and the download of the result on queue
// 0, then wait for all of them and add up their device times by phase.
type runPhases struct {
	q      devQueue
	h2d    []devEvent
	kernel []devEvent
	d2h    []devEvent
	err    error
}

func (p *runPhases) write(dst devMem, off int, src []byte) {
	if p.err != nil || len(src) == 0 {
		return
	}
	var ev devEvent
	ev, p.err = p.q.write(dst, off, src)
	if p.err == nil {
		p.h2d = append(p.h2d, ev)
	}
}

func (p *runPhases) launch(kernel string, items, group int, args ...any) {
	if p.err != nil || items == 0 {
		return
	}
	var ev devEvent
	ev, p.err = p.q.launch(kernel, groups(items, group), group, args...)
	if p.err == nil {
		p.kernel = append(p.kernel, ev)
	}
}

func (p *runPhases) read(dst []byte, src devMem) {
	if p.err != nil || len(dst) == 0 {
		return
	}
	var ev devEvent
	ev, p.err = p.q.read(dst, src, 0)
	if p.err == nil {
		p.d2h = append(p.d2h, ev)
	}
}

// finish waits for every queued command, releases the events and returns
// the timing; an error of any command is returned after all are released.
func (p *runPhases) finish() (Timing, error) {
	var t Timing
	errs := []error{p.err}
	for _, ph := range []struct {
		evs []devEvent
		d   *time.Duration
	}{{p.h2d, &t.HostToDevice}, {p.kernel, &t.Kernel}, {p.d2h, &t.DeviceToHost}} {
		for _, ev := range ph.evs {
			errs = append(errs, timed(ev, ph.d))
		}
	}
	return t, errors.Join(errs...)
}

// CheckFormat returns the error that MTTKRP or SpTTM would give for a
// format d has no kernel for (IsUnsupported), from the format's name
// alone, and nil for any other name: MeasureFormats asks before it
// converts the tensor, so a format the device refuses costs no conversion
// (HiCOO's, for every MTTKRP labelled on a GPU).
func (d *accelDevice) CheckFormat(op Op, format string) error {
	if op == MTTKRP && format == "hicoo" {
		return d.noMTTKRPKernel(format)
	}
	return nil
}

func (d *accelDevice) noMTTKRPKernel(format string) error {
	return unsupported("%s: no accelerator kernel for %s, use coo, csf or alto", d.info.Name, format)
}

// SpTTM binds Y = F·Uᵀ: the format's arrays are uploaded now and stay on
// the device; each run uploads Uᵀ, runs the kernels and downloads Y.
func (d *accelDevice) SpTTM(f formats.FiberFormat, ut, out *kernels.Matrix) (Job, error) {
	if ut == nil || out == nil {
		return nil, errNilMatrix
	}
	var fm *formats.FiberMatrix
	switch x := f.(type) {
	case *formats.FiberCOO:
		fm = x.Source
	case *formats.CSR:
		fm = x.Source
	case *formats.ELL:
		fm = x.Source
	case *formats.HYB:
		fm = x.ELL.Source
	default:
		return nil, unsupported("%s: no accelerator kernel for %T", d.info.Name, f)
	}
	R := ut.Cols
	rows, cols, nnz := fm.Rows(), fm.Cols(), fm.NNZ()
	if ut.Rows != cols || len(ut.Data) != cols*R || R < 1 {
		return nil, fmt.Errorf("%s: spttm factor is %dx%d, expected %dx%d", d.info.Name, ut.Rows, ut.Cols, cols, R)
	}
	if out.Rows != rows || out.Cols != R || len(out.Data) != rows*R {
		return nil, fmt.Errorf("%s: spttm output is %dx%d, expected %dx%d", d.info.Name, out.Rows, out.Cols, rows, R)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dense := 4 * int64(cols*R+rows*R)
	if err := d.fits(f.Bytes()+dense, fmt.Sprintf("spttm of %d nonzeros at rank %d", nnz, R)); err != nil {
		return nil, fmt.Errorf("%s: %w", d.info.Name, err)
	}
	j := &accelJob{d: d, flops: SpTTM.Flops(len(fm.Dims), nnz, R),
		bytes: float64(f.Bytes()) + 4*float64(nnz*R) + 4*float64(rows*R)}
	rt, g := d.rt, d.group
	a := &j.arrs
	a.rt = rt
	utMem, yMem := a.alloc(4*cols*R), a.alloc(4*rows*R)
	r32, n32 := uint32(R), uint32(nnz)
	var kernelsOf func(p *runPhases)
	switch x := f.(type) {
	case *formats.CSR:
		ptr, col, val := upload(a, x.RowPtr), upload(a, x.ColInd), upload(a, x.Vals)
		kernelsOf = func(p *runPhases) {
			p.launch(accel.SpTTMCSR, rows*R, g, uint32(rows), r32, ptr, col, val, utMem, yMem)
		}
	case *formats.ELL:
		col, val := upload(a, x.ColInd), upload(a, x.Vals)
		kernelsOf = func(p *runPhases) {
			p.launch(accel.SpTTMELL, rows*R, g, uint32(rows), uint32(x.Width), r32, col, val, utMem, yMem)
		}
	case *formats.FiberCOO:
		row, col, val := upload(a, x.RowInd), upload(a, x.ColInd), upload(a, x.Vals)
		kernelsOf = func(p *runPhases) {
			p.launch(accel.FillZero, rows*R, g, uint64(rows*R), yMem)
			p.launch(accel.SpTTMCOO, chunks(nnz)*R, g, n32, r32, row, col, val, utMem, yMem)
		}
	case *formats.HYB:
		rest := len(x.COO.Vals)
		ecol, eval := upload(a, x.ELL.ColInd), upload(a, x.ELL.Vals)
		row, col, val := upload(a, x.COO.RowInd), upload(a, x.COO.ColInd), upload(a, x.COO.Vals)
		kernelsOf = func(p *runPhases) {
			// The ELL part writes every row, the COO part then adds the
			// rest; the queue is in order, so the second sees the first.
			p.launch(accel.SpTTMELL, rows*R, g, uint32(rows), uint32(x.ELL.Width), r32, ecol, eval, utMem, yMem)
			p.launch(accel.SpTTMCOO, chunks(rest)*R, g, uint32(rest), r32, row, col, val, utMem, yMem)
		}
	}
	if a.err != nil {
		return nil, d.failed(a, a.err)
	}
	j.run = func() (Timing, error) {
		p := runPhases{q: rt.queue(0)}
		p.write(utMem, 0, bytesOf(ut.Data))
		kernelsOf(&p)
		if rows > 0 && nnz == 0 {
			p.launch(accel.FillZero, rows*R, g, uint64(rows*R), yMem)
		}
		p.read(bytesOf(out.Data), yMem)
		return p.finish()
	}
	return j, nil
}

// chunks returns the work-items the COO kernels need for n entries.
func chunks(n int) int { return (n + accel.Chunk - 1) / accel.Chunk }

// factorLayout places the factor matrices of every mode but the output's
// in one device array: offsets in floats, total length.
func factorLayout(dims []int, mode, R int) (off []uint64, total int) {
	off = make([]uint64, len(dims))
	for m, n := range dims {
		if m == mode {
			continue
		}
		off[m] = uint64(total)
		total += n * R
	}
	return off, total
}

// MTTKRP binds the MTTKRP of x for a 0-based mode. COO (sorted by the mode
// for fewest atomic updates, any order is correct), CSF rooted at the mode
// and ALTO run on the device; an ALTO tensor over the memory budget is
// streamed block by block in every run.
func (d *accelDevice) MTTKRP(x formats.TensorFormat, mode int, factors []*kernels.Matrix, out *kernels.Matrix) (Job, error) {
	if out == nil {
		return nil, errNilMatrix
	}
	var dims []int
	switch t := x.(type) {
	case *formats.COO:
		dims = t.Dims
	case *formats.CSF:
		dims = t.Dims
		if t.Root() != mode {
			return nil, fmt.Errorf("%s: mttkrp of mode %d needs a csf rooted at it, this one is rooted at mode %d", d.info.Name, mode+1, t.Root()+1)
		}
	case *formats.ALTO:
		dims = t.Dims
	default:
		return nil, d.noMTTKRPKernel(formatName(x))
	}
	N, R := len(dims), out.Cols
	if N > accel.MaxOrder {
		return nil, unsupported("%s: order-%d tensor, the accelerator kernels take order up to %d", d.info.Name, N, accel.MaxOrder)
	}
	if err := d.checkFactors(dims, mode, R, factors); err != nil {
		return nil, err
	}
	if R < 1 || out.Rows != dims[mode] || len(out.Data) != dims[mode]*R {
		return nil, fmt.Errorf("%s: mttkrp output is %dx%d, expected %dx%d", d.info.Name, out.Rows, out.Cols, dims[mode], R)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	facOff, facLen := factorLayout(dims, mode, R)
	nnz := x.NNZ()
	dense := 4*int64(facLen) + 4*int64(dims[mode]*R)
	j := &accelJob{d: d, flops: MTTKRP.Flops(N, nnz, R),
		bytes: float64(x.Bytes()) + 4*float64((N-1)*nnz*R) + 4*float64(dims[mode]*R)}
	what := fmt.Sprintf("mttkrp of %d nonzeros at rank %d in %s", nnz, R, formatName(x))
	alto, isALTO := x.(*formats.ALTO)
	streamed := isALTO && (x.Bytes()+dense+1024 > d.budget || 8*int64(nnz) > d.maxAlloc)
	if !streamed {
		if err := d.fits(x.Bytes()+dense+1024, what); err != nil {
			return nil, fmt.Errorf("%s: %w", d.info.Name, err)
		}
	}
	rt, g := d.rt, d.group
	a := &j.arrs
	a.rt = rt
	facMem, outMem := a.alloc(4*facLen), a.alloc(4*dims[mode]*R)
	outItems := dims[mode] * R
	uploadFactors := func(p *runPhases) {
		for m, f := range factors {
			if m != mode {
				p.write(facMem, 4*int(facOff[m]), bytesOf(f.Data))
			}
		}
	}
	r32, o32, m32 := uint32(R), uint32(N), uint32(mode)
	switch t := x.(type) {
	case *formats.COO:
		indMem, valMem, metaMem := upload(a, modeMajor(t)), upload(a, t.Vals), upload(a, facOff)
		j.run = func() (Timing, error) {
			p := runPhases{q: rt.queue(0)}
			uploadFactors(&p)
			p.launch(accel.FillZero, outItems, g, uint64(outItems), outMem)
			p.launch(accel.MTTKRPCOO, chunks(nnz)*R, g, uint32(nnz), r32, o32, m32, indMem, valMem, facMem, metaMem, outMem)
			p.read(bytesOf(out.Data), outMem)
			return p.finish()
		}
	case *formats.CSF:
		meta := make([]uint64, 0, 3*N-1)
		var ptr, idx []uint32
		for l := range N {
			meta = append(meta, facOff[t.ModeOrder[l]])
		}
		for l := range N - 1 {
			meta = append(meta, uint64(len(ptr)))
			ptr = append(ptr, t.FiberPtr[l]...)
		}
		for l := range N {
			meta = append(meta, uint64(len(idx)))
			idx = append(idx, t.FiberIdx[l]...)
		}
		roots := t.NumFibers(0)
		ptrMem, idxMem, valMem, metaMem := upload(a, ptr), upload(a, idx), upload(a, t.Vals), upload(a, meta)
		j.run = func() (Timing, error) {
			p := runPhases{q: rt.queue(0)}
			uploadFactors(&p)
			p.launch(accel.FillZero, outItems, g, uint64(outItems), outMem)
			p.launch(accel.MTTKRPCSF, roots*R, g, uint32(roots), r32, o32, ptrMem, idxMem, valMem, facMem, metaMem, outMem)
			p.read(bytesOf(out.Data), outMem)
			return p.finish()
		}
	case *formats.ALTO:
		metaMem := upload(a, altoMeta(alto, facOff))
		if streamed {
			j.run, j.streamed = d.streamALTO(a, alto, mode, R, d.budget-dense-int64(len(alto.Modes))*8*accel.ALTOMeta, facMem, metaMem, outMem, uploadFactors, out)
			break
		}
		linMem, valMem := upload(a, alto.Lin), upload(a, alto.Vals)
		pieces := altoPieces(alto, 0)
		j.run = func() (Timing, error) {
			p := runPhases{q: rt.queue(0)}
			uploadFactors(&p)
			p.launch(accel.FillZero, outItems, g, uint64(outItems), outMem)
			for _, pc := range pieces {
				p.launch(accel.MTTKRPALTO, pc.n, g, uint64(pc.first), uint32(pc.n), r32, o32, m32, pc.hi, linMem, valMem, facMem, metaMem, outMem)
			}
			p.read(bytesOf(out.Data), outMem)
			return p.finish()
		}
	}
	if a.err != nil {
		return nil, d.failed(a, a.err)
	}
	return j, nil
}

// PhiDevice is a device that computes CP-APR's Φ of one mode,
// Φ = (X_(n) ⊘ max(B Πᵀ, ε)) Π, with Π the Khatri-Rao product of the
// other modes' factors (package decomp's CPAPR). The accelerators
// implement it over COO.
type PhiDevice interface {
	Device
	// Phi binds Φ of x for a 0-based mode: each run reads the current
	// factors (the output mode's is not read) and b (dims[mode] x R), and
	// writes out (dims[mode] x R). eps bounds the model values from below.
	Phi(x *formats.COO, mode int, factors []*kernels.Matrix, b *kernels.Matrix, eps float32, out *kernels.Matrix) (Job, error)
}

// Phi binds CP-APR's Φ of x for a 0-based mode on the device (PhiDevice).
// x is uploaded once; each run sends the other modes' factors and b and
// reads Φ back. x should be sorted by the mode (fewest atomic updates);
// any order is correct.
func (d *accelDevice) Phi(x *formats.COO, mode int, factors []*kernels.Matrix, b *kernels.Matrix, eps float32, out *kernels.Matrix) (Job, error) {
	if x == nil || b == nil || out == nil {
		return nil, errNilMatrix
	}
	dims := x.Dims
	N, R := len(dims), out.Cols
	switch {
	case N > accel.MaxOrder:
		return nil, unsupported("%s: order-%d tensor, the accelerator kernels take order up to %d", d.info.Name, N, accel.MaxOrder)
	case R > accel.PhiMaxRank:
		return nil, unsupported("%s: Φ at rank %d, the accelerator kernel takes rank up to %d", d.info.Name, R, accel.PhiMaxRank)
	}
	if err := d.checkFactors(dims, mode, R, factors); err != nil {
		return nil, err
	}
	switch {
	case R < 1 || out.Rows != dims[mode] || len(out.Data) != dims[mode]*R:
		return nil, fmt.Errorf("%s: Φ output is %dx%d, expected %dx%d", d.info.Name, out.Rows, out.Cols, dims[mode], R)
	case b.Rows != dims[mode] || b.Cols != R || len(b.Data) != dims[mode]*R:
		return nil, fmt.Errorf("%s: B is %dx%d, expected %dx%d", d.info.Name, b.Rows, b.Cols, dims[mode], R)
	}
	nnz := x.NNZ()
	for m, ind := range x.Inds {
		if len(ind) != nnz {
			return nil, fmt.Errorf("%s: mode %d has %d indices for %d values", d.info.Name, m+1, len(ind), nnz)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	facOff, facLen := factorLayout(dims, mode, R)
	dense := 4*int64(facLen) + 8*int64(dims[mode]*R)
	// Flops per nonzero: the product row, the dot product and the axpy.
	j := &accelJob{d: d, flops: float64(nnz) * float64(R) * float64(N-1+4),
		bytes: float64(x.Bytes()) + 4*float64((N-1)*nnz*R) + 8*float64(dims[mode]*R)}
	what := fmt.Sprintf("Φ of %d nonzeros at rank %d", nnz, R)
	if err := d.fits(x.Bytes()+dense+1024, what); err != nil {
		return nil, fmt.Errorf("%s: %w", d.info.Name, err)
	}
	rt, g := d.rt, d.group
	a := &j.arrs
	a.rt = rt
	facMem, bMem, outMem := a.alloc(4*facLen), a.alloc(4*dims[mode]*R), a.alloc(4*dims[mode]*R)
	outItems := dims[mode] * R
	indMem, valMem, metaMem := upload(a, modeMajor(x)), upload(a, x.Vals), upload(a, facOff)
	j.run = func() (Timing, error) {
		p := runPhases{q: rt.queue(0)}
		for m, f := range factors {
			if m != mode {
				p.write(facMem, 4*int(facOff[m]), bytesOf(f.Data))
			}
		}
		p.write(bMem, 0, bytesOf(b.Data))
		p.launch(accel.FillZero, outItems, g, uint64(outItems), outMem)
		p.launch(accel.PhiCOO, chunks(nnz), g, uint32(nnz), uint32(R), uint32(N), uint32(mode), eps, indMem, valMem, facMem, metaMem, bMem, outMem)
		p.read(bytesOf(out.Data), outMem)
		return p.finish()
	}
	if a.err != nil {
		return nil, d.failed(a, a.err)
	}
	return j, nil
}

// checkFactors checks an MTTKRP-like job's mode and the factors it reads:
// every mode's but the output's must be dims[m] x R.
func (d *accelDevice) checkFactors(dims []int, mode, R int, factors []*kernels.Matrix) error {
	N := len(dims)
	if err := formats.CheckMode(mode, N); err != nil {
		return fmt.Errorf("%s: %w", d.info.Name, err)
	}
	if len(factors) != N {
		return fmt.Errorf("%s: %d factor matrices for an order-%d tensor", d.info.Name, len(factors), N)
	}
	for m, f := range factors {
		if m == mode {
			continue
		}
		if f == nil || f.Rows != dims[m] || f.Cols != R || len(f.Data) != dims[m]*R {
			return fmt.Errorf("%s: factor %d is not %dx%d", d.info.Name, m+1, dims[m], R)
		}
	}
	return nil
}

// modeMajor returns x's index arrays one after another, mode by mode, as
// the COO kernels read them.
func modeMajor(x *formats.COO) []uint32 {
	inds := make([]uint32, 0, x.Order()*x.NNZ())
	for _, ind := range x.Inds {
		inds = append(inds, ind...)
	}
	return inds
}

// formatName names a tensor format as the CLI does.
func formatName(x formats.TensorFormat) string {
	switch x.(type) {
	case *formats.COO:
		return "coo"
	case *formats.CSF:
		return "csf"
	case *formats.HiCOO:
		return "hicoo"
	case *formats.ALTO:
		return "alto"
	}
	return fmt.Sprintf("%T", x)
}

// altoMeta lays out what mttkrp_alto needs per mode (accel.ALTOMeta
// ulongs): the masks and move steps of formats.ALTOMode and the offset of
// the mode's factor.
func altoMeta(a *formats.ALTO, facOff []uint64) []uint64 {
	meta := make([]uint64, 0, len(a.Modes)*accel.ALTOMeta)
	for m := range a.Modes {
		e := &a.Modes[m]
		meta = append(meta, e.Lo, e.Hi, uint64(e.LoBits), facOff[m])
		meta = append(meta, e.LoSteps[:]...)
		meta = append(meta, e.HiSteps[:]...)
	}
	return meta
}

// altoPiece is a run of nonzeros of one ALTO block.
type altoPiece struct {
	first, n int
	hi       uint64
}

// altoPieces cuts the blocks of a into pieces of at most most nonzeros (0
// for whole blocks). Pieces of one block share its high word, so a block
// can be cut anywhere.
func altoPieces(a *formats.ALTO, most int) []altoPiece {
	var ps []altoPiece
	for b := range a.NumBlocks() {
		start, end := int(a.BlockPtr[b]), int(a.BlockPtr[b+1])
		var hi uint64
		if a.BlockHigh != nil {
			hi = a.BlockHigh[b]
		}
		for start < end {
			n := end - start
			if most > 0 {
				n = min(n, most)
			}
			ps = append(ps, altoPiece{first: start, n: n, hi: hi})
			start += n
		}
	}
	return ps
}

// streamALTO prepares an MTTKRP whose ALTO tensor does not fit in the
// device memory left after the dense operands (room bytes). Each run sends
// the tensor in pieces through two staging buffers: while the kernel works
// on one piece on queue 0, the next is copied into the other buffer on
// queue 1. A piece is copied only once the kernel that last read its buffer
// has finished, and the kernel on a piece is queued once its copy has.
// It returns the run and the number of pieces; a failure is left in
// arrs.err.
func (d *accelDevice) streamALTO(arrs *deviceArrays, a *formats.ALTO, mode, R int, room int64,
	facMem, metaMem, outMem devMem, uploadFactors func(*runPhases), out *kernels.Matrix) (func() (Timing, error), int) {
	rt, g := d.rt, d.group
	// Two staging buffers of 12 bytes per nonzero, in whole work-groups.
	most := int(room/(2*12)) / g * g
	if most < g {
		if arrs.err == nil {
			arrs.err = unsupported("device memory budget of %s leaves no room to stream the tensor after the factors and output (%s left)",
				formatBytes(d.budget), formatBytes(max(room, 0)))
		}
		return nil, 0
	}
	most = min(most, max(a.NNZ(), 1), int(d.maxAlloc/8))
	var lin, val [2]devMem
	for i := range 2 {
		lin[i], val[i] = arrs.alloc(8*most), arrs.alloc(4*most)
	}
	pieces := altoPieces(a, most)
	outItems := out.Rows * R
	r32, o32, m32 := uint32(R), uint32(len(a.Dims)), uint32(mode)
	return func() (Timing, error) {
		p := runPhases{q: rt.queue(0)}
		uploadFactors(&p)
		p.launch(accel.FillZero, outItems, g, uint64(outItems), outMem)
		copyQ := rt.queue(1)
		var copied [2][]devEvent // the copies into buffer i not yet waited for
		var lastKernel [2]devEvent
		send := func(i int) {
			pc, buf := pieces[i], i%2
			if lastKernel[buf] != nil { // the buffer's previous piece is done with
				if err := lastKernel[buf].wait(); err != nil && p.err == nil {
					p.err = err
				}
			}
			for _, c := range []struct {
				dst devMem
				src []byte
			}{{lin[buf], bytesOf(a.Lin[pc.first : pc.first+pc.n])}, {val[buf], bytesOf(a.Vals[pc.first : pc.first+pc.n])}} {
				if p.err != nil {
					return
				}
				ev, err := copyQ.write(c.dst, 0, c.src)
				if err != nil {
					p.err = err
					return
				}
				p.h2d = append(p.h2d, ev)
				copied[buf] = append(copied[buf], ev)
			}
		}
		if len(pieces) > 0 {
			send(0)
		}
		for i, pc := range pieces {
			buf := i % 2
			for _, ev := range copied[buf] {
				if err := ev.wait(); err != nil && p.err == nil {
					p.err = err
				}
			}
			copied[buf] = copied[buf][:0]
			n := len(p.kernel)
			p.launch(accel.MTTKRPALTO, pc.n, g, uint64(0), uint32(pc.n), r32, o32, m32, pc.hi, lin[buf], val[buf], facMem, metaMem, outMem)
			if len(p.kernel) > n {
				lastKernel[buf] = p.kernel[n]
			}
			if i+1 < len(pieces) {
				send(i + 1)
			}
		}
		p.read(bytesOf(out.Data), outMem)
		return p.finish()
	}, len(pieces)
}
