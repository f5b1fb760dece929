package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/internal/atomicfile"
	"github.com/sparsetune/sparsetune/model"
)

func init() { register(newModelCmd) }

func newModelCmd(v *viper.Viper) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Work with predictor model files (ONNX)",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "inspect FILE",
		Short: "Validate a model file and print its heads, classes, budget, features and version",
		Long: `Validate a model file: the ONNX protobuf, sparsetune's metadata, the shapes
of the graph's inputs and outputs, and that onnx-go builds and runs it.
Print its op, heads and their classes, graph budget, layer widths, the global
and node features it expects with their standardisation and training
ranges, and its format version.`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := model.LoadONNX(args[0])
			if err != nil {
				return err
			}
			// A sealed file's graph and trees are read when a
			// prediction needs them: inspect reads them all.
			if err := m.Check(); err != nil {
				return err
			}
			info := m.Info
			if v.GetBool("json") {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "file\t%s (%d bytes, %d weights)\n", info.Path, info.Bytes, info.Weights)
			fmt.Fprintf(tw, "version\tsparsetune model format %d, ONNX IR %d, opset %d\n", info.FormatVersion, info.IRVersion, info.Opset)
			if info.Sealed {
				fmt.Fprintf(tw, "checksum\tCRC-32C of the file, matched\n")
			} else {
				fmt.Fprintf(tw, "checksum\tnone (written before model files had one: sparsetune model seal adds it)\n")
			}
			fmt.Fprintf(tw, "op\t%s\n", info.Op)
			fmt.Fprintf(tw, "features\trevision %d\n", info.FeatureRevision)
			fmt.Fprintf(tw, "budget\t%d row x %d column nodes\n", info.Budget.Rows, info.Budget.Cols)
			fmt.Fprintf(tw, "layers\t2 graph convolutions of width %d, heads %d -> %d -> classes\n", info.Hidden, info.MLP[0], info.MLP[1])
			for _, h := range info.Heads {
				fmt.Fprintf(tw, "head %s\t%s\n", h.Name, strings.Join(h.Classes, ", "))
			}
			if len(info.CPUInnerLoops) > 0 {
				fmt.Fprintf(tw, "cpu inner loops\t%s (of the builds that measured the cpu labels)\n", strings.Join(info.CPUInnerLoops, ", "))
			}
			for _, h := range info.Heads {
				if ps := info.CPUModels[h.Name]; len(ps) > 0 {
					fmt.Fprintf(tw, "processors %s\t%s (whose times trained the head)\n", h.Name, strings.Join(ps, "; "))
				}
			}
			for _, h := range info.Heads {
				if ranks, ok := info.LabelRanks[h.Name]; ok {
					fmt.Fprintf(tw, "label ranks %s\t%s (the ranks its labels were timed at)\n", h.Name, strings.Trim(fmt.Sprint(ranks), "[]"))
				} else {
					fmt.Fprintf(tw, "label ranks %s\tnot recorded (read as %d, the rank of every label before files recorded it)\n", h.Name, model.UnrecordedLabelRank)
				}
			}
			if len(info.TreeHeads) > 0 {
				fmt.Fprintf(tw, "tree heads\t%s (boosted trees on the global features, alone or blended with the gcn, scored level with or above it: predictions for them are the trees', %d nodes in all)\n", strings.Join(info.TreeHeads, ", "), info.TreeNodes)
				if len(info.PackedTrees) == len(info.TreeHeads) {
					fmt.Fprintf(tw, "packed trees\tevery tree head's, scored where they lie in the file\n")
				} else {
					packed := strings.Join(info.PackedTrees, ", ")
					if packed == "" {
						packed = "none"
					}
					fmt.Fprintf(tw, "packed trees\t%s (the others are read from their nodes at first use: sparsetune model seal packs them)\n", packed)
				}
			}
			for _, h := range info.TreeHeads {
				if m, ok := info.BlendMargins[h]; ok {
					fmt.Fprintf(tw, "blend margin %s\t%g (where the trees' first class leads the next by less, the network is asked too and the answer is their mean)\n", h, m)
				}
			}
			if len(info.RuleHeads) > 0 {
				fmt.Fprintf(tw, "rule heads\t%s (the gcn's picks were not faster than the hand rule's: predictions for them are the rule's)\n", strings.Join(info.RuleHeads, ", "))
			}
			fmt.Fprintf(tw, "node features\t%s\n", strings.Join(info.NodeFeatures, ", "))
			fmt.Fprintf(tw, "\nglobal feature\tmean\tstd\ttraining min\tmax\n")
			for i, name := range info.Features {
				fmt.Fprintf(tw, "%s\t%.4g\t%.4g\t%.4g\t%.4g\n", name, info.Mean[i], info.Std[i], info.TrainMin[i], info.TrainMax[i])
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "seal FILE",
		Short: "Bring a model file written by an older build to this build's layout: packed trees and a checksum",
		Long: `Check a model file as inspect does and, if it lacks them, rewrite it with
its trees packed for scoring and with a checksum: the CRC-32C of its bytes,
which every later load checks, so that a file damaged on disk fails to load
instead of predicting with wrong weights. Files written by sparsetune train
and tune-model have both already. A sealed file loads faster: its graph is
read when a prediction first needs it, and a head's packed trees are scored
where they lie in the file, with nothing decoded. Seal only a file that has
been predicting as it should: a file damaged before it is sealed would pass
the checksum.`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("model %s: %w", path, err)
			}
			sealed, added, err := model.Seal(path, data)
			if err != nil {
				return err
			}
			checksum, packed := added.Checksum, added.PackedTrees
			if checksum || packed {
				if err := atomicfile.WriteBytes(path, sealed); err != nil {
					return fmt.Errorf("model %s: %w", path, err)
				}
			}
			var said []string
			if packed {
				said = append(said, "trees packed")
			}
			if checksum {
				said = append(said, "checksum added")
			}
			switch {
			case v.GetBool("json"):
				enc := json.NewEncoder(cmd.OutOrStdout())
				return enc.Encode(struct {
					File     string `json:"file"`
					Checksum bool   `json:"checksum_added"` // false: the file had one
					Packed   bool   `json:"trees_packed"`   // false: they were, or there are none
				}{path, checksum, packed})
			case len(said) > 0:
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", path, strings.Join(said, ", "))
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "%s has a checksum already and nothing to pack\n", path)
			}
			return nil
		},
	})
	return cmd
}
