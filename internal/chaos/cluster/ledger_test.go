package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// The ledger's clock is the kernel's boot clock, which every container on the engine's
// host shares with the suite (Docker gives containers no time namespace of their own):
// steps read it from /proc/uptime, in hundredths of a second, without a fork, in any
// image; the suite reads it with clock_gettime(CLOCK_BOOTTIME). It is monotonic, so no
// clock step or skew between containers can reorder two marks.

// bootNow is the boot clock now.
func bootNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_BOOTTIME): %v", err))
	}
	return time.Duration(ts.Nano())
}

// parseUptime reads the first field of /proc/uptime ("12345.67") as a duration.
func parseUptime(s string) (time.Duration, error) {
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("uptime %q: not seconds", s)
	}
	d := time.Duration(n) * time.Second
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		f, err := strconv.ParseInt(frac, 10, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("uptime %q: not seconds", s)
		}
		for i := len(frac); i < 9; i++ {
			f *= 10
		}
		d += time.Duration(f)
	}
	return d, nil
}

// Mark kinds the steps write.
const (
	markOnce  = "once"  // the once step ran
	markStart = "start" // the work step began
	markTick  = "tick"  // the work step is alive
	markEnd   = "end"   // the work step is about to exit 0
)

// mark is one line of the ledger: what a step did for which job attempt, where (the
// shell worker's container name, or the job container's host name), and when by the
// boot clock.
type mark struct {
	kind    string
	job     uuid.UUID
	attempt int
	where   string
	at      time.Duration
	line    string
}

// parseMark reads "KIND JOB ATTEMPT WHERE UPTIME".
func parseMark(line string) (mark, error) {
	f := strings.Fields(line)
	if len(f) != 5 {
		return mark{}, fmt.Errorf("ledger line %q: want 5 fields", line)
	}
	switch f[0] {
	case markOnce, markStart, markTick, markEnd:
	default:
		return mark{}, fmt.Errorf("ledger line %q: unknown kind %q", line, f[0])
	}
	job, err := uuid.Parse(f[1])
	if err != nil {
		return mark{}, fmt.Errorf("ledger line %q: %w", line, err)
	}
	att, err := strconv.Atoi(f[2])
	if err != nil || att < 1 {
		return mark{}, fmt.Errorf("ledger line %q: attempt %q", line, f[2])
	}
	at, err := parseUptime(f[4])
	if err != nil {
		return mark{}, fmt.Errorf("ledger line %q: %w", line, err)
	}
	return mark{kind: f[0], job: job, attempt: att, where: f[3], at: at, line: line}, nil
}

// readLedgerFile parses the file the shell workers' steps append to. Each line is short
// enough to be appended in one write, so a torn line is an error.
func readLedgerFile(path string) ([]mark, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	defer f.Close()
	var out []mark
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		m, err := parseMark(sc.Text())
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// ledgerServer takes the marks of container jobs, whose containers share no file with
// the suite: GET /m/KIND/JOB/ATTEMPT/WHERE/UPTIME. It listens on the engine's default
// bridge gateway, which the job containers reach.
type ledgerServer struct {
	ln  net.Listener
	srv *http.Server

	mu    sync.Mutex
	marks []mark
	bad   []string
}

func startLedgerServer(addr string) (*ledgerServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ledger server: %w", err)
	}
	l := &ledgerServer{ln: ln}
	l.srv = &http.Server{Handler: http.HandlerFunc(l.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

func (l *ledgerServer) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/m/")
	line := strings.ReplaceAll(rest, "/", " ")
	m, err := parseMark(line)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok || err != nil {
		l.bad = append(l.bad, r.URL.Path)
		http.Error(w, "bad mark", http.StatusBadRequest)
		return
	}
	l.marks = append(l.marks, m)
	w.WriteHeader(http.StatusNoContent)
}

// url is the base the steps append a mark to.
func (l *ledgerServer) url() string { return "http://" + l.ln.Addr().String() + "/m" }

// taken returns the marks received and the requests that were not marks.
func (l *ledgerServer) taken() ([]mark, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]mark(nil), l.marks...), append([]string(nil), l.bad...)
}

func (l *ledgerServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
}

// byAttempt groups marks by job, then attempt, each attempt's marks in time order.
func byAttempt(marks []mark) map[uuid.UUID]map[int][]mark {
	out := map[uuid.UUID]map[int][]mark{}
	for _, m := range marks {
		if out[m.job] == nil {
			out[m.job] = map[int][]mark{}
		}
		out[m.job][m.attempt] = append(out[m.job][m.attempt], m)
	}
	for _, atts := range out {
		for _, ms := range atts {
			sort.SliceStable(ms, func(i, j int) bool { return ms[i].at < ms[j].at })
		}
	}
	return out
}
