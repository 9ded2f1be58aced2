//go:build !linux

package executor

import (
	"log/slog"
	"os/exec"
	"syscall"
)

// Containment is Linux only; elsewhere a step is contained by its process group.
type Containment struct{}

// ContainmentConfig configures NewContainment.
type ContainmentConfig struct {
	StateDir string
	NoCgroup bool
	Logger   *slog.Logger
}

// NewContainment returns a Containment that adds nothing to the process group.
func NewContainment(ContainmentConfig) (*Containment, error) { return &Containment{}, nil }

// Mode names how steps are contained.
func (*Containment) Mode() string { return "process group" }

// EndsAll is false off Linux: a process that leaves its step's process group outlives it.
func (*Containment) EndsAll() bool { return false }

// Reclaimed is always zero off Linux.
func (*Containment) Reclaimed() int { return 0 }

// Close does nothing off Linux.
func (*Containment) Close() error { return nil }

type scope struct{}

func (*Containment) begin(*exec.Cmd) (*scope, error) { return nil, nil }
func (*scope) started()                              {}
func (*scope) signal(syscall.Signal, bool)           {}
func (*scope) kill()                                 {}
func (*scope) end()                                  {}

func dieWithWorker(*syscall.SysProcAttr) {}

func startLeader(cmd *exec.Cmd) error { return cmd.Start() }
func leaderReaped(int)                {}

func termSandbox(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGTERM) }

// MarkEnv is the environment entry that marks a step's processes.
func MarkEnv(mark string) string { return "GANTRY_STEP_MARK=" + mark }

// KillMarked does nothing off Linux: a step is contained by its process group.
func KillMarked(string) {}
