package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

type artifactView struct {
	ID        string `json:"id"`
	JobID     string `json:"job_id"`
	Job       string `json:"job"`
	Attempt   int    `json:"attempt"`
	Name      string `json:"name"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type"`
	Mode      uint32 `json:"mode"`
	State     string `json:"state"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
}

func (a *app) artifactsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "artifacts",
		Short: "List and download the files jobs kept",
		Args:  noArgs,
	}
	var listCfg clientConfig
	list := &cobra.Command{
		Use:     "list RUN",
		Short:   "List a run's artifacts",
		Example: "  gantry artifacts list 0190f3c2-...",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.artifactsList(cmd.Context(), listCfg, args[0])
		},
	}
	listCfg.flags(list)
	var getCfg clientConfig
	var out string
	get := &cobra.Command{
		Use:   "get ID",
		Short: "Download an artifact",
		Long: "Get downloads an artifact by its id (see gantry artifacts list) to -o FILE, or\n" +
			"to its own file name in the current directory. The bytes come straight from\n" +
			"the blob store; the coordinator only hands out a short-lived signed URL.",
		Example: "  gantry artifacts get 0190f3c2-... -o app",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.artifactsGet(cmd.Context(), getCfg, args[0], out)
		},
	}
	getCfg.flags(get)
	get.Flags().StringVarP(&out, "output", "o", "", "file to write (- for stdout; default: the artifact's file name)")
	cmd.AddCommand(list, get)
	return cmd
}

func (a *app) artifactsList(ctx context.Context, cfg clientConfig, run string) error {
	if _, err := uuid.Parse(run); err != nil {
		return usagef("run id %q is not a UUID", run)
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	var as []artifactView
	if err := c.getJSON(ctx, "/api/v1/runs/"+run+"/artifacts", &as); err != nil {
		return err
	}
	if cfg.JSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(as)
	}
	if len(as) == 0 {
		fmt.Fprintln(a.stdout, "no artifacts")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tJOB\tNAME\tSIZE\tSTATE")
	for _, x := range as {
		job := x.Job
		if x.Attempt > 1 {
			job = fmt.Sprintf("%s #%d", job, x.Attempt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", x.ID, job, x.Name, humanBytes(x.Size), x.State)
	}
	return tw.Flush()
}

func (a *app) artifactsGet(ctx context.Context, cfg clientConfig, id, out string) (err error) {
	if _, err := uuid.Parse(id); err != nil {
		return usagef("artifact id %q is not a UUID", id)
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodGet, "/api/v1/artifacts/"+id, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var w io.Writer = a.stdout
	if out != "-" {
		if out == "" {
			out = id
			if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
				if name := filepath.Base(params["filename"]); name != "." && name != "/" && name != "" {
					out = name
				}
			}
		}
		f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".part-*")
		if err != nil {
			return err
		}
		defer func() {
			if err != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}()
		w = f
		if _, err = io.Copy(w, resp.Body); err != nil {
			return fmt.Errorf("download: %w", err)
		}
		if err = f.Close(); err != nil {
			return err
		}
		if err = os.Rename(f.Name(), out); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "wrote %s\n", out)
		return nil
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	return nil
}

// humanBytes shows a size in the units pipelines use.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
