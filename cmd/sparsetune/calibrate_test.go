package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/hetero"
)

// tempUserDirs points the config directory (os.UserConfigDir reads
// XDG_CONFIG_HOME first) at a temporary directory, so the user's profile
// and config are untouched, and returns it. HOME is left alone: PoCL keeps
// its compiled kernels under it.
func tempUserDirs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("SPARSETUNE_CONFIG", "")
	return dir
}

type profileJSON struct {
	Name      string  `json:"name"`
	FMAGFlops float64 `json:"fma_gflops"`
	MemoryGBs float64 `json:"memory_gbs"`
	LinkGBs   float64 `json:"link_gbs"`
	Ops       map[string]struct {
		Lambda, Mu float64
		Format     string
	} `json:"ops"`
	Overridden []string `json:"overridden"`
}

// TestCalibrate runs calibrate --quick (on every device when an
// accelerator is there, PoCL in CI), then devices with the stored profile,
// with overrides from a config file and from the environment.
func TestCalibrate(t *testing.T) {
	dir := tempUserDirs(t)
	args := []string{"calibrate", "--quick", "--json"}
	want := hetero.Available()
	if len(want) < 2 {
		if os.Getenv("SPARSETUNE_OPENCL_TESTS") == "1" {
			t.Fatal("SPARSETUNE_OPENCL_TESTS=1 but no accelerator found")
		}
		want = []string{"cpu"}
		args = append(args, "--devices", "cpu")
	}
	out, stderr, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Path    string
		Devices []profileJSON
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Path != filepath.Join(dir, "config", "sparsetune", "profile.json") {
		t.Errorf("saved to %s", rep.Path)
	}
	if _, err := os.Stat(rep.Path); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range rep.Devices {
		names = append(names, d.Name)
		if !(d.FMAGFlops > 0) || !(d.MemoryGBs > 0) || (d.Name == "cpu") != (d.LinkGBs == 0) {
			t.Errorf("%s: %+v", d.Name, d)
		}
		for _, op := range []string{"ttm", "mttkrp"} {
			if o := d.Ops[op]; !(o.Lambda > 0 && o.Lambda <= 1) || !(o.Mu > 0) || o.Format == "" {
				t.Errorf("%s %s: %+v", d.Name, op, o)
			}
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("measured %v, want %v", names, want)
	}
	if !strings.Contains(stderr, "calibrating cpu: peak multiply-add rate\n") {
		t.Errorf("progress:\n%s", stderr)
	}

	// devices shows the stored numbers.
	table, _, err := run(t, "devices")
	if err != nil {
		t.Fatal(err)
	}
	// The device column is as wide as the longest name, which depends
	// on the devices this machine has.
	header := regexp.MustCompile(`profile \(` + regexp.QuoteMeta(rep.Path) + `\):\ndevice +peak GFLOP/s`)
	if !header.MatchString(table) || strings.Contains(table, "run sparsetune calibrate") {
		t.Errorf("devices table:\n%s", table)
	}
	cpuProfile := func(args ...string) profileJSON {
		t.Helper()
		out, _, err := run(t, append([]string{"devices", "--json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var dev struct {
			Devices []struct {
				Name         string
				Profile      *profileJSON
				ProfileStale bool `json:"profile_stale"`
			}
			ProfileError string `json:"profile_error"`
		}
		if err := json.Unmarshal([]byte(out), &dev); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if dev.ProfileError != "" {
			t.Fatalf("profile error: %s", dev.ProfileError)
		}
		for _, d := range dev.Devices {
			if d.Profile == nil || d.ProfileStale {
				t.Errorf("%s: profile %v, stale %v", d.Name, d.Profile, d.ProfileStale)
			}
		}
		return *dev.Devices[0].Profile
	}
	if p := cpuProfile(); p.FMAGFlops != rep.Devices[0].FMAGFlops || len(p.Overridden) != 0 {
		t.Errorf("devices: %+v, calibrate: %+v", p, rep.Devices[0])
	}

	// Overrides: a config file and a variable.
	cfg := filepath.Join(dir, "sparsetune.yaml")
	os.WriteFile(cfg, []byte("profile:\n  cpu:\n    fma_gflops: 1234\n    mttkrp:\n      mu: 7.5\n"), 0o644)
	t.Setenv("SPARSETUNE_PROFILE_CPU_TTM_LAMBDA", "0.25")
	p := cpuProfile("--config", cfg)
	if p.FMAGFlops != 1234 || p.Ops["mttkrp"].Mu != 7.5 || p.Ops["ttm"].Lambda != 0.25 || p.MemoryGBs != rep.Devices[0].MemoryGBs {
		t.Errorf("overridden: %+v", p)
	}
	if !slices.Equal(p.Overridden, []string{"fma_gflops", "mttkrp.mu", "ttm.lambda"}) {
		t.Errorf("overridden %v", p.Overridden)
	}
	// A bad override is reported, not fatal to devices.
	t.Setenv("SPARSETUNE_PROFILE_CPU_TTM_LAMBDA", "2")
	out, _, err = run(t, "devices")
	if err != nil || !strings.Contains(out, "profile: config profile.cpu.ttm.lambda: 2 is out of range, expected (0, 1]\n") {
		t.Errorf("%v\n%s", err, out)
	}
}

func TestCalibrateErrors(t *testing.T) {
	tempUserDirs(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "--devices", "nope"}, `unknown device "nope"`},
		{[]string{"calibrate", "--devices", " , "}, "names no device"},
		{[]string{"calibrate", "--devices", "cpu", "extra"}, `unexpected argument "extra": calibrate takes flags only`},
	} {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	// Nothing was saved.
	if _, err := hetero.LoadProfile(""); err == nil {
		t.Error("a failed calibrate saved a profile")
	}
}

func TestEnvProfileKey(t *testing.T) {
	for in, want := range map[string]string{
		"cpu_fma_gflops":               "profile.cpu.fma_gflops",
		"opencl_0_ttm_lambda":          "profile.opencl:0.ttm.lambda",
		"cuda_12_mttkrp_bytes_per_nnz": "profile.cuda:12.mttkrp.bytes_per_nnz",
		"cpu_link_gbs":                 "profile.cpu.link_gbs",
		"cpu_speed":                    "",
		"cpu":                          "",
	} {
		if got := envProfileKey(in); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}
