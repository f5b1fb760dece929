package hetero

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestCPUFamily: on Linux the CPU device reports the family number the
// first processor's block of /proc/cpuinfo gives, and its model name;
// elsewhere, or where the file has no such line (arm64), no family.
func TestCPUFamily(t *testing.T) {
	info := NewCPU(1).Info()
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		if info.Family != 0 {
			t.Errorf("no /proc/cpuinfo, family %d", info.Family)
		}
		t.Skip("no /proc/cpuinfo")
	}
	want, model := 0, ""
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "" && want+len(model) > 0 {
			break
		}
		switch k {
		case "cpu family":
			want, _ = strconv.Atoi(v)
		case "model name":
			model = v
		}
	}
	if info.Family != want || (model != "" && info.Model != model) {
		t.Errorf("family %d, model %q; /proc/cpuinfo says %d, %q", info.Family, info.Model, want, model)
	}
	t.Logf("%s, family %#x", info.Model, info.Family)
}
