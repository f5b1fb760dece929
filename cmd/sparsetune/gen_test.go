package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/train"
)

// matrixDir holds the shared SuiteSparse matrices.
var matrixDir = filepath.Join(dataDir, "suitesparse")

func skipWithoutMatrices(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(matrixDir); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
}

// TestGen writes a small set as .tns, checks the files against the
// manifest, and runs again to see every tensor skipped.
func TestGen(t *testing.T) {
	skipWithoutMatrices(t)
	out := filepath.Join(t.TempDir(), "set")
	args := []string{"gen", "--from", matrixDir, "--out", out, "--count", "6", "--seed", "3", "--max-nnz", "20000", "--format", "tns"}
	stdout, stderr, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 6 || !strings.HasPrefix(lines[5], "[6/6] ") {
		t.Fatalf("progress: want one line per tensor, found %q", stderr)
	}
	if !strings.Contains(stdout, "6 written") {
		t.Fatalf("stdout %q", stdout)
	}
	f, err := os.Open(filepath.Join(out, train.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := train.ReadManifest(f, train.ManifestName)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 6 {
		t.Fatalf("%d manifest lines, want 6", len(entries))
	}
	for _, e := range entries {
		x, err := formats.ReadFile(filepath.Join(out, e.File))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(e.File, ".tns") || x.NNZ() != e.NNZ || formats.FormatDims(x.Dims) != formats.FormatDims(e.Dims) || x.Order() != e.Order {
			t.Fatalf("%s: file %v with %d nonzeros, manifest %+v", e.File, x.Dims, x.NNZ(), e)
		}
	}
	stdout, stderr, err = run(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rep genReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, stdout)
	}
	if rep.Written != 0 || rep.Skipped != 6 || len(rep.Tensors) != 6 || strings.Count(stderr, "skipped") != 6 {
		t.Fatalf("second run: %+v\n%s", rep, stderr)
	}

	// Two lines of the manifest rebuild their tensors elsewhere, byte for
	// byte; a line whose checksum lies fails, naming the file.
	some := filepath.Join(t.TempDir(), "some.jsonl")
	var two strings.Builder
	if err := train.WriteManifest(&two, []train.Entry{entries[1], entries[4]}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(some, []byte(two.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "again")
	stdout, _, err = run(t, "gen", "--from", matrixDir, "--out", again, "--manifest", some)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "2 tensors in") || !strings.Contains(stdout, "2 written") {
		t.Fatalf("rebuild: stdout %q", stdout)
	}
	for _, e := range []train.Entry{entries[1], entries[4]} {
		a, err1 := os.ReadFile(filepath.Join(out, e.File))
		b, err2 := os.ReadFile(filepath.Join(again, e.File))
		if err1 != nil || err2 != nil || string(a) != string(b) {
			t.Fatalf("%s: rebuilt file differs from the original (%v, %v)", e.File, err1, err2)
		}
	}
	bad := entries[2]
	bad.CRC32C = "00000000"
	two.Reset()
	if err := train.WriteManifest(&two, []train.Entry{bad}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(some, []byte(two.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "gen", "--from", matrixDir, "--out", t.TempDir(), "--manifest", some)
	if err == nil || !strings.Contains(err.Error(), bad.File) || !strings.Contains(err.Error(), "the manifest says") {
		t.Fatalf("rebuild of a line with a wrong checksum: error %v", err)
	}
}

func TestGenErrors(t *testing.T) {
	skipWithoutMatrices(t)
	out := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--out", out, "--count", "2"}, "needs --from DIR"},
		{[]string{"--from", matrixDir, "--out", out}, "needs --count N"},
		{[]string{"--from", filepath.Join(out, "nowhere"), "--out", out, "--count", "2"}, "nowhere: no such file"},
		{[]string{"--from", dataDir, "--out", out, "--count", "2"}, "no MatrixMarket matrices"},
		{[]string{"--from", matrixDir, "--out", out, "--count", "2", "--format", "csv"}, "--format must be"},
		{[]string{"--from", matrixDir, "--out", out, "--count", "2", "--min-nnz", "50", "--max-nnz", "10"}, "--min-nnz and --max-nnz"},
		{[]string{"--from", matrixDir, "--out", out, "--preset", "bench", "--seed", "2"}, "--seed does not apply"},
		{[]string{"--from", matrixDir, "--out", out, "--preset", "huge"}, `unknown preset "huge"`},
		{[]string{"--from", filepath.Join(dataDir, "tensors"), "--out", out, "--preset", "bench"}, "bcsstk33.mtx: no such matrix file"},
		{[]string{"--from", matrixDir, "--out", out, "--manifest", filepath.Join(out, "none.jsonl")}, "none.jsonl: no such file"},
		{[]string{"--from", matrixDir, "--out", out, "--manifest", "m.jsonl", "--count", "3"}, "--count does not apply"},
		{[]string{"--from", matrixDir, "--out", out, "--manifest", "m.jsonl", "--preset", "bench"}, "give one"},
		{[]string{"--from", matrixDir, "--out", out, "--manifest", os.DevNull}, os.DevNull + ": the manifest lists no tensors"},
	}
	for _, c := range cases {
		_, _, err := run(t, append([]string{"gen"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("gen %v: error %v, want one line containing %q", c.args, err, c.want)
		}
	}
}
