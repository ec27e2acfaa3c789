package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/config"
	"github.com/rollcall/rollcall/internal/server"
)

// newAdminCommand builds `rollcall admin token`: recovery of a lost admin
// token on the server host, against the store directly (--store). With
// SQLite the server must be stopped first (a running server locks the
// database file).
func newAdminCommand() *cobra.Command {
	tok := &cobra.Command{
		Use:   "token",
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
	return newGroup("admin", "Server-host maintenance against the store directly", tok)
}
