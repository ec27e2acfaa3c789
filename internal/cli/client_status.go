package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/client"
)

// agentStatusCommand builds `rollcall agent status AGENT`: the agent's
// liveness, last heartbeat, what its runtime reported, the warnings and its
// presence, from GET /v1/agents/{ref}/status.
func agentStatusCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status AGENT",
		Short: "Show the agent's liveness, last heartbeat, reported runtime, adapter and billing, warnings and presence",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.AgentRuntimeStatus, error) {
				return c.AgentStatus(ctx, args[0])
			}, printStatus)
		},
	}
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
		line("presence", p.Presence+" (source "+p.Source+", until "+fmtTimePtr(p.Until)+")")
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
