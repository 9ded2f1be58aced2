package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestStreamEndsOnRevocation: an open log stream whose token is revoked ends, saying
// why, within a few token checks; the stream of another token goes on.
func TestStreamEndsOnRevocation(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) {
		c.Auth = true
		c.TokenCheck = 20 * time.Millisecond
		c.KeepAlive = 20 * time.Millisecond
	})
	admin := bearer(issue(t, b.store, store.RoleAdmin))
	r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", `{"pipeline": "name: s\njobs:\n  a: {steps: [{run: make}]}\n"}`, admin)
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	var run struct {
		Jobs []struct{ ID string } `json:"jobs"`
	}
	r.decode(t, &run)
	named := func(name string) string {
		secret, err := api.IssueToken(t.Context(), b.store, name, store.RoleRead, "")
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	reader, other := named("reader"), named("other")

	type event struct{ name, data string }
	open := func(token string) <-chan event {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.url+"/api/v1/jobs/"+run.Jobs[0].ID+"/logs/stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("stream: %d", res.StatusCode)
		}
		out := make(chan event, 1024)
		go func() {
			defer close(out)
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			var ev event
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, ":"):
					ev.name = "comment"
				case strings.HasPrefix(line, "event: "):
					ev.name = strings.TrimPrefix(line, "event: ")
				case strings.HasPrefix(line, "data: "):
					ev.data = strings.TrimPrefix(line, "data: ")
				case line == "" && ev.name != "":
					out <- ev
					ev = event{}
				}
			}
		}()
		return out
	}
	// next is the stream's next event other than a keep-alive; ok is false once it ended.
	next := func(events <-chan event) (event, bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev, ok := <-events:
				if ok && ev.name == "comment" {
					continue
				}
				return ev, ok
			case <-deadline:
				t.Fatal("the stream neither sent an event nor ended within 10s")
				return event{}, false
			}
		}
	}
	mine, theirs := open(reader), open(other)
	// Both are open: each has sent a keep-alive.
	for _, s := range []<-chan event{mine, theirs} {
		if ev, ok := <-s; !ok || ev.name != "comment" {
			t.Fatalf("first event %+v (open %v), want a keep-alive", ev, ok)
		}
	}

	var list struct {
		Tokens []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"tokens"`
	}
	lr := b.do(t, http.MethodGet, "/api/v1/tokens", "", "", admin)
	lr.decode(t, &list)
	id := ""
	for _, tk := range list.Tokens {
		if tk.Name == "reader" {
			id = tk.ID
		}
	}
	if id == "" {
		t.Fatalf("no token named reader in %s", lr.body)
	}
	if r := b.do(t, http.MethodDelete, "/api/v1/tokens/"+id, "", "", admin); r.status != http.StatusNoContent && r.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	ended, alive := mine, theirs
	ev, ok := next(ended)
	if !ok || ev.name != "error" {
		t.Fatalf("the revoked token's stream: event %+v (open %v), want an error event", ev, ok)
	}
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(ev.data), &body); err != nil || body.Error.Code != "unauthorized" || !strings.Contains(body.Error.Message, "revoked") {
		t.Errorf("error event %q, want unauthorized, revoked", ev.data)
	}
	if ev, ok := next(ended); ok {
		t.Errorf("the revoked token's stream goes on after its error: %+v", ev)
	}
	// The other stream still sends keep-alives after the revoked one ended: what it had
	// sent before is drained first.
	for drained := false; !drained; {
		select {
		case _, ok := <-alive:
			if !ok {
				t.Fatal("the other token's stream ended too")
			}
		default:
			drained = true
		}
	}
	select {
	case ev, ok := <-alive:
		if !ok || ev.name != "comment" {
			t.Errorf("the other token's stream: %+v (open %v), want a keep-alive", ev, ok)
		}
	case <-time.After(10 * time.Second):
		t.Error("the other token's stream sent nothing within 10s")
	}
}
