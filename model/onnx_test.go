package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sparsetune/sparsetune/features"
)

// randomGCN returns a default-architecture GCN with two heads, weights
// jittered so no bias is zero, and a non-trivial standardisation.
func randomGCN(t testing.TB, seed uint64) *GCN {
	rng := rand.New(rand.NewPCG(seed, seed))
	g, err := NewGCN(DefaultConfig("ttm", Head{"cpu", []string{"coo", "csr", "ell", "hyb"}}, Head{"gpu", []string{"coo", "csr", "ell", "hyb"}}), rng)
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.Params {
		g.Params[i] += 0.05 * rng.NormFloat64()
	}
	for i := range features.Count {
		g.Mean[i], g.Std[i] = rng.NormFloat64(), 0.5+rng.Float64()
	}
	return g
}

// TestONNXParity: onnx-go running the exported file gives the Go forward
// pass's probabilities within 1e-4 on 100 random inputs.
func TestONNXParity(t *testing.T) {
	g := randomGCN(t, 11)
	data, err := g.ExportONNX()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseONNX("random.onnx", data)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(12, 12))
	p := g.newPass()
	worst := 0.0
	n := 100
	if testing.Short() {
		n = 20
	}
	for range n {
		in := randomInput(g.Config, rng)
		got, err := m.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		g.forward(p, in)
		for k := range p.hs {
			for i, want := range p.hs[k].probs {
				worst = max(worst, math.Abs(got[k][i]-want))
			}
		}
	}
	t.Logf("%d inputs, largest probability difference %.2g", n, worst)
	if worst > 1e-4 {
		t.Errorf("onnx-go differs from the Go forward by %.3g, want <= 1e-4", worst)
	}
}
