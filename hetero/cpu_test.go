package hetero

import (
	"os"
	"strings"
	"testing"
)

// TestParseCPUInfo: the CPU's vendor, model name, family number and
// clock come from the first processor's block of /proc/cpuinfo; a
// block without a family (arm64's) leaves none.
func TestParseCPUInfo(t *testing.T) {
	const zen4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2595.998\n\n" +
		"processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Other\ncpu MHz\t\t: 1000.000\n\n"
	const arm = "\nprocessor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n\nprocessor\t: 1\nBogoMIPS\t: 2000.00\n"
	for _, c := range []struct {
		name, text string
		want       Info
	}{
		{"x86", zen4, Info{Vendor: "AuthenticAMD", Model: "AMD EPYC", Family: 25, ClockMHz: 2596}},
		{"arm64", arm, Info{Vendor: "arm64", Model: "arm64"}},
		{"a family that is no number", "cpu family\t: x\nmodel name\t: M\n", Info{Vendor: "arm64", Model: "M"}},
	} {
		got := Info{Vendor: "arm64", Model: "arm64"}
		parseCPUInfo(strings.NewReader(c.text), &got)
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestCPUFamily: on Linux the CPU device reports what /proc/cpuinfo
// gives; elsewhere no family.
func TestCPUFamily(t *testing.T) {
	info := NewCPU(1).Info()
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		if info.Family != 0 {
			t.Errorf("no /proc/cpuinfo, family %d", info.Family)
		}
		t.Skip("no /proc/cpuinfo")
	}
	defer f.Close()
	var want Info
	parseCPUInfo(f, &want)
	if info.Family != want.Family || (want.Model != "" && info.Model != want.Model) {
		t.Errorf("family %d, model %q; /proc/cpuinfo says %d, %q", info.Family, info.Model, want.Family, want.Model)
	}
	t.Logf("%s, family %#x", info.Model, info.Family)
}
