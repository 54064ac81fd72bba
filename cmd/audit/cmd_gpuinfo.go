package main

import (
	"context"
	"encoding/json"
	"flag"

	"github.com/fedaudit/fedaudit/cuda"
)

func init() {
	register(&command{
		name:    "gpu-info",
		summary: "check that the GPU backend runs here: driver, device, memory, cuBLAS, kernels",
		usage:   "gpu-info [--device N] [--json]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			device := fs.Int("device", 0, "device ordinal to inspect")
			asJSON := fs.Bool("json", false, "machine-readable output")
			return func(_ context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("gpu-info: unexpected argument %q", args[0])
				}
				// Exit status 1 with the reason whenever the backend cannot run: a build
				// without the gpu tag, no device, cuBLAS missing, PTX the driver refuses.
				info, err := cuda.GPUInfo(*device)
				if *asJSON {
					out := struct {
						*cuda.Info
						OK    bool   `json:"ok"`
						Error string `json:"error,omitempty"`
					}{Info: info, OK: err == nil}
					if err != nil {
						out.Error = err.Error()
					}
					if jerr := json.NewEncoder(e.stdout).Encode(out); jerr != nil {
						return jerr
					}
					return err
				}
				if info != nil && info.Build != "no GPU backend" {
					info.Write(e.stdout)
				}
				return err
			}
		},
	})
}
