package hetero

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/kernels"
)

// tempConfig points os.UserConfigDir (XDG_CONFIG_HOME first) at a
// temporary directory, so no test touches the user's profile, and returns
// where the profile goes.
func tempConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	path, err := ProfilePath()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "config", "sparsetune", "profile.json"); path != want {
		t.Fatalf("profile path %s, want %s", path, want)
	}
	return path
}

func TestProfileSaveLoad(t *testing.T) {
	path := tempConfig(t)
	if _, err := LoadProfile(""); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing profile: %v", err)
	}
	p := &Profile{}
	p.Set(cpuProf)
	p.Set(fastAcc)
	p.Set(slowLink) // replaces fastAcc: same name
	if len(p.Devices) != 2 {
		t.Fatalf("%d devices", len(p.Devices))
	}
	got, err := SaveProfile(p, "")
	if err != nil || got != path {
		t.Fatalf("saved to %s (%v), want %s", got, err, path)
	}
	q, err := LoadProfile("")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("loaded\n%+v\nsaved\n%+v", q, p)
	}
	if d, ok := q.Device("acc:0"); !ok || d.LinkGBs != slowLink.LinkGBs || d.Kind != GPU {
		t.Errorf("acc:0: %+v %v", d, ok)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	for name, content := range map[string]string{
		"version": `{"version": 99, "devices": []}`,
		"json":    `{"version": 1, "devices": [`,
		"kind":    `{"version": 1, "devices": [{"name": "cpu", "kind": "tpu"}]}`,
		"name":    `{"version": 1, "devices": [{"kind": "cpu"}]}`,
	} {
		bad := filepath.Join(t.TempDir(), "p.json")
		os.WriteFile(bad, []byte(content), 0o644)
		_, err := LoadProfile(bad)
		if err == nil || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func TestApplyOverrides(t *testing.T) {
	p := &Profile{}
	p.Set(cpuProf)
	shared := p.Devices[0].Ops
	err := p.ApplyOverrides(map[string]any{
		"profile.cpu.fma_gflops":    250,
		"profile.cpu.ttm.lambda":    "0.5",
		"profile.opencl_0.link_gbs": 12.5,
		"threads":                   4, // not ours
		"profile": map[string]any{ // nested, as viper's AllSettings
			"cpu":      map[string]any{"mttkrp": map[string]any{"mu": 3.5}},
			"opencl:0": map[string]any{"memory_gbs": 100},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := p.Device("cpu")
	if c.FMAGFlops != 250 || c.Ops["ttm"].Lambda != 0.5 || c.Ops["mttkrp"].Mu != 3.5 || c.MemoryGBs != cpuProf.MemoryGBs {
		t.Errorf("cpu: %+v", c)
	}
	if shared["ttm"].Lambda != cpuProf.Ops["ttm"].Lambda {
		t.Error("an override wrote into the caller's map")
	}
	want := []string{"fma_gflops", "mttkrp.mu", "ttm.lambda"}
	if !slices.Equal(c.Overridden, want) {
		t.Errorf("overridden %v, want %v", c.Overridden, want)
	}
	g, ok := p.Device("opencl:0")
	if !ok || g.LinkGBs != 12.5 || g.MemoryGBs != 100 || g.Kind != GPU {
		t.Errorf("opencl:0: %+v", g)
	}
	// A device made of overrides alone is not usable until complete.
	if _, err := g.Cost(SpTTM); err == nil || !strings.Contains(err.Error(), "fma_gflops") {
		t.Errorf("incomplete device: %v", err)
	}

	for _, tc := range []struct {
		key  string
		val  any
		want string
	}{
		{"profile.cpu.speed", 1, `config profile.cpu.speed: unknown field "speed"`},
		{"profile.cpu.ttm.lambda", 1.5, "config profile.cpu.ttm.lambda: 1.5 is out of range, expected (0, 1]"},
		{"profile.cpu.fma_gflops", "fast", `config profile.cpu.fma_gflops: "fast" is not a number`},
		{"profile.cpu.fma_gflops", 0, "config profile.cpu.fma_gflops: 0 is out of range"},
		{"profile.cpu.memory_gbs", []int{1}, "is not a number"},
		{"profile.cpu", 1, "config profile.cpu: expected profile.DEVICE.FIELD"},
	} {
		err := (&Profile{}).ApplyOverrides(map[string]any{tc.key: tc.val})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%v: error %v, want %q", tc.key, tc.val, err, tc.want)
		}
	}
	// link_gbs may be 0: no transfer.
	if err := p.ApplyOverrides(map[string]any{"profile.opencl:0.link_gbs": 0}); err != nil {
		t.Error(err)
	}
}

func TestOpProfileAtRank(t *testing.T) {
	o := OpProfile{Lambda: 0.5, Mu: 2, BytesPerNNZ: 16, Rank: 16, Runs: []OpRun{{}}}
	r := o.AtRank(32)
	if r.Mu != 4 || r.Rank != 32 || r.Lambda != 0.5 || r.BytesPerNNZ != 16 || r.Runs != nil {
		t.Errorf("%+v", r)
	}
	if o.Mu != 2 {
		t.Error("AtRank changed its receiver")
	}
}

func TestDeriveRun(t *testing.T) {
	// P 100 GFLOP/s, B 10 GB/s: 1e9 bytes take 0.1 s to stream; 2e9 flops
	// in 0.1 s more at λ = 0.2.
	r := deriveRun("csr", 0.2, 2e9, 1e9, 100, 10)
	if math.Abs(r.Lambda-0.2) > 1e-12 || r.Mu != 2 || r.Clamped {
		t.Errorf("%+v", r)
	}
	// The model with the derived λ gives back the measured time.
	if model := r.Flops/(r.Lambda*100e9) + r.Bytes/10e9; math.Abs(model-0.2) > 1e-12 {
		t.Errorf("model time %v", model)
	}
	// Faster than streaming the bytes: λ = 1, marked.
	for _, secs := range []float64{0.05, 0.1, 0.12} {
		if r := deriveRun("csr", secs, 2e9, 1e9, 100, 10); r.Lambda != 1 || !r.Clamped {
			t.Errorf("%v s: %+v", secs, r)
		}
	}
}

func TestFMALoop(t *testing.T) {
	// x ← x·0.5 + 0.5 converges to 1 from any start.
	if v := fmaLoop(200, 0.5, 0.5); math.Abs(float64(v)-cpuFMAChains) > 1e-3 {
		t.Errorf("fmaLoop = %v, want %d", v, cpuFMAChains)
	}
	if v := fmaLoop(0, 0.5, 0.5); math.Abs(float64(v)-6.6) > 1e-4 {
		t.Errorf("no rounds: %v, want the sum of the starts, 6.6", v)
	}
	for loops, lanes := range map[string]int{"avx512+pext": 16, "avx512": 16, "avx2": 8, "avx2+pext": 8, "scalar": 1} {
		if got := vectorLanes(loops); got != lanes {
			t.Errorf("%s: %d lanes", loops, got)
		}
	}
}

// checkProfile checks a calibrated device profile for sanity: positive,
// finite numbers, λ in (0, 1], the runs and the record of the
// calibration.
func checkProfile(t *testing.T, d DeviceProfile, info Info) {
	t.Helper()
	finite := func(what string, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s: %s = %v", d.Name, what, v)
		}
	}
	finite("fma_gflops", d.FMAGFlops)
	finite("memory_gbs", d.MemoryGBs)
	if info.Kind == CPU && d.LinkGBs != 0 {
		t.Errorf("cpu: link %v, want 0", d.LinkGBs)
	}
	if info.Kind == GPU {
		finite("link_gbs", d.LinkGBs)
	}
	for _, op := range Ops {
		o, ok := d.Op(op)
		if !ok {
			t.Fatalf("%s: no %s", d.Name, op)
		}
		if !(o.Lambda > 0 && o.Lambda <= 1) {
			t.Errorf("%s %s: λ %v", d.Name, op, o.Lambda)
		}
		finite(op.String()+".mu", o.Mu)
		finite(op.String()+".bytes_per_nnz", o.BytesPerNNZ)
		if len(o.Runs) != 2 || !slices.ContainsFunc(o.Runs, func(r OpRun) bool { return r.Format == o.Format && r.Lambda == o.Lambda }) {
			t.Errorf("%s %s: runs %+v, format %s", d.Name, op, o.Runs, o.Format)
		}
		for _, r := range o.Runs {
			if r.Skipped == "" && (!(r.Seconds > 0) || !(r.Lambda > 0 && r.Lambda <= 1) || math.Abs(r.Mu-r.Flops/r.Bytes) > 1e-9*r.Mu) {
				t.Errorf("%s %s %s: %+v", d.Name, op, r.Format, r)
			}
		}
		if o.Rank != DefaultCalibrationRank {
			t.Errorf("%s %s: rank %d", d.Name, op, o.Rank)
		}
		if _, err := d.Cost(op); err != nil {
			t.Error(err)
		}
	}
	c := d.Calibration
	if c.Time.IsZero() || time.Since(c.Time) > time.Hour || !(c.Seconds > 0) || !c.Quick || c.InnerLoops != kernels.InnerLoops() ||
		c.FMAMethod == "" || c.MemoryMethod == "" || c.LinkMethod == "" || !strings.Contains(c.Tensor, "PCG seed 1") || c.Iters != 3 {
		t.Errorf("%s: calibration record %+v", d.Name, c)
	}
	if !d.Matches(info) || d.Model != info.Model || d.Kind != info.Kind {
		t.Errorf("%s: profile does not match the device it measured", d.Name)
	}
}

func TestCalibrateCPU(t *testing.T) {
	cpu := NewCPU(0)
	var steps []string
	p, err := Calibrate(context.Background(), []Device{cpu}, CalibrateOptions{Quick: true,
		Progress: func(dev, step string) { steps = append(steps, dev+" "+step) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Devices) != 1 || p.Version != ProfileVersion {
		t.Fatalf("%+v", p)
	}
	checkProfile(t, p.Devices[0], cpu.Info())
	if !slices.Contains(steps, "cpu mttkrp csf") || steps[0] != "cpu peak multiply-add rate" {
		t.Errorf("progress %v", steps)
	}
	if !strings.Contains(p.Devices[0].Calibration.FMAMethod, "lanes of the "+kernels.InnerLoops()) {
		t.Errorf("fma method %q", p.Devices[0].Calibration.FMAMethod)
	}
	// The calibrated CPU and an accelerator built from it split work.
	acc := p.Devices[0]
	acc.Name, acc.LinkGBs = "acc:0", 10
	s, err := MapSlices(SplitPeak, skewedSlices(100, 1), p.Devices[0], acc, MTTKRP, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.AccShare <= 0 || s.AccShare >= 0.5 {
		t.Errorf("a copy of the CPU behind a link gets %v", s.AccShare)
	}
}

type fakeDevice struct{ Device }

func (fakeDevice) Info() Info { return Info{Name: "fake:0"} }

func TestCalibrateErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		devs []Device
		opts CalibrateOptions
		want string
	}{
		{context.Background(), nil, CalibrateOptions{}, "calibrate: no devices"},
		{context.Background(), []Device{fakeDevice{}}, CalibrateOptions{}, "calibrate fake:0: not a device this package can measure"},
		{context.Background(), []Device{NewCPU(1)}, CalibrateOptions{Rank: -1}, "rank must be at least 1"},
		{context.Background(), []Device{NewCPU(1)}, CalibrateOptions{Iters: -2}, "iters must be at least 1"},
		{ctx, []Device{NewCPU(1)}, CalibrateOptions{Quick: true}, "calibrate cpu: peak multiply-add rate: context canceled"},
	} {
		_, err := Calibrate(tc.ctx, tc.devs, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestProfileFor checks that a stored profile is used as it is, that a
// stale device is measured again and the others kept, and that without
// calibrateIfMissing a missing device is an error.
func TestProfileFor(t *testing.T) {
	tempConfig(t)
	cpu := NewCPU(0)
	if _, err := ProfileFor([]Device{cpu}, false); err == nil || err.Error() != "no calibrated profile for cpu (run sparsetune calibrate)" {
		t.Fatalf("error %v", err)
	}
	// A stored CPU profile that matches, marked by its peak, and another
	// device: both are used as they are.
	stored := cpuProf
	stored.Model, stored.FMAGFlops = cpu.Info().Model, 12345
	stored.Calibration = CalibrationInfo{InnerLoops: kernels.InnerLoops(), Driver: cpu.Info().Driver, ComputeUnits: cpu.Info().ComputeUnits}
	other := synthProfile("opencl:7", 1, 1, 1, 0.5, 1, 1)
	if _, err := SaveProfile(&Profile{Devices: []DeviceProfile{stored, other}}, ""); err != nil {
		t.Fatal(err)
	}
	p, err := ProfileFor([]Device{cpu}, false)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := p.Device("cpu"); d.FMAGFlops != 12345 {
		t.Errorf("stored profile not used: %+v", d)
	}
	// Other inner loops: stale, measured again (quickly); opencl:7 kept.
	stored.Calibration.InnerLoops = "sse9"
	if _, err := SaveProfile(&Profile{Devices: []DeviceProfile{stored, other}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := ProfileFor([]Device{cpu}, false); err == nil {
		t.Fatal("a stale profile was accepted")
	}
	p, err = ProfileFor([]Device{cpu}, true)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := p.Device("cpu")
	checkProfile(t, d, cpu.Info())
	if o, ok := p.Device("opencl:7"); !ok || !reflect.DeepEqual(o, other) {
		t.Errorf("opencl:7 not kept: %+v", o)
	}
	// Saved: a second call measures nothing.
	q, err := ProfileFor([]Device{cpu}, false)
	if err != nil || !reflect.DeepEqual(p, q) {
		t.Errorf("second call: %v", err)
	}
	// A newer build's profile is not replaced by this one's quick numbers.
	path, _ := ProfilePath()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	newer := bytes.Replace(data, []byte(`"version": 1`), []byte(`"version": 99`), 1)
	if err := os.WriteFile(path, newer, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ProfileFor([]Device{cpu}, true); !errors.Is(err, ErrNewerProfile) {
		t.Errorf("a newer profile: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, newer) {
		t.Errorf("a newer profile was rewritten")
	}
}

// TestCalibrateAccelerators calibrates each accelerator (PoCL in CI) by
// way of ProfileFor, next to a stored CPU profile that must be kept.
func TestCalibrateAccelerators(t *testing.T) {
	accs := accelerators(t)
	tempConfig(t)
	cpu := NewCPU(0)
	stored := cpuProf
	stored.Model, stored.FMAGFlops = cpu.Info().Model, 12345
	stored.Calibration = CalibrationInfo{InnerLoops: kernels.InnerLoops(), Driver: cpu.Info().Driver, ComputeUnits: cpu.Info().ComputeUnits}
	if _, err := SaveProfile(&Profile{Devices: []DeviceProfile{stored}}, ""); err != nil {
		t.Fatal(err)
	}
	devs := []Device{cpu}
	for _, a := range accs {
		devs = append(devs, a)
	}
	p, err := ProfileFor(devs, true)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := p.Device("cpu"); d.FMAGFlops != 12345 {
		t.Errorf("the CPU was measured again: %+v", d)
	}
	for _, a := range accs {
		d, ok := p.Device(a.Info().Name)
		if !ok {
			t.Fatalf("%s not calibrated", a.Info().Name)
		}
		checkProfile(t, d, a.Info())
		if !strings.Contains(d.Calibration.FMAMethod, "fma_peak kernel") || !strings.Contains(d.Calibration.MemoryMethod, "triad kernel") {
			t.Errorf("%s: methods %q, %q", d.Name, d.Calibration.FMAMethod, d.Calibration.MemoryMethod)
		}
		if n := a.rt.live(); n != 0 {
			t.Errorf("%s: %d device objects left after calibration", d.Name, n)
		}
		// A budget too small for the probes is one clear error.
		a.SetMemoryBudget(1 << 10)
		_, err := Calibrate(context.Background(), []Device{a}, CalibrateOptions{Quick: true})
		a.SetMemoryBudget(0)
		if err == nil || !strings.Contains(err.Error(), "no room") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s with 1 KiB: %v", d.Name, err)
		}
	}
}

// Which LoadProfile errors leave the stored profile to be replaced.
func TestProfileReplaceable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("profile: %w", &fs.PathError{Op: "open", Path: "p", Err: fs.ErrNotExist}), true},
		{fmt.Errorf("profile: %w", &fs.PathError{Op: "open", Path: "p", Err: fs.ErrPermission}), false},
		{errors.New("profile p: invalid character 'g' looking for beginning of value"), true},
		{fmt.Errorf("profile p: version 99, expected 1: %w", ErrNewerProfile), false},
	} {
		if got := ProfileReplaceable(c.err); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
}
