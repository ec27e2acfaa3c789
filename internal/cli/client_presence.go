package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
)

// Presence commands (DESIGN.md §3.5): operator overrides and the shift.

func presenceCommands(cf *clientFlags) []*cobra.Command {
	return []*cobra.Command{agentClock(cf, "in"), agentClock(cf, "out"), agentPresence(cf), agentShift(cf)}
}

func agentClock(cf *clientFlags, p string) *cobra.Command {
	var until string
	cmd := &cobra.Command{
		Use:   "clock-" + p + " AGENT [--until RFC3339]",
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
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			res, err := c.SetPresence(cmd.Context(), args[0], in)
			if err != nil {
				return cf.wrap(err)
			}
			if err := printPresence(cmd.OutOrStdout(), cf, res); err != nil {
				return err
			}
			if !cf.json && in.Until != nil && (res.Until == nil || !res.Until.Equal(*in.Until)) && res.Shift != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: an override also ends at the next shift boundary, so --until %s is not where presence next changes; from that boundary the shift decides\n", in.Until.UTC().Format(time.RFC3339))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&until, "until", "", "end of the override (RFC 3339); default: the next shift boundary")
	return cmd
}

func agentPresence(cf *clientFlags) *cobra.Command {
	var clear bool
	cmd := &cobra.Command{
		Use:   "presence AGENT [--clear]",
		Short: "Show the agent's presence, source, until and held todos; --clear removes any override",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var res wire.AgentPresence
			if clear {
				res, err = c.ClearPresence(cmd.Context(), args[0])
			} else {
				res, err = c.GetPresence(cmd.Context(), args[0])
			}
			if err != nil {
				return cf.wrap(err)
			}
			return printPresence(cmd.OutOrStdout(), cf, res)
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "clear any presence override")
	return cmd
}

func agentShift(cf *clientFlags) *cobra.Command {
	var clear bool
	cmd := &cobra.Command{
		Use:   "shift AGENT [SHIFT | --clear]",
		Short: `Set the agent's shift, e.g. "TZ=Europe/Berlin Mon-Fri 09:00-17:00"; --clear removes it`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && clear || len(args) == 2 && !clear {
				return nil
			}
			return usageError{fmt.Errorf("usage: rollcall agent shift AGENT SHIFT, or AGENT --clear")}
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var shift *string
			if !clear {
				shift = &args[1]
			}
			res, err := c.SetShift(cmd.Context(), args[0], shift)
			if err != nil {
				return cf.wrap(err)
			}
			return printPresence(cmd.OutOrStdout(), cf, res)
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the shift")
	return cmd
}

func printPresence(w io.Writer, cf *clientFlags, p wire.AgentPresence) error {
	if cf.json {
		return printJSON(w, p)
	}
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
	return nil
}
