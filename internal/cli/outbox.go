package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// outboxView is an outbox message as the API shows it.
type outboxView struct {
	ID            string          `json:"id"`
	Topic         string          `json:"topic"`
	State         string          `json:"state"`
	Attempts      int             `json:"attempts"`
	LastError     string          `json:"last_error"`
	NextAttemptAt string          `json:"next_attempt_at"`
	CreatedAt     string          `json:"created_at"`
	DeliveredAt   string          `json:"delivered_at"`
	DeadAt        string          `json:"dead_at"`
	Payload       json.RawMessage `json:"payload"`
}

// summary says in a few words what a message reports.
func (m outboxView) summary() string {
	var p struct {
		RunID   string `json:"run_id"`
		State   string `json:"state"`
		Context string `json:"context"`
		Event   string `json:"event"`
		Run     struct {
			ID string `json:"id"`
		} `json:"run"`
		Job *struct {
			Key string `json:"key"`
		} `json:"job"`
		Workflow   string `json:"workflow"`
		Action     string `json:"action"`
		Conclusion string `json:"conclusion"`
	}
	_ = json.Unmarshal(m.Payload, &p)
	if p.Action != "" {
		s := "workflow_run " + p.Action
		if p.Conclusion != "" {
			s += " " + p.Conclusion
		}
		return s + " of " + strconv.Quote(p.Workflow) + " run " + p.RunID
	}
	if p.Event != "" {
		s := p.Event + " run " + p.Run.ID
		if p.Job != nil {
			s += " job " + p.Job.Key
		}
		return s
	}
	if p.State != "" {
		return p.Context + " " + p.State + " run " + p.RunID
	}
	return ""
}

// outboxConfig is everything `gantry outbox list` acts on.
type outboxConfig struct {
	clientConfig
	State string
	Topic string
	Limit int
}

func (a *app) outboxCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "See and redeliver commit statuses and webhooks Gantry sends: list, redeliver",
		Long: "Outbox shows the messages the coordinator delivers: commit statuses to forges and\n" +
			"outbound webhooks. Each is written with the change it reports and retried with\n" +
			"backoff until delivered, or dead-lettered after its attempts are spent or when the\n" +
			"receiver refuses it for good (a 4xx). Both commands need an admin token.\n\n" + configHelp,
		Args: noArgs,
	}
	var list outboxConfig
	listCmd := &cobra.Command{
		Use:   "list [--state pending|failed|dead|delivered|superseded]",
		Short: "List outbox messages, newest first",
		Example: "  gantry outbox list --state dead\n" +
			"  gantry outbox list --state failed --topic webhook --json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch list.State {
			case "", "pending", "failed", "dead", "delivered", "superseded":
			default:
				return usagef("--state %q: want pending, failed, dead, delivered or superseded", list.State)
			}
			if list.Limit < 1 || list.Limit > 500 {
				return usagef("--limit %d: want 1 to 500", list.Limit)
			}
			c, err := list.client()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {fmt.Sprint(list.Limit)}}
			if list.State != "" {
				q.Set("state", list.State)
			}
			if list.Topic != "" {
				q.Set("topic", list.Topic)
			}
			var out struct {
				Messages []outboxView `json:"messages"`
			}
			raw, err := c.getRaw(cmd.Context(), "/api/v1/outbox?"+q.Encode(), &out)
			if err != nil {
				return fmt.Errorf("list outbox: %w", err)
			}
			if list.JSON {
				return writeRaw(a.stdout, raw)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTOPIC\tSTATE\tATTEMPTS\tWHAT\tLAST ERROR")
			for _, m := range out.Messages {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, m.Topic, m.State, m.Attempts, m.summary(), oneLine(m.LastError))
			}
			return tw.Flush()
		},
	}
	a.clientFlags(listCmd, &list.clientConfig)
	listCmd.Flags().StringVar(&list.State, "state", "", "pending (failed included), failed, dead, delivered or superseded (default: all)")
	listCmd.Flags().StringVar(&list.Topic, "topic", "", "status, webhook or workflow_run (default: every one)")
	listCmd.Flags().IntVar(&list.Limit, "limit", 50, "most messages to list (1 to 500)")

	var redeliver clientConfig
	redeliverCmd := &cobra.Command{
		Use:   "redeliver ID",
		Short: "Deliver a message again now, with a fresh set of attempts",
		Long: "Redeliver makes a message due at once with its attempts and error cleared: a dead\n" +
			"one is retried after its receiver was fixed, a delivered one is sent again.\n\n" + configHelp,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := redeliver.client()
			if err != nil {
				return err
			}
			var m outboxView
			raw, err := c.postRaw(cmd.Context(), "/api/v1/outbox/"+url.PathEscape(args[0])+"/redeliver", &m)
			if err != nil {
				return fmt.Errorf("redeliver message %s: %w", args[0], err)
			}
			if redeliver.JSON {
				return writeRaw(a.stdout, raw)
			}
			_, err = fmt.Fprintf(a.stdout, "message %s will be delivered again\n", m.ID)
			return err
		},
	}
	a.clientFlags(redeliverCmd, &redeliver)
	cmd.AddCommand(listCmd, redeliverCmd)
	return cmd
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:79]) + "…"
	}
	return s
}

// webhookView is an outbound webhook subscription as the API shows it.
type webhookView struct {
	ID        string   `json:"id"`
	Project   string   `json:"project"`
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	Secret    string   `json:"secret"`
	CreatedAt string   `json:"created_at"`
}

// webhookConfig is everything `gantry project webhook add` acts on.
type webhookConfig struct {
	clientConfig
	URL        string
	SecretFile string
	Events     []string
}

// projectWebhookCommand is `gantry project webhook`: outbound webhook subscriptions.
func (a *app) projectWebhookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Send a project's run and job results to a URL: add, list, remove",
		Long: "Webhook manages a project's outbound webhooks. Gantry POSTs each event to the URL\n" +
			"as JSON, signed in X-Gantry-Signature-256 (sha256=HMAC-SHA256 of the body with\n" +
			"the secret, hex), with X-Gantry-Event and a delivery id in X-Gantry-Delivery that\n" +
			"is the same on a retry. Subscriptions apply to runs created after them. All three\n" +
			"commands need an admin token.\n\n" + configHelp,
		Args: noArgs,
	}
	var add webhookConfig
	addCmd := &cobra.Command{
		Use:   "add PROJECT --url URL [--event run.finished] [--event job.finished]",
		Short: "Subscribe a URL to a project's events and print its secret once",
		Example: "  gantry project webhook add web --url https://chat.example.com/hooks/ci\n" +
			"  gantry project webhook add web --url https://audit.example.com/in --event job.finished --secret-file ./hook.key",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if add.URL == "" {
				return usagef("--url is required: where Gantry POSTs the events")
			}
			req := map[string]any{"url": add.URL}
			if len(add.Events) > 0 {
				req["events"] = add.Events
			}
			if add.SecretFile != "" {
				secret, err := readSecretFile("--secret-file", add.SecretFile)
				if err != nil {
					return err
				}
				req["secret"] = secret
			}
			body, err := json.Marshal(req)
			if err != nil {
				return err
			}
			c, err := add.client()
			if err != nil {
				return err
			}
			raw, err := c.call(cmd.Context(), http.MethodPost, projectPath(args[0])+"/webhooks", bytes.NewReader(body),
				http.Header{"Content-Type": {"application/json"}})
			if err != nil {
				return fmt.Errorf("add webhook to project %s: %w", args[0], err)
			}
			if add.JSON {
				return writeRaw(a.stdout, raw)
			}
			var h webhookView
			if err := json.Unmarshal(raw, &h); err != nil {
				return fmt.Errorf("read the server's answer: %w", err)
			}
			fmt.Fprintf(a.stdout, "webhook %s added to project %s: %s on %s\n", h.ID, args[0], h.URL, strings.Join(h.Events, ", "))
			_, err = fmt.Fprintf(a.stdout, "secret (shown once): %s\n", h.Secret)
			return err
		},
	}
	a.clientFlags(addCmd, &add.clientConfig)
	addCmd.Flags().StringVar(&add.URL, "url", "", "where to POST the events (http or https)")
	addCmd.Flags().StringVar(&add.SecretFile, "secret-file", "", "read the signing secret from this file (default: generate one)")
	addCmd.Flags().StringArrayVar(&add.Events, "event", nil, "run.finished or job.finished; repeat for both (default run.finished)")

	var list clientConfig
	listCmd := &cobra.Command{
		Use:   "list PROJECT",
		Short: "List a project's webhooks: never their secrets",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := list.client()
			if err != nil {
				return err
			}
			var out struct {
				Webhooks []webhookView `json:"webhooks"`
			}
			raw, err := c.getRaw(cmd.Context(), projectPath(args[0])+"/webhooks", &out)
			if err != nil {
				return fmt.Errorf("list webhooks of project %s: %w", args[0], err)
			}
			if list.JSON {
				return writeRaw(a.stdout, raw)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tURL\tEVENTS\tCREATED")
			for _, h := range out.Webhooks {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", h.ID, h.URL, strings.Join(h.Events, ","), h.CreatedAt)
			}
			return tw.Flush()
		},
	}
	a.clientFlags(listCmd, &list)

	var remove clientConfig
	removeCmd := &cobra.Command{
		Use:   "remove PROJECT ID",
		Short: "Remove a webhook; messages still queued for it are dead-lettered",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := remove.client()
			if err != nil {
				return err
			}
			if _, err := c.call(cmd.Context(), http.MethodDelete, projectPath(args[0])+"/webhooks/"+url.PathEscape(args[1]), nil, nil); err != nil {
				return fmt.Errorf("remove webhook %s of project %s: %w", args[1], args[0], err)
			}
			_, err = fmt.Fprintf(a.stdout, "webhook %s removed from project %s\n", args[1], args[0])
			return err
		},
	}
	a.clientFlags(removeCmd, &remove)
	cmd.AddCommand(addCmd, listCmd, removeCmd)
	return cmd
}
