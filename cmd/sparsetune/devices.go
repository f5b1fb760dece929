package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/hetero"
)

func init() { register(newDevicesCmd) }

func newDevicesCmd(v *viper.Viper) *cobra.Command {
	return &cobra.Command{
		Use:   "devices",
		Short: "List the devices sparsetune can run on, and the backends it did not find",
		Long: `List the devices sparsetune can run on: the CPU, then every accelerator the
OpenCL and CUDA backends find at run time, by the names --device takes
(cpu, opencl:0, cuda:0, ...). A backend whose runtime library is missing
is not an error: it is listed on one line with the reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDevices(cmd.OutOrStdout(), v.GetInt("threads"), v.GetBool("json"))
		},
	}
}

// devicesReport is the JSON of sparsetune devices.
type devicesReport struct {
	Devices  []hetero.Info    `json:"devices"`
	Backends []hetero.Backend `json:"backends"`
}

func runDevices(w io.Writer, threads int, asJSON bool) error {
	rep := devicesReport{Devices: []hetero.Info{hetero.NewCPU(threads).Info()}, Backends: hetero.Backends()}
	for _, b := range rep.Backends {
		rep.Devices = append(rep.Devices, b.Devices...)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "device\tkind\tmodel\tvendor\tunits\tclock MHz\tmemory\tdriver")
	for _, d := range rep.Devices {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.1f GiB\t%s\n", d.Name, d.Kind, d.Model, d.Vendor,
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
	return nil
}
