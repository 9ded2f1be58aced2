package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// stdinName is how standard input is named in messages, as compilers do.
const stdinName = "<stdin>"

// source is one pipeline definition as given on the command line.
type source struct {
	name string // as shown in messages: the path, or <stdin>
	data []byte
}

// line returns the 1-based line n without its line ending, and false when the document has
// no such line.
func (s source) line(n int) (string, bool) {
	if n < 1 {
		return "", false
	}
	rest := string(s.data)
	for i := 1; i < n; i++ {
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			return "", false
		}
		rest = rest[nl+1:]
	}
	if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
		rest = rest[:nl]
	} else if rest == "" {
		// A document ending in a newline has no line after it; an error there is reported
		// without source rather than with an empty line.
		return "", false
	}
	return strings.TrimSuffix(rest, "\r"), true
}

// defaultMaxRead bounds what is read of one input. It is far above the compiler's own size
// limit, so any real mistake of size gets the compiler's exact message with the true size,
// while a wrong argument (a disk image, /dev/zero) cannot exhaust memory.
const defaultMaxRead = 64 << 20

// readSources reads every named file ("-" is standard input) before anything is compiled,
// so that a missing file fails the whole command with exit 2 rather than leaving a partial
// report that a script could take for a complete one. Every unreadable file is reported.
func (a *app) readSources(names []string) ([]source, error) {
	srcs := make([]source, 0, len(names))
	failed := false
	stdinUsed := false
	for _, name := range names {
		display := name
		var data []byte
		var err error
		if name == "-" {
			if stdinUsed {
				return nil, usagef("standard input (-) given more than once")
			}
			stdinUsed = true
			display = stdinName
			data, err = readAll(a.stdin, a.maxRead)
		} else {
			data, err = readFile(name, a.maxRead)
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "gantry: read %s: %v\n", display, err)
			failed = true
			continue
		}
		srcs = append(srcs, source{name: display, data: data})
	}
	if failed {
		return nil, &exitError{code: exitUsage}
	}
	return srcs, nil
}

func readAll(r io.Reader, maxRead int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxRead+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > maxRead {
		return nil, fmt.Errorf("larger than %s; a pipeline definition may be at most %s",
			formatSize(maxRead), formatSize(int64(pipeline.DefaultLimits.MaxBytes)))
	}
	return data, nil
}

// formatSize writes whole mebibytes as such and anything else in bytes.
func formatSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func readFile(name string, maxRead int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		// The *PathError would repeat the name after our own "read NAME:" prefix.
		return nil, unwrapPath(err)
	}
	defer f.Close()
	data, err := readAll(f, maxRead)
	return data, unwrapPath(err)
}

// unwrapPath drops the "open NAME:" part of a *os.PathError, which would repeat the name.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
