package main

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGraphJSON runs graph on tensors it has never seen, of orders 2 to 4
// and both ops, and checks what the model would get: every global feature
// finite and in its documented range, node counts within the budget, node
// statistics in [0, 1].
func TestGraphJSON(t *testing.T) {
	inputs := []string{
		writeRandomTensor(t, []int{300, 200}, 3000, 11),
		writeRandomTensor(t, []int{500, 40, 30}, 20000, 12),
		writeRandomTensor(t, []int{20, 15, 10, 12}, 5000, 13),
	}
	if _, err := os.Stat(filepath.Join(dataDir, "suitesparse", "bcspwr05.mtx")); err == nil {
		inputs = append(inputs, filepath.Join(dataDir, "suitesparse", "bcspwr05.mtx"))
	}
	for _, path := range inputs {
		for _, op := range []string{"ttm", "mttkrp"} {
			out, _, err := run(t, "graph", path, "--op", op, "--mode", "2", "--json")
			if err != nil {
				t.Fatal(err)
			}
			var rep graphReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			what := filepath.Base(path) + " " + op
			if rep.Mode != 2 || rep.Op != op || len(rep.Features) == 0 {
				t.Fatalf("%s: report %+v", what, rep)
			}
			for _, f := range rep.Features {
				if math.IsNaN(f.Value) || f.Value < f.Range[0] || f.Value > f.Range[1] {
					t.Errorf("%s: %s = %v outside %v", what, f.Name, f.Value, f.Range)
				}
			}
			for _, s := range []graphSide{rep.Rows, rep.Cols} {
				if s.Nodes < 1 || s.Nodes > rep.Budget[0] || s.Nodes > s.NonEmpty {
					t.Errorf("%s: %d nodes for %d non-empty, budget %v", what, s.Nodes, s.NonEmpty, rep.Budget)
				}
				for i := range s.Min {
					if !(0 <= s.Min[i] && s.Min[i] <= s.Mean[i]+1e-9 && s.Mean[i] <= s.Max[i]+1e-9 && s.Max[i] <= 1) {
						t.Errorf("%s: node feature %d min %v mean %v max %v", what, i, s.Min[i], s.Mean[i], s.Max[i])
					}
				}
			}
			if rep.Edges < 1 || rep.Edges > rep.Rows.Nodes*rep.Cols.Nodes {
				t.Errorf("%s: %d edges", what, rep.Edges)
			}
		}
	}
}

// TestGraphPNG checks that --png writes a decodable image and the text
// report names the lowering.
func TestGraphPNG(t *testing.T) {
	path := writeRandomTensor(t, []int{500, 40, 30}, 20000, 14)
	img := filepath.Join(t.TempDir(), "g.png")
	out, _, err := run(t, "graph", path, "--op", "mttkrp", "--mode", "3", "--png", img)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "mttkrp mode 3: mapping matrix of mode 3 (rows) by mode 1 (columns)") || !strings.Contains(out, "log_fiber_nnz_cv") {
		t.Errorf("text report:\n%s", out)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width < 100 || cfg.Height < 100 {
		t.Fatalf("png: %v %+v", err, cfg)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(img), ".*.tmp-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestGraphErrors(t *testing.T) {
	path := writeRandomTensor(t, []int{50, 40, 30}, 500, 15)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"graph", path, "--mode", "4"}, "--mode: " + path + " has modes 1 to 3, found 4"},
		{[]string{"graph", path, "--mode", "x"}, `--mode: expected a 1-based mode, found "x"`},
		{[]string{"graph", path, "--op", "spmv"}, `--op: unknown op "spmv"`},
		{[]string{"graph", path, "--png", filepath.Join(t.TempDir(), "no", "such", "dir.png")}, "--png "},
		{[]string{"graph", filepath.Join(t.TempDir(), "missing.tns")}, "missing.tns"},
	} {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args[1:], err, tc.want)
		}
	}
}

// TestGraphSampleSaid: past the exact size the graph's counts are the
// sample's, and the text says so (it gave them as the tensor's).
func TestGraphSampleSaid(t *testing.T) {
	path := filepath.Join(dataDir, "tensors", "kg_wn18.tns")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	out, _, err := run(t, "graph", path, "--op", "mttkrp", "--mode", "2")
	if err != nil || !strings.Contains(out, "non-empty columns in a sample of ") {
		t.Errorf("graph of a sampled tensor: %v\n%s", err, out)
	}
	out, _, err = run(t, "graph", smallTensor)
	if err != nil || strings.Contains(out, "in a sample of") {
		t.Errorf("graph of an exact tensor: %v\n%s", err, out)
	}
}
