package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

// ChunkStorage keeps log lines as chunk rows in the database, so that every coordinator
// replica reads what any replica stored: the storage of the scale-out mode. Each append
// is one row; when the attempt ends its rows are compacted into rows of about
// compactBytes.
type ChunkStorage struct {
	idx store.LogIndex

	mu    sync.Mutex
	state map[Key]State // last known end per attempt; another replica may have moved it
}

// compactBytes is the size compaction aims for per row.
const compactBytes = 1 << 20

var _ Storage = (*ChunkStorage)(nil)

// NewChunkStorage stores logs through idx.
func NewChunkStorage(idx store.LogIndex) *ChunkStorage {
	return &ChunkStorage{idx: idx, state: map[Key]State{}}
}

// Append implements Storage. When another replica appended meanwhile, the chunk is
// refused by the database, or looks like a gap here; the end is read again and the
// batch trimmed to it.
func (s *ChunkStorage) Append(ctx context.Context, k Key, lines []Line) (State, error) {
	for try := 0; ; try++ {
		st, err := s.State(ctx, k)
		if err != nil {
			return st, err
		}
		todo, err := trim(lines, st.Next)
		if errors.Is(err, ErrGap) && try == 0 {
			// The end known here may be stale: another replica may have stored the
			// lines in between. Ask the database before calling it a gap.
			s.forget(k)
			continue
		}
		if err != nil || len(todo) == 0 {
			return st, err
		}
		data := encode(todo)
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
		st = State{Next: c.LastSeq + 1, Bytes: st.Bytes + c.Bytes}
		s.mu.Lock()
		s.state[k] = st
		s.mu.Unlock()
		return st, nil
	}
}

func (s *ChunkStorage) forget(k Key) {
	s.mu.Lock()
	delete(s.state, k)
	s.mu.Unlock()
}

// State implements Storage.
func (s *ChunkStorage) State(ctx context.Context, k Key) (State, error) {
	s.mu.Lock()
	st, ok := s.state[k]
	s.mu.Unlock()
	if ok {
		return st, nil
	}
	last, n, err := s.idx.LastLogSeq(ctx, k.Job, k.Attempt)
	if err != nil {
		return State{}, fmt.Errorf("log %s: %w", k, err)
	}
	st = State{Next: last + 1, Bytes: n}
	s.mu.Lock()
	s.state[k] = st
	s.mu.Unlock()
	return st, nil
}

// Read implements Storage.
func (s *ChunkStorage) Read(ctx context.Context, k Key, afterSeq int64, max int) ([]Line, error) {
	var out []Line
	for len(out) < max {
		cs, err := s.idx.ListLogChunks(ctx, k.Job, k.Attempt, afterSeq, 16)
		if err != nil {
			return out, fmt.Errorf("read log %s: %w", k, err)
		}
		if len(cs) == 0 {
			break
		}
		for _, c := range cs {
			if out, err = decode(bytes.NewReader(c.Data), afterSeq, max, out); err != nil {
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

// Finish implements Storage: the attempt's rows are merged into rows of about
// compactBytes.
func (s *ChunkStorage) Finish(ctx context.Context, k Key) error {
	defer s.forget(k)
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
		if n := len(merged); n > 0 && merged[n-1].Bytes+c.Bytes <= compactBytes {
			m := merged[n-1]
			m.Data = append(m.Data, c.Data...)
			m.Bytes += c.Bytes
			m.LastSeq = c.LastSeq
			continue
		}
		merged = append(merged, &store.LogChunk{FirstSeq: c.FirstSeq, LastSeq: c.LastSeq, Bytes: c.Bytes,
			Data: append([]byte(nil), c.Data...)})
	}
	if len(merged) == len(all) {
		return nil
	}
	if err := s.idx.ReplaceLogChunks(ctx, k.Job, k.Attempt, merged); err != nil {
		return fmt.Errorf("compact log %s: %w", k, err)
	}
	return nil
}

// Purge implements Storage.
func (s *ChunkStorage) Purge(ctx context.Context, before time.Time) (int, error) {
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
func (s *ChunkStorage) Close() error { return nil }
