package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// exactArgs accepts exactly the positional arguments named, and says which
// are missing or extra and how the command is used, where cobra's own
// check says only "accepts 1 arg(s), received 0".
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return fmt.Errorf("missing %s (usage: %s)", strings.Join(names[len(args):], " and "), cmd.UseLine())
		case len(args) > len(names):
			return fmt.Errorf("unexpected argument %q: %s takes %s (usage: %s)", args[len(names)], cmd.Name(), strings.Join(names, " and "), cmd.UseLine())
		}
		return nil
	}
}

// optionalArg accepts at most one positional argument, named name.
func optionalArg(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return fmt.Errorf("unexpected argument %q: %s takes at most one %s (usage: %s)", args[1], cmd.Name(), name, cmd.UseLine())
		}
		return nil
	}
}

// noArgs accepts no positional argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q: %s takes flags only (usage: %s)", args[0], cmd.Name(), cmd.UseLine())
	}
	return nil
}
