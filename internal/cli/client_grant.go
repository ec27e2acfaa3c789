package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/client"
)

// agentGrant builds `rollcall agent grant create|list|revoke` over the
// pool grant routes (REST /v1/agents/{ref}/pool-grants; docs/design.md,
// "Pool grants").
func agentGrant(cf *clientFlags) *cobra.Command {
	create := newCommand("create AGENT PERSON", "Let PERSON (a person id) make AGENT a member of their pools", exactArgs("AGENT", "PERSON"),
		func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.PoolGrant, error) {
				g, created, err := c.GrantPool(ctx, args[0], args[1])
				if err == nil && !created {
					fmt.Fprintf(cmd.ErrOrStderr(), "agent %s was granted to person %s already; nothing changed\n", clean(g.AgentHandle), clean(g.PersonID))
				}
				return g, err
			}, oneLine(func(g wire.PoolGrant) string {
				return fmt.Sprintf("Agent %s granted to person %s: their pools may take it (rollcall pool create … --member %s).", clean(g.AgentHandle), clean(g.PersonID), clean(g.AgentHandle))
			}))
		})
	create.Long = `Create grants PERSON (a person id) the right to name AGENT (id or handle)
as a member of their pools. The agent's owner grants; an admin may grant any
agent, but not another person's to themself. The agent's scope must still
hold every queue of such a pool. Revoke takes the agent out of PERSON's pools.`
	list := newCommand("list AGENT", "List the persons AGENT is granted to", exactArgs("AGENT"), func(cmd *cobra.Command, args []string) error {
		return callList(cmd, cf, func(ctx context.Context, c *client.Client) ([]wire.PoolGrant, error) {
			return c.ListPoolGrants(ctx, args[0])
		}, tableOf(func(g wire.PoolGrant) []string {
			return []string{g.PersonID, g.GrantedBy, fmtTime(g.CreatedAt)}
		}, "PERSON", "GRANTED BY", "CREATED"))
	})
	revoke := newCommand("revoke AGENT PERSON", "Revoke AGENT's pool grant to PERSON: it leaves their pools (what it holds it keeps)", exactArgs("AGENT", "PERSON"),
		func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.PoolGrant, error) {
				return c.RevokePoolGrant(ctx, args[0], args[1])
			}, printRevokedGrant)
		})
	return newGroup("grant", "Pool grants: let another person put the agent in their pools (REST /v1/agents/{ref}/pool-grants)",
		create, list, revoke)
}

func printRevokedGrant(w io.Writer, g wire.PoolGrant) error {
	_, err := fmt.Fprintf(w, "Pool grant of agent %s to person %s revoked; the agent has left their pools.\n", clean(g.AgentHandle), clean(g.PersonID))
	return err
}
