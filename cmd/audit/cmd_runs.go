package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/fedaudit/fedaudit/runs"
)

func init() {
	register(&command{
		name:    "runs",
		summary: "inspect run files: schema, config, shards, rows per world and round",
		usage: "runs inspect FILE|DIR [--json]\n\n" +
			"FILE is one run file (.arrow); DIR a directory of shard files read as one table, or an\n" +
			"experiment directory (its run files in DIR/runs).",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			asJSON := fs.Bool("json", false, "machine-readable output")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("runs: missing subcommand (want: inspect)")
				}
				if args[0] != "inspect" {
					return usagef("runs: unknown subcommand %q (want: inspect)", args[0])
				}
				pos, err := parseInterspersed(fs, args[1:])
				if errors.Is(err, flag.ErrHelp) {
					printCommandHelp(e.stdout, commands["runs"], fs)
					return nil
				}
				if err != nil {
					return usagef("runs inspect: %v (see 'audit runs --help')", err)
				}
				if len(pos) == 0 {
					return usagef("runs inspect: missing run file or directory")
				}
				if len(pos) > 1 {
					return usagef("runs inspect: unexpected argument %q", pos[1])
				}
				path := pos[0]
				// An experiment directory holds its run files in runs/ (and a score file
				// beside it, which is not a run file): inspect those, as status does.
				if st, err := os.Stat(path); err == nil && st.IsDir() {
					path = runsDirOf(path)
				}
				s, err := inspectRuns(ctx, path)
				if err != nil {
					return fmt.Errorf("runs inspect: %w", err)
				}
				if *asJSON {
					return json.NewEncoder(e.stdout).Encode(s)
				}
				s.print(e.stdout)
				return nil
			}
		},
	})
}

// runsSummary is what `audit runs inspect` reports; its JSON form is the --json output.
type runsSummary struct {
	Path          string          `json:"path"`
	FormatVersion string          `json:"format_version"`
	ToolVersion   string          `json:"tool_version"`
	DatasetHash   string          `json:"dataset_sha256"`
	Config        json.RawMessage `json:"config"`
	Shards        []shardSummary  `json:"shards"`
	Columns       []runs.Column   `json:"columns"`
	Rows          int             `json:"rows"`
	Runs          int             `json:"runs"`
	Pairs         int             `json:"pairs"`
	ParamDim      int             `json:"param_dim"`
	UploadDim     int             `json:"upload_dim"`
	// Canaries is k, the canaries of every run (0: none).
	Canaries int            `json:"canaries,omitempty"`
	Rounds   []roundSummary `json:"rounds"`
}

type shardSummary struct {
	Shard   string `json:"shard"`
	Path    string `json:"path"`
	Batches int    `json:"batches"`
}

type roundSummary struct {
	Round    int32 `json:"round"`
	C        int   `json:"c"`
	CPrime   int   `json:"c_prime"`
	Diverged int   `json:"diverged"`
}

func inspectRuns(ctx context.Context, path string) (*runsSummary, error) {
	tab, err := runs.Open(path)
	if err != nil {
		return nil, err
	}
	defer tab.Close()
	m := tab.Meta()
	s := &runsSummary{
		Path:          path,
		FormatVersion: m.Version,
		Canaries:      m.Canaries,
		ToolVersion:   m.ToolVersion,
		DatasetHash:   m.DatasetHash,
		Config:        json.RawMessage(m.Config),
		Columns:       m.Columns(),
		Rounds:        []roundSummary{},
	}
	for _, sf := range tab.Shards() {
		s.Shards = append(s.Shards, shardSummary{Shard: sf.Shard.String(), Path: sf.Path, Batches: sf.Batches})
	}
	byRound := map[int32]*roundSummary{}
	runIDs, pairIDs := map[int64]bool{}, map[int64]bool{}
	err = tab.Scan(ctx, func(r runs.Row) error {
		s.Rows++
		runIDs[r.RunID], pairIDs[r.PairID] = true, true
		s.ParamDim, s.UploadDim = max(s.ParamDim, len(r.Params)), max(s.UploadDim, len(r.Upload))
		rs := byRound[r.Round]
		if rs == nil {
			rs = &roundSummary{Round: r.Round}
			byRound[r.Round] = rs
		}
		if r.World == runs.WorldC {
			rs.C++
		} else {
			rs.CPrime++
		}
		if r.Diverged {
			rs.Diverged++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.Runs, s.Pairs = len(runIDs), len(pairIDs)
	for _, rs := range byRound {
		s.Rounds = append(s.Rounds, *rs)
	}
	sort.Slice(s.Rounds, func(i, j int) bool { return s.Rounds[i].Round < s.Rounds[j].Round })
	return s, nil
}

func (s *runsSummary) print(w io.Writer) {
	fmt.Fprintf(w, "path     %s\n", s.Path)
	fmt.Fprintf(w, "format   fedaudit run file, version %s\n", s.FormatVersion)
	fmt.Fprintf(w, "tool     %s\n", s.ToolVersion)
	fmt.Fprintf(w, "dataset  sha256 %s\n", s.DatasetHash)
	fmt.Fprintf(w, "shards   %d file(s)\n", len(s.Shards))
	for _, sh := range s.Shards {
		fmt.Fprintf(w, "  %-7s %s (%d batches)\n", sh.Shard, sh.Path, sh.Batches)
	}
	fmt.Fprintf(w, "columns\n")
	for _, c := range s.Columns {
		fmt.Fprintf(w, "  %-20s %s\n", c.Name, c.Type)
	}
	fmt.Fprintf(w, "config\n")
	var pretty bytes.Buffer
	if json.Indent(&pretty, s.Config, "  ", "  ") == nil {
		fmt.Fprintf(w, "  %s\n", pretty.String())
	}
	fmt.Fprintf(w, "rows     %d (%d runs, %d pairs", s.Rows, s.Runs, s.Pairs)
	if s.ParamDim > 0 {
		fmt.Fprintf(w, ", %d parameters", s.ParamDim)
	}
	if s.UploadDim > 0 {
		fmt.Fprintf(w, ", uploads of %d", s.UploadDim)
	}
	fmt.Fprintf(w, ")\n")
	if s.Canaries > 0 {
		fmt.Fprintf(w, "canaries %d per run, each included with probability 1/2 (column canary_in)\n", s.Canaries)
	}
	if len(s.Rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "rows per round and world\n")
	fmt.Fprintf(w, "  %6s %6s %6s %9s\n", "round", "C", "C'", "diverged")
	for _, r := range s.Rounds {
		fmt.Fprintf(w, "  %6d %6d %6d %9d\n", r.Round, r.C, r.CPrime, r.Diverged)
	}
}
