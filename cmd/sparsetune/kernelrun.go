package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/engine"
	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/atomicfile"
	"github.com/sparsetune/sparsetune/internal/npy"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/model"
)

// This file holds what ttm and mttkrp share: their flags, the devices and
// profile, the dense operands, the run through package engine, the report
// and the output file.

// kernelConfig is a kernel command's settings.
type kernelConfig struct {
	op      hetero.Op
	mode    int // 1-based
	rank    int
	devices []string
	// allDevices: --devices was all (the default), so accelerators that
	// run on the host's own cores are left out (see engineFor).
	allDevices bool
	format     string // "" for auto
	split      hetero.Strategy
	seed       uint64
	out        string
	threads    int
	asJSON     bool
	// repeat is --repeat: runs of one plan, the median's times reported.
	repeat int
	// verify is --verify: the result is checked against the definition.
	verify bool
}

// addKernelFlags adds the flags ttm and mttkrp share, bound to viper under
// the command's name (so sparsetune.yaml can set ttm.rank).
func addKernelFlags(cmd *cobra.Command, v *viper.Viper, op hetero.Op) {
	f := cmd.Flags()
	f.Int("mode", 1, "mode n (1-based)")
	f.Int("rank", 16, "rank R: columns of the dense operands")
	f.String("devices", "all", "comma-separated devices (cpu, opencl:0, cuda:0), or all that sparsetune devices lists")
	f.String("format", "auto", "storage format on every device, or auto (cached measurement, else predicted per device): "+strings.Join(op.Formats(), ", "))
	f.String("split", "peak", "how the slices are split between the CPU and the accelerator: "+strings.Join(hetero.Strategies(), ", "))
	f.Uint64("seed", 1, "seed of the dense operands (the same for every split and device)")
	f.Int("repeat", 1, "plan once, run K times and report the median run's times (warm load balance), the plan's setup once")
	f.Bool("verify", false, fmt.Sprintf("check the result against the definition computed on the CPU in float64 (one nonzero at a time, one core); fail when the relative error is above %.0e", verifyTolerance))
	outHelp := "write Y, the semi-sparse result (mode n indexes the rank), as a sparse tensor file (.tns, .stb, optionally .gz)"
	if op == hetero.MTTKRP {
		outHelp = "write M (Dims[n] x R) as .npy (float32, C order) or .mtx (MatrixMarket array)"
	}
	f.String("out", "", outHelp)
	for _, name := range []string{"mode", "rank", "devices", "format", "split", "seed", "out", "repeat", "verify"} {
		_ = v.BindPFlag(op.String()+"."+name, f.Lookup(name))
	}
}

func kernelConfigFrom(v *viper.Viper, op hetero.Op, args []string) (kernelConfig, error) {
	name := op.String()
	c := kernelConfig{op: op, mode: v.GetInt(name + ".mode"), rank: v.GetInt(name + ".rank"), seed: v.GetUint64(name + ".seed"),
		out: v.GetString(name + ".out"), threads: v.GetInt("threads"), asJSON: v.GetBool("json"), repeat: v.GetInt(name + ".repeat"),
		verify: v.GetBool(name + ".verify")}
	if c.repeat < 1 {
		return c, fmt.Errorf("--repeat: expected at least 1 run, found %d", c.repeat)
	}
	if c.mode < 1 {
		return c, fmt.Errorf("--mode: expected a 1-based mode, found %d", c.mode)
	}
	if c.rank < 1 {
		return c, fmt.Errorf("--rank: expected at least 1, found %d", c.rank)
	}
	switch f := v.GetString(name + ".format"); {
	case f == "auto" || f == "":
	case slices.Contains(op.Formats(), f):
		c.format = f
	default:
		return c, fmt.Errorf("--format: %s runs in auto, %s; found %q", op, strings.Join(op.Formats(), ", "), f)
	}
	var err error
	if c.split, err = hetero.ParseStrategy(v.GetString(name + ".split")); err != nil {
		return c, fmt.Errorf("--split: %w", err)
	}
	if err := checkDeviceList(v.GetString(name + ".devices")); err != nil {
		return c, err
	}
	c.devices, c.allDevices = parseDevices(v.GetString(name + ".devices"))
	if c.out != "" {
		if err := checkOut(op, c.out); err != nil {
			return c, fmt.Errorf("--out: %w", err)
		}
		if err := checkOutPath("--out", c.out, args...); err != nil {
			return c, err
		}
	}
	return c, nil
}

// parseDevices reads a --devices list: names separated by commas, each
// once, or "all" (and "") for every device sparsetune devices lists, which
// it reports.
func parseDevices(s string) (out []string, all bool) {
	switch d := strings.TrimSpace(s); d {
	case "all", "":
		return hetero.Available(), true
	default:
		for _, name := range strings.Split(d, ",") {
			if name = strings.TrimSpace(name); name != "" && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out, false
}

// checkDeviceList refuses a --devices value that names no device, such as
// ",", which parseDevices would read as an empty list.
func checkDeviceList(s string) error {
	if d := strings.TrimSpace(s); d != "" && strings.Trim(d, ", \t") == "" {
		return fmt.Errorf("--devices %q names no device: expected cpu, BACKEND:INDEX (opencl:0, cuda:0) or all, comma-separated", s)
	}
	return nil
}

// checkOut refuses an output path of the wrong kind before anything runs.
func checkOut(op hetero.Op, path string) error {
	if op == hetero.MTTKRP {
		switch strings.ToLower(filepath.Ext(path)) {
		case ".npy", ".mtx":
			return nil
		}
		return fmt.Errorf("%s: expected a .npy or .mtx file for the MTTKRP matrix", path)
	}
	_, _, err := formats.FormatOf(path)
	return err
}

// operand returns the dense operand of mode m: Dims[m] x R, entries in
// [-1, 1) from a PCG seeded with (seed, m). It depends on nothing else, so
// every split and device, and ttm and mttkrp, get the same matrices.
func operand(seed uint64, m, rows, rank int) *kernels.Matrix {
	rng := rand.New(rand.NewPCG(seed, uint64(m)))
	a := kernels.NewMatrix(rows, rank)
	for i := range a.Data {
		a.Data[i] = 2*rng.Float32() - 1
	}
	return a
}

// kernelReport is what ttm and mttkrp print with --json.
type kernelReport struct {
	Op              string                `json:"op"`
	File            string                `json:"file"`
	Dims            []int                 `json:"dims"`
	NNZ             int                   `json:"nnz"`
	Mode            int                   `json:"mode"` // 1-based
	Rank            int                   `json:"rank"`
	Seed            uint64                `json:"seed"`
	Split           string                `json:"split"`
	FormatSource    string                `json:"format_source"`
	Devices         []engine.DeviceReport `json:"devices"`
	Imbalance       float64               `json:"imbalance"`
	Seconds         float64               `json:"seconds"`
	RunSeconds      float64               `json:"run_seconds"`
	PrepareSeconds  float64               `json:"prepare_seconds"`
	PredictSeconds  float64               `json:"predict_seconds"`
	ReadSeconds     float64               `json:"read_seconds"`
	Flops           float64               `json:"flops"`
	GFlops          float64               `json:"gflops"`
	FlopsConvention string                `json:"flops_convention"`
	Out             string                `json:"out,omitempty"`
	Warnings        []string              `json:"warnings,omitempty"`
	// With --repeat K > 1: the runs of one plan. Devices, imbalance,
	// run_seconds and gflops are the median run's (a device's convert and
	// setup are the plan's, paid once), bind_seconds the plan's
	// conversion and binding, runs_seconds every run's time.
	Repeat      int       `json:"repeat,omitempty"`
	BindSeconds float64   `json:"bind_seconds,omitempty"`
	RunsSeconds []float64 `json:"runs_seconds,omitempty"`
	// With --verify: ‖Y − Y_ref‖ / ‖Y_ref‖ (Frobenius) against the
	// definition in float64 (‖Y‖ where Y_ref is zero), and the most it
	// may be.
	VerifyError     *float64 `json:"verify_error,omitempty"`
	VerifyTolerance float64  `json:"verify_tolerance,omitempty"`
}

// verifyTolerance is the most relative error --verify accepts: what
// float32 accumulation in another order costs, as the kernels' and the
// engine's tests allow, and far below what a wrong index or a lost slice
// gives (an error of order 1).
const verifyTolerance = 1e-4

// newKernelCmd builds ttm or mttkrp.
func newKernelCmd(v *viper.Viper, op hetero.Op, use, short, long string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  optionalArg("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kernelConfigFrom(v, op, args)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runKernel(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), v, args, c)
		},
	}
	addKernelFlags(cmd, v, op)
	return cmd
}

// engineFor opens the devices and builds the engine. The split needs the
// devices' profiles when an accelerator shares the work: a missing one is
// calibrated once (hetero.ProfileFor), the config's overrides applied;
// when that fails the run goes on on the CPU alone, with a warning.
// The engine predicts formats with pred.
func engineFor(stderr io.Writer, v *viper.Viper, c kernelConfig, progress func(done, total int64), pred model.SummaryPredictor) (*engine.Engine, []string, error) {
	var devs []hetero.Device
	var warnings []string
	hasAcc := false
	for _, name := range c.devices {
		d, err := hetero.Lookup(name, c.threads)
		if err != nil {
			return nil, nil, fmt.Errorf("--devices: %w", err)
		}
		if info := d.Info(); c.allDevices && info.Kind != hetero.CPU && info.Type == "cpu" {
			// An OpenCL device on the host's own cores (PoCL) is no
			// accelerator beside the CPU device: a split only makes the
			// two compete for the same cores (docs/hetero.md measures it
			// slower than the CPU alone). Used only when named.
			fmt.Fprintf(stderr, "%s (%s) runs on this machine's own cores: left out of --devices all; name it (--devices cpu,%s) to split with it anyway\n", info.Name, info.Model, info.Name)
			continue
		}
		hasAcc = hasAcc || d.Info().Kind != hetero.CPU
		// An accelerator is shared by the whole process: a budget another
		// command set (bench --device-memory) must not carry over.
		if b, ok := d.(interface{ SetMemoryBudget(int64) }); ok {
			b.SetMemoryBudget(0)
		}
		devs = append(devs, d)
	}
	if !hasAcc && c.split == hetero.SplitAcc {
		warnings = append(warnings, "--split acc: no accelerator among the devices: the CPU runs it all")
	}
	opts := engine.Options{Split: c.split, Format: c.format, Progress: progress, Predictor: pred}
	if dec, err := model.DefaultDecisions(); err == nil {
		opts.Decisions = dec
	}
	if hasAcc && c.split != hetero.SplitCPU && c.split != hetero.SplitAcc {
		// Say why the first run on a machine takes a few seconds more.
		stored, err := hetero.LoadProfile("")
		// calibrates: ProfileFor goes on, measuring what is missing.
		calibrates := err == nil || hetero.ProfileReplaceable(err)
		if err != nil && calibrates && !errors.Is(err, fs.ErrNotExist) {
			// ProfileFor measures again and replaces it: say why.
			fmt.Fprintf(stderr, "replacing the stored profile: %s\n", oneLine(err))
		}
		var missing []string
		for _, d := range devs {
			if dp, ok := stored.Device(d.Info().Name); !ok || !dp.Matches(d.Info()) {
				missing = append(missing, d.Info().Name)
			}
		}
		if len(missing) > 0 && calibrates {
			fmt.Fprintf(stderr, "calibrating %s once for the split (sparsetune calibrate measures in full)...\n", strings.Join(missing, ", "))
		}
		p, err := hetero.ProfileFor(devs, true)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("no device profile (%s): running on the CPU alone", oneLine(err)))
			devs = slices.DeleteFunc(devs, func(d hetero.Device) bool { return d.Info().Kind != hetero.CPU })
		} else if err := p.ApplyOverrides(profileSettings(v)); err != nil {
			return nil, nil, err
		}
		opts.Profile = p
	}
	e, err := engine.New(devs, opts)
	return e, warnings, err
}

func runKernel(ctx context.Context, stdout, stderr io.Writer, v *viper.Viper, args []string, c kernelConfig) error {
	// Unless the format is forced, the engine chooses it from a summary
	// of the tensor: the reader picks the summary's sample as it reads,
	// and the model loads meanwhile.
	pred := defaultPredictor(stderr, c.op)
	if c.format == "" {
		pred.preload(c.rank)
	}
	name, x, picks, read, err := loadTensorPicked(stderr, args, c.format == "")
	if err != nil {
		return err
	}
	if c.mode > x.Order() {
		return fmt.Errorf("--mode: %s has modes 1 to %d, found %d", name, x.Order(), c.mode)
	}
	mode := c.mode - 1
	if c.op == hetero.SpTTM && c.out != "" {
		// Y has the tensor's order: a .mtx holds it only for a matrix.
		if format, _, _ := formats.FormatOf(c.out); format == formats.MatrixMarket && x.Order() != 2 {
			return fmt.Errorf("--out %s: MatrixMarket holds matrices, the semi-sparse result of %s has order %d: use .tns or .stb", c.out, name, x.Order())
		}
	}
	prog := newProgress(stderr, fmt.Sprintf("%s mode %d", c.op, c.mode))
	defer prog.stop()
	e, warnings, err := engineFor(stderr, v, c, prog.update, pred)
	if err != nil {
		return err
	}
	e.UsePicks(x, picks)
	// The dense operands, and MTTKRP's output, are Dims[m] x R whatever
	// the nonzeros: refuse a tensor whose dims would not fit before
	// allocating them ends the process.
	if err := kernels.CheckDenseFits(x, fmt.Sprintf("%s: the random operands of %s", name, c.op), hetero.DenseShapes(c.op, x.Dims, mode, c.rank)...); err != nil {
		return err
	}
	var operands []*kernels.Matrix
	if c.op == hetero.SpTTM {
		operands = []*kernels.Matrix{operand(c.seed, mode, x.Dims[mode], c.rank)}
	} else {
		operands = make([]*kernels.Matrix, x.Order())
		for m, d := range x.Dims {
			if m != mode {
				operands[m] = operand(c.seed, m, d, c.rank)
			}
		}
	}
	var res *engine.Result
	var rr *repeated
	switch {
	case c.repeat > 1:
		rr, err = runRepeated(ctx, e, c, x, mode, operands)
		if err == nil {
			res = rr.median
		}
	case c.op == hetero.SpTTM:
		res, err = e.TTM(ctx, x, mode, operands[0])
	default:
		res, err = e.MTTKRP(ctx, x, mode, operands)
	}
	prog.stop()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: interrupted, nothing written", name)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	if c.out != "" {
		if err := writeKernelOut(c, name, res); err != nil {
			return err
		}
	}
	rep := kernelReport{Op: c.op.String(), File: name, Dims: x.Dims, NNZ: x.NNZ(), Mode: c.mode, Rank: c.rank, Seed: c.seed,
		Split: res.Strategy.String(), FormatSource: res.FormatSource, Devices: res.Devices, Imbalance: res.Imbalance,
		Seconds: res.Seconds, RunSeconds: res.RunSeconds, PrepareSeconds: res.PrepareSeconds, PredictSeconds: res.PredictSeconds,
		ReadSeconds: read.Seconds(), Flops: res.Flops, GFlops: res.GFlops, Out: c.out, Warnings: append(warnings, res.Warnings...)}
	if rr != nil {
		rep.Repeat, rep.BindSeconds, rep.RunsSeconds = c.repeat, rr.bind, rr.runs
	}
	if c.verify {
		if c.repeat > 1 {
			// The runs shared one output: it holds the last run's result.
			fmt.Fprintf(stderr, "verifying the last of the %d runs against the definition...\n", c.repeat)
		} else {
			fmt.Fprintln(stderr, "verifying against the definition...")
		}
		e, err := res.Verify(x, operands)
		if err != nil {
			return fmt.Errorf("--verify: %w", err)
		}
		rep.VerifyError, rep.VerifyTolerance = &e, verifyTolerance
	}
	rep.FlopsConvention = "2·nnz·R"
	if c.op == hetero.MTTKRP {
		rep.FlopsConvention = "N·nnz·R"
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if c.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = printKernelReport(stdout, &rep)
	}
	if err != nil {
		return err
	}
	return rep.verifyFailure()
}

// verified reports whether a --verify's relative error is within the
// tolerance (false for NaN).
func (r *kernelReport) verified() bool { return *r.VerifyError <= r.VerifyTolerance }

// verifyFailure returns the error of a --verify whose relative error is
// above the tolerance (or NaN), naming the devices that computed the
// result; nil when there was no check or it passed.
func (r *kernelReport) verifyFailure() error {
	if r.VerifyError == nil || r.verified() {
		return nil
	}
	var devs []string
	for _, d := range r.Devices {
		if d.NNZShare > 0 {
			devs = append(devs, d.Device+" ("+cmp.Or(d.Format, "-")+")")
		}
	}
	return fmt.Errorf("%s: --verify: the result differs from the definition: relative error %.3g, above %.0e (computed on %s)", r.File, *r.VerifyError, r.VerifyTolerance, strings.Join(devs, ", "))
}

func printKernelReport(w io.Writer, r *kernelReport) error {
	fmt.Fprintf(w, "%s of %s (%s, %d nonzeros), mode %d, rank %d, seed %d: split %s, formats %s\n",
		r.Op, r.File, formats.FormatDims(r.Dims), r.NNZ, r.Mode, r.Rank, r.Seed, r.Split, r.FormatSource)
	// Times in milliseconds: a sample-sized run takes a few.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "device\tformat\tnnz share\tconvert ms\tsetup ms\th2d ms\tkernel ms\td2h ms\tms\tpredicted ms\t")
	ms := func(s float64) string { return strconv.FormatFloat(s*1e3, 'f', 3, 64) }
	for _, d := range r.Devices {
		total := ms(d.Seconds)
		if d.FallbackSeconds > 0 {
			total += " (" + ms(d.FallbackSeconds) + " redoing)"
		}
		if d.Failed != "" {
			total += " failed"
		}
		format := d.Format
		if format == "" {
			format = "-" // dealt nothing, so never chosen
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", d.Device, format, d.NNZShare,
			ms(d.ConvertSeconds), ms(d.SetupSeconds), ms(d.H2DSeconds), ms(d.KernelSeconds), ms(d.D2HSeconds), total, ms(d.PredictedSeconds))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Repeat > 1 {
		lo, hi := slices.Min(r.RunsSeconds), slices.Max(r.RunsSeconds)
		fmt.Fprintf(w, "%d runs of one plan: the median run shown (runs %s to %s ms); convert and setup paid once, binding %s ms\n",
			r.Repeat, ms(lo), ms(hi), ms(r.BindSeconds))
	}
	fmt.Fprintf(w, "imbalance %.3f; %s ms in all (run %s, prepare %s, predict %s; read %s); %.3f GFLOP/s over the run (flops %s)\n",
		r.Imbalance, ms(r.Seconds), ms(r.RunSeconds), ms(r.PrepareSeconds), ms(r.PredictSeconds), ms(r.ReadSeconds), r.GFlops, r.FlopsConvention)
	if r.VerifyError != nil {
		verdict := "within"
		if !r.verified() {
			verdict = "ABOVE"
		}
		fmt.Fprintf(w, "verified against the definition (float64): relative error %.3g, %s the tolerance %.0e\n", *r.VerifyError, verdict, r.VerifyTolerance)
	}
	if r.Out != "" {
		_, err := fmt.Fprintf(w, "wrote %s\n", r.Out)
		return err
	}
	return nil
}

// repeated is what --repeat K ran: the median run, with the plan's
// conversion and setup in its devices' reports, every run's seconds and
// the plan's binding time.
type repeated struct {
	median *engine.Result
	runs   []float64
	bind   float64
}

// runRepeated plans the op once and runs it c.repeat times with the same
// operands, all into one output, so the runs after the first show the
// warm balance: nothing converted, nothing uploaded but the operands.
func runRepeated(ctx context.Context, e *engine.Engine, c kernelConfig, x *formats.COO, mode int, operands []*kernels.Matrix) (*repeated, error) {
	start := time.Now()
	var p *engine.Plan
	var err error
	if c.op == hetero.SpTTM {
		p, err = e.PlanTTM(ctx, x, mode, c.rank)
	} else {
		p, err = e.PlanMTTKRP(ctx, x, mode, c.rank)
	}
	if err != nil {
		return nil, err
	}
	defer p.Close()
	rows, cols := p.OutputShape()
	out := kernels.NewMatrix(rows, cols)
	results := make([]*engine.Result, 0, c.repeat)
	rr := &repeated{}
	for range c.repeat {
		res, err := p.Run(ctx, operands, out)
		if err != nil {
			return nil, err
		}
		results = append(results, res)
		rr.runs = append(rr.runs, res.Seconds)
	}
	// The median run by its time: the lower middle one for an even K, so
	// the run reported is one that happened.
	order := make([]int, len(results))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(results[a].Seconds, results[b].Seconds) })
	med := *results[order[(len(order)-1)/2]]
	med.Y = out
	plan := p.Report()
	med.Devices = slices.Clone(med.Devices)
	for i := range med.Devices {
		med.Devices[i].ConvertSeconds += plan.Devices[i].ConvertSeconds
		med.Devices[i].SetupSeconds += plan.Devices[i].SetupSeconds
	}
	med.PrepareSeconds, med.PredictSeconds = plan.PrepareSeconds, plan.PredictSeconds
	// Warnings of any run: a failure in one is kept for the rest.
	seen := map[string]bool{}
	med.Warnings = nil
	for _, r := range results {
		for _, w := range r.Warnings {
			if !seen[w] {
				seen[w] = true
				med.Warnings = append(med.Warnings, w)
			}
		}
	}
	med.Seconds = time.Since(start).Seconds()
	rr.median, rr.bind = &med, plan.BindSeconds
	return rr, nil
}

// writeKernelOut writes the result to c.out through a temporary file and
// a rename, so an interrupted or failed write leaves no partial file.
func writeKernelOut(c kernelConfig, name string, res *engine.Result) error {
	if c.op == hetero.SpTTM {
		y, err := res.SemiSparse()
		if err != nil {
			return err
		}
		if err := formats.WriteFile(c.out, y); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		return nil
	}
	m := res.Y
	if strings.EqualFold(filepath.Ext(c.out), ".npy") {
		if err := npy.WriteFile(c.out, []int{m.Rows, m.Cols}, m.Data); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		return nil
	}
	err := atomicfile.Write(c.out, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		// MatrixMarket's array format: a header, the size, then the
		// values column by column.
		fmt.Fprintln(w, "%%MatrixMarket matrix array real general")
		fmt.Fprintf(w, "%% MTTKRP of %s, mode %d, rank %d, operands from seed %d (sparsetune mttkrp)\n", name, c.mode, c.rank, c.seed)
		fmt.Fprintf(w, "%d %d\n", m.Rows, m.Cols)
		var buf []byte
		for j := range m.Cols {
			for i := range m.Rows {
				buf = strconv.AppendFloat(buf[:0], float64(m.At(i, j)), 'g', -1, 32)
				buf = append(buf, '\n')
				w.Write(buf)
			}
		}
		return w.Flush()
	})
	if err != nil {
		return fmt.Errorf("--out %s: %w", c.out, err)
	}
	return nil
}

// progress shows one line on a terminal while a run takes over a second:
// the share of nonzeros done and the time so far.
type progress struct {
	w       io.Writer
	what    string
	done    atomic.Int64
	total   atomic.Int64
	quit    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

func newProgress(w io.Writer, what string) *progress {
	p := &progress{w: w, what: what, quit: make(chan struct{})}
	if !isTerminal(w) {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		start := time.Now()
		shown := false
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.quit:
				if shown {
					fmt.Fprint(p.w, "\r\033[K") // leave the terminal as it was
				}
				return
			case <-tick.C:
				if el := time.Since(start); el >= time.Second {
					pct := 0.0
					if t := p.total.Load(); t > 0 {
						pct = 100 * float64(p.done.Load()) / float64(t)
					}
					fmt.Fprintf(p.w, "\r\033[K%s: %.0f%% of the nonzeros done, %.1fs", p.what, pct, el.Seconds())
					shown = true
				}
			}
		}
	}()
	return p
}

// update is the engine's progress callback.
func (p *progress) update(done, total int64) {
	p.done.Store(done)
	p.total.Store(total)
}

// stop ends the line; it may be called more than once.
func (p *progress) stop() {
	p.stopped.Do(func() { close(p.quit) })
	p.wg.Wait()
}

// defaultPredictor is the predictor the engine uses for op when the format
// is auto: the default GCN (the user's from tune-model, else the embedded
// one), which a device of a class it has no head for answers by
// measurement; the hand rule when there is no model for op. The model is
// loaded on the first prediction, or in the background from preload: a
// single MTTKRP on the CPU makes none (engine.SourceOneRun).
func defaultPredictor(stderr io.Writer, op hetero.Op) *lazyPredictor {
	return &lazyPredictor{stderr: stderr, load: func() (model.SummaryPredictor, string) {
		m, err := model.DefaultModel(op)
		if err != nil {
			return model.RulePredictor{}, fmt.Sprintf("note: %v: formats come from the hand rule", err)
		}
		return model.GCNPredictor{Model: m}, ""
	}}
}

// lazyPredictor is the predictor load returns, made on first use. It
// answers every interface the engine asks of a predictor as that one does.
type lazyPredictor struct {
	// load makes the predictor and a note for stderr (the model that
	// could not be loaded), which the first prediction prints: preload
	// loads in the background, where writing to the caller's stderr
	// would race with the caller.
	load   func() (model.SummaryPredictor, string)
	stderr io.Writer

	once  sync.Once
	p     model.SummaryPredictor
	note  string
	noted sync.Once
}

// made returns the predictor, loading it first.
func (l *lazyPredictor) made() model.SummaryPredictor {
	l.once.Do(func() { l.p, l.note = l.load() })
	return l.p
}

// get returns the predictor for a prediction: made, and its note
// printed once.
func (l *lazyPredictor) get() model.SummaryPredictor {
	p := l.made()
	l.noted.Do(func() {
		if l.note != "" {
			fmt.Fprintln(l.stderr, l.note)
		}
	})
	return p
}

// preload loads the predictor in the background, and what the CPU's
// predictions at rank need of a model (GCNPredictor.Load): a one-shot
// command starts it before it reads the tensor, which takes far longer,
// so that its first decision does not wait for the model. The embedded
// MTTKRP model's load took 0.3-0.9 ms of the first decision on the VMs
// of docs/model.md ("The model's load in one-shot commands"), against a
// kernel of about 1 ms on a tensor of 1.5 M nonzeros. An error is left
// to the prediction that meets it.
func (l *lazyPredictor) preload(rank int) {
	go func() {
		if g, ok := l.made().(model.GCNPredictor); ok {
			g.Rank = rank
			_ = g.Load(hetero.NewCPU(0).Info())
		}
	}()
}

func (l *lazyPredictor) Predict(x *formats.COO, op hetero.Op, mode int, kind hetero.Kind) (*model.Prediction, error) {
	return l.get().Predict(x, op, mode, kind)
}

func (l *lazyPredictor) PredictSummary(s *features.Summary, op hetero.Op, mode int, kind hetero.Kind) (*model.Prediction, error) {
	return l.get().PredictSummary(s, op, mode, kind)
}

func (l *lazyPredictor) PredictDevice(s *features.Summary, op hetero.Op, mode int, dev hetero.Info) (*model.Prediction, error) {
	return model.PredictOn(l.get(), s, op, mode, dev)
}

// AtRank loads the predictor and returns its own for rank
// (model.AtRank): the engine asks only when it is about to predict.
func (l *lazyPredictor) AtRank(rank int) model.SummaryPredictor {
	return model.AtRank(l.get(), rank)
}

func (l *lazyPredictor) PredictWithoutSummary(op hetero.Op, mode int, dev hetero.Info) (*model.Prediction, bool) {
	if sf, ok := l.get().(model.SummaryFreePredictor); ok {
		return sf.PredictWithoutSummary(op, mode, dev)
	}
	return nil, false
}
