package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/executor/kubernetes"
)

// The pod-* commands run inside a job's pod for the kubernetes executor (see
// docs/kubernetes.md); they are hidden from help, since no one types them.

// podInitConfig is the init container's: where the tools and the workspace are, and
// the URL of the workspace on the worker.
type podInitConfig struct {
	Tools     string
	Workspace string
	Fetch     string
}

func (a *app) podInitCommand() *cobra.Command {
	cfg := podInitConfig{Tools: kubernetes.ToolsPath, Workspace: "/workspace"}
	cmd := &cobra.Command{
		Use:    "pod-init",
		Short:  "Prepare a job's pod: copy this binary for the job's container and fetch the workspace",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := kubernetes.PodInit(cmd.Context(), kubernetes.InitConfig{Tools: cfg.Tools, Workspace: cfg.Workspace, Fetch: cfg.Fetch}); err != nil {
				return fmt.Errorf("pod-init: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Tools, "tools", cfg.Tools, "directory to copy the gantry binary to")
	f.StringVar(&cfg.Workspace, "workspace", cfg.Workspace, "the job's workspace")
	f.StringVar(&cfg.Fetch, "fetch", cfg.Fetch, "URL of the workspace as a tar stream (none: an empty workspace)")
	return cmd
}

// podExecConfig is empty: the step comes on stdin.
type podExecConfig struct{}

func (a *app) podExecCommand() *cobra.Command {
	var cfg podExecConfig
	return &cobra.Command{
		Use:    "pod-exec",
		Short:  "Run the step read from stdin in the job's container (term and kill lines after it stop it)",
		Hidden: true,
		Args:   noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return a.podExec(cfg)
		},
	}
}

func (a *app) podExec(podExecConfig) error {
	if code := kubernetes.PodExec(a.stdin, a.stdout, a.stderr); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// podTarConfig is where the job's workspace is in its container.
type podTarConfig struct {
	Workspace string
}

func (a *app) podTarCommand() *cobra.Command {
	cfg := podTarConfig{Workspace: "/workspace"}
	cmd := &cobra.Command{
		Use:    "pod-tar",
		Short:  "Write the job's workspace to stdout as a tar stream, for the worker to copy it back",
		Hidden: true,
		Args:   noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if err := kubernetes.PodTar(a.stdout, cfg.Workspace); err != nil {
				return fmt.Errorf("pod-tar: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.Workspace, "workspace", cfg.Workspace, "the job's workspace")
	return cmd
}

// podFilesConfig is the directory of a step's files in the job's container.
type podFilesConfig struct {
	Dir string
}

func (a *app) podFilesCommand() *cobra.Command {
	var cfg podFilesConfig
	cmd := &cobra.Command{
		Use:    "pod-files",
		Short:  "Write the step files in a directory to stdout as a tar stream and empty them, for the worker to read after a step",
		Hidden: true,
		Args:   noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if cfg.Dir == "" {
				return usagef("--dir is required")
			}
			if err := kubernetes.PodFiles(a.stdout, cfg.Dir); err != nil {
				return fmt.Errorf("pod-files: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.Dir, "dir", "", "the directory of the step files")
	return cmd
}

// podHoldConfig is empty: pod-hold only waits.
type podHoldConfig struct{}

func (a *app) podHoldCommand() *cobra.Command {
	var cfg podHoldConfig
	return &cobra.Command{
		Use:    "pod-hold",
		Short:  "Keep a job's container alive until it is stopped, reaping the orphans of its steps",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.podHold(cmd.Context(), cfg)
		},
	}
}

func (a *app) podHold(ctx context.Context, _ podHoldConfig) error {
	kubernetes.PodHold(ctx)
	return nil
}
