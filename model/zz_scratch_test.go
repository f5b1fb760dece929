package model

import (
	"testing"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

func BenchmarkZZWarm(b *testing.B) {
	x, err := formats.ReadFile("heldout/unseen5/g00021_slices3_fe_4elt2.stb")
	if err != nil {
		b.Skip(err)
	}
	m, err := EmbeddedModel(hetero.MTTKRP)
	if err != nil {
		b.Fatal(err)
	}
	s, err := features.Summarize(x)
	if err != nil {
		b.Fatal(err)
	}
	head := 0
	for i, h := range m.Info.Heads {
		if h.Name == "cpu/avx512+pext/intel" {
			head = i
		}
	}
	for mode := range 3 {
		in, _, _, err := SummaryInput(s, hetero.MTTKRP, mode, m.Info.Budget)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("encode", func(b *testing.B) {
			for b.Loop() {
				SummaryInput(s, hetero.MTTKRP, mode, m.Info.Budget)
			}
		})
		b.Run("net", func(b *testing.B) {
			for b.Loop() {
				m.RunHead(in, head)
			}
		})
	}
}
