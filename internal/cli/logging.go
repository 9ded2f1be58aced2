package cli

import (
	"io"
	"log/slog"
)

// logFormatUsage is the help of every --log-format flag.
const logFormatUsage = "text, json, or auto (text on a terminal, JSON otherwise)"

func checkLogFormat(format string) error {
	switch format {
	case "text", "json", "auto", "":
		return nil
	}
	return usagef("--log-format %q: want text, json or auto", format)
}

// newLogger makes the logger of a long-running command (server, worker, up, run), writing
// to w at level in format (checked by logLevel and checkLogFormat). Records carry their
// ids (run, job, worker) as attributes, which JSON keeps as fields for a log pipeline.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	l, _ := logLevel(level)
	opts := &slog.HandlerOptions{Level: l}
	if format == "" || format == "auto" {
		format = "json"
		if tty, _ := terminal(w); tty {
			format = "text"
		}
	}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
