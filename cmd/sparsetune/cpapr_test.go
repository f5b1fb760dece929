package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCPAPR(t *testing.T) {
	skipWithoutSmallTensor(t)
	prefix := filepath.Join(t.TempDir(), "nations")
	stdout, stderr, err := run(t, "cpapr", smallTensor, "--rank", "3", "--iters", "5", "--tol", "0", "--inner", "5",
		"--out", prefix, "--json")
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, stderr, 5, "loglik")
	var rep decompReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, stdout)
	}
	if rep.LogLikelihood == nil || rep.KKTViolation == nil || rep.Fit != nil || rep.Iterations != 5 || rep.Method != "CP-APR" {
		t.Fatalf("report %s", stdout)
	}
	for i, h := range rep.History {
		if h.LogLikelihood == nil || h.KKTViolation == nil || h.Fit != nil {
			t.Fatalf("history %s", stdout)
		}
		if i > 0 && *h.LogLikelihood < *rep.History[i-1].LogLikelihood-1e-9*math.Abs(*h.LogLikelihood) {
			t.Fatalf("log-likelihood dropped: %s", stdout)
		}
	}
	for m, d := range []int{14, 55, 14} {
		data := checkNPY(t, rep.Files[m], []int{d, 3})
		for _, v := range data {
			if v < 0 {
				t.Fatalf("mode %d: negative entry %v", m+1, v)
			}
		}
	}
	checkNPY(t, prefix+".lambda.npy", []int{3})
	if len(rep.Formats) != 3 {
		t.Fatalf("formats %v, want the Φ form of each of 3 modes", rep.Formats)
	}
	// A forced form is the one used, with the same model.
	out, _, err := run(t, "cpapr", smallTensor, "--rank", "3", "--iters", "5", "--tol", "0", "--inner", "5", "--format", "csf", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var csf decompReport
	if err := json.Unmarshal([]byte(out), &csf); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(csf.Formats, []string{"csf", "csf", "csf"}) || math.Abs(*csf.LogLikelihood-*rep.LogLikelihood) > 1e-6*math.Abs(*rep.LogLikelihood) {
		t.Fatalf("--format csf: formats %v, log-likelihood %v against %v", csf.Formats, *csf.LogLikelihood, *rep.LogLikelihood)
	}
	stdout, _, err = run(t, "cpapr", smallTensor, "--rank", "2", "--iters", "3")
	if err != nil || !strings.Contains(stdout, "CP-APR of") || !strings.Contains(stdout, "log-likelihood") {
		t.Fatalf("%v: %q", err, stdout)
	}
}

func TestCPAPRErrors(t *testing.T) {
	skipWithoutSmallTensor(t)
	neg := filepath.Join(t.TempDir(), "neg.tns")
	if err := os.WriteFile(neg, []byte("1 1 1 2\n2 2 2 -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := append(decompErrorCases(t, "cpapr", []string{"--rank", "2"}), []struct {
		args []string
		want string
	}{
		{[]string{"cpapr", smallTensor}, "cpapr needs --rank R"},
		{[]string{"cpapr", smallTensor, "--rank", "0"}, "--rank must be >= 1"},
		{[]string{"cpapr", smallTensor, "--rank", "2", "--inner", "0"}, "--inner must be >= 1"},
		{[]string{"cpapr", smallTensor, "--rank", "2", "--init", "hosvd"}, "init must be random"},
		{[]string{"cpapr", neg, "--rank", "2"}, "has value -1: CP-APR models counts"},
		{[]string{"cpapr", smallTensor, "--rank", "2", "--format", "alto"}, `--format "alto": expected one of auto, coo, csf`},
	}...)
	for _, c := range cases {
		_, _, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", c.args, err, c.want)
		}
	}
}
