package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print the tool version",
		usage:   "version [--json]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			asJSON := fs.Bool("json", false, "machine-readable output")
			return func(_ context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("version: unexpected argument %q", args[0])
				}
				if *asJSON {
					return json.NewEncoder(e.stdout).Encode(map[string]string{"version": version, "go": runtime.Version()})
				}
				fmt.Fprintf(e.stdout, "audit %s (%s)\n", version, runtime.Version())
				return nil
			}
		},
	})
}
