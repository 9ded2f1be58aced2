package logs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/logs/logchunks"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

func openFiles(t *testing.T, dir string) *logs.FileStorage {
	t.Helper()
	fs, err := logs.OpenFileStorage(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	return fs
}

func textLines(first int64, texts ...string) []logs.Line {
	var out []logs.Line
	for i, text := range texts {
		out = append(out, logs.Line{Seq: first + int64(i), TS: 1, Stream: logs.Stdout, Text: text})
	}
	return out
}

// TestServiceLimit: past its limit an attempt's log ends with a system line saying so;
// later lines are acknowledged and dropped, also by a new Service on the same storage.
func TestServiceLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// The limit is above MaxLineBytes, so that a restarted service must read the log's
	// end to know it was truncated; the lines escape to several times their length.
	const limit = 200 << 10
	st := openFiles(t, t.TempDir())
	k := logs.Key{Job: uuid.New(), Attempt: 1}
	svc := logs.NewService(logs.Config{Storage: st, MaxBytes: limit})
	defer svc.Close()
	escaped := strings.Repeat("<", logs.MaxLineBytes) // 6 bytes each in JSON
	next, truncated, err := svc.Append(ctx, k, textLines(1, "a", "b"))
	if err != nil || next != 3 || truncated {
		t.Fatalf("append 1-2: %d %v %v", next, truncated, err)
	}
	next, truncated, err = svc.Append(ctx, k, textLines(3, "c", escaped, "d"))
	if err != nil || next != 6 || !truncated {
		t.Fatalf("append past the limit: next %d truncated %v err %v; want 6, true", next, truncated, err)
	}
	lines, err := svc.Read(ctx, k, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 4 || lines[2].Text != "c" {
		t.Fatalf("stored %d lines: %+v", len(lines), lines)
	}
	if l := lines[3]; l.Seq != 4 || l.Stream != logs.System || !l.Truncated || !strings.Contains(l.Text, "truncated") {
		t.Fatalf("line 4 = %+v, want the truncation line", l)
	}
	check := func(svc *logs.Service, what string) {
		t.Helper()
		next, truncated, err := svc.Append(ctx, k, textLines(6, "e", "f"))
		if err != nil || next != 8 || !truncated {
			t.Fatalf("%s: append after truncation: next %d truncated %v err %v; want 8, true", what, next, truncated, err)
		}
		if st, _ := st.State(ctx, k); st.Next != 5 {
			t.Fatalf("%s: a line after the truncation line was stored: log ends at %d", what, st.Next-1)
		}
	}
	check(svc, "same service")
	svc2 := logs.NewService(logs.Config{Storage: st, MaxBytes: limit})
	defer svc2.Close()
	check(svc2, "new service")
}

// TestServiceSearch: substring, regular expression and case-insensitive search.
func TestServiceSearch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	svc := logs.NewService(logs.Config{Storage: openFiles(t, t.TempDir())})
	defer svc.Close()
	k := logs.Key{Job: uuid.New(), Attempt: 1}
	texts := []string{"Compiling main", "error: boom", "ERROR: Bang", "ok 12 tests", "warning", "errors: 3", "fail 7"}
	for i := 0; i < 3; i++ { // three pages' worth of the same, past Search's page size
		var many []string
		for range 2000 {
			many = append(many, "filler")
		}
		if i == 1 {
			many = append(many, texts...)
		}
		first := int64(1)
		if st, err := openStorageState(svc, ctx, k); err == nil {
			first = st
		}
		if _, _, err := svc.Append(ctx, k, textLines(first, many...)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		q         string
		regex, ic bool
		limit     int
		want      []string
	}{
		{"error", false, false, 10, []string{"error: boom", "errors: 3"}},
		{"error", false, true, 10, []string{"error: boom", "ERROR: Bang", "errors: 3"}},
		{"error", false, true, 2, []string{"error: boom", "ERROR: Bang"}},
		{`^(ok|fail) \d+`, true, false, 10, []string{"ok 12 tests", "fail 7"}},
		{`^error:`, true, true, 10, []string{"error: boom", "ERROR: Bang"}},
		{"nothing", false, false, 10, nil},
	}
	for _, tc := range tests {
		m, err := logs.NewMatcher(tc.q, tc.regex, tc.ic)
		if err != nil {
			t.Fatalf("%q: %v", tc.q, err)
		}
		got, err := svc.Search(ctx, k, m, 0, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, l := range got {
			texts = append(texts, l.Text)
			if l.Seq <= 4000 || l.Seq > 4007 {
				t.Errorf("%q: line %q has seq %d", tc.q, l.Text, l.Seq)
			}
		}
		if strings.Join(texts, "|") != strings.Join(tc.want, "|") {
			t.Errorf("search %q regex=%v ignore_case=%v limit %d: %q, want %q", tc.q, tc.regex, tc.ic, tc.limit, texts, tc.want)
		}
	}
	if _, err := logs.NewMatcher("(", true, false); err == nil {
		t.Error("a bad regular expression was accepted")
	}
}

// openStorageState is where the service's log for k continues.
func openStorageState(svc *logs.Service, ctx context.Context, k logs.Key) (int64, error) {
	lines, err := svc.Read(ctx, k, 0, 1<<30)
	if err != nil || len(lines) == 0 {
		return 1, err
	}
	return lines[len(lines)-1].Seq + 1, nil
}

// TestServiceReadFollowsWriter: a reader that follows a log being written gets every
// line once and in order, from the hub while it keeps up and from storage once the hub's
// window moved past it.
func TestServiceReadFollowsWriter(t *testing.T) {
	t.Parallel()
	for _, b := range storageBackends[:2] {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.new(t)()
			t.Cleanup(func() { _ = st.Close() })
			svc := logs.NewService(logs.Config{Storage: st})
			defer svc.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			k := logs.Key{Job: uuid.New(), Attempt: 1}
			const total = 20_000
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for first := int64(1); first <= total; first += 50 {
					if _, _, err := svc.Append(ctx, k, shortLines(first, first+49)); err != nil {
						t.Errorf("append %d: %v", first, err)
						return
					}
				}
			}()
			// Readers with different paces: one keeps up, one falls behind the window.
			for _, page := range []int{100, 7} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					after := int64(0)
					slow := page < 10
					for after < total {
						changed := svc.Hub().Changed(k)
						lines, err := svc.Read(ctx, k, after, page)
						if err != nil {
							t.Errorf("read after %d: %v", after, err)
							return
						}
						for _, l := range lines {
							if l.Seq != after+1 || l.Text != shortLines(l.Seq, l.Seq)[0].Text {
								t.Errorf("reader (page %d): line %d %q after %d", page, l.Seq, l.Text, after)
								return
							}
							after = l.Seq
						}
						if len(lines) == 0 && !slow {
							select {
							case <-changed:
							case <-ctx.Done():
								t.Errorf("reader (page %d) stuck after %d", page, after)
								return
							}
						}
						if ctx.Err() != nil {
							t.Errorf("reader (page %d) stuck after %d", page, after)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// TestServiceEndReadsStorage: lines another replica stored that were never announced here
// are still read after the attempt ends here. Two services share one database with no
// notifier between them, as when a notice is late: the ended log's final reads go to
// storage, not to this replica's window of the lines it saw.
func TestServiceEndReadsStorage(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	a := logs.NewService(logs.Config{Storage: logchunks.New(st)})
	b := logs.NewService(logs.Config{Storage: logchunks.New(st)})
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	ctx := t.Context()
	k := logs.Key{Job: store.NewID(), Attempt: 1}
	if _, _, err := a.Append(ctx, k, textLines(1, "one", "two")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Append(ctx, k, textLines(3, "three", "four")); err != nil {
		t.Fatal(err)
	}
	if err := a.End(ctx, k); err != nil {
		t.Fatal(err)
	}
	got, err := a.Read(ctx, k, 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Text != "three" || got[1].Text != "four" {
		t.Errorf("after the end, reading after line 2 here gives %+v, want the two lines the other replica stored", got)
	}
}

// TestServiceReplicasAlternate: a worker's batches reach two replicas in turn, as through
// one address over both. Each replica has cached where the log ended when it last
// stored; a batch that continues what the other replica stored since must be stored, not
// answered as a gap from the stale end (the worker no longer holds the lines in between,
// so it would send that batch again forever while its heartbeats keep the job's lease).
// The store decides where the log ends, on both drivers.
func TestServiceReplicasAlternate(t *testing.T) {
	t.Parallel()
	for _, be := range storageBackends {
		if !strings.HasPrefix(be.name, "chunks-") {
			continue // one process's files have no second replica
		}
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			open := be.new(t)
			ctx := t.Context()
			a := logs.NewService(logs.Config{Storage: open()})
			b := logs.NewService(logs.Config{Storage: open()})
			t.Cleanup(a.Close)
			t.Cleanup(b.Close)
			k := logs.Key{Job: store.NewID(), Attempt: 1}
			replicas := []*logs.Service{a, b, b, a, a, b, a, b}
			for i, svc := range replicas {
				first := int64(i*3 + 1)
				next, truncated, err := svc.Append(ctx, k, textLines(first, "x", "y", "z"))
				if err != nil || next != first+3 || truncated {
					t.Fatalf("batch %d (seq %d-%d) on replica %d: next %d, truncated %v, err %v; want next %d",
						i, first, first+2, map[*logs.Service]int{a: 0, b: 1}[svc], next, truncated, err, first+3)
				}
			}
			// A batch the worker sends again after its answer was lost is acknowledged by
			// either replica without storing a line twice.
			for _, svc := range []*logs.Service{a, b} {
				if next, _, err := svc.Append(ctx, k, textLines(4, "x", "y", "z")); err != nil || next != int64(len(replicas)*3+1) {
					t.Fatalf("re-sent batch: next %d err %v, want %d", next, err, len(replicas)*3+1)
				}
			}
			got, err := b.Read(ctx, k, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(replicas)*3 {
				t.Fatalf("stored %d lines, want %d", len(got), len(replicas)*3)
			}
			for i, l := range got {
				if l.Seq != int64(i+1) {
					t.Fatalf("line %d has seq %d: the log has a gap or a duplicate", i, l.Seq)
				}
			}
		})
	}
}

// TestTail: the tail of a log is its last n lines in order, all of it when shorter, and
// nothing for a log never written.
func TestTail(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	svc := logs.NewService(logs.Config{Storage: openFiles(t, t.TempDir())})
	defer svc.Close()
	k := logs.Key{Job: uuid.New(), Attempt: 1}
	var texts []string
	for i := range 30 {
		texts = append(texts, fmt.Sprintf("line %d", i+1))
	}
	if _, _, err := svc.Append(ctx, k, textLines(1, texts...)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n           int
		first, last int64
	}{{5, 26, 30}, {30, 1, 30}, {100, 1, 30}} {
		got, err := svc.Tail(ctx, k, tc.n)
		if err != nil {
			t.Fatalf("Tail(%d): %v", tc.n, err)
		}
		if len(got) == 0 || got[0].Seq != tc.first || got[len(got)-1].Seq != tc.last || int64(len(got)) != tc.last-tc.first+1 {
			t.Errorf("Tail(%d) = %d lines from %v; want lines %d to %d", tc.n, len(got), got, tc.first, tc.last)
		}
	}
	if got, err := svc.Tail(ctx, logs.Key{Job: uuid.New(), Attempt: 1}, 10); err != nil || len(got) != 0 {
		t.Errorf("Tail of a log never written = %v, %v; want nothing", got, err)
	}
}
