// Command release builds postured's release artifacts: version-stamped
// binaries for each target, a Debian package per Linux target (the binary,
// the systemd unit and a sysusers.d entry for the postured user) and a
// SHA256SUMS file over all of them. It is a build tool run by `task release`
// from the repository root, not part of the product.
//
//	go run ./cmd/release --out dist [--targets linux/amd64,linux/arm64,darwin/arm64]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
)

func main() {
	var (
		out     = flag.String("out", "dist", "directory the artifacts are written to (created; must be empty or absent)")
		targets = flag.String("targets", strings.Join(defaultTargets, ","), "GOOS/GOARCH pairs to build, comma-separated")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	arts, err := Release(ctx, Options{Root: ".", Out: *out, Targets: strings.Split(*targets, ",")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	for _, a := range arts {
		fmt.Println(a)
	}
}
