package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
)

// newAuditCommand builds `rollcall audit list|verify`.
func newAuditCommand() *cobra.Command {
	cmd, cf := newClientParent("audit", "Read and verify the hash-chained audit log (REST /v1/audit)")
	cmd.AddCommand(auditList(cf), auditVerify(cf))
	return cmd
}

func auditList(cf *clientFlags) *cobra.Command {
	var f wire.AuditFilter
	cmd := &cobra.Command{
		Use:   "list [--agent REF] [--after SEQ] [--limit N]",
		Short: "List audit entries in ascending sequence (the whole log needs an admin)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := minFlags(cmd, map[string]int64{"after": 0, "limit": 1}); err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			entries, err := c.ListAudit(cmd.Context(), f)
			if err != nil {
				return cf.wrap(err)
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"items": nonNil(entries)})
			}
			t := newTable(cmd.OutOrStdout(), "SEQ", "AT", "ACTOR", "ACTION", "AGENT", "DECISION")
			for _, e := range entries {
				t.row(strconv.FormatInt(e.Seq, 10), fmtTime(e.At), e.Actor, e.Action, orDash(e.AgentID), e.Decision)
			}
			return t.flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.AgentRef, "agent", "", "only this agent's entries (id or handle)")
	fl.Int64Var(&f.AfterSeq, "after", 0, "only entries after this sequence number")
	fl.IntVar(&f.Limit, "limit", 0, "at most this many, ≥ 1 (server default 100, max 1000)")
	return cmd
}

func auditVerify(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Verify the audit hash chain; exits 1 when it is broken",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			res, err := c.VerifyAudit(cmd.Context())
			if err != nil {
				return cf.wrap(err)
			}
			w := cmd.OutOrStdout()
			if cf.json {
				if err := printJSON(w, res); err != nil {
					return err
				}
			} else if res.OK {
				fmt.Fprintf(w, "audit chain ok: %d entries checked\n", res.Checked)
			} else {
				fmt.Fprintf(w, "audit chain BROKEN: %d entries checked, %d problem(s):\n", res.Checked, len(res.Warnings))
				for _, warn := range res.Warnings {
					fmt.Fprintf(w, "  %s\n", clean(warn))
				}
			}
			if !res.OK {
				return fmt.Errorf("audit chain verification failed: %d problem(s)", len(res.Warnings))
			}
			return nil
		},
	}
}
