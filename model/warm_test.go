package model

import (
	"slices"
	"sync"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

// Warm beside the decisions, as predict runs it (under -race, the
// package's CI step): every decision the same as a model never warmed
// makes, by the trees, the blend and the network, at every order from 1
// to 5 and whichever of them Warm reaches first.
func TestWarmLeavesDecisions(t *testing.T) {
	x, s := nationsSummary(t)
	dev := hetero.NewCPU(1).Info()
	for _, network := range []bool{false, true} {
		want, err := EmbeddedModel(hetero.MTTKRP)
		if err != nil {
			t.Fatal(err)
		}
		warmed, err := EmbeddedModel(hetero.MTTKRP)
		if err != nil {
			t.Fatal(err)
		}
		p, q := GCNPredictor{Model: want, Network: network}, GCNPredictor{Model: warmed, Network: network}
		var wg sync.WaitGroup
		for n := 1; n <= 5; n++ {
			wg.Go(func() { q.Warm(hetero.MTTKRP, n, dev, nil) })
		}
		for mode := range x.Order() {
			a, err := p.PredictDevice(s, hetero.MTTKRP, mode, dev)
			if err != nil {
				t.Fatal(err)
			}
			b, err := q.PredictDevice(s, hetero.MTTKRP, mode, dev)
			if err != nil {
				t.Fatal(err)
			}
			if a.By != b.By || !slices.Equal(a.Formats, b.Formats) {
				t.Errorf("network %v, mode %d: %s %v warmed, %s %v not", network, mode+1, b.By, b.Formats, a.By, a.Formats)
			}
		}
		wg.Wait()
	}
}

// Warm chooses the device's head and scores the trees unless stop says
// the decisions have begun; it stops before the head when stop is true
// from the start, and ends quietly where the model has no head, for an
// op of another model, and at orders the formats refuse.
func TestWarmStops(t *testing.T) {
	dev := hetero.NewCPU(1).Info()
	for _, c := range []struct {
		name   string
		op     hetero.Op
		dev    hetero.Info
		order  int
		stop   func() bool
		chosen int
	}{
		{"warmed", hetero.MTTKRP, dev, 3, nil, 1},
		{"stopped", hetero.MTTKRP, dev, 3, func() bool { return true }, 0},
		{"other op", hetero.SpTTM, dev, 3, nil, 0},
		{"order below the formats'", hetero.MTTKRP, dev, formats.MinOrder - 1, nil, 0},
		{"order past the formats'", hetero.MTTKRP, dev, formats.MaxOrder + 1, nil, 0},
		{"no head", hetero.MTTKRP, hetero.Info{Name: "opencl:0", Kind: hetero.GPU, Type: "fpga"}, 3, nil, 1},
	} {
		m, err := EmbeddedModel(hetero.MTTKRP)
		if err != nil {
			t.Fatal(err)
		}
		GCNPredictor{Model: m}.Warm(c.op, c.order, c.dev, c.stop)
		if got := len(m.chosen); got != c.chosen {
			t.Errorf("%s: %d heads chosen, want %d", c.name, got, c.chosen)
		}
	}
}

// Warm's tensor is the same at each call, of the order asked, at every
// order the formats take, and none at the others.
func TestWarmSummary(t *testing.T) {
	for n := formats.MinOrder; n <= formats.MaxOrder; n++ {
		a, b := warmSummary(n), warmSummary(n)
		if a == nil || b == nil || len(a.Dims) != n || a.NNZ != warmNNZ {
			t.Fatalf("order %d: %+v", n, a)
		}
		for _, op := range hetero.Ops {
			for mode := range n {
				va, erra := a.Global(op, mode)
				vb, errb := b.Global(op, mode)
				if (erra == nil) != (errb == nil) || va != vb {
					t.Errorf("order %d, %s mode %d: %v %v, then %v %v", n, op, mode+1, va, erra, vb, errb)
				}
			}
		}
	}
	for _, n := range []int{formats.MinOrder - 1, formats.MaxOrder + 1} {
		if s := warmSummary(n); s != nil {
			t.Errorf("order %d: a summary", n)
		}
	}
}
