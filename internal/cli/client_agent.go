package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/client"
	"github.com/rollcall/rollcall/internal/domain"
)

// newAgentCommand builds `rollcall agent create|list|show|update|revoke|
// rotate|status|clock-in|clock-out|presence|shift` (REST /v1/agents).
func newAgentCommand(cf *clientFlags) *cobra.Command {
	return newGroup("agent", "Vend and manage agents (REST /v1/agents)",
		agentCreate(cf), agentList(cf), agentShow(cf), agentUpdate(cf), agentRevoke(cf), agentRotate(cf),
		agentStatusCommand(cf), agentClock(cf, "in"), agentClock(cf, "out"), agentPresence(cf), agentShift(cf))
}

func agentCreate(cf *clientFlags) *cobra.Command {
	var (
		in      wire.VendInput
		handoff []string
	)
	cmd := &cobra.Command{
		Use:     "create",
		Aliases: []string{"vend"},
		Short:   "Vend an agent; prints its credential (once), MCP URL and the claude mcp add line",
		Long: `Create (vend) registers an agent owned by you and prints its credential —
shown only this once, store it now — its MCP URL and a ready-to-paste claude
mcp add line. --queue and --verb repeat (or take comma-separated lists).
Without --verb the agent may call every scope verb, as the console's vend form
ticks them all: ` + strings.Join(domain.ScopeVerbs, ", ") + ` (--verb '' grants none).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "handle", "queue"); err != nil {
				return err
			}
			if !cmd.Flags().Changed("verb") {
				in.Verbs = slices.Clone(domain.ScopeVerbs)
			}
			for _, g := range handoff {
				agent, queue, ok := strings.Cut(g, "/")
				if !ok || agent == "" || queue == "" {
					return usageError{fmt.Errorf("--handoff wants AGENT/QUEUE, got %q", g)}
				}
				in.Handoff = append(in.Handoff, wire.HandoffInput{Agent: agent, Queue: queue})
			}
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.VendResult, error) {
				return c.VendAgent(ctx, in)
			}, func(w io.Writer, res wire.VendResult) error {
				printCredential(w, "vended", res.Agent, res.Credential, res.MCPURL, res.ClaudeMCPAdd)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Handle, "handle", "", "the agent's handle, ^[a-z0-9][a-z0-9._-]*$ (required)")
	f.StringVar(&in.Name, "name", "", "display name (default: the handle)")
	f.StringSliceVar(&in.Queues, "queue", nil, "granted queue (required; repeatable)")
	f.StringSliceVar(&in.Verbs, "verb", nil, "granted scope verb (repeatable; default: all of them)")
	f.StringVar(&in.BillingMode, "billing-mode", "", "configured billing mode")
	f.StringSliceVar(&in.BillingModes, "billing-modes", nil, "allowed billing modes (comma-separated)")
	f.StringVar(&in.ToolClass, "tool-class", "", "tool class")
	f.StringSliceVar(&handoff, "handoff", nil, "grant hand_off to AGENT/QUEUE, another of your agents and one of its queues (repeatable)")
	return cmd
}

// printCredential prints a freshly issued credential and how to use it.
func printCredential(w io.Writer, what string, a domain.Agent, credential, mcpURL, addLine string) {
	fmt.Fprintf(w, "Agent %s %s (id %s).\n\n", clean(a.Handle), what, a.ID)
	fmt.Fprintf(w, "Credential (shown only this once; store it now):\n  %s\n\n", credential)
	fmt.Fprintf(w, "MCP URL: %s\n\n", clean(mcpURL))
	fmt.Fprintf(w, "Connect Claude Code:\n  %s\n", clean(addLine))
	fmt.Fprintf(w, "Claude Code loads the doorbell channel of a server that is not on its allowlist only\nwhen started with: claude --dangerously-load-development-channels server:rollcall-%s\n", clean(a.Handle))
}

func agentList(cf *clientFlags) *cobra.Command {
	var owner string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your agents (an admin: --owner lists another person's)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callList(cmd, cf, func(ctx context.Context, c *client.Client) ([]wire.Agent, error) {
				if owner != "" {
					return c.ListAgentsOf(ctx, owner)
				}
				return c.ListAgents(ctx)
			}, func(w io.Writer, agents []wire.Agent) error {
				t := newTable(w, "HANDLE", "STATUS", "QUEUES", "VERBS", "ID")
				for _, a := range agents {
					t.row(a.Handle, agentStatus(a), joinOrDash(a.Scope.Queues), joinOrDash(a.Scope.Verbs), a.ID)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "an admin: list this person's agents instead (a person id)")
	return cmd
}

func agentStatus(a domain.Agent) string {
	switch {
	case a.Revoked():
		return "revoked"
	case !a.Active:
		return "inactive"
	}
	return "active"
}

func agentShow(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show AGENT",
		Short: "Show one agent (AGENT = id or handle)",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.Agent, error) {
				return c.GetAgent(ctx, args[0])
			}, printAgent)
		},
	}
}

func printAgent(w io.Writer, a domain.Agent) error {
	t := newTable(w)
	t.row("ID:", a.ID)
	t.row("Handle:", a.Handle)
	t.row("Name:", a.Name)
	t.row("Owner:", a.OwnerID)
	t.row("Status:", agentStatus(a))
	t.row("Queues:", joinOrDash(a.Scope.Queues))
	t.row("Verbs:", joinOrDash(a.Scope.Verbs))
	t.row("Billing mode:", orDash(a.BillingMode))
	t.row("Billing modes:", joinOrDash(a.BillingModes))
	t.row("Tool class:", orDash(a.ToolClass))
	t.row("Self clock-in cap:", a.SelfClockInCap.String()+" per off-shift stretch")
	t.row("Created:", fmtTime(a.CreatedAt))
	t.row("Updated:", fmtTime(a.UpdatedAt))
	t.row("Revoked:", fmtTimePtr(a.RevokedAt))
	return t.flush()
}

func agentUpdate(cf *clientFlags) *cobra.Command {
	var (
		name, mode, class string
		modes             []string
		active            bool
		selfCap           string
	)
	cmd := &cobra.Command{
		Use:   "update AGENT",
		Short: "Change an agent's name, billing configuration, self clock-in cap or active flag (the scope is fixed)",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in wire.UpdateInput
			f := cmd.Flags()
			if f.Changed("name") {
				in.Name = &name
			}
			if f.Changed("billing-mode") {
				in.BillingMode = &mode
			}
			if f.Changed("billing-modes") {
				in.BillingModes = &modes
			}
			if f.Changed("tool-class") {
				in.ToolClass = &class
			}
			if f.Changed("active") {
				in.Active = &active
			}
			if f.Changed("self-clock-in-cap") {
				in.SelfClockInCap = &selfCap
			}
			if in == (wire.UpdateInput{}) {
				return usageError{fmt.Errorf("nothing to change: pass at least one of --name, --active, --billing-mode, --billing-modes, --tool-class, --self-clock-in-cap")}
			}
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.Agent, error) {
				return c.UpdateAgent(ctx, args[0], in)
			}, printAgent)
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "display name")
	f.BoolVar(&active, "active", true, "active flag; --active=false closes the agent's sessions")
	f.StringVar(&mode, "billing-mode", "", `configured billing mode ("" clears it)`)
	f.StringSliceVar(&modes, "billing-modes", nil, "allowed billing modes (comma-separated)")
	f.StringVar(&class, "tool-class", "", `tool class ("" clears it)`)
	f.StringVar(&selfCap, "self-clock-in-cap", "", `how long the agent's own clock_in may keep it in per off-shift stretch, all calls together (e.g. 8h, 90m; 0 = never outside its shift)`)
	return cmd
}

func agentRevoke(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke AGENT",
		Short: "Revoke an agent permanently: credentials revoked, sessions closed (its handle stays taken)",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.Agent, error) {
				return c.RevokeAgent(ctx, args[0])
			}, func(w io.Writer, a wire.Agent) error {
				_, err := fmt.Fprintf(w, "Agent %s revoked at %s; its credentials no longer work and its sessions are closed.\n", clean(a.Handle), fmtTimePtr(a.RevokedAt))
				return err
			})
		},
	}
}

func agentRotate(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate AGENT",
		Short: "Replace the agent's credential; prints the new one (once)",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.RotateResult, error) {
				return c.RotateCredential(ctx, args[0])
			}, func(w io.Writer, res wire.RotateResult) error {
				printCredential(w, "has a new credential", res.Agent, res.Credential, res.MCPURL, res.ClaudeMCPAdd)
				return nil
			})
		},
	}
}
