// Command audit audits the privacy of differentially-private federated learning by experiment:
// it trains coupled pairs of runs on adjacent datasets, attacks them, and turns the attack
// scores into certified lower bounds on mu (Gaussian DP) and epsilon, set beside the theory.
//
// Usage:
//
//	audit <command> [flags]
//
// Run `audit help` for the list of commands and `audit <command> --help` for one command.
// Exit codes: 0 success, 1 failure, 2 usage or configuration error, 3 a claim is violated (the
// audit itself succeeded: its headline says "violated"), 4 inconclusive (the audit completed
// but gives no verdict: most runs diverged, or no attack observed what the claim is about; its
// headline says "inconclusive"), 130 interrupted (SIGINT, SIGTERM or
// SIGHUP).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/vbauerster/mpb/v8"
)

// version is the tool version recorded in every run file; release builds set it with
// -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// command is one subcommand of audit. Each lives in its own file and registers itself in init,
// so the table grows without every command touching one shared file.
type command struct {
	name    string
	summary string // one line for `audit help`
	usage   string // the synopsis after "audit ", e.g. "bound --algo A [flags]"
	// flags, when set, declares the command's flags on fs before parsing; the parsed values are
	// read by run through the closures it set up.
	flags func(fs *flag.FlagSet) func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("audit: command registered twice: " + c.name) // programming error, caught by any test
	}
	commands[c.name] = c
}

// env is what a command may touch of the outside world; tests substitute buffers.
type env struct {
	stdout io.Writer
	stderr io.Writer
	// quiet suppresses progress bars and log lines on stderr (--quiet). Progress bars are drawn
	// only when stderr is a terminal; log lines go to pipes and files too, so batch jobs keep
	// them. Errors, warnings and the output on stdout are never suppressed.
	quiet bool
	// stderrIsTerminal enables progress bars.
	stderrIsTerminal bool
	// bars are the progress bars being drawn, if any: log lines go through them, above the
	// bars, since a line written to the terminal beside them was erased by their next redraw
	// (which moves the cursor up over the lines it drew and clears below).
	bars atomic.Pointer[mpb.Progress]
}

// quietUsage says exactly what --quiet silences; README.md quotes it.
const quietUsage = "silence the progress bars and log lines on stderr; errors and warnings still go to stderr, and the output (the verdict headline and tables, or --json) to stdout"

// logf writes a log line to stderr unless quiet.
func (e *env) logf(format string, args ...any) {
	if e.quiet {
		return
	}
	line := fmt.Sprintf(format+"\n", args...)
	if bars := e.bars.Load(); bars != nil {
		if _, err := bars.Write([]byte(line)); err == nil {
			return
		}
	}
	io.WriteString(e.stderr, line)
}

// usageError marks a mistake in how the command was called; it exits with status 2. input
// marks one in the contents of a file the command line names (a score file's row, a
// manifest's): its message names the line, and the command's help does not fix it.
type usageError struct {
	msg   string
	input bool
}

func (u *usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// inputf is usagef for a mistake in an input file's contents (exit status 2, no pointer to
// --help).
func inputf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), input: true}
}

func main() {
	// SIGHUP (the terminal or ssh session closed) stops work like SIGINT and SIGTERM: the
	// stages see the cancelled context, writers remove their temporary files, exit 130.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(exitCode(os.Stderr, err))
}

// violatedError marks an audit that completed and found a claim violated: the output is
// printed, and the exit status is 3 so that a pipeline can gate on it.
type violatedError struct{ headline string }

func (v *violatedError) Error() string { return "verdict: violated (exit status 3)" }

// inconclusiveError marks an audit that completed but gives no verdict because its runs do not
// show the mechanism (most runs diverged): the output is printed, and the exit status is 4, so
// that a pipeline never reads it as consistent.
type inconclusiveError struct{ headline string }

func (v *inconclusiveError) Error() string { return "verdict: inconclusive (exit status 4)" }

// verdictStatus is the error that makes a command exit with status 3 when the analysis's
// headline is a violation, 4 when it is inconclusive, nil otherwise.
func verdictStatus(a *findings.Analysis) error {
	switch {
	case a != nil && a.Headline.Violated():
		return &violatedError{headline: a.Headline.Text}
	case a != nil && a.Headline.Inconclusive():
		return &inconclusiveError{headline: a.Headline.Text}
	}
	return nil
}

// exitCode reports err on stderr and maps it to the process exit status.
func exitCode(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	if onlyViolation(err) {
		fmt.Fprintf(stderr, "audit: %v\n", err)
		var inc *inconclusiveError
		if errors.As(err, &inc) {
			return 4
		}
		return 3
	}
	if errors.Is(err, context.Canceled) {
		// Only the interrupt signal cancels the program's context.
		fmt.Fprintf(stderr, "audit: interrupted\n")
		return 130
	}
	var u *usageError
	var ce *spec.ConfigError
	if errors.As(err, &u) || errors.As(err, &ce) {
		fmt.Fprintf(stderr, "audit: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "audit: %v\n", err)
	return 1
}

// onlyViolation reports whether every error joined in err is a verdict (violated or
// inconclusive), so that a real failure beside it still exits with status 1.
func onlyViolation(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyViolation(e) {
				return false
			}
		}
		return true
	}
	switch err.(type) {
	case *violatedError, *inconclusiveError, *checkFailedError:
		return true
	}
	return false
}

// run is the whole program behind main, with its outside world passed in so that tests drive
// it end to end.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	e := &env{stdout: stdout, stderr: stderr, stderrIsTerminal: isTerminal(stderr)}
	if len(args) == 0 {
		printHelp(stderr)
		return usagef("no command given")
	}
	name := args[0]
	switch name {
	case "--version", "-version":
		return run(ctx, append([]string{"version"}, args[1:]...), stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			switch args[1] {
			case "-h", "-help", "--help":
				printHelpUsage(stdout)
				return nil
			}
			if c, ok := commands[args[1]]; ok {
				if len(args) > 2 {
					return usagef("help: unexpected argument %q (see 'audit help --help')", args[2])
				}
				return run(ctx, []string{c.name, "--help"}, stdout, stderr)
			}
			return usagef("unknown command %q (see 'audit help')", args[1])
		}
		printHelp(stdout)
		return nil
	}
	c, ok := commands[name]
	if !ok {
		return usagef("unknown command %q (see 'audit help')", name)
	}
	fs := flag.NewFlagSet("audit "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&e.quiet, "quiet", false, quietUsage)
	body := c.flags(fs)
	fs.Usage = func() {}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(stdout, c, fs)
			return nil
		}
		return usagef("%s: %v (see 'audit %s --help')", name, err, name)
	}
	// Every command's --workers means the same: 0 for all cores, else that many.
	if f := fs.Lookup("workers"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n < 0 {
			return usagef("%s: --workers must be >= 0 (0: all cores), got %d", name, n)
		}
	}
	err = body(ctx, e, pos)
	// Every usage error points at the command's help, as the flag parser's do: a missing
	// --config or an extra argument said what was wrong but not where to look.
	var u *usageError
	if errors.As(err, &u) && !u.input && !strings.Contains(u.msg, "--help')") {
		u.msg += fmt.Sprintf(" (see 'audit %s --help')", name)
	}
	return err
}

func printHelp(w io.Writer) {
	fmt.Fprintf(w, "audit audits differentially-private federated learning by experiment.\n\n")
	fmt.Fprintf(w, "Usage:\n  audit <command> [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'audit <command> --help' for a command's flags, 'audit --version' for the version.\n")
	fmt.Fprintf(w, "\nExit status: 0 success (no claim violated; also a NO CLAIM headline, where neither a claim\n"+
		"nor a bound of the theory was there to judge: state a claim to gate on), 1 failure, 2 usage or\n"+
		"configuration error, 3 the audit found a claim violated, 4 inconclusive (the audit completed but\n"+
		"gives no verdict: most runs of an audited checkpoint diverged, no attack observed what the\n"+
		"claim is about, a grey-box check failed, or the scores read the wrong way round), 130 interrupted.\n")
}

// printHelpUsage is `audit help --help`: help is no registered command (it lists them).
func printHelpUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: audit help [COMMAND]\n\n"+
		"list the commands, or show one command's usage and flags (the same as 'audit COMMAND --help')\n")
}

func printCommandHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: audit %s\n\n%s\n\nFlags:\n", c.usage, c.summary)
	printFlags(w, fs)
}

// printFlags lists fs's flags as flag.PrintDefaults does, but spelt --name, as the usage
// lines, messages and docs spell them (the flag package accepts both forms).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		fmt.Fprintf(&b, "  --%s", f.Name)
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !isZeroFlagValue(f) {
			if fmt.Sprintf("%T", f.Value) == "*flag.stringValue" {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, b.String())
	})
}

// isZeroFlagValue reports whether f's default is its type's zero value, which the list leaves
// out (as flag.PrintDefaults does).
func isZeroFlagValue(f *flag.Flag) (zero bool) {
	typ := reflect.TypeOf(f.Value)
	var z reflect.Value
	if typ.Kind() == reflect.Pointer {
		z = reflect.New(typ.Elem())
	} else {
		z = reflect.Zero(typ)
	}
	defer func() {
		if recover() != nil {
			zero = false // a Value whose String needs more than its zero value: show the default
		}
	}()
	return f.DefValue == z.Interface().(flag.Value).String()
}

// isTerminal reports whether w is a character device other than the null device (a
// terminal), so progress bars are drawn only for people, never into logs, pipes or
// 2>/dev/null.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(st, null) {
		return false
	}
	return true
}

// splitList splits a comma-separated flag value into its trimmed items. An empty value is no
// item, but an empty item inside one ("1,,2", "a,") is kept, so that each flag's parser refuses
// it: dropping it silently hid a typo (a number left out of --rounds).
func splitList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	out := strings.Split(s, ",")
	for i, p := range out {
		out[i] = strings.TrimSpace(p)
	}
	return out
}

// writeJSON writes v indented, for --json output.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// flagDash finds a flag's name as the flag package writes it, with one dash.
var flagDash = regexp.MustCompile(`(flag |: )-([A-Za-z0-9][-A-Za-z0-9]*)`)

// flagError writes the flag package's errors with the flags as fedaudit spells them
// everywhere, --name ("flag provided but not defined: -bogus" for --bogus read as another
// way of writing flags). ErrHelp passes through.
func flagError(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errors.New(flagDash.ReplaceAllString(err.Error(), "$1--$2"))
}

// parseInterspersed parses flags wherever they appear among args, so that
// `audit datasets inspect NAME --json` works as well as flags before NAME; it returns the
// positional arguments. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, flagError(err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
