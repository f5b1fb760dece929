package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTucker(t *testing.T) {
	skipWithoutSmallTensor(t)
	prefix := filepath.Join(t.TempDir(), "nations")
	stdout, stderr, err := run(t, "tucker", smallTensor, "--ranks", "3,4,2", "--iters", "3", "--tol", "0",
		"--out", prefix, "--json", "--format", "hyb")
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, stderr, 3, "fit")
	var rep decompReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, stdout)
	}
	if rep.Fit == nil || *rep.Fit <= 0 || *rep.Fit > 1 || rep.Iterations != 3 || !slices.Equal(rep.Ranks, []int{3, 4, 2}) ||
		rep.Init != "hosvd" || rep.Method != "Tucker-HOOI" || len(rep.Files) != 4 {
		t.Fatalf("report %s", stdout)
	}
	for m, shape := range [][]int{{14, 3}, {55, 4}, {14, 2}} {
		checkNPY(t, rep.Files[m], shape)
	}
	core := checkNPY(t, prefix+".core.npy", []int{3, 4, 2})
	if len(core) != 24 {
		t.Fatalf("core of %d values", len(core))
	}
	stdout, _, err = run(t, "tucker", smallTensor, "--ranks", "2,2,2", "--iters", "2", "--init", "random")
	if err != nil || !strings.Contains(stdout, "Tucker-HOOI of") {
		t.Fatalf("%v: %q", err, stdout)
	}
}

// TestTuckerOneRank checks that one --ranks value is every mode's: the
// same model as the rank spelt out per mode.
func TestTuckerOneRank(t *testing.T) {
	skipWithoutSmallTensor(t)
	var reps [2]decompReport
	for i, ranks := range []string{"2", "2,2,2"} {
		stdout, _, err := run(t, "tucker", smallTensor, "--ranks", ranks, "--iters", "2", "--tol", "0", "--json")
		if err != nil {
			t.Fatalf("--ranks %s: %v", ranks, err)
		}
		if err := json.Unmarshal([]byte(stdout), &reps[i]); err != nil {
			t.Fatalf("bad JSON: %v\n%s", err, stdout)
		}
	}
	if !slices.Equal(reps[0].Ranks, []int{2, 2, 2}) || reps[0].Fit == nil || reps[1].Fit == nil || *reps[0].Fit != *reps[1].Fit {
		t.Fatalf("--ranks 2: ranks %v fit %v; --ranks 2,2,2: fit %v", reps[0].Ranks, reps[0].Fit, reps[1].Fit)
	}
}

func TestTuckerErrors(t *testing.T) {
	skipWithoutSmallTensor(t)
	cases := append(decompErrorCases(t, "tucker", []string{"--ranks", "2,2,2"}), []struct {
		args []string
		want string
	}{
		{[]string{"tucker", smallTensor}, "needs --ranks"},
		{[]string{"tucker", smallTensor, "--ranks", "2,x,2"}, "each rank must be an integer >= 1"},
		{[]string{"tucker", smallTensor, "--ranks", "2,0,2"}, "each rank must be an integer >= 1"},
		{[]string{"tucker", smallTensor, "--ranks", "2,2"}, "needs 3 ranks"},
		{[]string{"tucker", smallTensor, "--ranks", "15,2,2"}, "rank 15 of mode 1 exceeds its dim 14"},
		{[]string{"tucker", smallTensor, "--ranks", "2,5,2"}, "exceeds 4, the product of the other ranks"},
		{[]string{"tucker", smallTensor, "--ranks", "2,2,2", "--format", "alto"}, "--format must be one of csr"},
	}...)
	for _, c := range cases {
		_, _, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", c.args, err, c.want)
		}
	}
}
