package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/client"
	"github.com/rollcall/rollcall/internal/domain"
)

// newTodoCommand builds `rollcall todo create|list|show`.
func newTodoCommand(cf *clientFlags) *cobra.Command {
	return newGroup("todo", "Push and inspect todos (REST /v1/agents/{ref}/todos, /v1/todos)",
		todoCreate(cf), todoList(cf), todoShow(cf))
}

func todoCreate(cf *clientFlags) *cobra.Command {
	cmd := pushCommand(cf, "create AGENT", "Push a todo to an agent; prints the todo id", `Create (push) makes a todo for AGENT (id or handle) in one of its queues and
prints the todo's id. With --idempotency-key, pushing again while the first
todo is live prints the same id (and says so on stderr) instead of creating
another.`, "agent's scope", "agent's", (*client.Client).PushTodo)
	cmd.Aliases = []string{"push"}
	return cmd
}

// pushCommand is a push command (todo create, pool push) "VERB TARGET":
// push of the flags' body to TARGET, the flags' help naming the target's
// scope and of whose live todos an idempotency key is unique.
func pushCommand(cf *clientFlags, use, short, long, scope, of string,
	push func(*client.Client, context.Context, string, wire.PushInput) (wire.Todo, bool, error)) *cobra.Command {
	var (
		in      wire.PushInput
		payload string
	)
	_, target, _ := strings.Cut(use, " ")
	cmd := newCommand(use, short, exactArgs(target), func(cmd *cobra.Command, args []string) error {
		return pushCall(cmd, cf, &in, payload, func(ctx context.Context, c *client.Client) (wire.Todo, bool, error) {
			return push(c, ctx, args[0], in)
		})
	})
	cmd.Long = long
	pushFlags(cmd, &in, &payload, scope, of)
	return cmd
}

// pushFlags registers the push body's flags on cmd (todo create, pool
// push); of names whose queues and live todos they are.
func pushFlags(cmd *cobra.Command, in *wire.PushInput, payload *string, scope, of string) {
	f := cmd.Flags()
	f.StringVar(&in.Queue, "queue", "", "queue, one of the "+scope+" (required)")
	f.StringVar(&in.Title, "title", "", "one-line title (required)")
	f.StringVar(payload, "payload", "", "free-form JSON payload")
	f.StringVar(&in.Kind, "kind", "", "kind code, e.g. review")
	f.StringVar(&in.Source, "source", "", "source code, e.g. github")
	f.StringVar(&in.IdempotencyKey, "idempotency-key", "", "dedup key among the "+of+" live todos")
	f.IntVar(&in.MaxAttempts, "max-attempts", 0, "attempts before dead letter, 1-100 (default 5)")
}

// pushCall checks the push flags, sets the payload and runs push, printing
// the todo's id (and, on stderr, that nothing was created when a live todo
// had the key).
func pushCall(cmd *cobra.Command, cf *clientFlags, in *wire.PushInput, payload string, push func(context.Context, *client.Client) (wire.Todo, bool, error)) error {
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
	return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.Todo, error) {
		t, created, err := push(ctx, c)
		if err == nil && !created {
			fmt.Fprintf(cmd.ErrOrStderr(), "a live todo with idempotency key %q already exists; nothing was created\n", clean(t.IdempotencyKey))
		}
		return t, err
	}, oneLine(func(t wire.Todo) string { return t.ID }))
}

func todoList(cf *clientFlags) *cobra.Command {
	var filter wire.TodoFilter
	cmd := newCommand("list AGENT", "List an agent's todos, oldest first", exactArgs("AGENT"), func(cmd *cobra.Command, args []string) error {
		if err := minFlags(cmd, map[string]int64{"limit": 1}); err != nil {
			return err
		}
		return callList(cmd, cf, func(ctx context.Context, c *client.Client) ([]wire.Todo, error) {
			return c.ListTodos(ctx, args[0], filter)
		}, tableOf(func(td wire.Todo) []string {
			return []string{td.ID, td.Queue, todoState(td), strconv.Itoa(td.Attempt) + "/" + strconv.Itoa(td.MaxAttempts), fmtTime(td.CreatedAt), truncate(td.Title, 60)}
		}, "ID", "QUEUE", "STATE", "ATTEMPT", "CREATED", "TITLE"))
	})
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
	return argCommand(cf, "show ID", "Show one todo", (*client.Client).GetTodo, printTodo)
}

func printTodo(w io.Writer, td domain.Todo) error {
	return printFields(w,
		"ID:", td.ID,
		"Agent:", td.AgentID,
		"Queue:", td.Queue,
		"Title:", td.Title,
		"State:", todoState(td),
		"Attempt:", strconv.Itoa(td.Attempt)+"/"+strconv.Itoa(td.MaxAttempts),
		"Kind:", orDash(td.Kind),
		"Source:", orDash(td.Source),
		"Idempotency key:", orDash(td.IdempotencyKey),
		"Created by:", td.CreatedBy,
		"Created:", fmtTime(td.CreatedAt),
		"Updated:", fmtTime(td.UpdatedAt),
		"Claimed:", fmtTimePtr(td.ClaimedAt),
		"Lease until:", fmtTimePtr(td.LeaseExpiresAt),
		"Finished:", fmtTimePtr(td.FinishedAt),
		"Rings:", strconv.Itoa(td.RingAttempts)+" (last "+fmtTimePtr(td.LastRingedAt)+")",
		"Payload:", orDash(string(td.Payload)),
		"Result:", orDash(string(td.Result)),
		"Last error:", orDash(td.LastError),
	)
}
