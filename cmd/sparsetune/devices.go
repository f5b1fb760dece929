package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model"
)

func init() { register(newDevicesCmd) }

func newDevicesCmd(v *viper.Viper) *cobra.Command {
	return &cobra.Command{
		Use:   "devices",
		Short: "List the devices sparsetune can run on, and the backends it did not find",
		Long: `List the devices sparsetune can run on: the CPU, then every accelerator the
OpenCL and CUDA backends find at run time, by the names --device takes
(cpu, opencl:0, cuda:0, ...). A backend whose runtime library is missing
is not an error: it is listed on one line with the reason.

When a profile is stored (sparsetune calibrate), a second table gives each
device's numbers for the CPU/accelerator split, with the config's
overrides applied; in JSON each device has them as "profile".`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDevices(cmd.OutOrStdout(), v)
		},
	}
}

// devicesReport is the JSON of sparsetune devices.
type devicesReport struct {
	Devices  []deviceEntry    `json:"devices"`
	Backends []hetero.Backend `json:"backends"`
	// ProfilePath is where the profile is kept; ProfileError says why
	// it could not be read.
	ProfilePath  string `json:"profile_path,omitempty"`
	ProfileError string `json:"profile_error,omitempty"`
}

// deviceEntry is a device and, when one is stored, its profile.
type deviceEntry struct {
	hetero.Info
	Profile *hetero.DeviceProfile `json:"profile,omitempty"`
	// ProfileStale says the profile was measured on other hardware,
	// driver, thread count or inner loops: calibrate again.
	ProfileStale bool `json:"profile_stale,omitempty"`
}

func runDevices(w io.Writer, v *viper.Viper) error {
	infos := []hetero.Info{hetero.NewCPU(v.GetInt("threads")).Info()}
	rep := devicesReport{Backends: hetero.Backends()}
	for _, b := range rep.Backends {
		infos = append(infos, b.Devices...)
	}
	prof, path, err := loadProfile(v)
	rep.ProfilePath = path
	if err != nil {
		rep.ProfileError = oneLine(err)
	}
	var profiles []hetero.DeviceProfile
	for _, info := range infos {
		e := deviceEntry{Info: info}
		if d, ok := prof.Device(info.Name); ok {
			e.Profile = &d
			e.ProfileStale = !d.Calibration.Time.IsZero() && !d.Matches(info)
			profiles = append(profiles, d)
		}
		rep.Devices = append(rep.Devices, e)
	}
	if v.GetBool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "device\tkind\tmodel\tvendor\tunits\tclock MHz\tmemory\tdriver")
	for _, d := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.1f GiB\t%s\n", d.Name, d.Kind, model.Processor(d.Model, d.Family), d.Vendor,
			d.ComputeUnits, d.ClockMHz, float64(d.GlobalMemory)/(1<<30), d.Driver)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range rep.Backends {
		if b.Missing != "" {
			fmt.Fprintf(w, "%s: not available: %s\n", b.Name, b.Missing)
		}
	}
	switch {
	case rep.ProfileError != "":
		fmt.Fprintf(w, "\nprofile: %s\n", rep.ProfileError)
	case len(profiles) > 0:
		fmt.Fprintf(w, "\nprofile (%s):\n", path)
		if err := printProfiles(w, profiles); err != nil {
			return err
		}
		for _, d := range rep.Devices {
			if d.ProfileStale {
				fmt.Fprintf(w, "%s: profile measured on other hardware, driver, threads or inner loops: run sparsetune calibrate\n", d.Name)
			}
		}
	}
	return nil
}
