package logs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrGap is a batch that starts past the end of the stored log; the caller re-sends from
// the log's end.
var ErrGap = errors.New("log batch leaves a gap")

// State is where a job attempt's stored log ends.
type State struct {
	Next  int64 // the seq the next line must have
	Bytes int64 // encoded bytes stored
}

// Storage keeps job attempts' log lines durably. Both implementations store each seq
// once: Append skips lines at or below the stored end, so re-sent batches never
// duplicate a line.
type Storage interface {
	// Append stores the lines that continue key's log; lines are dense and in seq order.
	// Lines already stored are skipped; a first new line past the end is ErrGap.
	Append(ctx context.Context, key Key, lines []Line) (State, error)
	// State returns where key's log ends. It may answer from a cache, which another
	// coordinator replica's appends leave behind: only ever short of the true end.
	State(ctx context.Context, key Key) (State, error)
	// Refresh returns where key's log ends as the durable storage has it, past any
	// cache, and makes State answer that. A cached end never refuses a batch on its own.
	Refresh(ctx context.Context, key Key) (State, error)
	// Read returns up to max lines after afterSeq, in order.
	Read(ctx context.Context, key Key, afterSeq int64, max int) ([]Line, error)
	// Finish is called once the attempt has ended: its log is made durable and compact.
	Finish(ctx context.Context, key Key) error
	// Purge deletes the logs last written before t and returns how many attempts' logs
	// (or chunks of them) went.
	Purge(ctx context.Context, before time.Time) (int, error)
	Close() error
}

// Trim drops the lines of a batch that are already stored and checks that the rest
// continue the log at next without gaps.
func Trim(lines []Line, next int64) ([]Line, error) {
	i := 0
	for i < len(lines) && lines[i].Seq < next {
		i++
	}
	lines = lines[i:]
	for j := range lines {
		if lines[j].Seq != next+int64(j) {
			if j == 0 {
				return nil, fmt.Errorf("%w: it starts at seq %d and the log ends before %d", ErrGap, lines[0].Seq, next)
			}
			return nil, fmt.Errorf("log batch is not dense: seq %d follows %d", lines[j].Seq, lines[j-1].Seq)
		}
	}
	return lines, nil
}

// Encode returns lines as NDJSON.
func Encode(lines []Line) []byte {
	var b []byte
	for i := range lines {
		b = appendJSON(b, &lines[i])
	}
	return b
}

// leadingSeq reads the seq of a stored line, which encode writes first: {"seq":N,...
// ok is false for any other shape, which the caller then decodes in full.
func leadingSeq(b []byte) (seq int64, ok bool) {
	rest, found := bytes.CutPrefix(b, []byte(`{"seq":`))
	if !found {
		return 0, false
	}
	n := 0
	for n < len(rest) && n < 18 && rest[n] >= '0' && rest[n] <= '9' {
		seq = seq*10 + int64(rest[n]-'0')
		n++
	}
	if n == 0 || n == len(rest) || rest[n] != ',' && rest[n] != '}' {
		return 0, false
	}
	return seq, true
}

// Decode reads NDJSON lines from r, keeping up to max of those after afterSeq.
func Decode(r io.Reader, afterSeq int64, max int, out []Line) ([]Line, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		// A line at or before afterSeq is skipped on its seq alone: a reader paging
		// through a compacted chunk would otherwise decode all of it for every page.
		if seq, ok := leadingSeq(b); ok && seq <= afterSeq {
			continue
		}
		var l Line
		if err := json.Unmarshal(b, &l); err != nil {
			return out, fmt.Errorf("decode stored log line: %w", err)
		}
		if l.Seq <= afterSeq {
			continue
		}
		out = append(out, l)
		if len(out) >= max {
			break
		}
	}
	return out, sc.Err()
}
