package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/domain"
)

// newTodoCommand builds `rollcall todo push|list|show`.
func newTodoCommand() *cobra.Command {
	cmd, cf := newClientParent("todo", "Push and inspect todos (REST /v1/agents/{ref}/todos, /v1/todos)")
	cmd.AddCommand(todoPush(cf), todoList(cf), todoShow(cf))
	return cmd
}

func todoPush(cf *clientFlags) *cobra.Command {
	var (
		in      wire.PushInput
		payload string
	)
	cmd := &cobra.Command{
		Use:   "push AGENT --queue Q --title T [--payload JSON] [--kind K] [--source S] [--idempotency-key K]",
		Short: "Push a todo to an agent; prints the todo id",
		Long: `Push creates a todo for AGENT (id or handle) in one of its queues and prints
the todo's id. With --idempotency-key, pushing again while the first todo is
live prints the same id (and says so on stderr) instead of creating another.`,
		Args: exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags(cmd, "queue", "title"); err != nil {
				return err
			}
			if err := minFlags(cmd, map[string]int64{"max-attempts": 1}); err != nil {
				return err
			}
			if cmd.Flags().Changed("payload") {
				if !json.Valid([]byte(payload)) {
					return usageError{fmt.Errorf("--payload must be valid JSON, e.g. '{\"pr\": 42}'")}
				}
				in.Payload = json.RawMessage(payload)
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			t, created, err := c.PushTodo(cmd.Context(), args[0], in)
			if err != nil {
				return cf.wrap(err)
			}
			if !created {
				fmt.Fprintf(cmd.ErrOrStderr(), "a live todo with idempotency key %q already exists; nothing was created\n", clean(t.IdempotencyKey))
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), t)
			}
			fmt.Fprintln(cmd.OutOrStdout(), t.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Queue, "queue", "", "queue, one of the agent's scope (required)")
	f.StringVar(&in.Title, "title", "", "one-line title (required)")
	f.StringVar(&payload, "payload", "", "free-form JSON payload")
	f.StringVar(&in.Kind, "kind", "", "kind code, e.g. review")
	f.StringVar(&in.Source, "source", "", "source code, e.g. github")
	f.StringVar(&in.IdempotencyKey, "idempotency-key", "", "dedup key among the agent's live todos")
	f.IntVar(&in.MaxAttempts, "max-attempts", 0, "attempts before dead letter, 1-100 (default 5)")
	return cmd
}

func todoList(cf *clientFlags) *cobra.Command {
	var filter wire.TodoFilter
	cmd := &cobra.Command{
		Use:   "list AGENT [--queue Q] [--state S] [--limit N]",
		Short: "List an agent's todos, oldest first",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := minFlags(cmd, map[string]int64{"limit": 1}); err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			todos, err := c.ListTodos(cmd.Context(), args[0], filter)
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"items": nonNil(todos)})
			}
			t := newTable(cmd.OutOrStdout(), "ID", "QUEUE", "STATE", "ATTEMPT", "CREATED", "TITLE")
			for _, td := range todos {
				t.row(td.ID, td.Queue, todoState(td), strconv.Itoa(td.Attempt)+"/"+strconv.Itoa(td.MaxAttempts), fmtTime(td.CreatedAt), truncate(td.Title, 60))
			}
			return t.flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&filter.Queue, "queue", "", "only this queue")
	f.StringVar(&filter.State, "state", "", "only this state: pending, claimed, done, failed")
	f.IntVar(&filter.Limit, "limit", 0, "at most this many, ≥ 1 (server default 50, max 500)")
	return cmd
}

// todoState renders the state, telling a dead letter from a failed todo
// waiting for its retry.
func todoState(t domain.Todo) string {
	switch {
	case t.DeadLettered():
		return "failed (dead)"
	case t.State == domain.TodoFailed:
		return "failed (retry " + fmtTimePtr(t.RetryAt) + ")"
	}
	return t.State
}

func todoShow(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one todo",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			t, err := c.GetTodo(cmd.Context(), args[0])
			if err != nil {
				return cf.wrap(err)
			}
			return printTodo(cmd.OutOrStdout(), cf.json, t)
		},
	}
}

func printTodo(w io.Writer, asJSON bool, td domain.Todo) error {
	if asJSON {
		return printJSON(w, td)
	}
	t := newTable(w)
	t.row("ID:", td.ID)
	t.row("Agent:", td.AgentID)
	t.row("Queue:", td.Queue)
	t.row("Title:", td.Title)
	t.row("State:", todoState(td))
	t.row("Attempt:", strconv.Itoa(td.Attempt)+"/"+strconv.Itoa(td.MaxAttempts))
	t.row("Kind:", orDash(td.Kind))
	t.row("Source:", orDash(td.Source))
	t.row("Idempotency key:", orDash(td.IdempotencyKey))
	t.row("Created by:", td.CreatedBy)
	t.row("Created:", fmtTime(td.CreatedAt))
	t.row("Updated:", fmtTime(td.UpdatedAt))
	t.row("Claimed:", fmtTimePtr(td.ClaimedAt))
	t.row("Lease until:", fmtTimePtr(td.LeaseExpiresAt))
	t.row("Finished:", fmtTimePtr(td.FinishedAt))
	t.row("Rings:", strconv.Itoa(td.RingAttempts)+" (last "+fmtTimePtr(td.LastRingedAt)+")")
	t.row("Payload:", orDash(string(td.Payload)))
	t.row("Result:", orDash(string(td.Result)))
	t.row("Last error:", orDash(td.LastError))
	return t.flush()
}
