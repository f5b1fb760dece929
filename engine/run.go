package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
)

// DeviceReport is what one device did in a run. Times are seconds.
type DeviceReport struct {
	Device string `json:"device"`
	// Format is the storage format the device ran, or would run; ""
	// for a device the split dealt nothing, which chooses one only if it
	// must take over from a failed accelerator. FormatSource says how it
	// was chosen.
	Format       string `json:"format"`
	FormatSource string `json:"format_source"`
	// NNZ is the nonzeros the device computed and NNZShare their share
	// of the tensor's, after any fallback: the CPU's include a failed
	// accelerator's.
	NNZ      int64   `json:"nnz"`
	NNZShare float64 `json:"nnz_share"`
	// Chunks is the number of pieces of work the device ran: one per
	// side for a static split, the chunks it pulled for dynamic.
	Chunks int `json:"chunks"`
	// ConvertSeconds is the host's time building the device's formats,
	// SetupSeconds binding them (kernel plans; uploading the format's
	// arrays on an accelerator).
	ConvertSeconds float64 `json:"convert_seconds"`
	SetupSeconds   float64 `json:"setup_seconds"`
	// H2DSeconds, KernelSeconds and D2HSeconds are the runs' phases
	// (hetero.Timing): the dense operands sent, the kernels, the result
	// read back. On the CPU only the kernel phase is non-zero.
	H2DSeconds    float64 `json:"h2d_seconds"`
	KernelSeconds float64 `json:"kernel_seconds"`
	D2HSeconds    float64 `json:"d2h_seconds"`
	// Seconds is the device's wall time from the start of the run to its
	// last result gathered, conversion, setup and fallback work included:
	// the t_c or t_g of the imbalance.
	Seconds float64 `json:"seconds"`
	// PredictedSeconds is the mapper's estimate of the device's time
	// (Split.Predicted; 0 where no profile was used).
	PredictedSeconds float64 `json:"predicted_seconds"`
	// FallbackSeconds is the part of Seconds the CPU spent redoing a
	// failed accelerator's work.
	FallbackSeconds float64 `json:"fallback_seconds,omitempty"`
	// Failed says why the device stopped, when it did; its work was
	// redone on the CPU.
	Failed string `json:"failed,omitempty"`
}

// Result is the outcome of a run: the output and how it was computed.
type Result struct {
	Op   hetero.Op `json:"-"` // the op; JSON of a Result carries the report fields
	Mode int       `json:"-"` // 0-based
	Rank int       `json:"rank"`
	Dims []int     `json:"dims"`
	NNZ  int       `json:"nnz"`
	// Y is the output. SpTTM: Fibers.Rows() x Rank, row r the dense
	// output fiber at the coordinates of Fibers' row r (SemiSparse turns
	// it into a tensor). MTTKRP: Dims[Mode] x Rank.
	Y *kernels.Matrix `json:"-"`
	// Fibers is SpTTM's mode-n fiber matrix, whose rows are Y's; nil for
	// MTTKRP.
	Fibers *formats.FiberMatrix `json:"-"`
	// Split is the mapper's plan: which slices each side was dealt and
	// its predicted times. For dynamic it is the simulated outcome; the
	// devices' reports say what they actually pulled.
	Split *hetero.Split `json:"-"`
	// Strategy is the split that ran (cpu when there is no accelerator).
	Strategy hetero.Strategy `json:"split"`
	// Devices reports each device: the CPU first, then the accelerator.
	Devices []DeviceReport `json:"devices"`
	// Imbalance is |t_c − t_g| / max(t_c, t_g) over the devices' Seconds;
	// 0 when only one device had work.
	Imbalance float64 `json:"imbalance"`
	// Seconds is the whole call; RunSeconds its run phase (conversion,
	// setup, kernels and gather on both sides, after the split);
	// PrepareSeconds the slicing and the split, PredictSeconds the format
	// choice (summary, cache, predictor).
	Seconds        float64 `json:"seconds"`
	RunSeconds     float64 `json:"run_seconds"`
	PrepareSeconds float64 `json:"prepare_seconds"`
	PredictSeconds float64 `json:"predict_seconds"`
	// Flops is the op's work by sparsetune's convention (SpTTM 2·nnz·R,
	// MTTKRP N·nnz·R) and GFlops Flops / RunSeconds / 10⁹.
	Flops  float64 `json:"flops"`
	GFlops float64 `json:"gflops"`
	// FormatSource is how the formats were chosen: forced, cached or
	// predicted, or the devices' sources joined by "+" when they differ.
	FormatSource string `json:"format_source"`
	// Warnings say what did not go as asked: a failed accelerator, a
	// format a device could not run, a prediction outside its training
	// range.
	Warnings []string `json:"warnings,omitempty"`
}

// Verify returns ‖Y − Y_ref‖_F / ‖Y_ref‖_F (‖Y‖_F where Y_ref is zero),
// Y_ref being the op by its definition (kernels.MTTKRPReference,
// kernels.SpTTMReference) for x, the tensor r was computed from, and the
// operands it was computed with, accumulated in float64 on one core. It
// checks whatever devices and formats computed r: float32 accumulation
// in another order keeps it near 1e-7–1e-5, where a lost slice or a
// wrong index makes it of order 1.
func (r *Result) Verify(x *formats.COO, operands []*kernels.Matrix) (float64, error) {
	if r.Y == nil {
		return 0, errors.New("verify: the result has no output")
	}
	var want []float64
	var err error
	switch {
	case r.Op == hetero.SpTTM && len(operands) == 1 && r.Fibers != nil:
		want, err = kernels.SpTTMReference(r.Fibers, operands[0])
	case r.Op == hetero.SpTTM:
		return 0, fmt.Errorf("verify: an SpTTM result needs its fiber matrix and one operand, found %d", len(operands))
	default:
		want, err = kernels.MTTKRPReference(x, r.Mode, operands)
	}
	if err != nil {
		return 0, fmt.Errorf("verify: %w", err)
	}
	got := r.Y.Data
	if len(got) != len(want) {
		return 0, fmt.Errorf("verify: the result has %d entries, the definition %d", len(got), len(want))
	}
	var num, den float64
	for i, w := range want {
		d := float64(got[i]) - w
		num += d * d
		den += w * w
	}
	if den == 0 {
		return math.Sqrt(num), nil
	}
	return math.Sqrt(num / den), nil
}

// SemiSparse returns SpTTM's result as a sparse tensor: the dims of the
// input with mode Mode replaced by Rank, one entry per output fiber and
// rank index (zeros included: the fibers are dense). It is an error for
// an MTTKRP result.
func (r *Result) SemiSparse() (*formats.COO, error) {
	if r.Fibers == nil {
		return nil, errors.New("semi-sparse result: only an SpTTM result has one")
	}
	dims := slices.Clone(r.Dims)
	dims[r.Mode] = r.Rank
	rows := r.Fibers.Rows()
	t, err := formats.NewCOO(dims, rows*r.Rank)
	if err != nil {
		return nil, fmt.Errorf("semi-sparse result: %w", err)
	}
	idx := make([]uint32, len(dims))
	for row := range rows {
		for j, m := range r.Fibers.FiberModes {
			idx[m] = r.Fibers.FiberInds[j][row]
		}
		for k, v := range r.Y.Row(row) {
			idx[r.Mode] = uint32(k)
			t.Append(idx, v)
		}
	}
	return t, nil
}

// binder is what a plan needs of one operation: how to turn slices into
// a bound job on a device, and where a run's rows go.
type binder interface {
	// bind converts the slices ids (each once) into the named format
	// and binds them on d. The job reads the plan's operand matrices
	// and its gather writes into the output set by setOut.
	bind(d hetero.Device, ids []int, format string) (*bound, error)
	// setOut makes out the run's output: the matrix the gathers write
	// into and a whole piece's job writes directly; rows no piece writes
	// are zeroed.
	setOut(out *kernels.Matrix)
}

// bound is a chunk of slices ready to run on a device, as often as asked.
type bound struct {
	job hetero.Job
	// gather copies the job's output into the current output's rows,
	// which no other chunk writes.
	gather func()
	// format is what was built: the one asked for, or hyb for an ell
	// too padded to build.
	format         string
	convert, setup time.Duration
	formatFallback string // why format differs from the one asked for
}

// collector gathers warnings from the sides' goroutines, each once.
type collector struct {
	mu   sync.Mutex
	list []string
}

func (c *collector) add(w string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.list, w) {
		c.list = append(c.list, w)
	}
}

// oneLine folds an error message onto one line, for a report field.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
