package cli

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// usageError marks an error of the command line itself (exit 2).
type usageError struct{ error }

// newGroup returns a noun (agent, todo …) that only holds subcommands. Run
// alone it is a usage error; a word that names none of its subcommands is
// refused by unknownCommand (also before any flag is parsed, see
// checkCommandWords).
func newGroup(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  unknownCommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("%s needs a subcommand; see %s --help", use, cmd.CommandPath())}
		},
		Annotations: map[string]string{groupAnnotation: "yes"},
	}
	cmd.AddCommand(subs...)
	return cmd
}

// unknownCommand refuses positional arguments of a group: the first one is
// a mistyped subcommand.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return unknownCommandError(cmd, args[0])
}

// unknownCommandError is the one message for a mistyped command at any
// level, with the closest names (subcommands and their aliases) when there
// are any:
//
//	unknown command "pussh" for "rollcall todo"
//
//	Did you mean this?
//		push
//
//	Run 'rollcall todo --help' for usage.
func unknownCommandError(cmd *cobra.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q for %q", word, cmd.CommandPath())
	if s := suggestions(cmd, word); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	msg += fmt.Sprintf("\n\nRun '%s --help' for usage.", cmd.CommandPath())
	return usageError{errors.New(msg)}
}

// suggestions lists the listed subcommands of cmd whose name or an alias is
// within two edits of word or starts with it, by that spelling.
func suggestions(cmd *cobra.Command, word string) []string {
	var out []string
	w := strings.ToLower(word)
	for _, sub := range cmd.Commands() {
		if !sub.IsAvailableCommand() {
			continue
		}
		for _, name := range append([]string{sub.Name()}, sub.Aliases...) {
			if editDistance(w, name) <= 2 || strings.HasPrefix(name, w) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}

// checkCommandWords walks the command words of args (the arguments that are
// not flags or flag values) down the tree and refuses the first one that
// names no subcommand, with unknownCommandError. It runs before cobra
// parses any flag, so `rollcall todo pussh x --queue y` is reported as the
// mistyped command it is, not as an unknown --queue of `todo`. The walk
// stops at a command that takes arguments, and at a flag unknown where it
// stands (cobra reports that one).
func checkCommandWords(root *cobra.Command, args []string) error {
	cmd := root
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return nil
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			known, value := flagArg(cmd, a)
			if !known {
				return nil // cobra names the unknown flag
			}
			if value {
				i++
			}
			continue
		}
		if !cmd.HasSubCommands() || cmd.Args != nil && !isGroup(cmd) {
			return nil
		}
		if cmd == root && (a == "help" || a == "completion" || strings.HasPrefix(a, "__complete")) {
			return nil
		}
		next := subcommand(cmd, a)
		if next == nil {
			return unknownCommandError(cmd, a)
		}
		cmd = next
	}
	return nil
}

// isGroup reports whether cmd only holds subcommands (the root, or built
// by newGroup).
func isGroup(cmd *cobra.Command) bool {
	return !cmd.HasParent() || cmd.Annotations[groupAnnotation] != ""
}

const groupAnnotation = "rollcall.group"

func subcommand(cmd *cobra.Command, word string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == word || sub.HasAlias(word) {
			return sub
		}
	}
	return nil
}

// flagArg looks up the flag argument a ("--name", "-n", "--name=v") on cmd
// and its parents: whether it is known, and whether its value is the next
// argument (a known flag, not boolean, without "=").
func flagArg(cmd *cobra.Command, a string) (known, value bool) {
	if a == "-h" || a == "--help" || strings.HasPrefix(a, "--help=") {
		return true, false
	}
	var f *pflag.Flag
	if name, ok := strings.CutPrefix(a, "--"); ok {
		name, _, _ = strings.Cut(name, "=")
		f = lookupFlag(cmd, func(fs *pflag.FlagSet) *pflag.Flag { return fs.Lookup(name) })
	} else {
		r, _ := utf8.DecodeRuneInString(a[1:])
		f = lookupFlag(cmd, func(fs *pflag.FlagSet) *pflag.Flag { return fs.ShorthandLookup(string(r)) })
		if f != nil && utf8.RuneCountInString(a) > 2 {
			return true, false // -nVALUE or -abc
		}
	}
	if f == nil {
		return false, false
	}
	return true, f.NoOptDefVal == "" && !strings.Contains(a, "=")
}

func lookupFlag(cmd *cobra.Command, find func(*pflag.FlagSet) *pflag.Flag) *pflag.Flag {
	for c := cmd; c != nil; c = c.Parent() {
		if f := find(c.PersistentFlags()); f != nil {
			return f
		}
		if c == cmd {
			if f := find(c.LocalNonPersistentFlags()); f != nil {
				return f
			}
		}
	}
	return nil
}
