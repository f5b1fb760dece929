package train

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model"
)

// DefaultSoft is the soft-target temperature sparsetune train uses unless
// told otherwise (FitOptions.Soft). Cross-validated on the MTTKRP labels
// of the default model (docs/model.md), temperatures 0.05 to 0.4 raised
// every head's oracle ratio by up to 0.004 and PoCL's accuracy by 0.016
// over labels alone; 0.4 did best.
const DefaultSoft = 0.4

// DefaultAverage is the decay of the moving average of the weights that
// sparsetune train keeps (model.FitOptions.Average) unless told
// otherwise. On the MTTKRP rows with 200 more large tensors
// (docs/model.md, "More large tensors"), the average scored 0.815 /
// 0.843 / 0.977 on 287 unseen rows against the iterates' 0.808 / 0.829 /
// 0.976 (one seed each: within noise, and no worse).
const DefaultAverage = 0.999

// FitOptions control Fit and Evaluate.
type FitOptions struct {
	// Dir is the labels file's directory: rows name their tensors
	// relative to it.
	Dir string
	// Folds is k of the grouped k-fold cross-validation (DefaultFolds
	// when 0); 1 skips cross-validation.
	Folds int
	// Seed fixes the folds, the initial weights and the shuffling: the
	// same rows and seed give the same report and model.
	Seed uint64
	// Model sets epochs, batch size, learning rate and patience
	// (model.DefaultFitOptions when Epochs is 0). Its Seed and Progress
	// are set by Fit.
	Model model.FitOptions
	// Soft, when positive, trains the GCN on soft targets instead of the
	// fastest format alone: format f of a row gets weight
	// exp(-ln(t_f/t_best)/Soft), normalised, so that with Soft 0.05 a
	// format 5% slower than the best weighs 0.38 of it and one 30% slower
	// 0.005 (model.Example's Targets). Zero trains on labels.
	Soft float64
	// Hidden is the width of new models' graph layers (model.DefaultConfig's
	// when zero).
	Hidden int
	// Budget is the graph budget of new models (graphenc.DefaultBudget
	// when zero).
	Budget graphenc.Budget
	// Baselines are the baseline methods compared (model.BaselineMethods()
	// when nil).
	Baselines []string
	// Warn receives warnings: labels from several builds, rows left out.
	Warn func(string)
	// Progress, when set, is told of each tensor read and each epoch.
	Progress func(FitProgress)
	// Refit, when set, trains each GCN a second time once early stopping
	// has chosen its epoch count: from the same start, on every training
	// row (the validation part too), for that many epochs. Early stopping
	// needs rows it does not train on; the refit puts them back, a quarter
	// more rows at 5 folds.
	Refit bool
	// Trees sets the boosting of the trees cross-validated beside the
	// network (model.DefaultTreeOptions where zero); its Seed, when zero,
	// is Seed.
	Trees model.TreeOptions
	// AllTrees, when set, gives every final model trees for every head
	// but the rule heads, whatever cross-validation found (tune-model
	// decides on held-out rows which to keep).
	AllTrees bool
	// Init, when set, holds a network per op to start from instead of
	// random weights (fine-tuning: sparsetune tune-model): its layers,
	// its standardisation and every head of the same class and formats
	// (model.GCN.StartFrom); a head it lacks starts random.
	Init map[string]*model.GCN
}

// DefaultFolds is k when FitOptions.Folds is 0.
const DefaultFolds = 5

// FitProgress reports Fit's and Evaluate's progress. Stage is "features"
// while the tensors are read (Done of Total tensors), then "fold" (Fold of
// Folds, 1-based) or "final" while a GCN trains (Epoch, with its losses),
// and "trees" while the boosted trees are cross-validated (Done of Total
// folds).
type FitProgress struct {
	Stage       string
	Done, Total int
	Tensor      string
	Fold, Folds int
	Op          string
	Epoch       int
	Epochs      int
	TrainLoss   float64
	ValLoss     float64
}

// Curve is the training curve of one GCN: per epoch, the mean loss per
// labelled head and the accuracy on the training and validation examples
// (validation empty when there was no validation split).
type Curve struct {
	Op                 string
	TrainLoss, ValLoss []float64
	TrainAcc, ValAcc   []float64
	BestEpoch          int // 1-based: the epoch whose weights were kept
	TrainExamples      int
	ValExamples        int
	// RefitExamples and RefitEpoch describe the refit on every row
	// (FitOptions.Refit), when there was one: its weights are the ones
	// kept then, from its epoch RefitEpoch.
	RefitExamples, RefitEpoch int
	// StartedFrom are the heads whose weights came from FitOptions.Init.
	StartedFrom []string
}

// Report is what Fit and Evaluate found.
type Report struct {
	// Rows are the labelled rows evaluated, in file order; Picks' Formats
	// index them.
	Rows []LabelRow
	// Unlabelled counts the rows left out because every format was
	// skipped (empty Label).
	Unlabelled int
	// Tensors and Sources count the distinct tensors and sources.
	Tensors, Sources int
	// Folds is the k used (1: none).
	Folds int
	// Picks holds each predictor's picks: the GCN (out-of-fold for Fit, the
	// given model for Evaluate), the baselines (out-of-fold), the
	// hand rule and each fixed format.
	Picks []Picks
	// Scores are the table: per (op, device class) and predictor.
	Scores []Score
	// Builds lists the builds when the rows mix them (MixedBuilds).
	Builds []string
	// Models are Fit's final GCNs, one per op, trained on every row;
	// Curves their training curves.
	Models map[string]*model.GCN
	Curves []Curve
	// RuleHeads are, per op, the device classes whose head defers to the
	// hand rule (RuleHeads of the cross-validated scores): Fit records
	// them in Models.
	RuleHeads map[string][]string
	// TreeHeads are, per op, the device classes whose head answers with
	// boosted trees, alone or blended with the network (chooseTrees on
	// the out-of-fold probabilities): Fit fits them on every row of the
	// head and records them in Models.
	TreeHeads map[string][]string
	// BlendMargins are, per op and tree head, the margin under which the
	// trees ask the network too (model.GCN.BlendMargins), chosen on the
	// folds (chooseTrees).
	BlendMargins map[string]map[string]float64

	// For ChooseTrees after Evaluate: the rows scored and, per row, the
	// probabilities of its head's network and trees (nil where none).
	data                    *dataset
	networkProbs, treeProbs [][]float64
}

// ChooseTrees returns, from an Evaluate report, the heads whose models'
// trees, alone or blended with the network under some margin, score at
// least as well as the network on the report's rows, and each one's
// margin, as Fit chooses them on its folds (the rule heads given are
// left out). tune-model decides so on its held-out rows.
func (r *Report) ChooseTrees(ruleHeads map[string][]string) (map[string][]string, map[string]map[string]float64) {
	if r.data == nil {
		return nil, nil
	}
	return r.data.chooseTrees(r.Scores, ruleHeads, r.networkProbs, r.treeProbs)
}

func (o *FitOptions) defaults() error {
	if o.Folds == 0 {
		o.Folds = DefaultFolds
	}
	if o.Folds < 1 {
		return fmt.Errorf("folds: expected at least 1, found %d", o.Folds)
	}
	if o.Model.Epochs == 0 {
		o.Model = model.DefaultFitOptions
	}
	if o.Budget == (graphenc.Budget{}) {
		o.Budget = graphenc.DefaultBudget
	}
	if o.Baselines == nil {
		o.Baselines = model.BaselineMethods()
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	if o.Progress == nil {
		o.Progress = func(FitProgress) {}
	}
	return nil
}

// dataset is the labelled rows with the model input of each (shared by
// the rows of one tensor, op and mode).
type dataset struct {
	rows   []LabelRow
	inputs []*model.Input
	// cpuLoops are the distinct inner loops of the cpu rows' builds
	// (cpuInnerLoops), which every model trained on them records.
	cpuLoops []string
	// cpuModels are the processors of each cpu head's rows
	// (cpuModelsOf), which every model trained on them records.
	cpuModels map[string][]string
}

// prepare drops unlabelled rows, warns about mixed builds, reads each
// tensor once and computes the input of each (tensor, op, mode) as
// prediction does (model.SummaryInput on features.Summarize of the tensor).
func prepare(all []LabelRow, o *FitOptions, rep *Report) (*dataset, error) {
	kinds := cpuKinds(all)
	b := MixedBuilds(all)
	rep.Builds = b
	if b != nil && (len(kinds) == 1 || MixedBuilds(withoutLoops(all)) != nil) {
		o.Warn(fmt.Sprintf("the labels mix %d builds, whose times may not be comparable: %v", len(b), b))
	} else if len(kinds) > 1 {
		// Only the hardware differs, and splitCPU keeps each kind's
		// times apart.
		o.Warn(fmt.Sprintf("the cpu rows were measured on %d kinds of CPU (%s): one cpu head per kind", len(kinds), strings.Join(kinds, ", ")))
	}
	d := &dataset{}
	for _, r := range all {
		if r.Label == "" {
			rep.Unlabelled++
			continue
		}
		d.rows = append(d.rows, r)
	}
	if rep.Unlabelled > 0 {
		o.Warn(fmt.Sprintf("%d rows have no label (every format was skipped): left out", rep.Unlabelled))
	}
	d.cpuLoops = cpuInnerLoops(d.rows)
	if families := cpuFamilies(d.rows); len(d.cpuLoops) > 1 || len(families) > 1 {
		splitCPU(d.rows, len(families) > 1)
	}
	split := splitTargets(d.rows, o.Init)
	for _, class := range slices.Sorted(maps.Keys(split)) {
		if heads := split[class]; len(heads) > 1 {
			o.Warn(fmt.Sprintf("the %s rows were measured on devices compiling for %d processors: one head per processor (%s)", class, len(heads), strings.Join(heads, ", ")))
		} else {
			o.Warn(fmt.Sprintf("the %s rows were measured on one processor, and the model tuned has a head per processor: their head is %s", class, heads[0]))
		}
	}
	d.cpuModels = cpuModelsOf(d.rows)
	if len(d.rows) == 0 {
		return nil, errors.New("no labelled rows")
	}
	every := make([]int, len(d.rows))
	for i := range every {
		every[i] = i
	}
	for _, op := range hetero.Ops {
		ranks := d.labelRanks(op, every)
		for _, class := range slices.Sorted(maps.Keys(ranks)) {
			if r := ranks[class]; len(r) > 1 {
				heads := splitRanks(d.rows, op, class)
				o.Warn(fmt.Sprintf("the %s rows of %s were timed at ranks %v: one head per rank (%s), and a prediction asks the one nearest its rank", op, class, r, strings.Join(heads, ", ")))
			}
		}
	}
	rep.Rows = d.rows
	byTensor := map[string][]int{}
	var tensors []string
	sources := map[string]bool{}
	for i, r := range d.rows {
		if byTensor[r.Tensor] == nil {
			tensors = append(tensors, r.Tensor)
		}
		byTensor[r.Tensor] = append(byTensor[r.Tensor], i)
		sources[r.Source] = true
	}
	rep.Tensors, rep.Sources = len(tensors), len(sources)
	d.inputs = make([]*model.Input, len(d.rows))
	for n, name := range tensors {
		o.Progress(FitProgress{Stage: "features", Done: n, Total: len(tensors), Tensor: name})
		path := filepath.FromSlash(name)
		if !filepath.IsAbs(path) {
			path = filepath.Join(o.Dir, path)
		}
		x, err := formats.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		first := &d.rows[byTensor[name][0]]
		if fp := model.Fingerprint(x); fp != first.Fingerprint {
			return nil, fmt.Errorf("tensor %s: fingerprint %.12s…, the labels record %.12s… (the file changed since it was labelled)", name, fp, first.Fingerprint)
		}
		s, err := features.Summarize(x)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		type opMode struct {
			op   string
			mode int
		}
		done := map[opMode]*model.Input{}
		for _, i := range byTensor[name] {
			r := &d.rows[i]
			k := opMode{r.Op, r.Mode}
			if in, ok := done[k]; ok {
				d.inputs[i] = in
				continue
			}
			op, err := hetero.ParseOp(r.Op)
			if err != nil {
				return nil, fmt.Errorf("tensor %s: %w", name, err)
			}
			in, _, _, err := model.SummaryInput(s, op, r.Mode-1, o.Budget)
			if err != nil {
				return nil, fmt.Errorf("tensor %s %s mode %d: %w", name, r.Op, r.Mode, err)
			}
			done[k], d.inputs[i] = in, in
		}
	}
	o.Progress(FitProgress{Stage: "features", Done: len(tensors), Total: len(tensors)})
	return d, nil
}

// GroupFolds assigns each row a fold in [0, k) such that all rows of one
// Source share a fold: tensors derived from one matrix are never on both
// sides of a split. The sources are shuffled by a PCG seeded with seed and
// each goes to the fold with the fewest rows so far (the lowest such
// fold on a tie), so folds are balanced by rows and the assignment
// depends only on the rows and the seed.
func GroupFolds(rows []LabelRow, k int, seed uint64) ([]int, error) {
	count := map[string]int{}
	var sources []string
	for _, r := range rows {
		if count[r.Source] == 0 {
			sources = append(sources, r.Source)
		}
		count[r.Source]++
	}
	if k < 2 || len(sources) < k {
		return nil, fmt.Errorf("%d-fold cross-validation grouped by source needs at least %d sources, the rows have %d", k, max(k, 2), len(sources))
	}
	slices.Sort(sources)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rng.Shuffle(len(sources), func(i, j int) { sources[i], sources[j] = sources[j], sources[i] })
	size := make([]int, k)
	fold := map[string]int{}
	for _, s := range sources {
		f := 0
		for g := range size {
			if size[g] < size[f] {
				f = g
			}
		}
		fold[s] = f
		size[f] += count[s]
	}
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = fold[r.Source]
	}
	return out, nil
}

// classKind is the hetero.Kind of a device class, for the rule and the
// baselines, which distinguish the host CPU from accelerators only.
func classKind(class string) hetero.Kind {
	if model.IsCPUHead(class) {
		return hetero.CPU
	}
	return hetero.GPU
}

// withoutLoops returns rows with their builds' inner loops cleared.
func withoutLoops(rows []LabelRow) []LabelRow {
	out := slices.Clone(rows)
	for i := range out {
		out[i].Build.InnerLoops = ""
	}
	return out
}

// splitCPU gives the cpu rows one device class per kind of inner loops
// and, with byFamily, per family of processors (model.CPUHead:
// "cpu/avx2+pext", "cpu/avx512+pext/intel"). prepare calls it when they
// were measured with more than one kind of inner loops or on more than
// one family: each kind is different hardware, with its own head and
// its own scores. Rows of one kind keep the class "cpu".
func splitCPU(rows []LabelRow, byFamily bool) {
	for i := range rows {
		if r := &rows[i]; r.DeviceClass == "cpu" {
			var family string
			if byFamily {
				family = model.CPUFamily(r.processor())
			}
			r.DeviceClass = model.CPUHead(r.Build.InnerLoops, family)
		}
	}
}

// splitTargets gives the rows of an accelerator class measured on
// devices compiling for more than one processor (model.DeviceTarget: a
// PoCL device's) one device class per processor, model.DeviceHead
// ("opencl-cpu/haswell"): each is different hardware, with its own head
// and its own scores. It does so for a class of one processor too when
// a model of init (fine-tuning) has heads per processor for it, so that
// the tuned head is the namesake of the one it starts from. Rows of
// another class, or of no known processor, keep their class. It returns
// the heads made, by class.
func splitTargets(rows []LabelRow, init map[string]*model.GCN) map[string][]string {
	targets := map[string][]string{}
	for _, r := range rows {
		if t := model.DeviceTarget(r.DeviceClass, r.DeviceModel); t != "" && !slices.Contains(targets[r.DeviceClass], t) {
			targets[r.DeviceClass] = append(targets[r.DeviceClass], t)
		}
	}
	perTarget := func(class string) bool {
		if len(targets[class]) > 1 {
			return true
		}
		for _, g := range init {
			if slices.ContainsFunc(g.Config.Heads, func(h model.Head) bool { return strings.HasPrefix(h.Name, class+"/") }) {
				return true
			}
		}
		return false
	}
	split := map[string][]string{}
	for class, ts := range targets {
		if perTarget(class) {
			for _, t := range ts {
				split[class] = append(split[class], model.DeviceHead(class, t))
			}
			slices.Sort(split[class])
		}
	}
	for i := range rows {
		r := &rows[i]
		if _, ok := split[r.DeviceClass]; ok {
			r.DeviceClass = model.DeviceHead(r.DeviceClass, model.DeviceTarget(r.DeviceClass, r.DeviceModel))
		}
	}
	return split
}

// splitRanks gives op's rows of class, timed at more than one rank, one
// device class per rank: the rank most of them were timed at keeps the
// class (a tie goes to the rank nearest to DefaultLabelRank, then to
// the lower), and the rows of every other rank R take
// model.RankHead(class, R). Each is a head of its own, since the
// features do not hold the rank and the fastest format moves with it
// (model.HeadAtRank). It returns the heads, each with its rank.
func splitRanks(rows []LabelRow, op hetero.Op, class string) []string {
	rankOf := func(r *LabelRow) int {
		if r.Rank > 0 {
			return r.Rank
		}
		return model.UnrecordedLabelRank
	}
	count := map[int]int{}
	for i := range rows {
		if r := &rows[i]; r.Op == op.String() && r.DeviceClass == class {
			count[rankOf(r)]++
		}
	}
	ranks := slices.Sorted(maps.Keys(count))
	nearDefault := func(r int) float64 { return math.Abs(math.Log2(float64(r) / DefaultLabelRank)) }
	base := ranks[0]
	for _, r := range ranks[1:] {
		if count[r] > count[base] || (count[r] == count[base] && nearDefault(r) < nearDefault(base)) {
			base = r
		}
	}
	for i := range rows {
		if r := &rows[i]; r.Op == op.String() && r.DeviceClass == class && rankOf(r) != base {
			r.DeviceClass = model.RankHead(class, rankOf(r))
		}
	}
	heads := []string{fmt.Sprintf("%s at %d", class, base)}
	for _, r := range ranks {
		if r != base {
			heads = append(heads, model.RankHead(class, r))
		}
	}
	return heads
}

// opsAndClasses returns the ops of the rows (in hetero.Ops order) and,
// per op, its device classes, sorted: the model's heads.
func opsAndClasses(rows []LabelRow) ([]hetero.Op, map[string][]string) {
	classes := map[string][]string{}
	for _, r := range rows {
		if !slices.Contains(classes[r.Op], r.DeviceClass) {
			classes[r.Op] = append(classes[r.Op], r.DeviceClass)
		}
	}
	var ops []hetero.Op
	for _, op := range hetero.Ops {
		if c := classes[op.String()]; c != nil {
			slices.Sort(c)
			ops = append(ops, op)
		}
	}
	return ops, classes
}

// heads returns the GCN heads of op: one per device class of the rows,
// sorted, each ranking the candidate formats that class's rows timed (a
// format no row of the class could run, such as hicoo on OpenCL, is never
// a label and must never be a pick). A class that timed fewer than two
// formats ranks all of them.
func (d *dataset) heads(op hetero.Op) []model.Head {
	_, classes := opsAndClasses(d.rows)
	var hs []model.Head
	for _, c := range classes[op.String()] {
		timed := map[string]bool{}
		for _, r := range d.rows {
			if r.Op == op.String() && r.DeviceClass == c {
				for f := range r.Times {
					timed[f] = true
				}
			}
		}
		var formats []string
		for _, f := range op.Formats() {
			if timed[f] {
				formats = append(formats, f)
			}
		}
		if len(formats) < 2 {
			formats = op.Formats()
		}
		hs = append(hs, model.Head{Name: c, Classes: formats})
	}
	return hs
}

// headIndex returns the index of the head of a device class, or -1.
func headIndex(hs []model.Head, class string) int {
	return slices.IndexFunc(hs, func(h model.Head) bool { return h.Name == class })
}

// examples builds the GCN examples of op from the rows idx: one per
// (tensor, mode), labelled for each head (class) by the first row of that
// class, -1 for a class with no row, and with that row's soft target at
// temperature soft when it is positive (FitOptions.Soft).
func (d *dataset) examples(op hetero.Op, heads []model.Head, idx []int, soft float64) []model.Example {
	type tm struct {
		tensor string
		mode   int
	}
	at := map[tm]int{}
	var ex []model.Example
	for _, i := range idx {
		r := &d.rows[i]
		if r.Op != op.String() {
			continue
		}
		k := tm{r.Tensor, r.Mode}
		e, ok := at[k]
		if !ok {
			e = len(ex)
			at[k] = e
			labels := make([]int, len(heads))
			for h := range labels {
				labels[h] = -1
			}
			ex = append(ex, model.Example{In: d.inputs[i], Labels: labels})
		}
		if h := headIndex(heads, r.DeviceClass); h >= 0 && ex[e].Labels[h] < 0 {
			ex[e].Labels[h] = slices.Index(heads[h].Classes, r.Label)
			if q := softTarget(heads[h].Classes, r.Times, soft); q != nil && ex[e].Labels[h] >= 0 {
				if ex[e].Targets == nil {
					ex[e].Targets = make([][]float64, len(heads))
				}
				ex[e].Targets[h] = q
			}
		}
	}
	return ex
}

// softTarget returns the distribution over classes that weighs each timed
// format by exp(-ln(t/t_best)/temp), or nil when temp is not positive or
// no class was timed.
func softTarget(classes []string, times map[string]float64, temp float64) []float64 {
	if temp <= 0 {
		return nil
	}
	best := math.Inf(1)
	for _, c := range classes {
		if t, ok := times[c]; ok && t > 0 {
			best = min(best, t)
		}
	}
	if math.IsInf(best, 1) {
		return nil
	}
	q := make([]float64, len(classes))
	sum := 0.0
	for i, c := range classes {
		if t, ok := times[c]; ok && t > 0 {
			q[i] = math.Exp(-math.Log(t/best) / temp)
			sum += q[i]
		}
	}
	for i := range q {
		q[i] /= sum
	}
	return q
}

// argmax returns the index of the largest value, the first on a tie.
func argmax(p []float64) int {
	best := 0
	for i, v := range p {
		if v > p[best] {
			best = i
		}
	}
	return best
}

// trainGCN trains one op's GCN on the rows trainIdx, holding out a
// grouped validation part of them for early stopping when they have
// enough sources (three or more), and returns it with its curve.
func (d *dataset) trainGCN(op hetero.Op, heads []model.Head, trainIdx []int, o *FitOptions, seed uint64, stage string, fold int, withAcc bool) (*model.GCN, Curve, error) {
	curve := Curve{Op: op.String()}
	fitIdx, valIdx := trainIdx, []int(nil)
	sub := make([]LabelRow, len(trainIdx))
	for j, i := range trainIdx {
		sub[j] = d.rows[i]
	}
	// The validation part: one of k groups of the training sources (k the
	// outer fold count, at least 3), so it is never a source trained on.
	if inner, err := GroupFolds(sub, max(o.Folds, 3), seed^0xa11); err == nil {
		fitIdx = nil
		for j, i := range trainIdx {
			if inner[j] == 0 {
				valIdx = append(valIdx, i)
			} else {
				fitIdx = append(fitIdx, i)
			}
		}
	}
	train := d.examples(op, heads, fitIdx, o.Soft)
	val := d.examples(op, heads, valIdx, o.Soft)
	curve.TrainExamples, curve.ValExamples = len(train), len(val)
	if len(train) == 0 {
		return nil, curve, fmt.Errorf("%s: no training examples", op)
	}
	cfg := model.DefaultConfig(op.String(), heads...)
	cfg.Budget = o.Budget
	if o.Hidden > 0 {
		cfg.Hidden = o.Hidden
	}
	// newNet makes the network that trains on ex: fresh weights from the
	// seed, standardised on ex, started from o.Init where it has this op.
	newNet := func(ex []model.Example) (*model.GCN, []string, error) {
		g, err := model.NewGCN(cfg, rand.New(rand.NewPCG(seed, 0x6763)))
		if err != nil {
			return nil, nil, err
		}
		g.Standardize(ex)
		g.CPUInnerLoops = slices.Clone(d.cpuLoops)
		g.CPUModels = d.cpuModels
		g.LabelRanks = d.labelRanks(op, trainIdx)
		var copied []string
		if init := o.Init[op.String()]; init != nil {
			copied = g.StartFrom(init)
		}
		return g, copied, nil
	}
	g, copied, err := newNet(train)
	if err != nil {
		return nil, curve, err
	}
	if len(copied) > 0 {
		curve.StartedFrom = copied
	}
	mo := o.Model
	mo.Seed = seed
	mo.Progress = func(epoch int, trainLoss, valLoss float64) {
		curve.TrainLoss = append(curve.TrainLoss, trainLoss)
		if len(val) > 0 {
			curve.ValLoss = append(curve.ValLoss, valLoss)
		}
		if withAcc {
			curve.TrainAcc = append(curve.TrainAcc, accuracy(g, train))
			if len(val) > 0 {
				curve.ValAcc = append(curve.ValAcc, accuracy(g, val))
			}
		}
		o.Progress(FitProgress{Stage: stage, Fold: fold, Folds: o.Folds, Op: op.String(), Epoch: epoch, Epochs: mo.Epochs, TrainLoss: trainLoss, ValLoss: valLoss})
	}
	res, err := g.Fit(train, val, mo)
	if err != nil {
		return nil, curve, fmt.Errorf("%s: %w", op, err)
	}
	curve.BestEpoch = res.BestEpoch
	if !o.Refit || len(val) == 0 {
		return g, curve, nil
	}
	// The refit: the same start and shuffling seed, every row, the epochs
	// early stopping chose. With no validation rows Fit keeps the epoch of
	// least training loss, which with the weights' moving average is
	// about always the last.
	all := slices.Concat(train, val)
	if g, _, err = newNet(all); err != nil {
		return nil, curve, err
	}
	mo.Epochs = res.BestEpoch
	mo.Progress = func(epoch int, trainLoss, _ float64) {
		o.Progress(FitProgress{Stage: stage + " refit", Fold: fold, Folds: o.Folds, Op: op.String(), Epoch: epoch, Epochs: mo.Epochs, TrainLoss: trainLoss})
	}
	refit, err := g.Fit(all, nil, mo)
	if err != nil {
		return nil, curve, fmt.Errorf("%s: refit: %w", op, err)
	}
	curve.RefitExamples, curve.RefitEpoch = len(all), refit.BestEpoch
	return g, curve, nil
}

// accuracy is the share of labelled heads of ex whose most probable
// class is the label.
func accuracy(g *model.GCN, ex []model.Example) float64 {
	right, n := 0, 0
	for _, e := range ex {
		probs, err := g.Predict(e.In)
		if err != nil {
			return 0
		}
		for h, y := range e.Labels {
			if y >= 0 {
				n++
				if argmax(probs[h]) == y {
					right++
				}
			}
		}
	}
	return float64(right) / float64(max(n, 1))
}

// Fit cross-validates the SPT-GCN and the baselines on labelled rows
// (grouped k-fold by Source, FitOptions.Folds), then trains the final GCN
// of each op, with one head per device class, on all of them. Each
// tensor is read once and its inputs computed exactly as a prediction
// computes them. Unlabelled rows are left out and counted, and mixed
// builds are warned about (FitOptions.Warn). The report holds the
// out-of-fold picks, the score table and the final models.
func Fit(rows []LabelRow, o FitOptions) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{Folds: o.Folds, Models: map[string]*model.GCN{}}
	d, err := prepare(rows, &o, rep)
	if err != nil {
		return nil, err
	}
	ops, _ := opsAndClasses(d.rows)
	// The network's out-of-fold picks, and the probabilities of each
	// row's head, for the blend.
	var gcn Picks
	var gcnProbs, treeProbs [][]float64
	if o.Folds > 1 {
		folds, err := GroupFolds(d.rows, o.Folds, o.Seed)
		if err != nil {
			return nil, err
		}
		gcn = Picks{Predictor: PredictorGCN, Formats: make([]string, len(d.rows))}
		gcnProbs = make([][]float64, len(d.rows))
		for f := range o.Folds {
			trainIdx, testIdx := splitFold(folds, f)
			for _, op := range ops {
				if !slices.ContainsFunc(trainIdx, func(i int) bool { return d.rows[i].Op == op.String() }) {
					continue // every row of op is in this fold: nothing to learn from, no picks
				}
				heads := d.heads(op)
				g, _, err := d.trainGCN(op, heads, trainIdx, &o, o.Seed+uint64(f)+1, "fold", f+1, false)
				if err != nil {
					return nil, fmt.Errorf("fold %d: %w", f+1, err)
				}
				for _, i := range testIdx {
					r := &d.rows[i]
					if r.Op != op.String() {
						continue
					}
					probs, err := g.Predict(d.inputs[i])
					if err != nil {
						return nil, fmt.Errorf("fold %d: %w", f+1, err)
					}
					h := headIndex(heads, r.DeviceClass)
					gcn.Formats[i] = heads[h].Classes[argmax(probs[h])]
					gcnProbs[i] = probs[h]
				}
			}
		}
		rep.Picks = append(rep.Picks, gcn)
		var boosted Picks
		if boosted, treeProbs, err = d.treesCV(ops, folds, &o); err != nil {
			return nil, err
		}
		rep.Picks = append(rep.Picks, boosted, cascadePicks(d, PredictorBlend, gcnProbs, treeProbs, func(string, string) float64 { return math.Inf(1) }))
		bl, err := d.baselinesCV(folds, o.Folds, o.Baselines)
		if err != nil {
			return nil, err
		}
		rep.Picks = append(rep.Picks, bl...)
	}
	rep.Picks = append(rep.Picks, d.fixedPicks()...)
	rep.Scores = Scores(d.rows, rep.Picks)
	all := make([]int, len(d.rows))
	for i := range all {
		all[i] = i
	}
	if o.Folds > 1 {
		rep.RuleHeads = RuleHeads(rep.Scores)
		rep.TreeHeads, rep.BlendMargins = d.chooseTrees(rep.Scores, rep.RuleHeads, gcnProbs, treeProbs)
		// What the model answers with, head by head, scored on the
		// same folds: the rule, the network, the trees or the blend.
		def := cascadePicks(d, PredictorDefault, gcnProbs, treeProbs, func(op, class string) float64 { return rep.BlendMargins[op][class] })
		for i, r := range d.rows {
			switch {
			case slices.Contains(rep.RuleHeads[r.Op], r.DeviceClass):
				op, _ := hetero.ParseOp(r.Op)
				def.Formats[i] = model.RuleChoice(op, classKind(r.DeviceClass))
			case !slices.Contains(rep.TreeHeads[r.Op], r.DeviceClass):
				def.Formats[i] = gcn.Formats[i]
			}
		}
		// After gcn, boosted and blend, before the baselines.
		rep.Picks = slices.Insert(rep.Picks, 3, def)
		rep.Scores = Scores(d.rows, rep.Picks)
	}
	for _, op := range ops {
		heads := d.heads(op)
		g, curve, err := d.trainGCN(op, heads, all, &o, o.Seed, "final", 0, true)
		if err != nil {
			return nil, fmt.Errorf("final model: %w", err)
		}
		g.RuleHeads = rep.RuleHeads[op.String()]
		g.BlendMargins = maps.Clone(rep.BlendMargins[op.String()])
		treeHeads := rep.TreeHeads[op.String()]
		if o.AllTrees {
			treeHeads = nil
			for _, h := range heads {
				if !slices.Contains(g.RuleHeads, h.Name) {
					treeHeads = append(treeHeads, h.Name)
				}
			}
		}
		for _, class := range treeHeads {
			h := headIndex(heads, class)
			x, y := d.treeRows(op, class, heads[h].Classes, all, o.Soft)
			if len(x) == 0 {
				continue // no labelled row of the head: nothing to fit
			}
			t, err := model.FitTrees(x, y, heads[h].Classes, o.treeOptions())
			if err != nil {
				return nil, fmt.Errorf("final model: %s %s trees: %w", op, class, err)
			}
			if g.Trees == nil {
				g.Trees = map[string]*model.Trees{}
			}
			g.Trees[class] = t
		}
		rep.Models[op.String()], rep.Curves = g, append(rep.Curves, curve)
	}
	return rep, nil
}

// splitFold returns the rows outside fold f (training) and inside it
// (testing), in row order, for the fold of each row in folds.
func splitFold(folds []int, f int) (trainIdx, testIdx []int) {
	for i, k := range folds {
		if k == f {
			testIdx = append(testIdx, i)
		} else {
			trainIdx = append(trainIdx, i)
		}
	}
	return trainIdx, testIdx
}

// treeOptions returns the trees' options with the seed filled in.
func (o *FitOptions) treeOptions() model.TreeOptions {
	t := o.Trees
	if t.Seed == 0 {
		t.Seed = o.Seed
	}
	return t
}

// treeRows returns the boosting rows of one head among the rows idx: the
// global features of each row of op and class, and its target over
// classes: the soft target at temperature soft when it is positive, as
// the network trains on, else the label one-hot. A row whose label is
// not one of classes is left out.
func (d *dataset) treeRows(op hetero.Op, class string, classes []string, idx []int, soft float64) (x, y [][]float64) {
	for _, i := range idx {
		r := &d.rows[i]
		if r.Op != op.String() || r.DeviceClass != class {
			continue
		}
		l := slices.Index(classes, r.Label)
		if l < 0 {
			continue
		}
		q := softTarget(classes, r.Times, soft)
		if q == nil {
			q = make([]float64, len(classes))
			q[l] = 1
		}
		x, y = append(x, d.inputs[i].Global[:]), append(y, q)
	}
	return x, y
}

// treesCV returns the boosted trees' out-of-fold picks: for each fold,
// op and head, trees fitted on the head's rows outside the fold pick for
// its rows inside it, as the network's picks are made.
func (d *dataset) treesCV(ops []hetero.Op, folds []int, o *FitOptions) (Picks, [][]float64, error) {
	p := Picks{Predictor: PredictorBoosted, Formats: make([]string, len(d.rows))}
	probs := make([][]float64, len(d.rows))
	for f := range o.Folds {
		trainIdx, testIdx := splitFold(folds, f)
		for _, op := range ops {
			for _, h := range d.heads(op) {
				x, y := d.treeRows(op, h.Name, h.Classes, trainIdx, o.Soft)
				if len(x) == 0 {
					continue // no training rows for this head in the fold: no picks
				}
				o.Progress(FitProgress{Stage: "trees", Done: f, Total: o.Folds})
				t, err := model.FitTrees(x, y, h.Classes, o.treeOptions())
				if err != nil {
					return p, nil, fmt.Errorf("fold %d: %s %s trees: %w", f+1, op, h.Name, err)
				}
				for _, i := range testIdx {
					if r := &d.rows[i]; r.Op == op.String() && r.DeviceClass == h.Name {
						probs[i] = t.Probs(d.inputs[i].Global[:])
						p.Formats[i] = h.Classes[argmax(probs[i])]
					}
				}
			}
		}
	}
	return p, probs, nil
}

// cascadePicks returns the picks of the trees with a blend margin
// (model.GCN.BlendMargins) from out-of-fold probabilities: for each row
// with both, the trees' class where they are ahead by at least the
// margin of the row's head, else the class of highest mean probability
// of the network and the trees. A margin of 0 is the trees alone, +Inf
// the blend always.
func cascadePicks(d *dataset, predictor string, network, trees [][]float64, margin func(op, class string) float64) Picks {
	p := Picks{Predictor: predictor, Formats: make([]string, len(d.rows))}
	heads := map[string][]model.Head{}
	for i, r := range d.rows {
		if network[i] == nil || trees[i] == nil {
			continue
		}
		if heads[r.Op] == nil {
			op, _ := hetero.ParseOp(r.Op)
			heads[r.Op] = d.heads(op)
		}
		hs := heads[r.Op]
		classes := hs[headIndex(hs, r.DeviceClass)].Classes
		probs := trees[i]
		if model.TopMargin(probs) < margin(r.Op, r.DeviceClass) {
			probs = model.Blend(network[i], probs)
		}
		p.Formats[i] = classes[argmax(probs)]
	}
	return p
}

// blendMargins are the margins chooseTrees tries, cheapest first: 0 is
// the trees alone, +Inf the blend always.
var blendMargins = []float64{0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, math.Inf(1)}

// blendSlack is how much cross-validated accuracy (and a fifth of it in
// oracle ratio) chooseTrees gives up for a smaller blend margin: a larger
// margin asks the network more often, and each time the decision costs
// about twice as much (docs/model.md, "Labels of the new kernels": on the
// Intel head a margin of 0.2, chosen for 0.008 of accuracy over the trees
// alone, blended 57 of 76 held-out decisions; 0.05, 35). A variable only
// so that a test can set it to 0.
var blendSlack = 0.005

// chooseTrees returns, per op, the heads that answer with trees and the
// blend margin of each (none for trees alone), from the out-of-fold
// probabilities of the network and the trees. A head that is not a rule
// head answers with trees under the smallest margin whose cross-validated
// accuracy is within blendSlack of the best margin's, and its oracle
// ratio within blendSlack/5, among the margins whose accuracy and oracle
// ratio are both at least the network's; where no margin is that good,
// with the network.
func (d *dataset) chooseTrees(scores []Score, ruleHeads map[string][]string, network, trees [][]float64) (map[string][]string, map[string]map[string]float64) {
	type key struct{ op, class string }
	gcn := map[key]Score{}
	for _, s := range scores {
		if s.Predictor == PredictorGCN && s.NNZBucket == "" {
			gcn[key{s.Op, s.DeviceClass}] = s
		}
	}
	// good[k][i] is the score under blendMargins[i] where it is at
	// least the network's, else nil.
	good := map[key][]*Score{}
	for i, m := range blendMargins {
		p := cascadePicks(d, "trees", network, trees, func(string, string) float64 { return m })
		for _, s := range Scores(d.rows, []Picks{p}) {
			k := key{s.Op, s.DeviceClass}
			g, ok := gcn[k]
			if s.Predictor != p.Predictor || !ok || s.N == 0 || s.N != g.N || slices.Contains(ruleHeads[k.op], k.class) ||
				s.Accuracy < g.Accuracy || s.OracleRatio < g.OracleRatio {
				continue
			}
			if good[k] == nil {
				good[k] = make([]*Score, len(blendMargins))
			}
			good[k][i] = &s
		}
	}
	bestMargin := map[key]float64{}
	for k, ss := range good {
		var top *Score
		for _, s := range ss {
			if s != nil && (top == nil || s.Accuracy > top.Accuracy) {
				top = s
			}
		}
		for i, s := range ss {
			if s != nil && s.Accuracy >= top.Accuracy-blendSlack && s.OracleRatio >= top.OracleRatio-blendSlack/5 {
				bestMargin[k] = blendMargins[i]
				break
			}
		}
	}
	heads, margins := map[string][]string{}, map[string]map[string]float64{}
	for k, m := range bestMargin {
		heads[k.op] = append(heads[k.op], k.class)
		if m > 0 {
			if margins[k.op] == nil {
				margins[k.op] = map[string]float64{}
			}
			margins[k.op][k.class] = m
		}
	}
	for _, cs := range heads {
		slices.Sort(cs)
	}
	return heads, margins
}

// cpuInnerLoops returns the distinct inner loops of the builds that
// measured the rows of device class cpu, sorted.
func cpuInnerLoops(rows []LabelRow) []string {
	var kinds []string
	for _, r := range rows {
		if model.IsCPUHead(r.DeviceClass) && r.Build.InnerLoops != "" && !slices.Contains(kinds, r.Build.InnerLoops) {
			kinds = append(kinds, r.Build.InnerLoops)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// cpuKinds returns the kinds of hardware that measured the rows of
// device class cpu, one per head a model trained on them has: their
// inner loops, and the family of their processors when there are more
// than one ("avx512+pext on intel"), sorted.
func cpuKinds(rows []LabelRow) []string {
	byFamily := len(cpuFamilies(rows)) > 1
	var kinds []string
	for _, r := range rows {
		if !model.IsCPUHead(r.DeviceClass) || r.Build.InnerLoops == "" {
			continue
		}
		k := r.Build.InnerLoops
		if f := model.CPUFamily(r.processor()); byFamily {
			if f == "" {
				f = "another family"
			}
			k += " on " + f
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// cpuFamilies returns the distinct families (model.CPUFamily) of the
// processors that measured the rows of device class cpu, sorted.
func cpuFamilies(rows []LabelRow) []string {
	var families []string
	for _, r := range rows {
		if f := model.CPUFamily(r.processor()); model.IsCPUHead(r.DeviceClass) && !slices.Contains(families, f) {
			families = append(families, f)
		}
	}
	slices.Sort(families)
	return families
}

// labelRanks returns, per device class (head) of op's rows among idx,
// the distinct ranks their times were measured at, in increasing order.
func (d *dataset) labelRanks(op hetero.Op, idx []int) map[string][]int {
	ranks := map[string][]int{}
	for _, i := range idx {
		if r := d.rows[i]; r.Op == op.String() && r.Rank > 0 && !slices.Contains(ranks[r.DeviceClass], r.Rank) {
			ranks[r.DeviceClass] = append(ranks[r.DeviceClass], r.Rank)
		}
	}
	for _, r := range ranks {
		slices.Sort(r)
	}
	return ranks
}

// cpuModelsOf returns, per cpu device class of the rows (the cpu heads
// a model trained on them has, once splitCPU has named them), the
// distinct processors (LabelRow.DeviceModel) that measured its rows, in
// order.
func cpuModelsOf(rows []LabelRow) map[string][]string {
	models := map[string][]string{}
	for _, r := range rows {
		if p := r.processor(); model.IsCPUHead(r.DeviceClass) && p != "" && !slices.Contains(models[r.DeviceClass], p) {
			models[r.DeviceClass] = append(models[r.DeviceClass], p)
		}
	}
	for _, m := range models {
		slices.Sort(m)
	}
	return models
}

// baselinesCV returns each baseline's out-of-fold picks: for each
// fold and (op, device class), the baseline fitted on that group's rows
// outside the fold picks for the rows inside it.
func (d *dataset) baselinesCV(folds []int, k int, methods []string) ([]Picks, error) {
	var out []Picks
	for _, method := range methods {
		p := Picks{Predictor: method, Formats: make([]string, len(d.rows))}
		for f := range k {
			sets := map[groupKey]*model.BaselineSet{}
			for i, r := range d.rows {
				if folds[i] == f {
					continue
				}
				g := groupKey{r.Op, r.DeviceClass}
				if sets[g] == nil {
					sets[g] = model.NewBaselineSet()
				}
				sets[g].Examples = append(sets[g].Examples, model.BaselineExample{Op: r.Op, Kind: classKind(r.DeviceClass).String(),
					Features: slices.Clone(d.inputs[i].Global[:]), Best: r.Label, Source: r.Source})
			}
			fitted := map[groupKey]*model.BaselinePredictor{}
			for i, r := range d.rows {
				if folds[i] != f {
					continue
				}
				g := groupKey{r.Op, r.DeviceClass}
				if sets[g] == nil {
					continue // no training rows for this head in the fold: no pick
				}
				bp := fitted[g]
				if bp == nil {
					var err error
					if bp, err = model.NewBaselinePredictor(method, sets[g]); err != nil {
						return nil, fmt.Errorf("fold %d: %s %s: %w", f+1, r.Op, r.DeviceClass, err)
					}
					fitted[g] = bp
				}
				op, _ := hetero.ParseOp(r.Op)
				pr, err := bp.PredictGlobal(d.inputs[i].Global, op, classKind(r.DeviceClass))
				if err != nil {
					return nil, fmt.Errorf("fold %d: %w", f+1, err)
				}
				p.Formats[i] = pr.Best()
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// fixedPicks returns the hand rule's picks and one "always FORMAT" per
// candidate format of the rows' ops, in hetero.Ops and candidate order.
func (d *dataset) fixedPicks() []Picks {
	rule := Picks{Predictor: PredictorRule, Formats: make([]string, len(d.rows))}
	for i, r := range d.rows {
		op, _ := hetero.ParseOp(r.Op)
		rule.Formats[i] = model.RuleChoice(op, classKind(r.DeviceClass))
	}
	out := []Picks{rule}
	ops, _ := opsAndClasses(d.rows)
	var names []string
	for _, op := range ops {
		for _, f := range op.Formats() {
			if !slices.Contains(names, f) {
				names = append(names, f)
			}
		}
	}
	for _, f := range names {
		p := Picks{Predictor: fixedPrefix + f, Formats: make([]string, len(d.rows))}
		for i, r := range d.rows {
			op, _ := hetero.ParseOp(r.Op)
			if slices.Contains(op.Formats(), f) {
				p.Formats[i] = f
			}
		}
		out = append(out, p)
	}
	return out
}

// Evaluate scores trained models on labelled rows: the GCN picks of the
// model file for each row's op (models, one per op; a row whose op has no
// model, or whose class has no head, gets no GCN pick and a warning), the
// baselines cross-validated on the rows themselves (grouped folds,
// FitOptions.Folds; they have no model file), the hand rule, each fixed
// format and measure-all. The inputs are computed at the models' budget,
// which must be the same for all.
func Evaluate(rows []LabelRow, models []*model.ONNXModel, o FitOptions) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	byOp := map[string]*model.ONNXModel{}
	for i, m := range models {
		if i == 0 {
			o.Budget = m.Info.Budget
		} else if m.Info.Budget != o.Budget {
			return nil, fmt.Errorf("model %s has a %dx%d budget, model %s %dx%d: evaluate models of one budget at a time",
				m.Info.Path, m.Info.Budget.Rows, m.Info.Budget.Cols, models[0].Info.Path, o.Budget.Rows, o.Budget.Cols)
		}
		if other := byOp[m.Info.Op]; other != nil {
			return nil, fmt.Errorf("models %s and %s are both for %s: give one model per op", other.Info.Path, m.Info.Path, m.Info.Op)
		}
		byOp[m.Info.Op] = m
	}
	rep := &Report{Folds: o.Folds}
	d, err := prepare(rows, &o, rep)
	if err != nil {
		return nil, err
	}
	if len(models) > 0 {
		gcn := Picks{Predictor: PredictorGCN, Formats: make([]string, len(d.rows))}
		// The default is the network, or the rule for a rule head: it
		// is reported whether or not any row's head is a rule head, so
		// that a report always says what the model answers.
		def := Picks{Predictor: PredictorDefault, Formats: make([]string, len(d.rows))}
		// The model's boosted trees, and their blend with its network,
		// for the heads that have trees.
		boosted := Picks{Predictor: PredictorBoosted, Formats: make([]string, len(d.rows))}
		blend := Picks{Predictor: PredictorBlend, Formats: make([]string, len(d.rows))}
		rep.data = d
		rep.networkProbs, rep.treeProbs = make([][]float64, len(d.rows)), make([][]float64, len(d.rows))
		missing := map[string]int{}
		for i, r := range d.rows {
			m := byOp[r.Op]
			if m == nil {
				missing["no model for "+r.Op]++
				continue
			}
			// The head the model would answer with on the hardware
			// that measured the row, at its rank: a processor of one
			// family number may be answered by its vendor's head of
			// the row's rank (model.Info.HeadAt).
			h, _ := m.Info.HeadAt(r.DeviceClass, r.Build.InnerLoops, r.processor(), r.Rank)
			if h < 0 {
				missing[fmt.Sprintf("model %s has no head for device class %s", m.Info.Path, r.DeviceClass)]++
				continue
			}
			probs, err := m.Run(d.inputs[i])
			if err != nil {
				return nil, fmt.Errorf("tensor %s %s mode %d: %w", r.Tensor, r.Op, r.Mode, err)
			}
			gcn.Formats[i] = m.Info.Heads[h].Classes[argmax(probs[h])]
			def.Formats[i] = gcn.Formats[i]
			t, err := m.Info.Trees(m.Info.Heads[h].Name)
			if err != nil {
				return nil, err
			}
			if t != nil {
				tp := t.Probs(d.inputs[i].Global[:])
				rep.networkProbs[i], rep.treeProbs[i] = probs[h], tp
				boosted.Formats[i] = t.Classes[argmax(tp)]
				blend.Formats[i] = t.Classes[argmax(model.Blend(probs[h], tp))]
				def.Formats[i] = boosted.Formats[i]
				if model.TopMargin(tp) < m.Info.BlendMargins[m.Info.Heads[h].Name] {
					def.Formats[i] = blend.Formats[i]
				}
			}
			if slices.Contains(m.Info.RuleHeads, m.Info.Heads[h].Name) {
				op, _ := hetero.ParseOp(r.Op)
				def.Formats[i] = model.RuleChoice(op, classKind(r.DeviceClass))
			}
		}

		keys := make([]string, 0, len(missing))
		for k := range missing {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			o.Warn(fmt.Sprintf("%s: %d rows have no gcn score", k, missing[k]))
		}
		rep.Picks = append(rep.Picks, gcn, def)
		if slices.ContainsFunc(models, func(m *model.ONNXModel) bool { return len(m.Info.TreeHeads) > 0 }) {
			rep.Picks = append(rep.Picks, boosted, blend)
		}
	}
	if o.Folds > 1 {
		folds, err := GroupFolds(d.rows, o.Folds, o.Seed)
		if err != nil {
			o.Warn(fmt.Sprintf("baselines not scored: %v", err))
		} else {
			bl, err := d.baselinesCV(folds, o.Folds, o.Baselines)
			if err != nil {
				return nil, err
			}
			rep.Picks = append(rep.Picks, bl...)
		}
	}
	rep.Picks = append(rep.Picks, d.fixedPicks()...)
	rep.Scores = Scores(d.rows, rep.Picks)
	return rep, nil
}
