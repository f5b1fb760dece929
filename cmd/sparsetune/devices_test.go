package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/hetero"
)

func TestDevices(t *testing.T) {
	out, _, err := run(t, "devices")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "device ") || !strings.Contains(out, "\ncpu ") {
		t.Errorf("table:\n%s", out)
	}
	out, _, err = run(t, "devices", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Devices []struct {
			Name, Kind string
			Memory     int64 `json:"global_memory_bytes"`
		}
		Backends []struct{ Name, Missing string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Devices) == 0 || rep.Devices[0].Name != "cpu" || rep.Devices[0].Kind != "cpu" {
		t.Fatalf("devices: %+v", rep.Devices)
	}
	if len(rep.Backends) == 0 {
		t.Fatal("no backends listed")
	}
	// Every backend either lists devices or says why it has none, and the
	// table says it too.
	table, _, _ := run(t, "devices")
	for _, b := range rep.Backends {
		if b.Missing != "" && !strings.Contains(table, b.Name+": not available: ") {
			t.Errorf("table does not say why %s is missing:\n%s", b.Name, table)
		}
	}
	if got, want := len(rep.Devices), len(hetero.Available()); got != want {
		t.Errorf("%d devices listed, Available has %d", got, want)
	}
}

// TestBenchAccelerator runs bench on the first OpenCL device (PoCL in CI)
// with the same JSON as on the CPU, and with a memory budget that makes
// the ALTO MTTKRP stream.
func TestBenchAccelerator(t *testing.T) {
	if len(hetero.Available()) < 2 {
		if os.Getenv("SPARSETUNE_OPENCL_TESTS") == "1" {
			t.Fatal("SPARSETUNE_OPENCL_TESTS=1 but no accelerator found")
		}
		t.Skip("no accelerator")
	}
	dev := hetero.Available()[1]
	path := writeRandomTensor(t, []int{40, 30, 20}, 3000, 9)
	out, _, err := run(t, "bench", path, "--json", "--iters", "2", "--probe=false", "--rank", "8", "--device", dev)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 2*3*4 {
		t.Fatalf("%d rows, want 24", len(rows))
	}
	for _, r := range rows {
		skipped, _ := r["skipped"].(string)
		switch {
		case r["device"] != dev:
			t.Errorf("row on %v", r["device"])
		case r["format"] == "hicoo":
			if !strings.Contains(skipped, "no accelerator kernel for hicoo") {
				t.Errorf("hicoo: skipped %q", skipped)
			}
		case skipped != "":
			t.Errorf("%v %v mode %v skipped: %s", r["op"], r["format"], r["mode"], skipped)
		default:
			if s, _ := r["seconds"].(float64); !(s > 0) {
				t.Errorf("%v %v: seconds %v", r["op"], r["format"], r["seconds"])
			}
			if _, ok := r["h2d_seconds"].(float64); !ok {
				t.Errorf("%v %v: no h2d_seconds", r["op"], r["format"])
			}
		}
	}

	// 24 KiB holds the factors and output but not the tensor: COO does
	// not fit, ALTO streams.
	out, _, err = run(t, "bench", path, "--json", "--iters", "1", "--probe=false", "--rank", "8", "--device", dev,
		"--op", "mttkrp", "--mode", "1", "--formats", "coo,alto", "--device-memory", "24KiB")
	if err != nil {
		t.Fatal(err)
	}
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v\n%s", err, out)
	}
	if s, _ := rows[0]["skipped"].(string); !strings.Contains(s, "over the budget of 24.0 KiB") {
		t.Errorf("coo: skipped %q", s)
	}
	if s, _ := rows[1]["skipped"].(string); s != "" || rows[1]["seconds"].(float64) <= 0 {
		t.Errorf("alto: %v", rows[1])
	}
}
