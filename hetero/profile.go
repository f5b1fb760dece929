package hetero

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sparsetune/sparsetune/internal/atomicfile"
	"github.com/sparsetune/sparsetune/kernels"
)

// ProfileVersion is the layout version of the profile file. A file of
// another version is not read: its devices are calibrated again.
const ProfileVersion = 1

// Profile holds what the task mapper knows of each device: the peak rates
// and bandwidths of the paper's split formula and, per operation, λ and μ.
// docs/hetero.md describes every field and how it is measured.
type Profile struct {
	Version int             `json:"version"`
	Devices []DeviceProfile `json:"devices"`
}

// DeviceProfile is the profile of one device.
type DeviceProfile struct {
	Name  string `json:"name"` // the CLI name: "cpu", "opencl:0"
	Kind  Kind   `json:"kind"`
	Model string `json:"model"`
	// FMAGFlops is the peak float32 multiply-add rate P, 10^9 flops/s (a
	// multiply-add is 2 flops).
	FMAGFlops float64 `json:"fma_gflops"`
	// MemoryGBs is the device memory bandwidth B_c or B_g, 10^9 bytes/s,
	// from a STREAM triad.
	MemoryGBs float64 `json:"memory_gbs"`
	// LinkGBs is the host-to-device bandwidth B, 10^9 bytes/s. 0 means the
	// device works in host memory (the CPU): nothing is transferred, the
	// transfer time is 0.
	LinkGBs float64 `json:"link_gbs"`
	// Ops holds λ and μ per operation, keyed by Op.String(): "ttm",
	// "mttkrp".
	Ops map[string]OpProfile `json:"ops"`
	// Calibration says when and how the numbers were measured.
	Calibration CalibrationInfo `json:"calibration"`
	// Overridden lists the config keys that replaced measured numbers
	// (ApplyOverrides); empty for a profile as measured.
	Overridden []string `json:"overridden,omitempty"`
}

// OpProfile is how a device runs one operation, by the paper's model: a
// run on M bytes of tensor data does W = μ·M flops and takes
// W/(λ·P) + M/B_mem seconds (plus M/B_link to send the data to an
// accelerator).
type OpProfile struct {
	// Lambda (λ, in (0, 1]) is the fraction of the peak rate the kernel's
	// compute part reaches.
	Lambda float64 `json:"lambda"`
	// Mu (μ) is the work per byte: flops per byte of tensor data.
	Mu float64 `json:"mu"`
	// BytesPerNNZ is the tensor data per nonzero in Format (indices,
	// values and, for SpTTM, the fiber coordinates): M = BytesPerNNZ·nnz.
	BytesPerNNZ float64 `json:"bytes_per_nnz"`
	// Format is the format λ, μ and BytesPerNNZ come from: the fastest
	// of those measured.
	Format string `json:"format"`
	// Rank is the rank of the measured runs: μ grows with the rank
	// (AtRank).
	Rank int `json:"rank"`
	// Runs are the measured runs, one per format.
	Runs []OpRun `json:"runs,omitempty"`
}

// OpRun is one measured kernel run of the calibration.
type OpRun struct {
	Format  string  `json:"format"`
	Seconds float64 `json:"seconds"` // median kernel time
	Flops   float64 `json:"flops"`   // by the convention of Op.Flops
	Bytes   float64 `json:"bytes"`   // tensor data in the format
	Lambda  float64 `json:"lambda"`
	Mu      float64 `json:"mu"`
	// Clamped says the run was faster than the model allows even at the
	// peak rate (its time was at most Bytes/B_mem + Flops/P), so λ was
	// set to 1 and the model overestimates this run.
	Clamped bool `json:"clamped,omitempty"`
	// Skipped says why the format was not run on the device.
	Skipped string `json:"skipped,omitempty"`
}

// CalibrationInfo records when, where and how a device was measured.
type CalibrationInfo struct {
	Time    time.Time `json:"time"`
	Seconds float64   `json:"seconds"` // how long measuring the device took
	Quick   bool      `json:"quick"`
	Host    string    `json:"host"`
	GOOS    string    `json:"goos"`
	GOARCH  string    `json:"goarch"`
	Go      string    `json:"go"`
	// InnerLoops is kernels.InnerLoops() when measured: the CPU kernels'
	// vector loops (a CPU profile of other loops is measured again).
	InnerLoops   string `json:"inner_loops"`
	Driver       string `json:"driver"`
	ComputeUnits int    `json:"compute_units"`
	// FMAMethod, MemoryMethod and LinkMethod say how P, B_mem and B_link
	// were measured.
	FMAMethod    string `json:"fma_method"`
	MemoryMethod string `json:"memory_method"`
	LinkMethod   string `json:"link_method"`
	// Tensor describes the synthetic tensor of the kernel runs; Iters is
	// the number of timed runs per format (after one warm-up).
	Tensor string `json:"tensor"`
	Iters  int    `json:"iters"`
}

// Device returns the profile of the named device.
func (p *Profile) Device(name string) (DeviceProfile, bool) {
	if p == nil {
		return DeviceProfile{}, false
	}
	for _, d := range p.Devices {
		if d.Name == name {
			return d, true
		}
	}
	return DeviceProfile{}, false
}

// Set adds the device's profile, replacing one of the same name.
func (p *Profile) Set(d DeviceProfile) {
	for i := range p.Devices {
		if p.Devices[i].Name == d.Name {
			p.Devices[i] = d
			return
		}
	}
	p.Devices = append(p.Devices, d)
}

// Op returns the profile of an operation.
func (d DeviceProfile) Op(op Op) (OpProfile, bool) {
	o, ok := d.Ops[op.String()]
	return o, ok
}

// AtRank returns the profile for runs at another rank: the flops per
// nonzero grow with the rank while the tensor data does not, so μ scales
// by rank/Rank. λ is kept: the model assumes the kernel reaches the same
// fraction of the peak.
func (o OpProfile) AtRank(rank int) OpProfile {
	if o.Rank > 0 && rank > 0 {
		o.Mu *= float64(rank) / float64(o.Rank)
		o.Rank = rank
	}
	o.Runs = nil
	return o
}

// Matches reports whether the profile was measured on the device as it is
// now: same model, compute units and driver, and for the CPU the same
// inner loops.
func (d DeviceProfile) Matches(info Info) bool {
	c := d.Calibration
	if d.Name != info.Name || d.Model != info.Model || c.ComputeUnits != info.ComputeUnits || c.Driver != info.Driver {
		return false
	}
	return info.Kind != CPU || c.InnerLoops == kernels.InnerLoops()
}

// check reports the first field the mapper cannot use, naming the device
// and how to mend it.
func (d DeviceProfile) check(op Op) error {
	if err := d.checkFields(op); err != nil {
		return fmt.Errorf("%w (sparsetune calibrate --devices %s measures it again)", err, d.Name)
	}
	return nil
}

func (d DeviceProfile) checkFields(op Op) error {
	bad := func(field string, v float64, want string) error {
		return fmt.Errorf("profile of %s: %s is %v, expected %s", d.Name, field, v, want)
	}
	ok := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
	switch {
	case !ok(d.FMAGFlops):
		return bad("fma_gflops", d.FMAGFlops, "a positive number")
	case !ok(d.MemoryGBs):
		return bad("memory_gbs", d.MemoryGBs, "a positive number")
	case !(d.LinkGBs >= 0) || math.IsInf(d.LinkGBs, 0):
		return bad("link_gbs", d.LinkGBs, "0 (no transfer) or a positive number")
	}
	o, found := d.Op(op)
	if !found {
		return fmt.Errorf("profile of %s has no %s numbers", d.Name, op)
	}
	switch {
	case !(o.Lambda > 0 && o.Lambda <= 1):
		return bad(op.String()+".lambda", o.Lambda, "a number in (0, 1]")
	case !ok(o.Mu):
		return bad(op.String()+".mu", o.Mu, "a positive number")
	case !ok(o.BytesPerNNZ):
		return bad(op.String()+".bytes_per_nnz", o.BytesPerNNZ, "a positive number")
	}
	return nil
}

// ErrNewerProfile is what LoadProfile's error wraps for a profile of a
// newer version than this build reads: it is not replaced (ProfileFor),
// since a newer build wrote it.
var ErrNewerProfile = errors.New("written by a newer sparsetune: move it away, or run that build")

// ProfileReplaceable reports whether err, a LoadProfile error, leaves the
// stored profile to be replaced by freshly measured numbers: a missing
// file, or one that does not read as a profile of this version or an
// older one. A file the process cannot read, and one of a newer version,
// are not replaced: the error stands. ProfileFor and the commands that
// say they replace a profile go by it.
func ProfileReplaceable(err error) bool {
	var perr *fs.PathError
	return errors.Is(err, fs.ErrNotExist) || !errors.As(err, &perr) && !errors.Is(err, ErrNewerProfile)
}

// ProfilePath returns where the profile is kept:
// os.UserConfigDir()/sparsetune/profile.json.
func ProfilePath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("profile: %w", err)
	}
	return filepath.Join(dir, "sparsetune", "profile.json"), nil
}

// LoadProfile reads the profile at path ("" for ProfilePath). A missing
// file is an error that errors.Is(err, fs.ErrNotExist) recognises.
func LoadProfile(path string) (*Profile, error) {
	if path == "" {
		var err error
		if path, err = ProfilePath(); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	var p Profile
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("profile %s: %v", path, err)
	}
	if p.Version > ProfileVersion {
		return nil, fmt.Errorf("profile %s: version %d, expected %d: %w", path, p.Version, ProfileVersion, ErrNewerProfile)
	}
	if p.Version != ProfileVersion {
		return nil, fmt.Errorf("profile %s: version %d, expected %d", path, p.Version, ProfileVersion)
	}
	for _, d := range p.Devices {
		if d.Name == "" {
			return nil, fmt.Errorf("profile %s: a device without a name", path)
		}
	}
	return &p, nil
}

// SaveProfile writes p to path ("" for ProfilePath) through a temporary
// file renamed over it, creating the directory, and returns the path.
func SaveProfile(p *Profile, path string) (string, error) {
	if path == "" {
		var err error
		if path, err = ProfilePath(); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("profile: %w", err)
	}
	p.Version = ProfileVersion
	err := atomicfile.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	})
	if err != nil {
		return "", fmt.Errorf("profile: %w", err)
	}
	return path, nil
}

// profileMu serialises ProfileFor, so that one process calibrates a
// device once.
var profileMu sync.Mutex

// ProfileFor returns the stored profile (ProfilePath) with every one of
// devices in it. A device that is missing, or whose profile no longer
// Matches it (another model, driver, thread count or, for the CPU, other
// inner loops), is calibrated quickly and the profile saved, when
// calibrateIfMissing is set; otherwise that is an error. The other
// devices' numbers are kept as they are.
func ProfileFor(devices []Device, calibrateIfMissing bool) (*Profile, error) {
	profileMu.Lock()
	defer profileMu.Unlock()
	p, err := LoadProfile("")
	if err != nil {
		if !ProfileReplaceable(err) {
			return nil, err
		}
		p = &Profile{Version: ProfileVersion}
	}
	var missing []Device
	for _, d := range devices {
		if dp, ok := p.Device(d.Info().Name); !ok || !dp.Matches(d.Info()) {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return p, nil
	}
	if !calibrateIfMissing {
		var names []string
		for _, d := range missing {
			names = append(names, d.Info().Name)
		}
		return nil, fmt.Errorf("no calibrated profile for %s (run sparsetune calibrate)", strings.Join(names, ", "))
	}
	fresh, err := Calibrate(context.Background(), missing, CalibrateOptions{Quick: true})
	if err != nil {
		return nil, err
	}
	for _, d := range fresh.Devices {
		p.Set(d)
	}
	if _, err := SaveProfile(p, ""); err != nil {
		return nil, err
	}
	return p, nil
}

// OverrideKeys lists the fields a config may set per device, as
// profile.DEVICE.FIELD (see ApplyOverrides).
var OverrideKeys = []string{"fma_gflops", "memory_gbs", "link_gbs",
	"ttm.lambda", "ttm.mu", "ttm.bytes_per_nnz", "mttkrp.lambda", "mttkrp.mu", "mttkrp.bytes_per_nnz"}

// ApplyOverrides replaces measured numbers with those of a config.
// settings holds keys "profile.DEVICE.FIELD" (flat, as viper's AllKeys
// spells them, or nested maps under "profile"); keys outside "profile."
// are ignored. DEVICE is a device name, with the colon optionally written
// "_" or "-" ("opencl_0") for environment variables; FIELD is one of
// OverrideKeys. Values are numbers or strings holding numbers. A device
// the profile lacks is added with what the config gives; the mapper
// rejects it until every number it needs is set. Each applied key is
// listed in the device's Overridden.
func (p *Profile) ApplyOverrides(settings map[string]any) error {
	flat := make(map[string]any)
	flatten("", settings, flat)
	keys := make([]string, 0, len(flat))
	for k := range flat {
		if strings.HasPrefix(strings.ToLower(k), "profile.") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		rest := strings.ToLower(key)[len("profile."):]
		name, field, ok := strings.Cut(rest, ".")
		if !ok || name == "" {
			return fmt.Errorf("config %s: expected profile.DEVICE.FIELD", key)
		}
		name = deviceName(name)
		if !slices.Contains(OverrideKeys, field) {
			return fmt.Errorf("config %s: unknown field %q, expected one of %s", key, field, strings.Join(OverrideKeys, ", "))
		}
		v, err := toFloat(flat[key])
		if err != nil {
			return fmt.Errorf("config %s: %v", key, err)
		}
		d, found := p.Device(name)
		if !found {
			d = DeviceProfile{Name: name, Kind: GPU}
			if name == "cpu" {
				d.Kind = CPU
			}
		}
		if err := d.set(field, v); err != nil {
			return fmt.Errorf("config %s: %v", key, err)
		}
		d.Overridden = append(slices.DeleteFunc(slices.Clone(d.Overridden), func(s string) bool { return s == field }), field)
		p.Set(d)
	}
	return nil
}

// set sets one override field.
func (d *DeviceProfile) set(field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (v == 0 && field != "link_gbs") {
		return fmt.Errorf("%v is out of range, expected a positive number", v)
	}
	switch field {
	case "fma_gflops":
		d.FMAGFlops = v
		return nil
	case "memory_gbs":
		d.MemoryGBs = v
		return nil
	case "link_gbs":
		d.LinkGBs = v
		return nil
	}
	opName, what, _ := strings.Cut(field, ".")
	if d.Ops == nil {
		d.Ops = make(map[string]OpProfile)
	} else {
		d.Ops = maps.Clone(d.Ops) // not into a map the caller shares
	}
	o := d.Ops[opName]
	switch what {
	case "lambda":
		if v > 1 {
			return fmt.Errorf("%v is out of range, expected (0, 1]", v)
		}
		o.Lambda = v
	case "mu":
		o.Mu = v
	case "bytes_per_nnz":
		o.BytesPerNNZ = v
	}
	o.Format = "config"
	d.Ops[opName] = o
	return nil
}

// deviceName turns "opencl_0" and "opencl-0" back into "opencl:0".
func deviceName(s string) string {
	if strings.Contains(s, ":") {
		return s
	}
	for _, sep := range []string{"_", "-"} {
		if b, idx, ok := strings.Cut(s, sep); ok {
			if _, err := strconv.Atoi(idx); err == nil {
				return b + ":" + idx
			}
		}
	}
	return s
}

// flatten writes the leaves of nested maps into out under dotted keys.
func flatten(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok {
			flatten(key, sub, out)
			continue
		}
		out[key] = v
	}
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case uint32:
		return float64(x), nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", x)
		}
		return f, nil
	}
	return 0, fmt.Errorf("%v (%T) is not a number", v, v)
}
