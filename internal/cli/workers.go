package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// workerView is a registered worker as GET /api/v1/workers shows it.
type workerView struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Labels     []string  `json:"labels"`
	MilliCPU   int64     `json:"milli_cpu"`
	Memory     int64     `json:"memory"`
	MaxJobs    int       `json:"max_jobs"`
	State      string    `json:"state"`
	Version    string    `json:"version"`
	LastSeenAt time.Time `json:"last_seen_at"`
}

func (a *app) workersCommand() *cobra.Command {
	var cfg clientConfig
	cmd := &cobra.Command{
		Use:     "workers",
		Short:   "List the workers registered with the coordinator",
		Long:    "Workers lists the registered workers: name, state (idle, busy, draining or\noffline), how many jobs they run at once, what they offer and when they were last\nheard from.\n\n" + configHelp,
		Example: "  gantry workers\n  gantry workers --json | jq '.workers[] | select(.state == \"offline\")'",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.workers(cmd.Context(), cfg)
		},
	}
	a.clientFlags(cmd, &cfg)
	return cmd
}

func (a *app) workers(ctx context.Context, cfg clientConfig) error {
	c, err := cfg.client()
	if err != nil {
		return err
	}
	var list struct {
		Workers []workerView `json:"workers"`
	}
	raw, err := c.getRaw(ctx, "/api/v1/workers", &list)
	if err != nil {
		return fmt.Errorf("list workers: %w", err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	if len(list.Workers) == 0 {
		fmt.Fprintln(a.stdout, "no workers")
		return nil
	}
	writeWorkers(a.stdout, list.Workers, a.outputWidth(), time.Now())
	return nil
}

// writeWorkers prints workers as a table of width columns; names and labels are elided.
func writeWorkers(w io.Writer, ws []workerView, width int, now time.Time) {
	const stateW, jobsW, cpuW, memW, seenW = 8, 4, 5, 9, 4
	rest := max(width-stateW-jobsW-cpuW-memW-seenW-2*6-1, 16)
	nameW := rest / 2
	labelsW := rest - nameW
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-*s  %*s  %*s  %*s  %*s  %s\n", nameW, "NAME", stateW, "STATE", jobsW, "JOBS",
		cpuW, "CPU", memW, "MEMORY", seenW, "SEEN", "LABELS")
	for _, x := range ws {
		cpu, mem := "-", "-"
		if x.MilliCPU > 0 {
			cpu = strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", float64(x.MilliCPU)/1000), "0"), ".")
		}
		if x.Memory > 0 {
			mem = humanBytes(x.Memory)
		}
		seen := "-"
		if !x.LastSeenAt.IsZero() {
			seen = formatAge(now.Sub(x.LastSeenAt))
		}
		labels := strings.Join(x.Labels, ",")
		if labels == "" {
			labels = "-"
		}
		fmt.Fprintf(&b, "%s  %-*s  %*d  %*s  %*s  %*s  %s\n", pad(elide(x.Name, nameW), nameW), stateW, x.State, jobsW, x.MaxJobs,
			cpuW, cpu, memW, mem, seenW, seen, elide(labels, labelsW))
	}
	io.WriteString(w, b.String())
}
