package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/sysmem"
	"github.com/sparsetune/sparsetune/kernels"
)

func init() { register(newBenchCmd) }

func newBenchCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench [FILE]",
		Short: "Time SpTTM and MTTKRP in every format on a device",
		Long: `Time SpTTM and MTTKRP on a tensor in every storage format, per mode
(1-based), on one device: the median kernel time over --iters runs after a
warm-up run, GFLOP/s, effective GB/s, the time to convert the tensor from
COO into the format (also as a multiple of one kernel run, conv/run), and
the memory of the format plus the kernel plan's workspace (MiB; JSON:
format_bytes, workspace_bytes). The fastest format per op and mode is
marked. The header names the inner loops the CPU kernels run (avx512,
avx2 or scalar; SPARSETUNE_INNER_LOOPS=scalar|avx2 asks for a narrower
one).

Flops: SpTTM 2·nnz·R, MTTKRP N·nnz·R. GB/s: the compulsory-traffic model
(format arrays and each dense matrix moved once; docs/kernels.md), set
against the memory bandwidth a STREAM-triad probe measures first.

Without FILE, bench runs on the embedded sample tensor.`,
		Args: optionalArg("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := benchConfigFrom(v)
			if err != nil {
				return err
			}
			name, t, _, err := loadTensor(cmd.ErrOrStderr(), args)
			if err != nil {
				return err
			}
			return runBench(cmd.OutOrStdout(), cmd.ErrOrStderr(), name, t, cfg, v.GetBool("json"))
		},
	}
	f := cmd.Flags()
	f.String("op", "all", "operation: ttm, mttkrp or all")
	f.String("mode", "all", "mode (1-based) or all")
	f.Int("rank", 16, "rank R: columns of the dense matrices")
	f.String("formats", "all", "comma-separated formats, or all (ttm: coo,csr,ell,hyb; mttkrp: coo,csf,hicoo,alto)")
	f.Int("iters", 10, "timed runs per format, after one warm-up run")
	f.String("device", "cpu", "device: cpu, or BACKEND:INDEX (sparsetune devices lists them)")
	f.Bool("probe", true, "measure the memory bandwidth first")
	f.String("device-memory", "", "device memory an accelerator job may use, e.g. 512MiB (default: half of the device's)")
	for _, name := range []string{"op", "mode", "rank", "formats", "iters", "device", "probe", "device-memory"} {
		_ = v.BindPFlag("bench."+name, f.Lookup(name))
	}
	return cmd
}

type benchConfig struct {
	ops     []hetero.Op
	mode    int // 1-based; 0 for all
	rank    int
	formats []string // nil for all
	iters   int
	device  string
	threads int
	probe   bool
	budget  int64 // accelerator memory budget in bytes, 0 for the default
}

func benchConfigFrom(v *viper.Viper) (benchConfig, error) {
	c := benchConfig{rank: v.GetInt("bench.rank"), iters: v.GetInt("bench.iters"),
		device: v.GetString("bench.device"), threads: v.GetInt("threads"), probe: v.GetBool("bench.probe")}
	if s := v.GetString("bench.device-memory"); s != "" {
		n, err := parseBytes(s)
		if err != nil {
			return c, fmt.Errorf("--device-memory: %w", err)
		}
		c.budget = n
	}
	if op := v.GetString("bench.op"); op == "all" {
		c.ops = hetero.Ops
	} else {
		o, err := hetero.ParseOp(op)
		if err != nil {
			return c, fmt.Errorf("--op: %w", err)
		}
		c.ops = []hetero.Op{o}
	}
	if m := v.GetString("bench.mode"); m != "all" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 {
			return c, fmt.Errorf("--mode: expected a 1-based mode or all, found %q", m)
		}
		c.mode = n
	}
	if c.rank < 1 {
		return c, fmt.Errorf("--rank: expected at least 1, found %d", c.rank)
	}
	if c.iters < 1 {
		return c, fmt.Errorf("--iters: expected at least 1, found %d", c.iters)
	}
	if fs := v.GetString("bench.formats"); fs != "all" {
		known := append(hetero.SpTTM.Formats(), hetero.MTTKRP.Formats()...)
		for _, f := range strings.Split(fs, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(known, f) {
				return c, fmt.Errorf("--formats: unknown format %q, expected some of %s", f, strings.Join(slices.Compact(slices.Sorted(slices.Values(known))), ","))
			}
			c.formats = append(c.formats, f)
		}
		// An op none of whose formats is asked for is left out; if that
		// is every op, nothing would be timed.
		c.ops = slices.DeleteFunc(c.ops, func(op hetero.Op) bool {
			return !slices.ContainsFunc(op.Formats(), func(f string) bool { return slices.Contains(c.formats, f) })
		})
		if len(c.ops) == 0 {
			return c, fmt.Errorf("--formats %s: none is a format of --op %s (ttm runs %s; mttkrp runs %s)", fs, v.GetString("bench.op"),
				strings.Join(hetero.SpTTM.Formats(), ", "), strings.Join(hetero.MTTKRP.Formats(), ", "))
		}
	}
	return c, nil
}

// benchRow is one line of bench's output; modes are 1-based.
type benchRow struct {
	Op             string  `json:"op"`
	Mode           int     `json:"mode"`
	Format         string  `json:"format"`
	Device         string  `json:"device"`
	Rank           int     `json:"rank"`
	Iters          int     `json:"iters"`
	Seconds        float64 `json:"seconds"`
	MinSeconds     float64 `json:"min_seconds"`
	GFlops         float64 `json:"gflops"`
	GBs            float64 `json:"gb_per_s"`
	MemoryGBs      float64 `json:"memory_gb_per_s,omitempty"` // the bandwidth probe's rate
	ConvertSeconds float64 `json:"convert_seconds"`
	ConvertRuns    float64 `json:"convert_runs"` // convert_seconds / seconds
	FormatBytes    int64   `json:"format_bytes"`
	WorkspaceBytes int64   `json:"workspace_bytes"`
	HostToDevice   float64 `json:"h2d_seconds"`
	DeviceToHost   float64 `json:"d2h_seconds"`
	Flops          float64 `json:"flops"`
	Bytes          float64 `json:"bytes"`
	Fastest        bool    `json:"fastest"`
	Skipped        string  `json:"skipped,omitempty"`
}

func runBench(stdout, stderr io.Writer, name string, t *formats.COO, c benchConfig, asJSON bool) error {
	if c.mode > t.Order() {
		return fmt.Errorf("--mode: %s has modes 1 to %d, found %d", name, t.Order(), c.mode)
	}
	dev, err := hetero.Lookup(c.device, c.threads)
	if err != nil {
		return err
	}
	// An accelerator is shared by the whole process: set its budget on
	// every run, the default included, and give the default back after,
	// for whatever runs next in the process (calibrate, a test).
	if b, ok := dev.(interface{ SetMemoryBudget(int64) }); ok {
		b.SetMemoryBudget(c.budget)
		defer b.SetMemoryBudget(0)
	} else if c.budget > 0 {
		return fmt.Errorf("--device-memory: device %s is not an accelerator", c.device)
	}
	info := dev.Info()
	var mem float64
	if c.probe {
		bw, err := hetero.MemoryBandwidth(c.threads, 0, 0)
		if err != nil {
			return err
		}
		mem = bw.GBs
	}
	if !asJSON {
		units := "threads"
		if info.Kind != hetero.CPU {
			units = "compute units"
		}
		fmt.Fprintf(stdout, "%s: %s, %d nonzeros; device %s (%s, %d %s); rank %d; median of %d runs\n",
			name, formats.FormatDims(t.Dims), t.NNZ(), info.Name, info.Model, info.ComputeUnits, units, c.rank, c.iters)
		if c.probe {
			fmt.Fprintf(stdout, "memory bandwidth (STREAM triad): %.1f GB/s\n", mem)
		}
		fmt.Fprintf(stdout, "inner loops: %s\n", kernels.InnerLoops())
		fmt.Fprintln(stdout, "flops: ttm 2·nnz·R, mttkrp N·nnz·R; GB/s by the compulsory-traffic model")
		fmt.Fprintln(stdout)
		// Fixed widths rather than a tabwriter: each row is printed as soon
		// as it is measured.
		fmt.Fprintf(stdout, "%-6s %4s  %-6s %11s %9s %8s %11s %8s %9s\n", "op", "mode", "format", "seconds", "GFLOP/s", "GB/s", "convert s", "conv/run", "MiB")
	}
	var rows []benchRow
	for _, op := range c.ops {
		for mode := range t.Order() {
			if c.mode != 0 && mode != c.mode-1 {
				continue
			}
			first := len(rows)
			for _, format := range op.Formats() {
				if c.formats != nil && !slices.Contains(c.formats, format) {
					continue
				}
				m, err := hetero.Measure(dev, t, op, mode, format, c.rank, c.iters)
				switch {
				case errors.Is(err, sysmem.ErrTooLarge):
					// This mode's operands or this format do not fit:
					// the other modes and formats may.
					m = &hetero.Measurement{Device: dev.Info().Name, Rank: c.rank, Skipped: err.Error()}
				case err != nil:
					return fmt.Errorf("%s mode %d %s: %w", op, mode+1, format, err)
				}
				rows = append(rows, benchRow{Op: op.String(), Mode: mode + 1, Format: format, Device: m.Device,
					Rank: m.Rank, Iters: m.Iters, Seconds: m.Seconds, MinSeconds: m.MinSeconds, GFlops: m.GFlops,
					GBs: m.GBs, MemoryGBs: mem, ConvertSeconds: m.ConvertSeconds, HostToDevice: m.HostToDevice,
					DeviceToHost: m.DeviceToHost, Flops: m.Flops, Bytes: m.Bytes, Skipped: m.Skipped,
					FormatBytes: m.FormatBytes, WorkspaceBytes: m.WorkspaceBytes})
				if r := &rows[len(rows)-1]; r.Seconds > 0 {
					r.ConvertRuns = r.ConvertSeconds / r.Seconds
				}
				if !asJSON {
					r := rows[len(rows)-1]
					if r.Skipped != "" {
						fmt.Fprintf(stdout, "%-6s %4d  %-6s skipped: %s\n", r.Op, r.Mode, r.Format, r.Skipped)
					} else {
						fmt.Fprintf(stdout, "%-6s %4d  %-6s %11.3e %9.2f %8.2f %11.3e %8.1f %9.1f\n", r.Op, r.Mode, r.Format, r.Seconds, r.GFlops, r.GBs,
							r.ConvertSeconds, r.ConvertRuns, float64(r.FormatBytes+r.WorkspaceBytes)/(1<<20))
					}
				}
			}
			best := -1
			for i := first; i < len(rows); i++ {
				if rows[i].Skipped == "" && (best < 0 || rows[i].Seconds < rows[best].Seconds) {
					best = i
				}
			}
			if best >= 0 {
				rows[best].Fastest = true
			}
		}
	}
	timed := slices.ContainsFunc(rows, func(r benchRow) bool { return r.Skipped == "" })
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout)
		for _, r := range rows {
			if r.Fastest {
				fmt.Fprintf(stdout, "fastest %s mode %d: %s (%.3g s, %.2f GFLOP/s)\n", r.Op, r.Mode, r.Format, r.Seconds, r.GFlops)
			}
		}
	}
	if !timed && len(rows) > 0 {
		// Every row says why it was skipped: a run that measured
		// nothing has failed, whatever it printed.
		return errors.New("bench: nothing was measured, every format was skipped (the reasons are above)")
	}
	return nil
}

// parseBytes parses a size: a number of bytes with an optional unit, KB,
// MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024).
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		scale  float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	num, scale := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, scale = strings.TrimSpace(rest), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v > 0) || v*scale > math.MaxInt64/2 {
		return 0, fmt.Errorf("expected a positive size such as 512MiB or 2GB, found %q", s)
	}
	return int64(v * scale), nil
}
