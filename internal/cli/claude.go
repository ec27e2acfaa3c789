package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/internal/claudecode"
)

// newClaudeCommand builds `rollcall claude plugin` (connecting Claude Code
// through a plugin); newAdapterCommand builds `rollcall adapter`, which the
// plugin's hooks run. Both read the root's --server (as Claude Code's
// machine reaches the server) and `claude plugin` its --json.
func newClaudeCommand(cf *clientFlags) *cobra.Command {
	var o claudecode.PluginOptions
	plugin := &cobra.Command{
		Use:   "plugin AGENT",
		Short: "Write a Claude Code plugin (MCP channel + adapter hooks) and a local marketplace for AGENT",
		Long: "Writes DIR/.claude-plugin/marketplace.json and DIR/plugins/rollcall-AGENT/ (plugin.json with the channel,\n" +
			".mcp.json with the HTTP server whose Authorization header is read from $ROLLCALL_AGENT_CREDENTIAL, and\n" +
			"hooks/hooks.json running `rollcall adapter hook <event>`). No file holds the credential. Then:\n\n" +
			"  claude plugin marketplace add DIR\n  claude plugin install rollcall-AGENT@rollcall\n" +
			"  ROLLCALL_AGENT_CREDENTIAL=rca_… claude --channels plugin:rollcall-AGENT@rollcall",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("plugin takes one argument, the agent's handle")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Agent = args[0]
			o.Server = cf.serverURL(cmd)
			if o.OutDir == "" {
				return usageError{fmt.Errorf("--out DIR is required")}
			}
			o.Version = claudecode.AdapterVersion()
			if o.Version == "dev" {
				o.Version = "0.0.0-dev"
			}
			p, err := claudecode.WritePlugin(o)
			if err != nil {
				return usageError{err}
			}
			out := cmd.OutOrStdout()
			if cf.json {
				return json.NewEncoder(out).Encode(p)
			}
			fmt.Fprintf(out, "wrote plugin %s in marketplace %s at %s\n\n", p.Name, p.Marketplace, p.Dir)
			fmt.Fprintf(out, "  claude plugin marketplace add %s\n", p.Dir)
			fmt.Fprintf(out, "  claude plugin install %s@%s\n", p.Name, p.Marketplace)
			fmt.Fprintf(out, "  export %s=rca_…   # the agent's credential, never in a file\n", credEnv(o.CredentialEnv))
			fmt.Fprintf(out, "  claude --channels %s\n\n", p.Channel)
			fmt.Fprintf(out, "The organisation approves the channel in managed settings:\n")
			fmt.Fprintf(out, `  {"channelsEnabled": true, "allowedChannelPlugins": [{"plugin": %q, "marketplace": %q}]}`+"\n", p.Name, p.Marketplace)
			fmt.Fprintf(out, "Tools to allow (settings permissions.allow): %s\n", p.ToolPrefix)
			return nil
		},
	}
	f := plugin.Flags()
	f.StringVar(&o.OutDir, "out", "", "marketplace directory to write (created; other plugins in it are kept)")
	f.StringVar(&o.MCPURL, "mcp-url", "", "the agent's MCP URL (default SERVER/mcp)")
	f.StringVar(&o.Marketplace, "marketplace", claudecode.DefaultMarketplace, "marketplace name")
	f.StringVar(&o.CredentialEnv, "credential-env", claudecode.DefaultCredentialEnv, "environment variable holding the agent's credential")
	f.StringVar(&o.Bin, "bin", "rollcall", "rollcall executable the hooks run (default: rollcall on PATH)")
	return newGroup("claude", "Connect Claude Code: write a Rollcall plugin and marketplace for an agent", plugin)
}

func credEnv(s string) string {
	if s == "" {
		return claudecode.DefaultCredentialEnv
	}
	return s
}

// adapterFlags are the flags `adapter hook` passes on to `adapter run`,
// with the root's --server.
type adapterFlags struct {
	server, agent, credEnv string
}

func (a *adapterFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&a.agent, "agent", "", "the agent's handle (for the log)")
	f.StringVar(&a.credEnv, "credential-env", claudecode.DefaultCredentialEnv, "environment variable holding the agent's credential")
}

func (a *adapterFlags) args() []string {
	return []string{"--server", a.server, "--agent", a.agent, "--credential-env", a.credEnv}
}

func newAdapterCommand(cf *clientFlags) *cobra.Command {
	var hf adapterFlags
	hook := &cobra.Command{
		Use:   "hook EVENT",
		Short: "Feed a Claude Code hook event (JSON on stdin) to this process's adapter, starting it when needed; always exits 0",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("hook takes one argument, the event")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			hf.server = cf.serverURL(cmd)
			if err := claudecode.Hook(claudecode.HookOptions{Event: args[0], Stdin: cmd.InOrStdin(),
				AdapterArgs: hf.args(), CredentialEnv: hf.credEnv}); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "rollcall adapter hook %s: %v\n", args[0], err)
			}
			return nil
		},
	}
	hf.register(hook)

	var rf adapterFlags
	var pid int
	var start uint64
	var dir string
	run := newCommand("run", "Run the adapter for one Claude Code process in the foreground (the hooks start it detached)", noArgs, func(cmd *cobra.Command, _ []string) error {
		rf.server = cf.serverURL(cmd)
		if pid <= 0 {
			return usageError{errors.New("--claude-pid is required")}
		}
		cred := os.Getenv(rf.credEnv)
		if cred == "" {
			return fmt.Errorf("$%s is not set: the adapter has no credential to identify with", rf.credEnv)
		}
		log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).With("agent", rf.agent, "claude_pid", pid)
		p := claudecode.Process{PID: pid, Start: start}
		if start == 0 {
			p = claudecode.Identify(pid)
		}
		if !p.Alive() {
			return fmt.Errorf("claude code process %d is not running", pid)
		}
		// Claude Code's own executable answers --version and auth
		// status; a node running it would answer node's version.
		exe := p.Exe()
		if !strings.HasPrefix(filepath.Base(exe), "claude") {
			exe, _ = exec.LookPath("claude")
		}
		env := os.Environ()
		probe := func(ctx context.Context) (string, claudecode.Evidence) {
			ver := claudecode.ReadVersion(ctx, exe, env, 30*time.Second)
			ev := claudecode.Billing(os.LookupEnv, nil)
			if ev.KeyType == "unknown" { // the environment says nothing: ask Claude Code
				ev = claudecode.Billing(os.LookupEnv, claudecode.ReadAuthStatus(ctx, exe, env, 30*time.Second))
			}
			return ver, ev
		}
		if dir == "" {
			dir = claudecode.StateDir(os.Getenv)
		}
		ctx := cmd.Context()
		a := claudecode.NewAdapter(claudecode.AdapterOptions{Server: rf.server, Credential: cred, Claude: p,
			StateDir: dir, Probe: probe, Log: log})
		err := a.Run(ctx)
		if errors.Is(err, claudecode.ErrRunning) {
			log.Info("another adapter serves this process; exiting")
			return nil
		}
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	})
	rf.register(run)
	run.Flags().IntVar(&pid, "claude-pid", 0, "the Claude Code process to serve")
	run.Flags().Uint64Var(&start, "claude-start", 0, "its start time (/proc/PID/stat field 22), against PID reuse")
	run.Flags().StringVar(&dir, "state-dir", "", "lock, socket and log directory (default $ROLLCALL_ADAPTER_DIR, $XDG_RUNTIME_DIR/rollcall-adapter or TMP/rollcall-adapter-UID)")
	return newGroup("adapter", "Heartbeats for one Claude Code process (started by the plugin's hooks)", hook, run)
}
