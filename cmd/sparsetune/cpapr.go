package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/decomp"
	"github.com/sparsetune/sparsetune/hetero"
)

func init() { register(newCPAPRCmd) }

func newCPAPRCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cpapr FILE --rank R [--iters K] [--inner J] [--tol T] [--seed S] [--format auto|coo|csf] [--out PREFIX]",
		Short: "Non-negative CP decomposition of count data (CP-APR, multiplicative updates)",
		Long: `Compute a rank-R non-negative CP model of a tensor of counts (values >= 0)
by maximising the Poisson log-likelihood, with Chi and Kolda's alternating
Poisson regression and multiplicative updates (CP-APR MU).

Each outer iteration updates every mode with up to --inner multiplicative
updates. It stops when the KKT violation of every mode's subproblem is
below --tol at its first check, or after --iters outer iterations. That
test is on each factor weighted by the components' totals, as the Tensor
Toolbox's cp_apr does; the KKT violation printed is of the factors as
written (columns summing to 1), so it can be below --tol while the run
goes on, or above it when the run stops. A progress line per outer
iteration (log-likelihood, its change, KKT violation) goes to stderr; the
log-likelihood leaves out the constant -Σ log x!.

Φ, the kernel of every inner update, is computed per mode over the nonzeros
sorted by the mode (coo, with the other modes' factor-row products cached
per nonzero while nnz·R <= 2^24) or a CSF tree rooted at the mode (csf,
with those products formed once per fiber). By default coo while the cache
fits and csf beyond, where they cross on most tensors; --format auto times
one inner update of each on the first outer iteration and keeps the faster
per mode (two runs may then round differently). The report's formats say
which.

--out PREFIX writes the factors as NumPy float32 arrays, PREFIX.mode1.npy
… (Dims[n] x R, C order, columns summing to 1), and the component totals
as PREFIX.lambda.npy. docs/decomp.md describes the algorithm.`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := decompConfigFrom(v, "cpapr", cmd)
			if err != nil {
				return err
			}
			if err := checkRank(cmd, c.rank); err != nil {
				return err
			}
			inner := v.GetInt("cpapr.inner")
			if inner < 1 {
				return fmt.Errorf("--inner must be >= 1, found %d", inner)
			}
			phi := v.GetString("cpapr.format")
			if phi != "" && !slices.Contains(decomp.PhiFormats, phi) {
				return fmt.Errorf("--format %q: expected one of %s", phi, strings.Join(decomp.PhiFormats, ", "))
			}
			return runCPAPR(cmd, args[0], c, inner, phi)
		},
	}
	f := cmd.Flags()
	f.Int("rank", 0, "rank R: number of components (required)")
	addDecompFlags(cmd, v, "cpapr", "random")
	f.Int("inner", 10, "largest number of multiplicative updates per mode and outer iteration")
	f.String("format", "", "layout Φ is computed over: coo, csf, or auto (the faster per mode, timed on the first iteration); default: coo while nnz·R <= 2^24, else csf")
	for _, name := range []string{"rank", "inner", "format"} {
		_ = v.BindPFlag("cpapr."+name, f.Lookup(name))
	}
	return cmd
}

func runCPAPR(cmd *cobra.Command, path string, c decompConfig, inner int, phi string) error {
	x, read, init, _, err := readForDecomp(cmd.ErrOrStderr(), path, c, nil)
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	dev, devices, err := phiDevice(stderr, c)
	if err != nil {
		return err
	}
	if dev != nil && phi != "" && phi != decomp.PhiCOO {
		// The accelerator's Φ has the COO form only (docs/decomp.md).
		fmt.Fprintf(stderr, "note: --format %s is not used: %s computes every Φ, over COO only\n", phi, devices[len(devices)-1])
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := decomp.CPAPR(x, decomp.Options{Rank: c.rank, Iters: c.iters, Tol: c.tol, Seed: c.seed, Init: c.init,
		InitFactors: init,
		Threads:     c.threads, APR: decomp.APROptions{InnerIters: inner, Format: phi, Device: dev},
		Progress: func(s decomp.IterStat) { printIter(stderr, s, true) }, Context: ctx})
	if errors.Is(err, context.Canceled) {
		if res == nil {
			return interrupted(cmd.ErrOrStderr(), path, nil, 0, c)
		}
		return interrupted(cmd.ErrOrStderr(), path, res, res.Iterations, c)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rep := &decompReport{Method: "CP-APR", File: path, Dims: x.Dims, NNZ: x.NNZ(), Rank: c.rank,
		Init: c.initName(), Converged: res.Converged, Seconds: time.Since(start).Seconds(), SetupSeconds: res.SetupSeconds,
		ReadSeconds: read.Seconds(), Threads: resolvedThreads(c.threads), Lambda: res.Lambda}
	ll, kkt := res.LogLikelihood, res.KKTViolation
	rep.LogLikelihood, rep.KKTViolation = &ll, &kkt
	rep.Formats = res.PhiFormats
	rep.Devices, rep.Warnings = devices, res.Warnings
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	rep.fill(res.History, true)
	return finishDecomp(cmd, rep, res, c)
}

// phiDevice returns the accelerator --devices names for CP-APR's Φ (the
// first one listed; nil for the CPU alone) and the devices the run uses.
// Φ runs on one device at a time: CP-APR's inner updates depend on each
// other, so there is nothing to split between the CPU and an
// accelerator within one, as the engine does for CP-ALS's MTTKRPs.
func phiDevice(stderr io.Writer, c decompConfig) (hetero.PhiDevice, []string, error) {
	if c.devices == "" {
		return nil, nil, nil
	}
	names, _ := parseDevices(c.devices)
	for _, name := range names {
		if name == "cpu" {
			continue
		}
		d, err := hetero.Lookup(name, c.threads)
		if err != nil {
			return nil, nil, fmt.Errorf("--devices: %w", err)
		}
		pd, ok := d.(hetero.PhiDevice)
		if !ok {
			return nil, nil, fmt.Errorf("--devices: %s computes no CP-APR Φ", name)
		}
		if len(names) > 2 || (len(names) == 2 && !slices.Contains(names, "cpu")) {
			fmt.Fprintf(stderr, "note: --devices %s: cpapr computes Φ on one accelerator, %s; the CPU runs the updates\n", c.devices, name)
		}
		return pd, []string{"cpu", name}, nil
	}
	return nil, []string{"cpu"}, nil
}
