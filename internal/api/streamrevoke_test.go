package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
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

	revokeNamed(t, b, admin, "reader")
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

// revokeNamed revokes the token called name through the API.
func revokeNamed(t *testing.T, b *bundle, admin map[string]string, name string) {
	t.Helper()
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
		if tk.Name == name {
			id = tk.ID
		}
	}
	if id == "" {
		t.Fatalf("no token named %s in %s", name, lr.body)
	}
	if r := b.do(t, http.MethodDelete, "/api/v1/tokens/"+id, "", "", admin); r.status != http.StatusNoContent && r.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
}

// TestWSEndsOnRevocation: a WebSocket whose token is revoked while it holds
// subscriptions closes with a policy-violation close that says why, within a few token
// checks; the connection of another token goes on and may still subscribe.
func TestWSEndsOnRevocation(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) {
		c.Auth = true
		c.TokenCheck = 20 * time.Millisecond
	})
	admin := bearer(issue(t, b.store, store.RoleAdmin))
	r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", `{"pipeline": "name: s\njobs:\n  a: {steps: [{run: make}]}\n"}`, admin)
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	var run struct {
		ID   string                `json:"id"`
		Jobs []struct{ ID string } `json:"jobs"`
	}
	r.decode(t, &run)
	dial := func(name string) *websocket.Conn {
		secret, err := api.IssueToken(t.Context(), b.store, name, store.RoleRead, "")
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := websocket.Dial(t.Context(), wsURL(b, ""), &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + secret}},
		})
		if err != nil {
			t.Fatalf("dial as %s: %v", name, err)
		}
		t.Cleanup(func() { _ = c.CloseNow() })
		return c
	}
	// read returns the connection's next message, or the error that ended it.
	read := func(c *websocket.Conn) (wsMsg, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, data, err := c.Read(ctx)
		if err != nil {
			return wsMsg{}, err
		}
		var m wsMsg
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("server sent %s: %v", data, err)
		}
		return m, nil
	}
	// subscribe subscribes to the run and to its job's log and waits until both answered.
	subscribe := func(c *websocket.Conn, prefix string) {
		t.Helper()
		for _, m := range []string{
			`{"type": "subscribe", "id": "` + prefix + `run", "topic": "run", "run_id": "` + run.ID + `"}`,
			`{"type": "subscribe", "id": "` + prefix + `log", "topic": "logs", "job_id": "` + run.Jobs[0].ID + `"}`,
		} {
			if err := c.Write(t.Context(), websocket.MessageText, []byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]bool{}
		for !seen[prefix+"run"] || !seen[prefix+"log"] {
			m, err := read(c)
			if err != nil {
				t.Fatalf("subscribe %s: %v", prefix, err)
			}
			if m.Type == "error" {
				t.Fatalf("subscribe %s: %s", prefix, m.Message)
			}
			if m.Type == "subscribed" {
				seen[m.ID] = true
			}
		}
	}
	mine, theirs := dial("reader"), dial("other")
	subscribe(mine, "a-")
	subscribe(theirs, "a-")

	revokeNamed(t, b, admin, "reader")
	for {
		m, err := read(mine)
		if err == nil {
			if m.Type == "error" {
				t.Fatalf("the revoked token's connection sent an error %q, want a close", m.Message)
			}
			continue // a run or lines message sent before the revocation was seen
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("the revoked token's connection ended with %v, want a close frame", err)
		}
		if ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "revoked") {
			t.Fatalf("close %d %q, want %d and a reason naming the revocation", ce.Code, ce.Reason, websocket.StatusPolicyViolation)
		}
		break
	}
	// The other connection is still open and still subscribes.
	subscribe(theirs, "b-")
}
