package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSettingsChecked: a value in the config file or a SPARSETUNE_*
// variable that does not parse as its flag's type is an error naming the
// setting and where it came from (viper would read it as 0 or false), a
// config key no command has is named in a warning, and good values and
// the command line pass.
func TestSettingsChecked(t *testing.T) {
	for _, c := range []struct {
		name   string
		config string // written to sparsetune.yaml and named with --config
		env    [2]string
		args   []string
		err    string // "" for success
		warn   string
	}{
		{name: "threads not a number", config: "threads: abc\n", args: []string{"info"},
			err: `threads: "abc" does not parse (--threads takes an integer)`},
		{name: "json not a bool", config: "json: maybe\n", args: []string{"info"},
			err: `json: "maybe" does not parse (--json takes true or false)`},
		{name: "rank a fraction", config: "predict:\n  rank: 1.5\n", args: []string{"predict"},
			err: `predict.rank: "1.5" does not parse (--rank takes an integer)`},
		{name: "a list for a string", config: "predict:\n  op: [ttm, mttkrp]\n", args: []string{"predict"},
			err: "predict.op: [ttm mttkrp] is a list, not a single value"},
		{name: "variable", env: [2]string{"SPARSETUNE_PREDICT_ITERS", "2x"}, args: []string{"predict"},
			err: `environment variable SPARSETUNE_PREDICT_ITERS: "2x" does not parse (--iters takes an integer)`},
		{name: "an empty variable is unset", env: [2]string{"SPARSETUNE_THREADS", ""}, args: []string{"info"}},
		{name: "the command line wins", env: [2]string{"SPARSETUNE_PREDICT_ITERS", "2x"}, args: []string{"predict", "--iters", "3"}},
		{name: "another command's setting", config: "predict:\n  mode: 1\ncpd:\n  rank: x\n", args: []string{"predict"}},
		{name: "unknown key", config: "rank: 5\npredict:\n  mode: 1\n  bogus: 2\n", args: []string{"predict"},
			warn: "no command has the setting predict.bogus, rank (ignored)"},
		{name: "threads out of range in the config", config: "threads: -4\n", args: []string{"info"},
			err: "sparsetune.yaml: threads must be 0 (all cores) to "},
		{name: "threads out of range in a variable", config: "threads: 1\n", env: [2]string{"SPARSETUNE_THREADS", "100000"}, args: []string{"info"},
			err: "environment variable SPARSETUNE_THREADS: threads must be 0 (all cores) to "},
		{name: "good values", config: "threads: 0\njson: true\npredict:\n  mode: 2\n", args: []string{"predict"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := tempUserDirs(t)
			args := c.args
			if c.config != "" {
				path := filepath.Join(dir, "sparsetune.yaml")
				if err := os.WriteFile(path, []byte(c.config), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			_, stderr, err := run(t, args...)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one saying %q", err, c.err)
			}
			if c.warn != "" && !strings.Contains(stderr, c.warn) {
				t.Errorf("stderr %q, want a warning saying %q", stderr, c.warn)
			}
			if c.warn == "" && strings.Contains(stderr, "no command has the setting") {
				t.Errorf("warning with no unknown setting: %q", stderr)
			}
		})
	}
}
