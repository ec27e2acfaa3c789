package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/config"
	"github.com/rollcall/rollcall/internal/server"
)

// newPersonCommand builds `rollcall person add|list|update|deactivate`
// (REST /v1/persons, admin; issue 9 item 1).
func newPersonCommand() *cobra.Command {
	cmd, cf := newClientParent("person", "Manage persons and their roles (admin; REST /v1/persons)")
	cmd.AddCommand(personAdd(cf), personList(cf), personUpdate(cf), personDeactivate(cf))
	return cmd
}

func personAdd(cf *clientFlags) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "add NAME [--role admin|member]",
		Short: "Create a person and print its first token (shown once)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			res, err := c.CreatePerson(cmd.Context(), wire.PersonInput{Name: args[0], Role: role})
			if err != nil {
				return cf.wrap(err)
			}
			w := cmd.OutOrStdout()
			if cf.json {
				return printJSON(w, res)
			}
			fmt.Fprintf(w, "person %s created: id %s, role %s\n", clean(res.Person.Name), res.Person.ID, res.Person.Role)
			fmt.Fprintf(w, "token (shown once; hand it over privately): %s\n", res.Token.Token)
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "member", "admin or member")
	return cmd
}

func personList(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every person",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			ps, err := c.ListPersons(cmd.Context())
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"items": nonNil(ps)})
			}
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "ROLE", "ACTIVE", "CREATED")
			for _, p := range ps {
				active := "yes"
				if !p.Active {
					active = "no (since " + fmtTimePtr(p.DeactivatedAt) + ")"
				}
				t.row(p.ID, clean(p.Name), p.Role, active, fmtTime(p.CreatedAt))
			}
			return t.flush()
		},
	}
}

func personUpdate(cf *clientFlags) *cobra.Command {
	var name, role string
	var active bool
	cmd := &cobra.Command{
		Use:   "update ID [--name NAME] [--role admin|member] [--active=true|false]",
		Short: "Rename, re-role or (re)activate a person",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in wire.PersonUpdate
			if cmd.Flag("name").Changed {
				in.Name = &name
			}
			if cmd.Flag("role").Changed {
				in.Role = &role
			}
			if cmd.Flag("active").Changed {
				in.Active = &active
			}
			if in == (wire.PersonUpdate{}) {
				return usageError{fmt.Errorf("nothing to change: give --name, --role or --active")}
			}
			return runPersonUpdate(cmd, cf, args[0], in)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "new display name")
	fl.StringVar(&role, "role", "", "admin or member")
	fl.BoolVar(&active, "active", true, "false deactivates the person, true reactivates it")
	return cmd
}

func personDeactivate(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "deactivate ID",
		Short: "Deactivate a person: its tokens and console sessions stop working; its agents keep working",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			off := false
			return runPersonUpdate(cmd, cf, args[0], wire.PersonUpdate{Active: &off})
		},
	}
}

func runPersonUpdate(cmd *cobra.Command, cf *clientFlags, id string, in wire.PersonUpdate) error {
	c, err := cf.client(cmd)
	if err != nil {
		return err
	}
	p, err := c.UpdatePerson(cmd.Context(), id, in)
	if err != nil {
		return cf.wrap(err)
	}
	if cf.json {
		return printJSON(cmd.OutOrStdout(), p)
	}
	state := "active"
	if !p.Active {
		state = "deactivated"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "person %s (%s): role %s, %s\n", clean(p.Name), p.ID, p.Role, state)
	return nil
}

// newTokenCommand builds `rollcall token create|list|revoke` (REST
// /v1/tokens: the caller's own tokens; issue 9 item 2).
func newTokenCommand() *cobra.Command {
	cmd, cf := newClientParent("token", "Manage your personal API tokens (REST /v1/tokens)")
	cmd.AddCommand(tokenCreate(cf), tokenList(cf), tokenRevoke(cf))
	return cmd
}

func tokenCreate(cf *clientFlags) *cobra.Command {
	var expires string
	cmd := &cobra.Command{
		Use:   "create NAME [--expires RFC3339|DURATION]",
		Short: "Create a personal token and print it (shown once)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := wire.TokenInput{Name: args[0]}
			if expires != "" {
				t, err := parseExpiry(expires, time.Now())
				if err != nil {
					return usageError{err}
				}
				in.ExpiresAt = &t
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			tok, err := c.CreateToken(cmd.Context(), in)
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), tok)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s (id %s, expires %s), shown once:\n%s\n", clean(tok.Name), tok.ID, fmtTimePtr(tok.ExpiresAt), tok.Token)
			return nil
		},
	}
	cmd.Flags().StringVar(&expires, "expires", "", "when it stops working: an RFC 3339 time or a duration from now (e.g. 720h); default never")
	return cmd
}

// parseExpiry reads an RFC 3339 time or a Go duration from now.
func parseExpiry(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("--expires %q is neither an RFC 3339 time nor a positive duration such as 720h", v)
	}
	return now.Add(d), nil
}

func tokenList(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List your tokens (never their secrets)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			ts, err := c.ListTokens(cmd.Context())
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"items": nonNil(ts)})
			}
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "CREATED", "LAST USED", "EXPIRES")
			for _, tk := range ts {
				t.row(tk.ID, clean(tk.Name), fmtTime(tk.CreatedAt), fmtTimePtr(tk.LastUsedAt), fmtTimePtr(tk.ExpiresAt))
			}
			return t.flush()
		},
	}
}

func tokenRevoke(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke one of your tokens: everything using it stops within 5 s",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			tk, err := c.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), tk)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s (%s) revoked\n", clean(tk.Name), tk.ID)
			return nil
		},
	}
}

// newAdminCommand builds `rollcall admin token --store …`: recovery of a
// lost admin token on the server host, against the store directly
// (issue 9 item 2). With SQLite the server must be stopped first (the
// database file is locked by a running server).
func newAdminCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Server-host maintenance against the store directly",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("admin needs a subcommand; see rollcall admin --help")}
		},
	}
	tok := &cobra.Command{
		Use:   "token --store URL",
		Short: "Print a new token for the oldest active admin (audited as admin.recover)",
		Long: `Print a new personal token for the oldest active admin person, or create the
admin person "recovered-admin" when no admin is active. It opens the store
directly (--store, ROLLCALL_STORE or the config file), so run it on the server
host. With SQLite stop the server first: a running server locks the file.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags(), config.Environ())
			if err != nil {
				return err
			}
			if path, ok := strings.CutPrefix(cfg.Store, "sqlite:"); ok {
				// Opening would create an empty database at a mistyped path.
				if _, err := os.Stat(path); err != nil {
					return fmt.Errorf("store %s: no database there (%v); give the server's --store", server.Redact(cfg.Store), err)
				}
			}
			st, err := server.OpenStore(cmd.Context(), cfg.Store)
			if err != nil {
				return fmt.Errorf("store %s: %w", server.Redact(cfg.Store), err)
			}
			defer st.Close()
			svc := app.New(app.Options{Store: st})
			defer svc.Close()
			p, token, err := svc.RecoverAdmin(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "new token for admin %s (%s); keep it safe:\n", clean(p.Name), p.ID)
			fmt.Fprintln(cmd.OutOrStdout(), token)
			return nil
		},
	}
	config.RegisterFlags(tok.Flags())
	cmd.AddCommand(tok)
	return cmd
}
