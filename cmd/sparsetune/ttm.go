package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/hetero"
)

func init() { register(newTTMCmd) }

func newTTMCmd(v *viper.Viper) *cobra.Command {
	return newKernelCmd(v, hetero.SpTTM,
		"ttm [FILE] [--mode N] [--rank R] [--devices cpu,opencl:0,cuda:0] [--format auto|coo|csr|ell|hyb] [--split peak|dynamic|random|cpu|acc] [--seed S] [--out Y.tns]",
		"Input-aware SpTTM Y = X ×ₙ U, split between the CPU and an accelerator",
		`Compute the SpTTM Y = X ×ₙ U of a tensor along mode n (1-based) with a
dense U (R x Iₙ) drawn from --seed, the way package engine does it:

  1. the slices of the mode-n fiber matrix are split between the CPU and
     the accelerator (--split: peak, the paper's calibrated formula;
     dynamic, both devices pull chunks as they go; random, the paper's
     baseline; cpu or acc, one device only). The split uses the devices'
     calibrated profiles; a device not yet calibrated is measured once,
     quickly, on first use (sparsetune calibrate measures in full);
  2. each device gets its storage format (--format forces one; auto takes
     a decision measured for this tensor by sparsetune predict --predictor
     measure, else the default model's prediction for the device);
  3. both run at once and the rows are gathered into one result.

An accelerator that fails has its slices redone on the CPU, with a
warning: the result is still exact. Ctrl-C stops the run and writes
nothing.

It prints per device the format, its share of the nonzeros and its times
(convert, setup, host-to-device, kernel, device-to-host, in all), then the
imbalance |t_c − t_g| / max(t_c, t_g), the time and the GFLOP/s (flops
2·nnz·R); --json prints the same as one object. --out writes Y as a sparse
tensor whose mode n indexes the rank (one entry per output fiber and rank
index). U is the same for every split and device, so results can be
compared across them.

--repeat K plans once and runs K times: the table shows the median run,
each device's conversion and setup paid once, and the spread of the runs,
so the warm balance (what a decomposition sees every iteration) can be
measured.

--verify then checks the result against the definition, computed on the
CPU in float64, and fails above a relative error of 1e-4.

Without FILE, ttm runs on the embedded sample tensor.`)
}
