package decomp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sparsetune/sparsetune/engine"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

// EngineKernels runs CP-ALS's MTTKRPs (and Tucker's TTM chains: see
// TTMChain) through package engine: one
// engine.Plan per mode, so each mode's format is chosen per device
// (forced, cached or predicted, as the engine's Options say), its slices
// split between the CPU and the accelerator, converted and bound on the
// devices once, and every iteration only sends the current factors and
// runs both sides at once. Pass it as Options.MTTKRP; CPALS builds every
// mode's plan before the first iteration (CPResult.SetupSeconds), and a
// mode asked for first otherwise is planned on that first use.
//
// An accelerator failing in a run has its work redone on the CPU by the
// plan (engine.Plan), so the decomposition goes on, exactly; Warnings
// says so. Close frees the plans' device memory once the decomposition is
// done. An EngineKernels is not safe for concurrent use, like CPU.
type EngineKernels struct {
	ctx   context.Context
	e     *engine.Engine
	x     *formats.COO
	rank  int
	plans []*engine.Plan
	// chains are Tucker's TTM chains per output mode, fibers the fiber
	// counts that choose their contracted modes.
	chains []*engineChain
	fibers []int
	modes  []EngineMode
	setup  time.Duration
	// closed makes every later MTTKRP an error rather than a new plan.
	closed bool

	mu       sync.Mutex
	warnings []string
}

// EngineMode is what the engine did for one mode's MTTKRPs.
type EngineMode struct {
	Mode  int    `json:"mode"` // 1-based
	Split string `json:"split"`
	// Runs is the number of MTTKRPs of the mode.
	Runs int `json:"runs"`
	// Devices has one entry per device, the CPU first.
	Devices []EngineDevice `json:"devices"`
}

// EngineDevice is one device's part in one mode's MTTKRPs. Times are
// seconds, summed over the runs.
type EngineDevice struct {
	Device       string `json:"device"`
	Format       string `json:"format"`
	FormatSource string `json:"format_source"`
	// NNZShare is the device's share of the nonzeros in the last run.
	NNZShare float64 `json:"nnz_share"`
	// SetupSeconds is the conversion and binding, at planning and in any
	// run (a dynamic split binds a chunk the first time a device pulls
	// it).
	SetupSeconds  float64 `json:"setup_seconds"`
	KernelSeconds float64 `json:"kernel_seconds"`
	// Seconds is the device's wall time in the runs.
	Seconds float64 `json:"seconds"`
	Failed  string  `json:"failed,omitempty"`
}

// NewEngineKernels returns the engine-backed MTTKRPs of x at the rank.
// Nothing is planned until CPALS prepares the modes (or a mode is first
// used); ctx bounds every plan and run, so cancelling it stops the
// decomposition at its next MTTKRP with the context's error.
func NewEngineKernels(ctx context.Context, e *engine.Engine, x *formats.COO, rank int) (*EngineKernels, error) {
	if e == nil {
		return nil, errors.New("engine kernels: nil engine")
	}
	if _, err := checkTensor(x); err != nil {
		return nil, fmt.Errorf("engine kernels: %w", err)
	}
	if rank < 1 {
		return nil, fmt.Errorf("engine kernels: rank must be >= 1, found %d", rank)
	}
	k := &EngineKernels{ctx: ctx, e: e, x: x, rank: rank, plans: make([]*engine.Plan, x.Order()), modes: make([]EngineMode, x.Order())}
	for m := range k.modes {
		k.modes[m].Mode = m + 1
	}
	return k, nil
}

// plan returns mode's plan, building it on first use.
func (k *EngineKernels) plan(mode int) (*engine.Plan, error) {
	if k.closed {
		return nil, errors.New("engine kernels are closed")
	}
	if p := k.plans[mode]; p != nil {
		return p, nil
	}
	start := time.Now()
	p, err := k.e.PlanMTTKRP(k.ctx, k.x, mode, k.rank)
	k.setup += time.Since(start)
	if err != nil {
		return nil, err
	}
	k.adopt(mode, p)
	return p, nil
}

// adopt makes p mode's plan and starts its report.
func (k *EngineKernels) adopt(mode int, p *engine.Plan) {
	k.plans[mode] = p
	rep := p.Report()
	k.addWarnings(rep.Warnings)
	em := &k.modes[mode]
	em.Split = rep.Strategy.String()
	em.Devices = make([]EngineDevice, len(rep.Devices))
	for i, d := range rep.Devices {
		em.Devices[i] = EngineDevice{Device: d.Device, Format: d.Format, FormatSource: d.FormatSource, NNZShare: d.NNZShare,
			SetupSeconds: d.ConvertSeconds + d.SetupSeconds}
	}
}

func (k *EngineKernels) addWarnings(ws []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range ws {
		if !slices.Contains(k.warnings, w) {
			k.warnings = append(k.warnings, w)
		}
	}
}

// MTTKRP implements MTTKRPer: mode's plan runs with the factors, writing
// out.
func (k *EngineKernels) MTTKRP(mode int, factors []*kernels.Matrix, out *kernels.Matrix) error {
	if mode < 0 || mode >= len(k.plans) {
		return fmt.Errorf("MTTKRP mode %d out of range for order %d", mode+1, len(k.plans))
	}
	if out == nil || out.Cols != k.rank {
		return fmt.Errorf("MTTKRP of mode %d: output must have the kernels' rank %d columns, found %s", mode+1, k.rank, matrixShape(out))
	}
	p, err := k.plan(mode)
	if err != nil {
		return err
	}
	res, err := p.Run(k.ctx, factors, out)
	if err != nil {
		return err
	}
	k.record(mode, res)
	return nil
}

// record adds one run of mode's plan to its report.
func (k *EngineKernels) record(mode int, res *engine.Result) {
	k.addWarnings(res.Warnings)
	em := &k.modes[mode]
	em.Runs++
	for i, d := range res.Devices {
		ed := &em.Devices[i]
		ed.Format, ed.FormatSource, ed.NNZShare, ed.Failed = d.Format, d.FormatSource, d.NNZShare, d.Failed
		ed.SetupSeconds += d.ConvertSeconds + d.SetupSeconds
		ed.KernelSeconds += d.KernelSeconds
		ed.Seconds += d.Seconds
	}
}

// engineChain is the TTM chain of one output mode on the engine: the
// plan of its SpTTM and the dense side of the chain (ttmPlan, whose own
// SpTTM plan is unused).
type engineChain struct {
	plan *engine.Plan
	tp   *ttmPlan
}

// chain returns the chain of output mode n for the factors' ranks,
// planning it on first use or when the contracted mode's rank changed.
func (k *EngineKernels) chain(n int, ranks []int) (*engineChain, error) {
	if k.closed {
		return nil, errors.New("engine kernels are closed")
	}
	if k.chains == nil {
		k.chains = make([]*engineChain, k.x.Order())
		k.fibers = make([]int, k.x.Order())
	}
	if ch := k.chains[n]; ch != nil {
		if ch.tp.rank == ranks[ch.tp.p] {
			return ch, nil
		}
		if err := ch.plan.Close(); err != nil {
			return nil, err
		}
		k.chains[n] = nil
	}
	start := time.Now()
	defer func() { k.setup += time.Since(start) }()
	p, err := chainContraction(k.x, n, k.fibers)
	if err != nil {
		return nil, err
	}
	plan, err := k.e.PlanTTMSliced(k.ctx, k.x, p, n, ranks[p])
	if err != nil {
		return nil, err
	}
	tp := newTTMPlan(plan.Fibers(), p, resolvedThreads(0))
	tp.rank, tp.y = ranks[p], kernels.NewMatrix(plan.Fibers().Rows(), ranks[p])
	ch := &engineChain{plan: plan, tp: tp}
	k.chains[n] = ch
	k.adopt(n, plan)
	return ch, nil
}

// TTMChain implements TTMChainer: the chain of output mode n contracts
// its first mode with an SpTTM run by the engine (engine.PlanTTMSliced:
// that mode's fiber matrix sliced by n, so the devices split the chain's
// output rows), planned once per mode; the dense products after it run on
// the CPU as in CPU.TTMChain. Modes reports each output mode's SpTTM.
func (k *EngineKernels) TTMChain(mode int, factors []*kernels.Matrix, out *kernels.Matrix) error {
	ranks, err := checkChain(k.x, mode, factors, out)
	if err != nil {
		return err
	}
	ch, err := k.chain(mode, ranks)
	if err != nil {
		return err
	}
	res, err := ch.plan.Run(k.ctx, []*kernels.Matrix{factors[ch.tp.p]}, ch.tp.y)
	if err != nil {
		return err
	}
	k.record(mode, res)
	ch.tp.dense(mode, factors, out)
	return nil
}

// prepareTTMChain plans every mode's chain, so TuckerHOOI reports the
// setup apart.
func (k *EngineKernels) prepareTTMChain(x *formats.COO, ranks []int) error {
	if x != k.x {
		return errOtherTensor
	}
	for n := range k.x.Order() {
		if _, err := k.chain(n, ranks); err != nil {
			return err
		}
	}
	return nil
}

func matrixShape(a *kernels.Matrix) string {
	if a == nil {
		return "nil"
	}
	return fmt.Sprintf("%dx%d", a.Rows, a.Cols)
}

// prepareMTTKRP plans every mode, so CPALS reports the setup apart. The
// modes are planned together (engine.PlanMTTKRPAll), so the format choice
// reads the tensor once rather than once per mode.
func (k *EngineKernels) prepareMTTKRP(x *formats.COO, rank int) error {
	if x != k.x {
		return errOtherTensor
	}
	if rank != k.rank {
		return fmt.Errorf("engine kernels were built for rank %d, CP-ALS asks for rank %d", k.rank, rank)
	}
	if k.closed {
		return errors.New("engine kernels are closed")
	}
	for _, p := range k.plans {
		if p != nil {
			// A mode was planned on first use: plan the others one by one.
			for m := range k.plans {
				if _, err := k.plan(m); err != nil {
					return err
				}
			}
			return nil
		}
	}
	start := time.Now()
	plans, err := k.e.PlanMTTKRPAll(k.ctx, k.x, k.rank)
	k.setup += time.Since(start)
	if err != nil {
		return err
	}
	for m, p := range plans {
		k.adopt(m, p)
	}
	return nil
}

// SetupSeconds returns the time spent so far building the plans.
func (k *EngineKernels) SetupSeconds() float64 { return k.setup.Seconds() }

// Modes returns, per mode, the split and each device's format, share and
// times so far.
func (k *EngineKernels) Modes() []EngineMode {
	out := slices.Clone(k.modes)
	for i := range out {
		out[i].Devices = slices.Clone(out[i].Devices)
	}
	return out
}

// Warnings returns what did not go as asked (an accelerator that failed,
// a format a device could not run), each once.
func (k *EngineKernels) Warnings() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.warnings)
}

// Close frees every plan's device memory. The kernels cannot run after.
func (k *EngineKernels) Close() error {
	var errs []error
	for m, p := range k.plans {
		if p != nil {
			errs = append(errs, p.Close())
			k.plans[m] = nil
		}
	}
	for n, ch := range k.chains {
		if ch != nil {
			errs = append(errs, ch.plan.Close())
			k.chains[n] = nil
		}
	}
	k.closed = true
	return errors.Join(errs...)
}
