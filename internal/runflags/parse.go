// Package runflags is the command line of `bridge run`: its flags, their
// BRIDGE_* environment variables and the daemon.Config they make. The
// bridge binary parses its flags with it, and so do the deployment tests
// (deploy/), which feed it the container args a Helm chart renders: a flag
// the chart sets that the binary does not know fails there as it would in
// a pod.
package runflags

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvPrefix starts the environment variable of every flag.
const EnvPrefix = "BRIDGE_"

// Parse parses args into fs, then sets every flag the command line did
// not set from its environment variable, BRIDGE_<FLAG_IN_UPPER_SNAKE>
// (--data-dir ↔ BRIDGE_DATA_DIR), when that variable is not empty: an
// empty assignment reads as "unset", as in most tools. The command line
// always wins, so an exported variable never overrides what the operator
// typed. A value the flag refuses is an error naming the variable; flags
// that hold secrets are strings, which accept any value, so the error
// never has one to repeat.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		name := EnvName(f.Name)
		val := os.Getenv(name)
		if val == "" {
			return
		}
		if serr := fs.Set(f.Name, val); serr != nil {
			err = fmt.Errorf("environment variable %s is not a valid --%s: %v", name, f.Name, serr)
		}
	})
	return err
}

// EnvName is the environment variable of a flag: --data-dir is
// BRIDGE_DATA_DIR.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
