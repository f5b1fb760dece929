package train

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// scanMatrices lists the shared matrices, skipping when they are absent.
func scanMatrices(t *testing.T) []Matrix {
	t.Helper()
	if _, err := os.Stat(matrixDir); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	mats, err := ScanMatrices(matrixDir)
	if err != nil {
		t.Fatal(err)
	}
	return mats
}

func TestScanMatrices(t *testing.T) {
	mats := scanMatrices(t)
	if len(mats) < 100 {
		t.Fatalf("%d matrices, expected the ~180 of the shared data", len(mats))
	}
	// The header's estimate is exact for general matrices and at most
	// the diagonal off for symmetric ones.
	for _, name := range []string{"add32.mtx", "bcsstk33.mtx"} {
		var got Matrix
		for _, m := range mats {
			if m.File == name {
				got = m
			}
		}
		x := readMatrix(t, name)
		if got.Rows != x.Dims[0] || got.Cols != x.Dims[1] || got.NNZ < x.NNZ() || got.NNZ > x.NNZ()+x.Dims[0] {
			t.Errorf("%s: scanned %+v, read %v with %d nonzeros", name, got, x.Dims, x.NNZ())
		}
	}
}

func TestScanMatricesErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ScanMatrices(dir); err == nil || !strings.Contains(err.Error(), "no MatrixMarket matrices") {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := ScanMatrices(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing dir: no error")
	}
	bad := filepath.Join(dir, "bad.mtx")
	if err := os.WriteFile(bad, []byte("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ScanMatrices(dir); err == nil || !strings.Contains(err.Error(), "bad.mtx:1") {
		t.Errorf("array matrix: %v", err)
	}
}

func TestPlan(t *testing.T) {
	mats := scanMatrices(t)
	opt := PlanOptions{Count: 400, Seed: 42}
	specs, err := Plan(mats, opt)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Plan(mats, opt)
	if !reflect.DeepEqual(specs, again) {
		t.Fatal("the same options gave two plans")
	}
	short, _ := Plan(mats, PlanOptions{Count: 50, Seed: 42})
	if !reflect.DeepEqual(short, specs[:50]) {
		t.Fatal("a plan of 50 is not the first 50 of a plan of 400")
	}
	other, _ := Plan(mats, PlanOptions{Count: 50, Seed: 43})
	if reflect.DeepEqual(short, other) {
		t.Fatal("seeds 42 and 43 gave the same plan")
	}
	buckets := make([]int, len(Buckets))
	names := map[string]bool{}
	order4 := 0
	for _, s := range specs {
		if names[s.Name] {
			t.Fatalf("name %s twice", s.Name)
		}
		names[s.Name] = true
		if s.TargetNNZ < DefaultMinNNZ || s.TargetNNZ > DefaultMaxNNZ {
			t.Fatalf("%s: target %d outside the defaults", s.Name, s.TargetNNZ)
		}
		b := len(Buckets) - 1
		for b > 0 && s.TargetNNZ < Buckets[b] {
			b--
		}
		buckets[b]++
		if s.Order() == 4 {
			order4++
		}
		if !strings.Contains(s.Name, strings.ReplaceAll(s.Generator(), "+", "-")) {
			t.Errorf("name %s does not say its generator %s", s.Name, s.Generator())
		}
	}
	// Shares 1:2:4:6:7 of 400, exactly up to the interleaving's rounding.
	total := 0
	for _, w := range BucketWeights {
		total += w
	}
	for b, n := range buckets {
		if want := 400 * BucketWeights[b] / total; n < want-1 || n > want+1 {
			t.Errorf("bucket %d has %d tensors, want %d (all: %v)", b, n, want, buckets)
		}
	}
	if order4 < 60 || order4 > 140 {
		t.Errorf("%d order-4 tensors of 400, expected about 100", order4)
	}
}

func TestPlanBounds(t *testing.T) {
	mats := scanMatrices(t)
	specs, err := Plan(mats, PlanOptions{Count: 100, Seed: 1, MinNNZ: 5_000, MaxNNZ: 50_000})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.TargetNNZ < 5_000 || s.TargetNNZ > 50_000 {
			t.Fatalf("%s: target %d outside [5000, 50000]", s.Name, s.TargetNNZ)
		}
	}
	for _, opt := range []PlanOptions{{Count: 1, MinNNZ: 10, MaxNNZ: 5}, {Count: -1}, {Count: 1, MaxNNZ: MaxNNZ + 1}} {
		if _, err := Plan(mats, opt); err == nil {
			t.Errorf("%+v: no error", opt)
		}
	}
	if _, err := Plan([]Matrix{{File: "empty.mtx", Rows: 3, Cols: 3}}, PlanOptions{Count: 1}); err == nil {
		t.Error("a plan over matrices without nonzeros: no error")
	}
}

// TestPlanGenerates generates a plan of small tensors and checks that each
// is valid and, from 100 nonzeros on, within 30% of its target.
func TestPlanGenerates(t *testing.T) {
	mats := scanMatrices(t)
	specs, err := Plan(mats, PlanOptions{Count: 60, Seed: 5, MaxNNZ: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		x, err := Generate(readMatrix(t, s.Source), s)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		checkValid(t, x, s.Order())
		if r := float64(x.NNZ()) / float64(s.TargetNNZ); s.TargetNNZ >= 100 && (r < 0.7 || r > 1.3) {
			t.Errorf("%s: %d nonzeros for a target of %d", s.Name, x.NNZ(), s.TargetNNZ)
		}
	}
}

// TestBenchPreset resolves the preset against the real matrices (without
// generating: that takes seconds) and checks its promises.
func TestBenchPreset(t *testing.T) {
	specs, err := Preset("bench")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 8 {
		t.Fatalf("%d tensors, want 8", len(specs))
	}
	names := map[string]bool{}
	order4 := 0
	for _, s := range specs {
		if !strings.HasPrefix(s.Name, "bench_") || names[s.Name] {
			t.Errorf("name %q: expected a unique bench_ name", s.Name)
		}
		names[s.Name] = true
		if s.Order() == 4 {
			order4++
		}
		m := readMatrix(t, s.Source)
		src, err := canonicalMatrix(m)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Resolve(m)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if want := float64(src.NNZ()) * r.growth(); want < 1e6 || want > 1e7 {
			t.Errorf("%s: expects %.3g nonzeros, want 1 to 10 million", s.Name, want)
		}
	}
	if order4 != 2 {
		t.Errorf("%d order-4 tensors, want 2", order4)
	}
	if _, err := Preset("nope"); err == nil {
		t.Error("unknown preset: no error")
	}
}
