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

// readSources reads every named file ("-" is standard input) before anything is compiled,
// so that a missing file fails the whole command with exit 2 rather than leaving a partial
// report that a script could take for a complete one. Every unreadable file is reported.
func (a *app) readSources(names []string) ([]source, error) {
	// Reading past the limit is pointless: the compiler rejects the document anyway, and
	// stopping here keeps a huge or endless input (a device, a pipe) from filling memory.
	limit := int64(pipeline.DefaultLimits.MaxBytes) + 1
	srcs := make([]source, 0, len(names))
	failed := false
	stdinUsed := false
	for _, name := range names {
		if name == "-" {
			if stdinUsed {
				return nil, usagef("standard input (-) given more than once")
			}
			stdinUsed = true
			data, err := io.ReadAll(io.LimitReader(a.stdin, limit))
			if err != nil {
				fmt.Fprintf(a.stderr, "gantry: read %s: %v\n", stdinName, err)
				failed = true
				continue
			}
			srcs = append(srcs, source{name: stdinName, data: data})
			continue
		}
		data, err := readFile(name, limit)
		if err != nil {
			// The *PathError already names the file; print its cause after our own prefix.
			fmt.Fprintf(a.stderr, "gantry: read %s: %v\n", name, unwrapPath(err))
			failed = true
			continue
		}
		srcs = append(srcs, source{name: name, data: data})
	}
	if failed {
		return nil, &exitError{code: exitUsage}
	}
	return srcs, nil
}

func readFile(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// unwrapPath drops the "open NAME:" part of a *os.PathError, which would repeat the name.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
