// Package cli holds the cobra commands of the rollcall binary: the server
// commands (serve, migrate) and the client commands that talk to a server
// over the REST API (agent, todo, audit). DESIGN.md §2 (CLI).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/internal/domain"
)

// Main runs the CLI with args and returns the process exit code: 0 ok,
// 1 failure, 2 usage error.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root := NewRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var de *domain.Error
		if errors.As(err, &de) {
			fmt.Fprintf(stderr, "rollcall: %s\n", de.Error())
		} else {
			fmt.Fprintf(stderr, "rollcall: %v\n", err)
		}
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ error }

// NewRoot builds the command tree.
func NewRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "rollcall",
		Short:         "Rollcall coordinates fleets of AI coding agents: presence, todos and MCP doorbells",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCommand(), newMigrateCommand())
	addClientCommands(root)
	addClaudeCommands(root)
	return root
}
