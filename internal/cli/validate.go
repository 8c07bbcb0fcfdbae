// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/proxy"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check proxy configuration files without starting anything",
		Long: `validate decodes each configuration file strictly (unknown keys are
errors), fills in the defaults, validates every field (controllers and
their parameters, classes, trusted proxies, backends, TLS files) and
builds the policy and the backend pool without listening. Secret files
(admin.token_file, telemetry.otlp.headers_file, api_keys_file, ...) are
read and checked too; no secret's value is ever printed. It prints one
line per valid file, with who may reach its admin API; the first error
of a file names its line and field, e.g.

  proxy.yaml:14: stages[1].params.target: -1s is invalid: must be a positive duration

and the exit status is 2 if any file is invalid.`,
		Example: `  sluice validate proxy.yaml
  sluice validate examples/*.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var bad []string
			for _, file := range args {
				cfg, err := proxy.LoadFile(file)
				if err == nil {
					err = proxy.Check(cfg)
					if err != nil {
						err = fmt.Errorf("%s: %w", file, err)
					}
				}
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					bad = append(bad, file)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %s\n", file, summary(cfg))
			}
			if len(bad) > 0 {
				return usagef("%d of %d configuration files invalid: %s", len(bad), len(args), strings.Join(bad, ", "))
			}
			return nil
		},
	}
}

// summary describes a valid configuration in one line.
func summary(cfg *proxy.Config) string {
	var stages []string
	for _, s := range cfg.Stages {
		stages = append(stages, fmt.Sprintf("%s (%s)", s.Name, s.Controller))
	}
	st := "none (every request in the default stage)"
	if len(stages) > 0 {
		st = strings.Join(stages, ", ")
	}
	mode := ""
	if cfg.Shadow {
		mode = "; shadow mode"
	}
	return fmt.Sprintf("%d listener(s), %d backend server(s), classes %s; stages %s%s; %s",
		len(cfg.Listeners), len(cfg.Backends.Servers), strings.Join(cfg.Classes.Order, " > "), st, mode, adminSummary(&cfg.Admin))
}

// adminSummary says where the admin API listens and what guards it,
// without the token.
func adminSummary(a *proxy.AdminConfig) string {
	switch {
	case !a.Token.IsSet():
		return fmt.Sprintf("admin API on %s without a token", a.Addr)
	case len(a.Public) > 0:
		return fmt.Sprintf("admin API on %s behind a token (open: %s)", a.Addr, strings.Join(a.Public, ", "))
	}
	return fmt.Sprintf("admin API on %s behind a token", a.Addr)
}
