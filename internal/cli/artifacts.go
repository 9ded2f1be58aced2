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
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

type artifactView struct {
	ID        string `json:"id"`
	JobID     string `json:"job_id"`
	Job       string `json:"job"`
	Set       string `json:"set"`
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
		Long:    "List lists a run's artifacts.\n\n" + runRefHelp,
		Example: "  gantry artifacts list web#42\n  gantry artifacts list 0190f3c2-...",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.artifactsList(cmd.Context(), listCfg, args[0])
		},
	}
	listCfg.flags(list)
	var getCfg clientConfig
	var out string
	get := &cobra.Command{
		Use:   "get ID | get RUN NAME",
		Short: "Download an artifact, or a run's artifacts by name",
		Long: "Get downloads an artifact by its id (see gantry artifacts list) to -o FILE, or\n" +
			"to its own file name in the current directory. The bytes come straight from\n" +
			"the blob store; the coordinator only hands out a short-lived signed URL.\n\n" +
			"Given a run and a NAME, it downloads every file of the run's artifacts that\n" +
			"NAME names: a job's artifacts: name, a job's key, a file's path or a\n" +
			"directory of paths. Each goes to its path under -o DIR (default: here),\n" +
			"with its mode; of a job's attempts the latest is taken.",
		Example: "  gantry artifacts get 0190f3c2-... -o app\n  gantry artifacts get 0190f3c2-... bin -o out/",
		Args:    rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				return a.artifactsGetNamed(cmd.Context(), getCfg, args[0], args[1], out)
			}
			return a.artifactsGet(cmd.Context(), getCfg, args[0], out)
		},
	}
	getCfg.flags(get)
	get.Flags().StringVarP(&out, "output", "o", "", "file to write (- for stdout; default: the artifact's file name); with RUN NAME, the directory")
	cmd.AddCommand(list, get)
	return cmd
}

func (a *app) artifactsList(ctx context.Context, cfg clientConfig, run string) error {
	if _, _, _, err := parseRunRef(run); err != nil {
		return err
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	if run, err = resolveRun(ctx, c, run); err != nil {
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

// artifactsGetNamed downloads the run's artifacts that name names, keeping their paths
// under dir and their modes.
func (a *app) artifactsGetNamed(ctx context.Context, cfg clientConfig, run, name, dir string) error {
	if _, _, _, err := parseRunRef(run); err != nil {
		return err
	}
	if dir == "" {
		dir = "."
	}
	if dir == "-" {
		return usagef("-o - writes one file; give a directory to get the artifacts named %s", name)
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	if run, err = resolveRun(ctx, c, run); err != nil {
		return err
	}
	var as []artifactView
	if err := c.getJSON(ctx, "/api/v1/runs/"+run+"/artifacts", &as); err != nil {
		return err
	}
	clean := strings.TrimSuffix(name, "/")
	latest := map[string]artifactView{} // job and path -> the latest attempt's
	var names []string
	for _, x := range as {
		names = append(names, x.Name)
		if x.Set != clean && x.Job != clean && x.Name != clean && !strings.HasPrefix(x.Name, clean+"/") {
			continue
		}
		k := x.JobID + "\x00" + x.Name
		if prev, ok := latest[k]; !ok || x.Attempt > prev.Attempt {
			latest[k] = x
		}
	}
	if len(latest) == 0 {
		return fmt.Errorf("run %s has no artifact named %s (artifacts: %s)", run, name, strings.Join(names, ", "))
	}
	byPath := map[string]artifactView{}
	for _, x := range latest {
		if other, ok := byPath[x.Name]; ok && other.JobID != x.JobID {
			return fmt.Errorf("jobs %s and %s both kept %s; name one job (its key) instead of %s", other.Job, x.Job, x.Name, name)
		}
		byPath[x.Name] = x
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		x := byPath[p]
		if !filepath.IsLocal(filepath.FromSlash(p)) {
			return fmt.Errorf("artifact %s: path %q leaves the directory; not written", x.ID, p)
		}
		if x.State != "stored" {
			return fmt.Errorf("artifact %s (%s) is still being uploaded; try again when it is stored", x.ID, p)
		}
		dest := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		if err := a.artifactsGet(ctx, cfg, x.ID, dest); err != nil {
			return fmt.Errorf("artifact %s: %w", p, err)
		}
		if mode := os.FileMode(x.Mode).Perm(); mode != 0 {
			if err := os.Chmod(dest, mode); err != nil {
				return err
			}
		}
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
