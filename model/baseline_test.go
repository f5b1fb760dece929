package model

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

// familySet labels generated tensors of the structural families with one
// SpTTM format per family: a stand-in for measured labels that a baseline
// can only learn from the global features.
func familySet(t *testing.T, rng *rand.Rand, perFamily int) (*BaselineSet, []*formats.COO, []string) {
	t.Helper()
	s := NewBaselineSet()
	var xs []*formats.COO
	var want []string
	for range perFamily {
		for f := range families {
			x := familyTensor(rng, f)
			v, err := features.Global(x, hetero.SpTTM, 0)
			if err != nil {
				t.Fatal(err)
			}
			best := hetero.SpTTM.Formats()[f]
			s.Examples = append(s.Examples, BaselineExample{Op: "ttm", Kind: "cpu", Features: v[:], Best: best, Source: families[f]})
			xs, want = append(xs, x), append(want, best)
		}
	}
	return s, xs, want
}

func TestBaselinesLearnFamilies(t *testing.T) {
	rng := rand.New(rand.NewPCG(60, 6))
	train, _, _ := familySet(t, rng, 40)
	_, test, want := familySet(t, rng, 10)
	path := filepath.Join(t.TempDir(), "families.json")
	if err := WriteBaselineSet(path, train); err != nil {
		t.Fatal(err)
	}
	loaded, err := ReadBaselineSet(path)
	if err != nil {
		t.Fatal(err)
	}
	if !littleEndianHost {
		// golearn's CART is withheld where it would learn from scrambled
		// bytes (BaselineMethods), with an error that says so.
		if _, err := NewBaselinePredictor("tree", loaded); err == nil || !strings.Contains(err.Error(), "big-endian") {
			t.Errorf("tree on a big-endian host: %v, want an error naming the byte order", err)
		}
	}
	for _, method := range BaselineMethods() {
		p, err := NewBaselinePredictor(method, loaded)
		if err != nil {
			t.Fatal(err)
		}
		right := 0
		for i, x := range test {
			pr, err := p.Predict(x, hetero.SpTTM, 0, hetero.CPU)
			if err != nil {
				t.Fatal(err)
			}
			if len(pr.Formats) != 4 || pr.Formats[0].Score <= 0 || pr.Formats[0].Score > 1 {
				t.Fatalf("%s: %+v", method, pr.Formats)
			}
			if pr.Best() == want[i] {
				right++
			}
		}
		acc := float64(right) / float64(len(test))
		t.Logf("%s: held-out accuracy %.2f on %d tensors", method, acc, len(test))
		if acc < 0.85 {
			t.Errorf("%s: held-out accuracy %.2f, want >= 0.85", method, acc)
		}
		if _, err := p.Predict(test[0], hetero.MTTKRP, 0, hetero.CPU); err == nil || !strings.Contains(err.Error(), "no examples for mttkrp") {
			t.Errorf("%s: mttkrp without examples: %v", method, err)
		}
		// A device kind without examples is one without a head: the
		// caller measures it, as for the GCN, and answers the others.
		if _, err := p.Predict(test[0], hetero.SpTTM, 0, hetero.GPU); !errors.Is(err, ErrNoHead) {
			t.Errorf("%s: a gpu without examples: %v", method, err)
		}
		// A tensor far outside the training range still gets an answer,
		// with warnings.
		big := familyTensor(rand.New(rand.NewPCG(1, 1)), 3)
		big.Dims[0] *= 1000
		pr, err := p.Predict(big, hetero.SpTTM, 0, hetero.CPU)
		if err != nil || len(pr.Warnings) == 0 {
			t.Errorf("%s: out of range: %v, warnings %v", method, err, pr)
		}
	}
}

func TestBaselineSetErrors(t *testing.T) {
	good := func() *BaselineSet {
		s := NewBaselineSet()
		s.Examples = []BaselineExample{{Op: "ttm", Kind: "cpu", Features: make([]float64, len(features.Names)), Best: "csr"}}
		return s
	}
	for _, tc := range []struct {
		edit func(*BaselineSet)
		want string
	}{
		{func(s *BaselineSet) { s.FormatVersion = 9 }, "format version 9"},
		{func(s *BaselineSet) { s.Features = s.Features[1:] }, "feature list"},
		{func(s *BaselineSet) { s.Examples[0].Op = "spmv" }, `example 1: unknown op "spmv"`},
		{func(s *BaselineSet) { s.Examples[0].Kind = "tpu" }, `unknown device kind "tpu"`},
		{func(s *BaselineSet) { s.Examples[0].Best = "alto" }, `format "alto" is not a ttm format`},
		{func(s *BaselineSet) { s.Examples[0].Features = []float64{1} }, "1 features, expected"},
	} {
		s := good()
		tc.edit(s)
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o644)
	if _, err := ReadBaselineSet(bad); err == nil || !strings.Contains(err.Error(), bad+": not a baseline set") {
		t.Errorf("bad json: %v", err)
	}
	if _, err := NewBaselinePredictor("svm", good()); err == nil || !strings.Contains(err.Error(), "unknown baseline") {
		t.Errorf("svm: %v", err)
	}
}
