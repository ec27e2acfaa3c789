package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/domain"
)

// newAgentCommand builds `rollcall agent vend|list|show|update|revoke|rotate`.
func newAgentCommand() *cobra.Command {
	cmd, cf := newClientParent("agent", "Vend and manage agents (REST /v1/agents)")
	cmd.AddCommand(agentVend(cf), agentList(cf), agentShow(cf), agentUpdate(cf), agentRevoke(cf), agentRotate(cf))
	cmd.AddCommand(presenceCommands(cf)...)
	cmd.AddCommand(agentStatusCommand(cf))
	return cmd
}

func agentVend(cf *clientFlags) *cobra.Command {
	var (
		in      wire.VendInput
		handoff []string
	)
	cmd := &cobra.Command{
		Use:   "vend --handle H --queue Q [--queue Q…] [--verb V…]",
		Short: "Vend an agent; prints its credential (once), MCP URL and the claude mcp add line",
		Long: `Vend registers an agent owned by you and prints its credential — shown only
this once, store it now — its MCP URL and a ready-to-paste claude mcp add line.
--queue and --verb repeat (or take comma-separated lists). Verbs: ` + strings.Join(domain.ScopeVerbs, ", ") + `.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "handle", "queue"); err != nil {
				return err
			}
			for _, g := range handoff {
				agent, queue, ok := strings.Cut(g, "/")
				if !ok || agent == "" || queue == "" {
					return usageError{fmt.Errorf("--handoff wants AGENT/QUEUE, got %q", g)}
				}
				in.Handoff = append(in.Handoff, wire.HandoffInput{Agent: agent, Queue: queue})
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			res, err := c.VendAgent(cmd.Context(), in)
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			printCredential(cmd.OutOrStdout(), "vended", res.Agent, res.Credential, res.MCPURL, res.ClaudeMCPAdd)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Handle, "handle", "", "the agent's handle, ^[a-z0-9][a-z0-9._-]*$ (required)")
	f.StringVar(&in.Name, "name", "", "display name (default: the handle)")
	f.StringSliceVar(&in.Queues, "queue", nil, "granted queue (required; repeatable)")
	f.StringSliceVar(&in.Verbs, "verb", nil, "granted scope verb (repeatable)")
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
		Use:   "list [--owner PERSON_ID]",
		Short: "List your agents (an admin: --owner lists another person's)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var agents []domain.Agent
			if owner != "" {
				agents, err = c.ListAgentsOf(cmd.Context(), owner)
			} else {
				agents, err = c.ListAgents(cmd.Context())
			}
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"items": nonNil(agents)})
			}
			t := newTable(cmd.OutOrStdout(), "HANDLE", "STATUS", "QUEUES", "VERBS", "ID")
			for _, a := range agents {
				t.row(a.Handle, agentStatus(a), joinOrDash(a.Scope.Queues), joinOrDash(a.Scope.Verbs), a.ID)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "an admin: list this person's agents instead")
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
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			a, err := c.GetAgent(cmd.Context(), args[0])
			if err != nil {
				return cf.wrap(err)
			}
			return printAgent(cmd.OutOrStdout(), cf.json, a)
		},
	}
}

func printAgent(w io.Writer, asJSON bool, a domain.Agent) error {
	if asJSON {
		return printJSON(w, a)
	}
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
		Use:   "update AGENT [--name N] [--active=true|false] [--billing-mode M] [--billing-modes A,B] [--tool-class C] [--self-clock-in-cap D]",
		Short: "Change an agent's name, billing configuration or active flag (the scope is fixed)",
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
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			a, err := c.UpdateAgent(cmd.Context(), args[0], in)
			if err != nil {
				return cf.wrap(err)
			}
			return printAgent(cmd.OutOrStdout(), cf.json, a)
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
		Short: "Revoke an agent permanently: credentials revoked, sessions closed",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			a, err := c.RevokeAgent(cmd.Context(), args[0])
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), a)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Agent %s revoked at %s; its credentials no longer work and its sessions are closed.\n", clean(a.Handle), fmtTimePtr(a.RevokedAt))
			return nil
		},
	}
}

func agentRotate(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate AGENT",
		Short: "Replace the agent's credential; prints the new one (once)",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			res, err := c.RotateCredential(cmd.Context(), args[0])
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			printCredential(cmd.OutOrStdout(), "has a new credential", res.Agent, res.Credential, res.MCPURL, res.ClaudeMCPAdd)
			return nil
		},
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
