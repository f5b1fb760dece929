package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
)

// The host CPU's heads. Labels belong to the hardware that measured
// them, and on a CPU that includes the kernels' inner loops
// (kernels.InnerLoops): on 40 training tensors of 0.5-2 M nonzeros
// labelled on an AVX-512 machine and again on an AVX2 one, MTTKRP's
// fastest format was the same for only 57% of the modes
// (docs/model.md). So a model trained on CPU labels of more than one kind
// of inner loops has a cpu head per kind, named CPUHead(loops):
// "cpu/avx2+pext", "cpu/avx512+pext". A model trained on one kind keeps
// one head named "cpu" and records the kind in Info.CPUInnerLoops.

// cpuClass is the host CPU's device class (hetero.Info.Class).
var cpuClass = hetero.Info{Kind: hetero.CPU}.Class()

// CPUHead returns the name of the cpu head for labels measured with the
// given inner loops, in a model with one cpu head per kind.
func CPUHead(loops string) string { return cpuClass + "/" + loops }

// IsCPUHead reports whether name is a head, or device class, of the host
// CPU: "cpu" or a CPUHead.
func IsCPUHead(name string) bool {
	_, split := splitCPUHead(name)
	return name == cpuClass || split
}

// splitCPUHead returns the inner loops a CPUHead names, and whether name
// is one.
func splitCPUHead(name string) (loops string, ok bool) {
	return strings.CutPrefix(name, cpuClass+"/")
}

// HeadFor returns the index of the head that answers for a device of
// class on a machine whose CPU kernels run the inner loops loops, or -1
// when the model has none, and a warning when the head's labels were
// measured with other inner loops than loops.
//
// A device class other than the CPU's has the head of its name. The CPU
// has, in order: the head of its inner loops (CPUHead(loops)); a single
// "cpu" head, with a warning unless Info.CPUInnerLoops holds loops; else
// the cpu head of the nearest inner loops (the same vector width first),
// with a warning. A class that is already a CPUHead is looked up as is,
// and otherwise as the CPU with the inner loops it names.
func (info *Info) HeadFor(class, loops string) (head int, warning string) {
	return headFor(info.Heads, info.CPUInnerLoops, class, loops)
}

func headFor(heads []Head, cpuLoops []string, class, loops string) (int, string) {
	at := func(name string) int { return slices.IndexFunc(heads, func(h Head) bool { return h.Name == name }) }
	if !IsCPUHead(class) {
		return at(class), ""
	}
	if l, ok := splitCPUHead(class); ok {
		if h := at(class); h >= 0 {
			return h, ""
		}
		loops = l
	}
	if h := at(CPUHead(loops)); h >= 0 {
		return h, ""
	}
	if h := at(cpuClass); h >= 0 {
		if len(cpuLoops) == 0 || slices.Contains(cpuLoops, loops) {
			return h, ""
		}
		return h, fmt.Sprintf("the model's cpu head learned from times measured with %s inner loops, and this CPU runs %s, on which the fastest format often differs: sparsetune tune-model trains on this machine's own times", strings.Join(cpuLoops, ", "), loops)
	}
	// The first cpu head whose vector width is this CPU's, else the first.
	var kinds []string
	best, bestSameWidth := -1, false
	for i, h := range heads {
		l, ok := splitCPUHead(h.Name)
		if !ok {
			continue
		}
		kinds = append(kinds, l)
		if same := vectorWidth(l) == vectorWidth(loops); best < 0 || same && !bestSameWidth {
			best, bestSameWidth = i, same
		}
	}
	if best < 0 {
		return -1, ""
	}
	return best, fmt.Sprintf("the model's cpu heads learned from times measured with %s inner loops, and this CPU runs %s, on which the fastest format often differs: answering with the %s head; sparsetune tune-model trains on this machine's own times", strings.Join(kinds, ", "), loops, heads[best].Name)
}

// vectorWidth is the vector unit of inner loops ("avx512" of
// "avx512+pext").
func vectorWidth(loops string) string {
	w, _, _ := strings.Cut(loops, "+")
	return w
}

// otherCPU returns a warning when a cpu head learnt from the times of
// processors (Info.CPUModels) other than cpuModel, and "" when it learnt
// from cpuModel's, when no processor is recorded, or cpuModel is "". It
// concatenates rather than formats: a decision in a fresh process pays
// for fmt's first call.
func (info *Info) otherCPU(head int, cpuModel string) string {
	name := info.Heads[head].Name
	models := info.CPUModels[name]
	if cpuModel == "" || len(models) == 0 || slices.Contains(models, cpuModel) {
		return ""
	}
	return "the model's " + name + " head learnt from times measured on " + strings.Join(models, ", ") +
		", and this CPU is " + cpuModel + ", on which the fastest format often differs: sparsetune tune-model trains on this machine's own times"
}

// hostHead is HeadFor for this machine's inner loops.
func (info *Info) hostHead(class string) (int, string) {
	return info.HeadFor(class, kernels.InnerLoops())
}
