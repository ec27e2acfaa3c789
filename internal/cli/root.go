// Package cli holds the cobra commands of the rollcall binary: the server
// commands (serve, migrate, admin) and the client commands that talk to a
// server over the REST API.
//
// The client commands share one grammar: `rollcall NOUN VERB [ARG] [flags]`,
// the verbs create | list | show | update | delete (revoke for tokens and
// agents, whose records stay), an agent always named by a positional AGENT
// (id or handle), and the flags --server, --token, --ca-cert and --json
// registered once, on the root. Spellings of earlier releases (`hook rm`,
// `person add`, `agent presence AGENT --clear` …) keep working but are not
// listed in help.
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
// 1 failure, 2 usage error (a mistyped command or flag, a missing
// argument).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root := NewRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := checkCommandWords(root, args)
	if err == nil {
		err = root.ExecuteContext(ctx)
	}
	if err != nil {
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

// NewRoot builds the command tree.
func NewRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "rollcall",
		Short:         "Rollcall coordinates fleets of AI coding agents: presence, todos and MCP doorbells",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A word that names no command is refused like one under a noun
		// (cobra's own message for the root has another form).
		Args: unknownCommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	cf := &clientFlags{}
	cf.register(root.PersistentFlags())
	root.AddCommand(newServeCommand(), newMigrateCommand(), newAdminCommand())
	root.AddCommand(newAgentCommand(cf), newTodoCommand(cf), newHookCommand(cf), newPoolCommand(cf), newAuditCommand(cf))
	root.AddCommand(newPersonCommand(cf), newTokenCommand(cf))
	root.AddCommand(newClaudeCommand(cf), newAdapterCommand(cf))
	return root
}
