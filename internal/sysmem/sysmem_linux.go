package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// available reads MemAvailable from /proc/meminfo (the kernel's estimate
// of what can be allocated without swapping, reclaimable caches included)
// and lowers it to what the process's cgroup (v2) still allows, for
// containers whose limit is below the host's memory.
func available() (uint64, bool) {
	avail, ok := memAvailable("/proc/meminfo")
	if !ok {
		return 0, false
	}
	if limit, ok := cgroupRoom(cgroupDir("/proc/self/cgroup", "/sys/fs/cgroup")); ok && limit < avail {
		avail = limit
	}
	return avail, true
}

// cgroupDir returns the directory of the process's cgroup v2 under root,
// from the "0::/path" line of /proc/self/cgroup (the path is "/" inside a
// container with its own cgroup namespace).
func cgroupDir(self, root string) string {
	b, err := os.ReadFile(self)
	if err != nil {
		return root
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return root + strings.TrimSuffix(path, "/")
		}
	}
	return root
}

func memAvailable(path string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		rest, ok := bytes.CutPrefix(line, []byte("MemAvailable:"))
		if !ok {
			continue
		}
		fields := strings.Fields(string(rest))
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil || kb > ^uint64(0)/1024 {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}

// cgroupRoom returns memory.max less memory.current of the cgroup v2
// mounted at dir, where a limit is set.
func cgroupRoom(dir string) (uint64, bool) {
	limit, ok := readUint(dir + "/memory.max")
	if !ok {
		return 0, false // "max", cgroup v1, or no cgroup filesystem
	}
	used, ok := readUint(dir + "/memory.current")
	if !ok {
		return 0, false
	}
	if used >= limit {
		return 0, true
	}
	return limit - used, true
}

func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}
