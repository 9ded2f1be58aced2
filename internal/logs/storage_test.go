package logs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/logs/logchunks"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/gantry-ci/gantry/internal/testdb"
	"github.com/google/uuid"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// storageBackends open the storages the contract runs against. Each returns an opener:
// every call opens a new Storage on the same place (directory, database), as a restarted
// coordinator would; the test closes what it opens.
var storageBackends = []struct {
	name string
	new  func(t *testing.T) func() logs.Storage
}{
	{"files", func(t *testing.T) func() logs.Storage {
		dir := t.TempDir()
		return func() logs.Storage {
			fs, err := logs.OpenFileStorage(dir, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			return fs
		}
	}},
	{"files-never-synced", func(t *testing.T) func() logs.Storage {
		dir := t.TempDir()
		return func() logs.Storage {
			fs, err := logs.OpenFileStorage(dir, logs.NeverSync, nil)
			if err != nil {
				t.Fatal(err)
			}
			return fs
		}
	}},
	{"chunks-sqlite", func(t *testing.T) func() logs.Storage {
		st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return func() logs.Storage { return logchunks.New(st) }
	}},
	{"chunks-sqlite-uncompacted", func(t *testing.T) func() logs.Storage {
		st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return func() logs.Storage { return logchunks.New(st).WithoutCompaction() }
	}},
	{"chunks-postgres", func(t *testing.T) func() logs.Storage {
		st, err := postgres.Open(context.Background(), testdb.Postgres(t), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return func() logs.Storage { return logchunks.New(st) }
	}},
	{"chunks-postgres-blobs", func(t *testing.T) func() logs.Storage {
		st, err := postgres.Open(context.Background(), testdb.Postgres(t), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		bs := testBlobs(t)
		return func() logs.Storage { return logchunks.New(st).WithBlobs(bs) }
	}},
}

func testBlobs(t *testing.T) blob.Store {
	t.Helper()
	bs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// TestFinishedLogsMoveToBlobs: with a blob store, a finished attempt's lines leave the
// database for blobs that its rows name, and still read back whole; finishing again
// changes nothing.
func TestFinishedLogsMoveToBlobs(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	bs := testBlobs(t)
	ls := logchunks.New(st).WithBlobs(bs)
	ctx := t.Context()
	k := logs.Key{Job: store.NewID(), Attempt: 1}
	const n = 3000
	for first := int64(1); first <= n; first += 100 {
		var batch []logs.Line
		for seq := first; seq < first+100; seq++ {
			batch = append(batch, logs.Line{Seq: seq, TS: seq, Stream: logs.Stdout, Text: textOf(seq)})
		}
		if _, err := ls.Append(ctx, k, batch); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := ls.Finish(ctx, k); err != nil {
			t.Fatalf("Finish: %v", err)
		}
	}
	cs, err := st.ListLogChunks(ctx, k.Job, k.Attempt, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	blobs := 0
	if err := bs.Walk(ctx, func(blob.Info) error { blobs++; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 || blobs != len(cs) {
		t.Errorf("%d chunks and %d blobs after Finish, want one blob per chunk", len(cs), blobs)
	}
	for _, c := range cs {
		if !strings.HasPrefix(c.Location, "sha256:") || len(c.Data) != 0 {
			t.Errorf("chunk %d-%d: location %q with %d bytes inline, want a blob and none", c.FirstSeq, c.LastSeq, c.Location, len(c.Data))
		}
	}
	var got []logs.Line
	for after := int64(0); ; {
		page, err := ls.Read(ctx, k, after, 700)
		if err != nil {
			t.Fatalf("Read after %d: %v", after, err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].Seq
	}
	if len(got) != n {
		t.Fatalf("read %d lines back, want %d", len(got), n)
	}
	for i, l := range got {
		if l.Seq != int64(i+1) || l.Text != textOf(l.Seq) {
			t.Fatalf("line %d: seq %d text %.40q", i+1, l.Seq, l.Text)
		}
	}
}

// TestFinishWithoutCompaction: a finished attempt's rows are merged into fewer, unless
// the storage is WithoutCompaction (gantry run's), which leaves one row per append; the
// lines read back whole either way.
func TestFinishWithoutCompaction(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		ls := logchunks.New(st)
		if keep {
			ls = ls.WithoutCompaction()
		}
		ctx := t.Context()
		k := logs.Key{Job: store.NewID(), Attempt: 1}
		const appends, per = 30, 100
		for first := int64(1); first <= appends*per; first += per {
			var batch []logs.Line
			for seq := first; seq < first+per; seq++ {
				batch = append(batch, logs.Line{Seq: seq, TS: seq, Stream: logs.Stdout, Text: textOf(seq)})
			}
			if _, err := ls.Append(ctx, k, batch); err != nil {
				t.Fatal(err)
			}
		}
		if err := ls.Finish(ctx, k); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		cs, err := st.ListLogChunks(ctx, k.Job, k.Attempt, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if keep && len(cs) != appends || !keep && (len(cs) == 0 || len(cs) >= appends/3) {
			t.Errorf("without compaction %v: %d rows after Finish of %d appends of %d lines each", keep, len(cs), appends, per)
		}
		got, err := ls.Read(ctx, k, 0, appends*per+1)
		if err != nil || len(got) != appends*per || got[len(got)-1].Text != textOf(appends*per) {
			t.Errorf("without compaction %v: read %d lines back (%v), want %d", keep, len(got), err, appends*per)
		}
	}
}

// textOf is line seq's text: every 97th line is long, and line 600 is longer than the
// buffer a file's index is rebuilt with.
func textOf(seq int64) string {
	switch {
	case seq == 600:
		return strings.Repeat("x", 300<<10) + strconv.FormatInt(seq, 10)
	case seq%97 == 0:
		return strings.Repeat("long <&> \"quoted\" ", 1500) + strconv.FormatInt(seq, 10)
	}
	return "line " + strconv.FormatInt(seq, 10) + " ünïcode"
}

func mkLines(first, last int64) []logs.Line {
	var out []logs.Line
	for seq := first; seq <= last; seq++ {
		stream := logs.Stdout
		if seq%5 == 0 {
			stream = logs.Stderr
		}
		out = append(out, logs.Line{Seq: seq, TS: 1_700_000_000_000 + seq, Stream: stream, Text: textOf(seq)})
	}
	return out
}

// encodedSize is what lines take stored: one NDJSON line each.
func encodedSize(t *testing.T, lines []logs.Line) int64 {
	t.Helper()
	var n int64
	for i := range lines {
		b, err := json.Marshal(&lines[i])
		if err != nil {
			t.Fatal(err)
		}
		n += int64(len(b)) + 1
	}
	return n
}

// checkLines fails unless got are exactly the lines first..last as mkLines makes them.
func checkLines(t *testing.T, what string, got []logs.Line, first, last int64) {
	t.Helper()
	if want := int(last - first + 1); len(got) != max(want, 0) {
		t.Fatalf("%s: %d lines, want %d (%d-%d)", what, len(got), max(want, 0), first, last)
	}
	for i, l := range got {
		want := mkLines(first+int64(i), first+int64(i))[0]
		if l != want {
			t.Fatalf("%s: line %d is seq %d %q (%d bytes), want seq %d", what, i, l.Seq, abbrev(l.Text), len(l.Text), want.Seq)
		}
	}
}

func abbrev(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// readAll reads key's whole log page by page.
func readAll(t *testing.T, s logs.Storage, k logs.Key, page int) []logs.Line {
	t.Helper()
	var out []logs.Line
	after := int64(0)
	for {
		lines, err := s.Read(t.Context(), k, after, page)
		if err != nil {
			t.Fatalf("read after %d: %v", after, err)
		}
		if len(lines) > page {
			t.Fatalf("read after %d max %d returned %d lines", after, page, len(lines))
		}
		if len(lines) == 0 {
			return out
		}
		out = append(out, lines...)
		after = lines[len(lines)-1].Seq
	}
}

func mustState(t *testing.T, s logs.Storage, k logs.Key) logs.State {
	t.Helper()
	st, err := s.State(t.Context(), k)
	if err != nil {
		t.Fatalf("state of %s: %v", k, err)
	}
	return st
}

func mustAppend(t *testing.T, s logs.Storage, k logs.Key, lines []logs.Line) logs.State {
	t.Helper()
	st, err := s.Append(t.Context(), k, lines)
	if err != nil {
		t.Fatalf("append %d-%d to %s: %v", lines[0].Seq, lines[len(lines)-1].Seq, k, err)
	}
	return st
}

// TestStorageContract is what every Storage promises: each seq stored once, in order,
// whatever is re-sent; reads by position; the end and size known; logs that survive
// Finish and a restart, and go with Purge.
func TestStorageContract(t *testing.T) {
	t.Parallel()
	for _, b := range storageBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testStorageContract(t, b.new(t))
		})
	}
}

func testStorageContract(t *testing.T, open func() logs.Storage) {
	ctx := t.Context()
	s := open()
	defer func() { _ = s.Close() }()
	k := logs.Key{Job: uuid.New(), Attempt: 2}
	other := logs.Key{Job: k.Job, Attempt: 1}

	if st := mustState(t, s, k); st != (logs.State{Next: 1}) {
		t.Fatalf("state of an empty log: %+v", st)
	}
	if lines, err := s.Read(ctx, k, 0, 10); err != nil || len(lines) != 0 {
		t.Fatalf("read of an empty log: %d lines, %v", len(lines), err)
	}

	// Dense batches, re-sends and overlaps.
	var bytes int64
	stored := int64(1) // the seq after those counted in bytes
	steps := []struct {
		first, last int64
		next        int64
	}{
		{1, 10, 11}, {11, 11, 12}, {12, 40, 41},
		{1, 10, 41}, {12, 40, 41}, {40, 40, 41}, // re-sent: nothing changes
		{35, 60, 61}, // overlapping: only 41-60 are new
		{1, 70, 71},
	}
	for _, s2 := range steps {
		lines := mkLines(s2.first, s2.last)
		st := mustAppend(t, s, k, lines)
		bytes += encodedSize(t, mkLines(stored, s2.next-1))
		stored = s2.next
		want := logs.State{Next: s2.next, Bytes: bytes}
		if st != want {
			t.Fatalf("append %d-%d: state %+v, want %+v", s2.first, s2.last, st, want)
		}
		if got := mustState(t, s, k); got != want {
			t.Fatalf("state after append %d-%d: %+v, want %+v", s2.first, s2.last, got, want)
		}
	}
	checkLines(t, "after re-sends", readAll(t, s, k, 1000), 1, 70)

	// A batch past the end stores nothing; nor does one with a hole in it.
	st, err := s.Append(ctx, k, mkLines(80, 90))
	if !errors.Is(err, logs.ErrGap) {
		t.Fatalf("append 80-90 to a log ending at 70: %v, want ErrGap", err)
	}
	if st.Next != 71 {
		t.Errorf("state with ErrGap: %+v, want Next 71", st)
	}
	holey := append(mkLines(71, 72), mkLines(74, 75)...)
	if _, err := s.Append(ctx, k, holey); err == nil || errors.Is(err, logs.ErrGap) {
		t.Errorf("append of a batch that is not dense: %v, want an error other than ErrGap", err)
	}
	if got := mustState(t, s, k); got != (logs.State{Next: 71, Bytes: bytes}) {
		t.Fatalf("state after refused batches: %+v", got)
	}

	// Many batches of many sizes, across several index marks, with long lines.
	const total = 1500
	for first, size := int64(71), int64(1); first <= total; first, size = first+size, size*3%301+1 {
		last := min(first+size-1, total)
		st := mustAppend(t, s, k, mkLines(first, last))
		if st.Next != last+1 {
			t.Fatalf("append %d-%d: next %d", first, last, st.Next)
		}
	}
	bytes += encodedSize(t, mkLines(71, total))
	if got := mustState(t, s, k); got != (logs.State{Next: total + 1, Bytes: bytes}) {
		t.Fatalf("state after %d lines: %+v, want bytes %d", total, got, bytes)
	}
	mustAppend(t, s, other, mkLines(1, 5))

	checkReads := func(what string) {
		t.Helper()
		for _, after := range []int64{0, 1, 254, 255, 256, 257, 300, 511, 512, 513, 599, 600, 767, 768, 1024, 1280, total - 1, total, total + 5} {
			for _, max := range []int{1, 7, 256, 300, 5000} {
				lines, err := s.Read(ctx, k, after, max)
				if err != nil {
					t.Fatalf("%s: read after %d max %d: %v", what, after, max, err)
				}
				last := min(after+int64(max), total)
				checkLines(t, fmt.Sprintf("%s: read after %d max %d", what, after, max), lines, after+1, last)
			}
		}
		checkLines(t, what+": read page by page", readAll(t, s, k, 333), 1, total)
		checkLines(t, what+": the other attempt", readAll(t, s, other, 2), 1, 5)
	}
	checkReads("written")

	// Finish keeps everything readable (chunks are compacted into fewer rows).
	if err := s.Finish(ctx, k); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if got := mustState(t, s, k); got != (logs.State{Next: total + 1, Bytes: bytes}) {
		t.Fatalf("state after finish: %+v", got)
	}
	checkReads("finished")
	if err := s.Finish(ctx, k); err != nil {
		t.Fatalf("second finish: %v", err)
	}

	// An append after Finish (a late re-send, or a worker that was not done) continues.
	if st := mustAppend(t, s, k, mkLines(total-10, total+20)); st.Next != total+21 {
		t.Fatalf("append after finish: %+v", st)
	}
	bytes += encodedSize(t, mkLines(total+1, total+20))
	checkLines(t, "after finish and append", readAll(t, s, k, 1000), 1, total+20)

	// A restarted coordinator finds the logs where they ended.
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	s = open()
	if got := mustState(t, s, k); got != (logs.State{Next: total + 21, Bytes: bytes}) {
		t.Fatalf("state after reopen: %+v, want next %d bytes %d", got, total+21, bytes)
	}
	if _, err := s.Append(ctx, k, mkLines(total+30, total+31)); !errors.Is(err, logs.ErrGap) {
		t.Fatalf("append past the end after reopen: %v, want ErrGap", err)
	}
	if st := mustAppend(t, s, k, mkLines(total+15, total+40)); st.Next != total+41 {
		t.Fatalf("append after reopen: %+v", st)
	}
	checkLines(t, "after reopen and append", readAll(t, s, k, 777), 1, total+40)
	if err := s.Finish(ctx, k); err != nil {
		t.Fatalf("finish after reopen: %v", err)
	}
	checkLines(t, "finished again", readAll(t, s, k, 5000), 1, total+40)

	// Purge takes what was last written before its time, and only that.
	if n, err := s.Purge(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("purge of logs older than an hour: %d, %v; want 0", n, err)
	}
	checkLines(t, "after a purge of nothing", readAll(t, s, k, 5000), 1, total+40)
	n, err := s.Purge(ctx, time.Now().Add(time.Hour))
	if err != nil || n < 2 {
		t.Fatalf("purge of everything: %d, %v; want at least 2 (two attempts)", n, err)
	}
	for _, key := range []logs.Key{k, other} {
		if got := mustState(t, s, key); got != (logs.State{Next: 1}) {
			t.Errorf("state of %s after purge: %+v", key, got)
		}
		if lines := readAll(t, s, key, 100); len(lines) != 0 {
			t.Errorf("%s after purge: %d lines", key, len(lines))
		}
	}
	// A log purged is a log that starts again at 1.
	mustAppend(t, s, k, mkLines(1, 3))
	checkLines(t, "after purge and append", readAll(t, s, k, 100), 1, 3)
}

func logPath(dir string, k logs.Key) string {
	return filepath.Join(dir, k.Job.String(), strconv.Itoa(k.Attempt)+".log")
}

// TestFileStorageReopen: a file's end and index are rebuilt from the file alone.
func TestFileStorageReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := logs.OpenFileStorage(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := logs.Key{Job: uuid.New(), Attempt: 1}
	for first := int64(1); first <= 1000; first += 100 {
		mustAppend(t, s, k, mkLines(first, first+99))
	}
	want := mustState(t, s, k)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(logPath(dir, k))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() != want.Bytes {
		t.Fatalf("file is %d bytes, state said %d", info.Size(), want.Bytes)
	}

	s, err = logs.OpenFileStorage(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	// A read first, so that the file is opened (and indexed) by a reader.
	for _, after := range []int64{700, 255, 0, 999} {
		lines, err := s.Read(t.Context(), k, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		checkLines(t, fmt.Sprintf("reopened, read after %d", after), lines, after+1, min(after+3, 1000))
	}
	if got := mustState(t, s, k); got != want {
		t.Fatalf("state after reopen %+v, want %+v", got, want)
	}
	mustAppend(t, s, k, mkLines(990, 1300))
	checkLines(t, "reopened and appended", readAll(t, s, k, 256), 1, 1300)
}

// TestFileStorageTornTail: what a crash in the middle of a write leaves at the end of a
// file (part of a line, a whole line without its newline, zeros) is cut when the file
// is opened again; that batch was never acknowledged, and the worker re-sends it.
func TestFileStorageTornTail(t *testing.T) {
	t.Parallel()
	next := mkLines(301, 301)
	whole, _ := json.Marshal(&next[0])
	long := mkLines(600, 600)
	wholeLong, _ := json.Marshal(&long[0])
	tails := map[string][]byte{
		"half a line":              whole[:len(whole)/2],
		"a line without a newline": whole,
		"zeros":                    make([]byte, 4096),
		"garbage with a newline":   []byte("\x00\x17garbage\n"),
		"half a long line":         wholeLong[:len(wholeLong)-100],
		"a stale line":             append(mkJSON(t, mkLines(5, 5)[0]), '\n'),
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s, err := logs.OpenFileStorage(dir, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			k := logs.Key{Job: uuid.New(), Attempt: 1}
			mustAppend(t, s, k, mkLines(1, 300))
			want := mustState(t, s, k)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(logPath(dir, k), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tail); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}

			s, err = logs.OpenFileStorage(dir, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			if got := mustState(t, s, k); got != want {
				t.Fatalf("state with a torn tail: %+v, want %+v", got, want)
			}
			checkLines(t, "with a torn tail", readAll(t, s, k, 1000), 1, 300)
			if st := mustAppend(t, s, k, mkLines(295, 700)); st.Next != 701 {
				t.Fatalf("append after the torn tail: %+v", st)
			}
			checkLines(t, "appended after a torn tail", readAll(t, s, k, 1000), 1, 700)
			if err := s.Finish(t.Context(), k); err != nil {
				t.Fatal(err)
			}
			// The file itself holds exactly the lines, one per line.
			data, err := os.ReadFile(logPath(dir, k))
			if err != nil {
				t.Fatal(err)
			}
			var fileLines []logs.Line
			for i, raw := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
				var l logs.Line
				if err := json.Unmarshal([]byte(raw), &l); err != nil {
					t.Fatalf("file line %d is not a log line: %v: %q", i+1, err, abbrev(raw))
				}
				fileLines = append(fileLines, l)
			}
			checkLines(t, "the file", fileLines, 1, 700)
		})
	}
}

// shortLines are lines as mkLines makes them but short, for tests that write many.
func shortLines(first, last int64) []logs.Line {
	var out []logs.Line
	for seq := first; seq <= last; seq++ {
		out = append(out, logs.Line{Seq: seq, TS: seq, Stream: logs.Stdout, Text: "line " + strconv.FormatInt(seq, 10)})
	}
	return out
}

func mkJSON(t *testing.T, l logs.Line) []byte {
	b, err := json.Marshal(&l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFileStorageConcurrent appends to many logs at once while readers follow them,
// the sync loop runs, and logs are finished and reopened under the writers (run with
// -race).
func TestFileStorageConcurrent(t *testing.T) {
	t.Parallel()
	s, err := logs.OpenFileStorage(t.TempDir(), time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const keys, perKey, batchSize = 8, 3000, 37
	var wg sync.WaitGroup
	errs := make(chan error, 4*keys)
	for i := range keys {
		k := logs.Key{Job: uuid.New(), Attempt: i + 1}
		writing := make(chan struct{})
		wg.Add(3)
		go func() { // writer
			defer wg.Done()
			defer close(writing)
			for first := int64(1); first <= perKey; first += batchSize {
				// Every batch overlaps the previous one, as a re-send would.
				from := max(first-3, 1)
				st, err := s.Append(ctx, k, shortLines(from, min(first+batchSize-1, perKey)))
				if err != nil {
					errs <- fmt.Errorf("append %d to %s: %w", first, k, err)
					return
				}
				if want := min(first+batchSize, perKey+1); st.Next != want {
					errs <- fmt.Errorf("append %d to %s: next %d, want %d", first, k, st.Next, want)
					return
				}
			}
		}()
		go func() { // finisher: closes the file under the writer, which reopens it
			defer wg.Done()
			for {
				select {
				case <-writing:
					return
				case <-time.After(10 * time.Millisecond):
				}
				if err := s.Finish(ctx, k); err != nil {
					errs <- fmt.Errorf("finish %s: %w", k, err)
					return
				}
			}
		}()
		go func() { // reader: follows the log to its end, each line once and in order
			defer wg.Done()
			after := int64(0)
			for after < perKey {
				if ctx.Err() != nil {
					errs <- fmt.Errorf("reader of %s: stuck after %d", k, after)
					return
				}
				lines, err := s.Read(ctx, k, after, 100)
				if err != nil {
					errs <- fmt.Errorf("read %s after %d: %w", k, after, err)
					return
				}
				for _, l := range lines {
					if want := shortLines(after+1, after+1)[0]; l != want {
						errs <- fmt.Errorf("read %s: seq %d after %d", k, l.Seq, after)
						return
					}
					after = l.Seq
				}
				if _, err := s.State(ctx, k); err != nil {
					errs <- fmt.Errorf("state %s: %w", k, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
