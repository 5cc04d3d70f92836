// Command postured-load measures postured from outside, as its users see it:
// the load comes from this process, postured and a null HTTPS server run as
// processes of their own, and every figure is a ratio measured in one run
// (medians of several runs), since absolute rates drift with the machine.
//
//	postured-load ingest    --postured ./bin/postured   # posture responses/s against the null server
//	postured-load decisions --postured ./bin/postured   # POST /sessions latency under half load
//	postured-load null                                  # the null HTTPS server alone
//
// See docs/performance.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

type cli struct {
	Ingest    ingestCmd    `cmd:"" help:"Posture responses per second from 64 keep-alive HTTPS clients, postured against the null server, alternating; the ratio's median."`
	Decisions decisionsCmd `cmd:"" help:"POST /sessions latency, one request at a time, idle and while the other clients post posture responses at half the maximum rate, on a preloaded model."`
	Null      nullCmd      `cmd:"" help:"Run the null HTTPS server: reads and decodes a JSON body, answers 201."`
	Decide    decideCmd    `cmd:"" help:"Ask for sessions one at a time and print the latency's median and 99th percentile (run by decisions as a process of its own)."`
}

func main() {
	var c cli
	k := kong.Parse(&c, kong.Name("postured-load"),
		kong.Description("Load generator for postured: ingest and decision benchmarks run against separate processes."))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	k.BindTo(ctx, (*context.Context)(nil))
	if err := k.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "postured-load: %v\n", err)
		os.Exit(1)
	}
}
