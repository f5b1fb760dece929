package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
)

// Plan is one operation (SpTTM or MTTKRP) of one tensor along one mode at
// one rank, prepared to run many times with new dense operands: the
// format of each device is chosen, the slices split, converted and bound
// on the devices (uploaded to the accelerator) once, when the plan is
// built ([Engine.PlanTTM], [Engine.PlanMTTKRP]). Each [Plan.Run] then only
// sends the operands, runs both sides at once and gathers the rows. A
// decomposition, which runs the same MTTKRPs every iteration with new
// factor values, pays the conversion once instead of every call.
//
// Under the dynamic split the chunks are cut once; the devices still pull
// them from one queue in every run, and a device binds a chunk the first
// time it pulls it (the plan binds each device's share of the mapper's
// simulated outcome up front) and keeps that binding for later runs.
//
// An accelerator that fails, at binding or in a run, has that run's work
// redone on the CPU, and the plan keeps it off the accelerator from then
// on: its device memory is freed and the CPU binds its slices once and
// keeps them, so later runs neither retry a device that failed (a lost
// device or an exhausted memory fails again, at the cost of a failed
// attempt per run) nor convert again. Every later run reports the
// accelerator as failed, with a warning.
//
// Run calls on one plan queue behind each other. Close frees what the
// plan holds on the devices; a Run after Close is an error.
type Plan struct {
	e        *Engine
	op       hetero.Op
	mode     int
	rank     int
	dims     []int
	nnz      int
	b        binder
	fibers   *formats.FiberMatrix // SpTTM's fiber matrix, the rows of Y; nil for MTTKRP
	outRows  int
	sliceNNZ []int64
	split    *hetero.Split
	// pieces are the units of work: for a static split pieces[s] is side
	// s's slices, for dynamic the queue's chunks in pulling order.
	pieces   [][]int
	pieceNNZ []int64
	sides    []*planSide
	// operands are the matrices the bound jobs read: the plan owns the
	// headers and Run points them at the caller's data, so no operand is
	// copied and no job is rebound.
	operands []*kernels.Matrix
	// once says the plan runs once (TTM, MTTKRP): binding its tensor on
	// the accelerator is then part of the one run's cost, which the
	// split weighs; a plan run many times keeps the tensor there.
	once bool
	// inPlace says the CPU runs this one-run MTTKRP's nonzeros as they
	// are, with the COO kernel, rather than the chosen format's copy.
	inPlace bool
	report  PlanReport

	mu     sync.Mutex
	closed bool
}

// planSide is one device of a plan.
type planSide struct {
	dev hetero.Device
	// choice is the device's formats. A side a static split deals
	// nothing decides them only if it ever binds (the CPU taking over
	// from a failed accelerator): decide, once, through chosen; until
	// then choice is empty.
	choice    choice
	decide    func() (choice, time.Duration, []string, error)
	decided   sync.Once
	decideErr error
	next      int // index into choice.formats of the format in use
	// bound holds the device's bindings by piece.
	bound map[int]*bound
	// format is the format last built on the device.
	format string
	// failed says why the accelerator stopped; once set the plan runs its
	// work on the CPU.
	failed string
	// pending is a binding failure met while the plan was built: the next
	// run reports it as the accelerator's failure.
	pending error
}

// PlanReport is what building a plan chose and cost. Times are seconds.
type PlanReport struct {
	// Strategy is the split the plan runs; Split the mapper's outcome.
	Strategy hetero.Strategy `json:"split"`
	Split    *hetero.Split   `json:"-"`
	// Devices reports each device's preparation: Format and FormatSource
	// as chosen, NNZ the nonzeros dealt to it (for dynamic, the
	// simulated share it bound up front), ConvertSeconds and
	// SetupSeconds the conversion and binding, Seconds its wall time.
	Devices []DeviceReport `json:"devices"`
	// FormatSource is how the formats were chosen, as in Result.
	FormatSource string `json:"format_source"`
	// PrepareSeconds is the slicing and the split, PredictSeconds the
	// format choice, BindSeconds the conversion and binding of both
	// devices at once, Seconds the whole.
	PrepareSeconds float64 `json:"prepare_seconds"`
	PredictSeconds float64 `json:"predict_seconds"`
	BindSeconds    float64 `json:"bind_seconds"`
	Seconds        float64 `json:"seconds"`
	// Warnings say what did not go as asked while the plan was built;
	// every run's Result repeats them.
	Warnings []string `json:"warnings,omitempty"`
}

// Op returns the plan's operation.
func (p *Plan) Op() hetero.Op { return p.op }

// Mode returns the plan's 0-based mode.
func (p *Plan) Mode() int { return p.mode }

// Rank returns R, the columns of the operands and of the output.
func (p *Plan) Rank() int { return p.rank }

// Fibers returns SpTTM's mode-n fiber matrix, whose row r is the
// coordinate of the output's row r; nil for MTTKRP.
func (p *Plan) Fibers() *formats.FiberMatrix { return p.fibers }

// OutputShape returns the rows and columns of Run's output: SpTTM
// Fibers().Rows() x R, MTTKRP Dims[mode] x R.
func (p *Plan) OutputShape() (rows, cols int) { return p.outRows, p.rank }

// Report returns what building the plan chose and cost.
func (p *Plan) Report() PlanReport {
	r := p.report
	r.Devices = slices.Clone(r.Devices)
	r.Warnings = slices.Clone(r.Warnings)
	return r
}

// Formats returns the format each device runs (CPU first), as built so
// far: the chosen one where a device has bound nothing yet, and "" for a
// device the split dealt nothing, whose format is chosen only if it must
// take over from a failed accelerator.
func (p *Plan) Formats() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, len(p.sides))
	for i, sd := range p.sides {
		out[i] = sd.format
		if out[i] == "" {
			out[i] = sd.chosenFormat()
		}
	}
	return out
}

// traffic is what one run moves over an accelerator's link, for the
// split: the operands sent and the result fetched, per nonzero (the
// accelerator fetches only its rows, about its share of them), and the
// tensor itself only for a plan that runs once.
func (p *Plan) traffic() hetero.Traffic {
	floats := int64(p.outRows) * int64(p.rank)
	for _, m := range p.operands {
		if m != nil {
			floats += int64(m.Rows) * int64(m.Cols)
		}
	}
	return hetero.Traffic{RunBytesPerNNZ: 4 * float64(floats) / float64(max(p.nnz, 1)), Resident: !p.once}
}

// what names the plan in errors.
func (p *Plan) what() string { return fmt.Sprintf("%s mode %d", p.op, p.mode+1) }

// newPlan builds a plan once the operation's slices are known: choose the
// formats, split, cut the pieces, and bind them on the devices.
// in, when not nil, is what an earlier plan of the same tensor learnt of
// it (summary, decision-cache key), so planning every mode reads the
// tensor once.
func (e *Engine) newPlan(ctx context.Context, x *formats.COO, p *Plan, in *input, start time.Time) (*Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	warn := &collector{}
	if in == nil {
		in = e.newInput(x, p.rank)
	}
	for _, d := range e.Devices() {
		p.sides = append(p.sides, &planSide{dev: d, bound: map[int]*bound{}})
	}
	split, err := e.split(p.op, p.sliceNNZ, p.rank, p.traffic())
	if err != nil {
		return nil, err // it says "split: "
	}
	if p.op == hetero.SpTTM && split.Strategy == hetero.SplitPeak {
		// SpTTM's slices are ranges of Y's rows: a side dealt one range
		// of slices writes its rows of Y in place, where a gather would
		// copy as many bytes as the kernel writes (docs/gpu.md). Worth
		// a quota missed by 1% of the nonzeros.
		split.Contiguous(p.sliceNNZ, 0.01)
	}
	p.split, p.report.Split, p.report.Strategy = split, split, split.Strategy
	// owner[s] is the side each piece is bound on up front.
	var owner []int
	if split.Strategy == hetero.SplitDynamic {
		q, err := hetero.NewChunkQueue(p.sliceNNZ, split.ChunkNNZ)
		if err != nil {
			return nil, fmt.Errorf("split: %w", err)
		}
		side := make([]int, len(p.sliceNNZ))
		for _, id := range split.Slices[hetero.OnAcc] {
			side[id] = hetero.OnAcc
		}
		for c, ok := q.Next(); ok; c, ok = q.Next() {
			p.pieces = append(p.pieces, c.Slices)
			o := hetero.OnCPU
			if len(c.Slices) > 0 && len(p.sides) > 1 {
				o = side[c.Slices[0]]
			}
			owner = append(owner, o)
		}
	} else {
		p.pieces = [][]int{split.Slices[hetero.OnCPU], split.Slices[hetero.OnAcc]}
		owner = []int{hetero.OnCPU, hetero.OnAcc}
	}
	for _, ids := range p.pieces {
		p.pieceNNZ = append(p.pieceNNZ, p.nnzOf(ids))
	}
	// Choose the formats of the sides that have work. A side a static
	// split deals nothing (the CPU under --split acc, or under a peak
	// split that gives the accelerator every slice) decides only if it
	// ever binds: its decision would cost as much as the other's, for
	// nothing in every run where the accelerator does not fail.
	var predict time.Duration
	for s, sd := range p.sides {
		dev := sd.dev
		sd.decide = func() (choice, time.Duration, []string, error) {
			if p.inPlace && dev.Info().Kind == hetero.CPU {
				return choice{formats: []string{"coo"}, source: SourceOneRun}, 0, nil, nil
			}
			return e.choose(in, p.op, p.mode, dev)
		}
		// Under dynamic either side may pull any chunk.
		dealt := split.Strategy == hetero.SplitDynamic
		for i, n := range p.pieceNNZ {
			dealt = dealt || owner[i] == s && n > 0
		}
		if !dealt && len(p.sides) > 1 {
			continue
		}
		c, took, ws, err := sd.decide()
		if err != nil {
			return nil, err
		}
		predict += took
		for _, w := range ws {
			warn.add(w)
		}
		sd.choice = c
		sd.decided.Do(func() {})
	}
	p.report.PredictSeconds = predict.Seconds()
	p.report.PrepareSeconds = time.Since(start).Seconds() - p.report.PredictSeconds

	// Bind every side's pieces, both sides at once.
	bindStart := time.Now()
	reps := make([]DeviceReport, len(p.sides))
	errs := make([]error, len(p.sides))
	var wg sync.WaitGroup
	for s, sd := range p.sides {
		reps[s] = DeviceReport{Device: sd.dev.Info().Name, FormatSource: sd.choice.source}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sideStart := time.Now()
			defer func() { reps[s].Seconds = time.Since(sideStart).Seconds() }()
			for i, ids := range p.pieces {
				if owner[i] != s || len(ids) == 0 {
					continue
				}
				if err := ctx.Err(); err != nil {
					errs[s] = err
					return
				}
				b, err := p.bindPiece(sd, ids, warn)
				if err != nil {
					if s == hetero.OnCPU {
						errs[s] = fmt.Errorf("%s: %w", sd.dev.Info().Name, err)
						return
					}
					// Left to the first run, which redoes this work on
					// the CPU and reports the failure as a run's would be.
					sd.pending = err
					return
				}
				sd.bound[i] = b
				reps[s].ConvertSeconds += b.convert.Seconds()
				reps[s].SetupSeconds += b.setup.Seconds()
				reps[s].NNZ += p.pieceNNZ[i]
				reps[s].Chunks++
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(distinct(errs)...); err != nil {
		p.closeBindings()
		return nil, err
	}
	p.report.BindSeconds = time.Since(bindStart).Seconds()
	var sources []string
	for s, sd := range p.sides {
		reps[s].Format = sd.format
		if reps[s].Format == "" {
			reps[s].Format = sd.chosenFormat()
		}
		if p.nnz > 0 {
			reps[s].NNZShare = float64(reps[s].NNZ) / float64(p.nnz)
		}
		reps[s].PredictedSeconds = split.Predicted[s]
		if src := sd.choice.source; src != "" && !slices.Contains(sources, src) {
			sources = append(sources, src)
		}
	}
	p.report.Devices = reps
	p.report.FormatSource = strings.Join(sources, "+")
	p.report.Warnings = warn.list
	p.report.Seconds = time.Since(start).Seconds()
	return p, nil
}

// chosen decides the side's formats if the plan left them undecided,
// adding the decision's warnings to warn.
func (sd *planSide) chosen(warn *collector) error {
	sd.decided.Do(func() {
		var ws []string
		sd.choice, _, ws, sd.decideErr = sd.decide()
		for _, w := range ws {
			warn.add(w)
		}
	})
	return sd.decideErr
}

// chosenFormat returns the format the side would build next, or "" when
// its formats were never decided (it was dealt nothing).
func (sd *planSide) chosenFormat() string {
	if sd.next < len(sd.choice.formats) {
		return sd.choice.formats[sd.next]
	}
	return ""
}

func (p *Plan) nnzOf(ids []int) int64 {
	var n int64
	for _, i := range ids {
		n += p.sliceNNZ[i]
	}
	return n
}

// bindPiece binds the slices on the side's device in its format, moving
// on to its next format while the device cannot run one.
func (p *Plan) bindPiece(sd *planSide, ids []int, warn *collector) (*bound, error) {
	if err := sd.chosen(warn); err != nil {
		return nil, err
	}
	for {
		format := sd.choice.formats[sd.next]
		b, err := p.b.bind(sd.dev, ids, format)
		if err != nil {
			if hetero.IsUnsupported(err) && sd.next+1 < len(sd.choice.formats) {
				sd.next++
				warn.add(fmt.Sprintf("%s cannot run %s (%v): using %s", sd.dev.Info().Name, format, err, sd.choice.formats[sd.next]))
				continue
			}
			return nil, err
		}
		if b.formatFallback != "" {
			warn.add(fmt.Sprintf("%s: %s", sd.dev.Info().Name, b.formatFallback))
		}
		sd.format = b.format
		return b, nil
	}
}

// runPiece runs piece i on the side, binding it first if the device has
// not yet, and gathers its rows. It adds what it did to rep.
func (p *Plan) runPiece(sd *planSide, i int, rep *DeviceReport, warn *collector) error {
	b := sd.bound[i]
	if b == nil {
		var err error
		if b, err = p.bindPiece(sd, p.pieces[i], warn); err != nil {
			return err
		}
		sd.bound[i] = b
		rep.ConvertSeconds += b.convert.Seconds()
		rep.SetupSeconds += b.setup.Seconds()
	}
	rep.Format = b.format
	t, err := b.job.Run()
	rep.H2DSeconds += t.HostToDevice.Seconds()
	rep.KernelSeconds += t.Kernel.Seconds()
	rep.D2HSeconds += t.DeviceToHost.Seconds()
	if err != nil {
		return err
	}
	b.gather()
	return nil
}

// Run computes the plan's operation with new dense operands and writes it
// into out. SpTTM: operands holds one matrix, Uᵀ (Dims[mode] x R); MTTKRP:
// one Dims[m] x R factor per mode (operands[mode] is not read and may be
// nil). out is OutputShape(), overwritten; nil allocates it. The operands
// are read, not copied, while Run runs: they must not change until it
// returns, and may change freely between runs.
//
// The Result's times are the run's alone (a device's ConvertSeconds and
// SetupSeconds are non-zero only for chunks it bound in this run); Report
// holds the plan's preparation. Y is out, Fibers the plan's fiber matrix.
// A cancelled context stops the run between chunks with the context's
// error; after any error out's contents are undefined, and the plan can
// run again.
func (p *Plan) Run(ctx context.Context, operands []*kernels.Matrix, out *kernels.Matrix) (*Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("%s plan: run after Close", p.what())
	}
	if err := p.check(operands, out); err != nil {
		return nil, fmt.Errorf("%s plan: %w", p.what(), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", p.what(), err)
	}
	start := time.Now()
	if out == nil {
		out = kernels.NewMatrix(p.outRows, p.rank)
	}
	for m, a := range operands {
		if p.operands[m] != nil {
			*p.operands[m] = *a
		}
	}
	p.b.setOut(out)
	warn := &collector{}
	for _, w := range p.report.Warnings {
		warn.add(w)
	}
	reps := make([]DeviceReport, len(p.sides))
	for s, sd := range p.sides {
		reps[s] = DeviceReport{Device: sd.dev.Info().Name, FormatSource: sd.choice.source, Format: sd.format}
	}
	if err := p.execute(ctx, reps, warn); err != nil {
		return nil, fmt.Errorf("%s: %w", p.what(), err)
	}
	res := &Result{Op: p.op, Mode: p.mode, Rank: p.rank, Dims: slices.Clone(p.dims), NNZ: p.nnz, Y: out, Fibers: p.fibers,
		Split: p.split, Strategy: p.split.Strategy, FormatSource: p.report.FormatSource}
	for s, sd := range p.sides {
		r := reps[s]
		if r.Format == "" {
			r.Format = sd.chosenFormat() // what it would have run, if decided
		}
		r.FormatSource = sd.choice.source // decided in this run, if it took over
		if p.nnz > 0 {
			r.NNZShare = float64(r.NNZ) / float64(p.nnz)
		}
		r.PredictedSeconds = p.split.Predicted[s]
		res.Devices = append(res.Devices, r)
	}
	res.Imbalance = imbalance(res.Devices)
	res.Seconds = time.Since(start).Seconds()
	res.RunSeconds = res.Seconds
	res.Flops = p.op.Flops(len(p.dims), p.nnz, p.rank)
	if res.RunSeconds > 0 {
		res.GFlops = res.Flops / res.RunSeconds / 1e9
	}
	res.Warnings = warn.list
	return res, nil
}

// distinct returns errs without the errors that say what an earlier one
// says: both sides stopped by one context report its error once.
func distinct(errs []error) []error {
	var out []error
	for _, err := range errs {
		if err != nil && !slices.ContainsFunc(out, func(e error) bool { return e.Error() == err.Error() }) {
			out = append(out, err)
		}
	}
	return out
}

// imbalance is |t_c − t_g| / max(t_c, t_g) over the devices that had work
// (ran a chunk or failed); 0 unless two had.
func imbalance(devs []DeviceReport) float64 {
	var times []float64
	for _, r := range devs {
		if r.Chunks > 0 || r.Failed != "" {
			times = append(times, r.Seconds)
		}
	}
	if len(times) == 2 {
		if hi := max(times[0], times[1]); hi > 0 {
			return math.Abs(times[0]-times[1]) / hi
		}
	}
	return 0
}

// check validates a run's operands and output against the plan's shapes.
func (p *Plan) check(operands []*kernels.Matrix, out *kernels.Matrix) error {
	R := p.rank
	if p.op == hetero.SpTTM {
		if len(operands) != 1 {
			return fmt.Errorf("%d operands, expected one, Uᵀ (%d x %d)", len(operands), p.dims[p.mode], R)
		}
		if a := operands[0]; !isShape(a, p.dims[p.mode], R) {
			return fmt.Errorf("Uᵀ must be Dims[%d] x R = %d x %d, found %s", p.mode+1, p.dims[p.mode], R, shape(a))
		}
	} else {
		if len(operands) != len(p.dims) {
			return fmt.Errorf("%d factor matrices for an order-%d tensor", len(operands), len(p.dims))
		}
		for m, a := range operands {
			if m != p.mode && !isShape(a, p.dims[m], R) {
				return fmt.Errorf("factor %d must be %d x %d, found %s", m+1, p.dims[m], R, shape(a))
			}
		}
	}
	if out != nil && !isShape(out, p.outRows, R) {
		return fmt.Errorf("output must be %d x %d, found %s", p.outRows, R, shape(out))
	}
	return nil
}

func isShape(a *kernels.Matrix, rows, cols int) bool {
	return a != nil && a.Rows == rows && a.Cols == cols && len(a.Data) == rows*cols
}

// execute runs the pieces: both sides at once, each pulling its work (its
// dealt piece, or chunks of the dynamic queue), then the CPU redoes
// whatever the accelerator failed to, or was kept off since an earlier
// failure. It fills the sides' reports.
func (p *Plan) execute(ctx context.Context, reps []DeviceReport, warn *collector) error {
	var total int64
	for _, n := range p.pieceNNZ {
		total += n
	}
	dynamic := p.split.Strategy == hetero.SplitDynamic
	var next [2]func() (int, bool)
	if dynamic {
		var cursor atomic.Int64
		pull := func() (int, bool) {
			i := cursor.Add(1) - 1
			if i >= int64(len(p.pieces)) {
				return 0, false
			}
			return int(i), true
		}
		next = [2]func() (int, bool){pull, pull}
	} else {
		for s := range next {
			given := false
			next[s] = func() (int, bool) {
				if given {
					return 0, false
				}
				given = true
				return s, true
			}
		}
	}
	var progressMu sync.Mutex
	var done int64
	progress := func(n int64) {
		if p.e.opts.Progress == nil {
			return
		}
		progressMu.Lock()
		defer progressMu.Unlock()
		done += n
		p.e.opts.Progress(done, total)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		cpuErr  error
		failed  []int // pieces left to the CPU
		wasDead = len(p.sides) > 1 && p.sides[hetero.OnAcc].failed != ""
	)
	if wasDead && !dynamic && len(p.pieces[hetero.OnAcc]) > 0 {
		failed = append(failed, hetero.OnAcc)
	}
	for s, sd := range p.sides {
		if s == hetero.OnAcc && wasDead {
			reps[s].Failed = sd.failed
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			defer func() { reps[s].Seconds = time.Since(start).Seconds() }()
			for ctx.Err() == nil {
				i, ok := next[s]()
				if !ok {
					return
				}
				if len(p.pieces[i]) == 0 {
					continue
				}
				var err error
				if sd.pending != nil {
					err = sd.pending
				} else {
					err = p.runPiece(sd, i, &reps[s], warn)
				}
				if err != nil {
					if s == hetero.OnCPU {
						cpuErr = fmt.Errorf("%s: %w", sd.dev.Info().Name, err)
						cancel() // the accelerator's work would be wasted
						return
					}
					// The accelerator is done for this plan: the piece it
					// failed, and for a static split nothing else, is left
					// to the CPU; for dynamic the CPU drains the queue.
					sd.failed = oneLine(err)
					reps[s].Failed = sd.failed
					failed = append(failed, i)
					return
				}
				reps[s].NNZ += p.pieceNNZ[i]
				reps[s].Chunks++
				progress(p.pieceNNZ[i])
			}
		}()
	}
	wg.Wait()
	if len(p.sides) > 1 {
		if acc := p.sides[hetero.OnAcc]; acc.failed != "" && !wasDead {
			// Free the device memory of a device the plan no longer uses.
			if err := acc.closeAll(); err != nil {
				warn.add(fmt.Sprintf("%s: freeing its memory after the failure: %s", acc.dev.Info().Name, oneLine(err)))
			}
			acc.pending = nil
		}
	}
	if cpuErr != nil {
		return cpuErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(p.sides) > 1 && p.sides[hetero.OnAcc].failed != "" {
		cpu, acc := p.sides[hetero.OnCPU], p.sides[hetero.OnAcc]
		var n int64
		start := time.Now()
		for _, i := range failed {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := p.runPiece(cpu, i, &reps[hetero.OnCPU], warn); err != nil {
				return fmt.Errorf("%s, redoing %s's work: %w", cpu.dev.Info().Name, acc.dev.Info().Name, err)
			}
			n += p.pieceNNZ[i]
			reps[hetero.OnCPU].NNZ += p.pieceNNZ[i]
			reps[hetero.OnCPU].Chunks++
			progress(p.pieceNNZ[i])
		}
		took := time.Since(start).Seconds()
		reps[hetero.OnCPU].Seconds += took
		reps[hetero.OnCPU].FallbackSeconds += took
		switch {
		case !wasDead || n > 0:
			warn.add(fmt.Sprintf("%s failed (%s): its %d nonzeros were redone on %s, the result is complete",
				acc.dev.Info().Name, acc.failed, n, cpu.dev.Info().Name))
		default:
			warn.add(fmt.Sprintf("%s failed in an earlier run (%s): %s ran all the work, the result is complete",
				acc.dev.Info().Name, acc.failed, cpu.dev.Info().Name))
		}
	}
	return nil
}

// closeAll closes the side's bindings, freeing what they hold on the
// device.
func (sd *planSide) closeAll() error {
	var errs []error
	for i, b := range sd.bound {
		errs = append(errs, b.job.Close())
		delete(sd.bound, i)
	}
	return errors.Join(errs...)
}

func (p *Plan) closeBindings() error {
	var errs []error
	for _, sd := range p.sides {
		if err := sd.closeAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sd.dev.Info().Name, err))
		}
	}
	return errors.Join(errs...)
}

// Close frees what the plan holds on the devices (the accelerator's
// uploads) and its references to the tensor and the last operands. It is
// safe to call more than once; Run after Close is an error.
func (p *Plan) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	err := p.closeBindings()
	for _, a := range p.operands {
		if a != nil {
			*a = kernels.Matrix{}
		}
	}
	p.b = nil
	if err != nil {
		return fmt.Errorf("%s plan: close: %w", p.what(), err)
	}
	return nil
}

// oneShot folds the plan's preparation into the result of its only run,
// so that Engine.TTM and MTTKRP report the whole call as before plans:
// a device's conversion, setup and wall time include its binding, and
// RunSeconds the binding of both sides.
func (p *Plan) oneShot(res *Result, start time.Time) *Result {
	for i := range res.Devices {
		d, pd := &res.Devices[i], p.report.Devices[i]
		d.ConvertSeconds += pd.ConvertSeconds
		d.SetupSeconds += pd.SetupSeconds
		d.Seconds += pd.Seconds
	}
	res.Imbalance = imbalance(res.Devices)
	res.RunSeconds += p.report.BindSeconds
	res.PrepareSeconds, res.PredictSeconds = p.report.PrepareSeconds, p.report.PredictSeconds
	if res.RunSeconds > 0 {
		res.GFlops = res.Flops / res.RunSeconds / 1e9
	}
	res.Seconds = time.Since(start).Seconds()
	return res
}
