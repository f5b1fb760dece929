package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/internal/npy"
	"github.com/sparsetune/sparsetune/mpi"
)

// smallTensor is the shared real tensor the decomposition commands run on:
// 14 x 55 x 14, 1992 nonzeros.
var smallTensor = filepath.Join(dataDir, "tensors", "kg_nations.tns")

func skipWithoutSmallTensor(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(smallTensor); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
}

// checkProgress checks one stderr line per iteration, each naming it.
func checkProgress(t *testing.T, stderr string, iters int, what string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != iters {
		t.Fatalf("%d progress lines for %d iterations:\n%s", len(lines), iters, stderr)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "iter ") || !strings.Contains(l, what) || !strings.Contains(l, "delta") {
			t.Fatalf("progress line %q", l)
		}
	}
}

// checkNPY reads path and checks its shape.
func checkNPY(t *testing.T, path string, shape []int) []float32 {
	t.Helper()
	got, data, err := npy.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, shape) {
		t.Fatalf("%s: shape %v, want %v", path, got, shape)
	}
	return data
}

func TestCPD(t *testing.T) {
	skipWithoutSmallTensor(t)
	prefix := filepath.Join(t.TempDir(), "nations")
	stdout, stderr, err := run(t, "cpd", smallTensor, "--rank", "3", "--iters", "4", "--tol", "0", "--seed", "5",
		"--format", "csf", "--out", prefix, "--json", "--threads", "2")
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, stderr, 4, "fit")
	var rep decompReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, stdout)
	}
	if rep.Fit == nil || *rep.Fit <= 0 || *rep.Fit > 1 || rep.Iterations != 4 || len(rep.History) != 4 ||
		rep.SecondsPerIteration <= 0 || rep.KernelSeconds <= 0 || rep.DenseSeconds <= 0 || rep.Converged {
		t.Fatalf("report %s", stdout)
	}
	for i, h := range rep.History {
		if h.Iteration != i+1 || h.Fit == nil || h.Seconds <= 0 {
			t.Fatalf("history %s", stdout)
		}
	}
	if *rep.History[3].Fit != *rep.Fit {
		t.Fatalf("final fit %v, last iteration's %v", *rep.Fit, *rep.History[3].Fit)
	}
	if !slices.Equal(rep.Formats, []string{"csf"}) || rep.Threads != 2 {
		t.Fatalf("formats %v threads %d", rep.Formats, rep.Threads)
	}
	for m, d := range []int{14, 55, 14} {
		checkNPY(t, filepath.Join(filepath.Dir(prefix), "nations.mode"+string(rune('1'+m))+".npy"), []int{d, 3})
	}
	lambda := checkNPY(t, prefix+".lambda.npy", []int{3})
	if len(rep.Files) != 4 || lambda[0] < lambda[2] || float64(lambda[0]) != float64(float32(rep.Lambda[0])) {
		t.Fatalf("files %v lambda %v (report %v)", rep.Files, lambda, rep.Lambda)
	}
	// The same request without --json prints a summary, and is
	// deterministic.
	stdout2, _, err := run(t, "cpd", smallTensor, "--rank", "3", "--iters", "4", "--tol", "0", "--seed", "5", "--format", "csf", "--threads", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout2, "CP-ALS of") || !strings.Contains(stdout2, "after 4 iterations (iteration limit)") {
		t.Fatalf("summary %q", stdout2)
	}
	fit, err := strconv.ParseFloat(strings.Fields(strings.SplitN(stdout2, "fit ", 2)[1])[0], 64)
	if err != nil || math.Abs(fit-*rep.Fit) > 1e-6 {
		t.Fatalf("summary fit %v (%v), JSON run's %v", fit, err, *rep.Fit)
	}
}

// TestCPDOptions runs the other initialisation, line search and a format
// per mode, stopping on --tol.
func TestCPDOptions(t *testing.T) {
	skipWithoutSmallTensor(t)
	stdout, stderr, err := run(t, "cpd", smallTensor, "--rank", "2", "--iters", "200", "--tol", "1e-3",
		"--init", "hosvd", "--line-search", "--format", "alto,coo,hicoo", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep decompReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Converged || rep.Iterations >= 200 || rep.Init != "hosvd" || len(rep.Formats) != 3 {
		t.Fatalf("report %s", stdout)
	}
	checkProgress(t, stderr, rep.Iterations, "fit")
}

// decompErrorCases are bad command lines shared by the decomposition
// commands: each must fail with one line containing want.
func decompErrorCases(t *testing.T, cmd string, rankFlag []string) []struct {
	args []string
	want string
} {
	dir := t.TempDir()
	matrix := filepath.Join(dir, "m.tns")
	if err := os.WriteFile(matrix, []byte("1 1 1.0\n2 3 2.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := append([]string{cmd, smallTensor}, rankFlag...)
	with := func(extra ...string) []string { return append(slices.Clone(base), extra...) }
	return []struct {
		args []string
		want string
	}{
		{[]string{cmd}, "missing FILE (usage: sparsetune " + cmd + " FILE"},
		{append([]string{cmd, filepath.Join(dir, "none.tns")}, rankFlag...), "no such file"},
		{append([]string{cmd, matrix}, rankFlag...), "order 2"},
		{with("--iters", "0"), "--iters must be >= 1"},
		{with("--tol", "-1"), "--tol must be >= 0"},
		{with("--init", "svd"), "--init must be random or hosvd"},
		{with("--threads", "-1"), "threads must be 0 (all cores) to "},
		{with("--threads", "100000"), "on this machine, found 100000"},
		// Before the run, not after it.
		{with("--out", filepath.Join(dir, "nowhere", "x")), filepath.Join(dir, "nowhere") + " does not exist"},
	}
}

func TestCPDErrors(t *testing.T) {
	skipWithoutSmallTensor(t)
	cases := append(decompErrorCases(t, "cpd", []string{"--rank", "2"}), []struct {
		args []string
		want string
	}{
		{[]string{"cpd", smallTensor}, "cpd needs --rank R"},
		{[]string{"cpd", smallTensor, "--rank", "0"}, "--rank must be >= 1"},
		{[]string{"cpd", smallTensor, "--rank", "-3"}, "--rank must be >= 1"},
		{[]string{"cpd", smallTensor, "--rank", "x"}, "invalid argument"},
		{[]string{"cpd", smallTensor, "--rank", "2", "--format", "ell"}, "--format \"ell\""},
		{[]string{"cpd", smallTensor, "--rank", "2", "--format", "csf,coo"}, "2 formats for a tensor of order 3"},
		{[]string{"cpd", smallTensor, "--rank", "20", "--init", "hosvd"}, "rank 20 exceeds dim 14 of mode 1"},
	}...)
	for _, c := range cases {
		_, _, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", c.args, err, c.want)
		}
	}
}

// TestResume continues each method from the files of an earlier run: the
// first iteration after --resume must fit about as well as the last one
// before it (ALS and HOOI do not decrease the fit; CP-APR does not
// decrease the log-likelihood).
func TestResume(t *testing.T) {
	skipWithoutSmallTensor(t)
	cases := []struct {
		cmd  []string
		like bool
	}{
		{[]string{"cpd", "--rank", "3"}, false},
		{[]string{"tucker", "--ranks", "3,3,2"}, false},
		{[]string{"cpapr", "--rank", "3"}, true},
	}
	for _, c := range cases {
		prefix := filepath.Join(t.TempDir(), "m")
		first := append([]string{c.cmd[0], smallTensor, "--iters", "6", "--tol", "0", "--json", "--out", prefix}, c.cmd[1:]...)
		stdout, _, err := run(t, first...)
		if err != nil {
			t.Fatal(err)
		}
		var a, b decompReport
		if err := json.Unmarshal([]byte(stdout), &a); err != nil {
			t.Fatal(err)
		}
		second := append([]string{c.cmd[0], smallTensor, "--iters", "1", "--json", "--resume", prefix}, c.cmd[1:]...)
		if stdout, _, err = run(t, second...); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(stdout), &b); err != nil {
			t.Fatal(err)
		}
		if b.Init != "resume" {
			t.Fatalf("%s: init %q", c.cmd[0], b.Init)
		}
		if c.like {
			if *b.LogLikelihood < *a.LogLikelihood-1e-6*math.Abs(*a.LogLikelihood) {
				t.Fatalf("%s: log-likelihood %v after resuming from %v", c.cmd[0], *b.LogLikelihood, *a.LogLikelihood)
			}
		} else if *b.Fit < *a.Fit-1e-5 {
			t.Fatalf("%s: fit %v after resuming from %v", c.cmd[0], *b.Fit, *a.Fit)
		}
	}
	_, _, err := run(t, "cpd", smallTensor, "--rank", "3", "--resume", filepath.Join(t.TempDir(), "none"))
	if err == nil || !strings.Contains(err.Error(), "--resume") || !strings.Contains(err.Error(), "none.mode1.npy") {
		t.Fatalf("missing resume files: %v", err)
	}
	prefix := filepath.Join(t.TempDir(), "r2")
	if _, _, err := run(t, "cpd", smallTensor, "--rank", "2", "--iters", "1", "--out", prefix); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "cpd", smallTensor, "--rank", "3", "--resume", prefix)
	if err == nil || !strings.Contains(err.Error(), "r2.mode1.npy is 14x2, expected 14x3 (rows: dim 1 of the tensor; columns: --rank 3)") {
		t.Fatalf("rank mismatch: %v", err)
	}
	// A Tucker model written over the CP one takes the prefix whole: the
	// CP weights go, and a CP method refuses to resume it.
	_, stderr, err := run(t, "tucker", smallTensor, "--ranks", "2,2,2", "--iters", "1", "--out", prefix)
	if err != nil || !strings.Contains(stderr, "removed "+prefix+".lambda.npy: left at "+prefix+" by an earlier model") {
		t.Fatalf("tucker over a CP model: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(prefix + ".lambda.npy"); err == nil {
		t.Error("the CP weights are still there")
	}
	_, _, err = run(t, "cpd", smallTensor, "--rank", "2", "--resume", prefix)
	if err == nil || !strings.Contains(err.Error(), "a Tucker model ("+prefix+".core.npy); CP methods resume CP models") {
		t.Errorf("cpd resuming a Tucker model: %v", err)
	}
	// Files of two models (as earlier builds could leave) are refused.
	if err := os.WriteFile(prefix+".lambda.npy", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "tucker", smallTensor, "--ranks", "2,2,2", "--resume", prefix)
	if err == nil || !strings.Contains(err.Error(), "files of two models") {
		t.Errorf("a prefix holding weights and a core: %v", err)
	}
	// A model of more modes than the tensor.
	if err := os.WriteFile(prefix+".mode4.npy", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "tucker", smallTensor, "--ranks", "2,2,2", "--resume", prefix)
	if err == nil || !strings.Contains(err.Error(), "mode4.npy exists: the model has more modes than the order-3 tensor") {
		t.Errorf("a model of more modes: %v", err)
	}
}

// Under mpirun, a binary built without the mpi tag says how to build one
// that distributes, instead of running P copies of the whole job.
func TestCPDUnderMPIRunWithoutMPI(t *testing.T) {
	if mpi.Built {
		t.Skip("built with MPI")
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	_, _, err := run(t, "cpd", filepath.Join(dataDir, "tensors", "kg_nations.tns"), "--rank", "2", "--iters", "1")
	if err == nil || !strings.Contains(err.Error(), "-tags mpi") {
		t.Errorf("cpd under mpirun without MPI: %v", err)
	}
}

// TestDecompInterrupted: Ctrl-C (a cancelled context) stops cpd, tucker
// and cpapr on the CPU, as it stops the engine's runs, and --out is not
// written.
func TestDecompInterrupted(t *testing.T) {
	dir := t.TempDir()
	in := writeRandomTensor(t, []int{12, 13, 14}, 300, 5)
	for _, args := range [][]string{
		{"cpd", in, "--rank", "3"},
		{"tucker", in, "--ranks", "2,2,2"},
		{"cpapr", in, "--rank", "3"},
	} {
		prefix := filepath.Join(dir, args[0])
		err := runInterrupted(append(args, "--out", prefix)...)
		if err == nil || !strings.Contains(err.Error(), in+": interrupted before the first iteration ended, nothing written") {
			t.Errorf("%s: err = %v", args[0], err)
		}
		if written, _ := filepath.Glob(prefix + "*"); len(written) != 0 {
			t.Errorf("%s: wrote %v", args[0], written)
		}
	}
}
