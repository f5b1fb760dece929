package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/decomp"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/npy"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/mpi"
)

func init() { register(newCPDCmd) }

func newCPDCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cpd FILE --rank R [--iters K] [--tol T] [--seed S] [--init random|hosvd] [--format auto|alto|csf|coo|hicoo] [--devices cpu,opencl:0] [--split peak|dynamic|random|cpu|acc] [--line-search] [--out PREFIX]",
		Short: "CP decomposition by alternating least squares (CP-ALS)",
		Long: `Compute a rank-R CP decomposition X ≈ Σ_r λ_r a_1r ∘ … ∘ a_Nr of a sparse
tensor of order 3 or more by alternating least squares.

Each iteration runs one MTTKRP per mode in --format (ALTO by default: one
copy of the tensor serves every mode; csf and coo keep one copy per mode),
converted once before the first iteration, and solves with the Gram
matrices. It stops when the fit changes by less than --tol or after
--iters iterations. A progress line per iteration goes to stderr.

With --devices, --split or --format auto the MTTKRPs run through the
engine, as ttm and mttkrp do: one plan per mode, made before the first
iteration, picks each device's format (--format auto, the default there:
a measured decision cached for this tensor, else the default model's
prediction; or the one format named), splits the mode's slices between the CPU and
an accelerator (--split, peak by default) and converts and uploads them
once; every iteration then runs both devices at once. --devices defaults
to the CPU alone (all: every device sparsetune devices lists). The
summary gives each mode's split and per-device formats.

--out PREFIX writes the factors as NumPy float32 arrays, PREFIX.mode1.npy
… (Dims[n] x R, C order, unit-norm columns), and the weights as
PREFIX.lambda.npy. docs/decomp.md describes the algorithm.`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := decompConfigFrom(v, "cpd", cmd)
			if err != nil {
				return err
			}
			if err := checkRank(cmd, c.rank); err != nil {
				return err
			}
			switch f := v.GetString("cpd.format"); f {
			case "auto":
				c.formatAuto = true
			default:
				if c.formats, err = mttkrpFormats(f); err != nil {
					return err
				}
			}
			if s := v.GetString("cpd.split"); s != "" {
				if c.split, err = hetero.ParseStrategy(s); err != nil {
					return fmt.Errorf("--split: %w", err)
				}
			}
			if c.onEngine() && len(c.formats) > 1 {
				return fmt.Errorf("--format %s: with --devices, --split or auto the engine takes one format for every mode, or auto", v.GetString("cpd.format"))
			}
			return runCPD(cmd, v, args[0], c)
		},
	}
	f := cmd.Flags()
	f.Int("rank", 0, "rank R: number of components (required)")
	addDecompFlags(cmd, v, "cpd", "random")
	f.String("format", "", "MTTKRP format: alto, csf, coo or hicoo, or one per mode, comma-separated; auto: chosen per mode and device by the engine (default: alto on the CPU, auto with --devices or --split)")
	f.String("split", "", "run through the engine, splitting each mode's slices between the devices: "+strings.Join(hetero.Strategies(), ", ")+" (default peak with --devices)")
	f.Bool("line-search", false, "extrapolate the factors after each sweep, kept when the fit does not drop")
	for _, name := range []string{"rank", "format", "split", "line-search"} {
		_ = v.BindPFlag("cpd."+name, f.Lookup(name))
	}
	return cmd
}

// decompConfig holds the flags the decomposition commands share.
type decompConfig struct {
	rank       int
	iters      int
	tol        float64
	seed       uint64
	init       string
	formats    []string
	lineSearch bool
	out        string
	resume     string
	threads    int
	asJSON     bool
	// devices is --devices as given ("" when not); split and formatAuto
	// are cpd's --split and --format auto. Any of them sends CP-ALS's
	// MTTKRPs through the engine.
	devices    string
	split      hetero.Strategy
	formatAuto bool
}

// onEngine says whether the decomposition's kernels run through the
// engine's plans rather than the default CPU kernels.
func (c decompConfig) onEngine() bool { return c.devices != "" || c.split != 0 || c.formatAuto }

// engineDevices returns the devices --devices names: the CPU alone when
// it is not given (a decomposition stays on the host unless told), every
// device listed for "all".
func (c decompConfig) engineDevices() []string {
	if c.devices == "" {
		return []string{"cpu"}
	}
	devices, _ := parseDevices(c.devices)
	return devices
}

// initName is the initialisation as reported: --init, or where --resume
// replaced it, "resume".
func (c decompConfig) initName() string {
	if c.resume != "" {
		return "resume"
	}
	return c.init
}

// addDecompFlags adds the flags every decomposition command has, bound to
// viper under the command's name (so sparsetune.yaml can set cpd.iters).
func addDecompFlags(cmd *cobra.Command, v *viper.Viper, name, defaultInit string) {
	f := cmd.Flags()
	f.Int("iters", decomp.DefaultIters, "largest number of iterations")
	f.Float64("tol", 1e-4, "stop when the change per iteration falls below this (0: run all iterations)")
	f.Uint64("seed", 1, "seed of the random initialisation")
	f.String("init", defaultInit, "initialisation: random or hosvd")
	f.String("out", "", "write the model as PREFIX.*.npy (float32, C order)")
	f.String("resume", "", "start from the model an earlier --out PREFIX wrote (replaces --init)")
	devHelp := "comma-separated devices (cpu, opencl:0, cuda:0) or all, for the MTTKRPs through the engine (default: the CPU alone, without the engine)"
	if name == "tucker" {
		devHelp = "comma-separated devices (cpu, opencl:0, cuda:0) or all, for the TTM chains' SpTTMs through the engine (default: the CPU alone, without the engine)"
	} else if name == "cpapr" {
		devHelp = "comma-separated devices (cpu, opencl:0, cuda:0) or all: the first accelerator listed computes Φ, the CPU the updates (default: the CPU alone)"
	}
	f.String("devices", "", devHelp)
	for _, flag := range []string{"iters", "tol", "seed", "init", "out", "resume", "devices"} {
		_ = v.BindPFlag(name+"."+flag, f.Lookup(flag))
	}
}

func decompConfigFrom(v *viper.Viper, name string, cmd *cobra.Command) (decompConfig, error) {
	c := decompConfig{
		rank:       v.GetInt(name + ".rank"),
		iters:      v.GetInt(name + ".iters"),
		tol:        v.GetFloat64(name + ".tol"),
		seed:       v.GetUint64(name + ".seed"),
		init:       v.GetString(name + ".init"),
		lineSearch: v.GetBool(name + ".line-search"),
		out:        v.GetString(name + ".out"),
		resume:     v.GetString(name + ".resume"),
		threads:    v.GetInt("threads"),
		asJSON:     v.GetBool("json"),
		devices:    strings.TrimSpace(v.GetString(name + ".devices")),
	}
	if c.iters < 1 {
		return c, fmt.Errorf("--iters must be >= 1, found %d", c.iters)
	}
	if c.tol < 0 || math.IsNaN(c.tol) {
		return c, fmt.Errorf("--tol must be >= 0, found %v", c.tol)
	}
	if c.init != decomp.InitRandom && c.init != decomp.InitHOSVD {
		return c, fmt.Errorf("--init must be random or hosvd, found %q", c.init)
	}
	if err := checkDeviceList(c.devices); err != nil {
		return c, err
	}
	if c.out != "" {
		if err := checkOutPath("--out", c.out); err != nil {
			return c, err
		}
	}
	return c, nil
}

// checkRank checks cpd's and cpapr's rank, which has no default: how
// many components a model should have is the user's question.
func checkRank(cmd *cobra.Command, rank int) error {
	switch {
	case rank == 0 && !cmd.Flags().Changed("rank"):
		return fmt.Errorf("%s needs --rank R, the number of components", cmd.Name())
	case rank < 1:
		return fmt.Errorf("--rank must be >= 1, found %d", rank)
	}
	return nil
}

// mttkrpFormats parses cpd's and cpapr's --format: one MTTKRP format, or
// one per mode.
func mttkrpFormats(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	fs := strings.Split(s, ",")
	for _, f := range fs {
		if !slices.Contains(formats.TensorFormatNames, f) {
			return nil, fmt.Errorf("--format %q: each format must be one of %s", s, strings.Join(formats.TensorFormatNames, ", "))
		}
	}
	return fs, nil
}

// readForDecomp reads FILE for a decomposition, checks the per-mode
// --format list against its order, and reads the --resume factors: of a
// Tucker model of core dims tuckerRanks, or, where it is nil, of a CP
// model of rank c.rank. A single Tucker rank stands for every mode's:
// the core dims it returns have one per mode. It returns the time the
// read took.
func readForDecomp(stderr io.Writer, path string, c decompConfig, tuckerRanks []int) (*formats.COO, time.Duration, []*kernels.Matrix, []int, error) {
	start := time.Now()
	x, err := readTensor(stderr, path)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	read := time.Since(start)
	if len(c.formats) > 1 && len(c.formats) != x.Order() {
		return nil, 0, nil, nil, fmt.Errorf("--format lists %d formats for a tensor of order %d: give one, or one per mode", len(c.formats), x.Order())
	}
	if len(tuckerRanks) == 1 {
		tuckerRanks = slices.Repeat(tuckerRanks, x.Order())
	}
	// The factors' columns, and the flag that sets them.
	cols, flag := slices.Repeat([]int{c.rank}, x.Order()), fmt.Sprintf("--rank %d", c.rank)
	if tuckerRanks != nil {
		ranks := make([]string, len(tuckerRanks))
		for i, r := range tuckerRanks {
			ranks[i] = strconv.Itoa(r)
		}
		cols, flag = tuckerRanks, "--ranks "+strings.Join(ranks, ",")
	}
	init, err := resumeFactors(c.resume, x.Dims, cols, flag, tuckerRanks == nil)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	return x, read, init, tuckerRanks, nil
}

// finishDecomp writes the result's .npy files when --out is set and
// prints the report.
func finishDecomp(cmd *cobra.Command, rep *decompReport, res interface {
	WriteNPY(string) ([]string, error)
}, c decompConfig) error {
	if c.out != "" {
		var err error
		if rep.Files, err = writeDecompModel(cmd.ErrOrStderr(), c.out, res); err != nil {
			return err
		}
	}
	return printReport(cmd.OutOrStdout(), rep, c.asJSON)
}

// writeDecompModel writes res's .npy files at prefix and removes those an
// earlier model left there that this one has not (factors of more modes,
// the other method's weights or core), saying so on stderr: a prefix
// holds one model, which --resume reads whole.
func writeDecompModel(stderr io.Writer, prefix string, res interface {
	WriteNPY(string) ([]string, error)
}) ([]string, error) {
	files, err := res.WriteNPY(prefix)
	if err != nil {
		return files, err
	}
	candidates := []string{prefix + ".lambda.npy", prefix + ".core.npy"}
	for m := 1; m <= formats.MaxOrder+1; m++ {
		candidates = append(candidates, fmt.Sprintf("%s.mode%d.npy", prefix, m))
	}
	var removed []string
	for _, path := range candidates {
		if slices.Contains(files, path) {
			continue
		}
		if err := os.Remove(path); err == nil {
			removed = append(removed, path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return files, fmt.Errorf("--out %s: remove %s, left by an earlier model: %w", prefix, path, errors.Unwrap(err))
		}
	}
	if len(removed) > 0 {
		fmt.Fprintf(stderr, "removed %s: left at %s by an earlier model\n", strings.Join(removed, ", "), prefix)
	}
	return files, nil
}

// interrupted ends a decomposition stopped by Ctrl-C after iters
// iterations: the model so far, res (nil when no iteration was done), is
// written to --out, where --resume continues it.
func interrupted(stderr io.Writer, path string, res interface {
	WriteNPY(string) ([]string, error)
}, iters int, c decompConfig) error {
	switch {
	case iters == 0:
		return fmt.Errorf("%s: interrupted before the first iteration ended, nothing written", path)
	case c.out == "":
		return fmt.Errorf("%s: interrupted after %d iterations, nothing written (--out PREFIX keeps the model so far)", path, iters)
	}
	if _, err := writeDecompModel(stderr, c.out, res); err != nil {
		return fmt.Errorf("%s: interrupted after %d iterations: %w", path, iters, err)
	}
	return fmt.Errorf("%s: interrupted after %d iterations: the model so far is in %s.*, which --resume %s continues", path, iters, c.out, c.out)
}

// resumeFactors reads the factors an earlier run wrote with --out PREFIX
// (PREFIX.mode1.npy …) for a tensor of the given dims, each checked to
// be Dims[m] x cols[m] (cols from the flag named flag) and finite. A CP
// model's weights, PREFIX.lambda.npy, are folded into the last mode's
// columns when resuming a CP model (cp), so the starting model is the
// written one, scale included. A prefix holding factors for more modes
// than the tensor has, a Tucker model's core for a CP method, or both a
// core and weights (two models' files) is refused. It returns nil when
// prefix is empty.
func resumeFactors(prefix string, dims, cols []int, flag string, cp bool) ([]*kernels.Matrix, error) {
	if prefix == "" {
		return nil, nil
	}
	order := len(dims)
	exists := func(path string) bool { _, err := os.Stat(path); return err == nil }
	lambdaPath, corePath := prefix+".lambda.npy", prefix+".core.npy"
	switch extra := fmt.Sprintf("%s.mode%d.npy", prefix, order+1); {
	case exists(extra):
		return nil, fmt.Errorf("--resume %s: %s exists: the model has more modes than the order-%d tensor", prefix, extra, order)
	case exists(lambdaPath) && exists(corePath):
		return nil, fmt.Errorf("--resume %s: holds a CP model's weights (%s) and a Tucker core (%s), files of two models: write the model to a prefix of its own", prefix, lambdaPath, corePath)
	case cp && exists(corePath):
		return nil, fmt.Errorf("--resume %s: a Tucker model (%s); CP methods resume CP models (%s)", prefix, corePath, lambdaPath)
	}
	fs := make([]*kernels.Matrix, order)
	for m := range order {
		path := fmt.Sprintf("%s.mode%d.npy", prefix, m+1)
		shape, data, err := npy.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		if len(shape) != 2 {
			return nil, fmt.Errorf("--resume: %s has shape %v, expected a matrix", path, shape)
		}
		if m < len(cols) && (shape[0] != dims[m] || shape[1] != cols[m]) {
			return nil, fmt.Errorf("--resume: %s is %dx%d, expected %dx%d (rows: dim %d of the tensor; columns: %s)", path, shape[0], shape[1], dims[m], cols[m], m+1, flag)
		}
		for _, v := range data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("--resume: %s holds %v: values must be finite", path, v)
			}
		}
		fs[m] = &kernels.Matrix{Rows: shape[0], Cols: shape[1], Data: data}
	}
	if !cp || !exists(lambdaPath) {
		return fs, nil
	}
	shape, lambda, err := npy.ReadFile(lambdaPath)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	last := fs[order-1]
	if len(shape) != 1 || shape[0] != last.Cols {
		return nil, fmt.Errorf("--resume: %s has shape %v, expected (%d,)", lambdaPath, shape, last.Cols)
	}
	for i := range last.Rows {
		row := last.Row(i)
		for r := range row {
			row[r] *= lambda[r]
		}
	}
	return fs, nil
}

// iterJSON is one iteration in --json output.
type iterJSON struct {
	Iteration     int      `json:"iteration"`
	Fit           *float64 `json:"fit,omitempty"`
	LogLikelihood *float64 `json:"log_likelihood,omitempty"`
	KKTViolation  *float64 `json:"kkt_violation,omitempty"`
	Delta         float64  `json:"delta"`
	Seconds       float64  `json:"seconds"`
}

// decompReport is what the decomposition commands print with --json.
type decompReport struct {
	Method              string     `json:"method"`
	File                string     `json:"file"`
	Dims                []int      `json:"dims"`
	NNZ                 int        `json:"nnz"`
	Rank                int        `json:"rank,omitempty"`
	Ranks               []int      `json:"ranks,omitempty"`
	Formats             []string   `json:"formats,omitempty"`
	Init                string     `json:"init"`
	Fit                 *float64   `json:"fit,omitempty"`
	LogLikelihood       *float64   `json:"log_likelihood,omitempty"`
	KKTViolation        *float64   `json:"kkt_violation,omitempty"`
	Iterations          int        `json:"iterations"`
	Converged           bool       `json:"converged"`
	Seconds             float64    `json:"seconds"`
	SecondsPerIteration float64    `json:"seconds_per_iteration"`
	KernelSeconds       float64    `json:"kernel_seconds"`
	DenseSeconds        float64    `json:"dense_seconds"`
	SetupSeconds        float64    `json:"setup_seconds"`
	ReadSeconds         float64    `json:"read_seconds"`
	Threads             int        `json:"threads"`
	Lambda              []float64  `json:"lambda,omitempty"`
	Files               []string   `json:"files,omitempty"`
	History             []iterJSON `json:"history"`
	// Through the engine (cpd --devices, --split, --format auto): the
	// split, the devices and, per mode, each device's format and times.
	Split       string              `json:"split,omitempty"`
	Devices     []string            `json:"devices,omitempty"`
	ModeDevices []decomp.EngineMode `json:"mode_devices,omitempty"`
	Warnings    []string            `json:"warnings,omitempty"`
}

// fill sets the timing fields and history from the iterations. seconds
// per iteration is the median, which the first iteration's page faults
// and a busy machine's stragglers do not move.
func (r *decompReport) fill(h []decomp.IterStat, likelihood bool) {
	secs := make([]float64, len(h))
	for i, s := range h {
		secs[i] = s.Seconds
		r.KernelSeconds += s.KernelSeconds
		r.DenseSeconds += s.DenseSeconds
		it := iterJSON{Iteration: s.Iteration, Delta: s.Delta, Seconds: s.Seconds}
		if likelihood {
			ll, kkt := s.LogLikelihood, s.KKTViolation
			it.LogLikelihood, it.KKTViolation = &ll, &kkt
		} else {
			fit := s.Fit
			it.Fit = &fit
		}
		r.History = append(r.History, it)
	}
	r.Iterations = len(h)
	r.SecondsPerIteration = median(secs)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// printIter writes one progress line per iteration.
func printIter(w io.Writer, s decomp.IterStat, likelihood bool) {
	if likelihood {
		fmt.Fprintf(w, "iter %3d  loglik %.6e  delta %+.3e  kkt %.3e  %.3fs\n", s.Iteration, s.LogLikelihood, s.Delta, s.KKTViolation, s.Seconds)
		return
	}
	ls := ""
	if s.Extrapolated {
		ls = "  (extrapolated)"
	}
	fmt.Fprintf(w, "iter %3d  fit %.6f  delta %+.3e  %.3fs%s\n", s.Iteration, s.Fit, s.Delta, s.Seconds, ls)
}

// printReport writes the report as JSON or as a short summary.
func printReport(w io.Writer, r *decompReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	what := ""
	switch {
	case r.Fit != nil:
		what = fmt.Sprintf("fit %.6f", *r.Fit)
	case r.LogLikelihood != nil:
		what = fmt.Sprintf("log-likelihood %.6e, KKT violation %.3e", *r.LogLikelihood, *r.KKTViolation)
	}
	stop := "iteration limit"
	if r.Converged {
		stop = "converged"
	}
	iterations := "iterations"
	if r.Iterations == 1 {
		iterations = "iteration"
	}
	if _, err := fmt.Fprintf(w, "%s of %s (%s, %d nnz): %s after %d %s (%s)\n", r.Method, r.File,
		formats.FormatDims(r.Dims), r.NNZ, what, r.Iterations, iterations, stop); err != nil {
		return err
	}
	fmt.Fprintf(w, "time: %.3fs (%.4fs per iteration, median; kernels %.3fs, dense %.3fs, setup %.3fs, read %.3fs), %d threads\n",
		r.Seconds, r.SecondsPerIteration, r.KernelSeconds, r.DenseSeconds, r.SetupSeconds, r.ReadSeconds, r.Threads)
	for _, m := range r.ModeDevices {
		var parts []string
		for _, d := range m.Devices {
			if d.Format == "" {
				// Dealt nothing, so never chosen.
				parts = append(parts, fmt.Sprintf("%s idle", d.Device))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s (%s, %.1f%% of the nonzeros, setup %.3fs, kernels %.3fs)",
				d.Device, d.Format, d.FormatSource, 100*d.NNZShare, d.SetupSeconds, d.KernelSeconds))
		}
		fmt.Fprintf(w, "mode %d, split %s: %s\n", m.Mode, m.Split, strings.Join(parts, "; "))
	}
	for _, f := range r.Files {
		fmt.Fprintf(w, "wrote %s\n", f)
	}
	return nil
}

// cpReport is the report of a CP-ALS run on a tensor of the given dims
// and nonzeros that took elapsed, after a read that took read; callers
// add what is their own (formats, devices) and fill the history.
func cpReport(path string, dims []int, nnz int, c decompConfig, res *decomp.CPResult, elapsed, read time.Duration) *decompReport {
	fit := res.Fit
	return &decompReport{Method: "CP-ALS", File: path, Dims: dims, NNZ: nnz, Rank: c.rank, Formats: c.formats,
		Init: c.initName(), Fit: &fit, Converged: res.Converged, Seconds: elapsed.Seconds(), SetupSeconds: res.SetupSeconds,
		ReadSeconds: read.Seconds(), Threads: resolvedThreads(c.threads), Lambda: res.Lambda}
}

func runCPD(cmd *cobra.Command, v *viper.Viper, path string, c decompConfig) error {
	if mpi.Launched() {
		if c.devices != "" || c.split != 0 {
			return fmt.Errorf("cpd under mpirun: --devices and --split are for one process; each rank runs on its CPU (--format auto predicts each rank's formats)")
		}
		return runCPDDistributed(cmd, path, c)
	}
	x, read, init, _, err := readForDecomp(cmd.ErrOrStderr(), path, c, nil)
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	opts := decomp.Options{Rank: c.rank, Iters: c.iters, Tol: c.tol, Seed: c.seed, Init: c.init,
		InitFactors: init, LineSearch: c.lineSearch, Threads: c.threads, Formats: c.formats,
		Progress: func(s decomp.IterStat) { printIter(stderr, s, false) }, Context: ctx}
	var ek *decomp.EngineKernels
	var warnings []string
	if c.onEngine() {
		if ek, warnings, err = cpdEngineKernels(ctx, cmd, v, x, c); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		defer ek.Close()
		opts.MTTKRP = ek
	}
	res, err := decomp.CPALS(x, opts)
	if errors.Is(err, context.Canceled) {
		if res == nil {
			return interrupted(cmd.ErrOrStderr(), path, nil, 0, c)
		}
		return interrupted(cmd.ErrOrStderr(), path, res, res.Iterations, c)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rep := cpReport(path, x.Dims, x.NNZ(), c, res, time.Since(start), read)
	if ek != nil {
		rep.engineModes(ek, c, warnings, stderr)
	}
	if len(rep.Formats) == 0 {
		rep.Formats = []string{decomp.DefaultMTTKRPFormat}
	}
	rep.fill(res.History, false)
	return finishDecomp(cmd, rep, res, c)
}

// engineModes fills the report from the engine kernels of a
// decomposition: the devices, each mode's split and per-device formats,
// and the warnings (printed to stderr too).
func (rep *decompReport) engineModes(ek *decomp.EngineKernels, c decompConfig, warnings []string, stderr io.Writer) {
	rep.Devices = c.engineDevices()
	rep.ModeDevices = ek.Modes()
	rep.Formats = nil
	for _, m := range rep.ModeDevices {
		// One entry per mode: the formats of the devices that ran it.
		var fs []string
		for _, d := range m.Devices {
			if d.NNZShare > 0 && !slices.Contains(fs, d.Format) {
				fs = append(fs, d.Format)
			}
		}
		rep.Formats = append(rep.Formats, strings.Join(fs, "+"))
		rep.Split = m.Split
	}
	rep.Warnings = append(warnings, ek.Warnings()...)
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
}

// cpdEngineKernels builds the engine on cpd's devices (profiles as ttm
// gets them: a missing one calibrated once) and the engine-backed
// MTTKRPs of x.
func cpdEngineKernels(ctx context.Context, cmd *cobra.Command, v *viper.Viper, x *formats.COO, c decompConfig) (*decomp.EngineKernels, []string, error) {
	kc := kernelConfig{op: hetero.MTTKRP, devices: c.engineDevices(), split: c.split, threads: c.threads}
	if kc.split == 0 {
		kc.split = hetero.SplitPeak
	}
	if len(c.formats) == 1 {
		kc.format = c.formats[0]
	}
	e, warnings, err := engineFor(cmd.ErrOrStderr(), v, kc, nil, defaultPredictor(cmd.ErrOrStderr(), kc.op))
	if err != nil {
		return nil, nil, err
	}
	ek, err := decomp.NewEngineKernels(ctx, e, x, c.rank)
	return ek, warnings, err
}

// resolvedThreads returns the goroutines a --threads setting means (the
// root command has already set GOMAXPROCS from it).
func resolvedThreads(t int) int {
	if t > 0 {
		return t
	}
	return runtime.GOMAXPROCS(0)
}
