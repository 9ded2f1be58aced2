package cli

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/spf13/cobra"
)

// burnCommand is the CPU burner `gantry bench --noise` runs beside a scenario: a busy
// loop per core until it is stopped, so that the scenario is measured on a machine whose
// CPUs another process wants too. Hidden: it is a tool of bench, not of users.
func (a *app) burnCommand() *cobra.Command {
	loops := runtime.NumCPU()
	cmd := &cobra.Command{
		Use:    "bench-burn",
		Short:  "Keep every core busy until stopped (used by gantry bench --noise)",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if loops < 1 {
				return &usageError{fmt.Errorf("--loops %d: want at least 1", loops)}
			}
			burn(cmd.Context(), loops)
			return nil
		},
	}
	cmd.Flags().IntVar(&loops, "loops", loops, "busy loops to run, one per core by default")
	return cmd
}

// burn spins loops goroutines until ctx ends.
func burn(ctx context.Context, loops int) {
	done := make(chan struct{}, loops)
	for range loops {
		go func() {
			defer func() { done <- struct{}{} }()
			x := uint64(1)
			for {
				for i := 0; i < 1<<20; i++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
				burnSink.Store(x)
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	for range loops {
		<-done
	}
}

// burnSink keeps the loops' result alive, so the compiler cannot drop their work.
var burnSink atomic.Uint64
