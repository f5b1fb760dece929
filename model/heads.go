package model

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
)

// The host CPU's heads. Labels belong to the hardware that measured
// them, and on a CPU that includes the kernels' inner loops
// (kernels.InnerLoops) and the processor: on 40 training tensors of
// 0.5-2 M nonzeros labelled on an AVX-512 machine and again on an AVX2
// one, MTTKRP's fastest format was the same for only 57% of the modes,
// and on 11,900 modes labelled on an AMD and an Intel processor running
// the same AVX-512 loops, for 64% (docs/model.md). So a model trained
// on CPU labels of more than one kind of hardware has a cpu head per
// kind, named CPUHead(loops, family): "cpu/avx2+pext",
// "cpu/avx512+pext/amd", "cpu/avx512+pext/intel". A family joins the
// name when the labels came from more than one processor family. A
// model trained on one kind keeps one head named "cpu" and records the
// kind in Info.CPUInnerLoops and Info.CPUModels.

// cpuClass is the host CPU's device class (hetero.Info.Class).
var cpuClass = hetero.Info{Kind: hetero.CPU}.Class()

// CPUHead returns the name of the cpu head for labels measured with the
// given inner loops on processors of the given family (CPUFamily; ""
// when the model's heads do not tell families apart).
func CPUHead(loops, family string) string {
	if family == "" {
		return cpuClass + "/" + loops
	}
	return cpuClass + "/" + loops + "/" + family
}

// Processor names a CPU for its heads: its model name (hetero.Info.Model,
// a labels row's device_model) and, where known, its family number
// (hetero.Info.Family, a row's device_family), as "AMD EPYC (family 19h)",
// the number in hexadecimal as the vendors write it. The model name alone
// may not tell processors apart that rank the formats differently: a VM's
// Zen 4 and Zen 5 both read "AMD EPYC" (docs/model.md, "Labels belong to
// the processor's generation"). A family of 0 or less, or no model name,
// gives the model name as it is.
func Processor(model string, family int) string {
	if family <= 0 || model == "" {
		return model
	}
	return model + familyOpen + strconv.FormatInt(int64(family), 16) + familyClose
}

// familyOpen and familyClose enclose a Processor's family number.
const familyOpen, familyClose = " (family ", "h)"

// splitProcessor returns the model name and the family number (0 if
// none) a Processor names.
func splitProcessor(p string) (model string, family int) {
	rest, ok := strings.CutSuffix(p, familyClose)
	if !ok {
		return p, 0
	}
	i := strings.LastIndex(rest, familyOpen)
	if i < 0 {
		return p, 0
	}
	f, err := strconv.ParseInt(rest[i+len(familyOpen):], 16, 32)
	if err != nil || f <= 0 {
		return p, 0
	}
	return rest[:i], int(f)
}

// CPUFamily returns the family of a processor (a Processor, or a bare
// model name) as cpu heads name it: the vendor by the model name, "amd"
// or "intel", joined by the family number where the processor records
// one ("amd-19h", "amd-1ah"); "" for another vendor. The vendor is the
// coarsest split the labels call for (an AMD and an Intel host ranked
// the formats differently) and all a model name reliably tells on every
// operating system; the family number tells generations of one vendor
// apart where the model name does not. Processors of one family may
// differ too; a head records which trained it (Info.CPUModels).
func CPUFamily(processor string) string {
	name, family := splitProcessor(processor)
	var vendor string
	switch {
	case strings.HasPrefix(name, "AMD "):
		vendor = "amd"
	case strings.HasPrefix(name, "Intel"):
		vendor = "intel"
	default:
		return ""
	}
	if family <= 0 {
		return vendor
	}
	return vendor + "-" + strconv.FormatInt(int64(family), 16) + "h"
}

// familyVendor returns the vendor of a CPUFamily ("amd" of "amd-19h").
func familyVendor(family string) string {
	v, _, _ := strings.Cut(family, "-")
	return v
}

// sameProcessor reports whether a processor recorded by a head (a
// Processor) is the one of model name model and family number family:
// the same model name, and the same family number unless either leaves
// it unrecorded (0: rows labelled before builds recorded it). It
// allocates nothing: decisions ask it.
func sameProcessor(recorded, model string, family int) bool {
	rm, rf := splitProcessor(recorded)
	return rm == model && (rf == 0 || family <= 0 || rf == family)
}

// IsCPUHead reports whether name is a head, or device class, of the host
// CPU: "cpu" or a CPUHead, or a RankHead of either.
func IsCPUHead(name string) bool {
	_, _, split := splitCPUHead(name)
	return BaseHead(name) == cpuClass || split
}

// splitCPUHead returns the inner loops and the family ("" if none) a
// CPUHead (or a RankHead of one) names, and whether name is one.
func splitCPUHead(name string) (loops, family string, ok bool) {
	rest, ok := strings.CutPrefix(BaseHead(name), cpuClass+"/")
	if !ok {
		return "", "", false
	}
	loops, family, _ = strings.Cut(rest, "/")
	return loops, family, true
}

// The heads of an OpenCL CPU device. PoCL compiles its kernels for the
// processor it names in the device's name, "pthread-<processor>-<brand>"
// ("pthread-haswell-AMD EPYC", "pthread-skylake-avx512-AMD EPYC"), and
// the fastest format is not the same for every processor it compiles
// for: of 1,040 held-out MTTKRP modes timed under PoCL's haswell build
// on an AVX2 VM and, three days and some kernel changes later, under
// its skylake-avx512 build on an AVX-512 one, 75% had the same (docs/model.md,
// "A PoCL head per target"), and a head trained on the first picked
// 0.91 of the second's fastest where always-CSF picked 0.94. So a
// model trained on OpenCL CPU labels of more than one target has a head
// per target, DeviceHead(class, target): "opencl-cpu/haswell",
// "opencl-cpu/skylake-avx512". One trained on a single target keeps the
// head "opencl-cpu".

// openCLCPUClass is a PoCL device's class (hetero.Info.Class).
const openCLCPUClass = "opencl-cpu"

// DeviceTarget returns the processor an accelerator of class compiles
// its kernels for, as its heads name it, from the device's model
// (hetero.Info.Model, a labels row's device_model): the processor
// words of a PoCL device's name ("skylake-avx512" of
// "pthread-skylake-avx512-AMD EPYC [CPU]"), which LLVM spells in lower
// case, unlike the brand that follows. It is "" for any other device.
func DeviceTarget(class, model string) string {
	rest, ok := strings.CutPrefix(model, "pthread-")
	if class != openCLCPUClass || !ok {
		return ""
	}
	var words []string
	for w := range strings.SplitSeq(rest, "-") {
		if w == "" || w != strings.ToLower(w) {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, "-")
}

// DeviceHead returns the name of the head of an accelerator class for
// labels measured on a device compiling for target (DeviceTarget), or
// class when target is "".
func DeviceHead(class, target string) string {
	if target == "" {
		return class
	}
	return class + "/" + target
}

// HeadFor returns the index of the head that answers for a device of
// class on a machine whose CPU kernels run the inner loops loops, the
// device's model being model (for a CPU, its Processor: the model name
// and family number of hetero.Info; "" when unknown), or -1 when the
// model has none, and a warning when the head's labels were measured on
// other hardware: other inner loops, or another family of processors,
// or another PoCL target.
//
// An accelerator has the head of its class and target (DeviceHead),
// else the head of its class, else another target's head of its class,
// with a warning; a class that names a target already ("opencl-cpu/haswell",
// a labels row's after training split them) is looked up as is first.
// The CPU has, in order: the head of its inner loops and family
// (CPUHead(loops, CPUFamily(model))); where model records a family
// number, the head of its inner loops and vendor (labels that did not
// record one); the head of its inner loops for every family
// (CPUHead(loops, "")); a single "cpu" head, with a warning unless
// Info.CPUInnerLoops holds loops; else the nearest cpu head, with a
// warning: the same inner loops on the same vendor's processors first,
// then the same inner loops, then the same vendor and vector width,
// then the same vector width. model is a Processor. A class that
// is already a CPUHead is looked up as is, and otherwise as the CPU with
// the inner loops (and family) it names.
func (info *Info) HeadFor(class, loops, model string) (head int, warning string) {
	if !IsCPUHead(class) {
		return info.deviceHead(BaseHead(class), model)
	}
	return headFor(info.Heads, info.CPUInnerLoops, class, loops, CPUFamily(model))
}

// deviceHead is HeadFor for an accelerator class.
func (info *Info) deviceHead(class, model string) (int, string) {
	at := info.HeadIndex
	if h := at(class); h >= 0 {
		return h, ""
	}
	base, target, _ := strings.Cut(class, "/")
	if target == "" {
		target = DeviceTarget(base, model)
	}
	if h := at(DeviceHead(base, target)); h >= 0 {
		return h, ""
	}
	if h := at(base); h >= 0 {
		return h, ""
	}
	for i, h := range info.Heads {
		if b, t, ok := strings.Cut(h.Name, "/"); ok && b == base && BaseHead(h.Name) == h.Name {
			this := "another"
			if target != "" {
				this = target
			}
			return i, fmt.Sprintf("the model's %s head learnt from times measured on a device compiling for %s, and this one compiles for %s, on which the fastest format often differs: sparsetune tune-model trains on this machine's own times", h.Name, t, this)
		}
	}
	return -1, ""
}

func headFor(heads []Head, cpuLoops []string, class, loops, family string) (int, string) {
	at := func(name string) int { return slices.IndexFunc(heads, func(h Head) bool { return h.Name == name }) }
	class = BaseHead(class)
	if !IsCPUHead(class) {
		return at(class), ""
	}
	if l, f, ok := splitCPUHead(class); ok {
		if h := at(class); h >= 0 {
			return h, ""
		}
		loops = l
		if f != "" {
			family = f
		}
	}
	if family != "" {
		if h := at(CPUHead(loops, family)); h >= 0 {
			return h, ""
		}
		// A head of the vendor's processors, their family numbers
		// unrecorded, before any head of every vendor's.
		if v := familyVendor(family); v != family {
			if h := at(CPUHead(loops, v)); h >= 0 {
				return h, ""
			}
		}
	}
	if h := at(CPUHead(loops, "")); h >= 0 {
		return h, ""
	}
	if h := at(cpuClass); h >= 0 {
		if len(cpuLoops) == 0 || slices.Contains(cpuLoops, loops) {
			return h, ""
		}
		return h, fmt.Sprintf("the model's cpu head learned from times measured with %s inner loops, and this CPU runs %s, on which the fastest format often differs: sparsetune tune-model trains on this machine's own times", strings.Join(cpuLoops, ", "), loops)
	}
	// The nearest cpu head: a higher score is nearer.
	var kinds []string
	best, bestScore := -1, -1
	for i, h := range heads {
		l, f, ok := splitCPUHead(h.Name)
		if !ok || BaseHead(h.Name) != h.Name {
			continue
		}
		kinds = append(kinds, h.Name)
		score := 0
		sameVendor := f != "" && familyVendor(f) == familyVendor(family)
		switch {
		case l == loops && sameVendor:
			score = 4
		case l == loops:
			score = 3
		case sameVendor && vectorWidth(l) == vectorWidth(loops):
			score = 2
		case vectorWidth(l) == vectorWidth(loops):
			score = 1
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return -1, ""
	}
	this := loops + " inner loops"
	if family != "" {
		this += ", an " + family + " processor"
	}
	return best, fmt.Sprintf("the model's cpu heads (%s) learned from times measured on other hardware than this CPU (%s), on which the fastest format often differs: answering with the %s head; sparsetune tune-model trains on this machine's own times", strings.Join(kinds, ", "), this, heads[best].Name)
}

// vectorWidth is the vector unit of inner loops ("avx512" of
// "avx512+pext").
func vectorWidth(loops string) string {
	w, _, _ := strings.Cut(loops, "+")
	return w
}

// otherCPU returns a warning when a cpu head learnt from the times of
// processors (Info.CPUModels) other than the one of model name cpuModel
// and family number family (sameProcessor), and "" when it learnt from
// that one's, when no processor is recorded, or cpuModel is "". It
// concatenates rather than formats: a decision in a fresh process pays
// for fmt's first call.
func (info *Info) otherCPU(head int, cpuModel string, family int) string {
	name := info.Heads[head].Name
	models := info.CPUModels[name]
	if cpuModel == "" || len(models) == 0 {
		return ""
	}
	for _, m := range models {
		if sameProcessor(m, cpuModel, family) {
			return ""
		}
	}
	return "the model's " + name + " head learnt from times measured on " + strings.Join(models, ", ") +
		", and this CPU is " + Processor(cpuModel, family) + ", on which the fastest format often differs: sparsetune tune-model trains on this machine's own times"
}

// LearntOn reports whether the head that answers for dev on this machine
// learnt from times measured on dev's own processor: a cpu head chosen
// without a warning whose recorded processors (Info.CPUModels) include
// dev's. It is false for an accelerator, whose model no head records,
// and for a head that answers with the rule, which is no one machine's.
// tune-model holds a tuned model to a higher bar where it is true: the
// head in effect already learnt this machine, from more rows than a
// tuning labels.
func (info *Info) LearntOn(dev hetero.Info) bool {
	if dev.Kind != hetero.CPU || dev.Model == "" {
		return false
	}
	head, warning := info.hostHead(dev.Class(), Processor(dev.Model, dev.Family), 0)
	if head < 0 || warning != "" {
		return false
	}
	name := info.Heads[head].Name
	return !slices.Contains(info.RuleHeads, name) && slices.ContainsFunc(info.CPUModels[name], func(m string) bool { return sameProcessor(m, dev.Model, dev.Family) })
}

// UnrecordedLabelRank is the rank of the labels of a head whose file
// records none (Info.LabelRanks): every model file was labelled at rank
// 16, train's default, before files recorded it.
const UnrecordedLabelRank = 16

// HeadLabelRanks returns the ranks at which head's labels were timed:
// the recorded ones, else UnrecordedLabelRank.
func (info *Info) HeadLabelRanks(head string) []int {
	if ranks, ok := info.LabelRanks[head]; ok {
		return ranks
	}
	return []int{UnrecordedLabelRank}
}

// LearntAtRank reports whether the head that answers for dev on this
// machine at rank learnt from times at that rank (HeadLabelRanks).
func (info *Info) LearntAtRank(dev hetero.Info, rank int) bool {
	head, _ := info.hostHead(dev.Class(), Processor(dev.Model, dev.Family), rank)
	return head >= 0 && slices.Contains(info.HeadLabelRanks(info.Heads[head].Name), rank)
}

// Rank heads. The fastest format moves with the rank R of the dense
// operands: on the held-out tensors of the Intel VM, MTTKRP's label at
// rank 64 was rank 16's for only 68% of the modes, and a model that
// learnt at 16 picked formats 0.914 of the fastest there (docs/model.md,
// "The default model at other ranks"). The features do not hold the
// rank, so a model learns it through its heads: rows of one device
// class timed at several ranks train one head per rank, the rank most
// rows were timed at under the class's own name and every other under
// RankHead(class, rank) ("cpu/avx512+pext/amd@r64"). A prediction at
// rank R asks the head of its class whose labels' rank is nearest to R
// (HeadAtRank).

// rankHeadSep separates a rank head's class from its rank.
const rankHeadSep = "@r"

// RankHead returns the name of the head of class that learnt from times
// at rank.
func RankHead(class string, rank int) string {
	return class + rankHeadSep + strconv.Itoa(rank)
}

// BaseHead returns the class a RankHead learnt for, and any other name
// as it is.
func BaseHead(name string) string {
	base, _, ok := splitRankHead(name)
	if !ok {
		return name
	}
	return base
}

// splitRankHead returns the class and rank a RankHead names, and whether
// name is one.
func splitRankHead(name string) (class string, rank int, ok bool) {
	i := strings.LastIndex(name, rankHeadSep)
	if i <= 0 {
		return "", 0, false
	}
	r, err := strconv.Atoi(name[i+len(rankHeadSep):])
	if err != nil || r <= 0 || strconv.Itoa(r) != name[i+len(rankHeadSep):] {
		return "", 0, false
	}
	return name[:i], r, true
}

// HeadAtRank returns, of head (an index into Heads, as HeadFor returns)
// and the other heads of its class, the one whose labels were timed at
// the rank nearest to rank (HeadLabelRanks), by ratio: 32 is as near to
// 16 as to 64. A tie goes to the class's own head, then to the lower
// rank. A rank of 0 or less, or a head below 0, is returned as it is.
func (info *Info) HeadAtRank(head, rank int) int {
	if head < 0 || rank <= 0 {
		return head
	}
	base := BaseHead(info.Heads[head].Name)
	type key struct {
		dist  float64
		other bool // not the class's own head
		rank  int
	}
	less := func(a, b key) bool {
		if a.dist != b.dist {
			return a.dist < b.dist
		}
		if a.other != b.other {
			return !a.other
		}
		return a.rank < b.rank
	}
	best := -1
	var bestKey key
	for i, h := range info.Heads {
		if BaseHead(h.Name) != base {
			continue
		}
		d, r := rankDistance(info.HeadLabelRanks(h.Name), rank)
		if k := (key{d, h.Name != base, r}); best < 0 || less(k, bestKey) {
			best, bestKey = i, k
		}
	}
	return best
}

// rankDistance returns the distance |log2(r/rank)| from rank to the
// nearest of ranks (increasing, as a model file lists them: the lower
// of two as near), and that rank.
func rankDistance(ranks []int, rank int) (float64, int) {
	dist, at := math.Inf(1), 0
	for _, r := range ranks {
		if d := math.Abs(math.Log2(float64(r) / float64(rank))); d < dist {
			dist, at = d, r
		}
	}
	return dist, at
}

// HeadAt is HeadFor at rank: the head that answers for a device of
// class on a machine whose CPU kernels run loops, the device's model
// being model (a Processor for the CPU), when the dense operands have
// rank columns. It is HeadFor's head moved to the one learnt at the
// nearest rank (HeadAtRank), or, for a head of one family number, to
// its vendor's where that one learnt at a nearer rank (vendorAtRank). A
// rank of 0 or less keeps HeadFor's head. Predictions ask it with this
// machine's inner loops; an evaluation asks it with each row's, so that
// it scores the head that would have answered on the row's hardware.
func (info *Info) HeadAt(class, loops, model string, rank int) (head int, warning string) {
	head, warning = info.HeadFor(class, loops, model)
	return info.vendorAtRank(head, rank), warning
}

// hostHead is HeadAt for this machine's inner loops.
func (info *Info) hostHead(class, model string, rank int) (int, string) {
	return info.HeadAt(class, kernels.InnerLoops(), model, rank)
}

// vendorAtRank is HeadAtRank, except that a head of one family number
// of a vendor's processors ("cpu/avx512+pext/amd-19h") gives way to the
// vendor's head whose family numbers went unrecorded
// ("cpu/avx512+pext/amd"), when the latter's class has a head learnt at
// a rank nearer to rank. The fastest format moves more with the rank
// than between two generations of one vendor (docs/model.md, "Labels
// belong to the processor's generation").
func (info *Info) vendorAtRank(head, rank int) int {
	at := info.HeadAtRank(head, rank)
	if head < 0 || rank <= 0 {
		return at
	}
	loops, family, ok := splitCPUHead(info.Heads[head].Name)
	if !ok || family == "" || familyVendor(family) == family {
		return at
	}
	v := info.HeadIndex(CPUHead(loops, familyVendor(family)))
	if v < 0 {
		return at
	}
	vat := info.HeadAtRank(v, rank)
	d, _ := rankDistance(info.HeadLabelRanks(info.Heads[at].Name), rank)
	if dv, _ := rankDistance(info.HeadLabelRanks(info.Heads[vat].Name), rank); dv < d {
		return vat
	}
	return at
}

// headChoice is one answer of Info.hostHead: the head, and its warning,
// for a device class and model (and family number) at a rank under inner
// loops.
type headChoice struct {
	class, model, loops string
	family, rank        int
	head                int
	warning             string
}

// hostHead is m.Info.hostHead, remembered: a head is chosen once per
// device class, processor, rank and inner loops. Choosing builds head
// names, strings every decision allocated; on predict --mode all's
// helper, whose processor has not allocated since the last collection,
// each size class's first object refills its cache (docs/model.md, "A
// decision's allocations").
func (m *ONNXModel) hostHead(class, cpuModel string, family, rank int) (int, string) {
	loops := kernels.InnerLoops()
	// find returns the remembered choice of this question; the caller
	// holds chosenMu.
	find := func() (headChoice, bool) {
		for _, c := range m.chosen {
			if c.class == class && c.model == cpuModel && c.family == family && c.loops == loops && c.rank == rank {
				return c, true
			}
		}
		return headChoice{}, false
	}
	m.chosenMu.Lock()
	c, ok := find()
	m.chosenMu.Unlock()
	if ok {
		return c.head, c.warning
	}
	// Chosen without the lock, which decisions on other cores would
	// wait on; two that miss at once choose alike, and the second to
	// finish finds the first's entry rather than adding its own.
	head, warning := m.Info.hostHead(class, Processor(cpuModel, family), rank)
	m.chosenMu.Lock()
	defer m.chosenMu.Unlock()
	if c, ok := find(); ok {
		return c.head, c.warning
	}
	m.chosen = append(m.chosen, headChoice{class, cpuModel, loops, family, rank, head, warning})
	return head, warning
}
