package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rollcall/rollcall/client"
	"github.com/rollcall/rollcall/internal/domain"
)

// DefaultServer is the server the client commands talk to when neither
// --server nor ROLLCALL_SERVER is set: the default listen address of serve.
const DefaultServer = "http://127.0.0.1:7070"

// clientFlags are the persistent flags of the root that every client
// command reads: --server (env ROLLCALL_SERVER, default DefaultServer),
// --token (env ROLLCALL_TOKEN, a person's API token), --ca-cert (env
// ROLLCALL_CA_CERT; SSL_CERT_FILE is honoured too) and --json (print the
// API's JSON instead of tables). Errors from the server are returned as
// the client's *client.Error, which unwraps to the *domain.Error that Main
// prints as `rollcall: <code>: <detail> (at <pointer>)`.
type clientFlags struct {
	server string
	token  string
	caCert string
	json   bool
}

func (cf *clientFlags) register(pf *pflag.FlagSet) {
	pf.StringVar(&cf.server, "server", DefaultServer, "Rollcall server URL (env ROLLCALL_SERVER)")
	pf.StringVar(&cf.token, "token", "", "a person's API token (env ROLLCALL_TOKEN)")
	pf.StringVar(&cf.caCert, "ca-cert", "", "PEM file of CA certificates to trust besides the system's, for a server behind a private CA (env ROLLCALL_CA_CERT; SSL_CERT_FILE is honoured too)")
	pf.BoolVar(&cf.json, "json", false, "print JSON (the API's objects) instead of tables")
}

// serverURL resolves --server: the flag, then ROLLCALL_SERVER, then
// DefaultServer.
func (cf *clientFlags) serverURL(cmd *cobra.Command) string {
	if f := cmd.Flag("server"); (f == nil || !f.Changed) && os.Getenv("ROLLCALL_SERVER") != "" {
		return os.Getenv("ROLLCALL_SERVER")
	}
	return cf.server
}

// client resolves --server, --token and --ca-cert (flag, then
// environment, then the default) into an API client.
func (cf *clientFlags) client(cmd *cobra.Command) (*client.Client, error) {
	server := cf.serverURL(cmd)
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
	caCert := cf.caCert
	if f := cmd.Flag("ca-cert"); f == nil || !f.Changed {
		caCert = os.Getenv("ROLLCALL_CA_CERT")
	}
	roots, err := trustedRoots(caCert, os.Getenv("SSL_CERT_FILE"))
	if err != nil {
		return nil, err
	}
	cf.server = server
	c := client.New(server, token)
	if roots != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		c.HTTPClient.Transport = tr
	}
	return c, nil
}

// trustedRoots returns the system's certificate pool plus the certificates
// of the PEM files given ("" = none), or nil when none is given (the
// default transport's roots). SSL_CERT_FILE is read here as well as by
// Go's own pool on Linux, so it works the same on every platform.
func trustedRoots(files ...string) (*x509.CertPool, error) {
	var pool *x509.CertPool
	for _, name := range files {
		if name == "" {
			continue
		}
		if pool == nil {
			sys, err := x509.SystemCertPool()
			if err != nil || sys == nil {
				sys = x509.NewCertPool()
			}
			pool = sys
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, usageError{fmt.Errorf("CA certificates: %w", err)}
		}
		if !pool.AppendCertsFromPEM(data) {
			return nil, usageError{fmt.Errorf("CA certificates: %s holds no PEM certificate", name)}
		}
	}
	return pool, nil
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
		var unknownCA x509.UnknownAuthorityError
		if errors.As(err, &unknownCA) {
			return fmt.Errorf("cannot reach the server at %s: %w (a private CA? pass its certificate with --ca-cert FILE or SSL_CERT_FILE)", cf.server, ue.Err)
		}
		return fmt.Errorf("cannot reach the server at %s (set --server or ROLLCALL_SERVER): %w", cf.server, ue.Err)
	}
	return err
}

// call is the shape of every client command: resolve the client, make one
// API call, print its answer as JSON (--json) or for a human.
func call[T any](cmd *cobra.Command, cf *clientFlags, do func(context.Context, *client.Client) (T, error), human func(io.Writer, T) error) error {
	c, err := cf.client(cmd)
	if err != nil {
		return err
	}
	v, err := do(cmd.Context(), c)
	if err != nil {
		return cf.wrap(err)
	}
	if cf.json {
		return printJSON(cmd.OutOrStdout(), v)
	}
	return human(cmd.OutOrStdout(), v)
}

// items is a listing as --json prints it: {"items": [...]}, never null.
type items[T any] struct {
	Items []T `json:"items"`
}

// callList is call for a listing.
func callList[T any](cmd *cobra.Command, cf *clientFlags, do func(context.Context, *client.Client) ([]T, error), human func(io.Writer, []T) error) error {
	return call(cmd, cf, func(ctx context.Context, c *client.Client) (items[T], error) {
		v, err := do(ctx, c)
		return items[T]{nonNil(v)}, err
	}, func(w io.Writer, l items[T]) error { return human(w, l.Items) })
}

// argCommand is a command of one argument, named by the second word of
// use ("show ID": ID), that makes one call with it and prints the answer
// (see call).
func argCommand[T any](cf *clientFlags, use, short string, do func(*client.Client, context.Context, string) (T, error), human func(io.Writer, T) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: exactArgs(strings.Fields(use)[1]),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (T, error) { return do(c, ctx, args[0]) }, human)
		},
	}
}

// listCommand is a command without arguments that prints one listing (see
// callList and tableOf).
func listCommand[T any](cf *clientFlags, use, short string, do func(*client.Client, context.Context) ([]T, error), human func(io.Writer, []T) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callList(cmd, cf, func(ctx context.Context, c *client.Client) ([]T, error) { return do(c, ctx) }, human)
		},
	}
}

// tableOf is the human form of a listing: a table with header and one row
// per item.
func tableOf[T any](row func(T) []string, header ...string) func(io.Writer, []T) error {
	return func(w io.Writer, items []T) error {
		t := newTable(w, header...)
		for _, it := range items {
			t.row(row(it)...)
		}
		return t.flush()
	}
}

// oneLine is the human form of an answer told in one line (newline added).
func oneLine[T any](text func(T) string) func(io.Writer, T) error {
	return func(w io.Writer, v T) error {
		_, err := fmt.Fprintln(w, text(v))
		return err
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// --- argument and flag checks that exit 2 ---

// noArgs refuses positional arguments.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", args[0])}
	}
	return nil
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

// legacyAgentFlag adds the hidden --agent flag of earlier releases to a
// command that now takes AGENT as its argument.
func legacyAgentFlag(cmd *cobra.Command, agent *string) {
	cmd.Flags().StringVar(agent, "agent", "", "the agent (id or handle); give it as the argument instead")
	_ = cmd.Flags().MarkHidden("agent")
}

// agentArg returns the agent a command addresses: its AGENT argument or
// the hidden --agent flag, not both. required refuses neither.
func agentArg(args []string, flag string, required bool) (string, error) {
	switch {
	case len(args) > 1:
		return "", usageError{fmt.Errorf("expected at most 1 argument AGENT, got %d", len(args))}
	case len(args) == 1 && flag != "" && flag != args[0]:
		return "", usageError{fmt.Errorf("the agent is given twice: %q and --agent %q", args[0], flag)}
	case len(args) == 1:
		return args[0], nil
	case flag == "" && required:
		return "", usageError{fmt.Errorf("expected 1 argument AGENT (the agent's id or handle), got 0")}
	}
	return flag, nil
}

// given points *field at v when the flag name was given: a PATCH sends
// only what the command line changed.
func given[T any](f *pflag.FlagSet, name string, v *T, field **T) {
	if f.Changed(name) {
		*field = v
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

// printFields prints one record for a human: label/value pairs
// ("ID:", id, "Name:", name, …), one pair a line, values aligned.
func printFields(w io.Writer, pairs ...string) error {
	t := newTable(w)
	for i := 0; i+1 < len(pairs); i += 2 {
		t.row(pairs[i], pairs[i+1])
	}
	return t.flush()
}

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

// newCommand is a command of use, its short help, its argument check and
// what it runs.
func newCommand(use, short string, args cobra.PositionalArgs, run func(*cobra.Command, []string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, RunE: run}
}
