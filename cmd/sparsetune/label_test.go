package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/train"
)

// genTiny writes a set of two small tensors and returns its directory.
func genTiny(t *testing.T) string {
	t.Helper()
	skipWithoutMatrices(t)
	dir := filepath.Join(t.TempDir(), "set")
	if _, _, err := run(t, "gen", "--from", matrixDir, "--out", dir, "--count", "2", "--seed", "9", "--max-nnz", "2000"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLabel labels a tiny set, resumes it, and warns when a run appends
// under another build.
func TestLabel(t *testing.T) {
	dir := genTiny(t)
	out := filepath.Join(t.TempDir(), "labels.jsonl")
	args := []string{"label", "--in", dir, "--out", out, "--runs", "1", "--min-time", "-1ns", "--rank", "4"}
	stdout, stderr, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := train.ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	entries := readSetManifest(t, dir)
	want := 0
	for _, e := range entries {
		want += 2 * e.Order
	}
	if len(rows) != want || !strings.Contains(stdout, "rows written") || !strings.Contains(stdout, "cpu (cpu)") {
		t.Fatalf("%d rows, want %d; stdout %q", len(rows), want, stdout)
	}
	// One line per tensor, after the warning of a test binary, which
	// names no source (checked below).
	var progress []string
	for l := range strings.SplitSeq(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(l, "warning: this binary records no VCS revision") {
			progress = append(progress, l)
		}
	}
	if len(progress) != 2 || !strings.HasPrefix(progress[1], "[2/2] ") {
		t.Fatalf("progress: want one line per tensor, found %q", stderr)
	}
	for _, r := range rows {
		if r.Device != "cpu" || r.DeviceClass != "cpu" || r.Rank != 4 || r.Runs[r.Label] != 1 || r.Times[r.Label] <= 0 {
			t.Fatalf("row %+v", r)
		}
		if r.Source != entries[0].Source && r.Source != entries[1].Source {
			t.Fatalf("source %q", r.Source)
		}
	}
	// Again: every row found done.
	stdout, _, err = run(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rep labelReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, stdout)
	}
	if rep.Written != 0 || rep.Resumed != want || rep.Tensors != 2 {
		t.Fatalf("second run: %s", stdout)
	}
	// Rows of another build, the last one missing: the run that appends
	// warns.
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(data)), "\n")
	old := strings.ReplaceAll(strings.Join(lines[:len(lines)-1], ""), `"go":"`, `"go":"go1.0-`)
	if err := os.WriteFile(out, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err = run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "warning: "+out+" mixes builds") || !strings.Contains(stdout, "1 rows written") {
		t.Fatalf("mixed builds: stdout %q stderr %q", stdout, stderr)
	}
	// A test binary names no source; a label run says so.
	if known := train.CurrentBuild().Known(); known == strings.Contains(stderr, "records no VCS revision or module version") {
		t.Errorf("build known %v, stderr %q", known, stderr)
	}
	rows, err = train.ReadLabels(out)
	if err != nil || len(rows) != want || len(train.MixedBuilds(rows)) != 2 {
		t.Fatalf("%d rows, %v, builds %q", len(rows), err, train.MixedBuilds(rows))
	}
}

// TestLabelOpenCL labels on opencl:0 too when SPARSETUNE_OPENCL_TESTS=1.
func TestLabelOpenCL(t *testing.T) {
	if os.Getenv("SPARSETUNE_OPENCL_TESTS") != "1" {
		t.Skip("SPARSETUNE_OPENCL_TESTS is not 1: skipping the OpenCL rows")
	}
	dir := genTiny(t)
	out := filepath.Join(t.TempDir(), "labels.jsonl")
	if _, _, err := run(t, "label", "--in", dir, "--out", out, "--runs", "1", "--devices", "cpu,opencl:0", "--ops", "mttkrp", "--limit", "1"); err != nil {
		t.Fatal(err)
	}
	rows, err := train.ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	cl := 0
	for _, r := range rows {
		if r.Device == "opencl:0" && strings.HasPrefix(r.DeviceClass, "opencl-") && r.Op == "mttkrp" {
			cl++
		}
	}
	if cl == 0 || cl*2 != len(rows) {
		t.Fatalf("%d opencl rows of %d", cl, len(rows))
	}
}

func readSetManifest(t *testing.T, dir string) []train.Entry {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, train.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := train.ReadManifest(f, train.ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestLabelErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "labels.jsonl")
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"tensor\":\"x\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.tns"), []byte("1 1 1 1.0\n2 2 2 2.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--out", out}, "needs --in DIR"},
		{[]string{"--in", dir}, "needs --in DIR (the tensors) and --out FILE"},
		{[]string{"--in", dir, "--out", out, "--ops", "ttm,spmv"}, `--ops: unknown op "spmv"`},
		{[]string{"--in", dir, "--out", out, "--ops", "ttm,ttm"}, "--ops: ttm given twice"},
		{[]string{"--in", dir, "--out", out, "--devices", "tpu"}, `--devices: unknown device "tpu"`},
		{[]string{"--in", dir, "--out", out, "--devices", "metal:0"}, `--devices: device metal:0: unknown backend`},
		{[]string{"--in", dir, "--out", out, "--devices", "cpu,,opencl:0"}, "--devices: expected distinct names"},
		{[]string{"--in", dir, "--out", out, "--rank", "0"}, "--rank: expected at least 1"},
		{[]string{"--in", dir, "--out", out, "--runs", "0"}, "--runs: expected at least 1"},
		{[]string{"--in", dir, "--out", out, "--run-budget", "-2s"}, "--run-budget: expected 0 or a positive"},
		{[]string{"--in", dir, "--out", out, "--limit", "-1"}, "--limit: expected 0"},
		{[]string{"--in", filepath.Join(dir, "nowhere"), "--out", out}, "nowhere: no such file"},
		{[]string{"--in", t.TempDir(), "--out", out}, "no manifest.jsonl and no tensor files"},
		{[]string{"--in", dir, "--out", bad}, "bad.jsonl:1: source: expected"},
	}
	for _, c := range cases {
		_, _, err := run(t, append([]string{"label"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(oneLine(err), "\n") || strings.Contains(err.Error(), "\n") {
			t.Errorf("label %v: error %v, want one line containing %q", c.args, err, c.want)
		}
	}
}
