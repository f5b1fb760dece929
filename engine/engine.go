package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model"
)

// How a device's format was chosen, as Result and DeviceReport report it.
const (
	SourceForced    = "forced"    // Options.Format named it
	SourceCached    = "cached"    // a measured decision for this tensor (Options.Decisions)
	SourcePredicted = "predicted" // Options.Predictor ranked it first
	SourceMeasured  = "measured"  // timed on the device: the model has no head for its class
	// SourceOneRun is the CPU's COO kernel run on the tensor in the order
	// it came, with no conversion, in a call that runs once
	// (Engine.MTTKRP says when).
	SourceOneRun = "one-run"
)

// CachedPredictors are the predictor keys whose decisions the engine takes
// from the decision cache: measurements (sparsetune predict --predictor
// measure, with and without --greedy) are the ground truth a prediction
// only estimates, so only they are worth a file read.
var CachedPredictors = []string{"measure", "measure-greedy"}

// Options configures an Engine. The zero value splits by the peak-power
// formula and predicts each device's format with the hand rule.
type Options struct {
	// Split is how the slices are divided between the CPU and the
	// accelerator; 0 means hetero.SplitPeak. Without an accelerator every
	// strategy runs everything on the CPU, and the result says cpu.
	Split hetero.Strategy
	// Format forces one storage format on every device; "" or "auto"
	// lets the engine choose per device. SpTTM takes coo, csr, ell or hyb,
	// MTTKRP coo, csf, hicoo or alto.
	Format string
	// Predictor ranks the formats when none is forced or cached; nil
	// means model.RulePredictor{}. It is given one features.Summarize of
	// the tensor for every device.
	Predictor model.SummaryPredictor
	// Decisions, when set, is consulted before the predictor: a format
	// measured for this tensor, op, mode and device (CachedPredictors) is
	// used as it is. The lookup costs the summary, which the prediction
	// reads anyway, and reads the whole tensor (model.Fingerprint) only
	// when a decision is filed under the summary's key
	// (model.SampleKey).
	Decisions *model.Decisions
	// Profile holds the devices' numbers for the split. nil means the
	// stored profile, hetero.ProfileFor(devices, Calibrate). It is needed
	// only when an accelerator shares the work (peak, dynamic, random).
	Profile *hetero.Profile
	// Calibrate lets a nil Profile measure, quickly and once, a device the
	// stored profile lacks; without it a missing device is an error.
	Calibrate bool
	// Seed drives the random split.
	Seed uint64
	// Progress, when set, is called after each chunk of slices has run,
	// with the nonzeros done so far and in all. Calls come from the
	// devices' goroutines, one at a time.
	Progress func(done, total int64)
}

// Engine runs SpTTM and MTTKRP on a CPU and at most one accelerator. It is
// safe for concurrent use, though calls on one accelerator queue behind
// each other.
type Engine struct {
	cpu, acc hetero.Device
	opts     Options
	// cpuAdded says the CPU device was not among New's devices: it only
	// redoes a failed accelerator's work.
	cpuAdded bool

	mu      sync.Mutex
	profile *hetero.Profile // the stored profile, once loaded
	// picked is the tensor UsePicks was last given, and its picks.
	picked struct {
		x *formats.COO
		p *formats.Picks
	}
}

// UsePicks gives the engine the sample indices a reader picked as it read
// x (formats.ReadFilePicked with features.PickPositions): the format
// choice for x then makes its summary from them (features.SummarizePicked)
// instead of gathering the sample from x in memory, the cache misses of a
// tensor of millions of nonzeros. The summary is the same either way; the
// time the picks took (Picks.Took) counts in the plan's PredictSeconds.
// The engine keeps the picks of one tensor, the last given; picks that
// were not made for x are not used.
func (e *Engine) UsePicks(x *formats.COO, p *formats.Picks) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.picked.x, e.picked.p = x, p
}

// newInput returns the format choice's input for x at rank R, with the
// picks UsePicks gave for x.
func (e *Engine) newInput(x *formats.COO, rank int) *input {
	in := &input{x: x, rank: rank, conv: formats.NewConverter(x)}
	e.mu.Lock()
	if e.picked.x == x {
		in.picks = e.picked.p
	}
	e.mu.Unlock()
	return in
}

// New returns an engine on the devices: one CPU device and at most one
// accelerator (the split is two-sided). Given an accelerator alone, every
// run puts all the work on it (hetero.SplitAcc, whatever Options.Split
// says), and a CPU device running on every core is added only to redo the
// accelerator's work should it fail.
func New(devices []hetero.Device, opts Options) (*Engine, error) {
	e := &Engine{opts: opts}
	for _, d := range devices {
		if d == nil {
			return nil, errors.New("engine: a nil device")
		}
		if d.Info().Kind == hetero.CPU {
			if e.cpu != nil {
				return nil, fmt.Errorf("engine: two CPU devices, %s and %s", e.cpu.Info().Name, d.Info().Name)
			}
			e.cpu = d
			continue
		}
		if e.acc != nil {
			return nil, fmt.Errorf("engine: two accelerators, %s and %s: the split takes one beside the CPU", e.acc.Info().Name, d.Info().Name)
		}
		e.acc = d
	}
	if e.cpu == nil {
		e.cpu, e.cpuAdded = hetero.NewCPU(0), true
	}
	if e.opts.Split == 0 {
		e.opts.Split = hetero.SplitPeak
	}
	if _, err := hetero.ParseStrategy(e.opts.Split.String()); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if e.opts.Format == "auto" {
		e.opts.Format = ""
	}
	if f := e.opts.Format; f != "" && !slices.Contains(hetero.SpTTM.Formats(), f) && !slices.Contains(hetero.MTTKRP.Formats(), f) && f != "fiber-coo" {
		return nil, fmt.Errorf("engine: unknown format %q, expected auto, one of %s (ttm) or %s (mttkrp)", f,
			strings.Join(hetero.SpTTM.Formats(), ", "), strings.Join(hetero.MTTKRP.Formats(), ", "))
	}
	if e.opts.Predictor == nil {
		e.opts.Predictor = model.RulePredictor{}
	}
	return e, nil
}

// Devices returns the engine's devices: the CPU, then the accelerator if
// there is one.
func (e *Engine) Devices() []hetero.Device {
	if e.acc == nil {
		return []hetero.Device{e.cpu}
	}
	return []hetero.Device{e.cpu, e.acc}
}

// Strategy returns the strategy a run uses: the one asked for;
// hetero.SplitCPU when there is no accelerator; hetero.SplitAcc when the
// accelerator was given without a CPU.
func (e *Engine) Strategy() hetero.Strategy {
	switch {
	case e.acc == nil:
		return hetero.SplitCPU
	case e.cpuAdded:
		return hetero.SplitAcc
	}
	return e.opts.Split
}

// profiles returns the CPU's and the accelerator's profiles for op at the
// given rank.
func (e *Engine) profiles(op hetero.Op, rank int) (cpu, acc hetero.DeviceProfile, err error) {
	p := e.opts.Profile
	if p == nil {
		e.mu.Lock()
		if e.profile == nil {
			e.profile, err = hetero.ProfileFor(e.Devices(), e.opts.Calibrate)
		}
		p = e.profile
		e.mu.Unlock()
		if err != nil {
			return cpu, acc, err
		}
	}
	var out [2]hetero.DeviceProfile
	for i, d := range e.Devices() {
		name := d.Info().Name
		dp, ok := p.Device(name)
		if !ok {
			return cpu, acc, fmt.Errorf("no profile for device %s (run sparsetune calibrate)", name)
		}
		out[i] = atRank(dp, op, rank)
	}
	return out[0], out[1], nil
}

// atRank returns the profile with op's numbers scaled to the rank: the
// flops per nonzero grow with it while the tensor data does not, so the
// split moves towards the device with the higher peak as the rank grows.
func atRank(d hetero.DeviceProfile, op hetero.Op, rank int) hetero.DeviceProfile {
	if o, ok := d.Op(op); ok {
		d.Ops = maps.Clone(d.Ops) // not into the caller's profile
		d.Ops[op.String()] = o.AtRank(rank)
	}
	return d
}

// split maps the slices to the sides, for runs that move traffic over the
// accelerator's link.
func (e *Engine) split(op hetero.Op, sliceNNZ []int64, rank int, traffic hetero.Traffic) (*hetero.Split, error) {
	strategy := e.Strategy()
	if strategy == hetero.SplitCPU || strategy == hetero.SplitAcc {
		// One side takes everything: no profile is needed, but its
		// predicted time is reported when one is at hand.
		if e.opts.Profile != nil {
			if cpu, acc, err := e.profiles(op, rank); err == nil {
				if s, err := hetero.MapSlicesFor(strategy, sliceNNZ, cpu, acc, op, e.opts.Seed, traffic); err == nil {
					return s, nil
				}
			}
		}
		s := &hetero.Split{Strategy: strategy}
		side := hetero.OnCPU
		if strategy == hetero.SplitAcc {
			side, s.AccShare = hetero.OnAcc, 1
		}
		for i, n := range sliceNNZ {
			s.Slices[side] = append(s.Slices[side], i)
			s.NNZ[side] += n
		}
		return s, nil
	}
	cpu, acc, err := e.profiles(op, rank)
	if err != nil {
		return nil, err
	}
	return hetero.MapSlicesFor(strategy, sliceNNZ, cpu, acc, op, e.opts.Seed, traffic)
}

// input is what the format choice learns of a tensor, computed at most
// once per call whatever the number of devices.
type input struct {
	x       *formats.COO
	rank    int // R of the call's dense operands, for measurements
	summary *features.Summary
	id      *model.TensorID // for the decision cache, made from the summary
	// picks, when not nil, are x's sample as its reader picked it
	// (Engine.UsePicks); pickTime is what they took, not yet counted in
	// a choice's time.
	picks    *formats.Picks
	pickTime time.Duration

	// conv converts x for the plans of every mode, which share through
	// it what their conversions have in common: PlanMTTKRPAll converts a
	// whole tensor to HiCOO or ALTO once, not once per mode that picks
	// it, and counts the fibers that place the CSFs' leaves once.
	conv *formats.Converter
}

// summarize makes the input's summary, once.
func (in *input) summarize() error {
	if in.summary != nil {
		return nil
	}
	s, err := features.SummarizePicked(in.x, in.picks)
	if err != nil {
		return fmt.Errorf("summarise: %w", err)
	}
	if in.picks != nil {
		in.pickTime = in.picks.Took
	}
	in.summary = s
	return nil
}

// takePickTime returns the picks' time once, to the choice that made the
// summary from them.
func (in *input) takePickTime() time.Duration {
	t := in.pickTime
	in.pickTime = 0
	return t
}

// tensorID returns the input's name in the decision cache: a key of its
// summary's sample, and its fingerprint only if a decision is filed under
// the key (model.SampleKey says why).
func (in *input) tensorID() (*model.TensorID, error) {
	if in.id == nil {
		if err := in.summarize(); err != nil {
			return nil, err
		}
		in.id = model.NewTensorID(in.x, in.summary)
	}
	return in.id, nil
}

// choice is the formats a device runs, best first: the first it can run
// is used (an accelerator without a kernel for the best moves on to the
// next).
type choice struct {
	formats []string
	source  string
}

// choose picks the formats of op along mode for the device and returns
// the time the prediction took, with the reader's picks where they made
// the summary.
func (e *Engine) choose(in *input, op hetero.Op, mode int, dev hetero.Device) (choice, time.Duration, []string, error) {
	c, took, ws, err := e.chooseFormats(in, op, mode, dev)
	return c, took + in.takePickTime(), ws, err
}

func (e *Engine) chooseFormats(in *input, op hetero.Op, mode int, dev hetero.Device) (choice, time.Duration, []string, error) {
	if f := e.opts.Format; f != "" {
		if f == "fiber-coo" && op == hetero.SpTTM {
			f = "coo"
		}
		if !slices.Contains(op.Formats(), f) {
			return choice{}, 0, nil, fmt.Errorf("format %s does not run %s, expected one of %s", f, op, strings.Join(op.Formats(), ", "))
		}
		return choice{formats: []string{f}, source: SourceForced}, 0, nil, nil
	}
	start := time.Now()
	if e.opts.Decisions != nil && !e.opts.Decisions.Empty() {
		id, err := in.tensorID()
		if err != nil {
			return choice{}, 0, nil, err
		}
		for _, key := range CachedPredictors {
			if d, ok := e.opts.Decisions.Get(id, op, mode, dev.Info().Name, key); ok {
				if names := known(op, d.Prediction.Formats); len(names) > 0 {
					return choice{formats: names, source: SourceCached}, time.Since(start), nil, nil
				}
			}
		}
	}
	// A model with heads learnt at several ranks answers with the one
	// nearest to the call's.
	p := model.AtRank(e.opts.Predictor, in.rank)
	if sf, ok := p.(model.SummaryFreePredictor); ok {
		// The rule, or a model head that defers to it: no summary.
		if pr, ok := sf.PredictWithoutSummary(op, mode, dev.Info()); ok && pr != nil {
			if names := known(op, pr.Formats); len(names) > 0 {
				return choice{formats: names, source: SourcePredicted}, time.Since(start), nil, nil
			}
		}
	}
	if err := in.summarize(); err != nil {
		return choice{}, 0, nil, err
	}
	// A predictor that tells device classes apart (a GCN with one head
	// per class) is given the device; others go by its kind.
	pr, err := model.PredictOn(p, in.summary, op, mode, dev.Info())
	var warnings []string
	source := SourcePredicted
	if errors.Is(err, model.ErrNoHead) {
		// The model was not trained on this kind of hardware: measure
		// every format on the device instead, once per tensor when a
		// cache is at hand, never a guess from another class's head.
		if pr, err = e.measure(in, op, mode, dev); err == nil {
			warnings = append(warnings, fmt.Sprintf("%s: the model has no head for device class %s; measured every format on it instead", dev.Info().Name, dev.Info().Class()))
			source = SourceMeasured
		}
	}
	if err == nil && pr == nil {
		// A caller's predictor that answers nothing without saying why.
		err = errors.New("the predictor gave no prediction and no error")
	}
	if err != nil {
		return choice{}, 0, nil, fmt.Errorf("predict the format for %s: %w", dev.Info().Name, err)
	}
	names := known(op, pr.Formats)
	if len(names) == 0 {
		return choice{}, 0, nil, fmt.Errorf("predict the format for %s: no %s format among %v", dev.Info().Name, op, pr.Formats)
	}
	for _, w := range pr.Warnings {
		warnings = append(warnings, fmt.Sprintf("prediction for %s: %s", dev.Info().Name, w))
	}
	if w := model.RankNote(pr.LearntRanks, in.rank); w != "" {
		warnings = append(warnings, fmt.Sprintf("prediction for %s: %s", dev.Info().Name, w))
	}
	return choice{formats: names, source: source}, time.Since(start), warnings, nil
}

// measure times every format of op along mode on the device
// (model.MeasureAll at the call's rank) and stores the decision in the
// cache, if the engine has one, under the key choose looks up first.
func (e *Engine) measure(in *input, op hetero.Op, mode int, dev hetero.Device) (*model.Prediction, error) {
	m := model.MeasureAll{Device: dev, Rank: in.rank, Iters: 3}
	pr, err := m.Predict(in.x, op, mode, dev.Info().Kind)
	if err != nil {
		return nil, fmt.Errorf("measure every format: %w", err)
	}
	if e.opts.Decisions != nil {
		id, err := in.tensorID()
		if err != nil {
			return nil, err
		}
		d := &model.Decision{Key: id.Key, Fingerprint: id.Fingerprint(), Op: op.String(), Mode: mode + 1, Device: dev.Info().Name, Predictor: CachedPredictors[0], Prediction: pr}
		if err := e.opts.Decisions.Put(d, op, mode); err != nil {
			pr.Warnings = append(pr.Warnings, err.Error())
		}
	}
	return pr, nil
}

// known returns the ranked formats that op runs, best first, each once.
func known(op hetero.Op, ranked []model.Ranked) []string {
	var names []string
	for _, r := range ranked {
		f := r.Format
		if f == "fiber-coo" {
			f = "coo"
		}
		if slices.Contains(op.Formats(), f) && !slices.Contains(names, f) {
			names = append(names, f)
		}
	}
	return names
}
