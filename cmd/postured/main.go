// Command postured is the posture-evaluation controller: `postured serve`
// runs it; other subcommands work on its event log.
//
// Flags and environment variables are read here and nowhere else; every
// package takes an Options struct.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

// Build information, set with -ldflags "-X main.version=...".
var (
	version   = "0.1.0-dev"
	revision  = "unknown"
	buildDate = "unknown"
)

type cli struct {
	Serve   serveCmd   `cmd:"" help:"Run the controller: the client and management APIs over HTTPS."`
	Replay  replayCmd  `cmd:"" help:"Rebuild the projections from the log into a fresh directory, up to a sequence or a time."`
	Audit   auditCmd   `cmd:"" help:"Audit timelines rebuilt from the log."`
	Explain explainCmd `cmd:"" help:"Why an identity was (or was not) granted a service at a moment, rebuilt from the log."`
	Events  eventsCmd  `cmd:"" help:"The event log."`
	Nats    natsCmd    `cmd:"" help:"Credentials and certificates of an external NATS cluster."`
	Version versionCmd `cmd:"" help:"Print the version."`
}

type versionCmd struct{}

func (versionCmd) Run(s streams) error {
	_, err := fmt.Fprintf(s.out, "postured %s (revision %s, built %s)\n", version, revision, buildDate)
	return err
}

// streams are where a command writes its output and its messages.
type streams struct{ out, err io.Writer }

// newParser reads the command line into c; help and usage go to s.
func newParser(c *cli, s streams) (*kong.Kong, error) {
	return kong.New(c,
		kong.Name("postured"),
		kong.Description("Posture-evaluation controller for zero-trust networks. Every flag can also be set as POSTURED_<FLAG> (for example POSTURED_DATA_DIR)."),
		kong.DefaultEnvars("POSTURED"),
		kong.UsageOnError(),
		kong.Writers(s.out, s.err),
	)
}

// run runs the parsed command with its context (which ends on SIGINT or
// SIGTERM in main) and its streams.
func run(ctx context.Context, k *kong.Context, s streams) error {
	k.BindTo(ctx, (*context.Context)(nil))
	return k.Run(s)
}

func main() {
	var c cli
	std := streams{os.Stdout, os.Stderr}
	parser, err := newParser(&c, std)
	if err != nil {
		panic(err) // the command tree is wrong: a bug
	}
	k, err := parser.Parse(os.Args[1:])
	parser.FatalIfErrorf(err)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, k, std)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "postured:", err)
		os.Exit(1)
	}
}
