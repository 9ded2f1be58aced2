package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/store"
)

// auditConfig is everything `gantry audit` acts on.
type auditConfig struct {
	clientConfig
	Project string
	Action  string
	Actor   string
	// Since is an RFC 3339 time, or a duration meaning that long ago.
	Since  string
	Limit  int
	Before string
}

// auditView is an audit entry as the API shows it.
type auditView struct {
	ID         string          `json:"id"`
	Time       string          `json:"time"`
	ActorID    string          `json:"actor_id"`
	Actor      string          `json:"actor"`
	Action     string          `json:"action"`
	Project    string          `json:"project"`
	Target     string          `json:"target"`
	Details    json.RawMessage `json:"details"`
	RemoteAddr string          `json:"remote_addr"`
}

func (a *app) auditCommand() *cobra.Command {
	var cfg auditConfig
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log: who created and revoked tokens, changed projects, set secrets",
		Long: "Audit lists the coordinator's audit log, newest first, a page at a time: when, who\n" +
			"(the token's name, anonymous when the server runs without auth, or system), what\n" +
			"action, on which project and target, from which address, and a few details. The\n" +
			"log is append-only: the database itself refuses to change or delete an entry.\n" +
			"When more entries follow, the command that lists the next page is printed on\n" +
			"stderr. It needs an admin token.\n\n" +
			"--action takes an action (token.created) or its first segments (token: every\n" +
			"token action). --actor takes a token's name or id. --since takes a time\n" +
			"(2026-01-02T15:04:05Z) or a duration meaning that long ago (24h).\n\n" + configHelp,
		Example: "  gantry audit\n" +
			"  gantry audit --project web --action secret --since 168h\n" +
			"  gantry audit --action token.revoked --json | jq '.entries[].target'",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.auditList(cmd.Context(), cfg, time.Now())
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.StringVar(&cfg.Project, "project", "", "only entries about this project")
	f.StringVar(&cfg.Action, "action", "", "only this action, or actions under this prefix (token, secret, project.updated)")
	f.StringVar(&cfg.Actor, "actor", "", "only entries of this actor: a token's name or id, anonymous or system")
	f.StringVar(&cfg.Since, "since", "", "only entries at or after this time (RFC 3339) or this long ago (24h)")
	f.IntVar(&cfg.Limit, "limit", 50, "entries per page, 1 to 500")
	f.StringVar(&cfg.Before, "before", "", "the page after this entry id (printed at the end of a full page)")
	return cmd
}

// query validates the flags into the API's query, at now for a relative --since.
func (c *auditConfig) query(now time.Time) (url.Values, error) {
	if c.Limit < 1 || c.Limit > 500 {
		return nil, usagef("--limit %d: want 1 to 500", c.Limit)
	}
	if c.Before != "" {
		if _, err := uuid.Parse(c.Before); err != nil {
			return nil, usagef("--before %q is not an audit entry id", c.Before)
		}
	}
	q := url.Values{"limit": {strconv.Itoa(c.Limit)}}
	if c.Since != "" {
		since, err := time.Parse(time.RFC3339Nano, c.Since)
		if err != nil {
			d, derr := time.ParseDuration(c.Since)
			if derr != nil || d <= 0 {
				return nil, usagef("--since %q: want a time such as 2026-01-02T15:04:05Z or a duration such as 24h", c.Since)
			}
			since = now.Add(-d)
		}
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	for k, v := range map[string]string{"project": c.Project, "action": c.Action, "actor": c.Actor, "before": c.Before} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q, nil
}

func (a *app) auditList(ctx context.Context, cfg auditConfig, now time.Time) error {
	q, err := cfg.query(now)
	if err != nil {
		return err
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	var page struct {
		Entries    []auditView `json:"entries"`
		NextCursor string      `json:"next_cursor"`
	}
	raw, err := c.getRaw(ctx, "/api/v1/audit?"+q.Encode(), &page)
	if err != nil {
		return fmt.Errorf("list audit log: %w", err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	if len(page.Entries) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no audit entries")
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tACTOR\tACTION\tPROJECT\tTARGET\tFROM\tDETAILS")
	for _, e := range page.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(e.Time), cell(e.Actor), cell(e.Action), cell(e.Project),
			cell(e.Target), cell(e.RemoteAddr), cell(compactDetails(e.Details)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		// The same filters again, with the cursor: the next page of the same listing.
		next := []string{"gantry audit"}
		for _, f := range []struct{ flag, v string }{{"--project", cfg.Project}, {"--action", cfg.Action},
			{"--actor", cfg.Actor}, {"--since", q.Get("since")}} {
			if f.v != "" {
				next = append(next, f.flag, shellWord(f.v))
			}
		}
		if cfg.Limit != 50 {
			next = append(next, "--limit", strconv.Itoa(cfg.Limit))
		}
		fmt.Fprintf(a.stderr, "more: %s --before %s\n", strings.Join(next, " "), page.NextCursor)
	}
	return nil
}

// compactDetails is an entry's details on one line; none is empty.
func compactDetails(d json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, d); err != nil || b.String() == "{}" || b.String() == "null" {
		return ""
	}
	return b.String()
}

// cell makes a value safe for one table cell: "-" for none, quoted when it holds a tab,
// a newline or a control character that would break the table or drive the terminal.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return strconv.Quote(s)
	}
	return s
}

// shellWord quotes s for a shell when it holds anything but plain characters.
func shellWord(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_.:/@+=,", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// localAudit is the audit entry of an action taken on the store directly (gantry token
// --db): no token made the request, so the actor is local; via names the command, and
// the system user who ran it is kept in the details.
func localAudit(action, target, via string, details map[string]any) store.AuditEntry {
	if details == nil {
		details = map[string]any{}
	}
	details["via"] = via
	if u, err := user.Current(); err == nil {
		details["os_user"] = u.Username
	}
	return store.AuditEntry{Actor: store.ActorLocal, Action: action, Target: target, Details: store.AuditDetails(details)}
}

// tokenDetails is what the audit log keeps of a new token: never its secret or hash.
func tokenDetails(tk *store.Token) map[string]any {
	d := map[string]any{"name": tk.Name, "role": string(tk.Role)}
	if tk.User != "" {
		d["user"] = tk.User
	}
	if len(tk.Labels) > 0 {
		d["labels"] = tk.Labels
	}
	if len(tk.Projects) > 0 {
		d["projects"] = tk.Projects
	}
	if !tk.ExpiresAt.IsZero() {
		d["expires_at"] = tk.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return d
}
