package model

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/sjwhitworth/golearn/base"
	"github.com/sjwhitworth/golearn/trees"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/atomicfile"
)

// The baselines classify a tensor by its global features alone
// (features.Global): golearn's CART decision tree, and k nearest
// neighbours (knnClassifier, our own: golearn's needs cgo and breaks ties
// in map order). golearn's linear SVM is not offered: it wraps liblinear
// through cgo and panics under Go's default cgo pointer checks.
//
// A baseline's saved form is its labelled examples, a BaselineSet file: a
// kNN is its examples, and a tree is refitted from them when the file is
// loaded, deterministically and in milliseconds.

// BaselineFormatVersion is the version of the BaselineSet file format.
const BaselineFormatVersion = 1

// BaselineExample is one labelled measurement: the global features of a
// tensor for an op and mode, the kind of device it was measured on and the
// format that was fastest there.
type BaselineExample struct {
	Op       string    `json:"op"`
	Kind     string    `json:"device_kind"`
	Features []float64 `json:"features"` // in features.Names order
	Best     string    `json:"best"`
	Source   string    `json:"source,omitempty"` // where the tensor came from, for the record
}

// BaselineSet is a file of labelled examples.
type BaselineSet struct {
	FormatVersion int               `json:"format_version"`
	Features      []string          `json:"features"`
	Examples      []BaselineExample `json:"examples"`
}

// NewBaselineSet returns an empty set for the current feature list.
func NewBaselineSet() *BaselineSet {
	return &BaselineSet{FormatVersion: BaselineFormatVersion, Features: slices.Clone(features.Names[:])}
}

// Check reports the first thing wrong with the set: a version or feature
// list this build does not know, or an example with an unknown op, kind or
// format, or with the wrong number of features or a non-finite one.
func (s *BaselineSet) Check() error {
	if s.FormatVersion != BaselineFormatVersion {
		return fmt.Errorf("format version %d, this build reads %d", s.FormatVersion, BaselineFormatVersion)
	}
	if !slices.Equal(s.Features, features.Names[:]) {
		return fmt.Errorf("feature list %v differs from this build's %v", s.Features, features.Names)
	}
	for i, e := range s.Examples {
		op, err := hetero.ParseOp(e.Op)
		if err != nil {
			return fmt.Errorf("example %d: %w", i+1, err)
		}
		if e.Kind != hetero.CPU.String() && e.Kind != hetero.GPU.String() {
			return fmt.Errorf("example %d: unknown device kind %q, expected cpu or gpu", i+1, e.Kind)
		}
		if !slices.Contains(op.Formats(), e.Best) {
			return fmt.Errorf("example %d: format %q is not a %s format %v", i+1, e.Best, op, op.Formats())
		}
		if len(e.Features) != len(features.Names) {
			return fmt.Errorf("example %d: %d features, expected %d", i+1, len(e.Features), len(features.Names))
		}
		for j, v := range e.Features {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("example %d: feature %s is %v", i+1, features.Names[j], v)
			}
		}
	}
	return nil
}

// WriteBaselineSet writes the set as JSON, atomically.
func WriteBaselineSet(path string, s *BaselineSet) error {
	if err := s.Check(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(s)
	})
}

// ReadBaselineSet reads and checks a set; errors name the file.
func ReadBaselineSet(path string) (*BaselineSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := new(BaselineSet)
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%s: not a baseline set: %w", path, err)
	}
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// classifier is one fitted baseline for one op and device kind: it returns
// a score per candidate format.
type classifier interface {
	scores(x []float64) ([]float64, error)
}

// BaselinePredictor is a baseline fitted on a BaselineSet: one classifier
// per op and device kind found in it.
type BaselinePredictor struct {
	Method string // "tree" or "knn"
	fitted map[string]classifier
	count  map[string]int
	// lo and hi are the feature ranges seen in training, per group.
	lo, hi map[string][]float64
}

// BaselineMethods lists the baselines this host offers.
//
// On a big-endian host (s390x) it is only "knn": golearn packs feature
// values little-endian and reads them back in the host's byte order, so
// its CART tree learns from scrambled numbers there.
func BaselineMethods() []string {
	if !littleEndianHost {
		return []string{"knn"}
	}
	return []string{"tree", "knn"}
}

// NewBaselinePredictor fits the named baseline ("tree" or "knn") on every
// op and device kind of the set.
func NewBaselinePredictor(method string, s *BaselineSet) (*BaselinePredictor, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if method == "tree" && !littleEndianHost {
		return nil, fmt.Errorf("the tree baseline is not available on %s: golearn's CART reads the feature bytes it packs little-endian in this big-endian host's order; use knn", runtime.GOARCH)
	}
	if !slices.Contains(BaselineMethods(), method) {
		return nil, fmt.Errorf("unknown baseline %q, expected tree or knn", method)
	}
	groups := map[string][]BaselineExample{}
	for _, e := range s.Examples {
		key := e.Op + "/" + e.Kind
		groups[key] = append(groups[key], e)
	}
	p := &BaselinePredictor{Method: method, fitted: map[string]classifier{}, count: map[string]int{},
		lo: map[string][]float64{}, hi: map[string][]float64{}}
	for key, ex := range groups {
		op, _ := hetero.ParseOp(ex[0].Op)
		var c classifier
		var err error
		if method == "tree" {
			c, err = fitTree(op.Formats(), ex)
		} else {
			c, err = fitKNN(op.Formats(), ex)
		}
		if err != nil {
			return nil, fmt.Errorf("%s baseline for %s: %w", method, key, err)
		}
		p.fitted[key], p.count[key] = c, len(ex)
		lo, hi := slices.Clone(ex[0].Features), slices.Clone(ex[0].Features)
		for _, e := range ex[1:] {
			for j, v := range e.Features {
				lo[j], hi[j] = min(lo[j], v), max(hi[j], v)
			}
		}
		p.lo[key], p.hi[key] = lo, hi
	}
	return p, nil
}

// Predict summarises x and classifies its global features.
func (p *BaselinePredictor) Predict(x *formats.COO, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error) {
	return viaSummary(p, x, op, mode, kind)
}

// PredictSummary classifies the summary's global features.
func (p *BaselinePredictor) PredictSummary(s *features.Summary, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error) {
	key := op.String() + "/" + kind.String()
	c := p.fitted[key]
	if c == nil {
		return nil, fmt.Errorf("the %s baseline has no examples for %s on a %s device: %w", p.Method, op, kind, ErrNoHead)
	}
	start := time.Now()
	v, err := s.Global(op, mode)
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	pr, err := p.PredictGlobal(v, op, kind)
	if err != nil {
		return nil, err
	}
	pr.Features = took
	return pr, nil
}

// PredictGlobal classifies global features v (features.Global of a tensor
// for op and a mode), for callers that computed them already.
func (p *BaselinePredictor) PredictGlobal(v features.Vector, op hetero.Op, kind hetero.Kind) (*Prediction, error) {
	key := op.String() + "/" + kind.String()
	c := p.fitted[key]
	if c == nil {
		return nil, fmt.Errorf("the %s baseline has no examples for %s on a %s device: %w", p.Method, op, kind, ErrNoHead)
	}
	pr := &Prediction{}
	start := time.Now()
	scores, err := c.scores(v[:])
	if err != nil {
		return nil, fmt.Errorf("%s baseline: %w", p.Method, err)
	}
	pr.Infer = time.Since(start)
	pr.Formats = rank(op.Formats(), scores)
	for j, f := range v {
		if f < p.lo[key][j] || f > p.hi[key][j] {
			pr.Warnings = append(pr.Warnings, fmt.Sprintf("feature %s = %.4g is outside the %d training examples' range [%.4g, %.4g]",
				features.Names[j], f, p.count[key], p.lo[key][j], p.hi[key][j]))
		}
	}
	return pr, nil
}

// instances lays examples (or one unlabelled row) out as golearn wants
// them: a float attribute per feature and a class attribute last.
func instances(rows [][]float64, class base.Attribute, labels []string) (*base.DenseInstances, error) {
	inst := base.NewDenseInstances()
	specs := make([]base.AttributeSpec, len(features.Names))
	for j, name := range features.Names {
		specs[j] = inst.AddAttribute(base.NewFloatAttribute(name))
	}
	cspec := inst.AddAttribute(class)
	if err := inst.AddClassAttribute(class); err != nil {
		return nil, err
	}
	if err := inst.Extend(len(rows)); err != nil {
		return nil, err
	}
	for i, row := range rows {
		for j, v := range row {
			inst.Set(specs[j], i, base.PackFloatToBytes(v))
		}
		label := ""
		if labels != nil {
			label = labels[i]
		}
		inst.Set(cspec, i, class.GetSysValFromString(label))
	}
	return inst, nil
}

// treeClassifier is golearn's CART tree on the raw features: a tree splits
// on thresholds, so scale does not matter.
type treeClassifier struct {
	tree    *trees.CARTDecisionTreeClassifier
	formats []string
}

// treeDepth bounds the tree: labelled sets are a few hundred to a few
// thousand tensors, and a deeper tree only memorises them.
const treeDepth = 8

func fitTree(names []string, ex []BaselineExample) (classifier, error) {
	rows, labels := make([][]float64, len(ex)), make([]string, len(ex))
	classes := make([]int64, len(names))
	for i := range names {
		classes[i] = int64(i)
	}
	for i, e := range ex {
		rows[i], labels[i] = e.Features, fmt.Sprint(slices.Index(names, e.Best))
	}
	inst, err := instances(rows, base.NewFloatAttribute("format"), labels)
	if err != nil {
		return nil, err
	}
	t := trees.NewDecisionTreeClassifier("gini", treeDepth, classes)
	if err := t.Fit(inst); err != nil {
		return nil, err
	}
	return &treeClassifier{tree: t, formats: names}, nil
}

func (c *treeClassifier) scores(x []float64) ([]float64, error) {
	inst, err := instances([][]float64{x}, base.NewFloatAttribute("format"), []string{"0"})
	if err != nil {
		return nil, err
	}
	got := c.tree.Predict(inst)
	if len(got) != 1 || got[0] < 0 || int(got[0]) >= len(c.formats) {
		return nil, fmt.Errorf("tree predicted class %v of %d", got, len(c.formats))
	}
	s := make([]float64, len(c.formats))
	s[got[0]] = 1
	return s, nil
}
