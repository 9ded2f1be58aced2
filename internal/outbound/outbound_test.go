package outbound_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/outbound"
)

func TestCheckURL(t *testing.T) {
	t.Parallel()
	none := outbound.Policy{}
	for _, tc := range []struct {
		url, allow string
		refused    string // what the error says; "" when allowed
	}{
		{"https://hooks.example.com/ci", "", ""},
		{"https://93.184.215.14/ci", "", ""},
		{"https://[2606:4700::1111]/ci", "", ""},
		{"http://internal.example/ci", "", ""}, // a name: checked when dialed
		{"https://user:pw@hooks.example.com/ci", "", "credentials"},
		{"https://token@hooks.example.com/ci", "10.0.0.0/8,hooks.example.com", "credentials"},
		{"http://127.0.0.1:8080/", "", "loopback"},
		{"http://127.9.9.9/", "", "loopback"},
		{"http://[::1]/", "", "loopback"},
		{"http://[::ffff:127.0.0.1]/", "", "loopback"},
		{"http://[::ffff:10.0.0.1]/", "", "private"},
		{"http://0.0.0.0/", "", "unspecified"},
		{"http://[::]/", "", "unspecified"},
		{"http://169.254.169.254/latest/meta-data/", "", "link-local"},
		{"http://[fe80::1]/", "", "link-local"},
		{"http://10.1.2.3/", "", "private"},
		{"http://172.16.0.1/", "", "private"},
		{"http://192.168.1.1/", "", "private"},
		{"http://[fd00::1]/", "", "private"},
		{"http://100.64.0.1/", "", "carrier-grade NAT"},
		{"http://[64:ff9b::a00:1]/", "", "private address behind NAT64"},
		{"http://[2002:7f00:1::]/", "", "loopback address behind 6to4"},
		{"http://2130706433/", "", "loopback"},
		{"http://0x7f.1/", "", "loopback"},
		{"http://0177.0.0.1/", "", "loopback"},
		{"http://10.1.2.3/", "10.0.0.0/8", ""},
		{"http://10.1.2.3/", "10.1.2.3", ""},
		{"http://10.1.2.4/", "10.1.2.3", "private"},
		{"http://127.0.0.1:9/", "127.0.0.0/8,::1", ""},
		{"http://[::ffff:127.0.0.1]/", "127.0.0.0/8", ""},
		{"http://ghe.internal/", "GHE.internal.", ""},
	} {
		t.Run(tc.url+" "+tc.allow, func(t *testing.T) {
			p, err := outbound.Parse(tc.allow)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.allow, err)
			}
			if tc.allow == "" {
				p = none
			}
			err = p.CheckURL(tc.url)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("CheckURL: %v, want allowed", err)
			case tc.refused != "" && (!errors.Is(err, outbound.ErrRefused) || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("CheckURL: %v, want a refusal saying %q", err, tc.refused)
			}
		})
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	p, err := outbound.Parse(" 10.0.0.0/8, ::1 ,ghe.internal,,[fd00::1], 192.168.1.7/16")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), "10.0.0.0/8,::1/128,fd00::1/128,192.168.0.0/16,ghe.internal"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, bad := range []string{"http://ghe.internal", "10.0.0.0/33", "a b", "-x.example", "host:8080"} {
		if _, err := outbound.Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

// TestClientChecksTheDialedAddress: the refusal is on the address the client connects
// to, so a name resolving to loopback is refused like the literal.
func TestClientChecksTheDialedAddress(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	byName := "http://localhost:" + u.Port() + "/"
	loopback, _ := outbound.Parse("127.0.0.0/8,::1")
	named, _ := outbound.Parse("localhost")
	for _, tc := range []struct {
		name   string
		policy outbound.Policy
		url    string
		ok     bool
	}{
		{"literal, nothing allowed", outbound.Policy{}, srv.URL, false},
		{"name, nothing allowed", outbound.Policy{}, byName, false},
		{"literal, loopback allowed", loopback, srv.URL, true},
		{"name, loopback allowed", loopback, byName, true},
		{"name, the name allowed", named, byName, true},
		{"literal, only a name allowed", named, srv.URL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := tc.policy.CheckURL(byName); err != nil {
				t.Fatalf("CheckURL(%s): %v; a name is checked when dialed", byName, err)
			}
			resp, err := tc.policy.Client(10*time.Second).Post(tc.url, "application/json", strings.NewReader("{}"))
			if tc.ok {
				if err != nil {
					t.Fatalf("POST %s: %v", tc.url, err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("POST %s: %d", tc.url, resp.StatusCode)
				}
				return
			}
			if err == nil {
				resp.Body.Close()
				t.Fatalf("POST %s went through", tc.url)
			}
			var re *outbound.RefusedError
			if !errors.As(err, &re) || !re.Addr.IsLoopback() || !strings.Contains(err.Error(), "--outbound-allow") {
				t.Errorf("POST %s: %v, want a refusal of a loopback address naming --outbound-allow", tc.url, err)
			}
		})
	}
}

// TestClientFollowsNoRedirect: a 307 is the answer; its target never gets the body.
func TestClientFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	var reached atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Store(true) }))
	t.Cleanup(target.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	p, _ := outbound.Parse("127.0.0.0/8")
	resp, err := p.Client(10*time.Second).Post(redirect.URL, "application/json", strings.NewReader(`{"secret":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || reached.Load() {
		t.Errorf("answer %d, target reached %v; want the 307 itself and the target untouched", resp.StatusCode, reached.Load())
	}
}
