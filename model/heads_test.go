package model

import (
	"strings"
	"sync"
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
	gens := heads("cpu/avx512+pext/amd", "cpu/avx512+pext/amd-19h", "cpu/avx512+pext/intel")
	const zen4, zen5 = "AMD EPYC (family 19h)", "AMD EPYC (family 1ah)"
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
		// Rank heads answer through their class's own head
		// (HeadAtRank), never as the nearest head of another kind, and
		// a rank head's class is looked up as its class.
		{heads("cpu/avx512+pext/amd@r64", "cpu/avx2+pext/amd", "cpu/avx512+pext/amd"), nil, "cpu", "avx512+pext", amd, 2, false},
		{heads("cpu/avx512+pext/amd@r64", "cpu/avx2+pext/amd"), nil, "cpu", "avx512+pext", amd, 1, true},
		{heads("cpu@r64", "cpu"), nil, "cpu", "avx512+pext", amd, 1, false},
		{families, nil, "cpu/avx512+pext/intel@r32", "avx2+pext", amd, 2, false},
		// Heads per family number ("amd-19h") beside the vendor's head
		// of rows that recorded none: the host's number, else its
		// vendor's; of family-numbered heads alone, the same vendor's
		// loops first.
		{gens, nil, "cpu", "avx512+pext", zen4, 1, false},
		{gens, nil, "cpu", "avx512+pext", zen5, 0, false},
		{gens, nil, "cpu", "avx512+pext", "AMD EPYC", 0, false},
		{gens, nil, "cpu", "avx512+pext", "Intel(R) Xeon(R) Processor (family 6h)", 2, false},
		{gens, nil, "cpu/avx512+pext/amd-19h", "avx2+pext", "", 1, false}, // a labels row's class
		{heads("cpu/avx512+pext/intel", "cpu/avx512+pext/amd-19h"), nil, "cpu", "avx512+pext", zen5, 1, true},
		{heads("cpu/avx512+pext/amd-19h", "cpu/avx512+pext/amd-1ah"), nil, "cpu", "avx512+pext", "AMD EPYC", 0, true},
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

// TestRankHeads: a rank head's name gives back its class and rank, and
// of a class's heads a prediction at rank R takes the one whose labels'
// rank is nearest to R by ratio, the class's own head on a tie, else the
// lower rank.
func TestRankHeads(t *testing.T) {
	for _, c := range []struct {
		name, base string
		cpu        bool
	}{
		{RankHead("cpu", 64), "cpu", true},
		{RankHead("cpu/avx512+pext/amd", 32), "cpu/avx512+pext/amd", true},
		{RankHead("cuda-gpu", 8), "cuda-gpu", false},
		{"cuda-gpu", "cuda-gpu", false},
		{"cpu@r", "cpu@r", false},       // no rank
		{"cpu@r064", "cpu@r064", false}, // not as RankHead writes it
		{"cpu@r-4", "cpu@r-4", false},
		{"@r16", "@r16", false},
	} {
		if got := BaseHead(c.name); got != c.base || IsCPUHead(c.name) != c.cpu {
			t.Errorf("%q: base %q, a cpu head: %v; want %q, %v", c.name, got, IsCPUHead(c.name), c.base, c.cpu)
		}
	}
	if got := RankHead("cpu/avx2+pext", 64); got != "cpu/avx2+pext@r64" {
		t.Errorf("RankHead: %q", got)
	}
	info := &Info{
		Heads: []Head{{Name: "cuda-gpu"}, {Name: "cpu@r64"}, {Name: "cpu"}, {Name: "cpu@r4"}, {Name: "cuda-gpu@r32"}, {Name: "cpu@r32"}},
		// The class's own head records none: rank 16.
		LabelRanks: map[string][]int{"cpu@r64": {64}, "cpu@r4": {4}, "cuda-gpu@r32": {32}, "cpu@r32": {32}},
	}
	for _, c := range []struct{ head, rank, want int }{
		{2, 0, 2}, {2, -1, 2}, {-1, 64, -1},
		{2, 16, 2}, {2, 64, 1}, {2, 128, 1}, {2, 4, 3}, {2, 1, 3}, {2, 32, 5},
		{2, 8, 2},  // as near to 4 as to 16: the class's own
		{2, 48, 1}, // nearer 64 than 32 by ratio
		{2, 20, 2},
		{0, 32, 4}, {0, 16, 0}, {0, 24, 4}, {0, 20, 0}, // other classes' rank heads are not the cpu's
		{1, 8, 2}, // from a rank head too
	} {
		if got := info.HeadAtRank(c.head, c.rank); got != c.want {
			t.Errorf("HeadAtRank(%d, %d) = %d, want %d", c.head, c.rank, got, c.want)
		}
	}
	// A tie between two rank heads goes to the lower rank.
	info = &Info{Heads: []Head{{Name: "g"}, {Name: "g@r8"}, {Name: "g@r32"}}, LabelRanks: map[string][]int{"g": {1}, "g@r8": {8}, "g@r32": {32}}}
	if got := info.HeadAtRank(0, 16); got != 1 {
		t.Errorf("rank 16 between heads at 8 and 32: head %d, want 1", got)
	}
}

// TestVendorAtRank: a prediction on a processor with a head of its own
// family number takes, at a rank that head's class has not learnt, the
// vendor's head of the nearer rank; at an equal distance its own.
func TestVendorAtRank(t *testing.T) {
	info := &Info{
		Heads: []Head{{Name: "cpu/avx512+pext/amd"}, {Name: "cpu/avx512+pext/amd@r64"}, {Name: "cpu/avx512+pext/amd@r8"},
			{Name: "cpu/avx512+pext/amd-19h"}, {Name: "cpu/avx512+pext/amd-19h@r32"}, {Name: "cpu/avx512+pext/intel@r64"}, {Name: "cpu/avx512+pext/intel"}},
		LabelRanks: map[string][]int{"cpu/avx512+pext/amd@r64": {64}, "cpu/avx512+pext/amd@r8": {8}, "cpu/avx512+pext/amd-19h@r32": {32}, "cpu/avx512+pext/intel@r64": {64}},
	}
	for _, c := range []struct{ head, rank, want int }{
		{3, 0, 3}, {3, 16, 3}, {3, 20, 3},
		{3, 32, 4}, {3, 40, 4}, // its own rank head
		{3, 64, 1},  // the vendor's, learnt at the rank
		{3, 128, 1}, // nearer than 32
		{3, 8, 2}, {3, 11, 2},
		{3, 12, 3},             // nearer 16 than 8 by ratio: its own
		{0, 32, 0}, {0, 64, 1}, // the vendor's head never moves to a family number's
		{6, 64, 5}, {-1, 64, -1}, // nor another vendor's
	} {
		if got := info.vendorAtRank(c.head, c.rank); got != c.want {
			t.Errorf("vendorAtRank(%s, %d) = %s, want %s", headName(info, c.head), c.rank, headName(info, got), headName(info, c.want))
		}
	}
	// HeadAt, which predictions and evaluations ask, chooses the same
	// from a device class and processor: a Zen 4's row at rank 8 is
	// scored by the head that would answer it, the vendor's rank twin.
	for _, c := range []struct {
		class, processor string
		rank, want       int
	}{
		{"cpu", "AMD EPYC (family 19h)", 0, 3},
		{"cpu", "AMD EPYC (family 19h)", 16, 3},
		{"cpu", "AMD EPYC (family 19h)", 32, 4},
		{"cpu", "AMD EPYC (family 19h)", 64, 1},
		{"cpu/avx512+pext/amd-19h", "", 8, 2},  // a trained row's class
		{"cpu", "AMD EPYC (family 1ah)", 8, 2}, // no head of its family: the vendor's
		{"cpu", "AMD EPYC", 16, 0},
		{"cpu", "Intel(R) Xeon(R) Processor", 64, 5},
	} {
		if got, _ := info.HeadAt(c.class, "avx512+pext", c.processor, c.rank); got != c.want {
			t.Errorf("HeadAt(%s, %q, %d) = %s, want %s", c.class, c.processor, c.rank, headName(info, got), headName(info, c.want))
		}
	}
}

func headName(info *Info, h int) string {
	if h < 0 {
		return "none"
	}
	return info.Heads[h].Name
}

// TestProcessor: a processor's name joins its model name and family
// number and splits back into them; the family number joins a cpu
// head's family when known; a head recorded without one is any
// family's processor of its model name.
func TestProcessor(t *testing.T) {
	for _, c := range []struct {
		model  string
		family int
		want   string
		head   string
	}{
		{"AMD EPYC", 0x19, "AMD EPYC (family 19h)", "amd-19h"},
		{"AMD EPYC", 0x1a, "AMD EPYC (family 1ah)", "amd-1ah"},
		{"AMD EPYC", 0, "AMD EPYC", "amd"},
		{"Intel(R) Xeon(R) Platinum 8480+", 6, "Intel(R) Xeon(R) Platinum 8480+ (family 6h)", "intel-6h"},
		{"Neoverse-V2", 0, "Neoverse-V2", ""},
		{"Apple M2 (family 2h)", 0, "Apple M2 (family 2h)", ""},
		{"", 0x19, "", ""},
		{"AMD EPYC", -1, "AMD EPYC", "amd"},
	} {
		p := Processor(c.model, c.family)
		if p != c.want || CPUFamily(p) != c.head {
			t.Errorf("Processor(%q, %d) = %q, family %q; want %q, %q", c.model, c.family, p, CPUFamily(p), c.want, c.head)
		}
		if m, f := splitProcessor(p); c.family > 0 && c.model != "" && (m != c.model || f != c.family) {
			t.Errorf("splitProcessor(%q) = %q, %d", p, m, f)
		}
	}
	for _, p := range []string{"AMD EPYC (family h)", "AMD EPYC (family zzh)", "AMD EPYC (family -1h)", "AMD EPYC (family 0h)", "(family 19h"} {
		if m, f := splitProcessor(p); m != p || f != 0 {
			t.Errorf("splitProcessor(%q) = %q, %d; want it whole, no family", p, m, f)
		}
	}
	for _, c := range []struct {
		recorded, model string
		family          int
		want            bool
	}{
		{"AMD EPYC", "AMD EPYC", 0x19, true},
		{"AMD EPYC (family 19h)", "AMD EPYC", 0x19, true},
		{"AMD EPYC (family 19h)", "AMD EPYC", 0, true},
		{"AMD EPYC (family 1ah)", "AMD EPYC", 0x19, false},
		{"AMD EPYC 9654", "AMD EPYC", 0x19, false},
	} {
		if got := sameProcessor(c.recorded, c.model, c.family); got != c.want {
			t.Errorf("sameProcessor(%q, %q, %d) = %v", c.recorded, c.model, c.family, got)
		}
	}
	info := &Info{Heads: []Head{{Name: "cpu"}}, CPUModels: map[string][]string{"cpu": {"AMD EPYC (family 1ah)"}}}
	if w := info.otherCPU(0, "AMD EPYC", 0x19); !strings.Contains(w, "AMD EPYC (family 1ah)") || !strings.Contains(w, "this CPU is AMD EPYC (family 19h)") {
		t.Errorf("a Zen 4 asking a head learnt on a Zen 5: warning %q", w)
	}
	if w := info.otherCPU(0, "AMD EPYC", 0x1a); w != "" {
		t.Errorf("the head's own processor: warning %q", w)
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

// TestDeviceHeads: a PoCL device answers with the head of the processor
// it compiles for, else its class's single head, else another
// processor's head with a warning; other accelerators by their class.
func TestDeviceHeads(t *testing.T) {
	for _, c := range []struct{ class, model, want string }{
		{"opencl-cpu", "pthread-skylake-avx512-AMD EPYC [CPU]", "skylake-avx512"},
		{"opencl-cpu", "pthread-haswell-AMD EPYC [CPU]", "haswell"},
		{"opencl-cpu", "pthread-x86-64-v3-Intel(R) Xeon(R) Processor", "x86-64-v3"},
		{"opencl-cpu", "pthread-znver3", "znver3"},
		{"opencl-cpu", "pthread", ""},
		{"opencl-cpu", "Intel(R) Core(TM) i7 CPU", ""},
		{"opencl-gpu", "pthread-haswell-AMD EPYC [CPU]", ""},
		{"cuda-gpu", "NVIDIA H200", ""},
	} {
		if got := DeviceTarget(c.class, c.model); got != c.want {
			t.Errorf("DeviceTarget(%q, %q) = %q, want %q", c.class, c.model, got, c.want)
		}
	}
	heads := func(names ...string) *Info {
		var hs []Head
		for _, n := range names {
			hs = append(hs, Head{Name: n, Classes: []string{"coo", "csf"}})
		}
		return &Info{Heads: hs}
	}
	const skylake, haswell, other = "pthread-skylake-avx512-AMD EPYC [CPU]", "pthread-haswell-AMD EPYC [CPU]", "pthread-znver4-AMD EPYC [CPU]"
	targets := heads("cpu", "opencl-cpu/haswell", "opencl-cpu/skylake-avx512", "opencl-cpu/skylake-avx512@r64", "cuda-gpu")
	for _, c := range []struct {
		info         *Info
		class, model string
		want         int
		warn         bool
	}{
		{targets, "opencl-cpu", skylake, 2, false},
		{targets, "opencl-cpu", haswell, 1, false},
		{targets, "opencl-cpu", other, 1, true}, // another processor's head, said so
		{targets, "opencl-cpu", "", 1, true},
		{targets, "opencl-cpu/skylake-avx512", haswell, 2, false}, // a labels row's class after training split it
		{targets, "opencl-cpu/skylake-avx512@r64", "", 2, false},
		{targets, "cuda-gpu", "NVIDIA H200", 4, false},
		{targets, "opencl-gpu", "", -1, false},
		{heads("cpu", "opencl-cpu"), "opencl-cpu", skylake, 1, false}, // one head for every processor
		{heads("cpu", "opencl-cpu"), "opencl-cpu/haswell", haswell, 1, false},
		{heads("cpu", "cuda-gpu"), "opencl-cpu", skylake, -1, false},
	} {
		h, w := c.info.HeadFor(c.class, "avx512+pext", c.model)
		if h != c.want || (w != "") != c.warn {
			t.Errorf("heads %v: %s, %q: head %d, warning %q; want head %d, a warning: %v", headNames(c.info.Heads), c.class, c.model, h, w, c.want, c.warn)
		}
		if w != "" && !strings.Contains(w, "tune-model") {
			t.Errorf("%s, %q: warning %q does not name tune-model", c.class, c.model, w)
		}
	}
	// A rank asked for reaches the target head's rank twin.
	targets.LabelRanks = map[string][]int{"opencl-cpu/skylake-avx512": {16}, "opencl-cpu/skylake-avx512@r64": {64}}
	if h, _ := targets.hostHead("opencl-cpu", skylake, 64); h != 3 {
		t.Errorf("opencl-cpu on %s at rank 64: head %d, want 3", skylake, h)
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
		{"this processor's family number", []string{own}, map[string][]string{own: {Processor(here, 6)}}, nil, hetero.Info{Name: "cpu", Kind: hetero.CPU, Model: here, Family: 6}, true},
		{"its model name, the family number unrecorded", []string{own}, map[string][]string{own: {here}}, nil, hetero.Info{Name: "cpu", Kind: hetero.CPU, Model: here, Family: 6}, true},
		{"another family number", []string{own}, map[string][]string{own: {Processor(here, 15)}}, nil, hetero.Info{Name: "cpu", Kind: hetero.CPU, Model: here, Family: 6}, false},
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

// TestHostHeadRemembered: the model's remembered choice of head is the
// one Info makes, for each class, processor, rank and inner loops asked
// in turn, asked again, and after the inner loops change.
func TestHostHeadRemembered(t *testing.T) {
	m, err := EmbeddedModel(hetero.MTTKRP)
	if err != nil {
		t.Fatal(err)
	}
	defer kernels.SetInnerLoops(kernels.InnerLoops())
	loops := kernels.AvailableInnerLoops()
	asks := []struct {
		class, model string
		rank         int
	}{
		{"cpu", "AMD EPYC 9R14 96-Core Processor", 16},
		{"cpu", "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", 16},
		{"cpu", "AMD EPYC 9R14 96-Core Processor", 64},
		{"cpu", "", 8},
		{"cuda-gpu", "NVIDIA H100", 16},
		{"opencl-cpu", "skylake-avx512", 16},
		{"opencl-gpu", "", 16},
	}
	for round := range 2 {
		for _, l := range loops {
			if err := kernels.SetInnerLoops(l); err != nil {
				t.Fatal(err)
			}
			for _, a := range asks {
				head, warning := m.hostHead(a.class, a.model, 0, a.rank)
				wantHead, wantWarning := m.Info.hostHead(a.class, a.model, a.rank)
				if head != wantHead || warning != wantWarning {
					t.Errorf("round %d, %s loops, %+v: head %d, warning %q; Info chooses %d, %q", round, l, a, head, warning, wantHead, wantWarning)
				}
			}
		}
	}
	if want := len(loops) * len(asks); len(m.chosen) != want {
		t.Errorf("%d choices remembered, want %d (one per question)", len(m.chosen), want)
	}
}

// TestHostHeadRememberedConcurrently: decisions on several cores that ask
// the same questions at once, each for the first time, leave one
// remembered choice per question, each the one Info makes.
func TestHostHeadRememberedConcurrently(t *testing.T) {
	asks := []struct {
		class, model string
		rank         int
	}{
		{"cpu", "AMD EPYC 9R14 96-Core Processor", 16},
		{"cpu", "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", 64},
		{"cuda-gpu", "NVIDIA H100", 16},
	}
	for range 20 {
		m, err := EmbeddedModel(hetero.MTTKRP)
		if err != nil {
			t.Fatal(err)
		}
		var start, done sync.WaitGroup
		start.Add(1)
		for g := range 8 {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				for i := range asks {
					a := asks[(i+g)%len(asks)]
					head, warning := m.hostHead(a.class, a.model, 0, a.rank)
					if wantHead, wantWarning := m.Info.hostHead(a.class, a.model, a.rank); head != wantHead || warning != wantWarning {
						t.Errorf("%+v: head %d, warning %q; Info chooses %d, %q", a, head, warning, wantHead, wantWarning)
					}
				}
			}()
		}
		start.Done()
		done.Wait()
		if len(m.chosen) != len(asks) {
			t.Fatalf("%d choices remembered after %d goroutines asked %d questions, want one per question", len(m.chosen), 8, len(asks))
		}
	}
}
