package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/train"
)

func init() { register(newGenCmd) }

func newGenCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gen --from DIR --out DIR (--count N [--seed S] [--min-nnz A] [--max-nnz B] | --preset bench | --manifest FILE) [--format stb|tns]",
		Short: "Generate order-3 and order-4 tensors from the SuiteSparse matrices in a directory",
		Long: `Generate tensors from the MatrixMarket matrices (*.mtx, *.mtx.gz) in --from
into --out, with a manifest (manifest.jsonl, one JSON line per tensor) from
which any of them can be rebuilt bit for bit.

With --count, a training set: N tensors spread over the nonzero buckets
0-100, 100-1K, 1K-10K, 10K-100K and above (weights 1:2:4:6:7), cut to
[--min-nnz, --max-nnz], three in four of order 3, the rest of order 4, each
from one of the generators slices, lift, band and bursts (order 4 adds
lift or bursts). The plan depends only on --seed and the matrices, and a
plan of N tensors is the first N of a larger one.

With --preset bench, the fixed set of eight tensors of 1 to 10 million
nonzeros that the kernel benchmarks use.

With --manifest, the tensors another gen run listed in FILE (its
manifest.jsonl, or some of its lines), generated again from the same
matrices and checked against their lines (dims, nonzeros, checksum): a
labels file's tensors can be rebuilt on another machine from the matrices
and the manifest alone. Their file names and extension are the manifest's.

Re-running with the same arguments skips the tensors already written, so an
interrupted run resumes. docs/generate.md describes the generators, the
plan, the manifest and the preset.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := genConfigFrom(v, cmd)
			if err != nil {
				return err
			}
			return runGen(cmd, cfg, v.GetBool("json"))
		},
	}
	f := cmd.Flags()
	f.String("from", "", "directory of the source matrices (*.mtx, *.mtx.gz)")
	f.String("out", "", "output directory (created if missing)")
	f.Int("count", 0, "number of tensors to plan")
	f.Uint64("seed", 1, "seed of the plan")
	f.Int("min-nnz", train.DefaultMinNNZ, "smallest target number of nonzeros")
	f.Int("max-nnz", train.DefaultMaxNNZ, "largest target number of nonzeros")
	f.String("format", "stb", "file format: stb (binary, fast) or tns (FROSTT text), either optionally .gz")
	f.String("preset", "", "a fixed set instead of a plan: "+strings.Join(train.Presets(), ", "))
	f.String("manifest", "", "rebuild the tensors a gen manifest lists instead of planning a set")
	for _, name := range []string{"from", "out", "count", "seed", "min-nnz", "max-nnz", "format", "preset", "manifest"} {
		_ = v.BindPFlag("gen."+name, f.Lookup(name))
	}
	return cmd
}

type genConfig struct {
	from, out, format, preset string
	manifest                  string
	plan                      train.PlanOptions
}

func genConfigFrom(v *viper.Viper, cmd *cobra.Command) (genConfig, error) {
	c := genConfig{from: v.GetString("gen.from"), out: v.GetString("gen.out"), format: v.GetString("gen.format"),
		preset: v.GetString("gen.preset"), manifest: v.GetString("gen.manifest"),
		plan: train.PlanOptions{Count: v.GetInt("gen.count"), Seed: v.GetUint64("gen.seed"),
			MinNNZ: v.GetInt("gen.min-nnz"), MaxNNZ: v.GetInt("gen.max-nnz")}}
	if c.from == "" || c.out == "" {
		return c, errors.New("gen needs --from DIR (the matrices) and --out DIR (the tensors)")
	}
	switch c.format {
	case "stb", "tns", "stb.gz", "tns.gz":
	default:
		return c, fmt.Errorf("--format must be stb or tns, optionally followed by .gz, found %q", c.format)
	}
	if c.manifest != "" {
		if c.preset != "" {
			return c, errors.New("--manifest and --preset are two sets: give one")
		}
		for _, name := range []string{"count", "seed", "min-nnz", "max-nnz", "format"} {
			if cmd.Flags().Changed(name) {
				return c, fmt.Errorf("--manifest rebuilds the tensors it lists as they were: --%s does not apply", name)
			}
		}
		return c, nil
	}
	if c.preset != "" {
		for _, name := range []string{"count", "seed", "min-nnz", "max-nnz"} {
			if cmd.Flags().Changed(name) {
				return c, fmt.Errorf("--preset %s is a fixed set: --%s does not apply", c.preset, name)
			}
		}
		return c, nil
	}
	if c.plan.Count <= 0 {
		return c, fmt.Errorf("gen needs --count N (N > 0), --preset (%s) or --manifest FILE, found --count %d", strings.Join(train.Presets(), ", "), c.plan.Count)
	}
	if c.plan.MinNNZ < 1 || c.plan.MaxNNZ < c.plan.MinNNZ || c.plan.MaxNNZ > train.MaxNNZ {
		return c, fmt.Errorf("--min-nnz and --max-nnz must satisfy 1 <= min <= max <= %d, found %d and %d", train.MaxNNZ, c.plan.MinNNZ, c.plan.MaxNNZ)
	}
	return c, nil
}

// genReport is what gen prints with --json.
type genReport struct {
	Out      string        `json:"out"`
	Manifest string        `json:"manifest"`
	Written  int           `json:"written"`
	Skipped  int           `json:"skipped"`
	Seconds  float64       `json:"seconds"`
	Tensors  []train.Entry `json:"tensors"`
	// Failed names the source matrices that could not be read, whose
	// Missing tensors are left out.
	Failed  []string `json:"failed,omitempty"`
	Missing int      `json:"missing,omitempty"`
}

func runGen(cmd *cobra.Command, c genConfig, asJSON bool) error {
	start := time.Now()
	var specs []train.Spec
	var entries []train.Entry
	var err error
	if c.manifest != "" {
		if entries, err = train.ReadManifestFile(c.manifest); err == nil && len(entries) == 0 {
			err = fmt.Errorf("%s: the manifest lists no tensors", c.manifest)
		}
	} else if c.preset != "" {
		specs, err = train.Preset(c.preset)
	} else {
		var mats []train.Matrix
		if mats, err = train.ScanMatrices(c.from); err == nil {
			specs, err = train.Plan(mats, c.plan)
		} else if _, statErr := os.Stat(c.from); statErr == nil {
			// A matrix whose body does not read is left out with its
			// tensors; one whose header does not is not, since the
			// whole plan (which tensor each seed makes) is drawn from
			// every header.
			err = fmt.Errorf("%w (the set is planned from every matrix's header: mend or move that file)", err)
		}
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	stderr := cmd.ErrOrStderr()
	opt := train.WriteOptions{
		From: c.from, Out: c.out, Ext: "." + c.format,
		Progress: func(p train.Progress) { printGenProgress(stderr, p) },
		Warn:     func(w string) { fmt.Fprintln(stderr, "warning:", w) },
	}
	var sum *train.Summary
	if c.manifest != "" {
		sum, err = train.RebuildSet(ctx, entries, opt)
	} else {
		sum, err = train.WriteSet(ctx, specs, opt)
	}
	if err != nil {
		return err
	}
	rep := genReport{Out: c.out, Manifest: sum.Manifest, Written: sum.Written, Skipped: sum.Skipped,
		Seconds: time.Since(start).Seconds(), Tensors: sum.Entries, Failed: sum.Failed, Missing: sum.Missing}
	if asJSON {
		err = json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
	} else {
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d tensors in %s: %d written, %d present and skipped (%.1fs); manifest %s\n",
			rep.Written+rep.Skipped, c.out, rep.Written, rep.Skipped, rep.Seconds, rep.Manifest)
	}
	if err == nil && len(sum.Failed) > 0 {
		err = fmt.Errorf("%d source matrices could not be read (the warnings above say why): their %d tensors are missing from %s", len(sum.Failed), sum.Missing, c.out)
	}
	return err
}

// printGenProgress writes one line per tensor.
func printGenProgress(w io.Writer, p train.Progress) {
	e := p.Entry
	width := len(fmt.Sprint(p.Total))
	what := fmt.Sprintf("%.2fs", p.Elapsed.Seconds())
	if p.Skipped {
		what = "present, skipped"
	}
	fmt.Fprintf(w, "[%*d/%d] %s  %s  %d nnz  %s  %s\n", width, p.Index+1, p.Total, filepath.Base(e.File),
		formats.FormatDims(e.Dims), e.NNZ, e.Generator, what)
}
