package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMeminfoAndCgroup(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mi := write("meminfo", "MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:   2048 kB\n")
	if n, ok := memAvailable(mi); !ok || n != 2048*1024 {
		t.Errorf("memAvailable = %d, %v, want %d", n, ok, 2048*1024)
	}
	for _, bad := range []string{"MemTotal: 5 kB\n", "MemAvailable: x kB\n", "MemAvailable: 5 MB\n"} {
		if n, ok := memAvailable(write("bad", bad)); ok {
			t.Errorf("memAvailable(%q) = %d, true", bad, n)
		}
	}
	if _, ok := memAvailable(filepath.Join(dir, "absent")); ok {
		t.Error("an absent meminfo is read")
	}

	self := write("self", "0::/user.slice/job\n")
	root := filepath.Join(dir, "cg")
	if got := cgroupDir(self, root); got != root+"/user.slice/job" {
		t.Errorf("cgroupDir = %q", got)
	}
	write("cg/user.slice/job/memory.max", "1000000\n")
	write("cg/user.slice/job/memory.current", "250000\n")
	if n, ok := cgroupRoom(root + "/user.slice/job"); !ok || n != 750000 {
		t.Errorf("cgroupRoom = %d, %v, want 750000", n, ok)
	}
	write("cg/memory.max", "max\n")
	if _, ok := cgroupRoom(root); ok {
		t.Error(`memory.max "max" read as a limit`)
	}
}
