package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/hetero"
)

func init() { register(newCalibrateCmd) }

func newCalibrateCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "calibrate [--devices cpu,opencl:0] [--quick]",
		Short: "Measure the devices for the CPU/accelerator split and save their profile",
		Long: `Measure each device for the task mapper: the peak float32 multiply-add
rate, the memory bandwidth, the host-to-device bandwidth (none for the
CPU), and for SpTTM and MTTKRP the fraction of the peak the kernels reach
(λ) and their flops per byte of tensor data (μ), from timed runs on a fixed
synthetic tensor. The profile is saved in the user config directory
($XDG_CONFIG_HOME/sparsetune/profile.json), next to the numbers of devices
not measured this time. --quick takes a few seconds; docs/hetero.md says
what each number is, how it is measured and how a config overrides it
(profile.DEVICE.FIELD).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCalibrate(cmd, v)
		},
	}
	f := cmd.Flags()
	f.String("devices", "", "devices to measure, comma-separated (default: every device sparsetune devices lists)")
	f.Bool("quick", false, "smaller probes and tensor (seconds instead of tens of seconds)")
	for _, name := range []string{"devices", "quick"} {
		_ = v.BindPFlag("calibrate."+name, f.Lookup(name))
	}
	return cmd
}

// calibrateReport is the JSON of sparsetune calibrate.
type calibrateReport struct {
	Path    string                 `json:"path"`
	Devices []hetero.DeviceProfile `json:"devices"`
}

func runCalibrate(cmd *cobra.Command, v *viper.Viper) error {
	names := hetero.Available()
	if s := strings.TrimSpace(v.GetString("calibrate.devices")); s != "" {
		names = nil
		for _, n := range strings.Split(s, ",") {
			if n = strings.TrimSpace(n); n != "" && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return fmt.Errorf("--devices %q names no device", s)
		}
	}
	var devs []hetero.Device
	for _, n := range names {
		d, err := hetero.Lookup(n, v.GetInt("threads"))
		if err != nil {
			return err
		}
		devs = append(devs, d)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	stderr := cmd.ErrOrStderr()
	measured, err := hetero.Calibrate(ctx, devs, hetero.CalibrateOptions{Quick: v.GetBool("calibrate.quick"),
		Progress: func(dev, step string) { fmt.Fprintf(stderr, "calibrating %s: %s\n", dev, step) }})
	if err != nil {
		return err
	}
	// Keep the stored numbers of the devices not measured now; a missing
	// or unreadable profile is replaced.
	p, err := hetero.LoadProfile("")
	if err != nil {
		if !hetero.ProfileReplaceable(err) {
			return err
		}
		if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "replacing the stored profile: %s\n", oneLine(err))
		}
		p = &hetero.Profile{}
	}
	for _, d := range measured.Devices {
		p.Set(d)
	}
	path, err := hetero.SaveProfile(p, "")
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if v.GetBool("json") {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(calibrateReport{Path: path, Devices: measured.Devices})
	}
	if err := printProfiles(out, measured.Devices); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "profile saved to %s\n", path)
	return err
}

// printProfiles writes a table of device profiles: rates, bandwidths and,
// per operation, λ, μ and the format they come from. A λ marked * was
// clamped to 1 (the run beat the model at the peak rate).
func printProfiles(w io.Writer, devs []hetero.DeviceProfile) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "device\tpeak GFLOP/s\tmemory GB/s\tlink GB/s\tttm λ\tttm μ\tttm format\tmttkrp λ\tmttkrp μ\tmttkrp format\tmeasured")
	clamped := false
	for _, d := range devs {
		link := "-"
		if d.LinkGBs > 0 {
			link = fmt.Sprintf("%.1f", d.LinkGBs)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%s", d.Name, d.FMAGFlops, d.MemoryGBs, link)
		for _, op := range hetero.Ops {
			o, ok := d.Op(op)
			if !ok {
				fmt.Fprint(tw, "\t-\t-\t-")
				continue
			}
			mark := ""
			for _, r := range o.Runs {
				if r.Format == o.Format && r.Clamped {
					mark, clamped = "*", true
				}
			}
			fmt.Fprintf(tw, "\t%.3g%s\t%.3g\t%s", o.Lambda, mark, o.Mu, o.Format)
		}
		when := "config"
		if c := d.Calibration; !c.Time.IsZero() {
			when = c.Time.Local().Format("2006-01-02 15:04")
			if c.Quick {
				when += " (quick)"
			}
		}
		if len(d.Overridden) > 0 {
			when += ", config sets " + strings.Join(d.Overridden, " ")
		}
		fmt.Fprintf(tw, "\t%s\n", when)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if clamped {
		_, err := fmt.Fprintln(w, "* λ clamped to 1: the run was faster than the model allows at the peak rate (docs/hetero.md)")
		return err
	}
	return nil
}

// profileSettings collects the profile overrides of the config: the keys
// under profile. of the config file, and SPARSETUNE_PROFILE_* variables,
// read as SPARSETUNE_PROFILE_<DEVICE>_<FIELD> with the device's colon
// written _ (SPARSETUNE_PROFILE_OPENCL_0_TTM_LAMBDA).
func profileSettings(v *viper.Viper) map[string]any {
	m := make(map[string]any)
	for _, k := range v.AllKeys() {
		if strings.HasPrefix(k, "profile.") {
			m[k] = v.Get(k)
		}
	}
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, "SPARSETUNE_PROFILE_")
		if !ok {
			continue
		}
		if key := envProfileKey(strings.ToLower(rest)); key != "" {
			m[key] = val
		} else {
			m["profile."+strings.ToLower(rest)] = val // ApplyOverrides names it as unknown
		}
	}
	return m
}

// envProfileKey turns "opencl_0_ttm_lambda" into
// "profile.opencl:0.ttm.lambda", or "" when the field is not one of
// hetero.OverrideKeys.
func envProfileKey(s string) string {
	dev, rest, ok := strings.Cut(s, "_")
	if !ok {
		return ""
	}
	if idx, after, ok := strings.Cut(rest, "_"); ok {
		if _, err := strconv.Atoi(idx); err == nil {
			dev, rest = dev+":"+idx, after
		}
	}
	for _, f := range hetero.OverrideKeys {
		if strings.ReplaceAll(f, ".", "_") == rest {
			return "profile." + dev + "." + f
		}
	}
	return ""
}

// loadProfile returns the stored profile with the config's overrides, nil
// when none is stored and the config sets nothing; path is where it is
// kept.
func loadProfile(v *viper.Viper) (p *hetero.Profile, path string, err error) {
	path, err = hetero.ProfilePath()
	if err != nil {
		return nil, "", err
	}
	p, err = hetero.LoadProfile(path)
	if errors.Is(err, fs.ErrNotExist) {
		p, err = nil, nil
	}
	if err != nil {
		return nil, path, err
	}
	settings := profileSettings(v)
	if len(settings) == 0 {
		return p, path, nil
	}
	if p == nil {
		p = &hetero.Profile{}
	}
	return p, path, p.ApplyOverrides(settings)
}
