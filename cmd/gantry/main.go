// Command gantry is the single Gantry binary: coordinator, worker and command-line client.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gantry-ci/gantry/internal/cli"
)

func main() {
	// The first SIGINT or SIGTERM cancels the context so subcommands can stop cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// Once that has happened, restore the default handling so a second signal kills the
	// process at once instead of being swallowed while a shutdown hangs.
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
