package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/config"
	"github.com/rollcall/rollcall/internal/server"
	"github.com/rollcall/rollcall/internal/skewclock"
)

// The server-host commands: serve, migrate and admin token, each against
// the store (and its configuration) directly.

func newServeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Rollcall server (SQLite file rollcall.db by default)",
		Long: `Run the Rollcall server: MCP at /mcp, REST at /v1, /healthz, /readyz.

On the first start against an empty store it creates an admin person and prints
its token once (or uses ROLLCALL_BOOTSTRAP_TOKEN, which is never printed).
Every flag is also an environment variable (ROLLCALL_<KEY>, dots as
underscores) and a key of the YAML file given with --config.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags(), config.Environ())
			if err != nil {
				return err
			}
			log := newLogger(cfg, cmd.ErrOrStderr())
			// Test only: ROLLCALL_TEST_CLOCK_OFFSET shifts this
			// process's wall clock, so fault tests can run two instances
			// whose clocks disagree. Not a configuration key.
			offset, err := skewclock.FromEnv(nil)
			if err != nil {
				return err
			}
			var clock clockwork.Clock
			if offset != 0 {
				log.Warn("test only: the wall clock of this process is shifted", "env", skewclock.EnvVar, "offset", offset)
				clock = skewclock.New(clockwork.NewRealClock(), offset)
			}
			srv, err := server.Open(cmd.Context(), cfg, server.Options{Log: log, Stdout: cmd.OutOrStdout(), Clock: clock})
			if err != nil {
				return err
			}
			return srv.Serve(cmd.Context())
		},
	}
	config.RegisterFlags(cmd.Flags())
	return cmd
}

func newMigrateCommand() *cobra.Command {
	cmd := newCommand("migrate", "Apply the store's migrations and exit", cobra.NoArgs, func(cmd *cobra.Command, _ []string) error {
		cfg, err := config.Load(cmd.Flags(), config.Environ())
		if err != nil {
			return err
		}
		st, err := server.OpenStore(cmd.Context(), cfg.Store)
		if err != nil {
			return fmt.Errorf("store %s: %w", server.Redact(cfg.Store), err)
		}
		defer st.Close()
		fmt.Fprintf(cmd.OutOrStdout(), "migrations applied (%s)\n", st.Dialect())
		return nil
	})
	config.RegisterFlags(cmd.Flags())
	return cmd
}

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

func newLogger(cfg config.Config, w interface{ Write([]byte) (int, error) }) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if w == nil {
		w = os.Stderr
	}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
