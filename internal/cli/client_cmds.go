package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/internal/client"
	"github.com/rollcall/rollcall/internal/domain"
)

// DefaultServer is the server the client commands talk to when neither
// --server nor ROLLCALL_SERVER is set: the default listen address of serve.
const DefaultServer = "http://127.0.0.1:7070"

// addClientCommands adds the client commands that talk to a server over the
// REST API (DESIGN.md §2, CLI): agent, todo and audit. Each parent carries
// the persistent flags --server (env ROLLCALL_SERVER, default
// DefaultServer), --token (env ROLLCALL_TOKEN, a person's API token) and
// --json (print the API's JSON instead of tables). Errors from the server
// are returned as the client's *client.Error, which unwraps to the
// *domain.Error that Main prints as `rollcall: <code>: <detail> (at
// <pointer>)`.
func addClientCommands(root *cobra.Command) {
	root.AddCommand(newAgentCommand(), newTodoCommand(), newAuditCommand())
	root.AddCommand(newPersonCommand(), newTokenCommand(), newAdminCommand())
	root.AddCommand(newHookCommand())
}

// clientFlags are the persistent flags of one client parent command.
type clientFlags struct {
	server string
	token  string
	json   bool
}

func newClientParent(use, short string) (*cobra.Command, *clientFlags) {
	cf := &clientFlags{}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("%s needs a subcommand; see rollcall %s --help", use, use)}
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&cf.server, "server", DefaultServer, "Rollcall server URL (env ROLLCALL_SERVER)")
	pf.StringVar(&cf.token, "token", "", "a person's API token (env ROLLCALL_TOKEN)")
	pf.BoolVar(&cf.json, "json", false, "print JSON (the API's objects) instead of tables")
	return cmd, cf
}

// client resolves --server and --token (flag, then environment, then the
// default) into an API client.
func (cf *clientFlags) client(cmd *cobra.Command) (*client.Client, error) {
	server := cf.server
	if f := cmd.Flag("server"); (f == nil || !f.Changed) && os.Getenv("ROLLCALL_SERVER") != "" {
		server = os.Getenv("ROLLCALL_SERVER")
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Errorf("--server %q must be an http:// or https:// URL", server)}
	}
	token := cf.token
	if f := cmd.Flag("token"); f == nil || !f.Changed {
		token = os.Getenv("ROLLCALL_TOKEN")
	}
	if token == "" {
		return nil, &domain.Error{Code: domain.CodeUnauthenticated, Detail: "no token: pass --token or set ROLLCALL_TOKEN to a person's API token"}
	}
	cf.server = server
	return client.New(server, token), nil
}

// wrap explains transport failures; API errors pass through unchanged.
func (cf *clientFlags) wrap(err error) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("cannot reach the server at %s (set --server or ROLLCALL_SERVER): %w", cf.server, ue.Err)
	}
	return err
}

// --- argument and flag checks that exit 2 ---

// noArgs refuses positional arguments. On a parent command (agent, todo …)
// the argument is a mistyped subcommand: the error names it and suggests
// the closest subcommands ("rollcall agent vnd" → did you mean vend?).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's default for the root
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		} else {
			msg += "; see " + cmd.CommandPath() + " --help"
		}
		return usageError{errors.New(msg)}
	}
	return usageError{fmt.Errorf("unexpected argument %q", args[0])}
}

// exactArgs requires the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageError{fmt.Errorf("expected %d argument(s) %s, got %d", len(names), strings.Join(names, " "), len(args))}
		}
		return nil
	}
}

// requireFlags fails with a usage error when one of the flags was not given.
func requireFlags(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if f := cmd.Flag(n); f == nil || !f.Changed {
			return usageError{fmt.Errorf("--%s is required", n)}
		}
	}
	return nil
}

// minFlags fails with a usage error when one of the integer flags was
// given a value below its minimum. The client sends 0 as "absent" (the
// server's default), so without this --limit 0 would silently mean "no
// limit given".
func minFlags(cmd *cobra.Command, mins map[string]int64) error {
	names := make([]string, 0, len(mins))
	for n := range mins {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f := cmd.Flag(n)
		if f == nil || !f.Changed {
			continue
		}
		v, err := strconv.ParseInt(f.Value.String(), 10, 64)
		if err != nil || v < mins[n] {
			hint := ""
			if mins[n] > 0 {
				hint = "; omit it for the default"
			}
			return usageError{fmt.Errorf("--%s must be an integer ≥ %d, got %s%s", n, mins[n], f.Value.String(), hint)}
		}
	}
	return nil
}

// --- output ---

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cols ...string) {
	for i, c := range cols {
		cols[i] = clean(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// clean makes server-provided text safe for a terminal: control and
// bidirectional-formatting characters become U+FFFD, so a title cannot
// move the cursor, recolour the terminal or break the table.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' {
			return '\uFFFD'
		}
		return r
	}, s)
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func joinOrDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}
