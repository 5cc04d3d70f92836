// Command postured is the posture-evaluation controller: `postured serve`
// runs it; other subcommands work on its event log.
//
// Flags and environment variables are read here and nowhere else; every
// package takes an Options struct.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
	kongcompletion "github.com/jotaen/kong-completion"
	"github.com/mattn/go-isatty"
	"github.com/posener/complete"
	"github.com/seed-0809debe/posture"
)

type cli struct {
	Serve       serveCmd       `cmd:"" help:"Run the controller: the client and management APIs over HTTPS."`
	Replay      replayCmd      `cmd:"" help:"Rebuild the projections from the log into a fresh directory, up to a sequence or a time."`
	Audit       auditCmd       `cmd:"" help:"Audit timelines rebuilt from the log."`
	Explain     explainCmd     `cmd:"" help:"Why an identity was (or was not) granted a service at a moment, rebuilt from the log."`
	Backtest    backtestCmd    `cmd:"" help:"What a candidate change of checks and policies would have decided over a window of the log: newly denied and allowed, with the evidence."`
	Events      eventsCmd      `cmd:"" help:"The event log."`
	Transitions transitionsCmd `cmd:"" help:"The transitions stream: why and when identities' access changed."`
	Nats        natsCmd        `cmd:"" help:"Credentials and certificates of an external NATS cluster."`
	Admin       adminCmd       `cmd:"" help:"The default admin's break-glass."`
	Version     versionCmd     `cmd:"" help:"Print the version and the VCS revision."`
	Completion  completionCmd  `cmd:"" help:"Print a shell completion script (bash, zsh or fish) and how to install it."`

	ShowVersion kong.VersionFlag `name:"version" env:"-" help:"Print the version and the VCS revision, and exit."`
}

// completionCmd is kong-completion's command with the shell checked here:
// its own enum lists the empty default among the shells it names.
type completionCmd struct {
	Shell string `arg:"" optional:"" predictor:"shell" help:"bash, zsh or fish; when left out, the one $SHELL names (else the login shell)."`
	Code  bool   `short:"c" env:"-" help:"Print the script itself, for the shell's init file or to be sourced."`
}

func (c *completionCmd) Help() string {
	return "Without -c, on a terminal, prints the command that activates completion in the current shell; put that command in the shell's init file to keep it. " +
		"Into a pipe (source <(postured completion bash)), it prints the script, as with -c."
}

func (c *completionCmd) Validate() error {
	switch c.Shell {
	case "", "bash", "zsh", "fish":
		return nil
	}
	return fmt.Errorf("%q is not a shell postured completes: bash, zsh or fish", c.Shell)
}

func (c *completionCmd) Run(ctx *kong.Context) error {
	shell := c.Shell
	if shell == "" {
		// $SHELL first: the library asks the user database, which names
		// the login shell, not the one running.
		if b := filepath.Base(os.Getenv("SHELL")); b == "bash" || b == "zsh" || b == "fish" {
			shell = b
		}
	}
	return (&kongcompletion.Completion{Shell: shell, Code: c.Code || !terminal(ctx.Stdout)}).Run(ctx)
}

// terminal reports whether w is a terminal.
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// streams are where a command writes its output and its messages.
type streams struct{ out, err io.Writer }

// newParser reads the command line into c; help and usage go to s.
func newParser(c *cli, s streams) (*kong.Kong, error) {
	return kong.New(c,
		kong.Name("postured"),
		kong.Description("Posture-evaluation controller for zero-trust networks. Every flag can also be set as POSTURED_<FLAG> (for example POSTURED_DATA_DIR)."),
		kong.DefaultEnvars("POSTURED"),
		kong.Vars{"version": readBuild().String()},
		kong.Writers(s.out, s.err),
	)
}

// Exit codes: 0 success, 1 the command failed, 2 the command line is wrong.
const (
	exitFailed = 1
	exitUsage  = 2
)

// usageError is a wrong value on a command line that the parser could not
// see (a time, for example): it exits 2 with a hint, as a parse error does.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// exitCodeError is a failure that exits with its own code (backtest's
// exit codes, for example).
type exitCodeError struct {
	code int
	err  error
}

func (e exitCodeError) Error() string { return e.err.Error() }
func (e exitCodeError) Unwrap() error { return e.err }

// complain prints a usage error as one line and a hint where help is, and
// returns the exit code 2.
func complain(w io.Writer, err error, path string) int {
	fmt.Fprintf(w, "postured: error: %s\n", cliText(err))
	fmt.Fprintf(w, "Run '%s --help' for usage.\n", path)
	return exitUsage
}

// cliText is err's text for a person at a terminal: an error of the API's
// vocabulary says its message, or its field and reason, without the API's
// code and generic wording ("COULD_NOT_VALIDATE: The supplied request
// contains...").
func cliText(err error) string {
	var pe *posture.Error
	if !errors.As(err, &pe) {
		return err.Error()
	}
	plain := pe.Message
	switch {
	case pe.Field != "" && plain == "":
		plain = pe.Field + ": " + pe.Reason
	case pe.Field != "":
		plain += " (" + pe.Field + ": " + pe.Reason + ")"
	case plain == "":
		plain = posture.DefaultMessage(pe.Code)
	}
	if pe.Err != nil {
		plain += ": " + pe.Err.Error()
	}
	return strings.Replace(err.Error(), pe.Error(), plain, 1)
}

// commandPath is the command a parse reached ("postured explain"), without
// its positional arguments.
func commandPath(k *kong.Context) string {
	path := "postured"
	if k == nil {
		return path
	}
	if n := k.Selected(); n != nil {
		path = "postured " + n.Path()
	}
	return path
}

// mainCode runs a command line as the postured binary and returns its exit
// code; main exits with it.
func mainCode(ctx context.Context, args []string, s streams) (code int) {
	var c cli
	parser, err := newParser(&c, s)
	if err != nil {
		panic(err) // the command tree is wrong: a bug
	}
	// --version, --help and completion end the parse with kong's Exit:
	// turn that into a return, so that the caller (main or a test) exits.
	type exit struct{ code int }
	parser.Exit = func(code int) { panic(exit{code}) }
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exit)
			if !ok {
				panic(r)
			}
			code = e.code
		}
	}()
	// Shell completion: when the shell asks for completions, answer and exit.
	kongcompletion.Register(parser, kongcompletion.WithPredictor("shell", complete.PredictSet("bash", "zsh", "fish")))
	k, err := parser.Parse(joinNegativeValues(args, negativeFlags(parser.Model)))
	if err != nil {
		var pe *kong.ParseError
		if errors.As(err, &pe) {
			return complain(s.err, err, commandPath(pe.Context))
		}
		return complain(s.err, err, "postured")
	}
	if err := run(ctx, k, s); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return complain(s.err, err, commandPath(k))
		}
		if !errors.As(err, new(reported)) {
			fmt.Fprintln(s.err, "postured:", cliText(err))
		}
		var ce exitCodeError
		if errors.As(err, &ce) {
			return ce.code
		}
		return exitFailed
	}
	return 0
}

// run runs the parsed command with its context (which ends on SIGINT or
// SIGTERM in main) and its streams.
func run(ctx context.Context, k *kong.Context, s streams) error {
	k.BindTo(ctx, (*context.Context)(nil))
	return k.Run(s)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mainCode(ctx, os.Args[1:], streams{out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}

// timeFlags take a time that may be a duration back from now (-2h).
var timeFlags = map[string]bool{"--at": true, "--from": true, "--until": true, "--since": true}

// negativeFlags are the flags whose value may be negative: the times and
// the flags of signed numbers (durations included), whose commands check
// the range and name a negative value they refuse.
func negativeFlags(app *kong.Application) map[string]bool {
	out := maps.Clone(timeFlags)
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			switch f.Target.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Float32, reflect.Float64:
				for _, name := range append([]string{f.Name}, f.Aliases...) {
					out["--"+name] = true
				}
				if f.Short != 0 {
					out["-"+string(f.Short)] = true
				}
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(app.Node)
	return out
}

// joinNegativeValues writes "--at -2h" as "--at=-2h" and "--max-connections
// -1" as "--max-connections=-1" for the flags given: the parser would read
// a value that starts with "-" as a flag, and the docs and help texts give
// times as durations back from now.
func joinNegativeValues(args []string, flags map[string]bool) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if a := args[i]; flags[a] && i+1 < len(args) && len(args[i+1]) > 1 && args[i+1][0] == '-' &&
			args[i+1][1] >= '0' && args[i+1][1] <= '9' {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}
