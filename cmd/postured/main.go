// Command postured is the posture-evaluation controller: `postured serve`
// runs it; other subcommands work on its event log.
//
// Flags and environment variables are read here and nowhere else; every
// package takes an Options struct.
package main

import (
	"fmt"
	"os"

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
	Version versionCmd `cmd:"" help:"Print the version."`
}

type versionCmd struct{}

func (versionCmd) Run() error {
	fmt.Printf("postured %s (revision %s, built %s)\n", version, revision, buildDate)
	return nil
}

func main() {
	var c cli
	ctx := kong.Parse(&c,
		kong.Name("postured"),
		kong.Description("Posture-evaluation controller for zero-trust networks. Every flag can also be set as POSTURED_<FLAG> (for example POSTURED_DATA_DIR)."),
		kong.DefaultEnvars("POSTURED"),
		kong.UsageOnError(),
	)
	if err := ctx.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "postured:", err)
		os.Exit(1)
	}
}
