package model

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/hetero"
)

// TestMeasureAll: brute force and greedy measurement rank every format,
// the fastest at score 1 and the rest in (0, 1]; brute force times every
// format Iters times; a device of another kind and zero iterations are
// errors.
func TestMeasureAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x := familyTensor(rng, 3)
	dev := hetero.NewCPU(1)
	for _, op := range hetero.Ops {
		for _, greedy := range []bool{false, true} {
			var seen []*hetero.Measurement
			m := MeasureAll{Device: dev, Rank: 4, Iters: 2, Greedy: greedy,
				Measured: func(ms *hetero.Measurement) { seen = append(seen, ms) }}
			p, err := m.Predict(x, op, 1, hetero.CPU)
			if err != nil {
				t.Fatalf("%s greedy %v: %v", op, greedy, err)
			}
			if len(p.Formats) != len(op.Formats()) || p.Formats[0].Score != 1 {
				t.Fatalf("%s greedy %v: ranking %+v", op, greedy, p.Formats)
			}
			for i, r := range p.Formats {
				if r.Score < 0 || r.Score > 1 || (i > 0 && r.Score > p.Formats[i-1].Score) {
					t.Errorf("%s greedy %v: ranking %+v", op, greedy, p.Formats)
				}
			}
			if !greedy {
				if len(seen) != len(op.Formats()) {
					t.Fatalf("%s: %d measurements, want one per format", op, len(seen))
				}
				for i, ms := range seen {
					if ms.Format != op.Formats()[i] || (ms.Skipped == "" && ms.Iters != 2) {
						t.Errorf("%s: measurement %d: %s, %d runs", op, i, ms.Format, ms.Iters)
					}
				}
			} else if len(seen) <= len(op.Formats()) {
				t.Errorf("%s greedy: %d measurements, want one per format and the full timing of the survivors", op, len(seen))
			}
		}
	}
	if _, err := (MeasureAll{Device: dev, Rank: 4}).Predict(x, hetero.SpTTM, 0, hetero.CPU); err == nil || !strings.Contains(err.Error(), "iters") {
		t.Errorf("no iterations: error %v", err)
	}
	if _, err := (MeasureAll{Device: dev, Rank: 4, Iters: 1}).Predict(x, hetero.SpTTM, 0, hetero.GPU); err == nil {
		t.Error("a CPU asked for a GPU's answer: no error")
	}
}
