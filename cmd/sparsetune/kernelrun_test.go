package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/engine"
	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/npy"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/model"
)

// kernelEnv points the profile and the decision cache at a temporary
// directory and stores a made-up profile for the devices, so that the
// split runs without calibrating. It returns the --devices value: the CPU
// and, when there is one, the first OpenCL device.
func kernelEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	names := []string{"cpu"}
	for _, b := range hetero.Backends() {
		if b.Name == "opencl" && len(b.Devices) > 0 {
			names = append(names, b.Devices[0].Name)
		} else if b.Name == "opencl" && os.Getenv("SPARSETUNE_OPENCL_TESTS") == "1" {
			t.Fatalf("SPARSETUNE_OPENCL_TESTS=1 but the opencl backend has no device: %s", b.Missing)
		}
	}
	p := &hetero.Profile{}
	for _, name := range names {
		d, err := hetero.Lookup(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		info := d.Info()
		dp := hetero.DeviceProfile{Name: info.Name, Kind: info.Kind, Model: info.Model, FMAGFlops: 100, MemoryGBs: 20, LinkGBs: 20,
			Ops: map[string]hetero.OpProfile{
				"ttm":    {Lambda: 0.1, Mu: 1.5, BytesPerNNZ: 16, Format: "csr", Rank: 16},
				"mttkrp": {Lambda: 0.1, Mu: 3, BytesPerNNZ: 16, Format: "coo", Rank: 16},
			},
			Calibration: hetero.CalibrationInfo{ComputeUnits: info.ComputeUnits, Driver: info.Driver, InnerLoops: kernels.InnerLoops()}}
		if info.Kind == hetero.CPU {
			dp.LinkGBs = 0
		}
		p.Set(dp)
	}
	if _, err := hetero.SaveProfile(p, ""); err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, ",")
}

// writeKernelTensor writes a random tensor no test has seen to dir.
func writeKernelTensor(t *testing.T, dir string, dims []int, nnz int, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	x, err := formats.NewCOO(dims, nnz)
	if err != nil {
		t.Fatal(err)
	}
	idx := make([]uint32, len(dims))
	for range nnz {
		for m, d := range dims {
			u := rng.Float64()
			idx[m] = uint32(float64(d) * u * u)
		}
		x.Append(idx, float32(rng.IntN(9)+1))
	}
	// Keep the largest index of each mode, so .tns gives back the dims.
	for m, d := range dims {
		idx[m] = uint32(d - 1)
	}
	x.Append(idx, 1)
	x.Sort()
	if _, err := x.Dedup(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x.tns")
	if err := formats.WriteFile(path, x); err != nil {
		t.Fatal(err)
	}
	return path
}

func kernelJSON(t *testing.T, args ...string) kernelReport {
	t.Helper()
	out, stderr, err := run(t, append(args, "--json")...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stderr)
	}
	var rep kernelReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return rep
}

// semiSparseValues reads a TTM --out file as a map from coordinate to
// value.
func semiSparseValues(t *testing.T, path string) map[string]float32 {
	t.Helper()
	y, err := formats.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]float32, y.NNZ())
	idx := make([]uint32, y.Order())
	for k := range y.NNZ() {
		m[fmtCoord(y.Coord(k, idx))] = y.Vals[k]
	}
	return m
}

func fmtCoord(idx []uint32) string {
	var b strings.Builder
	for _, i := range idx {
		b.WriteString(strconv.FormatUint(uint64(i), 10))
		b.WriteByte(' ')
	}
	return b.String()
}

// relDiff is ‖a − b‖ / ‖b‖ over b's keys; a key missing from a counts as 0.
func relDiff(a, b map[string]float32) float64 {
	var num, den float64
	for k, w := range b {
		d := float64(a[k]) - float64(w)
		num += d * d
		den += float64(w) * float64(w)
	}
	if len(a) != len(b) {
		return math.Inf(1)
	}
	return math.Sqrt(num / max(den, 1e-300))
}

// TestTTMEverySplit: on an unseen tensor every split gives the --split cpu
// result within 1e-4, through --out, and the report adds up.
func TestTTMEverySplit(t *testing.T) {
	devices := kernelEnv(t)
	dir := t.TempDir()
	in := writeKernelTensor(t, dir, []int{40, 30, 20, 10}, 4000, 1)
	for _, mode := range []string{"1", "3"} {
		want := filepath.Join(dir, "want.tns")
		kernelJSON(t, "ttm", in, "--mode", mode, "--rank", "6", "--devices", "cpu", "--out", want)
		ref := semiSparseValues(t, want)
		for _, split := range hetero.Strategies() {
			out := filepath.Join(dir, "y-"+split+".tns")
			rep := kernelJSON(t, "ttm", in, "--mode", mode, "--rank", "6", "--devices", devices, "--split", split, "--out", out)
			if d := relDiff(semiSparseValues(t, out), ref); d > 1e-4 {
				t.Errorf("mode %s split %s: relative difference %.2e from --split cpu", mode, split, d)
			}
			checkKernelReport(t, rep, devices, split)
		}
	}
}

// TestMTTKRPEverySplit does the same for MTTKRP through .npy files, and
// checks the .mtx array holds the same matrix.
func TestMTTKRPEverySplit(t *testing.T) {
	devices := kernelEnv(t)
	dir := t.TempDir()
	in := writeKernelTensor(t, dir, []int{30, 20, 25}, 3000, 2)
	for _, mode := range []string{"1", "2", "3"} {
		want := filepath.Join(dir, "want.npy")
		kernelJSON(t, "mttkrp", in, "--mode", mode, "--rank", "5", "--devices", "cpu", "--out", want)
		_, ref, err := npy.ReadFile(want)
		if err != nil {
			t.Fatal(err)
		}
		for _, split := range hetero.Strategies() {
			out := filepath.Join(dir, "m-"+split+".npy")
			rep := kernelJSON(t, "mttkrp", in, "--mode", mode, "--rank", "5", "--devices", devices, "--split", split, "--out", out)
			shape, got, err := npy.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(shape) != 2 || shape[1] != 5 || len(got) != len(ref) {
				t.Fatalf("mode %s split %s: shape %v", mode, split, shape)
			}
			if d := relDiffSlices(got, ref); d > 1e-4 {
				t.Errorf("mode %s split %s: relative difference %.2e from --split cpu", mode, split, d)
			}
			checkKernelReport(t, rep, devices, split)
		}
	}
	// The MatrixMarket array: header, size, then the values by column.
	mtx := filepath.Join(dir, "m.mtx")
	kernelJSON(t, "mttkrp", in, "--mode", "2", "--rank", "3", "--devices", "cpu", "--out", mtx)
	npyOut := filepath.Join(dir, "m.npy")
	kernelJSON(t, "mttkrp", in, "--mode", "2", "--rank", "3", "--devices", "cpu", "--out", npyOut)
	_, m, err := npy.ReadFile(npyOut)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(mtx)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "%%MatrixMarket matrix array real general" || lines[2] != "20 3" || len(lines) != 3+20*3 {
		t.Fatalf("mtx header %q, size %q, %d lines", lines[0], lines[2], len(lines))
	}
	for k, line := range lines[3:] {
		v, err := strconv.ParseFloat(line, 32)
		i, j := k%20, k/20
		if err != nil || float32(v) != m[i*3+j] {
			t.Fatalf("mtx value %d (%d,%d) = %q, npy %v", k, i, j, line, m[i*3+j])
		}
	}
}

func relDiffSlices(a, b []float32) float64 {
	var num, den float64
	for i := range b {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / max(den, 1e-300))
}

func checkKernelReport(t *testing.T, rep kernelReport, devices, split string) {
	t.Helper()
	want := split
	if !strings.Contains(devices, ",") {
		want = "cpu" // no accelerator: everything on the CPU
	}
	// The CPU's format is predicted by the default model, except in a
	// single MTTKRP, which runs the CPU's share in place (one-run); an
	// accelerator's too when its class has a head (PoCL's opencl-cpu has
	// one), else it is measured once, then cached.
	cpuSource := "predicted"
	if rep.Op == "mttkrp" && rep.Repeat <= 1 {
		cpuSource = "one-run"
	}
	// Under acc the CPU, dealt nothing, makes no choice.
	sources := strings.Split(rep.FormatSource, "+")
	sourcesOK := true
	if want != "acc" {
		sourcesOK, sources = sources[0] == cpuSource, sources[1:]
	}
	for _, src := range sources {
		sourcesOK = sourcesOK && (src == "predicted" || src == "measured" || src == "cached")
	}
	if rep.Split != want || !sourcesOK || rep.Seed != 1 {
		t.Errorf("split %s: report split %q, format source %q, seed %d", split, rep.Split, rep.FormatSource, rep.Seed)
	}
	if len(rep.Devices) != len(strings.Split(devices, ",")) {
		t.Fatalf("split %s: %d device reports for %s", split, len(rep.Devices), devices)
	}
	share := 0.0
	for _, d := range rep.Devices {
		share += d.NNZShare
		// A device dealt nothing may decide no format (engine: the
		// choice is made only if it must take over).
		if d.Format == "" && d.NNZShare > 0 || (d.FormatSource == "") != (d.Format == "") || d.Failed != "" {
			t.Errorf("split %s: %+v", split, d)
		}
	}
	if math.Abs(share-1) > 1e-9 || rep.Seconds <= 0 || rep.GFlops <= 0 || rep.Imbalance < 0 || rep.Imbalance > 1 {
		t.Errorf("split %s: shares sum to %v, seconds %v, gflops %v, imbalance %v", split, share, rep.Seconds, rep.GFlops, rep.Imbalance)
	}
}

// TestKernelSampleTable runs both commands on the embedded sample (the
// README's main job) and checks the table's header and totals line.
func TestKernelSampleTable(t *testing.T) {
	devices := kernelEnv(t)
	for _, op := range []string{"ttm", "mttkrp"} {
		out, stderr, err := run(t, op, "--devices", devices)
		if err != nil {
			t.Fatalf("%s: %v\n%s", op, err, stderr)
		}
		if !strings.Contains(stderr, "embedded sample") {
			t.Errorf("%s: stderr %q does not name the sample", op, stderr)
		}
		for _, want := range []string{op + " of sample:", "device", "nnz share", "kernel ms", "imbalance", "GFLOP/s", "cpu "} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", op, want, out)
			}
		}
	}
}

// --split acc without an accelerator runs on the CPU, and says so.
func TestSplitAccWithoutAccelerator(t *testing.T) {
	kernelEnv(t)
	_, stderr, err := run(t, "mttkrp", "--devices", "cpu", "--split", "acc")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "warning: --split acc: no accelerator among the devices: the CPU runs it all") {
		t.Errorf("stderr %q", stderr)
	}
}

// A stored profile that does not read is measured again, and the run says
// it replaces it.
func TestKernelReplacesBadProfile(t *testing.T) {
	devices := kernelEnv(t)
	if !strings.Contains(devices, ",") {
		t.Skip("no accelerator: the split needs no profile")
	}
	path, err := hetero.ProfilePath()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := run(t, "ttm", "--devices", devices)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "replacing the stored profile: profile "+path+": invalid character") {
		t.Errorf("stderr %q", stderr)
	}
}

// TestKernelBadInput: each mistake is one error naming the flag, and
// nothing is written.
func TestKernelBadInput(t *testing.T) {
	kernelEnv(t)
	dir := t.TempDir()
	in := writeKernelTensor(t, dir, []int{5, 6, 7}, 50, 3)
	out := filepath.Join(dir, "out.npy")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ttm", in, "--mode", "4"}, "--mode: " + in + " has modes 1 to 3, found 4"},
		{[]string{"ttm", in, "--mode", "0"}, "--mode"},
		{[]string{"ttm", in, "--rank", "0"}, "--rank"},
		{[]string{"ttm", in, "--format", "csf"}, "--format"},
		{[]string{"mttkrp", in, "--format", "csr"}, "--format"},
		{[]string{"ttm", in, "--split", "half"}, "--split"},
		{[]string{"ttm", in, "--devices", "bogus:0"}, "--devices"},
		{[]string{"ttm", in, "--out", filepath.Join(dir, "y.mtx")}, "--out"},
		{[]string{"mttkrp", in, "--out", filepath.Join(dir, "m.txt")}, "--out"},
		{[]string{"ttm", filepath.Join(dir, "missing.tns")}, "missing.tns"},
	} {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(oneLine(err), "\n") {
			t.Errorf("%v: err = %v, want one line containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written", out)
	}
}

// runInterrupted runs the command of args as a Ctrl-C before it starts
// leaves it: with its context cancelled.
func runInterrupted(args ...string) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := newRootCmd()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// TestKernelInterrupted: a cancelled run (Ctrl-C) reports it and leaves
// no output file, temporary or not.
func TestKernelInterrupted(t *testing.T) {
	devices := kernelEnv(t)
	dir := t.TempDir()
	in := writeKernelTensor(t, dir, []int{20, 20, 20}, 500, 4)
	out := filepath.Join(dir, "out", "m.npy")
	if err := os.Mkdir(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	err := runInterrupted("mttkrp", in, "--devices", devices, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "interrupted, nothing written") {
		t.Errorf("err = %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
		t.Errorf("files left: %v", entries)
	}
}

// TestDefaultDevicesLeaveOutHostOpenCL: --devices all (the default) leaves
// out an OpenCL device on the host's own cores (PoCL), saying so; naming
// it uses it.
func TestDefaultDevicesLeaveOutHostOpenCL(t *testing.T) {
	devices := kernelEnv(t)
	name, hostCL := "", false
	for _, n := range strings.Split(devices, ",") {
		if d, err := hetero.Lookup(n, 0); err == nil && d.Info().Kind != hetero.CPU && d.Info().Type == "cpu" {
			name, hostCL = n, true
		}
	}
	if !hostCL {
		t.Skip("no OpenCL device on the host's cores")
	}
	out, stderr, err := run(t, "ttm", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct{ Devices []struct{ Device string } }
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Devices) != 1 || rep.Devices[0].Device != "cpu" || !strings.Contains(stderr, name+" ") || !strings.Contains(stderr, "left out of --devices all") {
		t.Errorf("default devices: %+v; stderr %q", rep.Devices, stderr)
	}
	out, _, err = run(t, "ttm", "--devices", "cpu,"+name, "--json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Devices) != 2 {
		t.Errorf("named: %+v, %v", rep.Devices, err)
	}
}

// TestKernelVerify: --verify holds ttm and mttkrp, on every device and a
// split that deals both, to the definition on a real tensor, in the JSON
// and the table; an error above the tolerance is refused with the file
// and the devices that computed the result.
func TestKernelVerify(t *testing.T) {
	in := filepath.Join(dataDir, "tensors", "kg_wn18rr.tns")
	if _, err := os.Stat(in); err != nil {
		t.Skipf("real data not available (%v)", err)
	}
	devices := kernelEnv(t)
	for _, op := range []string{"ttm", "mttkrp"} {
		for _, mode := range []string{"1", "2"} {
			rep := kernelJSON(t, op, in, "--mode", mode, "--devices", devices, "--split", "dynamic", "--verify")
			if rep.VerifyError == nil || !(*rep.VerifyError >= 0 && *rep.VerifyError <= verifyTolerance) || rep.VerifyTolerance != verifyTolerance {
				t.Errorf("%s mode %s: verify_error %v, tolerance %g", op, mode, rep.VerifyError, rep.VerifyTolerance)
			}
		}
		out, _, err := run(t, op, in, "--devices", devices, "--repeat", "2", "--verify")
		if err != nil || !strings.Contains(out, "verified against the definition (float64): relative error ") || !strings.Contains(out, "within the tolerance 1e-04") {
			t.Errorf("%s --repeat 2 --verify: %v\n%s", op, err, out)
		}
	}
	if rep := kernelJSON(t, "mttkrp", in, "--devices", "cpu"); rep.VerifyError != nil {
		t.Errorf("verify_error %v without --verify", *rep.VerifyError)
	}

	// A result off the definition (engine's TestResultVerify makes one)
	// is refused with the file and the devices that computed it.
	e := 0.5
	rep := kernelReport{File: in, VerifyError: &e, VerifyTolerance: verifyTolerance,
		Devices: []engine.DeviceReport{{Device: "cpu", Format: "csf", NNZShare: 0.4}, {Device: "opencl:0", Format: "coo", NNZShare: 0.6}, {Device: "cuda:0"}}}
	err := rep.verifyFailure()
	if err == nil || !strings.Contains(err.Error(), in+": --verify: the result differs from the definition") || !strings.Contains(err.Error(), "computed on cpu (csf), opencl:0 (coo)") {
		t.Errorf("verifyFailure: %v", err)
	}
	nan := math.NaN()
	rep.VerifyError = &nan
	if rep.verifyFailure() == nil {
		t.Error("verifyFailure accepted a NaN error")
	}
	ok := verifyTolerance / 2
	rep.VerifyError = &ok
	if err := rep.verifyFailure(); err != nil {
		t.Errorf("verifyFailure refused %g: %v", ok, err)
	}
}

// TestLazyPredictor: the default predictor is loaded by the first
// prediction, which a single MTTKRP on the CPU never asks for, and then
// answers as the loaded one does.
func TestLazyPredictor(t *testing.T) {
	loads := 0
	lp := &lazyPredictor{load: func() (model.SummaryPredictor, string) { loads++; return model.RulePredictor{}, "" }}
	e, err := engine.New([]hetero.Device{hetero.NewCPU(0)}, engine.Options{Predictor: lp})
	if err != nil {
		t.Fatal(err)
	}
	x, err := formats.NewCOO([]int{4, 5, 6}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 40 {
		x.Append([]uint32{uint32(k % 4), uint32(k % 5), uint32(k % 6)}, float32(k+1))
	}
	factors := []*kernels.Matrix{kernels.NewMatrix(4, 2), kernels.NewMatrix(5, 2), kernels.NewMatrix(6, 2)}
	if _, err := e.MTTKRP(context.Background(), x, 1, factors); err != nil {
		t.Fatal(err)
	}
	if loads != 0 {
		t.Fatalf("a single MTTKRP loaded the predictor %d times", loads)
	}
	p, err := e.PlanMTTKRP(context.Background(), x, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want, _ := model.RulePredictor{}.Predict(x, hetero.MTTKRP, 1, hetero.CPU)
	if loads != 1 || p.Formats()[0] != want.Formats[0].Format {
		t.Errorf("a plan: %d loads, format %s; want 1 and the rule's %s", loads, p.Formats()[0], want.Formats[0].Format)
	}
	s, err := features.Summarize(x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lp.PredictSummary(s, hetero.SpTTM, 0, hetero.CPU); err != nil || loads != 1 {
		t.Errorf("a second prediction: %v, %d loads", err, loads)
	}
}

// TestPreload: a predictor loaded in the background answers as one
// loaded in the foreground, and its note (a model that could not be
// loaded) is printed by the first prediction, once, never by the
// background load (run with -race: the caller's stderr is not shared).
func TestPreload(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	x, err := formats.NewCOO([]int{300, 200, 100}, 50_000)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for range 50_000 {
		x.Append([]uint32{uint32(rng.IntN(300)), uint32(rng.IntN(200)), uint32(rng.IntN(100))}, 1)
	}
	s, err := features.Summarize(x)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.EmbeddedModel(hetero.MTTKRP)
	if err != nil {
		t.Fatal(err)
	}
	cpu := hetero.NewCPU(0).Info()
	want, err := model.GCNPredictor{Model: m, Rank: 16}.PredictDevice(s, hetero.MTTKRP, 0, cpu)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	lp := defaultPredictor(&stderr, hetero.MTTKRP)
	lp.preload(16)
	got, err := model.PredictOn(lp.AtRank(16), s, hetero.MTTKRP, 0, cpu)
	if err != nil || !reflect.DeepEqual(got.Formats, want.Formats) || got.Head != want.Head {
		t.Errorf("preloaded: %v, %v by %s; loaded here: %v by %s", err, got.Formats, got.Head, want.Formats, want.Head)
	}

	loaded := make(chan struct{})
	noted := &lazyPredictor{stderr: &stderr, load: func() (model.SummaryPredictor, string) {
		defer close(loaded)
		return model.RulePredictor{}, "note: no model"
	}}
	noted.preload(16)
	<-loaded
	if stderr.Len() != 0 {
		t.Errorf("the background load wrote %q", stderr.String())
	}
	for range 2 {
		if _, err := noted.PredictSummary(s, hetero.MTTKRP, 0, hetero.CPU); err != nil {
			t.Fatal(err)
		}
	}
	if stderr.String() != "note: no model\n" {
		t.Errorf("stderr %q, want the note once", stderr.String())
	}
}
