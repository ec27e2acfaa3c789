package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/client"
)

// newPersonCommand builds `rollcall person create|list|show|update` (REST
// /v1/persons; admin, but any person may show itself).
func newPersonCommand(cf *clientFlags) *cobra.Command {
	return newGroup("person", "Manage persons and their roles (admin; REST /v1/persons)",
		personCreate(cf), personList(cf), personShow(cf), personUpdate(cf),
		personDeactivate(cf)) // hidden: the old spelling of update --active=false
}

func personCreate(cf *clientFlags) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:     "create NAME",
		Aliases: []string{"add"},
		Short:   "Create a person and print its first token (shown once)",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.PersonCreated, error) {
				return c.CreatePerson(ctx, wire.PersonInput{Name: args[0], Role: role})
			}, func(w io.Writer, res wire.PersonCreated) error {
				fmt.Fprintf(w, "person %s created: id %s, role %s\n", clean(res.Person.Name), res.Person.ID, res.Person.Role)
				_, err := fmt.Fprintf(w, "token (shown once; hand it over privately): %s\n", res.Token.Token)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&role, "role", "member", "admin or member")
	return cmd
}

func personList(cf *clientFlags) *cobra.Command {
	return listCommand(cf, "list", "List every person", (*client.Client).ListPersons, tableOf(func(p wire.Person) []string {
		active := "yes"
		if !p.Active {
			active = "no (since " + fmtTimePtr(p.DeactivatedAt) + ")"
		}
		return []string{p.ID, clean(p.Name), p.Role, active, fmtTime(p.CreatedAt)}
	}, "ID", "NAME", "ROLE", "ACTIVE", "CREATED"))
}

func personUpdate(cf *clientFlags) *cobra.Command {
	var name, role string
	var active bool
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Rename, re-role, deactivate (--active=false) or reactivate a person",
		Long: `Update changes a person. --active=false deactivates it: its tokens and
console sessions stop working at once; its agents keep working.
--active=true reactivates it, and with it the tokens it had.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in wire.PersonUpdate
			f := cmd.Flags()
			given(f, "name", &name, &in.Name)
			given(f, "role", &role, &in.Role)
			given(f, "active", &active, &in.Active)
			if in == (wire.PersonUpdate{}) {
				return usageError{fmt.Errorf("nothing to change: give --name, --role or --active")}
			}
			return updatePerson(cmd, cf, args[0], in)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "new display name")
	fl.StringVar(&role, "role", "", "admin or member")
	fl.BoolVar(&active, "active", true, "false deactivates the person, true reactivates it")
	return cmd
}

// personShow is `person show ID|me`: a member may show itself, which is
// how it learns its person id (the one an agent's owner grants it to).
func personShow(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a person (me: yourself, with your person id)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.Person, error) {
				return c.GetPerson(ctx, args[0])
			}, printPerson)
		},
	}
}

// personDeactivate is `person deactivate ID` of earlier releases, now
// `person update ID --active=false`; hidden.
func personDeactivate(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:    "deactivate ID",
		Short:  "Deactivate a person (person update ID --active=false)",
		Hidden: true,
		Args:   exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			off := false
			return updatePerson(cmd, cf, args[0], wire.PersonUpdate{Active: &off})
		},
	}
}

func updatePerson(cmd *cobra.Command, cf *clientFlags, id string, in wire.PersonUpdate) error {
	return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.Person, error) {
		return c.UpdatePerson(ctx, id, in)
	}, printPerson)
}

func printPerson(w io.Writer, p wire.Person) error {
	state := "active"
	if !p.Active {
		state = "deactivated"
	}
	_, err := fmt.Fprintf(w, "person %s (%s): role %s, %s\n", clean(p.Name), p.ID, p.Role, state)
	return err
}

// newTokenCommand builds `rollcall token create|list|revoke` (REST
// /v1/tokens: the caller's own tokens).
func newTokenCommand(cf *clientFlags) *cobra.Command {
	return newGroup("token", "Manage your personal API tokens (REST /v1/tokens)",
		tokenCreate(cf), tokenList(cf), tokenRevoke(cf))
}

func tokenCreate(cf *clientFlags) *cobra.Command {
	var expires string
	cmd := newCommand("create NAME", "Create a personal token and print it (shown once)", exactArgs("NAME"), func(cmd *cobra.Command, args []string) error {
		in := wire.TokenInput{Name: args[0]}
		if expires != "" {
			t, err := parseExpiry(expires, time.Now())
			if err != nil {
				return usageError{err}
			}
			in.ExpiresAt = &t
		}
		return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.MintedToken, error) {
			return c.CreateToken(ctx, in)
		}, func(w io.Writer, tok wire.MintedToken) error {
			_, err := fmt.Fprintf(w, "token %s (id %s, expires %s), shown once:\n%s\n", clean(tok.Name), tok.ID, fmtTimePtr(tok.ExpiresAt), tok.Token)
			return err
		})
	})
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
	return listCommand(cf, "list", "List your tokens (never their secrets)", (*client.Client).ListTokens, tableOf(func(tk wire.PersonToken) []string {
		return []string{tk.ID, clean(tk.Name), fmtTime(tk.CreatedAt), fmtTimePtr(tk.LastUsedAt), fmtTimePtr(tk.ExpiresAt)}
	}, "ID", "NAME", "CREATED", "LAST USED", "EXPIRES"))
}

func tokenRevoke(cf *clientFlags) *cobra.Command {
	return argCommand(cf, "revoke ID", "Revoke one of your tokens: everything using it stops within 5 s",
		(*client.Client).RevokeToken, oneLine(func(tk wire.PersonToken) string {
			return fmt.Sprintf("token %s (%s) revoked", clean(tk.Name), tk.ID)
		}))
}
