package model

import (
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
)

// TestHeadFor: a cpu prediction takes the head of its inner loops and
// processor family, else of its inner loops, else the single cpu head,
// else the nearest cpu head (the same inner loops, then the same family
// and vector width, then the same width), and warns whenever the head's
// labels came from other hardware; other classes take the head of their
// name and never warn.
func TestHeadFor(t *testing.T) {
	heads := func(names ...string) []Head {
		var hs []Head
		for _, n := range names {
			hs = append(hs, Head{Name: n, Classes: []string{"coo", "csf"}})
		}
		return hs
	}
	split := heads("cpu/avx2+pext", "cpu/avx512+pext", "cuda-gpu", "opencl-cpu")
	families := heads("cpu/avx2+pext/amd", "cpu/avx512+pext/amd", "cpu/avx512+pext/intel", "cuda-gpu")
	const amd, intel = "AMD EPYC 9B14", "Intel(R) Xeon(R) Processor"
	for _, c := range []struct {
		heads    []Head
		cpuLoops []string
		class    string
		loops    string
		cpu      string
		want     int
		warn     bool
	}{
		{split, nil, "cpu", "avx512+pext", "", 1, false},
		{split, nil, "cpu", "avx2+pext", "", 0, false},
		{split, nil, "cpu", "avx512", "", 1, true}, // no pext: the same width
		{split, nil, "cpu", "avx2", "", 0, true},
		{split, nil, "cpu", "scalar", "", 0, true}, // the first
		{split, nil, "cpu/avx512+pext", "avx2+pext", "", 1, false},
		{split, nil, "cpu/avx512", "avx2+pext", "", 1, true}, // a labels row names its loops
		{split, nil, "cuda-gpu", "avx2+pext", "", 2, false},
		{split, nil, "opencl-gpu", "avx2+pext", "", -1, false},
		{heads("cpu", "cuda-gpu"), []string{"avx512+pext"}, "cpu", "avx512+pext", "", 0, false},
		{heads("cpu", "cuda-gpu"), []string{"avx512+pext"}, "cpu", "avx2+pext", "", 0, true},
		{heads("cpu", "cuda-gpu"), nil, "cpu", "avx2+pext", "", 0, false}, // not recorded
		{heads("cuda-gpu"), nil, "cpu", "avx2+pext", "", -1, false},
		// Heads per family: the host's, else its loops' on another
		// family, else its family's of the same width.
		{families, nil, "cpu", "avx512+pext", amd, 1, false},
		{families, nil, "cpu", "avx512+pext", intel, 2, false},
		{families, nil, "cpu", "avx2+pext", amd, 0, false},
		{families, nil, "cpu", "avx2+pext", intel, 0, true}, // the same loops
		{families, nil, "cpu", "avx512", intel, 2, true},    // the same family and width
		{families, nil, "cpu", "avx512", "", 1, true},       // the same width
		{families, nil, "cpu", "avx512+pext", "Apple M2", 1, true},
		{families, nil, "cpu/avx512+pext/intel", "avx2+pext", amd, 2, false},
		{families, nil, "cpu/avx512+pext", "avx2+pext", intel, 2, false}, // a labels row's loops, on its processor
		{families, nil, "cpu/avx512+pext", "avx2+pext", "", 1, true},
		// A head of one family's loops beside heads per family.
		{heads("cpu/avx2+pext", "cpu/avx512+pext/amd", "cpu/avx512+pext/intel"), nil, "cpu", "avx2+pext", intel, 0, false},
	} {
		h, w := (&Info{Heads: c.heads, CPUInnerLoops: c.cpuLoops}).HeadFor(c.class, c.loops, c.cpu)
		if h != c.want || (w != "") != c.warn {
			t.Errorf("heads %v, recorded %v: %s on %s (%q): head %d, warning %q; want head %d, a warning: %v", headNames(c.heads), c.cpuLoops, c.class, c.loops, c.cpu, h, w, c.want, c.warn)
		}
		if w != "" && (!strings.Contains(w, "tune-model") || !strings.Contains(w, c.loops) && !strings.HasPrefix(c.class, "cpu/")) {
			t.Errorf("%s on %s: warning %q does not name this CPU's inner loops and tune-model", c.class, c.loops, w)
		}
	}
}

func TestCPUFamily(t *testing.T) {
	for _, c := range []struct{ model, want string }{
		{"AMD EPYC", "amd"},
		{"AMD Ryzen 9 7950X 16-Core Processor", "amd"},
		{"Intel(R) Xeon(R) Processor", "intel"},
		{"Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz", "intel"},
		{"Neoverse-V2", ""},
		{"arm64", ""},
		{"", ""},
		{"AMDX", ""},
	} {
		if got := CPUFamily(c.model); got != c.want {
			t.Errorf("CPUFamily(%q) = %q, want %q", c.model, got, c.want)
		}
		if f := c.want; f != "" {
			if l, fam, ok := splitCPUHead(CPUHead("avx2+pext", f)); !ok || l != "avx2+pext" || fam != f {
				t.Errorf("CPUHead(avx2+pext, %s) splits into %q, %q, %v", f, l, fam, ok)
			}
		}
	}
}

// asked records how a predictor was asked.
type asked struct {
	RulePredictor
	dev    *hetero.Info
	kind   hetero.Kind
	byKind bool
}

func (a *asked) PredictSummary(s *features.Summary, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error) {
	a.kind, a.byKind = kind, true
	return &Prediction{}, nil
}

type askedDevice struct{ asked }

func (a *askedDevice) PredictDevice(s *features.Summary, op hetero.Op, mode int, dev hetero.Info) (*Prediction, error) {
	a.dev = &dev
	return &Prediction{}, nil
}

// TestPredictOn: a predictor that tells devices apart is given the
// device, another its kind.
func TestPredictOn(t *testing.T) {
	dev := hetero.Info{Name: "opencl:0", Kind: hetero.GPU, Model: "pthread"}
	var a asked
	if _, err := PredictOn(&a, nil, hetero.SpTTM, 0, dev); err != nil || !a.byKind || a.kind != hetero.GPU || a.dev != nil {
		t.Errorf("a predictor by kind: asked for %v, device %v, %v", a.kind, a.dev, err)
	}
	var d askedDevice
	if _, err := PredictOn(&d, nil, hetero.SpTTM, 0, dev); err != nil || d.dev == nil || d.dev.Name != dev.Name || d.byKind {
		t.Errorf("a device predictor: asked for device %v, by kind too: %v, %v", d.dev, d.byKind, err)
	}
}

// TestLearntOn: a head learnt a CPU when it answers for that CPU without
// a warning and its recorded processors hold the CPU's model; never an
// accelerator, a head that answers with the rule, or a head of other
// inner loops.
func TestLearntOn(t *testing.T) {
	const here = "Intel(R) Xeon(R) Example"
	own := CPUHead(kernels.InnerLoops(), CPUFamily(here))
	other := "other+loops"
	cpu := hetero.Info{Name: "cpu", Kind: hetero.CPU, Model: here}
	for _, c := range []struct {
		name   string
		heads  []string
		models map[string][]string
		rule   []string
		dev    hetero.Info
		want   bool
	}{
		{"this processor's head", []string{own, "cuda-gpu"}, map[string][]string{own: {"AMD EPYC", here}}, nil, cpu, true},
		{"another processor of the family", []string{own}, map[string][]string{own: {"Intel(R) Xeon(R) Other"}}, nil, cpu, false},
		{"no processor recorded", []string{own}, nil, nil, cpu, false},
		{"the head answers with the rule", []string{own}, map[string][]string{own: {here}}, []string{own}, cpu, false},
		{"only other inner loops' head", []string{CPUHead(other, "intel")}, map[string][]string{CPUHead(other, "intel"): {here}}, nil, cpu, false},
		{"no model name", []string{own}, map[string][]string{own: {""}}, nil, hetero.Info{Name: "cpu", Kind: hetero.CPU}, false},
		{"an accelerator", []string{"cuda-gpu"}, map[string][]string{"cuda-gpu": {"NVIDIA H200"}}, nil, hetero.Info{Name: "cuda:0", Kind: hetero.GPU, Type: "gpu", Model: "NVIDIA H200"}, false},
	} {
		info := Info{CPUModels: c.models, RuleHeads: c.rule}
		for _, h := range c.heads {
			info.Heads = append(info.Heads, Head{Name: h})
		}
		if got := info.LearntOn(c.dev); got != c.want {
			t.Errorf("%s: LearntOn = %v, want %v", c.name, got, c.want)
		}
	}
}
