// Package logchunks is the logs.Storage of the scale-out mode: log lines as chunk rows in
// the database (store.LogIndex), finished logs in the blob store. It is the coordinator's;
// the logs package links no store.
package logchunks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
)

// Storage keeps log lines as chunk rows in the database, so that every coordinator
// replica reads what any replica stored: the storage of the scale-out mode. Each append
// is one row; when the attempt ends its rows are compacted into rows of about
// compactBytes, whose lines move to the blob store when there is one.
type Storage struct {
	idx   store.LogIndex
	blobs blob.Store // where finished logs go; nil keeps them in the rows
	// keep leaves a finished attempt's rows as they were appended (WithoutCompaction).
	keep bool

	mu    sync.Mutex
	state map[logs.Key]logs.State // last known end per attempt; another replica may have moved it
}

// compactBytes is the size compaction aims for per row.
const compactBytes = 1 << 20

var _ logs.Storage = (*Storage)(nil)

// New stores logs through idx.
func New(idx store.LogIndex) *Storage {
	return &Storage{idx: idx, state: map[logs.Key]logs.State{}}
}

// WithBlobs makes finished logs move out of the database into bs, a row naming each
// blob, and returns s.
func (s *Storage) WithBlobs(bs blob.Store) *Storage {
	s.blobs = bs
	return s
}

// WithoutCompaction leaves a finished attempt's rows as they were appended, and returns
// s: for a database deleted with its process (gantry run), where compacting would cost a
// write, and the memory of the whole log at once, for rows nothing reads twice.
func (s *Storage) WithoutCompaction() *Storage {
	s.keep = true
	return s
}

// Append implements Storage. When another replica appended meanwhile, the chunk is
// refused by the database, or looks like a gap here; the end is read again and the
// batch trimmed to it.
func (s *Storage) Append(ctx context.Context, k logs.Key, lines []logs.Line) (logs.State, error) {
	for try := 0; ; try++ {
		st, err := s.State(ctx, k)
		if err != nil {
			return st, err
		}
		todo, err := logs.Trim(lines, st.Next)
		if errors.Is(err, logs.ErrGap) && try == 0 {
			// The end known here may be stale: another replica may have stored the
			// lines in between. Ask the database before calling it a gap.
			s.forget(k)
			continue
		}
		if err != nil || len(todo) == 0 {
			return st, err
		}
		data := logs.Encode(todo)
		c := &store.LogChunk{JobID: k.Job, Attempt: k.Attempt, FirstSeq: todo[0].Seq, LastSeq: todo[len(todo)-1].Seq,
			Bytes: int64(len(data)), Data: data}
		err = s.idx.AppendLogChunk(ctx, c)
		if errors.Is(err, store.ErrConflict) && try < 3 {
			s.forget(k)
			continue
		}
		if err != nil {
			s.forget(k)
			return st, fmt.Errorf("append to log %s: %w", k, err)
		}
		st = logs.State{Next: c.LastSeq + 1, Bytes: st.Bytes + c.Bytes}
		s.mu.Lock()
		s.state[k] = st
		s.mu.Unlock()
		return st, nil
	}
}

func (s *Storage) forget(k logs.Key) {
	s.mu.Lock()
	delete(s.state, k)
	s.mu.Unlock()
}

// State implements Storage.
func (s *Storage) State(ctx context.Context, k logs.Key) (logs.State, error) {
	s.mu.Lock()
	st, ok := s.state[k]
	s.mu.Unlock()
	if ok {
		return st, nil
	}
	last, n, err := s.idx.LastLogSeq(ctx, k.Job, k.Attempt)
	if err != nil {
		return logs.State{}, fmt.Errorf("log %s: %w", k, err)
	}
	st = logs.State{Next: last + 1, Bytes: n}
	s.mu.Lock()
	s.state[k] = st
	s.mu.Unlock()
	return st, nil
}

// Refresh implements Storage.
func (s *Storage) Refresh(ctx context.Context, k logs.Key) (logs.State, error) {
	s.forget(k)
	return s.State(ctx, k)
}

// Read implements Storage.
func (s *Storage) Read(ctx context.Context, k logs.Key, afterSeq int64, max int) ([]logs.Line, error) {
	var out []logs.Line
	for len(out) < max {
		cs, err := s.idx.ListLogChunks(ctx, k.Job, k.Attempt, afterSeq, 16)
		if err != nil {
			return out, fmt.Errorf("read log %s: %w", k, err)
		}
		if len(cs) == 0 {
			break
		}
		for _, c := range cs {
			data, err := s.chunkData(ctx, c)
			if err != nil {
				return out, fmt.Errorf("read log %s: %w", k, err)
			}
			if out, err = logs.Decode(bytes.NewReader(data), afterSeq, max, out); err != nil {
				return out, fmt.Errorf("read log %s: %w", k, err)
			}
			if len(out) >= max {
				break
			}
			afterSeq = c.LastSeq
		}
		if len(out) > 0 {
			afterSeq = out[len(out)-1].Seq
		}
	}
	return out, nil
}

// chunkData returns a chunk's lines, from the blob store when the chunk names a blob.
func (s *Storage) chunkData(ctx context.Context, c *store.LogChunk) ([]byte, error) {
	digest, ok := strings.CutPrefix(c.Location, store.LogBlobLocation(""))
	if c.Location == "" || !ok {
		if c.Location != "" {
			return nil, fmt.Errorf("chunk %d-%d is at unknown location %q", c.FirstSeq, c.LastSeq, c.Location)
		}
		return c.Data, nil
	}
	if s.blobs == nil {
		return nil, fmt.Errorf("chunk %d-%d is in the blob store, and this coordinator has none", c.FirstSeq, c.LastSeq)
	}
	r, err := s.blobs.Open(ctx, digest)
	if err != nil {
		return nil, fmt.Errorf("chunk %d-%d: %w", c.FirstSeq, c.LastSeq, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, c.Bytes+1))
	if err != nil {
		return nil, fmt.Errorf("chunk %d-%d: %w", c.FirstSeq, c.LastSeq, err)
	}
	if int64(len(data)) != c.Bytes {
		return nil, fmt.Errorf("chunk %d-%d: blob %s holds %d bytes, want %d", c.FirstSeq, c.LastSeq, digest, len(data), c.Bytes)
	}
	return data, nil
}

// Finish implements Storage: the attempt's rows are merged into rows of about
// compactBytes, and with a blob store their lines move there. Run again, it finds the
// work done. WithoutCompaction, it leaves them.
func (s *Storage) Finish(ctx context.Context, k logs.Key) error {
	defer s.forget(k)
	if s.keep {
		return nil
	}
	var all []*store.LogChunk
	var after int64
	for {
		cs, err := s.idx.ListLogChunks(ctx, k.Job, k.Attempt, after, 256)
		if err != nil {
			return fmt.Errorf("compact log %s: %w", k, err)
		}
		if len(cs) == 0 {
			break
		}
		all = append(all, cs...)
		after = cs[len(cs)-1].LastSeq
	}
	var merged []*store.LogChunk
	for _, c := range all {
		if n := len(merged); n > 0 && c.Location == "" && merged[n-1].Location == "" && merged[n-1].Bytes+c.Bytes <= compactBytes {
			m := merged[n-1]
			m.Data = append(m.Data, c.Data...)
			m.Bytes += c.Bytes
			m.LastSeq = c.LastSeq
			continue
		}
		merged = append(merged, &store.LogChunk{FirstSeq: c.FirstSeq, LastSeq: c.LastSeq, Bytes: c.Bytes,
			Location: c.Location, Data: append([]byte(nil), c.Data...)})
	}
	moved := 0
	if s.blobs != nil {
		for _, c := range merged {
			if c.Location != "" {
				continue
			}
			sum := sha256.Sum256(c.Data)
			digest := hex.EncodeToString(sum[:])
			if err := s.blobs.Put(ctx, digest, int64(len(c.Data)), bytes.NewReader(c.Data)); err != nil {
				return fmt.Errorf("move log %s to the blob store: %w", k, err)
			}
			c.Location, c.Data = store.LogBlobLocation(digest), nil
			moved++
		}
	}
	if len(merged) == len(all) && moved == 0 {
		return nil
	}
	if err := s.idx.ReplaceLogChunks(ctx, k.Job, k.Attempt, merged); err != nil {
		return fmt.Errorf("compact log %s: %w", k, err)
	}
	return nil
}

// Purge implements Storage.
func (s *Storage) Purge(ctx context.Context, before time.Time) (int, error) {
	n, err := s.idx.DeleteLogChunksBefore(ctx, before)
	if err != nil {
		return n, fmt.Errorf("purge logs: %w", err)
	}
	s.mu.Lock()
	clear(s.state)
	s.mu.Unlock()
	return n, nil
}

// Close implements Storage; the store is closed by its owner.
func (s *Storage) Close() error { return nil }
