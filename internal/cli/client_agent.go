package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/client"
	"github.com/rollcall/rollcall/internal/domain"
)

// newAgentCommand builds `rollcall agent create|list|show|update|revoke|
// rotate|status|clock-in|clock-out|presence|shift|grant` (REST /v1/agents).
func newAgentCommand(cf *clientFlags) *cobra.Command {
	return newGroup("agent", "Vend and manage agents (REST /v1/agents)",
		agentCreate(cf), agentList(cf), agentShow(cf), agentUpdate(cf), agentRevoke(cf), agentRotate(cf),
		agentStatusCommand(cf), agentClock(cf, "in"), agentClock(cf, "out"), agentPresence(cf), agentShift(cf), agentGrant(cf))
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
	cmd := newCommand("list", "List your agents (an admin: --owner lists another person's)", noArgs, func(cmd *cobra.Command, _ []string) error {
		return callList(cmd, cf, func(ctx context.Context, c *client.Client) ([]wire.Agent, error) {
			if owner != "" {
				return c.ListAgentsOf(ctx, owner)
			}
			return c.ListAgents(ctx)
		}, tableOf(func(a wire.Agent) []string {
			return []string{a.Handle, agentStatus(a), joinOrDash(a.Scope.Queues), joinOrDash(a.Scope.Verbs), a.ID}
		}, "HANDLE", "STATUS", "QUEUES", "VERBS", "ID"))
	})
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
	return argCommand(cf, "show AGENT", "Show one agent (AGENT = id or handle)", (*client.Client).GetAgent, printAgent)
}

func printAgent(w io.Writer, a domain.Agent) error {
	return printFields(w,
		"ID:", a.ID,
		"Handle:", a.Handle,
		"Name:", a.Name,
		"Owner:", a.OwnerID,
		"Status:", agentStatus(a),
		"Queues:", joinOrDash(a.Scope.Queues),
		"Verbs:", joinOrDash(a.Scope.Verbs),
		"Billing mode:", orDash(a.BillingMode),
		"Billing modes:", joinOrDash(a.BillingModes),
		"Tool class:", orDash(a.ToolClass),
		"Self clock-in cap:", a.SelfClockInCap.String()+" per off-shift stretch",
		"Created:", fmtTime(a.CreatedAt),
		"Updated:", fmtTime(a.UpdatedAt),
		"Revoked:", fmtTimePtr(a.RevokedAt),
	)
}

func agentUpdate(cf *clientFlags) *cobra.Command {
	var (
		name, mode, class string
		modes             []string
		active            bool
		selfCap           string
	)
	cmd := newCommand("update AGENT", "Change an agent's name, billing configuration, self clock-in cap or active flag (the scope is fixed)", exactArgs("AGENT"), func(cmd *cobra.Command, args []string) error {
		var in wire.UpdateInput
		f := cmd.Flags()
		given(f, "name", &name, &in.Name)
		given(f, "billing-mode", &mode, &in.BillingMode)
		given(f, "billing-modes", &modes, &in.BillingModes)
		given(f, "tool-class", &class, &in.ToolClass)
		given(f, "active", &active, &in.Active)
		given(f, "self-clock-in-cap", &selfCap, &in.SelfClockInCap)
		if in == (wire.UpdateInput{}) {
			return usageError{fmt.Errorf("nothing to change: pass at least one of --name, --active, --billing-mode, --billing-modes, --tool-class, --self-clock-in-cap")}
		}
		return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.Agent, error) {
			return c.UpdateAgent(ctx, args[0], in)
		}, printAgent)
	})
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
	return argCommand(cf, "revoke AGENT", "Revoke an agent permanently: credentials revoked, sessions closed (its handle stays taken)",
		(*client.Client).RevokeAgent, oneLine(func(a wire.Agent) string {
			return fmt.Sprintf("Agent %s revoked at %s; its credentials no longer work and its sessions are closed.", clean(a.Handle), fmtTimePtr(a.RevokedAt))
		}))
}

func agentRotate(cf *clientFlags) *cobra.Command {
	return argCommand(cf, "rotate AGENT", "Replace the agent's credential; prints the new one (once)",
		(*client.Client).RotateCredential, func(w io.Writer, res wire.RotateResult) error {
			printCredential(w, "has a new credential", res.Agent, res.Credential, res.MCPURL, res.ClaudeMCPAdd)
			return nil
		})
}

// agentStatusCommand builds `rollcall agent status AGENT`: the agent's
// liveness, last heartbeat, what its runtime reported, the warnings and its
// presence, from GET /v1/agents/{ref}/status.
func agentStatusCommand(cf *clientFlags) *cobra.Command {
	return argCommand(cf, "status AGENT", "Show the agent's liveness, last heartbeat, reported runtime, adapter and billing, warnings and presence",
		(*client.Client).AgentStatus, printStatus)
}

func printStatus(w io.Writer, st wire.AgentRuntimeStatus) error {
	line := func(k, v string) { fmt.Fprintf(w, "%-18s %s\n", k+":", clean(v)) }
	line("agent", st.Agent+" ("+st.AgentID+")")
	line("state", st.State)
	line("last heartbeat", fmtTimePtr(st.LastHeartbeatAt))
	line("billing mode", reportedVsConfigured(st.ReportedBillingMode, st.BillingMode))
	line("tool class", reportedVsConfigured(st.ReportedToolClass, st.ToolClass))
	if len(st.BillingModesSupported) > 0 {
		line("modes supported", strings.Join(st.BillingModesSupported, ", "))
	}
	ev := "-"
	if st.BillingEvidence != nil {
		ev = "key_type " + st.BillingEvidence.KeyType + ", method " + st.BillingEvidence.Method
	}
	line("billing evidence", ev)
	rt := "-"
	if st.Runtime != nil {
		rt = strings.TrimSpace(orDash(st.Runtime.Name) + " " + derefOr(st.Runtime.RuntimeVersion, ""))
	}
	line("runtime", rt)
	ad := "-"
	if st.Adapter != nil {
		ad = strings.TrimSpace(st.Adapter.Name + " " + derefOr(st.Adapter.Version, ""))
	}
	line("adapter", ad)
	line("warnings", joinOrDash(st.Warnings))
	if st.ProjectReadiness != nil {
		var qs []string
		for _, r := range st.ProjectReadiness {
			s := r.Queue + "=ready"
			if !r.Ready {
				s = r.Queue + "=not ready"
				if r.Reason != "" {
					s += " (" + r.Reason + ")"
				}
			}
			qs = append(qs, s)
		}
		line("project readiness", joinOrDash(qs))
	}
	if p := st.Presence; p.Presence != "" {
		line("presence", p.Presence+" (source "+p.Source+", "+untilText(p.Until)+")")
	}
	return nil
}

// reportedVsConfigured renders "api (configured subscription)".
func reportedVsConfigured(reported *string, configured string) string {
	s := derefOr(reported, "not reported")
	if configured != "" {
		s += " (configured " + configured + ")"
	}
	return s
}

func derefOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// Presence commands: operator overrides and the shift (the operator's
// controls of in/out presence).

func agentClock(cf *clientFlags, p string) *cobra.Command {
	var until string
	cmd := newCommand("clock-"+p+" AGENT", "Put the agent "+p+" (operator override; ends at --until or the next shift boundary)", exactArgs("AGENT"), func(cmd *cobra.Command, args []string) error {
		in := wire.PresenceInput{Presence: p}
		if until != "" {
			t, err := time.Parse(time.RFC3339, until)
			if err != nil {
				return usageError{fmt.Errorf("--until %q: want RFC 3339, e.g. 2026-12-01T17:00:00Z", until)}
			}
			in.Until = &t
		}
		return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.AgentPresence, error) {
			return c.SetPresence(ctx, args[0], in)
		}, func(w io.Writer, res wire.AgentPresence) error {
			printPresence(w, res)
			if in.Until != nil && (res.Until == nil || !res.Until.Equal(*in.Until)) && res.Shift != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: an override also ends at the next shift boundary, so --until %s is not where presence next changes; from that boundary the shift decides\n", in.Until.UTC().Format(time.RFC3339))
			}
			return nil
		})
	})
	cmd.Flags().StringVar(&until, "until", "", "end of the override (RFC 3339); default: the next shift boundary")
	return cmd
}

// agentPresence builds `agent presence show|clear AGENT`. The spelling of
// earlier releases, `agent presence AGENT [--clear]`, still runs.
func agentPresence(cf *clientFlags) *cobra.Command {
	show := argCommand(cf, "show AGENT", "Show the agent's presence, its source, until when, the shift and the held todos",
		(*client.Client).GetPresence, printPresenceTo)
	clear := argCommand(cf, "clear AGENT", "Remove any presence override: the shift decides again",
		(*client.Client).ClearPresence, printPresenceTo)
	var legacyClear bool
	cmd := newCommand("presence", "Show or clear the agent's presence override", legacyAgentArgs, func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageError{fmt.Errorf("presence needs a subcommand; see %s --help", cmd.CommandPath())}
		}
		if legacyClear {
			return clear.RunE(cmd, args)
		}
		return show.RunE(cmd, args)
	})
	cmd.Flags().BoolVar(&legacyClear, "clear", false, "clear any presence override; use `agent presence clear AGENT`")
	_ = cmd.Flags().MarkHidden("clear")
	cmd.AddCommand(show, clear)
	return cmd
}

// legacyAgentArgs are the arguments of a command that has subcommands but
// also runs, in an earlier release's spelling, with AGENT alone (presence,
// shift): one argument is that AGENT; more start with a mistyped
// subcommand.
func legacyAgentArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 1 && subcommand(cmd, args[0]) == nil {
		return unknownCommandError(cmd, args[0])
	}
	return nil
}

// agentShift builds `agent shift set AGENT SHIFT` and `agent shift clear
// AGENT`. The spellings of earlier releases, `agent shift AGENT SHIFT` and
// `agent shift AGENT --clear`, still run.
func agentShift(cf *clientFlags) *cobra.Command {
	set := func(cmd *cobra.Command, agent string, shift *string) error {
		return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.AgentPresence, error) {
			return c.SetShift(ctx, agent, shift)
		}, printPresenceTo)
	}
	var legacyClear bool
	cmd := &cobra.Command{
		Use:   "shift",
		Short: `Set or clear the agent's shift, e.g. "TZ=Europe/Berlin Mon-Fri 09:00-17:00"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 2 || len(args) == 2 && legacyClear {
				return legacyAgentArgs(cmd, args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && legacyClear:
				return set(cmd, args[0], nil)
			case len(args) == 2 && !legacyClear:
				return set(cmd, args[0], &args[1])
			}
			return usageError{fmt.Errorf("shift needs a subcommand: set AGENT SHIFT or clear AGENT; see %s --help", cmd.CommandPath())}
		},
	}
	cmd.Flags().BoolVar(&legacyClear, "clear", false, "remove the shift; use `agent shift clear AGENT`")
	_ = cmd.Flags().MarkHidden("clear")
	cmd.AddCommand(&cobra.Command{
		Use:   "set AGENT SHIFT",
		Short: `Set the agent's shift, e.g. "TZ=Europe/Berlin Mon-Fri 09:00-17:00"`,
		Args:  exactArgs("AGENT", "SHIFT"),
		RunE:  func(cmd *cobra.Command, args []string) error { return set(cmd, args[0], &args[1]) },
	}, &cobra.Command{
		Use:   "clear AGENT",
		Short: "Remove the agent's shift: only overrides put it in or out",
		Args:  exactArgs("AGENT"),
		RunE:  func(cmd *cobra.Command, args []string) error { return set(cmd, args[0], nil) },
	})
	return cmd
}

func printPresenceTo(w io.Writer, p wire.AgentPresence) error {
	printPresence(w, p)
	return nil
}

// untilText says when presence next changes: "until <RFC 3339>" or "no
// scheduled change" (one wording for status and presence output).
func untilText(t *time.Time) string {
	if t == nil {
		return "no scheduled change"
	}
	return "until " + t.UTC().Format(time.RFC3339)
}

func printPresence(w io.Writer, p wire.AgentPresence) {
	until := untilText(p.Until)
	shift := "none"
	if p.Shift != nil {
		shift = *p.Shift
	}
	fmt.Fprintf(w, "%s is %s (source %s, %s)\nshift: %s\npending push-eligible todos: %d\n", p.Agent, p.Presence, p.Source, until, shift, p.Pending)
	if p.Presence == "out" && len(p.Held) > 0 {
		held := "until it is in again"
		if p.HeldUntil != nil {
			held = "until " + p.HeldUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "held doorbells (%s):\n", held)
		for _, t := range p.Held {
			fmt.Fprintf(w, "  %s  %-16s created %s\n", t.ID, t.Queue, t.CreatedAt.UTC().Format(time.RFC3339))
		}
	}
}
