package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/client"
	"github.com/rollcall/rollcall/internal/domain"
)

// newHookCommand builds `rollcall hook create|list|show|rotate|delete`
// over the REST hook routes (webhook intake).
func newHookCommand(cf *clientFlags) *cobra.Command {
	return newGroup("hook", "Webhook endpoints that turn GitHub or Standard Webhooks deliveries into todos (REST /v1/hooks)",
		hookCreate(cf), hookList(cf), hookShow(cf), hookRotate(cf), hookDelete(cf))
}

func hookCreate(cf *clientFlags) *cobra.Command {
	var (
		in     wire.HookInput
		filter domain.HookFilter
		agent  string
	)
	cmd := &cobra.Command{
		Use:     "create AGENT",
		Aliases: []string{"add"},
		Short:   "Create a hook for one of AGENT's queues; prints its URL and secret (once)",
		Long: `Create makes a webhook endpoint for one of your agents (AGENT, id or handle)
and one of its queues, and prints the URL to point the sender at and the
secret — shown only this once.

A github hook turns pull_request opened/ready_for_review/review_requested,
issues opened/labeled, issue_comment created and check_run/workflow_run
completed with failure into todos; --repo, --label and --action (repeatable)
narrow that. --title-template uses {number}, {title}, {repository}, {url},
{sender}, {labels}, {label}, {name}, {conclusion}, {branch}, {reviewer},
{event}, {action}. A standard hook takes Standard Webhooks deliveries with
the body {title, queue?, kind?, payload?}.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := agentArg(args, agent, true)
			if err != nil {
				return err
			}
			in.Agent = ref
			if err := requireFlags(cmd, "kind", "queue"); err != nil {
				return err
			}
			if len(filter.Repositories)+len(filter.Labels)+len(filter.Actions) > 0 {
				in.Filter = &filter
			}
			return call(cmd, cf, func(ctx context.Context, c *client.Client) (wire.HookSecretResult, error) {
				return c.CreateHook(ctx, in)
			}, func(w io.Writer, res wire.HookSecretResult) error {
				printHookSecret(w, "created", res)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Kind, "kind", "", "github or standard (required)")
	legacyAgentFlag(cmd, &agent)
	f.StringVar(&in.Queue, "queue", "", "one of the agent's queues (required)")
	f.StringSliceVar(&filter.Repositories, "repo", nil, "only deliveries from this repository, owner/name (repeatable)")
	f.StringSliceVar(&filter.Labels, "label", nil, "only issues and pull requests with this label (repeatable)")
	f.StringSliceVar(&filter.Actions, "action", nil, "only this event or event.action, e.g. pull_request.review_requested (repeatable)")
	f.StringVar(&in.TitleTemplate, "title-template", "", "todo title template (github)")
	f.StringVar(&in.KindLabel, "kind-label", "", "todo kind instead of the event name")
	return cmd
}

// printHookSecret prints a hook with its freshly issued secret and how to
// point a sender at it.
func printHookSecret(w io.Writer, what string, res wire.HookSecretResult) {
	h := res.Hook
	fmt.Fprintf(w, "Hook %s %s (%s hook for %s, queue %s).\n\n", h.ID, what, h.Kind, clean(h.AgentHandle), clean(h.Queue))
	fmt.Fprintf(w, "URL:\n  %s\n\n", clean(res.URL))
	fmt.Fprintf(w, "Secret (shown only this once; store it now):\n  %s\n\n", res.Secret)
	if h.Kind == domain.HookGitHub {
		fmt.Fprintf(w, "On GitHub: repository Settings → Webhooks → Add webhook; Payload URL = the URL,\nContent type = application/json, Secret = the secret, and pick the events.\n")
	} else {
		fmt.Fprintf(w, "Sign deliveries with this Standard Webhooks secret (webhook-id, webhook-timestamp,\nwebhook-signature); the body is {\"title\": …, \"queue\"?, \"kind\"?, \"payload\"?}.\n")
	}
}

func hookFilterText(f domain.HookFilter) string {
	var parts []string
	if len(f.Repositories) > 0 {
		parts = append(parts, "repo="+strings.Join(f.Repositories, ","))
	}
	if len(f.Labels) > 0 {
		parts = append(parts, "label="+strings.Join(f.Labels, ","))
	}
	if len(f.Actions) > 0 {
		parts = append(parts, "action="+strings.Join(f.Actions, ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func hookList(cf *clientFlags) *cobra.Command {
	var agent string
	cmd := newCommand("list [AGENT]", "List your hooks, or AGENT's (never their secrets)", cobra.ArbitraryArgs, func(cmd *cobra.Command, args []string) error {
		ref, err := agentArg(args, agent, false)
		if err != nil {
			return err
		}
		return callList(cmd, cf, func(ctx context.Context, c *client.Client) ([]wire.HookView, error) {
			return c.ListHooks(ctx, ref)
		}, tableOf(func(h wire.HookView) []string {
			return []string{h.ID, h.Kind, h.AgentHandle, h.Queue, hookFilterText(h.Filter), h.URL}
		}, "ID", "KIND", "AGENT", "QUEUE", "FILTER", "URL"))
	})
	legacyAgentFlag(cmd, &agent)
	return cmd
}

func hookShow(cf *clientFlags) *cobra.Command {
	return argCommand(cf, "show ID", "Show one hook and its last deliveries", (*client.Client).GetHook, printHook)
}

func printHook(w io.Writer, h wire.HookView) error {
	fmt.Fprintf(w, "Hook %s: %s for %s, queue %s, filter %s\nURL: %s\n\n", h.ID, h.Kind, clean(h.AgentHandle), clean(h.Queue), clean(hookFilterText(h.Filter)), clean(h.URL))
	return tableOf(func(d domain.HookDelivery) []string {
		return []string{d.ReceivedAt.Format("2006-01-02T15:04:05Z"), d.Outcome, strings.TrimSuffix(d.Event+"."+d.Action, "."), orDash(d.Reason), orDash(d.TodoID)}
	}, "RECEIVED", "OUTCOME", "EVENT", "REASON", "TODO")(w, h.LastDeliveries)
}

func hookRotate(cf *clientFlags) *cobra.Command {
	return argCommand(cf, "rotate ID", "Rotate a hook's secret; prints the new one (once)",
		(*client.Client).RotateHookSecret, func(w io.Writer, res wire.HookSecretResult) error {
			printHookSecret(w, "rotated", res)
			return nil
		})
}

func hookDelete(cf *clientFlags) *cobra.Command {
	cmd := argCommand(cf, "delete ID", "Delete a hook (its todos stay)",
		(*client.Client).DeleteHook, oneLine(func(h wire.HookView) string { return "Hook " + h.ID + " deleted." }))
	cmd.Aliases = []string{"rm"}
	return cmd
}
