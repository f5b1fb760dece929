package main

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// checkSettings checks what the config file and the SPARSETUNE_*
// variables set for cmd's flags. viper reads a value that does not parse
// as the flag's type as the type's zero, so "threads: abc" in a config
// file ran on every core, and SPARSETUNE_TTM_RANK=8x said the rank was
// 0: each value is parsed here as its flag would parse it, and a bad one
// is an error naming the setting and where it came from. Settings of the
// config file that no command has (known: the keys bound before the
// file was read) are named in a warning, once.
func checkSettings(v *viper.Viper, cmd *cobra.Command, known []string, stderr io.Writer) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return // the command line was parsed by the flag itself
		}
		key := cmd.Name() + "." + f.Name
		if !slices.Contains(known, key) {
			if key = f.Name; !slices.Contains(known, key) {
				return // not a setting
			}
		}
		env := "SPARSETUNE_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(key))
		val, from := any(nil), ""
		if s := os.Getenv(env); s != "" { // viper, too, takes an empty variable for unset
			val, from = s, "environment variable "+env
		} else if v.InConfig(key) {
			val, from = v.Get(key), "config "+v.ConfigFileUsed()+": "+key
		} else {
			return
		}
		if e := parseSetting(f.Value.Type(), val); e != nil {
			err = fmt.Errorf("%s: %v (--%s takes %s)", from, e, f.Name, kindOf(f.Value.Type()))
		}
	})
	if err != nil || v.ConfigFileUsed() == "" {
		return err
	}
	file := viper.New()
	file.SetConfigFile(v.ConfigFileUsed())
	if file.ReadInConfig() != nil {
		return nil // loadConfig read it, and said so if it could not
	}
	var unknown []string
	for _, k := range file.AllKeys() {
		if !slices.Contains(known, k) && !strings.HasPrefix(k, "profile.") {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		fmt.Fprintf(stderr, "warning: config %s: no command has the setting %s (ignored); settings are a command and a flag, e.g. ttm.rank, or threads and json\n",
			v.ConfigFileUsed(), strings.Join(unknown, ", "))
	}
	return nil
}

// parseSetting checks that val, from a config file (a YAML value) or an
// environment variable (a string), parses as a flag of the given pflag
// type.
func parseSetting(typ string, val any) error {
	switch kind := reflect.ValueOf(val).Kind(); {
	case kind == reflect.Map:
		return fmt.Errorf("%v is a table, not a single value", val)
	case kind == reflect.Slice && !strings.HasSuffix(typ, "Slice"):
		return fmt.Errorf("%v is a list, not a single value", val)
	}
	s := fmt.Sprint(val)
	var err error
	switch typ {
	case "int", "int64":
		_, err = strconv.ParseInt(s, 10, 64)
	case "uint", "uint64":
		_, err = strconv.ParseUint(s, 10, 64)
	case "float64":
		_, err = strconv.ParseFloat(s, 64)
	case "bool":
		_, err = strconv.ParseBool(s)
	case "duration":
		_, err = time.ParseDuration(s)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("%q does not parse", s)
	}
	return nil
}

// kindOf names a pflag type for an error message.
func kindOf(typ string) string {
	switch typ {
	case "int", "int64":
		return "an integer"
	case "uint", "uint64":
		return "a non-negative integer"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "duration":
		return "a duration such as 20m or 1h30m"
	}
	return "a " + typ
}
