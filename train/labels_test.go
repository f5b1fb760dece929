package train

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// validRow returns a consistent mttkrp row with one skipped format.
func validRow() LabelRow {
	return LabelRow{Tensor: "set/t1.stb", Source: "bcsstk01.mtx", Generator: "slices",
		Fingerprint: strings.Repeat("ab", 32), Op: "mttkrp", Mode: 2, Device: "opencl:0", DeviceClass: "opencl-cpu",
		DeviceModel: "pthread", ComputeUnits: 2, Rank: 16, NNZ: 100, Dims: []int{10, 20, 4}, Order: 3,
		Times:           map[string]float64{"coo": 3e-5, "csf": 1e-5, "alto": 1.02e-5},
		MinTimes:        map[string]float64{"coo": 2.9e-5, "csf": 1e-5, "alto": 1e-5},
		ConvertSeconds:  map[string]float64{"coo": 1e-4, "csf": 2e-4, "alto": 3e-4, "hicoo": 1e-4},
		TransferSeconds: map[string]float64{"csf": 1e-6},
		Skipped:         map[string]string{"hicoo": "no accelerator kernel for hicoo"},
		Label:           "csf", NearTies: []string{"csf", "alto"},
		Runs:  map[string]int{"coo": 5, "csf": 5, "alto": 4},
		Build: Build{Revision: "abc", Go: "go1.26.8", InnerLoops: "avx2"}, MeasuredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// writeLines writes lines to a file and returns its path.
func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "labels.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func marshalRow(t *testing.T, r LabelRow) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func TestReadLabels(t *testing.T) {
	good := marshalRow(t, validRow())
	path := writeLines(t, good, "\n", strings.Replace(good, `"mode":2`, `"mode":3`, 1))
	rows, err := ReadLabels(path)
	if err != nil || len(rows) != 2 || rows[1].Mode != 3 || rows[0].Times["alto"] != 1.02e-5 {
		t.Fatalf("%v %+v", err, rows)
	}
	// A complete last row without its newline is a row.
	if rows, err := ReadLabels(writeLines(t, strings.TrimSuffix(good, "\n"))); err != nil || len(rows) != 1 {
		t.Fatalf("unterminated complete row: %v", err)
	}
	mutate := func(f func(r *LabelRow)) string {
		r := validRow()
		f(&r)
		return marshalRow(t, r)
	}
	for _, tc := range []struct {
		name, line, want string
	}{
		{"not JSON", "{\"tensor\": \n", ":1: expected a JSON label row"},
		{"unknown field", strings.Replace(good, `{"tensor"`, `{"speed":1,"tensor"`, 1), `unknown field "speed"`},
		{"wrong type", strings.Replace(good, `"mode":2`, `"mode":"2"`, 1), "mode: expected int"},
		{"two objects", strings.TrimSuffix(good, "\n") + "{}\n", "found more after it"},
		{"no tensor", mutate(func(r *LabelRow) { r.Tensor = "" }), ":1: tensor:"},
		{"no source", mutate(func(r *LabelRow) { r.Source = "" }), ":1: source:"},
		{"fingerprint", mutate(func(r *LabelRow) { r.Fingerprint = "ABC" }), ":1: fingerprint:"},
		{"op", mutate(func(r *LabelRow) { r.Op = "spttm" }), ":1: op:"},
		{"order", mutate(func(r *LabelRow) { r.Order = 1 }), ":1: order:"},
		{"dims", mutate(func(r *LabelRow) { r.Dims = []int{1, 2} }), ":1: dims:"},
		{"zero dim", mutate(func(r *LabelRow) { r.Dims[1] = 0 }), ":1: dims:"},
		{"nnz", mutate(func(r *LabelRow) { r.NNZ = 0 }), ":1: nnz:"},
		{"mode", mutate(func(r *LabelRow) { r.Mode = 4 }), ":1: mode:"},
		{"device", mutate(func(r *LabelRow) { r.Device = "" }), ":1: device:"},
		{"class", mutate(func(r *LabelRow) { r.DeviceClass = "" }), ":1: device_class:"},
		{"another device's class", mutate(func(r *LabelRow) { r.DeviceClass = "tpu" }), ":1: device_class: \"tpu\" is not a class of device "},
		{"an accelerator's class on the cpu", mutate(func(r *LabelRow) { r.Device, r.DeviceClass = "cpu", "opencl-cpu" }), ":1: device_class: \"opencl-cpu\" is not a class of device cpu"},
		{"rank", mutate(func(r *LabelRow) { r.Rank = 0 }), ":1: rank:"},
		{"family", mutate(func(r *LabelRow) { r.DeviceFamily = -25 }), ":1: device_family:"},
		{"foreign format", mutate(func(r *LabelRow) { r.Times["csr"] = 1 }), ":1: times: format \"csr\""},
		{"negative time", mutate(func(r *LabelRow) { r.Times["coo"] = -1 }), ":1: times: coo"},
		{"timed and skipped", mutate(func(r *LabelRow) { r.Skipped["coo"] = "x" }), ":1: skipped: coo is timed and skipped"},
		{"missing candidate", mutate(func(r *LabelRow) { delete(r.Skipped, "hicoo") }), ":1: times: candidate hicoo"},
		{"empty reason", mutate(func(r *LabelRow) { r.Skipped["hicoo"] = " " }), ":1: skipped: hicoo"},
		{"min above median", mutate(func(r *LabelRow) { r.MinTimes["coo"] = 1 }), ":1: min_times: coo"},
		{"min of untimed", mutate(func(r *LabelRow) { r.MinTimes["hicoo"] = 1 }), ":1: min_times: hicoo"},
		{"no conversion", mutate(func(r *LabelRow) { delete(r.ConvertSeconds, "csf") }), ":1: convert_seconds: csf"},
		{"transfer of untimed", mutate(func(r *LabelRow) { r.TransferSeconds["hicoo"] = 1 }), ":1: transfer_seconds: hicoo"},
		{"no runs", mutate(func(r *LabelRow) { delete(r.Runs, "coo") }), ":1: runs: coo"},
		{"runs of untimed", mutate(func(r *LabelRow) { r.Runs["hicoo"] = 1 }), ":1: runs: hicoo"},
		{"label not fastest", mutate(func(r *LabelRow) { r.Label = "alto" }), `:1: label: expected the fastest format "csf"`},
		{"near ties missing", mutate(func(r *LabelRow) { r.NearTies = []string{"csf"} }), ":1: near_ties:"},
		{"near ties order", mutate(func(r *LabelRow) { r.NearTies = []string{"alto", "csf"} }), ":1: near_ties:"},
		{"build", mutate(func(r *LabelRow) { r.Build.Go = "" }), ":1: build:"},
		{"measured_at", mutate(func(r *LabelRow) { r.MeasuredAt = time.Time{} }), ":1: measured_at:"},
		{"truncated", good[:len(good)/2], ":1: truncated last line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeLines(t, tc.line)
			_, err := ReadLabels(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path+":1: ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line starting %s:1: containing %q", err, path, tc.want)
			}
		})
	}
	// A duplicate row names the first line.
	_, err = ReadLabels(writeLines(t, good, good))
	if err == nil || !strings.Contains(err.Error(), ":2: duplicate of line 1") {
		t.Errorf("duplicate: %v", err)
	}
	// The same cpu row measured with other inner loops, or on another
	// processor, is another CPU's row; an accelerator's is still a
	// duplicate (its times are the device's, whatever the host's; two
	// GPUs of one class resume each other's labelling).
	for device, class := range map[string]string{"cpu": "cpu", "opencl:0": "opencl-cpu"} {
		for _, other := range []func(*LabelRow){
			func(r *LabelRow) { r.Build.InnerLoops = "elsewhere" },
			func(r *LabelRow) { r.DeviceModel = "Intel(R) Xeon(R) Processor" },
			func(r *LabelRow) { r.DeviceFamily = 0x1a }, // one model name, another generation
		} {
			a := validRow()
			a.Device, a.DeviceClass, a.DeviceModel = device, class, "AMD EPYC"
			b := a
			other(&b)
			_, err := ReadLabels(writeLines(t, marshalRow(t, a), marshalRow(t, b)))
			if dup := err != nil && strings.Contains(err.Error(), "duplicate of line 1"); dup != (class != "cpu") || (err != nil && !dup) {
				t.Errorf("%s rows of two kinds of hardware (%s, %s; %s, %s): %v", class, a.Build.InnerLoops, a.DeviceModel, b.Build.InnerLoops, b.DeviceModel, err)
			}
		}
	}
	// A PoCL row measured under another processor PoCL compiles for is
	// another device's row (model.DeviceTarget); under the same one, on
	// another host, a duplicate.
	for other, dup := range map[string]bool{"pthread-haswell-AMD EPYC [CPU]": false, "pthread-skylake-avx512-Intel(R) Xeon(R) Processor": true} {
		a := validRow()
		a.Device, a.DeviceClass, a.DeviceModel = "opencl:0", "opencl-cpu", "pthread-skylake-avx512-AMD EPYC [CPU]"
		b := a
		b.DeviceModel = other
		_, err := ReadLabels(writeLines(t, marshalRow(t, a), marshalRow(t, b)))
		if got := err != nil && strings.Contains(err.Error(), "duplicate of line 1"); got != dup || (err != nil && !got) {
			t.Errorf("PoCL rows of %s and %s: %v; a duplicate: %v", a.DeviceModel, b.DeviceModel, err, dup)
		}
	}
	// Every candidate skipped: no label, no near ties.
	r := validRow()
	r.Times, r.MinTimes, r.Runs, r.TransferSeconds, r.Label, r.NearTies = nil, nil, nil, nil, "", nil
	r.Skipped = map[string]string{"coo": "a", "csf": "b", "hicoo": "c", "alto": "d"}
	if _, err := ReadLabels(writeLines(t, marshalRow(t, r))); err != nil {
		t.Errorf("all skipped: %v", err)
	}
}

// TestReadLabelsGzip reads a labels file stored gzip-compressed (the
// committed ones are) as its plain twin, and names the file when the
// compressed stream is not gzip or is cut short.
func TestReadLabelsGzip(t *testing.T) {
	good := marshalRow(t, validRow())
	content := good + strings.Replace(good, `"mode":2`, `"mode":3`, 1)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	want, err := ReadLabels(write("labels.jsonl", []byte(content)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadLabels(write("labels.jsonl.gz", buf.Bytes()))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("gzip: %v, %d rows, want the plain file's %d", err, len(got), len(want))
	}
	// A row error inside a gzip file names the file and line.
	var bad bytes.Buffer
	zw = gzip.NewWriter(&bad)
	zw.Write([]byte(good + strings.Replace(good, `"mode":2`, `"mode":9`, 1)))
	zw.Close()
	path := write("bad.jsonl.gz", bad.Bytes())
	if _, err := ReadLabels(path); err == nil || !strings.HasPrefix(err.Error(), path+":2: mode:") {
		t.Errorf("row error in gzip: %v", err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"plain.jsonl.gz", []byte(content), "expected a gzip stream"},
		{"cut.jsonl.gz", buf.Bytes()[:buf.Len()/2], "reading gzip data"},
	} {
		path := write(tc.name, tc.data)
		_, err := ReadLabels(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+": "+tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line starting %s: %s", tc.name, err, path, tc.want)
		}
	}
}

func TestRankTimes(t *testing.T) {
	cands := []string{"coo", "csf", "hicoo", "alto"}
	for _, tc := range []struct {
		times map[string]float64
		label string
		ties  []string
	}{
		{map[string]float64{}, "", []string{}},
		{map[string]float64{"alto": 2, "coo": 1}, "coo", []string{"coo"}},
		{map[string]float64{"alto": 1.03, "coo": 1, "csf": 1.0301}, "coo", []string{"coo", "alto"}},
		{map[string]float64{"alto": 1, "coo": 1}, "coo", []string{"coo", "alto"}},
		{map[string]float64{"hicoo": 0, "csf": 0}, "csf", []string{"csf", "hicoo"}},
	} {
		label, ties := rankTimes(cands, tc.times)
		if label != tc.label || fmt.Sprint(ties) != fmt.Sprint(tc.ties) {
			t.Errorf("%v: %q %v, want %q %v", tc.times, label, ties, tc.label, tc.ties)
		}
	}
}

func TestMixedBuilds(t *testing.T) {
	a := Build{Revision: "aaaaaaaaaaaaaaaa", Go: "go1.26.8", InnerLoops: "avx2"}
	b := a
	b.Modified = true
	c := a
	c.InnerLoops = "scalar"
	rows := func(builds ...Build) []LabelRow {
		var rs []LabelRow
		for _, b := range builds {
			rs = append(rs, LabelRow{Build: b})
		}
		return rs
	}
	for _, tc := range []struct {
		rows []LabelRow
		want []string
	}{
		{nil, nil},
		{rows(a, a, a), nil},
		{rows(a, b, a), []string{"revision aaaaaaaaaaaa, go1.26.8, inner loops avx2: 2 rows", "revision aaaaaaaaaaaa (modified), go1.26.8, inner loops avx2: 1 rows"}},
		{rows(c, a), []string{"revision aaaaaaaaaaaa, go1.26.8, inner loops scalar: 1 rows", "revision aaaaaaaaaaaa, go1.26.8, inner loops avx2: 1 rows"}},
		{rows(Build{Go: "go1.25", InnerLoops: "avx2"}, a), []string{"revision unknown, go1.25, inner loops avx2: 1 rows", "revision aaaaaaaaaaaa, go1.26.8, inner loops avx2: 1 rows"}},
		{rows(Build{Version: "v0.3.0", Go: "go1.26.8", InnerLoops: "avx2"}, a), []string{"version v0.3.0, go1.26.8, inner loops avx2: 1 rows", "revision aaaaaaaaaaaa, go1.26.8, inner loops avx2: 1 rows"}},
	} {
		if got := MixedBuilds(tc.rows); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if b := CurrentBuild(); b.Go == "" || b.InnerLoops == "" {
		t.Errorf("current build %+v", b)
	}
	for _, tc := range []struct {
		b    Build
		want bool
	}{
		{a, true},
		{Build{Version: "v0.3.0"}, true},
		{Build{Go: "go1.26.8", InnerLoops: "avx2"}, false},
		{Build{Modified: true}, false},
	} {
		if got := tc.b.Known(); got != tc.want {
			t.Errorf("%+v.Known() = %v, want %v", tc.b, got, tc.want)
		}
	}
}

// FuzzReadLabels: any content gives rows or a one-line error naming the
// file and line, never a panic; rows that read back rewrite to rows that
// read back the same.
func FuzzReadLabels(f *testing.F) {
	good, _ := json.Marshal(validRow())
	f.Add(append(good, '\n'))
	f.Add(good[:len(good)/3])
	f.Add([]byte("\n\n{}\n"))
	f.Add(bytes.Replace(good, []byte(`"mode":2`), []byte(`"mode":9e99`), 1))
	f.Add(bytes.Replace(good, []byte(`"coo":3e-05`), []byte(`"coo":NaN`), 1))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "labels.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rows, err := ReadLabels(path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), path+":") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line naming the file", err)
			}
			return
		}
		var buf bytes.Buffer
		for _, r := range rows {
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(append(line, '\n'))
		}
		back, _, err := parseLabels(buf.Bytes(), "again")
		if err != nil || len(back) != len(rows) {
			t.Fatalf("rows do not read back: %v", err)
		}
		for i := range rows {
			if !rowsEqual(rows[i], back[i]) {
				t.Fatalf("row %d changed: %+v\n%+v", i+1, rows[i], back[i])
			}
		}
	})
}
