package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/npy"
)

// TestKernelRepeat: ttm and mttkrp --repeat K plan once and run K times:
// the result equals a single run's, the report has K run times, the
// plan's binding once, and the median run's devices.
func TestKernelRepeat(t *testing.T) {
	devices := kernelEnv(t)
	dir := t.TempDir()
	in := writeKernelTensor(t, dir, []int{30, 20, 25}, 3000, 3)
	for _, tc := range []struct {
		op, split, ext string
	}{
		{"ttm", "peak", ".tns"},
		{"ttm", "dynamic", ".tns"},
		{"mttkrp", "peak", ".npy"},
		{"mttkrp", "dynamic", ".npy"},
		{"mttkrp", "cpu", ".npy"},
	} {
		what := tc.op + " split " + tc.split
		once := filepath.Join(dir, tc.op+"-once"+tc.ext)
		kernelJSON(t, tc.op, in, "--mode", "2", "--rank", "4", "--devices", devices, "--split", tc.split, "--out", once)
		many := filepath.Join(dir, tc.op+"-many"+tc.ext)
		rep := kernelJSON(t, tc.op, in, "--mode", "2", "--rank", "4", "--devices", devices, "--split", tc.split, "--repeat", "3", "--out", many)
		if tc.op == "ttm" {
			if d := relDiff(semiSparseValues(t, many), semiSparseValues(t, once)); d > 1e-4 {
				t.Errorf("%s: --repeat 3 differs from one run by %.2e", what, d)
			}
		} else {
			_, a, err := npy.ReadFile(many)
			if err != nil {
				t.Fatal(err)
			}
			_, b, err := npy.ReadFile(once)
			if err != nil {
				t.Fatal(err)
			}
			if d := relDiffSlices(a, b); d > 1e-4 {
				t.Errorf("%s: --repeat 3 differs from one run by %.2e", what, d)
			}
		}
		checkKernelReport(t, rep, devices, tc.split)
		if rep.Repeat != 3 || len(rep.RunsSeconds) != 3 || rep.BindSeconds <= 0 {
			t.Errorf("%s: repeat %d, runs %v, bind %v", what, rep.Repeat, rep.RunsSeconds, rep.BindSeconds)
		}
		sorted := slices.Clone(rep.RunsSeconds)
		slices.Sort(sorted)
		if rep.RunSeconds != sorted[1] {
			t.Errorf("%s: run_seconds %v is not the median of %v", what, rep.RunSeconds, rep.RunsSeconds)
		}
		var convert float64
		for _, d := range rep.Devices {
			convert += d.ConvertSeconds
		}
		if convert <= 0 {
			t.Errorf("%s: the plan's conversion is not reported: %+v", what, rep.Devices)
		}
	}
	// The table says what was repeated.
	stdout, _, err := run(t, "mttkrp", in, "--devices", devices, "--repeat", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "2 runs of one plan") {
		t.Errorf("table:\n%s", stdout)
	}
	if _, _, err := run(t, "ttm", in, "--repeat", "0"); err == nil || !strings.Contains(err.Error(), "--repeat") {
		t.Errorf("--repeat 0: err = %v", err)
	}
}

// TestCPDDevices: cpd --devices runs CP-ALS through the engine for every
// split: the fit is the default CPU path's within 1e-3, and the summary
// names each mode's formats per device; the default stays the CPU path.
func TestCPDDevices(t *testing.T) {
	skipWithoutSmallTensor(t)
	devices := kernelEnv(t)
	args := []string{"cpd", smallTensor, "--rank", "4", "--iters", "5", "--tol", "0", "--seed", "2", "--json"}
	stdout, _, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var base decompReport
	if err := json.Unmarshal([]byte(stdout), &base); err != nil {
		t.Fatal(err)
	}
	if base.Split != "" || base.ModeDevices != nil || !slices.Equal(base.Formats, []string{"alto"}) {
		t.Fatalf("default cpd left the CPU path: split %q, formats %v", base.Split, base.Formats)
	}
	runs := [][]string{{"--format", "auto"}, {"--devices", "cpu"}}
	for _, s := range hetero.Strategies() {
		runs = append(runs, []string{"--devices", devices, "--split", s})
	}
	runs = append(runs, []string{"--devices", devices, "--format", "coo"})
	for _, extra := range runs {
		what := strings.Join(extra, " ")
		stdout, stderr, err := run(t, append(slices.Clone(args), extra...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, stderr)
		}
		var rep decompReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, stdout)
		}
		if d := math.Abs(*rep.Fit - *base.Fit); !(d <= 1e-3) {
			t.Errorf("%s: fit %.6f, the CPU path's %.6f", what, *rep.Fit, *base.Fit)
		}
		if rep.Iterations != 5 || len(rep.History) != 5 || rep.SetupSeconds <= 0 || len(rep.Formats) != 3 {
			t.Errorf("%s: iterations %d, setup %v, formats %v", what, rep.Iterations, rep.SetupSeconds, rep.Formats)
		}
		if len(rep.ModeDevices) != 3 || rep.Split == "" {
			t.Fatalf("%s: split %q, mode devices %+v", what, rep.Split, rep.ModeDevices)
		}
		for _, m := range rep.ModeDevices {
			if m.Runs != 5 || len(m.Devices) != len(rep.Devices) {
				t.Errorf("%s: mode %d: %d runs, %d devices for %v", what, m.Mode, m.Runs, len(m.Devices), rep.Devices)
			}
			for _, d := range m.Devices {
				if d.Format == "" && d.NNZShare > 0 || d.Failed != "" {
					t.Errorf("%s: mode %d: %+v", what, m.Mode, d)
				}
				if extra[len(extra)-1] == "coo" && (d.Format != "coo" || d.FormatSource != "forced") {
					t.Errorf("%s: mode %d: %s runs %s (%s)", what, m.Mode, d.Device, d.Format, d.FormatSource)
				}
			}
		}
	}
	// A text summary has a line per mode; bad flags give one line.
	stdout, _, err = run(t, "cpd", smallTensor, "--rank", "2", "--iters", "2", "--devices", devices)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(stdout, "\nmode ") != 3 {
		t.Errorf("text summary:\n%s", stdout)
	}
	for _, bad := range [][]string{{"--split", "half"}, {"--devices", "cpu", "--format", "csf,coo,alto"}, {"--devices", "nosuch:0"}} {
		_, _, err := run(t, append([]string{"cpd", smallTensor, "--rank", "2", "--iters", "1"}, bad...)...)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: err = %v", bad, err)
		}
	}
}

// TestCPAPRDevices: cpapr --devices computes Φ on the accelerator listed
// (the first OpenCL device, where there is one), with the CPU run's model
// to float32's rounding; the CPU alone keeps the CPU's forms, and a device
// that is not there is a one-line error.
func TestCPAPRDevices(t *testing.T) {
	skipWithoutSmallTensor(t)
	devices := kernelEnv(t)
	args := []string{"cpapr", smallTensor, "--rank", "3", "--iters", "4", "--tol", "0", "--json"}
	stdout, _, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var base decompReport
	if err := json.Unmarshal([]byte(stdout), &base); err != nil {
		t.Fatal(err)
	}
	for _, list := range []string{"cpu", devices} {
		stdout, stderr, err := run(t, append(slices.Clone(args), "--devices", list)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", list, err, stderr)
		}
		var rep decompReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(*rep.LogLikelihood - *base.LogLikelihood); !(d <= 1e-4*math.Abs(*base.LogLikelihood)) {
			t.Errorf("--devices %s: log-likelihood %v, the CPU's %v", list, *rep.LogLikelihood, *base.LogLikelihood)
		}
		names := strings.Split(list, ",")
		want := "coo"
		if len(names) > 1 {
			want = "coo@" + names[1]
		}
		if !slices.Equal(rep.Devices, names) || len(rep.Formats) != 3 || rep.Formats[0] != want {
			t.Errorf("--devices %s: devices %v, formats %v, want %s", list, rep.Devices, rep.Formats, want)
		}
	}
	if _, _, err := run(t, "cpapr", smallTensor, "--rank", "2", "--devices", "cpu,nosuch:3"); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("a device that is not there: %v", err)
	}
}

// TestTuckerDevices: tucker --devices runs the TTM chains' SpTTMs through
// the engine: the fit is the CPU path's, and the summary gives each
// mode's split and formats per device.
func TestTuckerDevices(t *testing.T) {
	skipWithoutSmallTensor(t)
	devices := kernelEnv(t)
	args := []string{"tucker", smallTensor, "--ranks", "3,3,2", "--iters", "4", "--tol", "0", "--json"}
	stdout, _, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var base decompReport
	if err := json.Unmarshal([]byte(stdout), &base); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{{"--devices", "cpu"}, {"--devices", devices}, {"--devices", devices, "--format", "coo"}} {
		what := strings.Join(extra, " ")
		stdout, stderr, err := run(t, append(slices.Clone(args), extra...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, stderr)
		}
		var rep decompReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d := math.Abs(*rep.Fit - *base.Fit); !(d <= 1e-4) {
			t.Errorf("%s: fit %.6f, the CPU path's %.6f", what, *rep.Fit, *base.Fit)
		}
		if len(rep.ModeDevices) != 3 || rep.Split == "" || strings.Contains(stderr, "on the CPU only") {
			t.Errorf("%s: split %q, mode devices %+v; stderr %s", what, rep.Split, rep.ModeDevices, stderr)
		}
		for _, m := range rep.ModeDevices {
			for _, d := range m.Devices {
				if d.Format == "" || (len(extra) > 2 && d.Format != "coo") {
					t.Errorf("%s: mode %d: %+v", what, m.Mode, d)
				}
			}
		}
	}
}
