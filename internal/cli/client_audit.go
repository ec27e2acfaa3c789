package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/client"
)

// newAuditCommand builds `rollcall audit list|verify`.
func newAuditCommand(cf *clientFlags) *cobra.Command {
	return newGroup("audit", "Read and verify the hash-chained audit log (REST /v1/audit)",
		auditList(cf), auditVerify(cf))
}

func auditList(cf *clientFlags) *cobra.Command {
	var (
		f     wire.AuditFilter
		agent string
	)
	cmd := newCommand("list [AGENT]", "List audit entries in ascending sequence: AGENT's, or the whole log (an admin)", cobra.ArbitraryArgs, func(cmd *cobra.Command, args []string) error {
		ref, err := agentArg(args, agent, false)
		if err != nil {
			return err
		}
		f.AgentRef = ref
		if err := minFlags(cmd, map[string]int64{"after": 0, "limit": 1}); err != nil {
			return err
		}
		return callList(cmd, cf, func(ctx context.Context, c *client.Client) ([]wire.AuditEntry, error) {
			return c.ListAudit(ctx, f)
		}, tableOf(func(e wire.AuditEntry) []string {
			return []string{strconv.FormatInt(e.Seq, 10), fmtTime(e.At), e.Actor, e.Action, orDash(e.AgentID), e.Decision}
		}, "SEQ", "AT", "ACTOR", "ACTION", "AGENT", "DECISION"))
	})
	fl := cmd.Flags()
	legacyAgentFlag(cmd, &agent)
	fl.Int64Var(&f.AfterSeq, "after", 0, "only entries after this sequence number")
	fl.IntVar(&f.Limit, "limit", 0, "at most this many, ≥ 1 (server default 100, max 1000)")
	return cmd
}

func auditVerify(cf *clientFlags) *cobra.Command {
	return newCommand("verify", "Verify the audit hash chain; exits 1 when it is broken", noArgs, func(cmd *cobra.Command, _ []string) error {
		var res wire.AuditVerifyResult
		err := call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.AuditVerifyResult, error) {
			var err error
			res, err = c.VerifyAudit(ctx)
			return res, err
		}, func(w io.Writer, res wire.AuditVerifyResult) error {
			if res.OK {
				_, err := fmt.Fprintf(w, "audit chain ok: %d entries checked\n", res.Checked)
				return err
			}
			fmt.Fprintf(w, "audit chain BROKEN: %d entries checked, %d problem(s):\n", res.Checked, len(res.Warnings))
			for _, warn := range res.Warnings {
				fmt.Fprintf(w, "  %s\n", clean(warn))
			}
			return nil
		})
		if err == nil && !res.OK {
			err = fmt.Errorf("audit chain verification failed: %d problem(s)", len(res.Warnings))
		}
		return err
	})
}
