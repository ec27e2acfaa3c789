package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/client"
)

// newPoolCommand builds `rollcall pool create|list|show|update|delete|push` over
// the REST pool routes (docs/design.md, "Pools").
func newPoolCommand(cf *clientFlags) *cobra.Command {
	return newGroup("pool", "Pools: named sets of your agents that share queues; a pushed todo goes to whichever member is in (REST /v1/pools)",
		poolCreate(cf), poolList(cf), poolShow(cf), poolUpdate(cf), poolDelete(cf), poolPush(cf))
}

func poolCreate(cf *clientFlags) *cobra.Command {
	var in wire.PoolInput
	cmd := newCommand("create NAME", "Create a pool of your agents; prints its id", exactArgs("NAME"), func(cmd *cobra.Command, args []string) error {
		if err := requireFlags(cmd, "queue", "member"); err != nil {
			return err
		}
		in.Name = args[0]
		return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.Pool, error) {
			return c.CreatePool(ctx, in)
		}, oneLine(func(p wire.Pool) string { return p.ID }))
	})
	cmd.Long = `Create makes a pool NAME of your agents (--member, id or handle, repeatable)
sharing queues (--queue, repeatable; every member must have each in its
scope). A todo pushed to the pool (rollcall pool push) belongs to no agent
until a member claims it; its doorbell rings one member that is in, live,
ready for the queue and has an open stream, the one rung least recently.`
	f := cmd.Flags()
	f.StringSliceVar(&in.Queues, "queue", nil, "a queue of the pool (required, repeatable)")
	f.StringSliceVar(&in.Members, "member", nil, "a member agent, id or handle (required, repeatable)")
	return cmd
}

func poolUpdate(cf *clientFlags) *cobra.Command {
	var in wire.PoolUpdate
	cmd := newCommand("update NAME", "Replace the members of a pool", exactArgs("NAME"), func(cmd *cobra.Command, args []string) error {
		if err := requireFlags(cmd, "member"); err != nil {
			return err
		}
		return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.Pool, error) {
			return c.UpdatePool(ctx, args[0], in)
		}, oneLine(func(p wire.Pool) string { return "pool " + p.Name + ": members " + memberHandles(p) }))
	})
	cmd.Long = `Update makes the --member agents (id or handle, repeatable) the pool's
members from now on, as create checks them; the name and queues stay. A
member that leaves is not rung again and keeps a todo it holds; one that
joins is rung for the pool's waiting todos.`
	cmd.Flags().StringSliceVar(&in.Members, "member", nil, "a member agent, id or handle (required, repeatable)")
	return cmd
}

func poolList(cf *clientFlags) *cobra.Command {
	return newCommand("list", "List your pools", cobra.NoArgs, func(cmd *cobra.Command, _ []string) error {
		return callList(cmd, cf, func(ctx context.Context, c *client.Client) ([]wire.Pool, error) { return c.ListPools(ctx) }, tableOf(func(p wire.Pool) []string {
			return []string{p.Name, strings.Join(p.Queues, ","), memberHandles(p), p.ID}
		}, "NAME", "QUEUES", "MEMBERS", "ID"))
	})
}

func memberHandles(p wire.Pool) string {
	hs := make([]string, len(p.Members))
	for i, m := range p.Members {
		hs[i] = orDash(m.Handle)
	}
	return strings.Join(hs, ",")
}

// poolView is what pool show prints: the pool and its live todos.
type poolView struct {
	wire.Pool
	Todos []wire.Todo `json:"todos"`
}

func poolShow(cf *clientFlags) *cobra.Command {
	return newCommand("show NAME", "Show a pool, its members and its live todos (who holds or is rung for each)", exactArgs("NAME"), func(cmd *cobra.Command, args []string) error {
		return call(cmd, cf, func(ctx context.Context, c *client.Client) (poolView, error) {
			p, err := c.GetPool(ctx, args[0])
			if err != nil {
				return poolView{}, err
			}
			ts, err := c.ListPoolTodos(ctx, args[0])
			return poolView{Pool: p, Todos: nonNil(ts)}, err
		}, printPool)
	})
}

func printPool(w io.Writer, v poolView) error {
	p := v.Pool
	handles := map[string]string{}
	for _, m := range p.Members {
		handles[m.AgentID] = orDash(m.Handle)
	}
	fmt.Fprintf(w, "Pool %s (%s): queues %s\n\n", clean(p.Name), p.ID, clean(strings.Join(p.Queues, ",")))
	if err := tableOf(func(m wire.PoolMember) []string {
		last := "-"
		if m.LastRungAt != nil {
			last = m.LastRungAt.Format("2006-01-02T15:04:05Z")
		}
		return []string{orDash(m.Handle), m.AgentID, last}
	}, "MEMBER", "AGENT ID", "LAST RUNG")(w, p.Members); err != nil {
		return err
	}
	fmt.Fprintln(w)
	// A holder that has left the pool (its grant revoked) is shown by id.
	who := func(id string) string {
		if id == "" {
			return "-"
		}
		if h, ok := handles[id]; ok {
			return h
		}
		return id
	}
	return tableOf(func(t wire.Todo) []string {
		holder, rung := who(t.AgentID), who(t.RingAgentID)
		return []string{t.ID, t.State, t.Queue, holder, rung, clean(t.Title)}
	}, "TODO", "STATE", "QUEUE", "HELD BY", "RINGS", "TITLE")(w, v.Todos)
}

func poolDelete(cf *clientFlags) *cobra.Command {
	cmd := argCommand(cf, "delete NAME", "Delete a pool that has no live todos",
		(*client.Client).DeletePool, oneLine(func(p wire.Pool) string { return "Pool " + p.Name + " deleted." }))
	cmd.Aliases = []string{"rm"}
	return cmd
}

func poolPush(cf *clientFlags) *cobra.Command {
	return pushCommand(cf, "push NAME", "Push a todo to a pool; prints the todo id", `Push makes a todo for pool NAME in one of its queues and prints the todo's
id: the same flags and idempotency rules as rollcall todo create, the key
unique among the pool's live todos.`, "pool's queues", "pool's", (*client.Client).PushPoolTodo)
}
