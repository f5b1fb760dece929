package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model"
)

// Labelling defaults.
const (
	// DefaultRuns is the most timed runs per format (after a warm-up).
	DefaultRuns = 5
	// DefaultRunBudget is the time the timed runs of one format aim at:
	// a format whose warm-up run took w is timed
	// clamp(floor(budget / w), 1, runs) times, so kernels up to budget/runs
	// (0.4 s with the defaults) get every run and longer ones fewer, down
	// to one beyond the budget.
	DefaultRunBudget = 2 * time.Second
	// DefaultMinTime is the least time the timed runs of one format add
	// up to: a kernel whose warm-up took w < DefaultMinTime/runs is timed
	// ceil(DefaultMinTime / w) times, up to MaxRuns, so that the median of
	// a microsecond kernel rests on enough runs to be repeatable.
	DefaultMinTime = 20 * time.Millisecond
	// MaxRuns caps the timed runs of one format.
	MaxRuns = 200
	// DefaultLabelRank is the rank R of the dense operands.
	DefaultLabelRank = 16
)

// LabelOptions say what Label measures.
type LabelOptions struct {
	// Ops are the operations (default hetero.Ops: ttm and mttkrp).
	Ops []hetero.Op
	// Devices are the devices, measured one after another (default the
	// CPU on every core).
	Devices []hetero.Device
	// Rank is R (default DefaultLabelRank).
	Rank int
	// Runs is the most timed runs per format (default DefaultRuns).
	Runs int
	// RunBudget is the time the timed runs of a format aim at (default
	// DefaultRunBudget; negative: never fewer than Runs).
	RunBudget time.Duration
	// MinTime is the least time the timed runs of a format add up to: a
	// short kernel is timed more than Runs times, up to MaxRuns (default
	// DefaultMinTime; negative: never more than Runs).
	MinTime time.Duration
	// Limit, when positive, labels only the first Limit tensors of the
	// input's order.
	Limit int
	// Progress, if set, is called after each row written and at the end
	// of each tensor.
	Progress func(LabelProgress)
	// Warn, if set, receives one-line warnings: a truncated last line
	// dropped, builds mixed in the labels file, an empty tensor skipped.
	Warn func(string)
	// Part and Parts, when Parts > 1, make the run one of Parts workers
	// that share the input (the ranks of an MPI job, one per machine):
	// worker Part labels the tensors whose position i in the input has
	// i % Parts == Part, skips every row already in the labels file or in
	// any worker's part file, and writes its rows to its own part file,
	// PartPath(out, Part). MergeParts then folds the part files into out.
	Part, Parts int
}

// PartPath is the file worker part of a shared labelling run writes.
func PartPath(out string, part int) string { return fmt.Sprintf("%s.part-%d", out, part) }

// partFiles returns the part files of out present now, in worker order.
func partFiles(out string) ([]string, error) {
	paths, err := filepath.Glob(out + ".part-*")
	if err != nil {
		return nil, err
	}
	type part struct {
		k    int
		path string
	}
	var found []part
	for _, p := range paths {
		var k int
		if _, err := fmt.Sscanf(p[len(out):], ".part-%d", &k); err == nil && PartPath(out, k) == p {
			found = append(found, part{k, p})
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].k < found[j].k })
	files := make([]string, len(found))
	for i, p := range found {
		files[i] = p.path
	}
	return files, nil
}

// readRows reads the complete rows of a labels file another worker may be
// appending to: a torn last line is left alone, not cut off.
func readRows(path string) ([]LabelRow, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rows, _, err := parseLabels(data, path)
	return rows, err
}

// MergeParts appends to out every row of out's part files that out does
// not hold yet, syncs it, and removes the part files. Run after every
// worker of a shared labelling run has finished; a merge that is
// interrupted is finished by the next one, and rows are never written
// twice. It returns the rows added.
func MergeParts(out string) (int, error) {
	files, err := partFiles(out)
	if err != nil || len(files) == 0 {
		return 0, err
	}
	old, _, err := loadLabels(out)
	if err != nil {
		return 0, err
	}
	have := map[labelKey]bool{}
	for i := range old {
		have[old[i].key()] = true
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	added := 0
	for _, path := range files {
		rows, err := readRows(path)
		if err != nil {
			return added, errors.Join(err, f.Close())
		}
		for i := range rows {
			r := &rows[i]
			if have[r.key()] {
				continue
			}
			line, err := json.Marshal(r)
			if err == nil {
				_, err = f.Write(append(line, '\n'))
			}
			if err != nil {
				return added, errors.Join(fmt.Errorf("%s: %w", out, err), f.Close())
			}
			have[r.key()] = true
			added++
		}
		// The rows must be on disk before their only other copy goes.
		if err := f.Sync(); err != nil {
			return added, errors.Join(fmt.Errorf("%s: %w", out, err), f.Close())
		}
		if err := os.Remove(path); err != nil {
			return added, errors.Join(err, f.Close())
		}
	}
	return added, f.Close()
}

// LabelProgress reports a row written or a tensor finished.
type LabelProgress struct {
	// Index is the tensor's 0-based position among Total.
	Index, Total int
	// Tensor is the tensor as rows name it; NNZ and Dims are zero when
	// every row was found done without reading the file.
	Tensor string
	NNZ    int
	Dims   []int
	// Row is the row just written; nil when the event ends a tensor.
	Row *LabelRow
	// At the end of a tensor: its rows written and found done (resumed),
	// and the time spent on it.
	Written, Resumed int
	Elapsed          time.Duration
	// Work and TotalWork measure the run in nonzeros: a row of a tensor of
	// n nonzeros weighs n, and rows found done weigh nothing. TotalWork
	// estimates tensors not read yet (the manifest's nonzeros, else from
	// the file's size) and is corrected as they are read.
	Work, TotalWork float64
}

// LabelSummary is what a Label run did.
type LabelSummary struct {
	Out string `json:"out"`
	// Tensors is the number of tensors considered (after Limit), Empty
	// those skipped for having no nonzeros.
	Tensors int `json:"tensors"`
	Empty   int `json:"empty,omitempty"`
	// Written rows this run, Resumed rows found done.
	Written int `json:"written"`
	Resumed int `json:"resumed"`
	// Failed lists the tensors that could not be labelled, each as
	// "path: why" (a file that does not parse, a tensor too large to
	// measure here): their rows are missing, and a later run tries them
	// again.
	Failed []string `json:"failed,omitempty"`
	// Dropped describes the truncated last line dropped, if any.
	Dropped string `json:"dropped,omitempty"`
	Build   Build  `json:"build"`
	// MixedBuilds lists the builds of the file's rows and this run's
	// when they differ (MixedBuilds).
	MixedBuilds []string `json:"mixed_builds,omitempty"`
	// ReadSeconds is the time spent reading and fingerprinting tensors.
	ReadSeconds float64 `json:"read_seconds"`
	// Devices is the measuring cost per device.
	Devices []DeviceCost `json:"devices"`
}

// DeviceCost is the time one device's rows took in a run.
type DeviceCost struct {
	Device string `json:"device"`
	Class  string `json:"device_class"`
	Rows   int    `json:"rows"`
	// NNZ sums the rows' nonzeros (a tensor counts once per op and mode).
	NNZ     int64   `json:"nnz"`
	Seconds float64 `json:"seconds"`
}

// SecondsPerMillion returns the seconds per million nonzeros of one row
// (one op and mode): a tensor of n nonzeros and order N costs about
// ops·N·n/10⁶ times this on the device.
func (c DeviceCost) SecondsPerMillion() float64 {
	if c.NNZ == 0 {
		return 0
	}
	return c.Seconds / (float64(c.NNZ) / 1e6)
}

// LabelInput is a tensor to label.
type LabelInput struct {
	// Path is the tensor's file.
	Path string
	// Source is the group for grouped cross-validation: the manifest's
	// source matrix, else the file's name. Generator is the manifest's
	// generator chain ("" without one).
	Source, Generator string
	// NNZ and Dims are the manifest's (zero and nil without one).
	NNZ  int
	Dims []int
	// Bytes is the file's size.
	Bytes int64
}

// LabelInputs lists the tensors of dir in labelling order: the entries of
// its manifest (ManifestName) in manifest order when it has one, else its
// .tns, .stb and .mtx files (optionally .gz) sorted by name.
func LabelInputs(dir string) ([]LabelInput, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	manifest := filepath.Join(dir, ManifestName)
	entries, err := readManifestFile(manifest)
	if err != nil {
		return nil, err
	}
	var inputs []LabelInput
	if entries != nil {
		for _, e := range entries {
			path := filepath.Join(dir, e.File)
			st, err := os.Stat(path)
			if err != nil {
				return nil, fmt.Errorf("%s: %s is listed but absent: %w", manifest, e.File, errors.Unwrap(err))
			}
			inputs = append(inputs, LabelInput{Path: path, Source: e.Source, Generator: e.Generator,
				NNZ: e.NNZ, Dims: e.Dims, Bytes: st.Size()})
		}
		return inputs, nil
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || !de.Type().IsRegular() && de.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if _, _, err := formats.FormatOf(name); err != nil {
			continue
		}
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		inputs = append(inputs, LabelInput{Path: path, Source: name, Bytes: st.Size()})
	}
	sort.Slice(inputs, func(i, j int) bool { return inputs[i].Path < inputs[j].Path })
	if len(inputs) == 0 {
		return nil, fmt.Errorf("%s: no %s and no tensor files (.tns, .stb, .mtx, optionally .gz)", dir, ManifestName)
	}
	return inputs, nil
}

// estimatedNNZ is the input's nonzeros, or a guess from its file's size
// (binary 16 bytes per nonzero, text 24, gzip a third of that).
func (in LabelInput) estimatedNNZ() float64 {
	if in.NNZ > 0 {
		return float64(in.NNZ)
	}
	per := 24.0
	name := strings.TrimSuffix(in.Path, ".gz")
	if strings.HasSuffix(name, string(formats.Binary)) {
		per = 16
	}
	if name != in.Path {
		per /= 3
	}
	return max(float64(in.Bytes)/per, 1)
}

// Label measures, for each tensor of the directory in (LabelInputs), each
// operation, each mode and each device, every candidate format of the
// operation (hetero.Op.Formats) with the real kernels
// (hetero.MeasureFormats: conversion, a warm-up run, then the formats'
// timed runs interleaved, opt.Runs each, more for short kernels as
// DefaultMinTime says and fewer for long ones as DefaultRunBudget says;
// the median is kept), and appends one LabelRow per (tensor, op, mode,
// device) to the labels file out, which may not be gzip-compressed.
//
// It is resumable and safe to kill at any moment: each row is written as
// one line and synced before the next is measured; on start the rows
// already in out (same tensor path or fingerprint, op, mode, device, its
// class and rank) are skipped, and a truncated last line is dropped (and
// reported through opt.Warn and the summary), so a run killed mid-write
// loses only the row in progress. A tensor that cannot be labelled (its
// file does not parse or no longer matches the manifest, it now holds
// another tensor than its rows record, or measuring it fails, as for a
// tensor too large for this machine's memory) is skipped with a warning
// and listed in the summary's Failed, unless maxFailedInARow tensors fail
// in a row, which stops the run with the last one's error. When ctx is
// done, Label stops before the next row and returns ctx's error; the row
// in progress is not written.
func Label(ctx context.Context, in, out string, opt LabelOptions) (*LabelSummary, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if gzipped(out) {
		return nil, fmt.Errorf("labels file %s: a gzip file cannot be appended to and synced row by row; label into a .jsonl file and gzip it once done (train, eval and tune-model read .jsonl.gz)", out)
	}
	inputs, err := LabelInputs(in)
	if err != nil {
		return nil, err
	}
	if opt.Limit > 0 && opt.Limit < len(inputs) {
		inputs = inputs[:opt.Limit]
	}
	outDir, err := filepath.Abs(filepath.Dir(out))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	warn := func(format string, args ...any) {
		if opt.Warn != nil {
			opt.Warn(fmt.Sprintf(format, args...))
		}
	}
	if opt.Parts > 1 {
		// This worker's share of the input, and its own file to write.
		var mine []LabelInput
		for i, input := range inputs {
			if i%opt.Parts == opt.Part {
				mine = append(mine, input)
			}
		}
		inputs = mine
	}
	write := out
	if opt.Parts > 1 {
		write = PartPath(out, opt.Part)
	}
	sum := &LabelSummary{Out: write, Tensors: len(inputs), Build: CurrentBuild()}
	old, dropped, err := loadLabels(write)
	if err != nil {
		return nil, err
	}
	if opt.Parts > 1 {
		// Rows done by any worker, in this run or an earlier one, are
		// not measured again: the merged file and every other part file
		// (read as they are: their writers may be running).
		others := []string{out}
		files, err := partFiles(out)
		if err != nil {
			return nil, err
		}
		for _, p := range files {
			if p != write {
				others = append(others, p)
			}
		}
		for _, p := range others {
			rows, err := readRows(p)
			if err != nil {
				return nil, err
			}
			old = append(old, rows...)
		}
	}
	if dropped != nil {
		sum.Dropped = dropped.Error()
		warn("%s", sum.Dropped)
	}
	if mixed := MixedBuilds(append(old, LabelRow{Build: sum.Build})); mixed != nil {
		sum.MixedBuilds = mixed
		warn("%s mixes builds (this run's is the last): %s", out, strings.Join(mixed, "; "))
	}
	lab := &labeller{opt: opt, out: write, sum: sum, done: map[labelKey]bool{}, tensors: map[string]seenTensor{}}
	// A cpu row written before builds recorded the family number counts
	// as done by the processor of its model name here, as it did then:
	// resuming such a file measures nothing twice.
	var cpus []hetero.Info // the CPUs measured here that report a family number
	for _, d := range opt.Devices {
		if info := d.Info(); info.Kind == hetero.CPU && info.Family > 0 {
			cpus = append(cpus, info)
		}
	}
	for i := range old {
		r := &old[i]
		lab.done[r.key()] = true
		lab.done[r.fingerprintKey()] = true
		if r.DeviceFamily == 0 && model.IsCPUHead(r.DeviceClass) {
			for _, info := range cpus {
				if info.Model == r.DeviceModel {
					c := *r
					c.DeviceFamily = info.Family
					lab.done[c.key()] = true
					lab.done[c.fingerprintKey()] = true
				}
			}
		}
		if _, ok := lab.tensors[r.Tensor]; !ok {
			lab.tensors[r.Tensor] = seenTensor{order: r.Order, fingerprint: r.Fingerprint}
		}
	}
	for _, d := range opt.Devices {
		info := d.Info()
		lab.infos = append(lab.infos, info)
		sum.Devices = append(sum.Devices, DeviceCost{Device: info.Name, Class: info.Class()})
	}
	f, err := os.OpenFile(write, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	lab.file = f
	names := make([]string, len(inputs))
	estimates := make([]float64, len(inputs))
	for i, input := range inputs {
		names[i] = relTensor(outDir, input.Path)
		order := len(input.Dims)
		if order == 0 {
			order = lab.tensors[names[i]].order
		}
		if order == 0 {
			order = 3
		}
		estimates[i] = float64(lab.pending(names[i], "", order)) * input.estimatedNNZ()
		lab.totalWork += estimates[i]
	}
	inARow := 0 // tensors that failed since the last one labelled
	for i, input := range inputs {
		err := lab.tensor(ctx, i, len(inputs), names[i], input, estimates[i])
		var fail *tensorError
		if err == nil {
			inARow = 0
			continue
		}
		if !errors.As(err, &fail) || inARow+1 == maxFailedInARow {
			return sum, errors.Join(err, f.Close())
		}
		// One tensor's problem: the others are still worth labelling.
		inARow++
		sum.Failed = append(sum.Failed, fail.Error())
		if opt.Warn != nil {
			opt.Warn(fail.Error() + ": skipped")
		}
	}
	if err := f.Close(); err != nil {
		return sum, fmt.Errorf("%s: %w", out, err)
	}
	return sum, nil
}

// tensorError is a problem of one tensor (its file, or measuring it),
// after which Label goes on with the next.
type tensorError struct{ err error }

func (e *tensorError) Error() string { return e.err.Error() }
func (e *tensorError) Unwrap() error { return e.err }

// maxFailedInARow is how many tensors in a row may fail before Label
// stops: by then the fault is likely the device's or the set's, which
// every further tensor would report again.
const maxFailedInARow = 5

// defaults fills and checks the options.
func (opt *LabelOptions) defaults() error {
	if len(opt.Ops) == 0 {
		opt.Ops = hetero.Ops
	}
	for i, op := range opt.Ops {
		if op != hetero.SpTTM && op != hetero.MTTKRP {
			return fmt.Errorf("label: unknown op %v", op)
		}
		if slices.Contains(opt.Ops[:i], op) {
			return fmt.Errorf("label: op %s given twice", op)
		}
	}
	if len(opt.Devices) == 0 {
		opt.Devices = []hetero.Device{hetero.NewCPU(0)}
	}
	var names []string
	for _, d := range opt.Devices {
		name := d.Info().Name
		if slices.Contains(names, name) {
			return fmt.Errorf("label: device %s given twice", name)
		}
		names = append(names, name)
	}
	switch {
	case opt.Rank == 0:
		opt.Rank = DefaultLabelRank
	case opt.Rank < 0:
		return fmt.Errorf("label: rank must be at least 1, found %d", opt.Rank)
	}
	switch {
	case opt.Runs == 0:
		opt.Runs = DefaultRuns
	case opt.Runs < 0:
		return fmt.Errorf("label: runs must be at least 1, found %d", opt.Runs)
	}
	if opt.RunBudget == 0 {
		opt.RunBudget = DefaultRunBudget
	}
	if opt.MinTime == 0 {
		opt.MinTime = DefaultMinTime
	}
	if opt.Limit < 0 {
		return fmt.Errorf("label: limit must be 0 (all) or more, found %d", opt.Limit)
	}
	if opt.Parts > 1 && (opt.Part < 0 || opt.Part >= opt.Parts) {
		return fmt.Errorf("label: part %d of %d", opt.Part, opt.Parts)
	}
	return nil
}

// runs is the rule MeasureFormats applies after a warm-up run: Runs runs,
// more for a kernel too short for them to add up to MinTime (at most
// MaxRuns), fewer for one too long for them to fit RunBudget (at least 1).
func (opt *LabelOptions) runs(warmup time.Duration) int {
	if warmup <= 0 {
		return opt.Runs
	}
	n := opt.Runs
	if opt.MinTime > 0 {
		n = max(n, min(MaxRuns, int((opt.MinTime+warmup-1)/warmup)))
	}
	if opt.RunBudget > 0 {
		n = min(n, int(opt.RunBudget/warmup))
	}
	return max(1, n)
}

// seenTensor is what the labels file says of a tensor: its order and the
// fingerprint of its first row.
type seenTensor struct {
	order       int
	fingerprint string
}

// labeller is the state of a Label run.
type labeller struct {
	opt             LabelOptions
	infos           []hetero.Info
	out             string
	file            *os.File
	sum             *LabelSummary
	done            map[labelKey]bool
	tensors         map[string]seenTensor
	work, totalWork float64
}

// pending counts the rows of a tensor of the given order not yet done,
// by name and, when fp is set, by fingerprint.
func (l *labeller) pending(name, fp string, order int) int {
	n := 0
	for _, op := range l.opt.Ops {
		for mode := 1; mode <= order; mode++ {
			for _, info := range l.infos {
				r := LabelRow{Tensor: name, Fingerprint: fp, Op: op.String(), Mode: mode, Device: info.Name, DeviceClass: info.Class(), DeviceModel: info.Model, DeviceFamily: info.Family, Rank: l.opt.Rank, Build: l.sum.Build}
				if !l.done[r.key()] && (fp == "" || !l.done[r.fingerprintKey()]) {
					n++
				}
			}
		}
	}
	return n
}

// tensor labels one input; estimate is its share of totalWork so far.
func (l *labeller) tensor(ctx context.Context, index, total int, name string, in LabelInput, estimate float64) error {
	start := time.Now()
	ev := LabelProgress{Index: index, Total: total, Tensor: name}
	report := func() {
		if l.opt.Progress != nil {
			ev.Work, ev.TotalWork = l.work, l.totalWork
			l.opt.Progress(ev)
		}
	}
	seen, labelled := l.tensors[name]
	order := len(in.Dims)
	if order == 0 {
		order = seen.order
	}
	rowsPer := len(l.opt.Ops) * len(l.infos)
	if order > 0 && l.pending(name, "", order) == 0 {
		// Every row is done: no need to read the file.
		ev.Resumed = rowsPer * order
		l.sum.Resumed += ev.Resumed
		l.totalWork -= estimate
		ev.Elapsed = time.Since(start)
		report()
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	x, fp, err := l.read(in, seen, labelled)
	l.sum.ReadSeconds += time.Since(start).Seconds()
	if err != nil {
		// Its rows are no longer work ahead, for the progress bar's
		// share and ETA.
		l.totalWork -= estimate
		return &tensorError{err}
	}
	ev.NNZ, ev.Dims = x.NNZ(), x.Dims
	if x.NNZ() == 0 {
		l.sum.Empty++
		l.totalWork -= estimate
		if l.opt.Warn != nil {
			l.opt.Warn(fmt.Sprintf("%s: no nonzeros, skipped", in.Path))
		}
		report()
		return nil
	}
	pending := l.pending(name, fp, x.Order())
	ev.Resumed = rowsPer*x.Order() - pending
	l.sum.Resumed += ev.Resumed
	l.totalWork += float64(pending*x.NNZ()) - estimate
	base := LabelRow{Tensor: name, Source: in.Source, Generator: in.Generator, Fingerprint: fp, Rank: l.opt.Rank,
		NNZ: x.NNZ(), Dims: slices.Clone(x.Dims), Order: x.Order(), Build: l.sum.Build}
	for _, op := range l.opt.Ops {
		for mode := range x.Order() {
			for d, dev := range l.opt.Devices {
				info := l.infos[d]
				r := base
				r.Op, r.Mode, r.Device, r.DeviceClass, r.DeviceModel, r.DeviceFamily, r.ComputeUnits = op.String(), mode+1, info.Name, info.Class(), info.Model, info.Family, info.ComputeUnits
				if l.done[r.key()] || l.done[r.fingerprintKey()] {
					continue
				}
				rowStart := time.Now()
				if err := l.measure(ctx, dev, x, op, mode, &r); err != nil {
					// The rows left of a tensor that fails are no longer
					// work ahead, for the progress bar's share and ETA.
					l.totalWork -= float64((pending - ev.Written) * x.NNZ())
					return err
				}
				if err := l.write(&r); err != nil {
					return err
				}
				l.done[r.key()], l.done[r.fingerprintKey()] = true, true
				cost := &l.sum.Devices[d]
				cost.Rows++
				cost.NNZ += int64(x.NNZ())
				cost.Seconds += time.Since(rowStart).Seconds()
				l.sum.Written++
				ev.Written++
				l.work += float64(x.NNZ())
				ev.Row = &r
				report()
				ev.Row = nil
			}
		}
	}
	ev.Elapsed = time.Since(start)
	report()
	return nil
}

// read reads in's tensor and its fingerprint, and checks them against
// what the manifest and the labels file record of it.
func (l *labeller) read(in LabelInput, seen seenTensor, labelled bool) (*formats.COO, string, error) {
	x, err := formats.ReadFile(in.Path)
	if err != nil {
		return nil, "", err
	}
	if in.Dims != nil && (x.NNZ() != in.NNZ || !slices.Equal(x.Dims, in.Dims)) {
		return nil, "", fmt.Errorf("%s: the manifest records %s with %d nonzeros, the file holds %s with %d: regenerate it (sparsetune gen)",
			in.Path, formats.FormatDims(in.Dims), in.NNZ, formats.FormatDims(x.Dims), x.NNZ())
	}
	fp := model.Fingerprint(x)
	if labelled && seen.fingerprint != fp {
		return nil, "", fmt.Errorf("%s: %s holds rows of this file with fingerprint %.12s, the file now holds another tensor (%.12s): label it into another labels file",
			in.Path, l.out, seen.fingerprint, fp)
	}
	return x, fp, nil
}

// measure times every candidate of op on dev into r.
func (l *labeller) measure(ctx context.Context, dev hetero.Device, x *formats.COO, op hetero.Op, mode int, r *LabelRow) error {
	candidates := op.Formats()
	r.Times, r.MinTimes = map[string]float64{}, map[string]float64{}
	r.ConvertSeconds, r.Skipped, r.Runs = map[string]float64{}, map[string]string{}, map[string]int{}
	if err := ctx.Err(); err != nil {
		return err
	}
	ms, err := hetero.MeasureFormats(dev, x, op, mode, candidates, l.opt.Rank, l.opt.runs)
	if err != nil {
		// The row names the tensor relative to the labels file; the
		// message, as the user would name it.
		name := r.Tensor
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(l.out), name)
		}
		return &tensorError{fmt.Errorf("%s: %s mode %d on %s: %s", name, op, mode+1, r.Device, oneLine(err))}
	}
	for i, f := range candidates {
		m := ms[i]
		if m.ConvertSeconds > 0 {
			r.ConvertSeconds[f] = m.ConvertSeconds
		}
		if m.Skipped != "" {
			r.Skipped[f] = strings.Join(strings.Fields(m.Skipped), " ")
			continue
		}
		r.ConvertSeconds[f] = m.ConvertSeconds
		r.Times[f], r.MinTimes[f], r.Runs[f] = m.Seconds, m.MinSeconds, m.Iters
		if tr := m.HostToDevice + m.DeviceToHost; tr > 0 {
			if r.TransferSeconds == nil {
				r.TransferSeconds = map[string]float64{}
			}
			r.TransferSeconds[f] = tr
		}
	}
	r.Label, r.NearTies = rankTimes(candidates, r.Times)
	r.MeasuredAt = time.Now().UTC().Truncate(time.Millisecond)
	return nil
}

// write appends r to the labels file as one line and syncs it.
func (l *labeller) write(r *LabelRow) error {
	if err := r.check(); err != nil {
		return fmt.Errorf("label row of %s, %s mode %d on %s: %w", r.Tensor, r.Op, r.Mode, r.Device, err)
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := l.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("%s: %w", l.out, err)
	}
	if err := l.file.Sync(); err != nil {
		return fmt.Errorf("%s: %w", l.out, err)
	}
	return nil
}

// loadLabels reads the labels file at out for resuming, absent meaning
// empty. A truncated last line is cut off the file and returned.
func loadLabels(out string) ([]LabelRow, *truncatedError, error) {
	data, err := os.ReadFile(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	rows, tail, err := parseLabels(data, out)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (fix or remove the line to resume)", err)
	}
	cut := len(data)
	if tail != nil {
		cut = bytes.LastIndexByte(data, '\n') + 1
	} else if cut > 0 && data[cut-1] != '\n' {
		// A complete last row without its newline: end it, so the next
		// row starts on its own line.
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.Write([]byte{'\n'})
			err = errors.Join(err, f.Sync(), f.Close())
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if cut < len(data) {
		if err := os.Truncate(out, int64(cut)); err != nil {
			return nil, nil, err
		}
	}
	return rows, tail, nil
}

// relTensor names a tensor in rows: its path relative to the labels file's
// directory, slash-separated, or its absolute path when it has none.
func relTensor(outDir, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	rel, err := filepath.Rel(outDir, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	return filepath.ToSlash(rel)
}
