package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gantry-ci/gantry/internal/cli"
)

// waitPostgres waits until PostgreSQL takes connections, then makes the database the
// replicas share.
func (c *cluster) waitPostgres() {
	c.t.Helper()
	admin := strings.Replace(c.pgURL, "/gantry?", "/postgres?", 1)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(c.t.Context(), 5*time.Second)
		conn, err := pgx.Connect(ctx, admin)
		if err == nil {
			_, err = conn.Exec(ctx, "CREATE DATABASE gantry")
			_ = conn.Close(ctx)
			cancel()
			if err != nil && !strings.Contains(err.Error(), "already exists") {
				c.t.Fatalf("create the database: %v", err)
			}
			return
		}
		cancel()
		if time.Now().After(deadline) {
			c.t.Fatalf("PostgreSQL did not take connections within 90s: %v\n%s", err, c.logs(c.byName["pg"], 40))
		}
		time.Sleep(250 * time.Millisecond) // a poll under a deadline
	}
}

// token makes a token of role in the shared database, as an operator would with
// `gantry token create --db`, and returns its secret. The first call also migrates the
// database.
func (c *cluster) token(role string) string {
	c.t.Helper()
	var stdout, stderr bytes.Buffer
	args := []string{"token", "create", "--db", c.pgURL, "--role", role, "--name", "cluster " + role}
	if code := cli.Run(c.t.Context(), args, strings.NewReader(""), &stdout, &stderr); code != 0 {
		c.t.Fatalf("gantry %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// httpClient reaches the cluster's nodes by their names, as the containers do (the
// signed URLs of artifacts name minio:9000), from the host, through their addresses.
func (c *cluster) httpClient(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 3 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if n := c.byName[host]; n != nil {
				addr = net.JoinHostPort(n.ip.String(), port)
			}
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 8,
	}
	return &http.Client{Timeout: timeout, Transport: tr}
}

// errStatus is an answer the API gave with a status other than the one wanted.
type errStatus struct {
	status int
	body   string
}

func (e *errStatus) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.status, strings.TrimSpace(e.body))
}

// call makes one API request to replica r (its name) with the admin token, decoding a
// JSON answer into out when it is not nil.
func (c *cluster) call(ctx context.Context, hc *http.Client, r, method, path string, hdr map[string]string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+r+":"+serverPort+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.admin)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return &errStatus{res.StatusCode, string(data)}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode %s %s: %w: %.200s", method, path, err, data)
		}
	}
	return nil
}

// apiRun is the part of a run's answer the suite reads.
type apiRun struct {
	ID     uuid.UUID `json:"id"`
	Status string    `json:"status"`
	Jobs   []struct {
		ID       uuid.UUID `json:"id"`
		Key      string    `json:"key"`
		Name     string    `json:"name"`
		Status   string    `json:"status"`
		Attempt  int       `json:"attempt"`
		WorkerID string    `json:"worker_id"`
	} `json:"jobs"`
}

// submit posts a run to the replicas in turn, from start, until one takes it: a client
// behind a load balancer retries on another replica, with the same idempotency key, so
// a run whose answer was lost is not made twice.
func (c *cluster) submit(ctx context.Context, hc *http.Client, start int, key string, body []byte) (apiRun, error) {
	var run apiRun
	var errs []error
	replicas := c.of("replica")
	for try := range 3 * len(replicas) {
		r := replicas[(start+try)%len(replicas)].name
		err := c.call(ctx, hc, r, http.MethodPost, "/api/v1/runs",
			map[string]string{"Content-Type": "application/yaml", "Idempotency-Key": key}, body, http.StatusAccepted, &run)
		if err == nil {
			return run, nil
		}
		var es *errStatus
		if errors.As(err, &es) && es.status < 500 && es.status != http.StatusConflict {
			return run, fmt.Errorf("submit %s on %s: %w", key, r, err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", r, err))
		if ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond) // the next replica, after a failed one
	}
	return run, fmt.Errorf("submit %s: no replica took it: %w", key, errors.Join(errs...))
}

// logOf reads an attempt's whole log from replica r, page by page.
func (c *cluster) logOf(ctx context.Context, hc *http.Client, r string, job uuid.UUID, attempt int) ([]logLine, error) {
	var out []logLine
	after := int64(0)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			fmt.Sprintf("http://%s:%s/api/v1/jobs/%s/logs?attempt=%d&after_seq=%d&limit=10000", r, serverPort, job, attempt, after), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+c.admin)
		req.Header.Set("Accept", "application/x-ndjson")
		res, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		if res.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(res.Body)
			res.Body.Close()
			return nil, &errStatus{res.StatusCode, string(data)}
		}
		n := 0
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
		for sc.Scan() {
			var l logLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				res.Body.Close()
				return nil, fmt.Errorf("log of %s: %w", job, err)
			}
			out = append(out, l)
			after = l.Seq
			n++
		}
		err = sc.Err()
		res.Body.Close()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
	}
}

// artifact is an entry of a job's artifact list.
type artifact struct {
	ID      uuid.UUID `json:"id"`
	Attempt int       `json:"attempt"`
	Name    string    `json:"name"`
	SHA256  string    `json:"sha256"`
	Size    int64     `json:"size"`
}

// download reads an artifact from replica r: a redirect to a signed URL of MinIO's.
func (c *cluster) download(ctx context.Context, hc *http.Client, r string, id uuid.UUID) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%s/api/v1/artifacts/%s", r, serverPort, id), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.admin)
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, &errStatus{res.StatusCode, string(data)}
	}
	return data, nil
}
