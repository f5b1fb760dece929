//go:build mpi

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/train"
)

const cpdChildEnv = "SPARSETUNE_CPD_MPI_CHILD"

// TestCPDUnderMPIRun runs `cpd --json` as a job of 1, 2 and 4 ranks on a
// real tensor written as .stb (each rank reads its byte ranges) and holds
// rank 0's report to the single-process run.
func TestCPDUnderMPIRun(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not found (apt-get install openmpi-bin)")
	}
	src := filepath.Join(dataDir, "tensors", "kg_wn11.tns")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	stb := filepath.Join(t.TempDir(), "wn11.stb")
	if _, _, err := run(t, "convert", src, stb); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "cpd", stb, "--rank", "8", "--iters", "8", "--seed", "5", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var single struct{ Fit float64 }
	if err := json.Unmarshal([]byte(out), &single); err != nil {
		t.Fatal(err)
	}
	for _, job := range []struct {
		np   int
		auto bool // --format auto: each rank's formats predicted for its block
	}{{1, false}, {2, false}, {4, false}, {2, true}} {
		np := job.np
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		cmd := exec.CommandContext(ctx, "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(np),
			os.Args[0], "-test.run=^TestCPDRank$", "-test.count=1")
		// Rank 0 writes its report to a file: mpirun interleaves the
		// ranks' output streams, even within one write.
		report := filepath.Join(t.TempDir(), "report.json")
		cmd.Env = append(os.Environ(), cpdChildEnv+"="+stb, fmt.Sprintf("%s_AUTO=%v", cpdChildEnv, job.auto), cpdChildEnv+"_REPORT="+report)
		got, err := cmd.CombinedOutput()
		hung := ctx.Err() != nil
		cancel()
		if hung {
			t.Fatalf("mpirun -np %d hung: killed after 120 s\n%s", np, got)
		}
		if err != nil {
			t.Fatalf("mpirun -np %d: %v\n%s", np, err, got)
		}
		data, err := os.ReadFile(report)
		if err != nil {
			t.Fatalf("mpirun -np %d: no report (%v)\n%s", np, err, got)
		}
		var rep struct {
			Fit         float64
			Ranks       int
			Grid        []int
			CommSeconds float64 `json:"comm_seconds"`
			CommBytes   int64   `json:"comm_bytes"`
			Imbalance   *float64
			History     []json.RawMessage
			Formats     []string
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatalf("mpirun -np %d: %v in\n%s", np, err, data)
		}
		if math.Abs(rep.Fit-single.Fit) > 1e-3 || rep.Ranks != np || len(rep.Grid) != 3 || rep.Imbalance == nil || len(rep.History) == 0 {
			t.Errorf("mpirun -np %d: %+v; single-process fit %.6f", np, rep, single.Fit)
		}
		if job.auto && len(rep.Formats) != 3 {
			t.Errorf("mpirun -np %d --format auto: formats %v, want one per mode", np, rep.Formats)
		}
	}
}

// TestCPDRank is one rank of TestCPDUnderMPIRun's jobs: it prints rank
// 0's JSON report on stdout.
func TestCPDRank(t *testing.T) {
	stb := os.Getenv(cpdChildEnv)
	if stb == "" {
		t.Skip("runs as a rank of an mpirun job started by TestCPDUnderMPIRun")
	}
	args := []string{"cpd", stb, "--rank", "8", "--iters", "8", "--seed", "5", "--json"}
	if os.Getenv(cpdChildEnv+"_AUTO") == "true" {
		args = append(args, "--format", "auto")
	}
	out, _, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if out != "" { // rank 0
		if err := os.WriteFile(os.Getenv(cpdChildEnv+"_REPORT"), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const labelChildEnv = "SPARSETUNE_LABEL_MPI_CHILD"

// TestLabelUnderMPIRun: `label` as a job of 2 ranks shares the tensors,
// and rank 0 merges the rows into one file holding what a single run
// writes; a second job finds everything done.
func TestLabelUnderMPIRun(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not found (apt-get install openmpi-bin)")
	}
	matrices := filepath.Join(dataDir, "suitesparse")
	if _, err := os.Stat(matrices); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	dir := t.TempDir()
	set := filepath.Join(dir, "set")
	if _, _, err := run(t, "gen", "--from", matrices, "--out", set, "--count", "5", "--max-nnz", "3000", "--seed", "2"); err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(dir, "single.jsonl")
	if _, _, err := run(t, "label", "--in", set, "--out", single, "--ops", "mttkrp", "--runs", "1", "--threads", "1"); err != nil {
		t.Fatal(err)
	}
	want, err := train.ReadLabels(single)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "labels.jsonl")
	for job := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		cmd := exec.CommandContext(ctx, "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
			os.Args[0], "-test.run=^TestLabelRank$", "-test.count=1")
		cmd.Env = append(os.Environ(), labelChildEnv+"="+set+","+out)
		got, err := cmd.CombinedOutput()
		hung := ctx.Err() != nil
		cancel()
		if hung {
			t.Fatalf("job %d hung: killed after 120 s\n%s", job+1, got)
		}
		if err != nil {
			t.Fatalf("job %d: %v\n%s", job+1, err, got)
		}
		rows, err := train.ReadLabels(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(want) {
			t.Errorf("job %d: %d rows merged, a single run writes %d", job+1, len(rows), len(want))
		}
		if job == 1 && !strings.Contains(string(got), " 0 rows written") {
			t.Errorf("the second job measured again:\n%s", got)
		}
	}
	if parts, _ := filepath.Glob(out + ".part-*"); len(parts) != 0 {
		t.Errorf("part files left: %v", parts)
	}
}

// TestLabelRank is one rank of TestLabelUnderMPIRun's jobs.
func TestLabelRank(t *testing.T) {
	env := os.Getenv(labelChildEnv)
	if env == "" {
		t.Skip("runs as a rank of an mpirun job started by TestLabelUnderMPIRun")
	}
	set, out, _ := strings.Cut(env, ",")
	stdout, _, err := run(t, "label", "--in", set, "--out", out, "--ops", "mttkrp", "--runs", "1", "--threads", "1")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(stdout)
}
