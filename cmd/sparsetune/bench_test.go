package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

// writeRandomTensor writes a random order-len(dims) tensor: a tensor bench
// has never seen.
func writeRandomTensor(t *testing.T, dims []int, nnz int, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	x, err := formats.NewCOO(dims, nnz)
	if err != nil {
		t.Fatal(err)
	}
	idx := make([]uint32, len(dims))
	for range nnz {
		for m, d := range dims {
			idx[m] = uint32(rng.IntN(d))
		}
		x.Append(idx, rng.Float32())
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("random%d.tns", len(dims)))
	if err := formats.WriteFile(path, x); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchJSON runs bench on unseen tensors of orders 3 and 4 and checks
// a full table: every op, mode and format, times and rates finite and
// positive, one fastest format per op and mode.
func TestBenchJSON(t *testing.T) {
	for _, dims := range [][]int{{50, 40, 30}, {20, 15, 10, 12}} {
		path := writeRandomTensor(t, dims, 4000, uint64(len(dims)))
		out, _, err := run(t, "bench", path, "--json", "--iters", "2", "--probe=false", "--rank", "8")
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if want := 2 * len(dims) * 4; len(rows) != want {
			t.Fatalf("%d rows, want %d", len(rows), want)
		}
		fastest := map[string]int{}
		seen := map[string]bool{}
		for _, r := range rows {
			key := fmt.Sprintf("%v/%v", r["op"], r["mode"])
			seen[key+"/"+r["format"].(string)] = true
			if r["fastest"] == true {
				fastest[key]++
			}
			if r["device"] != "cpu" || r["rank"] != 8.0 {
				t.Errorf("%s: device %v rank %v", key, r["device"], r["rank"])
			}
			if s, _ := r["skipped"].(string); s != "" {
				continue
			}
			for _, f := range []string{"seconds", "gflops", "gb_per_s", "convert_seconds"} {
				v, ok := r[f].(float64)
				if !ok || !(v > 0) || math.IsInf(v, 0) {
					t.Errorf("%s %s: %s = %v", key, r["format"], f, r[f])
				}
			}
		}
		for _, op := range []string{"ttm", "mttkrp"} {
			formats := []string{"coo", "csr", "ell", "hyb"}
			if op == "mttkrp" {
				formats = []string{"coo", "csf", "hicoo", "alto"}
			}
			for m := 1; m <= len(dims); m++ {
				key := fmt.Sprintf("%s/%d", op, m)
				if fastest[key] != 1 {
					t.Errorf("%s: %d fastest formats", key, fastest[key])
				}
				for _, f := range formats {
					if !seen[key+"/"+f] {
						t.Errorf("%s: no row for %s", key, f)
					}
				}
			}
		}
	}
}

func TestBenchTable(t *testing.T) {
	out, _, err := run(t, "bench", "--iters", "1", "--op", "mttkrp", "--mode", "2", "--formats", "csf,alto")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"memory bandwidth (STREAM triad)", "inner loops:", "mttkrp    2  csf", "mttkrp    2  alto", "fastest mttkrp mode 2:"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\nttm ") {
		t.Errorf("--op mttkrp printed ttm rows:\n%s", out)
	}
}

func TestBenchErrors(t *testing.T) {
	path := writeRandomTensor(t, []int{5, 6, 7}, 30, 1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--op", "spmv"}, `--op: unknown op "spmv"`},
		{[]string{"--mode", "0"}, "--mode: expected a 1-based mode or all"},
		{[]string{"--mode", "4"}, "--mode: " + path + " has modes 1 to 3, found 4"},
		{[]string{"--rank", "0"}, "--rank: expected at least 1"},
		{[]string{"--iters", "0"}, "--iters: expected at least 1"},
		{[]string{"--formats", "csr,bsr"}, `--formats: unknown format "bsr"`},
		{[]string{"--formats", "csr", "--op", "mttkrp"}, "--formats csr: none is a format of --op mttkrp (ttm runs coo, csr, ell, hyb; mttkrp runs coo, csf, hicoo, alto)"},
		{[]string{"--device", "cuda:0"}, "device cuda:0: "},
		{[]string{"--device-memory", "lots"}, `--device-memory: expected a positive size such as 512MiB or 2GB, found "lots"`},
		{[]string{"--device-memory", "1GiB"}, "--device-memory: device cpu is not an accelerator"},
	} {
		_, _, err := run(t, append([]string{"bench", path, "--probe=false"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// A mode whose random operands cannot fit in memory is reported as
// skipped, format by format, and the modes that fit are timed.
func TestBenchSkipsWhatDoesNotFit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.tns")
	// Dims of 4·10^9 in modes 1 and 2: their rank-16 factors alone would
	// take 238 GiB. Mode 3 has 5 indices.
	if err := os.WriteFile(path, []byte("4000000000 1 1 1.0\n1 4000000000 5 2.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "bench", path, "--probe=false", "--iters", "1", "--op", "ttm", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []benchRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	timed := map[int]int{}
	for _, r := range rows {
		switch {
		case r.Skipped != "":
			if r.Mode == 3 || !strings.Contains(r.Skipped, "the random operands need") || !strings.Contains(r.Skipped, "--compact") {
				t.Errorf("mode %d %s skipped: %s", r.Mode, r.Format, r.Skipped)
			}
		case r.Seconds > 0:
			timed[r.Mode]++
		}
	}
	if len(rows) != 12 || timed[3] != 4 || len(timed) != 1 {
		t.Errorf("%d rows, timed per mode %v: want 12 rows, mode 3's four formats timed and the others skipped", len(rows), timed)
	}
}

// TestBenchNothingMeasured: a run in which every format was skipped
// prints why and fails, where it ended with status 0.
func TestBenchNothingMeasured(t *testing.T) {
	if _, err := os.Stat(smallTensor); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	if _, err := hetero.Lookup("opencl:0", 1); err != nil {
		t.Skipf("no OpenCL device (%v): skipping", err)
	}
	out, _, err := run(t, "bench", smallTensor, "--op", "mttkrp", "--mode", "1", "--iters", "1", "--probe=false", "--device", "opencl:0", "--device-memory", "1KiB")
	if err == nil || !strings.Contains(err.Error(), "nothing was measured") || !strings.Contains(out, "skipped: opencl:0: device memory budget") {
		t.Errorf("bench with every format skipped: %v\n%s", err, out)
	}
}
