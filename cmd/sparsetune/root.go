package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// commands holds the constructors of the subcommands. Each command's file
// adds its own in an init function, so commands can be added side by side
// without touching this file.
var commands []func(*viper.Viper) *cobra.Command

func register(newCmd func(*viper.Viper) *cobra.Command) { commands = append(commands, newCmd) }

func init() { register(newInfoCmd); register(newConvertCmd) }

// newRootCmd builds the command tree with its own viper instance, so tests
// can run commands side by side without sharing settings.
func newRootCmd() *cobra.Command {
	v := viper.New()
	root := &cobra.Command{
		Use:           "sparsetune",
		Short:         "Sparse tensor kernels in the format best suited to each tensor and device",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			known := v.AllKeys() // the commands' settings: nothing read yet
			if err := loadConfig(v, cmd); err != nil {
				return err
			}
			if err := checkSettings(v, cmd, known, cmd.ErrOrStderr()); err != nil {
				return err
			}
			n := v.GetInt("threads")
			if limit := maxThreads(); n < 0 || n > limit {
				err := fmt.Errorf("threads must be 0 (all cores) to %d on this machine, found %d", limit, n)
				// Say where the value came from when not from the flag: the
				// environment wins over the config file, as viper reads them.
				if f := cmd.Flags().Lookup("threads"); f == nil || !f.Changed {
					if os.Getenv("SPARSETUNE_THREADS") != "" {
						err = fmt.Errorf("environment variable SPARSETUNE_THREADS: %w", err)
					} else if v.InConfig("threads") {
						err = fmt.Errorf("config %s: %w", v.ConfigFileUsed(), err)
					}
				}
				return err
			}
			if n > 0 {
				runtime.GOMAXPROCS(n)
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (default: ./sparsetune.yaml, then $XDG_CONFIG_HOME/sparsetune/sparsetune.yaml)")
	pf.Int("threads", 0, "worker threads (0 = all cores)")
	pf.Bool("json", false, "print JSON instead of a table")
	for _, name := range []string{"threads", "json"} {
		_ = v.BindPFlag(name, pf.Lookup(name))
	}
	for _, newCmd := range commands {
		root.AddCommand(newCmd(v))
	}
	return root
}

// loadConfig reads the config file, if any, and the SPARSETUNE_* variables.
// A config file named with --config must exist; the default locations are
// optional.
func loadConfig(v *viper.Viper, cmd *cobra.Command) error {
	v.SetEnvPrefix("SPARSETUNE")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	v.AutomaticEnv()
	path, _ := cmd.Flags().GetString("config")
	if path == "" {
		path = os.Getenv("SPARSETUNE_CONFIG")
	}
	if path != "" {
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
		return nil
	}
	// The default locations are searched by full name: viper's own search
	// also takes a file named just "sparsetune", which in a source tree
	// is the binary `go build ./cmd/sparsetune` leaves there.
	dirs := []string{"."}
	if dir, err := os.UserConfigDir(); err == nil {
		dirs = append(dirs, filepath.Join(dir, "sparsetune"))
	}
	for _, dir := range dirs {
		for _, name := range []string{"sparsetune.yaml", "sparsetune.yml"} {
			path := filepath.Join(dir, name)
			if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
				continue
			}
			v.SetConfigFile(path)
			if err := v.ReadInConfig(); err != nil {
				return fmt.Errorf("config %s: %w", path, err)
			}
			return nil
		}
	}
	return nil
}

// oneLine folds an error message onto one line: errors from libraries (YAML
// parsers, for one) sometimes span several.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// maxThreads is the most worker threads --threads takes: eight per core,
// and at least 256, enough to oversubscribe any machine for a test. The
// kernels start a goroutine per thread for each piece of work, so 10^5 of
// them made a millisecond's run take a minute, and Go ends a process past
// 10,000 threads.
func maxThreads() int { return max(256, 8*runtime.NumCPU()) }
