package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/client"
)

// Presence commands: operator overrides and the shift (the operator's
// controls of in/out presence).

func agentClock(cf *clientFlags, p string) *cobra.Command {
	var until string
	cmd := &cobra.Command{
		Use:   "clock-" + p + " AGENT",
		Short: "Put the agent " + p + " (operator override; ends at --until or the next shift boundary)",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
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
		},
	}
	cmd.Flags().StringVar(&until, "until", "", "end of the override (RFC 3339); default: the next shift boundary")
	return cmd
}

// agentPresence builds `agent presence show|clear AGENT`. The spelling of
// earlier releases, `agent presence AGENT [--clear]`, still runs.
func agentPresence(cf *clientFlags) *cobra.Command {
	show := func(cmd *cobra.Command, agent string) error {
		return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.AgentPresence, error) {
			return c.GetPresence(ctx, agent)
		}, printPresenceTo)
	}
	clear := func(cmd *cobra.Command, agent string) error {
		return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.AgentPresence, error) {
			return c.ClearPresence(ctx, agent)
		}, printPresenceTo)
	}
	var legacyClear bool
	cmd := &cobra.Command{
		Use:   "presence",
		Short: "Show or clear the agent's presence override",
		Args:  legacyAgentArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("presence needs a subcommand; see %s --help", cmd.CommandPath())}
			}
			if legacyClear {
				return clear(cmd, args[0])
			}
			return show(cmd, args[0])
		},
	}
	cmd.Flags().BoolVar(&legacyClear, "clear", false, "clear any presence override; use `agent presence clear AGENT`")
	_ = cmd.Flags().MarkHidden("clear")
	cmd.AddCommand(&cobra.Command{
		Use:   "show AGENT",
		Short: "Show the agent's presence, its source, until when, the shift and the held todos",
		Args:  exactArgs("AGENT"),
		RunE:  func(cmd *cobra.Command, args []string) error { return show(cmd, args[0]) },
	}, &cobra.Command{
		Use:   "clear AGENT",
		Short: "Remove any presence override: the shift decides again",
		Args:  exactArgs("AGENT"),
		RunE:  func(cmd *cobra.Command, args []string) error { return clear(cmd, args[0]) },
	})
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

func printPresence(w io.Writer, p wire.AgentPresence) {
	until := "no scheduled change"
	if p.Until != nil {
		until = "until " + p.Until.UTC().Format(time.RFC3339)
	}
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
