package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model"
)

// tinySet writes three small tensors (two of order 3, one of order 4) from
// shared matrices into a temporary directory and returns it.
func tinySet(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(matrixDir); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	specs := []Spec{
		{Name: "t1", Source: "bcsstk01.mtx", Stages: []Stage{{Generator: GenSlices, Params: Params{Size: 4}}}, TargetNNZ: 800, Seed: 1},
		{Name: "t2", Source: "494_bus.mtx", Stages: []Stage{{Generator: GenLift, Params: Params{Zipf: 1}}}, TargetNNZ: 1500, Seed: 2},
		{Name: "t3", Source: "bcsstk01.mtx", Stages: []Stage{{Generator: GenBand}, {Generator: GenBursts}}, TargetNNZ: 1200, Seed: 3},
	}
	dir := filepath.Join(t.TempDir(), "set")
	if _, err := WriteSet(context.Background(), specs, WriteOptions{From: matrixDir, Out: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cpuOptions label on one CPU thread with one timed run.
func cpuOptions() LabelOptions {
	return LabelOptions{Devices: []hetero.Device{hetero.NewCPU(1)}, Runs: 1, MinTime: -1, Rank: 4}
}

// checkRows checks each row against its tensor file and the options.
func checkRows(t *testing.T, out string, rows []LabelRow, opt LabelOptions) {
	t.Helper()
	for i, r := range rows {
		x, err := formats.ReadFile(filepath.Join(filepath.Dir(out), filepath.FromSlash(r.Tensor)))
		if err != nil {
			t.Fatalf("row %d: %v", i+1, err)
		}
		if r.Fingerprint != model.Fingerprint(x) || r.NNZ != x.NNZ() || !slices.Equal(r.Dims, x.Dims) || r.Order != x.Order() {
			t.Errorf("row %d: tensor fields disagree with %s: %+v", i+1, r.Tensor, r)
		}
		if r.Source != "bcsstk01.mtx" && r.Source != "494_bus.mtx" || r.Generator == "" {
			t.Errorf("row %d: source %q generator %q", i+1, r.Source, r.Generator)
		}
		if r.Rank != opt.Rank || r.Mode < 1 || r.Mode > r.Order || r.DeviceClass != "cpu" && r.Device == "cpu" {
			t.Errorf("row %d: rank %d mode %d class %s", i+1, r.Rank, r.Mode, r.DeviceClass)
		}
		op, err := hetero.ParseOp(r.Op)
		if err != nil {
			t.Fatalf("row %d: %v", i+1, err)
		}
		best := math.Inf(1)
		for _, f := range op.Formats() {
			s, timed := r.Times[f]
			if why, skipped := r.Skipped[f]; timed == skipped || skipped && why == "" {
				t.Errorf("row %d: %s timed %v skipped %q", i+1, f, timed, why)
			}
			if timed {
				best = min(best, s)
				if r.Runs[f] != opt.Runs || r.MinTimes[f] > s || r.ConvertSeconds[f] <= 0 {
					t.Errorf("row %d: %s runs %d min %v median %v convert %v", i+1, f, r.Runs[f], r.MinTimes[f], s, r.ConvertSeconds[f])
				}
			}
		}
		if r.Times[r.Label] != best || !slices.Contains(r.NearTies, r.Label) || r.NearTies[0] != r.Label {
			t.Errorf("row %d: label %s (%v), best %v, near ties %v", i+1, r.Label, r.Times[r.Label], best, r.NearTies)
		}
		for _, f := range r.NearTies {
			if r.Times[f] > best*(1+NearTie) {
				t.Errorf("row %d: near tie %s at %v, best %v", i+1, f, r.Times[f], best)
			}
		}
		if r.Build != CurrentBuild() || r.MeasuredAt.IsZero() || time.Since(r.MeasuredAt) < 0 {
			t.Errorf("row %d: build %+v measured at %v", i+1, r.Build, r.MeasuredAt)
		}
	}
}

// TestLabel labels a tiny generated set on the CPU and checks every row.
func TestLabel(t *testing.T) {
	dir := tinySet(t)
	out := filepath.Join(t.TempDir(), "labels", "labels.jsonl")
	opt := cpuOptions()
	var events []LabelProgress
	opt.Progress = func(p LabelProgress) { events = append(events, p) }
	sum, err := Label(context.Background(), dir, out, opt)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	// Orders 3, 3, 4: 10 modes, two ops, one device.
	if len(rows) != 20 || sum.Written != 20 || sum.Resumed != 0 || sum.Tensors != 3 || sum.Devices[0].Rows != 20 {
		t.Fatalf("%d rows, summary %+v", len(rows), sum)
	}
	checkRows(t, out, rows, opt)
	// Manifest order, then op, mode, device.
	var order []string
	for _, r := range rows {
		if len(order) == 0 || order[len(order)-1] != r.Tensor {
			order = append(order, r.Tensor)
		}
	}
	// Paths relative to the labels file's directory (checkRows read the
	// files through them).
	if len(order) != 3 || !strings.HasPrefix(order[0], "../../") || path.Base(order[0]) != "t1.stb" ||
		path.Base(order[1]) != "t2.stb" || path.Base(order[2]) != "t3.stb" {
		t.Fatalf("tensor order %v", order)
	}
	if rows[0].Op != "ttm" || rows[0].Mode != 1 || rows[1].Mode != 2 || rows[3].Op != "mttkrp" {
		t.Errorf("row order: %s %d, %s %d, %s %d", rows[0].Op, rows[0].Mode, rows[1].Op, rows[1].Mode, rows[3].Op, rows[3].Mode)
	}
	// Progress: a row event per row, an end event per tensor; the work
	// ends at its total.
	ends, work := 0, 0.0
	for _, e := range events {
		if e.Row == nil {
			ends++
		}
		if e.Work < work {
			t.Fatalf("work went back: %+v", e)
		}
		work = e.Work
	}
	last := events[len(events)-1]
	if len(events) != 23 || ends != 3 || last.Work != last.TotalWork || last.Written != 8 {
		t.Errorf("%d events, %d ends, last %+v", len(events), ends, last)
	}
}

// TestLabelResume: a run killed mid-line, simulated by truncating the file
// inside its last row, loses that row only; the next run drops the partial
// line, measures the missing rows and duplicates nothing.
func TestLabelResume(t *testing.T) {
	dir, out, opt, full := labelTinyMTTKRP(t)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		keep     int // bytes kept
		resumed  int
		warnings int
	}{
		{"cut inside the last row", len(data) - 40, len(full) - 1, 1},
		{"cut inside the third row", lineStart(data, 3) + 25, 2, 1},
		{"last newline lost", len(data) - 1, len(full), 0},
		{"empty file", 0, 0, 0},
		{"nothing cut", len(data), len(full), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(out, data[:tc.keep], 0o644); err != nil {
				t.Fatal(err)
			}
			var warnings []string
			opt.Warn = func(s string) { warnings = append(warnings, s) }
			sum, err := Label(context.Background(), dir, out, opt)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Resumed != tc.resumed || sum.Written != len(full)-tc.resumed || len(warnings) != tc.warnings {
				t.Fatalf("resumed %d written %d, want %d and %d; warnings %q", sum.Resumed, sum.Written, tc.resumed, len(full)-tc.resumed, warnings)
			}
			if tc.warnings > 0 && (!strings.Contains(warnings[0], "truncated last line") || sum.Dropped == "") {
				t.Errorf("warning %q", warnings[0])
			}
			rows, err := ReadLabels(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != len(full) {
				t.Fatalf("%d rows after resuming, want %d", len(rows), len(full))
			}
			for i := range full {
				// The rows kept are unchanged, in their place.
				if i < tc.resumed && !rowsEqual(rows[i], full[i]) {
					t.Errorf("row %d changed: %+v", i+1, rows[i])
				}
			}
		})
	}
}

// TestLabelResumeFamily: rows written before builds recorded the CPU's
// family number are this processor's when its model name is the
// host's, and a resume measures none of them again; rows of another
// family number are another processor's, and it measures them all.
func TestLabelResumeFamily(t *testing.T) {
	host := hetero.NewCPU(0).Info()
	if host.Family == 0 {
		t.Skip("this host reports no CPU family number")
	}
	dir, out, opt, full := labelTinyMTTKRP(t)
	if full[0].DeviceFamily != host.Family {
		t.Fatalf("rows record family %d, the host reports %d", full[0].DeviceFamily, host.Family)
	}
	for _, tc := range []struct {
		name    string
		family  int
		resumed int
	}{
		{"unrecorded", 0, len(full)},
		{"another generation", host.Family + 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			for _, r := range full {
				r.DeviceFamily = tc.family
				b.WriteString(marshalRow(t, r))
			}
			if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			sum, err := Label(context.Background(), dir, out, opt)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Resumed != tc.resumed || sum.Written != len(full)-tc.resumed {
				t.Errorf("resumed %d, written %d; want %d, %d", sum.Resumed, sum.Written, tc.resumed, len(full)-tc.resumed)
			}
		})
	}
}

// labelTinyMTTKRP labels the MTTKRP rows of tinySet on the CPU into a
// fresh file and returns the set, the file, the options and the rows.
func labelTinyMTTKRP(t *testing.T) (dir, out string, opt LabelOptions, rows []LabelRow) {
	t.Helper()
	dir = tinySet(t)
	out = filepath.Join(t.TempDir(), "labels.jsonl")
	opt = cpuOptions()
	opt.Ops = []hetero.Op{hetero.MTTKRP}
	if _, err := Label(context.Background(), dir, out, opt); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	return dir, out, opt, rows
}

// lineStart returns the offset of line n (1-based) in data.
func lineStart(data []byte, n int) int {
	off := 0
	for range n - 1 {
		off += bytes.IndexByte(data[off:], '\n') + 1
	}
	return off
}

func rowsEqual(a, b LabelRow) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestLabelInterrupt: a cancelled context stops before the next row and
// writes nothing half; a second run completes the set.
func TestLabelInterrupt(t *testing.T) {
	dir := tinySet(t)
	out := filepath.Join(t.TempDir(), "labels.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	opt := cpuOptions()
	opt.Progress = func(p LabelProgress) {
		if p.Row != nil && p.Row.Mode == 2 {
			cancel()
		}
	}
	sum, err := Label(ctx, dir, out, opt)
	if !errors.Is(err, context.Canceled) || sum.Written != 2 {
		t.Fatalf("error %v, %d written", err, sum.Written)
	}
	opt.Progress = nil
	sum, err = Label(context.Background(), dir, out, opt)
	if err != nil || sum.Resumed != 2 || sum.Written != 18 {
		t.Fatalf("error %v, summary %+v", err, sum)
	}
	if rows, err := ReadLabels(out); err != nil || len(rows) != 20 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
}

// TestLabelPlainDir labels a directory without a manifest: the source is
// the file's name, tensors come in name order, --limit cuts the list.
func TestLabelPlainDir(t *testing.T) {
	src := tinySet(t)
	dir := t.TempDir()
	for _, name := range []string{"b.tns", "a.stb"} {
		x, err := formats.ReadFile(filepath.Join(src, "t1.stb"))
		if err != nil {
			t.Fatal(err)
		}
		if err := formats.WriteFile(filepath.Join(dir, name), x); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a tensor"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "labels.jsonl")
	opt := cpuOptions()
	opt.Ops = []hetero.Op{hetero.SpTTM}
	opt.Limit = 1
	if _, err := Label(context.Background(), dir, out, opt); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Tensor != "a.stb" || rows[0].Source != "a.stb" || rows[0].Generator != "" {
		t.Fatalf("%d rows, first %+v", len(rows), rows[0])
	}
	// Without the limit, b.tns: the same tensor (same fingerprint) under
	// another name is found done.
	opt.Limit = 0
	sum, err := Label(context.Background(), dir, out, opt)
	if err != nil || sum.Written != 0 || sum.Resumed != 6 {
		t.Fatalf("%v %+v", err, sum)
	}
	// A file that changed under its rows is not labelled again: it is
	// skipped and reported, and the other file still is.
	x, err := formats.ReadFile(filepath.Join(src, "t2.stb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := formats.WriteFile(filepath.Join(dir, "a.stb"), x); err != nil {
		t.Fatal(err)
	}
	opt.Ops = hetero.Ops
	sum, err = Label(context.Background(), dir, out, opt)
	if err != nil || len(sum.Failed) != 1 || !strings.Contains(sum.Failed[0], "now holds another tensor") || sum.Written != 3 {
		t.Fatalf("changed file: %v %+v", err, sum)
	}
}

// TestLabelSkipsBadTensors: a tensor that cannot be read is skipped with
// a warning and listed in the summary, and the others are labelled; five
// in a row stop the run.
func TestLabelSkipsBadTensors(t *testing.T) {
	src := tinySet(t)
	dir := t.TempDir()
	x, err := formats.ReadFile(filepath.Join(src, "t1.stb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := formats.WriteFile(filepath.Join(dir, "b-good.stb"), x); err != nil {
		t.Fatal(err)
	}
	bad := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("1 2 x 1.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad("a-bad.tns")
	bad("c-bad.tns")
	out := filepath.Join(dir, "labels.jsonl")
	opt := cpuOptions()
	opt.Ops = []hetero.Op{hetero.SpTTM}
	var warnings []string
	opt.Warn = func(w string) { warnings = append(warnings, w) }
	sum, err := Label(context.Background(), dir, out, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Failed) != 2 || !strings.Contains(sum.Failed[0], "a-bad.tns:1") || !strings.Contains(sum.Failed[1], "c-bad.tns:1") {
		t.Errorf("failed %q", sum.Failed)
	}
	if len(warnings) != 2 || !strings.HasSuffix(warnings[0], ": skipped") {
		t.Errorf("warnings %q", warnings)
	}
	if rows, err := ReadLabels(out); err != nil || len(rows) != 3 || rows[0].Tensor != "b-good.stb" {
		t.Errorf("%d rows (%v), want b-good.stb's 3", len(rows), err)
	}
	for _, name := range []string{"d-bad.tns", "e-bad.tns", "f-bad.tns", "g-bad.tns", "h-bad.tns"} {
		bad(name)
	}
	// b-good.stb is done; c to g fail in a row, and the run stops there.
	if _, err := Label(context.Background(), dir, out, opt); err == nil || !strings.Contains(err.Error(), "g-bad.tns:1") {
		t.Errorf("five bad tensors in a row: error %v", err)
	}

	// A failed tensor's work leaves the progress's total: after a bad
	// file and a good one, the last report is the whole work done.
	dir2 := t.TempDir()
	if err := formats.WriteFile(filepath.Join(dir2, "b-good.stb"), x); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "a-bad.tns"), []byte("1 2 x 1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var last LabelProgress
	opt.Progress = func(p LabelProgress) { last = p }
	if _, err := Label(context.Background(), dir2, filepath.Join(dir2, "l.jsonl"), opt); err != nil {
		t.Fatal(err)
	}
	if last.Tensor != "b-good.stb" || last.Work != last.TotalWork || last.Work == 0 {
		t.Errorf("last report %s: work %g of %g, want all of it", last.Tensor, last.Work, last.TotalWork)
	}
}

func TestLabelErrors(t *testing.T) {
	dir := t.TempDir()
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"file":"gone.stb"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "l.jsonl")
	cpu := hetero.NewCPU(1)
	for _, tc := range []struct {
		name, in string
		opt      LabelOptions
		want     string
	}{
		{"no dir", filepath.Join(empty, "nowhere"), LabelOptions{}, "no such file"},
		{"no tensors", empty, LabelOptions{}, "no manifest.jsonl and no tensor files"},
		{"bad manifest", dir, LabelOptions{}, "manifest.jsonl:1"},
		{"rank", empty, LabelOptions{Rank: -1}, "rank must be at least 1"},
		{"runs", empty, LabelOptions{Runs: -2}, "runs must be at least 1"},
		{"limit", empty, LabelOptions{Limit: -1}, "limit must be"},
		{"op twice", empty, LabelOptions{Ops: []hetero.Op{hetero.SpTTM, hetero.SpTTM}}, "op ttm given twice"},
		{"unknown op", empty, LabelOptions{Ops: []hetero.Op{7}}, "unknown op"},
		{"device twice", empty, LabelOptions{Devices: []hetero.Device{cpu, cpu}}, "device cpu given twice"},
	} {
		_, err := Label(context.Background(), tc.in, out, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line containing %q", tc.name, err, tc.want)
		}
	}
	// A gzip file cannot be appended to row by row: refused before any
	// measuring, and nothing is written.
	gz := out + ".gz"
	_, err := Label(context.Background(), empty, gz, LabelOptions{})
	if err == nil || !strings.Contains(err.Error(), gz+": a gzip file cannot be appended") || strings.Contains(err.Error(), "\n") {
		t.Errorf("gzip out: error %v", err)
	}
	if _, err := os.Stat(gz); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("gzip out: %s written (%v)", gz, err)
	}
}

// TestLabelOpenCL labels the set on opencl:0 (PoCL here) beside the CPU
// when SPARSETUNE_OPENCL_TESTS=1.
func TestLabelOpenCL(t *testing.T) {
	if os.Getenv("SPARSETUNE_OPENCL_TESTS") != "1" {
		t.Skip("SPARSETUNE_OPENCL_TESTS is not 1: skipping the OpenCL rows")
	}
	dir := tinySet(t)
	dev, err := hetero.Lookup("opencl:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "labels.jsonl")
	opt := cpuOptions()
	opt.Devices = append(opt.Devices, dev)
	opt.Limit = 2
	if _, err := Label(context.Background(), dir, out, opt); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*6*2 {
		t.Fatalf("%d rows, want 24", len(rows))
	}
	checkRows(t, out, rows, opt)
	var cl int
	for _, r := range rows {
		if r.Device == "opencl:0" {
			cl++
			if r.DeviceClass != dev.Info().Class() || !strings.HasPrefix(r.DeviceClass, "opencl-") || r.TransferSeconds == nil {
				t.Errorf("opencl row: class %s transfers %v", r.DeviceClass, r.TransferSeconds)
			}
		}
	}
	if cl != 12 {
		t.Errorf("%d opencl rows, want 12", cl)
	}
}

func TestRunsRule(t *testing.T) {
	for _, tc := range []struct {
		runs    int
		budget  time.Duration
		minTime time.Duration
		warmup  time.Duration
		want    int
	}{
		{5, 2 * time.Second, -1, time.Millisecond, 5},
		{5, 2 * time.Second, -1, 400 * time.Millisecond, 5},
		{5, 2 * time.Second, -1, 500 * time.Millisecond, 4},
		{5, 2 * time.Second, -1, time.Second, 2},
		{5, 2 * time.Second, -1, 3 * time.Second, 1},
		{5, -1, -1, 3 * time.Second, 5},
		{1, 2 * time.Second, -1, time.Microsecond, 1},
		{5, 2 * time.Second, -1, 0, 5},
		// Short kernels get runs adding up to the least time, up to MaxRuns.
		{5, 2 * time.Second, 20 * time.Millisecond, time.Millisecond, 20},
		{5, 2 * time.Second, 20 * time.Millisecond, 3 * time.Millisecond, 7},
		{5, 2 * time.Second, 20 * time.Millisecond, 4 * time.Millisecond, 5},
		{5, 2 * time.Second, 20 * time.Millisecond, 10 * time.Millisecond, 5},
		{5, 2 * time.Second, 20 * time.Millisecond, time.Microsecond, MaxRuns},
		{1, 2 * time.Second, 20 * time.Millisecond, 5 * time.Millisecond, 4},
		{5, 2 * time.Second, 20 * time.Millisecond, time.Second, 2},
		{5, -1, 20 * time.Millisecond, 10 * time.Microsecond, MaxRuns},
		// The budget still caps a least time longer than itself.
		{5, 10 * time.Millisecond, 20 * time.Millisecond, time.Millisecond, 10},
	} {
		opt := LabelOptions{Runs: tc.runs, RunBudget: tc.budget, MinTime: tc.minTime}
		if got := opt.runs(tc.warmup); got != tc.want {
			t.Errorf("runs %d budget %v least time %v warm-up %v: %d runs, want %d", tc.runs, tc.budget, tc.minTime, tc.warmup, got, tc.want)
		}
	}
}

// TestLabelParts: workers sharing one input (the ranks of a distributed
// run) label disjoint tensors into their part files, a rerun does nothing
// twice, and MergeParts gives the rows of a single run, once each, even
// when a merge was interrupted.
func TestLabelParts(t *testing.T) {
	dir := tinySet(t)
	opt := cpuOptions()
	opt.Ops = []hetero.Op{hetero.MTTKRP}
	single := filepath.Join(t.TempDir(), "single.jsonl")
	if _, err := Label(context.Background(), dir, single, opt); err != nil {
		t.Fatal(err)
	}
	want, err := ReadLabels(single)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "labels.jsonl")
	seen := map[string]int{}
	for part := range 2 {
		o := opt
		o.Part, o.Parts = part, 2
		sum, err := Label(context.Background(), dir, out, o)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := ReadLabels(PartPath(out, part))
		if err != nil {
			t.Fatal(err)
		}
		if sum.Written != len(rows) || len(rows) == 0 {
			t.Errorf("part %d wrote %d rows, its file holds %d", part, sum.Written, len(rows))
		}
		for _, r := range rows {
			seen[r.Tensor] |= 1 << part
		}
		// A rerun of the worker finds its rows done.
		if sum, err := Label(context.Background(), dir, out, o); err != nil || sum.Written != 0 {
			t.Errorf("part %d rerun: wrote %v rows, %v", part, sum, err)
		}
	}
	for tensor, parts := range seen {
		if parts != 1 && parts != 2 {
			t.Errorf("tensor %s labelled by both workers", tensor)
		}
	}
	// An interrupted merge: part 0 already appended to out, its file
	// still there. The next merge adds only the missing rows.
	p0, _ := os.ReadFile(PartPath(out, 0))
	if err := os.WriteFile(out, p0, 0o644); err != nil {
		t.Fatal(err)
	}
	added, err := MergeParts(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || added != len(want)-bytes.Count(p0, []byte{'\n'}) {
		t.Errorf("merged %d rows (added %d), a single run has %d", len(got), added, len(want))
	}
	keys := map[labelKey]bool{}
	for i := range got {
		keys[got[i].key()] = true
	}
	for i := range want {
		if !keys[want[i].key()] {
			t.Errorf("row %s %s mode %d missing after the merge", want[i].Tensor, want[i].Op, want[i].Mode)
		}
	}
	if files, _ := partFiles(out); len(files) != 0 {
		t.Errorf("part files left after the merge: %v", files)
	}
	if added, err := MergeParts(out); added != 0 || err != nil {
		t.Errorf("a second merge added %d rows, %v", added, err)
	}
}
