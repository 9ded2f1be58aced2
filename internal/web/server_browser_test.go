package web_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gantry-ci/gantry/internal/cli"
)

// serverChildEnv turns the test binary into the gantry command, so that a test can run
// `gantry server` as its own process, configured by its flags alone as in production.
const (
	serverChildEnv     = "GANTRY_WEB_TEST_CHILD"
	serverChildArgsEnv = "GANTRY_WEB_TEST_ARGS" // newline-separated arguments
)

func TestMain(m *testing.M) {
	if os.Getenv(serverChildEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, strings.Split(os.Getenv(serverChildArgsEnv), "\n"), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// lockedBuffer is a bytes.Buffer a process's output and the test can share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gantry runs `gantry args...` to its end and returns what it printed.
func gantry(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if code := cli.Run(t.Context(), args, strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("gantry %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
	}
	return out.String()
}

var listeningAt = regexp.MustCompile(`msg="gantry server listening" addr=(\S+)`)

// startServerProcess runs `gantry server --addr 127.0.0.1:0 args...` as a child process
// until the test ends and returns its base URL.
func startServerProcess(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverChildEnv+"=1",
		serverChildArgsEnv+"="+strings.Join(append([]string{"server", "--addr", "127.0.0.1:0", "--log-format", "text"}, args...), "\n"))
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("gantry server log:\n%s", out.String())
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		if m := listeningAt.FindStringSubmatch(out.String()); m != nil {
			return "http://" + m[1]
		}
		select {
		case <-exited:
			t.Fatalf("gantry server exited before listening:\n%s", out.String())
		case <-deadline:
			t.Fatalf("gantry server did not say where it listens:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestServerDashboardSignIn: a `gantry server --auth on` process, the production
// deployment, serves the dashboard: at desktop and phone widths its first page is the
// sign-in form, fully on screen; a wrong token is refused in words; the right one shows
// the runs list with the run submitted over the API.
func TestServerDashboardSignIn(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "gantry.db")
	token := strings.TrimSpace(gantry(t, "token", "create", "--db", db, "--role", "write", "--name", "dashboard"))
	base := startServerProcess(t, "--db", db, "--auth", "on")

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/runs",
		strings.NewReader("name: production-run\njobs:\n  a: { steps: [ { run: echo a } ] }\n"))
	req.Header.Set("Content-Type", "application/yaml")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %s %s", res.Status, body)
	}

	for _, size := range []struct {
		name          string
		width, height int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			// The sign-in's own 401s are logged by the browser.
			b := newBrowser(t, func(m chromedp.ConsoleMessage) bool { return strings.Contains(m.Text, "status of 401") })
			b.do("open the dashboard", chromedp.EmulateViewport(size.width, size.height), chromedp.Navigate(base+"/"),
				chromedp.WaitVisible(chromedp.ID("token")))
			if got := b.eval(`location.pathname`); got != "/signin" {
				t.Errorf("the dashboard of a server with auth on opened at %s, want /signin", got)
			}
			// What the user sees: the heading, the field and the button, inside the window.
			if got := b.eval(`(() => {
				const inView = el => { const r = el.getBoundingClientRect(); const s = getComputedStyle(el);
					return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= innerWidth && s.visibility === "visible" && s.display !== "none"; };
				const h = document.querySelector("main h1"), f = document.querySelector("#token"), s = document.querySelector("form.signin button[type=submit]");
				return [h && h.innerText, inView(h), inView(f), inView(s), s && s.innerText, document.documentElement.scrollWidth <= innerWidth].join("|");
			})()`); got != "Sign in to Gantry|true|true|true|Sign in|true" {
				t.Errorf("the sign-in page as seen (heading|heading, field, button in view|button|no sideways scroll): %s", got)
			}
			b.screenshot("server-signin-" + size.name)

			b.do("sign in with a wrong token", chromedp.SendKeys(chromedp.ID("token"), "gtk_wrong\r"))
			b.waitJS("the refusal, in words", `(() => { const e = document.querySelector("#signin-error");
				return e && getComputedStyle(e).display !== "none" && e.getBoundingClientRect().height > 0 && e.innerText.includes("not valid"); })()`)

			b.eval(`document.querySelector("#token").value = ""`)
			b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), token+"\r"))
			b.waitJS("the runs list with the run", `location.pathname === "/" && document.querySelector("main").innerText.includes("production-run")`)
			if got := b.eval(`(() => { const a = [...document.querySelectorAll("main a")].find(a => a.innerText.includes("production-run"));
				if (!a) return "no link"; const r = a.getBoundingClientRect();
				return String(r.width > 0 && r.height > 0 && r.left >= 0 && r.left < innerWidth); })()`); got != "true" {
				t.Errorf("the run's link on the runs list is not on screen: %s", got)
			}
			b.screenshot("server-runs-" + size.name)
		})
	}
}
