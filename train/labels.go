package train

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/model"
)

// NearTie is the relative margin of a near tie: a format whose time is
// within NearTie of the fastest (t <= (1+NearTie)·best) is listed in a
// row's NearTies.
const NearTie = 0.03

// LabelRow is one line of a labels file: every candidate format of one
// operation, mode and device timed on one tensor. Times are seconds.
// docs/train.md describes the fields.
type LabelRow struct {
	// Tensor is the tensor's file, relative to the labels file's directory
	// (slash-separated), or absolute where no relative path exists.
	Tensor string `json:"tensor"`
	// Source is the group for grouped cross-validation: the source matrix
	// of a generated tensor (its manifest's source), else the file's name.
	Source string `json:"source"`
	// Generator is the manifest's generator chain, empty without one.
	Generator string `json:"generator,omitempty"`
	// Fingerprint is model.Fingerprint of the tensor (its structure).
	Fingerprint string `json:"fingerprint"`
	Op          string `json:"op"`   // "ttm" or "mttkrp"
	Mode        int    `json:"mode"` // 1-based
	Device      string `json:"device"`
	// DeviceClass is hetero.Info.Class: the hardware the times belong to.
	DeviceClass string `json:"device_class"`
	// DeviceModel and ComputeUnits repeat hetero.Info's Model and
	// ComputeUnits (for the CPU, the threads the kernels ran on).
	DeviceModel string `json:"device_model"`
	// DeviceFamily repeats hetero.Info's Family: the CPU's family number
	// where the host reports it (0, left out, where it does not, and in
	// rows labelled before builds recorded it). With DeviceModel it names
	// the processor (model.Processor), whose generation the times belong
	// to.
	DeviceFamily int   `json:"device_family,omitempty"`
	ComputeUnits int   `json:"compute_units"`
	Rank         int   `json:"rank"`
	NNZ          int   `json:"nnz"`
	Dims         []int `json:"dims"`
	Order        int   `json:"order"`
	// Times is the median kernel time of each format that ran, MinTimes
	// the fastest run.
	Times    map[string]float64 `json:"times"`
	MinTimes map[string]float64 `json:"min_times"`
	// ConvertSeconds is the time to build each format from COO, on the
	// host, apart from the kernel times.
	ConvertSeconds map[string]float64 `json:"convert_seconds"`
	// TransferSeconds is the median host-device transfer time per run
	// (both ways) of each format, on accelerators only.
	TransferSeconds map[string]float64 `json:"transfer_seconds,omitempty"`
	// Skipped says why a candidate was not run.
	Skipped map[string]string `json:"skipped"`
	// Label is the fastest format (smallest Times; "" when every candidate
	// was skipped), NearTies the formats within NearTie of it, fastest
	// first, Label included.
	Label    string   `json:"label"`
	NearTies []string `json:"near_ties"`
	// Runs is the number of timed runs of each format (after a warm-up).
	Runs       map[string]int `json:"runs"`
	Build      Build          `json:"build"`
	MeasuredAt time.Time      `json:"measured_at"`
}

// Build identifies the program that measured a row: timings from
// different builds (kernels changed, other inner loops) should not be
// mixed silently.
type Build struct {
	// Revision and Modified are the VCS revision the binary was built
	// from and whether the tree had local changes (runtime/debug's
	// vcs.revision and vcs.modified); Revision is empty when the build
	// carries no VCS information (go test, go build -buildvcs=false).
	Revision string `json:"revision"`
	Modified bool   `json:"modified"`
	// Version is the main module's version when the binary carries no
	// VCS revision but a module version (go install module@version:
	// "v0.3.0", or a pseudo-version, which holds the commit).
	Version string `json:"version,omitempty"`
	// Go is the Go version, InnerLoops kernels.InnerLoops().
	Go         string `json:"go"`
	InnerLoops string `json:"inner_loops"`
}

// CurrentBuild describes the running program.
func CurrentBuild() Build {
	b := Build{Go: runtime.Version(), InnerLoops: kernels.InnerLoops()}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		if v := info.Main.Version; b.Revision == "" && v != "" && v != "(devel)" {
			b.Version = v
		}
	}
	return b
}

// Known reports whether b names the source it was built from: a VCS
// revision or a module version. A binary built in a checkout with
// -buildvcs=false (GOFLAGS may carry it) knows neither, and its rows
// cannot be told from another such build's.
func (b Build) Known() bool { return b.Revision != "" || b.Version != "" }

// String names the build on one line, e.g. "revision 89a31d4e5f60
// (modified), go1.26.8, inner loops avx2".
func (b Build) String() string {
	rev := "revision unknown"
	switch {
	case b.Revision != "":
		rev = "revision " + b.Revision[:min(len(b.Revision), 12)]
	case b.Version != "":
		rev = "version " + b.Version
	}
	if b.Modified {
		rev += " (modified)"
	}
	return fmt.Sprintf("%s, %s, inner loops %s", rev, b.Go, b.InnerLoops)
}

// MixedBuilds returns one line per build that measured rows, in order of
// first appearance with its number of rows ("revision 89a31d4e5f60, go1.26.8,
// inner loops avx2: 120 rows"), when rows come from more than one build;
// nil when they all come from one.
func MixedBuilds(rows []LabelRow) []string {
	var order []Build
	count := map[Build]int{}
	for _, r := range rows {
		if count[r.Build] == 0 {
			order = append(order, r.Build)
		}
		count[r.Build]++
	}
	if len(order) < 2 {
		return nil
	}
	lines := make([]string, len(order))
	for i, b := range order {
		lines[i] = fmt.Sprintf("%s: %d rows", b, count[b])
	}
	return lines
}

// labelKey identifies a row for resuming and for duplicates: the tensor
// (by path or fingerprint), op, mode, device, its class and rank, and for
// a cpu row the inner loops and the processor that measured it, for a
// PoCL row the processor PoCL compiled for: the same tensor labelled on
// CPUs whose kernels run other inner loops, or on another processor, is
// other hardware's row, not a duplicate (model.CPUHead,
// model.DeviceHead).
type labelKey struct {
	tensor, op       string
	mode             int
	device, class    string
	rank             int
	loops, processor string
}

func (r *LabelRow) key() labelKey {
	loops, processor := r.hardware()
	return labelKey{r.Tensor, r.Op, r.Mode, r.Device, r.DeviceClass, r.Rank, loops, processor}
}

func (r *LabelRow) fingerprintKey() labelKey {
	loops, processor := r.hardware()
	return labelKey{"#" + r.Fingerprint, r.Op, r.Mode, r.Device, r.DeviceClass, r.Rank, loops, processor}
}

// hardware returns the inner loops of a cpu row's build and its
// processor; for an accelerator's row no loops, and the processor its
// kernels were compiled for where the device names one
// (model.DeviceTarget: PoCL's), else "".
func (r *LabelRow) hardware() (loops, processor string) {
	if model.IsCPUHead(r.DeviceClass) {
		return r.Build.InnerLoops, r.processor()
	}
	return "", model.DeviceTarget(r.DeviceClass, r.DeviceModel)
}

// processor returns the processor that measured a cpu row
// (model.Processor: its model name and family number).
func (r *LabelRow) processor() string {
	return model.Processor(r.DeviceModel, r.DeviceFamily)
}

// ReadLabels reads a labels file strictly: every line must be a complete,
// consistent row (unknown fields, a label that is not the fastest format,
// a candidate neither timed nor skipped are errors naming the file, line
// and field), and no row may repeat another's tensor, op, mode, device
// and rank. Blank lines are ignored. A path ending in .gz is read
// through gzip: the committed labels files are stored that way, a tenth
// of their size.
func ReadLabels(path string) ([]LabelRow, error) {
	data, err := readLabelsFile(path)
	if err != nil {
		return nil, err
	}
	rows, tail, err := parseLabels(data, path)
	if err != nil {
		return nil, err
	}
	if tail != nil {
		return nil, tail
	}
	return rows, nil
}

// readLabelsFile returns the content of a labels file, decompressed when
// it is stored gzip-compressed.
func readLabelsFile(path string) ([]byte, error) {
	if !gzipped(path) {
		return os.ReadFile(path)
	}
	r, err := openFile(path)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(r)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading gzip data: %w", path, err)
	}
	return data, nil
}

// gzipped reports whether a file is stored gzip-compressed, by its name:
// labels files and source matrices may be. Such a labels file can be read
// (ReadLabels) but not appended to row by row (Label refuses it).
func gzipped(path string) bool { return strings.HasSuffix(path, ".gz") }

// openFile opens path for reading, through gzip when it is gzipped;
// closing the reader closes the file.
func openFile(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil || !gzipped(path) {
		return f, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("%s: expected a gzip stream (the name ends in .gz), found a file too short for its header", path)
		case errors.Is(err, gzip.ErrHeader):
			return nil, fmt.Errorf("%s: expected a gzip stream (the name ends in .gz), found other data", path)
		}
		return nil, fmt.Errorf("%s: expected a gzip stream: %v", path, err)
	}
	return gzipFile{zr, f}, nil
}

// gzipFile is a gzip stream that closes its file with it.
type gzipFile struct {
	*gzip.Reader
	file *os.File
}

func (g gzipFile) Close() error { return errors.Join(g.Reader.Close(), g.file.Close()) }

// truncatedError is an unterminated last line that is not a valid row: a
// labelling run killed while writing it.
type truncatedError struct {
	name  string
	line  int
	bytes int
	err   error
}

func (e *truncatedError) Error() string {
	return fmt.Sprintf("%s:%d: truncated last line (%d bytes, no newline: a labelling run killed while writing it; sparsetune label drops it and measures the row again): %v",
		e.name, e.line, e.bytes, e.err)
}

// parseLabels parses a labels file's content. An unterminated last line
// that does not parse is returned apart, as tail; one that parses is a
// row like the others.
func parseLabels(data []byte, name string) (rows []LabelRow, tail *truncatedError, err error) {
	seen := map[labelKey]int{}
	for line := 1; len(data) > 0; line++ {
		text, rest, terminated := bytes.Cut(data, []byte{'\n'})
		data = rest
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		r, err := parseLabelRow(text)
		if err != nil {
			if !terminated {
				return rows, &truncatedError{name: name, line: line, bytes: len(text), err: err}, nil
			}
			return nil, nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		k := r.key()
		if first, ok := seen[k]; ok {
			return nil, nil, fmt.Errorf("%s:%d: duplicate of line %d (tensor %q, %s mode %d, device %q, rank %d)", name, line, first, r.Tensor, r.Op, r.Mode, r.Device, r.Rank)
		}
		seen[k] = line
		rows = append(rows, r)
	}
	return rows, nil, nil
}

// parseLabelRow decodes and checks one line.
func parseLabelRow(text []byte) (LabelRow, error) {
	var r LabelRow
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return r, fmt.Errorf("%s: expected %s, found a JSON %s", te.Field, te.Type, te.Value)
		}
		return r, fmt.Errorf("expected a JSON label row: %s", oneLine(err))
	}
	if dec.More() {
		return r, errors.New("expected one JSON label row, found more after it")
	}
	if err := r.check(); err != nil {
		return r, err
	}
	return r, nil
}

// oneLine folds a message onto one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// check reports the first field of r that is missing or inconsistent, as
// "field: what was expected".
func (r *LabelRow) check() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))
	}
	if r.Tensor == "" {
		return bad("tensor", "expected the tensor's file, found none")
	}
	if r.Source == "" {
		return bad("source", "expected the source matrix or file name, found none")
	}
	if len(r.Fingerprint) != 64 || strings.Trim(r.Fingerprint, "0123456789abcdef") != "" {
		return bad("fingerprint", "expected 64 lowercase hex digits, found %q", r.Fingerprint)
	}
	op, err := hetero.ParseOp(r.Op)
	if err != nil || op.String() != r.Op {
		return bad("op", "expected ttm or mttkrp, found %q", r.Op)
	}
	if r.Order < 2 || r.Order > 64 {
		return bad("order", "expected 2 to 64, found %d", r.Order)
	}
	if len(r.Dims) != r.Order {
		return bad("dims", "expected %d dims (the order), found %d", r.Order, len(r.Dims))
	}
	for _, d := range r.Dims {
		if d < 1 {
			return bad("dims", "expected positive dims, found %v", r.Dims)
		}
	}
	if r.NNZ < 1 {
		return bad("nnz", "expected at least 1, found %d", r.NNZ)
	}
	if r.Mode < 1 || r.Mode > r.Order {
		return bad("mode", "expected 1 to %d (1-based), found %d", r.Order, r.Mode)
	}
	if r.Device == "" {
		return bad("device", "expected the device's name, found none")
	}
	if r.DeviceClass == "" {
		return bad("device_class", "expected the device's class, found none")
	}
	// The class is the device's (hetero.Info.Class): cpu for the CPU,
	// BACKEND-TYPE for BACKEND:INDEX. A head is trained per class, so a
	// row filed under another device's would train the wrong one.
	if backend, _, _ := strings.Cut(r.Device, ":"); r.Device == "cpu" && r.DeviceClass != "cpu" || r.Device != "cpu" && !strings.HasPrefix(r.DeviceClass, backend+"-") {
		return bad("device_class", "%q is not a class of device %s", r.DeviceClass, r.Device)
	}
	if r.DeviceFamily < 0 {
		return bad("device_family", "expected 0 or more, found %d", r.DeviceFamily)
	}
	if r.ComputeUnits < 0 {
		return bad("compute_units", "expected 0 or more, found %d", r.ComputeUnits)
	}
	if r.Rank < 1 {
		return bad("rank", "expected at least 1, found %d", r.Rank)
	}
	candidates := op.Formats()
	for f, t := range r.Times {
		if !slices.Contains(candidates, f) {
			return bad("times", "format %q is not a %s format (%s)", f, r.Op, strings.Join(candidates, ", "))
		}
		if !(t >= 0) || math.IsInf(t, 0) {
			return bad("times", "%s: expected seconds, found %v", f, t)
		}
		if _, ok := r.Skipped[f]; ok {
			return bad("skipped", "%s is timed and skipped", f)
		}
		if m, ok := r.MinTimes[f]; !ok || !(m >= 0) || m > t {
			return bad("min_times", "%s: expected the fastest run, at most the median %v, found %v", f, t, r.MinTimes[f])
		}
		if c, ok := r.ConvertSeconds[f]; !ok || !(c >= 0) || math.IsInf(c, 0) {
			return bad("convert_seconds", "%s: expected seconds for a timed format, found %v", f, r.ConvertSeconds[f])
		}
		if n := r.Runs[f]; n < 1 {
			return bad("runs", "%s: expected at least 1 timed run, found %d", f, n)
		}
	}
	for f, why := range r.Skipped {
		if !slices.Contains(candidates, f) {
			return bad("skipped", "format %q is not a %s format (%s)", f, r.Op, strings.Join(candidates, ", "))
		}
		if strings.TrimSpace(why) == "" {
			return bad("skipped", "%s: expected a reason, found none", f)
		}
	}
	for _, f := range candidates {
		_, timed := r.Times[f]
		if _, skipped := r.Skipped[f]; !timed && !skipped {
			return bad("times", "candidate %s is neither timed nor skipped", f)
		}
	}
	for field, m := range map[string]map[string]float64{"min_times": r.MinTimes, "transfer_seconds": r.TransferSeconds} {
		for f, v := range m {
			if _, ok := r.Times[f]; !ok || !(v >= 0) || math.IsInf(v, 0) {
				return bad(field, "%s: expected seconds of a timed format, found %v", f, v)
			}
		}
	}
	for f, c := range r.ConvertSeconds {
		if !slices.Contains(candidates, f) || !(c >= 0) || math.IsInf(c, 0) {
			return bad("convert_seconds", "%s: expected seconds of a %s format, found %v", f, r.Op, c)
		}
	}
	for f := range r.Runs {
		if _, ok := r.Times[f]; !ok {
			return bad("runs", "%s: runs of a format that was not timed", f)
		}
	}
	label, ties := rankTimes(candidates, r.Times)
	if r.Label != label {
		return bad("label", "expected the fastest format %q, found %q", label, r.Label)
	}
	if !slices.Equal(r.NearTies, ties) {
		return bad("near_ties", "expected the formats within %g%% of the fastest, fastest first, %q, found %q", 100*NearTie, ties, r.NearTies)
	}
	if r.Build.Go == "" || r.Build.InnerLoops == "" {
		return bad("build", "expected the go version and inner_loops, found %+v", r.Build)
	}
	if r.MeasuredAt.IsZero() {
		return bad("measured_at", "expected the time of the measurement, found none")
	}
	return nil
}

// rankTimes returns the fastest format of times (ties broken by the order
// of candidates; "" when times is empty) and the formats within NearTie of
// it, fastest first.
func rankTimes(candidates []string, times map[string]float64) (string, []string) {
	var timed []string
	for _, f := range candidates {
		if _, ok := times[f]; ok {
			timed = append(timed, f)
		}
	}
	if len(timed) == 0 {
		return "", []string{}
	}
	// A stable sort keeps the candidates' order among equal times.
	slices.SortStableFunc(timed, func(a, b string) int {
		switch ta, tb := times[a], times[b]; {
		case ta < tb:
			return -1
		case ta > tb:
			return 1
		}
		return 0
	})
	best := times[timed[0]]
	n := 1
	for n < len(timed) && times[timed[n]] <= best*(1+NearTie) {
		n++
	}
	return timed[0], timed[:n:n]
}
