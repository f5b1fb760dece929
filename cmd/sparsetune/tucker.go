package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
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
)

func init() { register(newTuckerCmd) }

func newTuckerCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tucker FILE --ranks R1,R2,... [--iters K] [--tol T] [--seed S] [--init hosvd|random] [--format csr|coo|ell|hyb] [--out PREFIX]",
		Short: "Tucker decomposition by higher-order orthogonal iteration (HOOI)",
		Long: `Compute a Tucker decomposition X ≈ G ×1 U1 ×2 U2 … ×N UN of a sparse tensor
of order 3 or more, with a core of dims --ranks (one per mode, or one for
every mode), by
higher-order orthogonal iteration.

Each iteration computes, per mode, the chain of products with every other
factor: one SpTTM on a fiber matrix in --format (CSR by default) built once
before the first iteration, then dense products; the factor becomes the
leading left singular vectors of the result. Fit = 1 - sqrt(‖X‖² - ‖G‖²)/‖X‖.
It stops when the fit changes by less than --tol or after --iters
iterations. A progress line per iteration goes to stderr.

With --devices (cpu, opencl:0, cuda:0 or all) each chain's SpTTM runs
through the engine, split between the CPU and an accelerator by output
rows, in the format --format forces or, without it, the one chosen per
device; the summary gives each mode's split and formats (docs/decomp.md).

--out PREFIX writes the factors as NumPy float32 arrays, PREFIX.mode1.npy
… (Dims[n] x Rn, orthonormal columns, C order), and the core as
PREFIX.core.npy (R1 x R2 x …). docs/decomp.md describes the algorithm.`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := decompConfigFrom(v, "tucker", cmd)
			if err != nil {
				return err
			}
			ranks, err := parseRanks(v.GetString("tucker.ranks"))
			if err != nil {
				return err
			}
			ff := v.GetString("tucker.format")
			if ff != "coo" && !slices.Contains(formats.FiberFormatNames, ff) {
				return fmt.Errorf("--format must be one of csr, coo, ell, hyb (the SpTTM format), found %q", ff)
			}
			return runTucker(cmd, v, args[0], c, ranks, ff, cmd.Flags().Changed("format"))
		},
	}
	f := cmd.Flags()
	f.String("ranks", "", "core dims, one per mode, comma-separated, or one for every mode (required)")
	addDecompFlags(cmd, v, "tucker", "hosvd")
	f.String("format", decomp.DefaultFiberFormat, "SpTTM format of the fiber matrices: csr, coo, ell or hyb")
	for _, name := range []string{"ranks", "format"} {
		_ = v.BindPFlag("tucker."+name, f.Lookup(name))
	}
	return cmd
}

// parseRanks parses --ranks R1,R2,... or --ranks R (every mode's,
// expanded once the tensor's order is known: readForDecomp).
func parseRanks(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("tucker needs --ranks R1,R2,... (the core's dims, one per mode, or one for every mode)")
	}
	var ranks []int
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r < 1 {
			return nil, fmt.Errorf("--ranks %q: each rank must be an integer >= 1, found %q", s, f)
		}
		ranks = append(ranks, r)
	}
	return ranks, nil
}

func runTucker(cmd *cobra.Command, v *viper.Viper, path string, c decompConfig, ranks []int, fiberFormat string, formatGiven bool) error {
	x, read, init, ranks, err := readForDecomp(cmd.ErrOrStderr(), path, c, ranks)
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	opts := decomp.Options{Ranks: ranks, Iters: c.iters, Tol: c.tol, Seed: c.seed, Init: c.init,
		InitFactors: init,
		Threads:     c.threads, FiberFormat: fiberFormat,
		Progress: func(s decomp.IterStat) { printIter(stderr, s, false) }, Context: ctx}
	var ek *decomp.EngineKernels
	var warnings []string
	if c.devices != "" {
		// The chains' SpTTMs through the engine: --format forces one
		// format on every device, else each device's is chosen.
		kc := kernelConfig{op: hetero.SpTTM, devices: c.engineDevices(), split: hetero.SplitPeak, threads: c.threads}
		if formatGiven {
			kc.format = fiberFormat
		}
		e, ws, err := engineFor(stderr, v, kc, nil, defaultPredictor(stderr, kc.op))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if ek, err = decomp.NewEngineKernels(ctx, e, x, 1); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		defer ek.Close()
		opts.TTMChain, warnings = ek, ws
	}
	res, err := decomp.TuckerHOOI(x, opts)
	if errors.Is(err, context.Canceled) {
		if res == nil {
			return interrupted(cmd.ErrOrStderr(), path, nil, 0, c)
		}
		return interrupted(cmd.ErrOrStderr(), path, res, res.Iterations, c)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rep := &decompReport{Method: "Tucker-HOOI", File: path, Dims: x.Dims, NNZ: x.NNZ(), Ranks: ranks, Formats: []string{fiberFormat},
		Init: c.initName(), Converged: res.Converged, Seconds: time.Since(start).Seconds(), SetupSeconds: res.SetupSeconds,
		ReadSeconds: read.Seconds(), Threads: resolvedThreads(c.threads)}
	if ek != nil {
		rep.engineModes(ek, c, warnings, stderr)
	}
	fit := res.Fit
	rep.Fit = &fit
	rep.fill(res.History, false)
	return finishDecomp(cmd, rep, res, c)
}
