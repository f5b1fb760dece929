package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/mpi"
	"github.com/sparsetune/sparsetune/train"
)

func init() { register(newLabelCmd) }

func newLabelCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "label --in DIR --out FILE [--ops ttm,mttkrp] [--devices cpu,opencl:0] [--rank 16] [--runs 5] [--limit N]",
		Short: "Label tensors with their fastest format per op, mode and device, by measurement",
		Long: `Time every candidate format (ttm: coo, csr, ell, hyb; mttkrp: coo, csf,
hicoo, alto) of every mode of every tensor in --in on every device of
--devices with the real kernels, and append one JSON line per tensor, op,
mode and device to --out: the median time of each format, its fastest run,
its conversion time, the formats skipped and why, the fastest format (the
label) and those within 3% of it.

--in is a directory written by sparsetune gen (its manifest.jsonl gives the
order and each tensor's source matrix, the group for cross-validation) or
any directory of .tns, .stb and .mtx files (optionally .gz), taken in name
order, each its own source.

Each format is converted, run once to warm up, then timed --runs times
(the median is kept), more when a run is short and fewer when it is long:
a format whose warm-up took w is timed
max(1, min(floor(--run-budget / w), max(--runs, min(200, ceil(--min-time / w)))))
times.

The output is resumable: rows already in --out (same tensor, op, mode,
device and rank) are skipped, and a line cut short by a killed run is
dropped and measured again. Ctrl-C stops before the next row; run the
same command again to resume. docs/train.md describes the file.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := labelConfigFrom(v)
			if err != nil {
				return err
			}
			return runLabel(cmd, cfg, v.GetBool("json"))
		},
	}
	f := cmd.Flags()
	f.String("in", "", "directory of tensors: a sparsetune gen output, or .tns/.stb/.mtx files")
	f.String("out", "", "labels file (JSON lines), appended to and resumed")
	f.String("ops", "ttm,mttkrp", "comma-separated operations: ttm, mttkrp")
	f.String("devices", "cpu", "comma-separated devices: cpu, opencl:0, cuda:0 (sparsetune devices lists them)")
	f.Int("rank", train.DefaultLabelRank, "rank R: columns of the dense matrices")
	f.Int("runs", train.DefaultRuns, "timed runs per format after a warm-up (more for short kernels, fewer for long ones)")
	f.Duration("run-budget", train.DefaultRunBudget, "time the timed runs of one format aim at (0: never fewer than --runs)")
	f.Duration("min-time", train.DefaultMinTime, fmt.Sprintf("least time the timed runs of one format add up to: short kernels get more runs, up to %d (negative: never more than --runs)", train.MaxRuns))
	f.Int("limit", 0, "label only the first N tensors (0: all)")
	for _, name := range []string{"in", "out", "ops", "devices", "rank", "runs", "run-budget", "min-time", "limit"} {
		_ = v.BindPFlag("label."+name, f.Lookup(name))
	}
	return cmd
}

type labelConfig struct {
	in, out string
	devices []string
	threads int
	opt     train.LabelOptions
}

func labelConfigFrom(v *viper.Viper) (labelConfig, error) {
	c := labelConfig{in: v.GetString("label.in"), out: v.GetString("label.out"), threads: v.GetInt("threads"),
		opt: train.LabelOptions{Rank: v.GetInt("label.rank"), Runs: v.GetInt("label.runs"),
			RunBudget: v.GetDuration("label.run-budget"), MinTime: v.GetDuration("label.min-time"), Limit: v.GetInt("label.limit")}}
	if c.in == "" || c.out == "" {
		return c, errors.New("label needs --in DIR (the tensors) and --out FILE (the labels)")
	}
	for _, s := range strings.Split(v.GetString("label.ops"), ",") {
		op, err := hetero.ParseOp(strings.TrimSpace(s))
		if err != nil {
			return c, fmt.Errorf("--ops: %w", err)
		}
		if slices.Contains(c.opt.Ops, op) {
			return c, fmt.Errorf("--ops: %s given twice", op)
		}
		c.opt.Ops = append(c.opt.Ops, op)
	}
	for _, s := range strings.Split(v.GetString("label.devices"), ",") {
		s = strings.TrimSpace(s)
		if s == "" || slices.Contains(c.devices, s) {
			return c, fmt.Errorf("--devices: expected distinct names such as cpu,opencl:0, found %q", v.GetString("label.devices"))
		}
		c.devices = append(c.devices, s)
	}
	if c.opt.Rank < 1 {
		return c, fmt.Errorf("--rank: expected at least 1, found %d", c.opt.Rank)
	}
	if c.opt.Runs < 1 {
		return c, fmt.Errorf("--runs: expected at least 1, found %d", c.opt.Runs)
	}
	switch {
	case c.opt.RunBudget < 0:
		return c, fmt.Errorf("--run-budget: expected 0 or a positive duration, found %s", c.opt.RunBudget)
	case c.opt.RunBudget == 0:
		c.opt.RunBudget = -1 // never fewer than --runs
	}
	if c.opt.MinTime < 0 {
		c.opt.MinTime = -1 // never more than --runs
	}
	if c.opt.Limit < 0 {
		return c, fmt.Errorf("--limit: expected 0 (all) or more, found %d", c.opt.Limit)
	}
	return c, nil
}

// labelReport is what label prints with --json.
type labelReport struct {
	*train.LabelSummary
	Seconds float64 `json:"seconds"`
}

func runLabel(cmd *cobra.Command, c labelConfig, asJSON bool) error {
	start := time.Now()
	for _, name := range c.devices {
		d, err := hetero.Lookup(name, c.threads)
		if err != nil {
			return fmt.Errorf("--devices: %w", err)
		}
		c.opt.Devices = append(c.opt.Devices, d)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stderr := cmd.ErrOrStderr()
	// Under mpirun the ranks share the tensor list (one rank per machine:
	// ranks on one machine would time their kernels against each other);
	// rank 0 shows its progress and merges the ranks' rows at the end.
	var comm *mpi.Comm
	if mpi.Launched() {
		var err error
		if comm, err = mpi.Init(); err != nil {
			return fmt.Errorf("label under mpirun: %w", err)
		}
		defer mpi.Finalize()
		c.opt.Part, c.opt.Parts = comm.Rank(), comm.Size()
		if comm.Rank() != 0 {
			stderr = io.Discard
		}
	}
	prog := newLabelProgress(stderr, start)
	c.opt.Progress = prog.update
	c.opt.Warn = prog.warn
	if !train.CurrentBuild().Known() {
		// Rows timed by a build that cannot name its source cannot be
		// told from another such build's (train.MixedBuilds).
		prog.warn("this binary records no VCS revision or module version (built with -buildvcs=false, which GOFLAGS may set): its rows will not say which source timed them; go build -buildvcs=true in a checkout, or go install module@version, records it")
	}
	sum, err := train.Label(ctx, c.in, c.out, c.opt)
	prog.finish(err == nil)
	if err != nil {
		if errors.Is(err, context.Canceled) && sum != nil {
			return fmt.Errorf("interrupted: %d rows written to %s this run; run the same command again to resume", sum.Written, sum.Out)
		}
		return err
	}
	if comm != nil {
		// Every rank's rows are on disk before rank 0 merges them.
		if err := comm.Barrier(); err != nil {
			return err
		}
		written := []uint64{uint64(sum.Written)}
		if err := mpi.Allreduce(comm, written, written, mpi.Sum); err != nil {
			return err
		}
		if comm.Rank() != 0 {
			return failedTensors(sum) // this rank's stderr is discarded
		}
		if _, err := train.MergeParts(c.out); err != nil {
			return fmt.Errorf("merge the ranks' rows into %s: %w", c.out, err)
		}
		sum.Out, sum.Written = c.out, int(written[0])
	}
	rep := labelReport{LabelSummary: sum, Seconds: time.Since(start).Seconds()}
	if asJSON {
		if err := json.NewEncoder(cmd.OutOrStdout()).Encode(rep); err != nil {
			return err
		}
		return failedTensors(sum)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%s: %d rows written, %d found done, %d tensors (%.1fs)\n", c.out, sum.Written, sum.Resumed, sum.Tensors, rep.Seconds)
	for _, d := range sum.Devices {
		if d.Rows > 0 {
			fmt.Fprintf(w, "  %s (%s): %d rows, %.1fs, %.3g s per million nonzeros per op and mode\n", d.Device, d.Class, d.Rows, d.Seconds, d.SecondsPerMillion())
		}
	}
	return failedTensors(sum)
}

// failedTensors is the error of a run that skipped tensors it could not
// label, after the others were: their rows are missing.
func failedTensors(sum *train.LabelSummary) error {
	if len(sum.Failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d tensors could not be labelled whole (the warnings above say why): %s lacks their rows from the one that failed on; a later run measures those again",
		len(sum.Failed), sum.Tensors, sum.Out)
}

// labelProgress shows label's progress on stderr: a bar with the ETA
// (weighted by nonzeros) above which tensors are logged on a terminal,
// one line per tensor elsewhere.
type labelProgress struct {
	w     io.Writer
	start time.Time
	tty   bool
	p     *mpb.Progress
	bar   *mpb.Bar
	mu    sync.Mutex
	now   string // the tensor in progress, for the bar
}

func newLabelProgress(w io.Writer, start time.Time) *labelProgress {
	return &labelProgress{w: w, start: start, tty: isTerminal(w)}
}

// out is where lines go: above the bar when there is one.
func (lp *labelProgress) out() io.Writer {
	if lp.p != nil {
		return lp.p
	}
	return lp.w
}

func (lp *labelProgress) warn(msg string) { fmt.Fprintf(lp.out(), "warning: %s\n", msg) }

func (lp *labelProgress) update(e train.LabelProgress) {
	if lp.tty && lp.p == nil {
		lp.p = mpb.New(mpb.WithOutput(lp.w), mpb.WithWidth(40), mpb.WithRefreshRate(200*time.Millisecond))
		lp.bar = lp.p.New(max(int64(e.TotalWork), 1), mpb.BarStyle(),
			mpb.PrependDecorators(decor.Name("label "), decor.Percentage(decor.WC{W: 5})),
			mpb.AppendDecorators(decor.Name(" ETA "), decor.AverageETA(decor.ET_STYLE_GO),
				decor.Any(func(decor.Statistics) string {
					lp.mu.Lock()
					defer lp.mu.Unlock()
					return "  " + lp.now
				})))
		lp.bar.DecoratorAverageAdjust(lp.start)
	}
	if lp.bar != nil {
		lp.bar.SetTotal(max(int64(e.TotalWork), 1), false)
		lp.bar.SetCurrent(int64(e.Work))
		lp.mu.Lock()
		lp.now = fmt.Sprintf("[%d/%d] %s", e.Index+1, e.Total, path.Base(e.Tensor))
		if e.Row != nil {
			lp.now += fmt.Sprintf(" %s mode %d on %s: %s", e.Row.Op, e.Row.Mode, e.Row.Device, e.Row.Label)
		}
		lp.mu.Unlock()
	}
	if e.Row != nil {
		return
	}
	line := fmt.Sprintf("[%*d/%d] %s", len(fmt.Sprint(e.Total)), e.Index+1, e.Total, e.Tensor)
	if e.NNZ > 0 {
		line += fmt.Sprintf("  %s  %d nnz", formats.FormatDims(e.Dims), e.NNZ)
	}
	line += fmt.Sprintf("  %d rows written, %d found done  %.2fs", e.Written, e.Resumed, e.Elapsed.Seconds())
	if lp.bar == nil && e.Work > 0 && e.TotalWork > e.Work {
		elapsed := time.Since(lp.start)
		eta := time.Duration(float64(elapsed) * (e.TotalWork - e.Work) / e.Work)
		line += fmt.Sprintf("  %.0f%% of the work, ETA %s", 100*e.Work/e.TotalWork, eta.Round(time.Second))
	}
	fmt.Fprintln(lp.out(), line)
}

// finish completes or abandons the bar and waits for its last drawing.
func (lp *labelProgress) finish(ok bool) {
	if lp.p == nil {
		return
	}
	if ok {
		lp.bar.SetTotal(-1, true)
	} else {
		lp.bar.Abort(false)
	}
	lp.p.Wait()
	lp.p = nil
}
